"""``envman uv write``: envman's stack written into the uv project's own pyproject.toml (index, sources,
versions, requires-python), after a diff and a confirmation; ``--check`` for CI."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    uv = typer.Typer(help="Keep a uv project's pyproject.toml on envman's stack (so `uv sync` installs the same build).",
                     no_args_is_help=True)
    app.add_typer(uv, name="uv")

    @uv.command("write")
    def write_cmd(
        path: Path = typer.Argument(Path("."), help="The uv project (default: here)"),
        yes: bool = typer.Option(False, "--yes", "-y", help="Write without asking (after showing the diff)"),
        check: bool = typer.Option(False, "--check", help="Write nothing; exit 1 when pyproject.toml differs from envman's stack (CI)"),
        profile: Optional[str] = typer.Option(None, "--profile", help="Take the stack of this profile's lock (envman.P.lock)"),
    ) -> None:
        """Write the locked framework index, sources, versions and requires-python into pyproject.toml."""
        from envman.app.uvproject import plan_uv_write, write_uv_plan

        root = path.resolve()
        plan = plan_uv_write(root, profile)
        for note in plan.notes:
            typer.echo(f"note: {note}", err=True)
        if plan.current:
            typer.echo(f"pyproject.toml already installs envman's stack ({plan.source})")
            return
        typer.echo(f"stack: {plan.source}")
        for change in plan.changes:
            typer.echo(f"  {change}")
        typer.echo(plan.diff(), nl=False)
        if check:
            typer.echo("stale: pyproject.toml does not install envman's stack", err=True)
            typer.echo("hint: run `envman uv write` and commit pyproject.toml (then `uv lock`)", err=True)
            raise typer.Exit(1)
        if not yes and not _confirmed():
            raise typer.Exit(1)
        write_uv_plan(plan)
        typer.echo("wrote pyproject.toml; next: `uv lock` (or `uv sync`) installs this stack")


def _confirmed() -> bool:
    if not sys.stdin.isatty():
        typer.echo("error: pyproject.toml not written: no terminal to confirm on", err=True)
        typer.echo("hint: pass --yes to write it, or --check to only compare", err=True)
        return False
    if typer.confirm("Write these changes to pyproject.toml?", default=False):
        return True
    typer.echo("pyproject.toml left unchanged", err=True)
    return False
