"""The questions a coding agent may ask envman (served by cli/mcp.py), as use cases returning JSON-able dicts."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envman.errors import ResolutionError, UsageError


@dataclass(frozen=True)
class StackQuestion:
    """What to resolve for: the resolver's inputs, as `envman resolve` takes them."""

    targets: tuple[str, ...] = ()  # GPU names or sm_XY; empty: this machine's GPUs
    framework: str | None = None
    python: str | None = None
    driver: str | None = None
    cuda: str | None = None
    cpu: bool = False

    def resolve(self):
        from envman.app.resolve import resolve_request

        return resolve_request(self.framework, self.python, self.targets, self.driver, self.cuda, self.cpu)


def resolve_answer(q: StackQuestion) -> dict[str, Any]:
    """The newest consistent stack (the `envman resolve --json` contract). Raises ResolutionError."""
    from envman.app.resolve import resolution_json

    return resolution_json(q.resolve())


def refusal_answer(q: StackQuestion) -> dict[str, Any]:
    """Why no stack satisfies the question, and the nearest alternatives (each with the change to make); or,
    when a stack does, that it is not refused and which stack it is."""
    from envman.app.resolve import refusal_json

    try:
        res = q.resolve()
    except ResolutionError as err:
        return {"refused": True, **refusal_json(err), "hint": err.hint}
    fw = f"{res.framework} {res.version} {res.variant}" if res.framework else "no framework"
    return {"refused": False, "stack": f"{fw}, CUDA {res.cuda or 'none'}, Python {res.python}, driver >= "
                                      f"{res.min_driver or 'any'}", "notes": list(res.notes),
            "warnings": list(res.warnings)}


def doctor_answer(project: str = ".", facts_file: str | None = None, deep: bool = False) -> dict[str, Any]:
    """The doctor's report (`envman doctor --json`) for this machine, or for a recorded facts file."""
    from envman.app.doctor import run_doctor

    return run_doctor(project, facts_file=facts_file, deep=deep).to_json()


def dockerfile_answer(paths: tuple[str, ...], project: str = ".", targets: tuple[str, ...] = ()) -> dict[str, Any]:
    """Each Dockerfile judged before it is built (`envman doctor --dockerfile … --json`): what its image would
    install, against the target GPUs (envman.yaml's, else this machine's)."""
    from envman.app.dockerfile_doctor import run_dockerfile_doctor

    reports = run_dockerfile_doctor(list(paths), project=project, targets=list(targets))
    return {"schema": 1, "dockerfiles": [r.to_json() for r in reports]}


def fit_answer(opts) -> dict[str, Any]:
    """Will this training run fit (`envman fit --json`). ``opts``: an app.fit.FitOptions (the MCP tool offers no
    --trace, which runs a real training step)."""
    from envman.app.fit import result_dict, run_fit

    return result_dict(run_fit(opts))


def install_answer(q: StackQuestion, companions: tuple[str, ...] = ()) -> dict[str, Any]:
    """The pip and uv commands that install the framework build the resolver picks for these GPUs (this
    machine's by default), with the variant's index where it has one — PyTorch's own install lines."""
    from envman import frameworks
    from envman.lock.pins import cuda_constraints, framework_pins
    from envman.matrix.load import load_matrix

    res = q.resolve()
    if res.framework is None:
        raise UsageError("the question resolves to no framework", hint="pass framework: torch or tensorflow")
    unknown = [c for c in companions if c not in frameworks.get(res.framework).companions]
    if unknown:
        raise UsageError(f"companions: {', '.join(unknown)} is not a companion of {res.framework}",
                         hint="companions: " + (", ".join(frameworks.get(res.framework).companions) or "none"))
    reqs = framework_pins(res, tuple(companions))
    # tensorflow[and-cuda] only sets floors for its NVIDIA wheels: the tested versions are constraints, which
    # hold what gets installed without installing anything themselves (pip and uv read them from a file)
    constraints = cuda_constraints(res, load_matrix().toolkit_wheels)
    index = ["--index-url", res.index_url] if res.index_url else []
    words = [shlex.quote(w) for w in reqs + index] + (["-c", "constraints.txt"] if constraints else [])
    notes = [f"{res.framework} {res.version} {res.variant}: " + (f"from {res.index_url}" if res.index_url else
                                                                 "the plain PyPI wheel")]
    if res.min_driver:
        notes.append(f"needs an NVIDIA driver >= {res.min_driver}"
                     + (f" (>= {res.min_driver_minor_compat} with CUDA minor-version compatibility)"
                        if res.min_driver_minor_compat else ""))
    if constraints:
        notes.append("write the `constraints` lines to constraints.txt first: they hold the NVIDIA wheels to the "
                     "variant's tested CUDA/cuDNN")
    notes.append("in a uv project, `envman uv write` puts this index and these versions into pyproject.toml")
    return {"framework": res.framework, "version": str(res.version), "variant": res.variant,
            "index_url": res.index_url, "python": res.python, "requirements": reqs, "constraints": constraints,
            "pip": "python -m pip install " + " ".join(words), "uv": "uv pip install " + " ".join(words),
            "notes": notes + list(res.notes), "warnings": list(res.warnings)}


def uv_project_answer(project: str = ".", profile: str | None = None) -> dict[str, Any]:
    """What `envman uv write` would change in the project's pyproject.toml (nothing is written)."""
    from envman.app.uvproject import plan_uv_write

    plan = plan_uv_write(Path(project).resolve(), profile)
    return {"current": plan.current, "stack": plan.source, "changes": list(plan.changes), "diff": plan.diff(),
            "notes": list(plan.notes)}


def write_uv_project(project: str = ".", profile: str | None = None) -> dict[str, Any]:
    """Write envman's stack into the project's pyproject.toml (`envman uv write --yes`): the one writing answer."""
    from envman.app.uvproject import plan_uv_write, write_uv_plan

    plan = plan_uv_write(Path(project).resolve(), profile)
    if not plan.current:
        write_uv_plan(plan)
    return {"written": not plan.current, "path": str(plan.path), "stack": plan.source, "changes": list(plan.changes),
            "diff": plan.diff(), "next": "uv lock (or uv sync) installs this stack"}
