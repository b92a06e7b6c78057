"""What `envman init` learns from a repository without being told, reading (never executing) the files
real training repositories use, in this order: requirements*.txt (and requirements/*.txt), pyproject.toml
([project], [dependency-groups], [tool.poetry]), setup.py (ast), setup.cfg, environment.yml.

Every file's fate is said: read, skipped (and why), or included by another; every line's fate too."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from packaging.specifiers import SpecifierSet

from envman import frameworks
from envman.errors import UsageError
from envman.frameworks.base import on_cpu
from envman.project.infer import Inference, infer_framework, load_dependents
from envman.project.requirements import OWN_FILES, read_pyproject
from envman.project.sources import Fate, Found
from envman.project.sources.conda import read_conda
from envman.project.sources.poetry import read_poetry
from envman.project.sources.pyproject import OPTIONAL, read_pyproject_project
from envman.project.sources.requirements_txt import read_requirements
from envman.project.sources.setup_py import read_setup_cfg, read_setup_py
from envman.project.sources.uv import lock_constraints, read_uv_lock, read_uv_sources

# variants a training image does not want by default; each can be named in envman.yaml (requirements:)
_SKIP = re.compile(r"(^|[-_.])(dev|devel|test|tests|testing|docs?|lint|ci|tpu|cpu|mac|macos|windows|win|rocm|"
                   r"xpu|npu|mps|onnx|optional|extra|style|typing|bench)([-_.]|$)")
DEP_FILES = ("requirements.txt", "pyproject.toml", "setup.py", "setup.cfg", "environment.yml", "environment.yaml")
_PYTHONS = [f"3.{m}" for m in range(6, 16)]
# the core file of a requirements/ folder (requirements/base.txt); its other files are feature sets
_CORE = re.compile(r"(base|main|core|common|runtime|install|prod|production|default|requirements|train|training)")
FEATURE_SET = "an optional feature set beside the core ({core}); name it under requirements: in envman.yaml to use it"


@dataclass
class Discovery:
    read: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    requirement_files: list[str] = field(default_factory=list)  # referenced by envman.yaml (read again at lock)
    copied_from: list[str] = field(default_factory=list)  # files whose packages were copied into envman.yaml
    packages: list[str] = field(default_factory=list)  # from pyproject / setup.py / conda (copied into envman.yaml)
    python: str | None = None
    inference: Inference = field(default_factory=Inference)
    install_project: bool = False
    index_urls: list[str] = field(default_factory=list)
    find_links: list[str] = field(default_factory=list)
    fates: list[Fate] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def report(self) -> list[str]:
        out = []
        if self.read:
            out.append("read: " + ", ".join(self.read))
        for f, why in self.skipped:
            out.append(f"skipped {f}: {why}")
        def key_of(f: Fate) -> str:  # "… optional-dependencies.extra[3]" and "… group.dev.dependencies.pytest" → the table
            return f.origin.rsplit("[", 1)[0] if f.origin.endswith("]") else f.origin.rsplit(".", 1)[0]

        groups: dict[str, list[Fate]] = {}
        for fate in self.fates:
            if fate.why == OPTIONAL:
                groups.setdefault(key_of(fate), []).append(fate)
        for fate in self.fates:
            if fate.why == OPTIONAL:
                key = key_of(fate)
                if key in groups:
                    g = groups.pop(key)
                    names = ", ".join(f.text.split(";")[0].strip() for f in g)
                    out.append(f"{key}: not installed, {len(g)} line{'s' if len(g) > 1 else ''} ({names}): {OPTIONAL}")
            elif fate.fate != "kept" or fate.why:
                out.append(fate.describe())
        out.extend(self.warnings)
        return out


def requirement_candidates(root: Path) -> list[str]:
    files = [p.name for p in root.glob("requirements*.txt") if p.is_file()]
    files += [f"requirements/{p.name}" for p in (root / "requirements").glob("*.txt") if p.is_file()]
    return sorted(files)


def dynamic_files(doc: dict | None) -> list[str]:
    """The files ``[tool.setuptools.dynamic] dependencies = {file = [...]}`` names: the build backend reads
    the project's dependencies from them."""
    dyn = ((((doc or {}).get("tool") or {}).get("setuptools") or {}).get("dynamic") or {}).get("dependencies")
    files = dyn.get("file") if isinstance(dyn, dict) else None
    files = [files] if isinstance(files, str) else files if isinstance(files, list) else []
    return [f.removeprefix("./") for f in files if isinstance(f, str) and f.strip()]


def _core_elsewhere(root: Path, doc: dict | None, files: list[str], dynamic: list[str]) -> str | None:
    """What states the project's core dependencies besides the requirements/ folder, if anything: then the
    folder's other files are feature sets (LLaMA-Factory's requirements/vllm.txt, requirements/deepspeed.txt)."""
    core = [f for f in files if f.startswith("requirements/") and _CORE.fullmatch(Path(f).stem.lower())]
    if core or dynamic:
        return ", ".join(core + dynamic)
    top = [f for f in files if "/" not in f and not _SKIP.search(Path(f).stem.removeprefix("requirements").lower())]
    if top:
        return ", ".join(top)
    proj = (doc or {}).get("project") or {}
    poetry = (((doc or {}).get("tool") or {}).get("poetry") or {}).get("dependencies")
    if proj.get("dependencies") or poetry:
        return "pyproject.toml"
    return "setup.py" if (root / "setup.py").is_file() else None


def _read_requirement_files(d: Discovery, root: Path, files: list[str], wanted: tuple[str, ...], dynamic: list[str],
                            core: str | None) -> list[Found]:
    """Read the requirements files that make the training environment; say why each other one is skipped."""
    founds: list[Found] = []
    included: set[str] = set()
    features: list[str] = []
    for f in files:
        if f in OWN_FILES or Path(f).name in OWN_FILES or re.fullmatch(r"requirements\.[\w-]+\.(framework\.)?lock\.txt", f):
            continue  # envman's own lock files
        stem = Path(f).stem.removeprefix("requirements")
        key = Path(f).stem if f.startswith("requirements/") else stem
        if f in dynamic or f in wanted or f in included:
            pass
        elif _SKIP.search(key.lower()):
            d.skipped.append((f, "a dev/test/docs/hardware variant; name it under requirements: in envman.yaml to use it"))
            continue
        elif core and f.startswith("requirements/") and f not in core.split(", ") and not _CORE.fullmatch(key.lower()):
            features.append(f)
            continue
        if f in included:
            continue
        fd = read_requirements(root, f)
        included.update(fd.includes)
        founds.append(fd)
        d.requirement_files.append(f)
        named = " named by pyproject.toml [tool.setuptools.dynamic]" if f in dynamic else ""
        d.read.append(f + (f" (with {', '.join(fd.includes)})" if fd.includes else "") + named)
    features = [f for f in features if f not in included]
    if features:
        d.skipped.append((", ".join(features), FEATURE_SET.format(core=core)))
    # a file read through another's -r is not listed twice
    d.requirement_files = [f for f in d.requirement_files if f not in included]
    d.read = [r for r in d.read if r.split(" ")[0] not in included]
    for sub in ("docs", "doc", "tests", "test"):
        for p in sorted((root / sub).glob("requirements*.txt")) if (root / sub).is_dir() else []:
            d.skipped.append((f"{sub}/{p.name}", f"{sub}/ is not the training environment; name it under requirements: to use it"))
    return founds


def discover_repo(root: Path, releases: dict[str, list], wanted: tuple[str, ...] = ()) -> Discovery:
    d = Discovery()
    doc = read_pyproject(root)
    dynamic = [f for f in dynamic_files(doc) if (root / f).is_file()]
    files = requirement_candidates(root)
    files += [f for f in dynamic if f not in files]
    core = _core_elsewhere(root, doc, files, dynamic) if any(f.startswith("requirements/") for f in files) else None
    founds = _read_requirement_files(d, root, files, wanted, dynamic, core)
    extra: list[Found] = []
    if doc is not None:
        for fd, label in ((read_pyproject_project(doc, wanted, dynamic), "[project]"), (read_poetry(doc, wanted), "[tool.poetry]"),
                          (read_uv_sources(doc), "[tool.uv.sources]")):
            if fd.fates or fd.python:
                extra.append(fd)
                d.read.append(f"pyproject.toml {label}")
    for name, reader in (("setup.py", read_setup_py), ("setup.cfg", read_setup_cfg)):
        if (root / name).is_file():
            fd = reader(root, name, wanted)
            extra.append(fd)
            d.read.append(name)
    for name in ("environment.yml", "environment.yaml"):
        if (root / name).is_file():
            extra.append(read_conda(root, name))
            d.read.append(name)
            break
    copied = ("pyproject.toml", "setup.py", "setup.cfg", "environment.yml", "environment.yaml")
    d.copied_from = list(dict.fromkeys(r.split(" ")[0] for r in d.read if r.split(" ")[0] in copied))
    for fd in founds + extra:
        d.fates += fd.fates
        d.warnings += fd.warnings
        d.install_project = d.install_project or fd.install_project
        # a requirement file envman.yaml names is read again at lock time, its index options (and tokens) with it
        d.index_urls += [u for _, u in fd.index_urls if u not in d.index_urls and fd.file not in d.requirement_files]
        d.find_links += [u for _, u in fd.find_links if u not in d.find_links]
    for fd in extra:
        for r in fd.reqs:
            if r.name not in frameworks.by_distribution() and r.name not in frameworks.companions() \
                    and r.line not in d.packages:
                d.packages.append(r.line)
    if not d.read:
        return d
    vcs = [r.origin for fd in founds + extra for r in fd.reqs if r.req.url and r.line.startswith(("git+", "hg+", "svn+", "bzr+"))]
    if vcs:
        d.warnings.append(f"{', '.join(vcs)}: a VCS requirement has no file hash, and the image installs only "
                          "hash-checked files: `envman lock` refuses it and names what to pin instead (a release, or "
                          "an archive of the commit)")
    all_reqs = [r for fd in founds + extra for r in fd.reqs]
    constraints = [r for fd in founds + extra for r in fd.constraints]
    variants = [v for fd in founds + extra for v in fd.variants]
    dependents = load_dependents()
    basis = all_reqs + constraints
    d.inference = infer_framework(basis, variants, releases, dependents)
    optional = [r for fd in founds + extra for r in fd.optional]
    if d.inference.name is None and optional:
        basis = optional
        # nothing required names a framework: an extra that does (train = ["torch"]) is the best evidence left
        d.inference = infer_framework(optional, variants, releases, dependents)
        if d.inference.name:
            d.inference.notes.append(f"framework {d.inference.name} inferred from optional extras only")
    _keep_beside(d, extra)
    locked = read_uv_lock(root)
    if locked:
        _narrow_to_lock(d, locked, basis, variants, releases, dependents)
    d.python = _python(fd_py for fd in founds + extra for fd_py in fd.python)
    return d


def _keep_beside(d: Discovery, extra: list[Found]) -> None:
    """Another framework's lines kept on the CPU beside the inferred one (tensorflow beside jax) stay in the
    packages copied from pyproject/setup.py/conda, as their CPU distribution; requirement files are re-read at
    lock time, which does the same."""
    name = d.inference.name
    copied = {id(r) for fd in extra for r in fd.reqs}
    for r in d.inference.beside:
        cpu = dict(frameworks.get(name).cpu_beside).get(r.name) if name else None
        line = str(on_cpu(r.req, cpu)) if cpu else r.line
        if id(r) in copied and line not in d.packages:
            d.packages.append(line)


def _narrow_to_lock(d: Discovery, locked: dict[str, list[str]], reqs: list, variants: list, releases: dict[str, list],
                    dependents) -> None:
    """A uv.lock beside the project narrows the framework to the version it locked (and its CUDA variant),
    so the image runs what the repository's own lock runs; a lock that holds the only framework names it."""
    name = d.inference.name
    if name is None:
        named = {frameworks.by_distribution()[dist] for dist in locked if dist in frameworks.by_distribution()}
        if len(named) != 1:
            return
        name = named.pop()
    lock_reqs, lock_variants, notes = lock_constraints(locked, name)
    if not lock_reqs:
        return
    uv_variant = [v for o, v in variants if "tool.uv" in o]
    if uv_variant:  # pyproject's index already chose among the lock's variants
        lock_variants = []
    was = d.inference.notes
    d.inference = infer_framework(reqs + lock_reqs, variants + lock_variants, releases, dependents)
    d.inference.notes = [n for n in was if n not in d.inference.notes] + d.inference.notes + notes
    d.read.append("uv.lock")


def _python(pairs) -> str | None:
    pairs = list(pairs)
    if not pairs:
        return None
    total = SpecifierSet()
    for i, (oa, sa) in enumerate(pairs):
        for ob, sb in pairs[i + 1:]:
            if not any((sa & sb).contains(p, prereleases=True) for p in _PYTHONS):
                raise UsageError(f"{oa}: Python {sa} contradicts {ob}: Python {sb}",
                                 hint="no Python version satisfies both: fix one of them")
        total &= sa
    return str(total)


def sub_projects(root: Path, depth: int = 3) -> list[str]:
    """Folders (up to ``depth`` levels down) that hold a dependency file of their own; a project's own
    subfolders are not listed again."""
    out: list[str] = []

    def walk(d: Path, level: int) -> None:
        for p in sorted(d.iterdir()):
            if not p.is_dir() or p.name.startswith((".", "_")) or p.name in ("docs", "doc", "node_modules", "tests"):
                continue
            if any((p / f).is_file() for f in DEP_FILES) or any(p.glob("requirements*.txt")):
                out.append(p.relative_to(root).as_posix())
            elif level < depth:
                walk(p, level + 1)

    walk(root, 1)
    return out


def nothing_found(root: Path) -> UsageError:
    projects = sub_projects(root)
    if projects:
        shown = ", ".join(projects[:8]) + (f" … and {len(projects) - 8} more" if len(projects) > 8 else "")
        return UsageError(f"{root.name}: no dependency file at the top; it is a collection of {len(projects)} projects: "
                          + shown, hint=f"run `envman init {root.name}/{projects[0]}` for one of them")
    return UsageError(f"{root.name}: no dependency file found (looked for requirements*.txt, requirements/*.txt, "
                      "pyproject.toml, setup.py, setup.cfg, environment.yml)",
                      hint="pass --framework (e.g. --framework torch), or write envman.yaml with packages:")
