"""``envman fetch``: download every locked wheel, hash-checked, into a wheelhouse for offline builds."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    @app.command("fetch")
    def fetch_cmd(
        path: Path = typer.Argument(Path("."), help="Project directory"),
        wheelhouse: Optional[Path] = typer.Option(
            None, "--wheelhouse", help="Where the wheels go (default: PATH/.envman/wheelhouse)"),
        lock: Optional[Path] = typer.Option(
            None, "--lock", help="Hashed requirements lock (default: PATH/requirements.lock.txt)"),
        python: Optional[str] = typer.Option(
            None, "--python", help="Target Python X.Y (default: stack.python of PATH/envman.lock)"),
        glibc: Optional[str] = typer.Option(
            None, "--glibc", help="Newest manylinux glibc of the image (default: the lock's platform, else 2.28)"),
        as_json: bool = typer.Option(False, "--json", help="Machine-readable summary"),
        profile: Optional[str] = typer.Option(None, "--profile", help="The wheels of this profile's lock (envman.P.lock)"),
    ) -> None:
        """Download every locked wheel, hash-checked, into a wheelhouse for offline builds."""
        from envman.app.fetch import fetch_wheelhouse
        from envman.cli.output import emit_json

        res = fetch_wheelhouse(path, wheelhouse=wheelhouse, lock=lock, python=python, glibc=glibc, profile=profile,
                               on_output=None if as_json else (lambda s: typer.echo(f"  {s}", err=True)))
        if as_json:
            emit_json(res.to_json())
            return
        typer.echo(
            f"wheelhouse {res.wheelhouse}: {len(res.downloaded)} downloaded, {len(res.kept)} already there, "
            f"all {len(res.downloaded) + len(res.kept)} hash-checked against {res.lock_file}"
            + (f" and the builder stage's {' and '.join(res.builder_locks)}" if res.builder_locks else "") + " "
            f"(target CPython {res.python}, {res.platform})"
        )
        if res.extra:
            typer.echo(f"  {len(res.extra)} other file(s) in it are not in the lock for this target (left alone)")
