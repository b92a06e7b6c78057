"""``envman resolve`` as a use case: this machine's GPUs as targets, the request, the resolver, the notes."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from envman.errors import UsageError
from envman.matrix.load import load_matrix
from envman.model import Matrix, Note, Resolution
from envman.resolve.summary import refusal_dict as refusal_json  # noqa: F401 - the CLI's and MCP's names
from envman.resolve.summary import resolution_dict as resolution_json  # noqa: F401 - envman resolve --json


def detected_targets(matrix: Matrix | None = None) -> tuple[list[str], str | None, str]:
    """This machine's GPUs as targets (matrix id, else sm_XY), the driver, and where they came from."""
    from envman.portable.facts.nvidia import scan_gpus
    from envman.resolve.targets import find_gpu

    scan = scan_gpus()
    if not scan.gpus:
        raise UsageError(
            f"no NVIDIA GPU detected on this machine ({scan.error or 'no devices'})",
            hint="pass --target GPU (repeatable, e.g. --target h100) to resolve for GPUs you are not on, or --cpu",
        )
    matrix = matrix or load_matrix()
    targets = []
    for g in scan.gpus:
        known = find_gpu(matrix, g.name)
        targets.append(known.id if known else (f"sm_{g.cc.replace('.', '')}" if g.cc else g.name))
    note = f"targets: detected via {scan.source}: " + ", ".join(f"{g.name} ({g.cc})" for g in scan.gpus)
    return list(dict.fromkeys(targets)), scan.driver, note


def resolve_request(framework: str | None = None, python: str | None = None, targets: Iterable[str] = (),
                    driver: str | None = None, cuda: str | None = None, cpu: bool = False,
                    cuda_devel: bool = False, matrix: Matrix | None = None,
                    workload_from: Path | None = None) -> Resolution:
    """The newest consistent stack; without targets (and not ``cpu``), for this machine. ResolutionError."""
    from envman.resolve.request import build_request
    from envman.resolve.resolver import resolve_stack

    matrix = matrix or load_matrix()
    extra_notes: list[Note] = []
    targets = list(targets or ())
    if not cpu and not targets:
        targets, drv, note = detected_targets(matrix)
        extra_notes.append(Note("targets", note))
        if driver is None and drv:
            driver = drv
            extra_notes.append(Note("driver", f"driver: {drv} detected on this machine"))
    req = build_request(matrix, framework=framework, python=python, targets=targets, driver=driver, cuda=cuda,
                        cpu=cpu, cuda_devel=cuda_devel)
    res = resolve_stack(matrix, req)
    if extra_notes:
        res = replace(res, notes=tuple(extra_notes) + res.notes)
    if workload_from is not None:  # does the project's training run fit these targets? (envman.yaml workload:)
        res = _with_workload(res, Path(workload_from), tuple(targets))
    return res


def _with_workload(res: Resolution, project: Path, targets: tuple[str, ...]) -> Resolution:
    from envman.app.workload import workload_verdicts
    from envman.project.spec import load_spec

    spec = load_spec(project)
    if spec is None or not spec.workload:
        raise UsageError(f"{project}: no workload: in envman.yaml", hint="add workload: {model: …, method: …} "
                         "(the keys of `envman fit`), or leave --workload-from out")
    notes, warnings = workload_verdicts(spec.workload, targets, str(project))
    return replace(res, notes=res.notes + tuple(Note("workload", n) for n in notes), warnings=res.warnings + tuple(warnings))
