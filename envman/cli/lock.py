"""``envman lock``: resolve and hash-lock the stack, and keep the locks current (``--check``)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    @app.command("lock")
    def lock_cmd(
        path: Path = typer.Argument(Path("."), help="The project (default: here)"),
        check: bool = typer.Option(False, "--check", help="Exit 1 when envman.yaml, a requirements file or the matrices changed since the lock"),
        base_image: Optional[str] = typer.Option(None, "--base-image", help="Override the base image for this lock"),
        force: bool = typer.Option(False, "--force", help="Overwrite files that were edited by hand"),
        upgrade: bool = typer.Option(False, "--upgrade", help="Ask the index again and re-resolve every package to the newest allowed version (default: an unchanged request keeps the lock; a changed one keeps the pins that still fit)"),
        timeout: Optional[float] = typer.Option(None, "--timeout", min=1, help="Give up when uv has not finished after SECONDS (names the index that stalled)"),
        pin_apt: bool = typer.Option(False, "--pin-apt", help="Pin the apt packages' whole closure to the versions apt in the base image installs now (runs the base image)"),
        apt_snapshot: bool = typer.Option(False, "--apt-snapshot", help="Install apt packages from snapshot.debian.org/snapshot.ubuntu.com at the lock's date"),
        engine: Optional[str] = typer.Option(None, "--engine", help="--pin-apt: docker, podman or buildah (default: the first that works)"),
        as_json: bool = typer.Option(False, "--json", help="Machine-readable output on stdout (docs/commands.md); the rest goes to stderr"),
    ) -> None:
        """Resolve and hash-lock the whole stack (uv for the Python set). Pins that still fit are kept."""
        from envman.cli.output import emit_json

        root = path.resolve()
        if check:
            from envman.app.lock import check_lock

            stale = check_lock(root)
            if as_json:
                emit_json({"current": not stale, "stale": stale})
            if stale:
                for s in stale:
                    typer.echo(f"stale: {s}", err=True)
                typer.echo("hint: run `envman lock` and commit the result", err=True)
                raise typer.Exit(1)
            typer.echo("envman.lock is current", err=as_json)
            return
        from envman.app.ci import stale_ci_files
        from envman.app.lock import lock_project
        from envman.cli.output import Progress, format_outcome

        progress = Progress()
        try:
            out = lock_project(root, force=force, base_image=base_image, upgrade=upgrade, timeout=timeout,
                               progress=progress, pin_apt=pin_apt, apt_snapshot=apt_snapshot, engine=engine)
        finally:
            progress.done()
        # generated CI files name images by lock hash: after a re-lock they must be regenerated too
        ci_stale = stale_ci_files(root)
        if as_json:
            from envman.cli.jsonout import outcome_json

            emit_json(outcome_json(out, root, ci_stale))
            return
        typer.echo(format_outcome(out, root))
        for s in ci_stale:
            typer.echo(f"note: {s} (commit them together with the locks)")

