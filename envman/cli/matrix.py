"""``envman matrix show|check``: read the compatibility data and check it against the loader. Deriving it from
its primary sources (sync, outdated, check --sources) is the repository's workshop: ``python -m tools.matrix``."""

from __future__ import annotations

import typer

from envman.errors import EXIT_DATA


def register(app: typer.Typer) -> None:
    matrix = typer.Typer(help="Show the compatibility matrix, check it.",
                         no_args_is_help=True)
    app.add_typer(matrix, name="matrix")

    @matrix.command("show")
    def show(
        subject: str = typer.Argument(..., help="torch | tensorflow | jax | gpus | cuda | cudnn | base-images"),
        as_json: bool = typer.Option(False, "--json", help="Print as JSON"),
    ) -> None:
        """Print one subject of the matrix as a table."""
        from envman.app.matrix import show_matrix, show_matrix_data
        from envman.cli.output import emit_json, table

        if as_json:  # data, not a table: typed fields per entry (docs/matrix.md)
            emit_json(show_matrix_data(subject))
            return
        header, rows = show_matrix(subject)
        typer.echo(table(rows, header))

    @matrix.command("check")
    def check() -> None:
        """Validate the matrix with the loader and its cross-checks: print ok, or every problem (exit 7)."""
        from envman.app.matrix import check_matrix

        problems = check_matrix()
        if not problems:
            typer.echo("ok")
            return
        for p in problems:
            typer.echo(p)
        raise typer.Exit(EXIT_DATA)
