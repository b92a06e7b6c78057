"""``envman matrix show|refresh|outdated|check`` as use cases: one subject of the matrix as rows or typed
data, a refresh plan discovered from the package index, what the index has that the matrix lacks, and the
loader's cross-checks on demand."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from envman.errors import UsageError

SUBJECTS = ("torch", "tensorflow", "jax", "gpus", "cuda", "cudnn", "base-images")


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
    if subject in ("torch", "tensorflow", "jax"):
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
    if project == "jax":
        from datetime import date

        from envman.matrix.discover_jax import FIRST, discover_jax, plan_jax_text, toolkits

        path = mdir / "jax.yaml"
        old = path.read_text(encoding="utf-8")
        rels = discover_jax(index_url, FIRST, Version(version) if version else None)
        if version:  # one release: compared with the matrix, nothing written
            return DiscoveredRefresh(tuple(f"= jax {r.version}: {', '.join(b.name + ' ' + b.cuda(toolkits(m)) for b in r.builds)}"
                                           for r in rels), "", None, (), path)
        new, report = plan_jax_text(m, old, rels, index_url, date.today().isoformat())
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
    return validate_files(matrix_dir, {name: text})


def validate_files(matrix_dir: Path, files: dict[str, str]) -> list[str]:
    """The loader's problems with the matrix files of ``files`` (matrix-relative names) replaced, on a
    scratch copy of the folder (snapshots included): nothing real changes."""
    import shutil
    import tempfile

    from envman.errors import MatrixError
    from envman.matrix.load import load_matrix

    with tempfile.TemporaryDirectory(prefix="envman-matrix-") as tmp:
        shutil.copytree(matrix_dir, tmp, dirs_exist_ok=True)
        for name, text in files.items():
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


def check_matrix(directory: Path | None = None, sources: bool = True) -> list[str]:
    """Every problem the loader (and its cross-checks) finds, read fresh from the files, then every place
    the data disagrees with a primary source's snapshot (matrices/sources/), and every alias of models.yaml that
    names another model than its entry (envman/fit/aliases.py); [] when all agree."""
    from envman.errors import MatrixError
    from envman.matrix.load import _load_cached, default_matrix_dir, load_matrix

    _load_cached.cache_clear()
    d = Path(directory) if directory is not None else default_matrix_dir()
    try:
        m = load_matrix(d)
    except MatrixError as exc:
        return list(getattr(exc, "problems", None) or [str(exc)])
    if not sources:
        return []
    from envman.matrix.sources.registry import check_sources

    problems = check_sources(m, d)
    models = d / "models.yaml"
    if models.is_file():  # envman fit's catalog: an alias must name a model with its entry's config
        from envman.fit.aliases import alias_problems
        from envman.matrix.load import _yaml_load

        problems += alias_problems(_yaml_load(models.read_text(encoding="utf-8")))
    return problems


def outdated(index_url: str | None = None):
    """What is newer upstream than the data: framework releases on the index, then every primary source
    ((source, status, what) with status current / newer / unreachable)."""
    from envman.matrix.discover import DEFAULT_INDEX, find_outdated
    from envman.matrix.load import default_matrix_dir, load_matrix
    from envman.matrix.sources.registry import outdated_sources

    m = load_matrix()
    return find_outdated(m, index_url or DEFAULT_INDEX), outdated_sources(m, default_matrix_dir(), index_url)


@dataclass(frozen=True)
class SourceSync:
    report: tuple[str, ...]
    diff: str
    files: dict  # matrix-relative name -> new text (only the files that change)
    problems: tuple[str, ...]  # the loader's objections to the result (a write is refused)
    mismatches: tuple[str, ...]  # what matrix check still finds against the sources afterwards
    matrix_dir: Path


def sync_sources(names: list[str] | None = None, live: bool = False, git_dir: Path | None = None,
                 index_url: str | None = None) -> SourceSync:
    """Read each source (its snapshot, or the source itself with ``live``/``git_dir``), derive what it owns,
    and plan the edits on a scratch copy of the matrix folder (each source sees the edits of the ones before):
    a report, one diff, the loader's verdict and what ``matrix check`` still finds."""
    import difflib
    import shutil
    import tempfile

    from envman.errors import MatrixError
    from envman.matrix.load import _load_cached, default_matrix_dir, load_matrix
    from envman.matrix.sources.registry import SOURCES, sync

    names = list(names or SOURCES)
    if git_dir is not None and len(names) != 1:
        raise UsageError("--git-dir is a clone of one source's repository: name that source",
                         hint="envman matrix sync nvidia-gpus --git-dir CLONE (or torch-builds)")
    d = default_matrix_dir()
    files: dict[str, str] = {}
    report: list[str] = []
    problems: list[str] = []
    left: list[str] = []
    with tempfile.TemporaryDirectory(prefix="envman-sync-") as tmp:
        scratch = Path(tmp) / "matrices"
        shutil.copytree(d, scratch)
        for name in names:
            _load_cached.cache_clear()
            try:
                m = load_matrix(scratch)
            except MatrixError as exc:
                problems = list(exc.problems)
                break
            res = sync(name, m, scratch, live=live, git_dir=git_dir, index_url=index_url)
            report += res.report
            for n, t in res.files.items():
                (scratch / n).write_text(t, encoding="utf-8")
                files[n] = t
        if not problems:
            problems = check_matrix(scratch, sources=False)
            left = [] if problems else check_matrix(scratch)
    diff = "".join("".join(difflib.unified_diff(
        (d / n).read_text(encoding="utf-8").splitlines(keepends=True) if (d / n).is_file() else [],
        t.splitlines(keepends=True), f"a/matrices/{n}", f"b/matrices/{n}")) for n, t in sorted(files.items()))
    return SourceSync(tuple(report), diff, files, tuple(problems), tuple(left), d)


def write_sources(plan: SourceSync) -> list[Path]:
    """Write every file of a plan the loader accepts, all or none."""
    from envman.errors import MatrixError
    from envman.files import commit_files

    if not plan.files:
        raise UsageError("nothing to write")
    if plan.problems:
        raise MatrixError(list(plan.problems))
    paths = [(plan.matrix_dir / n, t) for n, t in sorted(plan.files.items())]
    commit_files(paths)
    return [p for p, _ in paths]


def show_matrix_data(subject: str, matrix=None) -> list[dict]:
    """One typed object per entry of ``subject``: the contract of ``envman matrix show --json``
    (docs/matrix.md lists the keys)."""
    show_matrix(subject, matrix if matrix is not None else _loaded())  # validates the subject name
    m = matrix if matrix is not None else _loaded()

    def prov(p) -> dict:
        return {"source": p.source, "uncertain": p.uncertain, "note": p.note}

    def cc(x) -> str | None:
        return str(x) if x is not None else None

    if subject in ("torch", "tensorflow", "jax"):
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
            "host_arch": g.host_arch, "listed": str(g.listed) if g.listed is not None else None,
            "pci": {d: str(v) for d, v in g.pci}, **prov(g.prov),
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
