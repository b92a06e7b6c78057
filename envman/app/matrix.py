"""``envman matrix show|refresh|outdated|check`` as use cases: one subject of the matrix as rows or typed
data, a refresh plan discovered from the package index, what the index has that the matrix lacks, and the
loader's cross-checks on demand."""

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


@dataclass(frozen=True)
class DiscoveredRefresh:
    report: tuple[str, ...]  # one line per thing the matrix lacks
    diff: str  # unified diff of the matrix file ("" when nothing to add)
    new_text: str | None
    problems: tuple[str, ...]  # what the loader says of the proposed file (a write is refused)
    path: Path

    @property
    def mismatches(self) -> tuple[str, ...]:
        """Report lines where the index's wheels contradict the matrix (``!``)."""
        return tuple(line.strip() for line in self.report if line.lstrip().startswith("!"))


def discover_refresh(project: str, index_url: str | None = None, wheel: Path | None = None,
                     version: str | None = None) -> DiscoveredRefresh:
    """Ask the index what exists, propose what the matrix lacks (torch, tensorflow: entries as a diff;
    torchvision/torchaudio: a report, since a companion is paired with a torch patch by hand)."""
    from packaging.version import Version

    from envman.matrix.discover import DEFAULT_INDEX, discover_torch, find_outdated, plan_text, require_project
    from envman.matrix.index import fetch_project
    from envman.matrix.load import default_matrix_dir, load_matrix

    require_project(project)
    index_url = index_url or DEFAULT_INDEX
    m = load_matrix()
    mdir = default_matrix_dir()
    if project == "tensorflow":
        from envman.matrix.discover_tf import discover_tensorflow, plan_tf_text

        path = mdir / "tensorflow.yaml"
        old = path.read_text(encoding="utf-8")
        props = discover_tensorflow(m, fetch_project("tensorflow", index_url), Version(version) if version else None)
        if not props:
            return DiscoveredRefresh((f"= tensorflow: the matrix has every release on {index_url}",), "", None, (), path)
        new, report = plan_tf_text(m, old, props, index_url)
        return _refresh(mdir, path, old, new, report)
    if project != "torch":
        found = find_outdated(m, index_url, (project,))[0]
        lines = tuple(f"+ {project} {v}: on the index, not a companion of any torch patch in the matrix (pair it by hand)"
                      for v in found.newer)
        return DiscoveredRefresh(lines or (f"= {project}: the matrix names its newest release",), "", None, (), mdir / "torch.yaml")
    path = mdir / "torch.yaml"
    old = path.read_text(encoding="utf-8")
    proposals = discover_torch(m, fetch_project("torch", index_url), wheel, Version(version) if version else None)
    if not proposals:
        return DiscoveredRefresh((f"= torch: the matrix has every release and variant on {index_url}",), "", None, (), path)
    new, report = plan_text(m, old, proposals, index_url)
    if new == old:  # only compared (--version V of a release the matrix has)
        return DiscoveredRefresh(tuple(report), "", None, (), path)
    return _refresh(mdir, path, old, new, report)


def _refresh(mdir: Path, path: Path, old: str, new: str, report: list[str]) -> DiscoveredRefresh:
    import difflib

    diff = "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        f"a/matrices/{path.name}", f"b/matrices/{path.name}"))
    return DiscoveredRefresh(tuple(report), diff, new, tuple(validate_text(mdir, path.name, new)), path)


def validate_text(matrix_dir: Path, name: str, text: str) -> list[str]:
    """The loader's problems with ``name`` replaced by ``text`` (a scratch copy: nothing real changes)."""
    import shutil
    import tempfile

    from envman.errors import MatrixError
    from envman.matrix.load import load_matrix

    with tempfile.TemporaryDirectory(prefix="envman-matrix-") as tmp:
        for f in matrix_dir.iterdir():
            if f.is_file():
                shutil.copy2(f, Path(tmp) / f.name)
        (Path(tmp) / name).write_text(text, encoding="utf-8")
        try:
            load_matrix(tmp)
        except MatrixError as exc:
            return list(getattr(exc, "problems", None) or [str(exc)])
    return []


def write_discovered(plan: DiscoveredRefresh) -> Path:
    """Write a validated plan atomically; refuse one the loader rejects (nothing changes)."""
    from envman.errors import MatrixError
    from envman.files import write_atomic

    if plan.new_text is None:
        raise UsageError("nothing to write")
    if plan.problems:
        raise MatrixError(list(plan.problems))
    write_atomic(plan.path, plan.new_text)
    return plan.path


def check_matrix(directory: Path | None = None) -> list[str]:
    """Every problem the loader (and its cross-checks) finds, read fresh from the files; [] when valid."""
    from envman.errors import MatrixError
    from envman.matrix.load import _load_cached, load_matrix

    _load_cached.cache_clear()
    try:
        load_matrix(directory)
    except MatrixError as exc:
        return list(getattr(exc, "problems", None) or [str(exc)])
    return []


def outdated(index_url: str | None = None):
    from envman.matrix.discover import DEFAULT_INDEX, find_outdated
    from envman.matrix.load import load_matrix

    return find_outdated(load_matrix(), index_url or DEFAULT_INDEX)


def show_matrix_data(subject: str, matrix=None) -> list[dict]:
    """One typed object per entry of ``subject``: the contract of ``envman matrix show --json``
    (docs/matrix.md lists the keys)."""
    show_matrix(subject, matrix if matrix is not None else _loaded())  # validates the subject name
    m = matrix if matrix is not None else _loaded()

    def prov(p) -> dict:
        return {"source": p.source, "uncertain": p.uncertain, "note": p.note}

    def cc(x) -> str | None:
        return str(x) if x is not None else None

    if subject in ("torch", "tensorflow"):
        out = []
        for r in m.frameworks[subject]:
            for v in r.variants:
                out.append({
                    "framework": subject, "version": str(r.version), "variant": v.name,
                    "pypi_default": v.name == r.pypi_default,
                    "cuda": str(v.cuda) if v.cuda is not None else None, "cudnn": v.cudnn, "nccl": v.nccl,
                    "archs": [a.sm for a in sorted(v.archs)], "ptx": [a.sm for a in sorted(v.ptx)],
                    "python": list(r.python), "companions": {k: x for k, x in r.companions},
                    "numpy_abi": r.numpy_abi, "index_url": v.index_url, "extras": list(r.extras),
                    "uncertain": v.prov.uncertain or r.prov.uncertain,
                    "source": v.prov.source or r.prov.source, "note": v.prov.note or r.prov.note,
                    "release": prov(r.prov),
                })
        return out
    if subject == "gpus":
        return [{
            "id": g.id, "name": g.name, "cc": str(g.cc), "sm": g.cc.sm, "memory_gib": g.memory_gib,
            "segment": g.segment, "aliases": list(g.aliases), "family": g.family,
            "min_driver": str(g.min_driver) if g.min_driver is not None else None,
            "host_arch": g.host_arch, **prov(g.prov),
        } for g in sorted(m.gpus, key=lambda g: (g.segment, g.cc, g.id))]
    if subject == "cuda":
        floors = {c.major: str(c.minor_compat_floor) for c in m.cuda_majors}
        return [{
            "version": str(c.version), "latest_update": c.latest_update, "min_driver": str(c.min_driver),
            "minor_compat_floor": floors.get(c.version.major), "archs": [a.sm for a in sorted(c.archs)], **prov(c.prov),
        } for c in m.cuda]
    if subject == "cudnn":
        return [{
            "version": str(c.version), "cuda_majors": list(c.cuda_majors),
            "min_cc": {str(k): cc(v) for k, v in c.min_cc}, **prov(c.prov),
        } for c in m.cudnn]
    out = [{"kind": "slim", "image": m.base_images.slim, "cuda": None, "runtime": None, "devel": None,
            "python": None, "ubuntu": None, "cudnn": None, **prov(m.base_images.slim_prov)}]
    for i in m.base_images.cuda:
        out.append({"kind": "cuda", "image": None, "cuda": str(i.cuda), "update": i.update, "runtime": i.runtime,
                    "devel": i.devel, "python": i.python, "ubuntu": i.ubuntu, "cudnn": i.cudnn, **prov(i.prov)})
    return out


def _loaded():
    from envman.matrix.load import load_matrix

    return load_matrix()
