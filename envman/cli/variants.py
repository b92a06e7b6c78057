"""``envman variants check``: an index's wheel-variant metadata (PEP 825, draft) against the matrix."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    variants = typer.Typer(help="Wheel variants (PEP 825, a draft): check an index's variant metadata against the matrix.",
                           no_args_is_help=True)
    app.add_typer(variants, name="variants")

    @variants.command("check")
    def check_cmd(
        framework: str = typer.Argument("torch", help="torch | tensorflow"),
        version: Optional[str] = typer.Option(None, "--version", help="The release (default: the newest the matrix knows)"),
        index_url: Optional[str] = typer.Option(None, "--index-url", help="A simple index that serves variant wheels and {name}-{version}-variants.json"),
        file: Optional[Path] = typer.Option(None, "--file", help="A variants.json at hand instead of an index"),
        arch: str = typer.Option("x86_64", "--arch", help="x86_64 | aarch64: whose arch lists to compare"),
        as_json: bool = typer.Option(False, "--json", help="Machine-readable report"),
    ) -> None:
        """Exit 1 when the index's variant properties contradict the matrix (a wheel it would send a GPU it fails on)."""
        from envman.app.variants import check_variants
        from envman.cli.output import emit_json

        rep = check_variants(framework, version, index_url=index_url, file=file, arch=arch)
        if as_json:
            emit_json(rep.to_json())
        else:
            unhashed = index_url is not None and not rep.hashed
            typer.echo(f"{rep.framework} {rep.version}: {rep.source}" + (" (the index gives no hash)" if unhashed else ""))
            typer.echo("status: PEP 825 is a draft; this check is informational for installers that read variants")
            for f in rep.findings:
                typer.echo(f"{f.severity}: {f.message}")
            if not rep.findings:
                typer.echo("ok: every variant's properties agree with the matrix")
        if rep.has_errors:
            raise typer.Exit(1)
