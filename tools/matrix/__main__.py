"""``python -m tools.matrix sync|outdated|check|variants``: the matrix workshop's commands, printed and exited as
envman's own (one ``error:`` line and a ``hint:``, the exit codes of docs/commands.md). Run from the repository
root of a checkout: a ``--write`` goes into this repository's matrices/ (or ENVMAN_MATRIX_DIR), never into an
installed envman."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from envman.errors import EXIT_DATA, EXIT_USER

PROJECTS = ("torch", "torchvision", "torchaudio", "tensorflow", "jax")

matrix = typer.Typer(name="python -m tools.matrix", no_args_is_help=True, add_completion=False,
                     pretty_exceptions_enable=False, rich_markup_mode=None,
                     help="Derive envman's matrix from its primary sources, see what is newer, check it (maintainers).")


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

            raise UsageError("sync one PyPI project at a time", hint="e.g. python -m tools.matrix sync torch")
        _refresh(names[0], index_url, version, wheel, write)
        return
    from tools.matrix.app import sync_sources

    _print_sync(sync_sources(names or None, live=live, git_dir=git_dir, index_url=index_url), write)


@matrix.command("outdated")


def outdated_cmd(
    index_url: Optional[str] = typer.Option(None, "--index-url", help="PEP 691 JSON simple index (default: https://pypi.org/simple)"),
    as_json: bool = typer.Option(False, "--json", help="Print as JSON"),
) -> None:
    """Exit 1 when any source has something newer than the data (or cannot be asked): framework releases on
    the index, NVIDIA's GPU list, PyTorch's build matrices, CUDA toolkits, cuDNN/NCCL/nvcc on PyPI."""
    from envman.cli.output import emit_json
    from tools.matrix.app import outdated

    projects, sources = outdated(index_url)
    if as_json:
        emit_json([{"project": o.project, "known": str(o.known) if o.known else None, "newer": [str(v) for v in o.newer],
                    "notes": list(o.notes)} for o in projects] + [{"source": n, "status": st, "what": what} for n, st, what in sources])
    else:
        for o in projects:
            if o.newer:
                typer.echo(f"{o.project}: {', '.join(map(str, o.newer))} on the index; the matrix knows {o.known or 'none'}")
                for note in o.notes:
                    typer.echo(f"  ! {note}")
            else:
                typer.echo(f"{o.project}: up to date ({o.known})")
        for n, st, what in sources:
            typer.echo(f"{n}: {'up to date' if st == 'current' else st} ({what})")
    if any(o.newer for o in projects) or any(st != "current" for _, st, _ in sources):
        raise typer.Exit(EXIT_USER)


@matrix.command("check")


def check(
    sources: bool = typer.Option(False, "--sources", help="Also hold the data to its sources' snapshots (matrices/sources/)"),
) -> None:
    """Validate the matrix (envman matrix check), and with --sources against its primary sources' snapshots:
    print ok, or every problem (exit 7)."""
    from tools.matrix.app import check_matrix

    problems = check_matrix(sources=sources)
    if not problems:
        typer.echo("ok")
        return
    for p in problems:
        typer.echo(p)
    raise typer.Exit(EXIT_DATA)


@matrix.command("variants")


def variants_cmd(
    framework: str = typer.Argument("torch", help="torch | tensorflow"),
    version: Optional[str] = typer.Option(None, "--version", help="The release (default: the newest the matrix knows)"),
    index_url: Optional[str] = typer.Option(None, "--index-url", help="A simple index that serves variant wheels and {name}-{version}-variants.json"),
    file: Optional[Path] = typer.Option(None, "--file", help="A variants.json at hand instead of an index"),
    arch: str = typer.Option("x86_64", "--arch", help="x86_64 | aarch64: whose arch lists to compare"),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable report"),
) -> None:
    """Exit 1 when the index's variant properties (PEP 825, a draft) contradict the matrix (a wheel it would send
    a GPU it fails on)."""
    from envman.cli.output import emit_json
    from tools.matrix.variantcheck import check_variants

    rep = check_variants(framework, version, index_url=index_url, file=file, arch=arch)
    if as_json:
        emit_json(rep.to_json())
    else:
        unhashed = index_url is not None and not rep.hashed
        typer.echo(f"{rep.framework} {rep.version}: {rep.source}" + (" (the index gives no hash)" if unhashed else ""))
        typer.echo("status: PEP 825 is a draft; this check is informational for installers that read variants")
        for f in rep.findings:
            typer.echo(f"{f.severity}: {f.message}")
        if not rep.findings:
            typer.echo("ok: every variant's properties agree with the matrix")
    if rep.has_errors:
        raise typer.Exit(1)


def _print_sync(plan, write: bool) -> None:
    from tools.matrix.app import write_sources

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
    from tools.matrix.app import discover_refresh, write_discovered

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


def main(argv: list[str] | None = None) -> int:
    """envman's error boundary around the workshop's commands: an EnvmanError is one error line and a hint."""
    from envman.cli.main import os_error, report_error
    from envman.cli.output import clean_streams
    from envman.errors import EnvmanError

    with clean_streams():
        try:
            matrix(args=argv, prog_name="python -m tools.matrix", standalone_mode=True)
        except SystemExit as exc:
            return int(exc.code or 0) if not isinstance(exc.code, str) else 1
        except EnvmanError as err:
            return report_error(err)
        except OSError as exc:
            return report_error(os_error(exc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
