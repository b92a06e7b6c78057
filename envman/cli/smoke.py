"""``envman smoke``: check that an environment (this host, or an image) matches its lock and its GPU stack works."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from envman.errors import UsageError

EXPECT_HELP = ("Expected stack: a smoke JSON or an envman.lock. "
               "Default: ./envman.lock (--host), the one baked into the image (--image)")


def exit_code(result, *, host: bool) -> int:
    """--host relays the script's own code (0, 1 or 6); --image maps its verdict to 0, 5 (EXIT_SMOKE) or 6."""
    return result.exit_code if host else result.cli_exit_code()


def register(app: typer.Typer) -> None:
    @app.command("smoke")
    def smoke_cmd(
        host: bool = typer.Option(False, "--host", help="Run the smoke test with this Python on this machine"),
        image: Optional[str] = typer.Option(
            None, "--image", help="Run it inside this image (with GPUs when the host has them)"),
        expect: Optional[Path] = typer.Option(None, "--expect", help=EXPECT_HELP),
        require_gpu: bool = typer.Option(False, "--require-gpu", help="No visible GPU is a failure instead of exit 6"),
        as_json: bool = typer.Option(False, "--json", help="Print the JSON report"),
        save: Optional[Path] = typer.Option(None, "--save", help="Also write the JSON report to this file"),
        mount_script: bool = typer.Option(
            False, "--mount-script", help="--image: run this envman's smoke program (its kit, bind-mounted) instead of the image's"),
        engine: Optional[str] = typer.Option(None, "--engine", help="--image: docker, podman or buildah (default: the first that works)"),
    ) -> None:
        """Check that an environment matches its lock and that its GPU stack works.

        Exit codes: 0 passed (GPU checks included), 6 passed but no GPU visible; a failure is 1 with --host
        (the script's code) and 5 with --image."""
        from envman.app import smoke as smoke_runner
        from envman.cli.output import emit_json

        if host == bool(image):
            raise UsageError("say where to run the smoke test: --host (this machine) or --image REF",
                             hint="envman smoke --host --expect envman.lock")
        if host:
            result = smoke_runner.smoke_host(expect, require_gpu=require_gpu)
        else:
            assert image is not None  # host == bool(image) was refused above
            result = smoke_runner.smoke_image(image, expect=expect, require_gpu=require_gpu, mount_kit=mount_script,
                                              engine_name=engine)
        if save is not None:
            smoke_runner.save_report(result, save)
        if as_json:
            emit_json(result.to_json())
        else:
            where = "this host" if host else f"{image}{' with GPUs' if result.gpus else ''}"
            typer.echo(f"smoke test on {where}:\n{result.summary()}")
        raise typer.Exit(exit_code(result, host=host))
