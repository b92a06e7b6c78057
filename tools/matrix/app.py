"""The workshop's use cases: a refresh plan discovered from the package index (``sync PROJECT``), what is newer
upstream than the data (``outdated``), the data held to its primary sources' snapshots (``check --sources``) and
a sync of those sources (``sync [SOURCE…]``). Each returns a plan; ``--write`` applies one the loader accepts,
into the repository's matrices/ (never an installed envman's data)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from envman.app.matrix import check_matrix as check_loader
from envman.errors import UsageError

REPO_MATRICES = Path(__file__).resolve().parents[2] / "matrices"


def matrix_dir() -> Path:
    """The folder the workshop reads and writes: ENVMAN_MATRIX_DIR when set (a site's own matrix, or the tests'
    copy), else the repository's matrices/ beside tools/ — never the data inside an installed envman."""
    import os

    from envman.resources import matrix_dir as envman_matrix_dir  # the variable, checked as envman checks it

    return envman_matrix_dir() if os.environ.get("ENVMAN_MATRIX_DIR") else REPO_MATRICES


def check_matrix(directory: Path | None = None, sources: bool = True) -> list[str]:
    """The loader's problems (envman matrix check), then every place the data disagrees with a primary
    source's snapshot (matrices/sources/)."""
    from envman.matrix.load import load_matrix

    d = Path(directory) if directory is not None else matrix_dir()
    problems = check_loader(d)
    if problems or not sources:
        return problems
    from tools.matrix.sources.registry import check_sources

    return check_sources(load_matrix(d), d) + problems


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

    from envman.matrix.load import load_matrix
    from tools.matrix.discover import DEFAULT_INDEX, discover_torch, find_outdated, plan_text, require_project
    from tools.matrix.pypi import fetch_project

    require_project(project)
    index_url = index_url or DEFAULT_INDEX
    m = load_matrix(matrix_dir())
    mdir = matrix_dir()
    if project == "tensorflow":
        from tools.matrix.discover_tf import discover_tensorflow, plan_tf_text

        path = mdir / "tensorflow.yaml"
        old = path.read_text(encoding="utf-8")
        props = discover_tensorflow(m, fetch_project("tensorflow", index_url), Version(version) if version else None)
        if not props:
            return DiscoveredRefresh((f"= tensorflow: the matrix has every release on {index_url}",), "", None, (), path)
        new, report = plan_tf_text(m, old, props, index_url)
        return _refresh(mdir, path, old, new, report)
    if project == "jax":
        from datetime import date

        from tools.matrix.discover_jax import FIRST, discover_jax, plan_jax_text, toolkits

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


def outdated(index_url: str | None = None):
    """What is newer upstream than the data: framework releases on the index, then every primary source
    ((source, status, what) with status current / newer / unreachable)."""
    from envman.matrix.load import load_matrix
    from tools.matrix.discover import DEFAULT_INDEX, find_outdated
    from tools.matrix.sources.registry import outdated_sources

    m = load_matrix(matrix_dir())
    projects = [_with_jax_notes(o, index_url or DEFAULT_INDEX) for o in find_outdated(m, index_url or DEFAULT_INDEX)]
    return projects, outdated_sources(m, matrix_dir(), index_url)


def _with_jax_notes(o, index_url: str):
    """A newer jax whose CUDA extra names a plugin the index lacks is said, not only listed."""
    if o.project != "jax" or not o.newer:
        return o
    from dataclasses import replace

    from tools.matrix.discover_jax import fetch_projects, missing_plugins

    projects = fetch_projects(index_url)
    return replace(o, notes=tuple(n for v in o.newer for n in missing_plugins(v, projects)))


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
    from envman.matrix.load import _load_cached, load_matrix
    from tools.matrix.sources.registry import SOURCES, sync

    names = list(names or SOURCES)
    if git_dir is not None and len(names) != 1:
        raise UsageError("--git-dir is a clone of one source's repository: name that source",
                         hint="python -m tools.matrix sync nvidia-gpus --git-dir CLONE (or torch-builds)")
    d = matrix_dir()
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


