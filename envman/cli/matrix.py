"""``envman matrix show|refresh``: read the compatibility data, and check it against real wheels."""

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

        header, rows = show_matrix(subject)
        if as_json:
            emit_json([dict(zip(header, r)) for r in rows])
            return
        typer.echo(table(rows, header))

    @matrix.command("refresh")
    def refresh(
        framework: str = typer.Argument(..., help="torch"),
        version: Optional[str] = typer.Option(None, "--version", help="Release to read (default: newest in the matrix)"),
        wheel: Optional[Path] = typer.Option(None, "--wheel", help="Read this local wheel instead of downloading it with pip"),
        write: bool = typer.Option(False, "--write", help="Write the change into matrices/torch.yaml (otherwise only print it)"),
    ) -> None:
        """Read a real wheel's METADATA and torch/version.py; add or check the PyPI-default entry."""
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
