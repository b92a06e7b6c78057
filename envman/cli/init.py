"""``envman init``: set a training repository up (envman.yaml, the locks, Dockerfile, compose, devcontainer)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    @app.command("init")
    def init_cmd(
        path: Path = typer.Argument(Path("."), help="The training repository (default: here)"),
        target: Optional[list[str]] = typer.Option(None, "--target", "-t", help="Target GPU (repeatable). Default: this machine's GPUs."),
        driver: Optional[str] = typer.Option(None, "--driver", "-d", help="Driver floor of the fleet, e.g. >=535"),
        cpu: bool = typer.Option(False, "--cpu", help="A CPU-only image"),
        python: Optional[str] = typer.Option(None, "--python", "-p", help="Python version, e.g. 3.11"),
        framework: Optional[str] = typer.Option(None, "--framework", "-f", help="Override the framework found in the repo, e.g. torch>=2.4"),
        base_image: Optional[str] = typer.Option(None, "--base-image", help="Start from this image instead (mirrors, air-gapped sites); it must have python3 with venv"),
        no_lock: bool = typer.Option(False, "--no-lock", help="Skip the network step (uv); run `envman lock` later"),
        force: bool = typer.Option(False, "--force", help="Overwrite files that were edited by hand"),
        timeout: Optional[float] = typer.Option(None, "--timeout", min=1, help="Give up when uv has not finished after SECONDS (names the index that stalled)"),
    ) -> None:
        """Write envman.yaml, the locks, Dockerfile, compose.yaml and devcontainer.json for a repository."""
        from envman.app.init import InitOptions, init_project
        from envman.cli.output import format_outcome

        root = path.resolve()
        from envman.cli.output import Progress

        opts = InitOptions(tuple(target or ()), driver, cpu, python, framework, base_image, no_lock, force, timeout)
        progress = Progress()
        try:
            out = init_project(root, opts, progress=progress)
        finally:
            progress.done()
        typer.echo(format_outcome(out, root))
