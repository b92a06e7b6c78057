"""``envman doctor --dockerfile PATH``: a Dockerfile someone wrote, read statically into the facts its image would
have (portable/doctor/dockerfile_facts.py) and judged by the doctor's checks for the target GPUs, before it is built."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from envman.app.doctor import DoctorReport, project_spec
from envman.errors import UsageError
from envman.files import ownership


@dataclass(frozen=True)
class DockerfileReport:
    """One Dockerfile's verdicts: the facts its image would have and the findings on them."""

    path: str
    targets: str  # which GPUs it was judged for, and where they came from
    report: DoctorReport

    def to_json(self) -> dict:
        return {"path": self.path, "targets": self.targets, **self.report.to_json()}


def run_dockerfile_doctor(paths: list[str], *, project: str = ".", targets: list[str] | None = None) -> list[DockerfileReport]:
    """Each Dockerfile read statically into the facts its image would have, judged by the doctor's checks for the
    target GPUs. Raises UsageError for a file that cannot be read."""
    from envman.inputs import MAX_SPEC, read_input
    from envman.matrix.knowledge import load_knowledge
    from envman.portable.dockerfile import parse_dockerfile
    from envman.portable.doctor.checks import run_checks
    from envman.portable.doctor.dockerfile_facts import dockerfile_facts

    files = dockerfile_paths(paths)
    gpus, where, machine = dockerfile_targets(project, list(targets or ()))
    k = load_knowledge()
    out = []
    for f in files:
        text = read_input(f, f"Dockerfile {f}", MAX_SPEC, hint="pass the path of a Dockerfile")
        context = [f.parent, Path(project)]

        def read(name: str, context: list[Path] = context) -> str | None:
            for d in context:  # a -r file is COPY'd from the build context: look it up by its name there
                p = d / Path(name).name
                if p.is_file():
                    try:
                        return read_input(p, f"requirements file {p}", MAX_SPEC)
                    except UsageError:
                        return None
            return None

        facts = dockerfile_facts(parse_dockerfile(text), k, gpus, path=str(f), read=read, machine=machine)
        findings = [dataclasses.replace(x, verdict=f"{f}: {x.verdict}") if not x.check.startswith("dockerfile-")
                    else x for x in run_checks(facts, k)]
        out.append(DockerfileReport(str(f), where, DoctorReport(facts, tuple(findings))))
    return out


def dockerfile_paths(paths: list[str]) -> list[Path]:
    """The Dockerfiles named: a file as it is; a directory (a project) its own Dockerfiles, not those envman wrote."""
    from envman.portable.facts.project import read_dockerfiles

    out: list[Path] = []
    for p in paths:
        q = Path(p)
        if q.is_dir():
            found = [q / d["path"] for d in read_dockerfiles(str(q))]
            out += [f for f in found if not ownership(f).ours]
            if not found:
                raise UsageError(f"--dockerfile {p}: no Dockerfile in this directory",
                                 hint="name the file: envman doctor --dockerfile path/to/Dockerfile")
        else:
            out.append(q)
    return out


def dockerfile_targets(project: str, targets: list[str]) -> tuple[list[dict], str, dict]:
    """(gpu facts, where they came from, machine facts): --target, else envman.yaml's targets, else this machine's
    GPUs (with its driver)."""
    names, source = list(targets), "--target"
    spec = None if names else project_spec(project)
    if spec is not None and spec.targets:
        names, source = list(spec.targets), "envman.yaml targets"
    if names:
        from envman.matrix.load import load_matrix
        from envman.resolve.targets import parse_target
        from envman.resources import matrix_dir

        m = load_matrix(matrix_dir())
        gpus = []
        for i, n in enumerate(names):
            t = parse_target(m, n)
            gpus.append({"index": i, "name": t.gpu.name if t.gpu else t.label, "cc": f"{t.cc.major}.{t.cc.minor}"})
        return gpus, f"{', '.join(names)} ({source})", {}
    from envman.portable.facts.nvidia import probe_nvidia

    machine = probe_nvidia()
    gpus = [g for g in machine.get("gpus") or [] if isinstance(g, dict)]
    label = ", ".join(f"{g.get('name')}" for g in gpus) or "no GPU"
    return gpus, f"{label} (this machine)", machine
