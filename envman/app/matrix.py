"""``envman matrix show|refresh`` as use cases: one subject of the matrix as rows, and a refresh plan for
the torch data read from a real wheel."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from envman.errors import UsageError

SUBJECTS = ("torch", "tensorflow", "gpus", "cuda", "cudnn", "base-images")


def show_matrix(subject: str, matrix=None) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of one subject of ``matrix`` (default: the shipped one)."""
    if subject not in SUBJECTS:
        import difflib

        close = difflib.get_close_matches(subject, SUBJECTS, n=1)
        raise UsageError(f"unknown matrix subject {subject!r}", hint=f"did you mean {close[0]}?" if close else "one of: " + ", ".join(SUBJECTS))
    if matrix is None:
        from envman.matrix.load import load_matrix

        matrix = load_matrix()
    return _rows(matrix, subject)


def _flag(prov) -> str:
    return "uncertain" if prov.uncertain else ""


def _rows(m, subject: str) -> tuple[list[str], list[list[str]]]:
    if subject == "cuda":
        floors = {c.major: str(c.minor_compat_floor) for c in m.cuda_majors}
        return (
            ["cuda", "latest", "min_driver", "minor_compat_floor", "archs", "data"],
            [[c.label, c.latest_update, str(c.min_driver), floors.get(c.version.major, "?"),
              f"{min(c.archs).sm}…{max(c.archs).sm}" if c.archs else "", _flag(c.prov)] for c in m.cuda],
        )
    if subject == "gpus":
        return (
            ["id", "name", "cc", "memory_gib", "segment", "aliases"],
            [[g.id, g.name, str(g.cc), f"{g.memory_gib:g}" if g.memory_gib else "", g.segment, ", ".join(g.aliases)]
             for g in sorted(m.gpus, key=lambda g: (g.segment, g.cc, g.id))],
        )
    if subject in ("torch", "tensorflow"):
        rows = []
        for r in m.frameworks[subject]:
            for v in r.variants:
                rows.append([
                    str(r.version), v.name + (" *" if v.name == r.pypi_default else ""), str(v.cuda or "-"),
                    v.cudnn or "-", " ".join(a.sm for a in sorted(v.archs)) or "-",
                    " ".join(r.python), ", ".join(f"{k} {x}" for k, x in r.companions if x),
                    "uncertain" if (v.prov.uncertain or r.prov.uncertain) else "",
                ])
        return (["version", "variant (* = PyPI)", "cuda", "cudnn", "archs", "python", "companions", "data"], rows)
    if subject == "cudnn":
        return (
            ["cudnn", "cuda_majors", "min_cc", "data"],
            [[str(c.version), ",".join(map(str, c.cuda_majors)), ", ".join(f"cu{k}: {cc}" for k, cc in c.min_cc), _flag(c.prov)]
             for c in m.cudnn],
        )
    rows = [["(slim)", m.base_images.slim, "-", "-", _flag(m.base_images.slim_prov)]]
    for i in m.base_images.cuda:
        rows.append([str(i.cuda), i.runtime, i.devel, i.python, _flag(i.prov)])
    return (["cuda", "runtime", "devel", "python", "data"], rows)


@dataclass(frozen=True)
class MatrixRefresh:
    report: str  # what the wheel says against the matrix
    new_text: str | None  # the new torch.yaml; None: nothing to change
    mismatches: tuple  # the wheel's facts the matrix contradicts
    path: Path  # the torch.yaml it would write


def plan_refresh(framework: str, version: str | None = None, wheel: Path | None = None) -> MatrixRefresh:
    """Read a real wheel (``wheel``, else downloaded with pip) and plan the change to the matrix's torch data."""
    from envman.matrix.load import default_matrix_dir, load_matrix
    from envman.matrix.refresh import fetch_torch_wheel, plan_torch_refresh, read_torch_wheel

    if framework != "torch":
        raise UsageError(f"refresh supports torch only, not {framework!r}", hint="TensorFlow's data comes from its tested build configurations page")
    m = load_matrix()
    ver = version or str(m.frameworks["torch"][0].version)
    path = wheel if wheel is not None else fetch_torch_wheel(ver)
    facts = read_torch_wheel(path)
    if facts.version.split("+")[0] != ver.split("+")[0]:
        raise UsageError(f"{path}: the wheel is torch {facts.version}, not {ver}", hint="pass the wheel of the version you asked for")
    yaml_path = default_matrix_dir() / "torch.yaml"
    plan = plan_torch_refresh(m, facts, yaml_path.read_text(encoding="utf-8"))
    return MatrixRefresh(plan.report, plan.new_text, tuple(plan.mismatches), yaml_path)


def write_refresh(plan: MatrixRefresh) -> Path:
    """Apply a plan that has a change (atomically)."""
    from envman.files import write_atomic

    assert plan.new_text is not None  # only a plan with a change is written
    write_atomic(plan.path, plan.new_text)
    return plan.path
