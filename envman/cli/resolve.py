"""``envman resolve``: the resolver on the command line (a stable, scriptable contract)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from envman.errors import EXIT_UNRESOLVABLE, ResolutionError


def register(app: typer.Typer) -> None:
    @app.command("resolve")
    def resolve_cmd(
        framework: Optional[str] = typer.Option(None, "--framework", "-f", help="torch, torch>=2.4, torch==2.5.*, tensorflow==2.15.* …"),
        python: Optional[str] = typer.Option(None, "--python", "-p", help="Python version or specifier: 3.11, >=3.10"),
        target: Optional[list[str]] = typer.Option(None, "--target", "-t", help="Target GPU (repeatable): h100, rtx-4090, sm_89, 8.9. Default: this machine's GPUs."),
        driver: Optional[str] = typer.Option(None, "--driver", "-d", help="NVIDIA driver version or floor: 535.104.05, >=535"),
        cuda: Optional[str] = typer.Option(None, "--cuda", help="CUDA requirement, e.g. >=12.4 for a custom extension"),
        cpu: bool = typer.Option(False, "--cpu", help="Resolve a CPU-only stack"),
        as_json: bool = typer.Option(False, "--json", help="Machine-readable output (stable contract)"),
        workload_from: Optional[Path] = typer.Option(
            None, "--workload-from", help="A project whose envman.yaml workload: is judged on the targets (envman fit)"),
    ) -> None:
        """Pick the newest consistent stack for the target GPUs and explain every choice."""
        from envman.app.resolve import resolution_json, resolve_request
        from envman.cli.jsonout import error_json
        from envman.cli.output import emit_json, format_resolution, print_refusal

        try:
            res = resolve_request(framework, python, target or (), driver, cuda, cpu, workload_from=workload_from)
        except ResolutionError as err:
            if as_json:
                emit_json(error_json(err))
            print_refusal(err)
            raise typer.Exit(EXIT_UNRESOLVABLE) from None
        if as_json:
            emit_json(resolution_json(res))
            return
        typer.echo(format_resolution(res))
