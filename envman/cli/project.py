"""``envman init`` and ``envman lock``: set a repository up, and keep its locks current."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def _show(out, root: Path) -> None:
    from envman.cli.resolve import format_resolution

    typer.echo(format_resolution(out.resolution))
    typer.echo("")
    for n in out.notes:
        typer.echo(f"  - {n}")
    if out.written:
        names = [str(p.relative_to(root)) for p in out.written]
        private = [n for n in names if n.startswith(".envman/")]
        shown = [n for n in names if not n.startswith(".envman/")]
        if private:
            shown.append(f".envman/ ({len(private)} files: expected stack, smoke script, doctor kit)")
        typer.echo("wrote: " + ", ".join(shown))
    else:
        typer.echo("up to date: nothing changed")
    typer.echo(f"lock hash: {out.lock['lock_hash'][:12]} (image tag {out.lock['name']}:{out.lock['lock_hash'][:12]})")


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
    ) -> None:
        """Write envman.yaml, the locks, Dockerfile, compose.yaml and devcontainer.json for a repository."""
        from envman.app.generate import InitOptions, init_project
        from envman.cli.resolve import detected_targets

        root = path.resolve()
        opts = InitOptions(tuple(target or ()), driver, cpu, python, framework, base_image, no_lock, force)
        out = init_project(root, opts, detect_gpus=detected_targets)
        _show(out, root)

    @app.command("lock")
    def lock_cmd(
        path: Path = typer.Argument(Path("."), help="The project (default: here)"),
        check: bool = typer.Option(False, "--check", help="Exit 1 when envman.yaml, a requirements file or the matrices changed since the lock"),
        base_image: Optional[str] = typer.Option(None, "--base-image", help="Override the base image for this lock"),
        force: bool = typer.Option(False, "--force", help="Overwrite files that were edited by hand"),
        upgrade: bool = typer.Option(False, "--upgrade", help="Re-resolve every package to the newest allowed version (default: keep pins that still fit)"),
    ) -> None:
        """Resolve and hash-lock the whole stack (uv for the Python set). Pins that still fit are kept."""
        root = path.resolve()
        if check:
            from envman.app.generate import check_lock

            stale = check_lock(root)
            if stale:
                for s in stale:
                    typer.echo(f"stale: {s}", err=True)
                typer.echo("hint: run `envman lock` and commit the result", err=True)
                raise typer.Exit(1)
            typer.echo("envman.lock is current")
            return
        from envman.app.generate import lock_project

        _show(lock_project(root, force=force, base_image=base_image, upgrade=upgrade), root)
        _remind_ci(root)


def _remind_ci(root: Path) -> None:
    """Generated CI files name images by lock hash: after a re-lock they must be regenerated too."""
    if not any((root / f).exists() for f in (".github/workflows/envman.yml", ".gitlab-ci.yml", "docker-bake.json")):
        return
    from envman.ci import check_ci_files, load_ci_project

    stale, _ = check_ci_files(load_ci_project(root))
    for s in stale:
        typer.echo(f"note: {s} (commit them together with the locks)")
