"""The primary sources, each with what it checks, what its sync writes and how ``outdated`` asks it for news.

    nvidia-gpus    NVIDIA/open-gpu-kernel-modules README.md at every tag   → gpus.yaml driver: blocks
    torch-builds   pytorch/test-infra build matrix at every release/X.Y    → torch.yaml aarch64 platforms
    cuda-drivers   the driver each CUDA runfile bundles (md5sum.txt)       → cuda.yaml latest_update
    nvidia-pypi    cuda-toolkit, nvcc, cuDNN, NCCL releases on PyPI        → cuda.yaml latest_update (respins)

Offline every reader parses its snapshot (matrices/sources/<name>.tsv); ``live`` reads the source itself and
writes a new snapshot. A git clone can stand in for GitHub (``git_dir``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import Version

from envman.errors import ToolError, UsageError
from tools.matrix.sources import cuda_drivers, gpu_floors, nvidia_gpus, pypi_nvidia, torch_builds, torch_variants
from tools.matrix.sources.gitrepo import GitHubRepo, LocalRepo
from tools.matrix.sources.snapshot import Snapshot, load_snapshot, snapshot_dir

SOURCES = ("nvidia-gpus", "torch-builds", "cuda-drivers", "nvidia-pypi")
REPOS = {"nvidia-gpus": nvidia_gpus.SLUG, "torch-builds": torch_builds.SLUG}


def _yaml(text: str) -> Any:
    from envman.matrix.load import _yaml_load

    return _yaml_load(text)


def check_sources(matrix, matrix_dir: Path) -> list[str]:
    """Every place the data disagrees with a source's snapshot (``python -m tools.matrix check --sources``); a matrix folder without a
    sources/ folder (a test fixture, a trimmed copy) has nothing to be held to."""
    probs: list[str] = []
    if not snapshot_dir(matrix_dir).is_dir():
        return probs
    for name in SOURCES:
        try:
            snap = load_snapshot(matrix_dir, name)
        except Exception as exc:  # noqa: BLE001 - a missing snapshot is one problem line, like any other
            probs.append(f"sources/{name}.tsv: (file): {getattr(exc, 'message', exc)}")
            continue
        probs += _check_one(name, matrix, matrix_dir, snap)
    return probs


def _check_one(name: str, matrix, matrix_dir: Path, snap: Snapshot) -> list[str]:
    if name == "nvidia-gpus":
        doc = _yaml((matrix_dir / "gpus.yaml").read_text(encoding="utf-8"))
        return gpu_floors.check(doc, nvidia_gpus.listing(snap)) + gpu_floors.check_generations(doc, matrix)
    if name == "torch-builds":
        return torch_variants.check(matrix, torch_builds.builds(snap))
    if name == "cuda-drivers":
        return cuda_drivers.check(matrix, snap)
    return pypi_nvidia.check(matrix, snap)


@dataclass
class SyncResult:
    source: str
    report: list[str] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)  # matrix-relative path -> new text (changed only)


def _repo(name: str, git_dir: Path | None):
    return LocalRepo(REPOS[name], str(git_dir)) if git_dir is not None else GitHubRepo(REPOS[name])


def read_live(name: str, matrix, git_dir: Path | None = None, index_url: str | None = None) -> Snapshot:
    """The source itself, condensed to its snapshot rows (GitHub, NVIDIA's download site or PyPI)."""
    if name == "nvidia-gpus":
        return nvidia_gpus.read_source(_repo(name, git_dir))
    if name == "torch-builds":
        return torch_builds.read_source(_repo(name, git_dir))
    projects = _pypi(index_url)
    if name == "cuda-drivers":
        known = {Version(c.latest_update) for c in matrix.cuda}  # CUDA 11 has no cuda-toolkit on PyPI
        updates = sorted(known | {v for v in projects["cuda-toolkit"].versions(final_only=True) if v >= min(known)})
        return cuda_drivers.read_source([f"{v.major}.{v.minor}.{v.micro}" for v in updates])
    return pypi_nvidia.read_source(projects, index_url=index_url or "https://pypi.org/simple")


def _pypi(index_url: str | None) -> dict:
    from tools.matrix.pypi import DEFAULT_INDEX, fetch_project

    return {n: fetch_project(n, index_url or DEFAULT_INDEX) for n in pypi_nvidia.PROJECTS}


def sync(name: str, matrix, matrix_dir: Path, live: bool = False, git_dir: Path | None = None,
         index_url: str | None = None) -> SyncResult:
    if name not in SOURCES:
        raise UsageError(f"unknown source {name!r}", hint="one of: " + ", ".join(SOURCES))
    if git_dir is not None and name not in REPOS:
        raise UsageError(f"--git-dir reads a clone of {' or '.join(REPOS.values())}, not {name}")
    res = SyncResult(name)
    old_snap = (snapshot_dir(matrix_dir) / f"{name}.tsv")
    if live or git_dir is not None:
        snap = read_live(name, matrix, git_dir, index_url)
        text = snap.render()
        if not old_snap.is_file() or _body(old_snap.read_text(encoding="utf-8")) != _body(text):
            res.files[f"sources/{name}.tsv"] = text
    else:
        snap = load_snapshot(matrix_dir, name)
    res.report.append(f"# {name}: {snap.meta.get('url')} at {snap.meta.get('revision')}, read {snap.meta.get('read')}")
    edits = _plan(name, matrix, matrix_dir, snap, live, index_url)
    res.report += edits[1]
    res.files.update(edits[0])
    return res


def _body(text: str) -> str:
    """A snapshot without its date line: re-reading an unchanged source is no change."""
    return "\n".join(ln for ln in text.splitlines() if not ln.startswith("# read:"))


def _plan(name: str, matrix, matrix_dir: Path, snap: Snapshot, live: bool, index_url: str | None):
    files: dict[str, str] = {}
    if name == "nvidia-gpus":
        old = (matrix_dir / "gpus.yaml").read_text(encoding="utf-8")
        new, report = gpu_floors.plan(_yaml(old), nvidia_gpus.listing(snap), old)
        fname = "gpus.yaml"
    elif name == "torch-builds":
        old = (matrix_dir / "torch.yaml").read_text(encoding="utf-8")
        new, report = torch_variants.plan(matrix, torch_builds.builds(snap), old)
        fname = "torch.yaml"
    else:
        old = (matrix_dir / "cuda.yaml").read_text(encoding="utf-8")
        if name == "cuda-drivers":
            new, report = plan_latest_updates(matrix, old, [(f.update, f.url) for f in cuda_drivers.runfiles(snap)])
        else:
            new, report = _plan_pypi(matrix, old, live, index_url)
        fname = "cuda.yaml"
    if new != old:
        files[fname] = new
    return files, report


def plan_latest_updates(matrix, text: str, releases: list[tuple[Version, str]]) -> tuple[str, list[str]]:
    """cuda.yaml with each minor's latest_update moved to the newest release given for it (runfiles, or
    PyPI respins), and a report line each."""
    from tools.matrix.yamledit import set_item_key

    report = []
    for cr in sorted(matrix.cuda, key=lambda c: c.version):
        mine = [(v, how) for v, how in releases if (v.major, v.minor) == (cr.version.major, cr.version.minor)]
        if not mine:
            continue
        v, how = max(mine)
        if v > Version(cr.latest_update):
            xyz = f"{v.major}.{v.minor}.{v.micro}"  # PyPI spells some "13.1.2.0"
            text = set_item_key(text, "version", cr.label, "latest_update", [f'latest_update: "{xyz}"'])
            report.append(f"+ CUDA {cr.label}: latest_update {cr.latest_update} → {xyz} ({how}); min_driver {cr.min_driver} kept")
    return text, report


def _plan_pypi(matrix, text: str, live: bool, index_url: str | None) -> tuple[str, list[str]]:
    if not live:
        return text, ["= nvidia-pypi: PyPI is read with --live; offline the snapshot only records what was seen"]
    from tools.matrix.pypi import read_remote_wheel

    projects = _pypi(index_url)
    tk = projects["cuda-toolkit"]
    report = []
    known = {(c.version.major, c.version.minor): c for c in matrix.cuda}
    cache: dict[Version, dict[str, str]] = {}

    def read_pins(v: Version) -> dict[str, str]:
        if v not in cache:
            f = next(f for f in tk.files if f.version == v and not f.yanked)
            cache[v] = pypi_nvidia.pins(read_remote_wheel(f).metadata)
        return cache[v]

    vs = [v for v in tk.versions(final_only=True) if (v.major, v.minor) in known
          and v >= Version(known[(v.major, v.minor)].latest_update)]
    respins = []
    for r in pypi_nvidia.classify(vs, read_pins):
        if r.kind == "respin":
            respins.append((r.version, f"cuda-toolkit {r.version} on PyPI: a respin, only {', '.join(r.moved)} moved"))
        elif r.kind == "update":
            report.append(f"! CUDA {r.version}: an update ({', '.join(r.moved)} moved): read its driver in Table 3 "
                          "of the release notes before raising latest_update")
    for v in tk.versions(final_only=True):
        if (v.major, v.minor) not in known and v > max(c.version for c in matrix.cuda):
            report.append(f"! CUDA {v.major}.{v.minor}: new minor on PyPI (cuda-toolkit {v}): add it with its Table 3 "
                          "driver and the ptxas arch list of nvidia-cuda-nvcc")
            break
    text, bumped = plan_latest_updates(matrix, text, respins)
    return text, report + bumped


def outdated_sources(matrix, matrix_dir: Path, index_url: str | None = None) -> list[tuple[str, str, str]]:
    """(source, status, what) per source: status "current", "newer" or "unreachable" (none without sources/)."""
    out: list[tuple[str, str, str]] = []
    if not snapshot_dir(matrix_dir).is_dir():
        return out
    for name in SOURCES:
        try:
            snap = load_snapshot(matrix_dir, name)
            news = _news(name, matrix, snap, index_url)
        except ToolError as exc:
            out.append((name, "unreachable", exc.message))
            continue
        out.append((name, "newer" if news else "current", news or f"snapshot {snap.meta.get('revision')}, read {snap.meta.get('read')}"))
    return out


def _news(name: str, matrix, snap: Snapshot, index_url: str | None) -> str:
    if name == "nvidia-gpus":
        known = {r[0] for r in snap.rows("tags")}
        new = sorted((t for t in GitHubRepo(nvidia_gpus.SLUG).refs("tags") if t not in known
                      and nvidia_gpus._release(t) is not None), key=Version)
        return f"new release tags {', '.join(new)}" if new else ""
    if name == "torch-builds":
        commits = {r[0]: r[1] for r in snap.rows("branches")}
        heads = {b.split("/", 1)[1]: c for b, c in GitHubRepo(torch_builds.SLUG).refs("heads").items()
                 if torch_builds._line(b) is not None}
        moved = sorted((b for b, c in heads.items() if commits.get(b) != c), key=Version)
        return f"release branches new or moved: {', '.join(moved)}" if moved else ""
    projects = _pypi(index_url)
    if name == "cuda-drivers":
        newest = max((f.update for f in cuda_drivers.runfiles(snap)), default=Version("0"))
        new = [str(v) for v in projects["cuda-toolkit"].versions(final_only=True) if v > newest]
        return f"CUDA toolkit releases without a snapshot row: {', '.join(new)}" if new else ""
    got = pypi_nvidia.seen(snap)
    new = [f"{n} {max(pypi_nvidia.finals(p))}" for n, p in sorted(projects.items())
           if pypi_nvidia.finals(p) and (n not in got or max(pypi_nvidia.finals(p)) > got[n])]
    return ", ".join(new)
