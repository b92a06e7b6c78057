"""``envman resolve``: the resolver on the command line (a stable, scriptable contract)."""

from __future__ import annotations

import sys
from typing import Optional

import typer

from envman.errors import EXIT_UNRESOLVABLE, ResolutionError, UsageError


def detected_targets() -> tuple[list[str], str | None, str]:
    """This machine's GPUs as targets (the matrix id when envman knows the GPU, else its sm_XY), the
    driver, and a note on where they came from. NVML first, nvidia-smi as the fallback."""
    from envman.matrix.load import load_matrix
    from envman.portable.facts.nvidia import scan_gpus
    from envman.resolve.targets import find_gpu

    scan = scan_gpus()
    if not scan.gpus:
        raise UsageError(
            f"no NVIDIA GPU detected on this machine ({scan.error or 'no devices'})",
            hint="pass --target GPU (repeatable, e.g. --target h100) to resolve for GPUs you are not on, or --cpu",
        )
    matrix = load_matrix()
    targets = []
    for g in scan.gpus:
        known = find_gpu(matrix, g.name)
        targets.append(known.id if known else (f"sm_{g.cc.replace('.', '')}" if g.cc else g.name))
    note = f"targets: detected via {scan.source}: " + ", ".join(f"{g.name} ({g.cc})" for g in scan.gpus)
    return list(dict.fromkeys(targets)), scan.driver, note


def resolve_from_args(framework, python, target, driver, cuda, cpu, cuda_devel=False):
    from dataclasses import replace

    from envman.resolve.request import build_request
    from envman.matrix.load import load_matrix
    from envman.resolve.resolver import resolve_stack

    matrix = load_matrix()
    extra_notes: list[str] = []
    targets = list(target or [])
    if not cpu and not targets:
        targets, drv, note = detected_targets()
        extra_notes.append(note)
        if driver is None and drv:
            driver = drv
            extra_notes.append(f"driver: {drv} detected on this machine")
    req = build_request(matrix, framework=framework, python=python, targets=targets, driver=driver, cuda=cuda,
                        cpu=cpu, cuda_devel=cuda_devel)
    res = resolve_stack(matrix, req)
    return replace(res, notes=tuple(extra_notes) + res.notes) if extra_notes else res


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
    ) -> None:
        """Pick the newest consistent stack for the target GPUs and explain every choice."""
        from envman.resolve.summary import refusal_dict, resolution_dict
        from envman.cli.output import emit_json

        try:
            res = resolve_from_args(framework, python, target, driver, cuda, cpu)
        except ResolutionError as err:
            if as_json:
                emit_json(refusal_dict(err))
                raise typer.Exit(EXIT_UNRESOLVABLE)
            print_refusal(err)
            raise typer.Exit(EXIT_UNRESOLVABLE)
        if as_json:
            emit_json(resolution_dict(res))
            return
        typer.echo(format_resolution(res))


def print_refusal(err: ResolutionError) -> None:
    lines = [f"error: {err.message}"]
    if err.conflicts:
        lines.append("blocked by:")
        lines += [f"  - {c}" for c in err.conflicts]
    if err.alternatives:
        lines.append("nearest alternatives:")
        lines += [f"  - {a['change']}" for a in err.alternatives]
    if err.hint:
        lines.append(f"hint: {err.hint}")
    print("\n".join(lines), file=sys.stderr)


def format_resolution(res) -> str:
    from envman.cli.output import table

    rows = []
    if res.framework:
        how = "plain PyPI wheel" if res.index_url is None else res.index_url
        rows.append(["framework", f"{res.framework} {res.version}", f"{res.variant} ({how})"])
        comps = ", ".join(f"{k} {v}" for k, v in res.companions if v)
        if comps:
            rows.append(["companions", comps, ""])
    rows.append(["python", res.python, ""])
    if res.cuda:
        rows.append(["cuda", res.cuda, f"cuDNN {res.cudnn or '-'}, NCCL {res.nccl or '-'}"])
        drv = f"≥ {res.min_driver}"
        if res.min_driver_minor_compat:
            drv += f" (minor-compat ≥ {res.min_driver_minor_compat})"
        mode = {"full": "full", "minor-compat": "minor-version compat only"}.get(res.driver_mode or "", "")
        rows.append(["driver", drv, f"{res.driver}{' (assumed)' if res.driver_assumed else ''}: {mode}"])
    if res.arch_list:
        rows.append(["arch list", " ".join(res.arch_list), ("PTX " + " ".join(res.ptx)) if res.ptx else ""])
    if res.targets:
        rows.append(["targets", ", ".join(f"{t.label} ({t.cc.sm})" for t in res.targets), ""])
    rows.append(["base image", res.base_image, res.base_kind])
    out = [table(rows)]
    if res.notes:
        out.append("\nwhy:")
        out += [f"  - {n}" for n in res.notes]
    if res.warnings:
        out.append("\nwarnings:")
        out += [f"  ! {w}" for w in res.warnings]
    return "\n".join(out)
