"""``envman matrix show|sync|outdated|check``: read the compatibility data, derive it from its primary
sources, see what is newer upstream, and check the data against the loader and the sources."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from envman.errors import EXIT_DATA, EXIT_USER

PROJECTS = ("torch", "torchvision", "torchaudio", "tensorflow", "jax")


def register(app: typer.Typer) -> None:
    matrix = typer.Typer(help="Show the compatibility matrix, derive it from its primary sources, check it.",
                         no_args_is_help=True)
    app.add_typer(matrix, name="matrix")

    @matrix.command("show")
    def show(
        subject: str = typer.Argument(..., help="torch | tensorflow | jax | gpus | cuda | cudnn | base-images"),
        as_json: bool = typer.Option(False, "--json", help="Print as JSON"),
    ) -> None:
        """Print one subject of the matrix as a table."""
        from envman.app.matrix import show_matrix
        from envman.cli.output import emit_json, table

        if as_json:  # data, not a table: typed fields per entry (docs/matrix.md)
            from envman.app.matrix import show_matrix_data

            emit_json(show_matrix_data(subject))
            return
        header, rows = show_matrix(subject)
        typer.echo(table(rows, header))

    @matrix.command("sync")
    def sync_cmd(
        sources: Optional[list[str]] = typer.Argument(
            None, help="nvidia-gpus | torch-builds | cuda-drivers | nvidia-pypi (default: all four), or one PyPI "
                       "project: torch | torchvision | torchaudio | tensorflow | jax"),
        live: bool = typer.Option(False, "--live", help="Read the sources themselves (GitHub, NVIDIA, PyPI) and renew "
                                                       "their snapshots in matrices/sources/"),
        git_dir: Optional[Path] = typer.Option(None, "--git-dir", help="A clone of the source repository to read "
                                                                       "instead of GitHub (nvidia-gpus, torch-builds)"),
        index_url: Optional[str] = typer.Option(None, "--index-url", help="PEP 691 JSON simple index (default: https://pypi.org/simple)"),
        version: Optional[str] = typer.Option(None, "--version", help="PyPI projects: only this release"),
        wheel: Optional[Path] = typer.Option(None, "--wheel", help="torch: a wheel at hand, whose SASS/PTX archs are measured"),
        write: bool = typer.Option(False, "--write", help="Apply the derived changes (after validation) instead of printing the diff"),
    ) -> None:
        """Derive the matrix from its primary sources and print what changes as a diff (--write applies it)."""
        names = list(sources or [])
        if any(n in PROJECTS for n in names):
            if len(names) != 1:
                from envman.errors import UsageError

                raise UsageError("sync one PyPI project at a time", hint="e.g. envman matrix sync torch")
            _refresh(names[0], index_url, version, wheel, write)
            return
        from envman.app.matrix import sync_sources

        _print_sync(sync_sources(names or None, live=live, git_dir=git_dir, index_url=index_url), write)

    @matrix.command("refresh", hidden=True)
    def refresh(
        project: str = typer.Argument("torch", help="torch | torchvision | torchaudio | tensorflow | jax"),
        index_url: Optional[str] = typer.Option(None, "--index-url"),
        version: Optional[str] = typer.Option(None, "--version"),
        wheel: Optional[Path] = typer.Option(None, "--wheel"),
        write: bool = typer.Option(False, "--write"),
    ) -> None:
        """The former name of `matrix sync PROJECT` (kept so scripts keep working)."""
        _refresh(project, index_url, version, wheel, write)

    @matrix.command("outdated")
    def outdated_cmd(
        index_url: Optional[str] = typer.Option(None, "--index-url", help="PEP 691 JSON simple index (default: https://pypi.org/simple)"),
        as_json: bool = typer.Option(False, "--json", help="Print as JSON"),
    ) -> None:
        """Exit 1 when any source has something newer than the data (or cannot be asked): framework releases on
        the index, NVIDIA's GPU list, PyTorch's build matrices, CUDA toolkits, cuDNN/NCCL/nvcc on PyPI."""
        from envman.app.matrix import outdated
        from envman.cli.output import emit_json

        projects, sources = outdated(index_url)
        if as_json:
            emit_json([{"project": o.project, "known": str(o.known) if o.known else None, "newer": [str(v) for v in o.newer]}
                       for o in projects] + [{"source": n, "status": st, "what": what} for n, st, what in sources])
        else:
            for o in projects:
                if o.newer:
                    typer.echo(f"{o.project}: {', '.join(map(str, o.newer))} on the index; the matrix knows {o.known or 'none'}")
                else:
                    typer.echo(f"{o.project}: up to date ({o.known})")
            for n, st, what in sources:
                typer.echo(f"{n}: {'up to date' if st == 'current' else st} ({what})")
        if any(o.newer for o in projects) or any(st != "current" for _, st, _ in sources):
            raise typer.Exit(EXIT_USER)

    @matrix.command("check")
    def check(
        no_sources: bool = typer.Option(False, "--no-sources", help="Only the loader's validation, not the sources"),
    ) -> None:
        """Validate the matrix and hold it to its sources' snapshots: print ok, or every problem (exit 7)."""
        from envman.app.matrix import check_matrix

        problems = check_matrix(sources=not no_sources)
        if not problems:
            typer.echo("ok")
            return
        for p in problems:
            typer.echo(p)
        raise typer.Exit(EXIT_DATA)


def _print_sync(plan, write: bool) -> None:
    from envman.app.matrix import write_sources

    for line in plan.report:
        typer.echo(line)
    if plan.diff:
        typer.echo(plan.diff, nl=False)
    for prob in plan.problems:
        typer.echo(f"! the loader rejects the result: {prob}")
    for left in plan.mismatches:
        typer.echo(f"! still disagrees: {left}")
    if plan.problems:
        raise typer.Exit(EXIT_DATA)
    if write and plan.files:
        for p in write_sources(plan):
            typer.echo(f"wrote {p}")
    elif plan.files:
        typer.echo("(dry run: pass --write to apply)")
    if plan.mismatches:
        raise typer.Exit(EXIT_USER)


def _refresh(project: str, index_url: str | None, version: str | None, wheel: Path | None, write: bool) -> None:
    from envman.app.matrix import discover_refresh, write_discovered

    plan = discover_refresh(project, index_url, wheel, version)
    for line in plan.report:
        typer.echo(line)
    if plan.diff:
        typer.echo(plan.diff, nl=False)
    for prob in plan.problems:
        typer.echo(f"! the loader rejects the proposal: {prob}")
    if plan.new_text is None:
        if plan.mismatches:
            raise typer.Exit(EXIT_USER)
        return
    if not write:
        typer.echo("(dry run: pass --write to apply)")
        if plan.problems:
            raise typer.Exit(EXIT_DATA)
        return
    typer.echo(f"wrote {write_discovered(plan)}")
