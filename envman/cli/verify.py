"""``envman verify IMAGE``: is this image exactly the one the lock builds (the image ID two builds from
scratch agreed on, recorded by ``envman build --verify-repro``)?"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    @app.command("verify")
    def verify_cmd(
        image: str = typer.Argument(..., help="Image reference on the engine (name:tag or an image ID)"),
        path: Path = typer.Option(Path("."), "--project", help="Project directory (its envman.lock)"),
        profile: Optional[str] = typer.Option(None, "--profile", help="The profile's lock (envman.PROFILE.lock)"),
        engine: Optional[str] = typer.Option(None, "--engine", help="docker, podman or buildah (default: the first that works)"),
    ) -> None:
        """Say whether IMAGE is exactly the image envman.lock builds.

        Exit codes: 0 it is, 1 it is not (or the lock records no reproducible image), 4 no engine."""
        from envman.app.repro import verify_project_image

        verdict = verify_project_image(path, image, profile=profile, engine_name=engine)
        typer.echo(verdict.summary())
