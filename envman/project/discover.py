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
from envman.project.infer import Inference, infer_framework, load_dependents
from envman.project.requirements import OWN_FILES, read_pyproject
from envman.project.sources import Fate, Found
from envman.project.sources.conda import read_conda
from envman.project.sources.poetry import read_poetry
from envman.project.sources.pyproject import OPTIONAL, read_pyproject_project
from envman.project.sources.requirements_txt import read_requirements
from envman.project.sources.setup_py import read_setup_cfg, read_setup_py

# variants a training image does not want by default; each can be named in envman.yaml (requirements:)
_SKIP = re.compile(r"(^|[-_.])(dev|devel|test|tests|testing|docs?|lint|ci|tpu|cpu|mac|macos|windows|win|rocm|"
                   r"xpu|npu|mps|onnx|optional|extra|style|typing|bench)([-_.]|$)")
DEP_FILES = ("requirements.txt", "pyproject.toml", "setup.py", "setup.cfg", "environment.yml", "environment.yaml")
_PYTHONS = [f"3.{m}" for m in range(6, 16)]


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


def discover_repo(root: Path, releases: dict[str, list], wanted: tuple[str, ...] = ()) -> Discovery:
    d = Discovery()
    founds: list[Found] = []
    included: set[str] = set()
    for f in requirement_candidates(root):
        if f in OWN_FILES or Path(f).name in OWN_FILES or re.fullmatch(r"requirements\.[\w-]+\.(framework\.)?lock\.txt", f):
            continue  # envman's own lock files
        stem = Path(f).stem.removeprefix("requirements")
        key = Path(f).stem if f.startswith("requirements/") else stem
        if f not in wanted and _SKIP.search(key.lower()):
            d.skipped.append((f, "a dev/test/docs/hardware variant; name it under requirements: in envman.yaml to use it"))
            continue
        if f in included:
            continue
        fd = read_requirements(root, f)
        included.update(fd.includes)
        founds.append(fd)
        d.requirement_files.append(f)
        d.read.append(f + (f" (with {', '.join(fd.includes)})" if fd.includes else ""))
    # a file read through another's -r is not listed twice
    d.requirement_files = [f for f in d.requirement_files if f not in included]
    d.read = [r for r in d.read if r.split(" ")[0] not in included]
    for sub in ("docs", "doc", "tests", "test"):
        for p in sorted((root / sub).glob("requirements*.txt")) if (root / sub).is_dir() else []:
            d.skipped.append((f"{sub}/{p.name}", f"{sub}/ is not the training environment; name it under requirements: to use it"))
    extra: list[Found] = []
    doc = read_pyproject(root)
    if doc is not None:
        for fd, label in ((read_pyproject_project(doc, wanted), "[project]"), (read_poetry(doc, wanted), "[tool.poetry]")):
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
        d.index_urls += [u for _, u in fd.index_urls if u not in d.index_urls]
        d.find_links += [u for _, u in fd.find_links if u not in d.find_links]
    for fd in extra:
        for r in fd.reqs:
            if r.name not in frameworks.by_distribution() and r.name not in frameworks.companions() \
                    and r.line not in d.packages:
                d.packages.append(r.line)
    if not d.read:
        return d
    urls = [r.origin for fd in founds + extra for r in fd.reqs if r.req.url]
    if urls:
        d.warnings.append(f"{', '.join(urls)}: VCS/URL requirements are locked to their commit, but the image's "
                          "hash-checked wheel install cannot install them yet: `envman build` fails on them until it does")
    all_reqs = [r for fd in founds + extra for r in fd.reqs]
    constraints = [r for fd in founds + extra for r in fd.constraints]
    variants = [v for fd in founds + extra for v in fd.variants]
    dependents = load_dependents()
    d.inference = infer_framework(all_reqs + constraints, variants, releases, dependents)
    optional = [r for fd in founds + extra for r in fd.optional]
    if d.inference.name is None and optional:
        # nothing required names a framework: an extra that does (train = ["torch"]) is the best evidence left
        d.inference = infer_framework(optional, variants, releases, dependents)
        if d.inference.name:
            d.inference.notes.append(f"framework {d.inference.name} inferred from optional extras only")
    d.python = _python(fd_py for fd in founds + extra for fd_py in fd.python)
    return d


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
