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
        cuda: Optional[str] = typer.Option(None, "--cuda", help="Override the CUDA found in the repo, e.g. 12.8 (or >=12.4)"),
        base_image: Optional[str] = typer.Option(None, "--base-image", help="Start from this image instead (mirrors, air-gapped sites); it must have python3 with venv"),
        no_lock: bool = typer.Option(False, "--no-lock", help="Skip the network step (uv); run `envman lock` later"),
        force: bool = typer.Option(False, "--force", help="Overwrite files that were edited by hand"),
        timeout: Optional[float] = typer.Option(None, "--timeout", min=1, help="Give up when uv has not finished after SECONDS (names the index that stalled)"),
        as_json: bool = typer.Option(False, "--json", help="Machine-readable output on stdout (docs/commands.md); the rest goes to stderr"),
    ) -> None:
        """Write envman.yaml, the locks, Dockerfile, compose.yaml and devcontainer.json for a repository.
        --framework, --cuda and --python decide over what the repository's files say (the overridden lines are said)."""
        from envman.app.init import InitOptions, init_project
        from envman.cli.jsonout import error_json, outcome_json
        from envman.cli.output import Progress, emit_json, format_outcome, format_resolution, print_refusal
        from envman.errors import EXIT_UNRESOLVABLE, ResolutionError, ToolError

        root = path.resolve()
        opts = InitOptions(tuple(target or ()), driver, cpu, python, framework, base_image, no_lock, force, timeout,
                           cuda=cuda)
        progress = Progress()
        try:
            out = init_project(root, opts, progress=progress)
        except ResolutionError as err:  # what blocks and the nearest alternatives, as `envman resolve` prints them
            progress.done()
            if as_json:
                emit_json(error_json(err))
            print_refusal(err)
            raise typer.Exit(EXIT_UNRESOLVABLE) from None
        except ToolError as err:  # the lock failed (an index, uv): the stack it was locking is still worth seeing
            progress.done()
            stack = getattr(err, "stack", None)
            if stack is not None:
                typer.echo(format_resolution(stack, base_image=getattr(err, "base_image", None)), err=as_json)
                typer.echo("nothing was written: the Python lock of this stack failed (below); "
                           "`envman init --no-lock` writes the files without it", err=True)
            raise
        finally:
            progress.done()
        if as_json:
            emit_json(outcome_json(out, root))
            return
        typer.echo(format_outcome(out, root))
