"""``envman matrix show|refresh|outdated|check``: read the compatibility data, check it, and refresh it
from what the package index says exists."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    matrix = typer.Typer(help="Show the compatibility matrix, or refresh it from real wheel metadata.",
                         no_args_is_help=True)
    app.add_typer(matrix, name="matrix")

    @matrix.command("show")
    def show(
        subject: str = typer.Argument(..., help="torch | tensorflow | gpus | cuda | cudnn | base-images"),
        as_json: bool = typer.Option(False, "--json", help="Print as JSON"),
    ) -> None:
        """Print one subject of the matrix as a table."""
        from envman.app.matrix import show_matrix
        from envman.cli.output import emit_json, table

        if as_json:  # data, not a table: typed fields per entry (docs/matrix.md)
            from envman.app.matrix import show_matrix_data

            emit_json(show_matrix_data(subject))
            return
        header, rows = show_matrix(subject)
        typer.echo(table(rows, header))

    @matrix.command("refresh")
    def refresh(
        project: str = typer.Argument("torch", help="torch | torchvision | torchaudio | tensorflow"),
        index_url: Optional[str] = typer.Option(None, "--index-url", help="PEP 691 JSON simple index (default: https://pypi.org/simple)"),
        version: Optional[str] = typer.Option(None, "--version", help="Only this release"),
        wheel: Optional[Path] = typer.Option(None, "--wheel", help="A torch wheel at hand: its pins and its measured SASS/PTX archs are used for its release"),
        write: bool = typer.Option(False, "--write", help="Apply the proposed entries (after validation) instead of only printing the diff"),
    ) -> None:
        """Ask the index which releases exist; propose what the matrix lacks as a diff (no pip, no wheel download)."""
        from envman.app.matrix import discover_refresh, write_discovered

        plan = discover_refresh(project, index_url, wheel, version)
        for line in plan.report:
            typer.echo(line)
        if plan.diff:
            typer.echo(plan.diff, nl=False)
        for prob in plan.problems:
            typer.echo(f"! the loader rejects the proposal: {prob}")
        if plan.new_text is None:
            if plan.mismatches:
                raise typer.Exit(1)
            return
        if not write:
            typer.echo("(dry run: pass --write to apply)")
            if plan.problems:
                raise typer.Exit(7)
            return
        typer.echo(f"wrote {write_discovered(plan)}")

    @matrix.command("outdated")
    def outdated_cmd(
        index_url: Optional[str] = typer.Option(None, "--index-url", help="PEP 691 JSON simple index (default: https://pypi.org/simple)"),
        as_json: bool = typer.Option(False, "--json", help="Print as JSON"),
    ) -> None:
        """Exit 1 when the index has a final torch/torchvision/torchaudio/TensorFlow release newer than the matrix knows."""
        from envman.app.matrix import outdated
        from envman.cli.output import emit_json

        found = outdated(index_url)
        if as_json:
            emit_json([{"project": o.project, "known": str(o.known) if o.known else None,
                        "newer": [str(v) for v in o.newer]} for o in found])
        else:
            for o in found:
                if o.newer:
                    typer.echo(f"{o.project}: {', '.join(map(str, o.newer))} on the index; the matrix knows {o.known or 'none'}")
                else:
                    typer.echo(f"{o.project}: up to date ({o.known})")
        if any(o.newer for o in found):
            raise typer.Exit(1)

    @matrix.command("check")
    def check() -> None:
        """Run the loader's validation and cross-checks now: print ok, or every problem (exit 7)."""
        from envman.app.matrix import check_matrix

        problems = check_matrix()
        if not problems:
            typer.echo("ok")
            return
        for p in problems:
            typer.echo(p)
        raise typer.Exit(7)

    @matrix.command("refresh-wheel", hidden=True)
    def refresh_wheel(
        framework: str = typer.Argument("torch", help="torch"),
        version: Optional[str] = typer.Option(None, "--version", help="Release to read (default: newest in the matrix)"),
        wheel: Optional[Path] = typer.Option(None, "--wheel", help="Read this local wheel instead of downloading it with pip"),
        write: bool = typer.Option(False, "--write", help="Write the change into matrices/torch.yaml (otherwise only print it)"),
    ) -> None:
        """The older check of one wheel's METADATA against the matrix (pip download without --wheel)."""
        from envman.app.matrix import plan_refresh, write_refresh

        plan = plan_refresh(framework, version, wheel)
        typer.echo(plan.report)
        if plan.new_text is None:
            if plan.mismatches:
                raise typer.Exit(1)
            return
        if not write:
            typer.echo("(dry run: pass --write to apply)")
            return
        typer.echo(f"wrote {write_refresh(plan)}")
