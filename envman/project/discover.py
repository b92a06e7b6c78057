"""What `envman init` learns from a repository without being told, reading (never executing) the files
real training repositories use, in this order: requirements*.txt (and requirements/*.txt), pyproject.toml
([project], [dependency-groups], [tool.poetry], [tool.uv]), setup.py (ast), setup.cfg, Pipfile, pixi.toml, a conda
environment file, and the repository's lock files (uv.lock, poetry.lock, pdm.lock, Pipfile.lock).

Every file's fate is said: read, skipped (and why), or included by another; every line's fate too. What the
command line asks (``--framework``, ``--cuda``, ``--python``: ``Asked``) overrides what the files say, and the
lines it overrides are said; independent problems are reported together."""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet

from envman import frameworks
from envman.errors import UsageError
from envman.frameworks.base import on_cpu
from envman.inputs import MAX_SPEC, read_regular
from envman.lock.layout import StackFiles
from envman.project.codeimports import dominant, read_code_frameworks
from envman.project.infer import NOT_APPLIED, Inference, infer_framework, load_dependents
from envman.project.lockstep import refuse_stale
from envman.project.package import backend_refusal
from envman.project.reqfiles import FileChoice, Want, backends_of, choose_files, key_of, tokens
from envman.project.sources import Fate, Found
from envman.project.sources.conda import conda_document, conda_platform, is_export, read_conda
from envman.project.sources.locks import read_locks
from envman.project.sources.poetry import read_poetry
from envman.project.sources.pyproject import OPTIONAL, read_pyproject, read_pyproject_project
from envman.project.sources.registry import READERS
from envman.project.sources.registry import files as reader_files
from envman.project.sources.requirements_txt import read_requirements
from envman.project.sources.uv import lock_constraints, read_uv_resolution, read_uv_sources

DEP_FILES = ("requirements.txt", "pyproject.toml", "environment.yml", "environment.yaml", *reader_files())
_PYTHONS = [f"3.{m}" for m in range(6, 16)]
_CUDA_NAME = re.compile(r"(?:cu|cuda)(\d{3})")
# the core file of a requirements/ folder (requirements/base.txt); its other files are feature sets
_CORE = re.compile(r"(base|main|core|common|runtime|install|prod|production|default|requirements|train|training)")
# conda environment files, best name first; the dev/test ones are variants (skipped, said)
_CONDA = re.compile(r"^(environment|conda|conda[-_]env|env)([-_.][\w.-]+)?\.ya?ml\Z")
_EXTRAS_SHOWN = 4  # a table with more extras than this is said in one line
OWN_FILES = (StackFiles().req, StackFiles().fw)  # envman's own, never read as requirements


@dataclass(frozen=True)
class Asked:
    """What the command line chose: it overrides the repository's own lines on the same subject."""

    framework: str | None = None  # "torch>=2.4" | "none"
    cuda: str | None = None
    python: str | None = None
    cpu: bool = False
    # the Python the image gets when nothing chooses one (matrices/base_images.yaml): framework lines behind
    # python_version markers are intersected under the Python the image will have, not all at once
    default_python: str | None = None

    @property
    def framework_name(self) -> str | None:
        if not self.framework:
            return None
        if self.framework.strip().lower() == "none":
            return "none"
        try:
            name = Requirement(self.framework).name.lower()
        except InvalidRequirement:
            return None
        return frameworks.by_distribution().get(name, name)


@dataclass
class Discovery:
    read: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    requirement_files: list[str] = field(default_factory=list)  # referenced by envman.yaml (read again at lock)
    copied_from: list[str] = field(default_factory=list)  # files whose packages were copied into envman.yaml
    packages: list[str] = field(default_factory=list)  # from pyproject / setup.py / conda (copied into envman.yaml)
    constraints: list[str] = field(default_factory=list)  # [tool.uv] constraint-dependencies (envman.yaml constraints:)
    overrides: list[str] = field(default_factory=list)  # [tool.uv] override-dependencies (envman.yaml overrides:)
    python: str | None = None
    inference: Inference = field(default_factory=Inference)
    install_project: bool = False
    # the command line overrode a framework/CUDA pin of the requirement files: at lock, those lines yield
    framework_wins: bool = False
    index_urls: list[str] = field(default_factory=list)
    find_links: list[str] = field(default_factory=list)
    fates: list[Fate] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    declared: set[str] = field(default_factory=set)  # every distribution the files read name (canonical)
    named_cuda: str | None = None  # the CUDA a per-CUDA file read is named for (requirements_cu128.txt → "12.8")

    def report(self) -> list[str]:
        out = ["read: " + ", ".join(self.read)] if self.read else []
        out += [f"skipped {f}: {why}" for f, why in self.skipped]
        out.extend(_optional_lines(self.fates))
        out.extend(f.describe() for f in self.fates if f.why != OPTIONAL and (f.fate != "kept" or f.why))
        out.extend(self.warnings)
        return out


def _optional_lines(fates: list[Fate]) -> list[str]:
    """Extras and groups not installed: one line per table, or one line per file when it has many."""
    def key_of_fate(f: Fate) -> str:  # "… optional-dependencies.extra[3]" and "… group.dev.dependencies.pytest" → the table
        return f.origin.rsplit("[", 1)[0] if f.origin.endswith("]") else f.origin.rsplit(".", 1)[0]

    groups: dict[str, list[Fate]] = {}
    for fate in fates:
        if fate.why == OPTIONAL:
            groups.setdefault(key_of_fate(fate), []).append(fate)
    by_file: dict[str, list[str]] = {}
    for key in groups:
        by_file.setdefault(key.split(" ")[0], []).append(key)
    out = []
    for file, keys in by_file.items():
        if len(keys) > _EXTRAS_SHOWN:
            names = ", ".join(k.rsplit(".", 1)[-1] for k in keys)
            lines = sum(len(groups[k]) for k in keys)
            out.append(f"{file}: {len(keys)} extras or groups not installed ({names}; {lines} lines): {OPTIONAL}")
            continue
        for key in keys:
            g = groups[key]
            names = ", ".join(f.text.split(";")[0].strip() for f in g)
            out.append(f"{key}: not installed, {len(g)} line{'s' if len(g) > 1 else ''} ({names}): {OPTIONAL}")
    return out


def requirement_candidates(root: Path) -> list[str]:
    """Top-level ``*requir*.txt`` (``requirments_cu128.txt``, ``docker_requirements.txt`` are requirement files
    too) and ``requirements/*.txt``; never envman's own lock files. With no dependency file at the top, one in the
    repository's own package folder (``big_vision/requirements.txt``, installed from the top: an ``__init__.py``
    beside it) is the repository's."""
    files = [p.name for p in root.glob("*requir*.txt") if p.is_file()]
    files += [f"requirements/{p.name}" for p in (root / "requirements").glob("*.txt") if p.is_file()]
    if not files and not any((root / f).is_file() for f in DEP_FILES):
        files = [f"{p.parent.name}/{p.name}" for p in root.glob("*/requir*.txt") if (p.parent / "__init__.py").is_file()]
    return sorted(f for f in files if f not in OWN_FILES and Path(f).name not in OWN_FILES
                  and not re.fullmatch(r"requirements\.[\w-]+\.(framework\.)?lock\.txt", f))


def dynamic_files(doc: dict | None) -> list[str]:
    """The files ``[tool.setuptools.dynamic] dependencies = {file = [...]}`` or hatch-requirements-txt's
    ``[tool.hatch.metadata.hooks.requirements_txt] files`` names: the build backend reads the project's
    dependencies from them."""
    dyn = ((((doc or {}).get("tool") or {}).get("setuptools") or {}).get("dynamic") or {}).get("dependencies")
    files = dyn.get("file") if isinstance(dyn, dict) else _hatch_hook(doc).get("files")
    files = [files] if isinstance(files, str) else files if isinstance(files, list) else []
    return [f.removeprefix("./") for f in files if isinstance(f, str) and f.strip()]


def _hatch_hook(doc: dict | None) -> dict:
    """hatch-requirements-txt's table: ``[tool.hatch.metadata.hooks.requirements_txt]``."""
    hook = (((((doc or {}).get("tool") or {}).get("hatch") or {}).get("metadata") or {}).get("hooks") or {})
    table = hook.get("requirements_txt")
    return table if isinstance(table, dict) else {}


def _gpu_extra(doc: dict | None, root: Path, asked: Asked) -> tuple[str | None, list[str]]:
    """A project whose core is empty installs with an extra (maxtext: ``pip install -e .[cuda12]``): for a GPU
    image, the one extra named for a CUDA GPU (``cuda12``, ``gpu``), with the files hatch-requirements-txt reads
    for it."""
    proj = (doc or {}).get("project") or {}
    hook = _hatch_hook(doc).get("optional-dependencies")
    hook = hook if isinstance(hook, dict) else {}
    names = [n for n in {*hook, *(proj.get("optional-dependencies") or {})} if re.fullmatch(r"cuda\d*|gpu", n.lower())]
    if proj.get("dependencies") or dynamic_files(doc) or asked.cpu or len(names) != 1:
        return None, []
    files = hook.get(names[0]) or []
    return names[0], [f for f in files if isinstance(f, str) and (root / f).is_file()]


def _core_elsewhere(root: Path, doc: dict | None, files: list[str], dynamic: list[str]) -> str | None:
    """What states the project's core dependencies besides the requirements/ folder, if anything: then the
    folder's other files are feature sets (LLaMA-Factory's requirements/vllm.txt, requirements/deepspeed.txt)."""
    core = [f for f in files if f.startswith("requirements/") and _CORE.fullmatch(Path(f).stem.lower())]
    if core or dynamic:
        return ", ".join(core + dynamic)
    top = [f for f in files if "/" not in f and key_of(f) == ""]
    if top:
        return ", ".join(top)
    proj = (doc or {}).get("project") or {}
    poetry = (((doc or {}).get("tool") or {}).get("poetry") or {}).get("dependencies")
    if proj.get("dependencies") or poetry:
        return "pyproject.toml"
    return "setup.py" if (root / "setup.py").is_file() else None


def _read_requirement_files(d: Discovery, root: Path, files: list[str], wanted: tuple[str, ...], dynamic: list[str],
                            core: str | None, asked: Asked) -> tuple[list[Found], FileChoice]:
    """Read the requirements files that make the training environment; say why each other one is skipped."""
    want = Want(asked.framework_name if asked.framework_name != "none" else None, asked.cuda, asked.cpu)
    choice = choose_files(root, files, wanted=wanted, dynamic=dynamic, core=core, want=want)
    founds = []
    for f in choice.read:
        fd = read_requirements(root, f)
        cu = [m.group(1) for m in map(_CUDA_NAME.fullmatch, tokens(f)) if m]
        if cu and not asked.cuda and not asked.cpu:  # requirements_cu128.txt: the repository names its CUDA build
            fd.variants.append((f"{f} (its name)", f"cu{cu[0]}"))
            d.named_cuda = f"{cu[0][:-1]}.{cu[0][-1]}"
        founds.append(fd)
        d.requirement_files.append(f)
        named = " named by pyproject.toml as its dependencies" if f in dynamic else ""
        d.read.append(f + (f" (with {', '.join(fd.includes)})" if fd.includes else "") + named)
    d.skipped += choice.skipped
    for sub in ("docs", "doc", "tests", "test"):
        for p in sorted((root / sub).glob("requirements*.txt")) if (root / sub).is_dir() else []:
            d.skipped.append((f"{sub}/{p.name}", f"{sub}/ is not the training environment; name it under requirements: to use it"))
    return founds, choice


# a conda file in a sub-folder (scripts/gpu_environment.yml, envs/conda_env.yml): read when the repository has
# no dependency file at its top, so that it is not told "no dependency file found"
_CONDA_NESTED = re.compile(r"^([\w.-]*[-_])?(environment|conda|conda[-_]env|env)([-_.][\w.-]+)?\.ya?ml\Z")
_NESTED_SKIP = {"test", "tests", "docs", "doc", "examples", "example", ".envman", "node_modules", ".git"}


def _nested_conda(root: Path) -> list[str]:
    """Conda environment files one or two folders down (with a top-level ``dependencies:``), best first: a GPU
    or CUDA one before the others, shallower before deeper."""
    out = []
    for p in sorted(root.glob("*/*.y*ml")) + sorted(root.glob("*/*/*.y*ml")):
        rel = p.relative_to(root)
        if set(rel.parts[:-1]) & _NESTED_SKIP or not _CONDA_NESTED.match(p.name) or not p.is_file():
            continue
        try:
            if re.search(r"^dependencies:", read_regular(p, MAX_SPEC).decode("utf-8", "replace")[:100_000], re.M):
                out.append(rel.as_posix())
        except OSError:
            continue
    return sorted(out, key=lambda r: (not re.search(r"gpu|cuda", r.lower()), r.count("/"), r))


def _conda_file(d: Discovery, root: Path, others: list) -> Found | None:
    """The conda environment file, if any: ``environment.yml`` first; a Windows or macOS export beside other
    dependency files is not read (the image is Linux), and its pins that contradict them are named."""
    names = sorted((p.name for p in root.iterdir() if p.is_file() and _CONDA.match(p.name)),
                   key=lambda n: (not n.startswith("environment."), not n.startswith("environment"), n))
    if not names and not others and not d.read:
        names = _nested_conda(root)
    chosen = None
    for name in names:
        m = _CONDA.match(name) or _CONDA_NESTED.match(Path(name).name)
        suffix = "".join(g or "" for g in m.groups()) if m else ""
        if chosen is None and not re.search(r"dev|test|doc|ci|extra|cpu|mac|win|osx", suffix.lower()):
            chosen = name
        else:
            d.skipped.append((name, f"a variant of the conda environment; {'' if chosen else 'no core one; '}name "
                                    "its packages under packages: in envman.yaml to use them"))
    if chosen is None:
        return None
    doc = conda_document(root, chosen)
    platform = conda_platform(doc)
    fd = read_conda(root, chosen)
    if (platform or is_export(doc)) and others:
        # an export records one machine (its Python, its platform's builds); the repository's own requirement
        # files say what the project needs
        where = f"a {platform} conda environment; the image is Linux, and" if platform else "a conda environment (every line"\
            " a build: one machine's state); "
        d.skipped.append((chosen, f"an export of {where} the repository's other dependency files are read instead"
                          + _contradictions(fd, others)))
        return None
    d.read.append(chosen)
    if platform:
        d.warnings.append(f"{chosen}: an export of a {platform} conda environment: its pip section and framework pins "
                          "are used for a Linux image (conda's builds are not)")
    return fd


def _contradictions(conda: Found, reqs: list) -> str:
    """Pins of a skipped conda export that contradict the requirements read (said, not applied)."""
    pins = {r.name: r for r in conda.reqs if any(s.operator == "==" for s in r.req.specifier)}
    clash = [f"{pins[r.name].req} vs {r.origin}: {r.req}" for r in reqs if r.name in pins and len(r.req.specifier)
             and not any(r.req.specifier.contains(s.version, prereleases=True) for s in pins[r.name].req.specifier)]
    return f" (its pins contradict them: {'; '.join(clash[:4])})" if clash else ""


def _read_project_files(d: Discovery, root: Path, doc: dict | None, wanted: tuple[str, ...], dynamic: list[str],
                        founds: list[Found]) -> list[Found]:
    """pyproject.toml's tables, setup.py, setup.cfg, Pipfile and a conda file: their packages are copied."""
    extra: list[Found] = []
    if doc is not None:
        for fd, label in ((read_pyproject_project(doc, wanted, dynamic), "[project]"), (read_poetry(doc, wanted), "[tool.poetry]"),
                          (read_uv_sources(doc), "[tool.uv.sources]"), (read_uv_resolution(doc), "[tool.uv]")):
            if fd.fates or fd.python:
                extra.append(fd)
                d.read.append(f"pyproject.toml {label}")
    for reader in READERS:  # setup.py, setup.cfg, Pipfile, pixi.toml … (project/sources/registry.py)
        got = reader.read(root, wanted)
        if got is not None:
            extra.append(got)
            d.read.append(reader.file)
    conda = _conda_file(d, root, [r for fd in founds + extra for r in fd.reqs])
    if conda is not None:
        extra.append(conda)
    return extra


def discover_repo(root: Path, releases: dict[str, list], wanted: tuple[str, ...] = (), asked: Asked = Asked()) -> Discovery:
    d = Discovery()
    doc = read_pyproject(root)
    dynamic = [f for f in dynamic_files(doc) if (root / f).is_file()]
    gpu, gpu_files = _gpu_extra(doc, root, asked)
    if gpu:
        wanted, dynamic = (*wanted, gpu), dynamic + gpu_files
        d.named_cuda = None if asked.cuda else gpu[4:] or None  # cuda12: CUDA 12
        d.warnings.append(f"pyproject.toml: the core is empty; the {gpu} extra is its install for a CUDA GPU "
                          f"(pip install .[{gpu}]): read as the core")
    files = requirement_candidates(root)
    files += [f for f in dynamic if f not in files]
    core = _core_elsewhere(root, doc, files, dynamic) if any(f.startswith("requirements/") for f in files) else None
    founds, choice = _read_requirement_files(d, root, files, wanted, dynamic, core, asked)
    extra = _read_project_files(d, root, doc, wanted, dynamic, founds)
    founds += _files_setup_reads(d, root, extra)
    copied = ("pyproject.toml", *reader_files())
    d.copied_from = list(dict.fromkeys(r.split(" ")[0] for r in d.read if r.split(" ")[0] in copied or _CONDA.match(r)
                                      or _CONDA_NESTED.match(Path(r.split(" ")[0]).name)))
    for fd in founds + extra:
        d.fates += fd.fates
        d.warnings += fd.warnings
        d.install_project = d.install_project or fd.install_project
        # a requirement file envman.yaml names is read again at lock time, its index options (and tokens) with it
        d.index_urls += [u for _, u in fd.index_urls if u not in d.index_urls and fd.file not in d.requirement_files]
        d.find_links += [u for _, u in fd.find_links if u not in d.find_links]
    _copy_packages(d, extra)
    if not d.read:
        return d
    _say_layout(d, root, doc)
    _say_vcs(d, founds + extra)
    problems: list[UsageError] = []
    _infer(d, root, founds, extra, releases, asked, choice, problems)
    try:
        d.python = _python(d, [p for fd in founds + extra for p in fd.python]
                           + [(o, SpecifierSet(s)) for o, s in choice.python], asked)
    except UsageError as err:
        problems.append(err)
    if problems:
        raise _together(problems)
    return d


def _files_setup_reads(d: Discovery, root: Path, extra: list[Found]) -> list[Found]:
    """A setup.py whose install_requires reads a file when it runs (``open(HERE / 'requirements.txt')``,
    ``_fetch_requirements('requirements.txt')``: audiocraft, OpenRLHF, TTS) has that file for its core: read, or
    said to be read already, instead of "list these packages under packages:"."""
    out: list[Found] = []
    for fd in extra:
        for i, f in enumerate(fd.fates):
            m = re.search(r"""['"]([\w./-]+\.(?:txt|in))['"]""", f.text)
            if f.origin != "setup.py install_requires" or f.fate != "dropped" or not m or not (root / m[1]).is_file():
                continue
            name = m[1].removeprefix("./")
            if name not in d.requirement_files:
                out.append(read_requirements(root, name))
                d.requirement_files.append(name)
                d.read.append(f"{name} read by setup.py")
            fd.fates[i] = Fate(f.origin, f.text, "kept", f"setup.py reads {name} when it runs: read as the core")
    return out


def _say_layout(d: Discovery, root: Path, doc: dict | None) -> None:
    """A package its build backend would refuse to build (pattern: a setuptools flat layout with several top-level
    packages) is not installed: the image runs it from its source tree, which is said."""
    is_package = (doc is not None and isinstance(doc.get("build-system"), dict)) or (root / "setup.py").is_file()
    why = backend_refusal(root, doc) if is_package else None
    if why:
        d.install_project = False
        d.warnings.append(f"the project is not installed as a package: {why}; the image runs it from its source "
                          "tree (its work directory, on PYTHONPATH), as `python train.py` does")


def _copy_packages(d: Discovery, extra: list[Found]) -> None:
    """Packages from pyproject/setup.py/Pipfile/conda are copied into envman.yaml (not the framework: envman pins
    it); [tool.uv] constraints and overrides too."""
    fw = set(frameworks.by_distribution()) | set(frameworks.companions())
    for fd in extra:
        for r in fd.reqs:
            line = str(r.req) if r.req.url else r.line  # a bare URL line (git+https://…) as PEP 508: name @ url
            if r.name not in fw and line not in d.packages:
                d.packages.append(line)
        d.constraints += [r.line for r in fd.constraints if r.name not in fw and r.line not in d.constraints]
        d.overrides += [r.line for r in fd.overrides if r.name not in fw and r.line not in d.overrides]


def _say_vcs(d: Discovery, founds: list[Found]) -> None:
    vcs = [r.origin for fd in founds for r in fd.reqs if r.req.url and r.line.startswith(("git+", "hg+", "svn+", "bzr+"))]
    if vcs:
        d.warnings.append(f"{', '.join(vcs)}: a VCS requirement has no file hash, and the image installs only "
                          "hash-checked files: `envman lock` refuses it and names what to pin instead (a release, or "
                          "an archive of the commit)")


def _infer(d: Discovery, root: Path, founds: list[Found], extra: list[Found], releases: dict[str, list],
           asked: Asked, choice: FileChoice, problems: list[UsageError]) -> None:
    """The framework and its range, from every requirement (overrides named the framework too); the command
    line's --framework / --cuda decide over the files, which is said."""
    name = asked.framework_name
    if choice.backends and name is None:
        names = sorted({b for f in choice.backends for b in backends_of(f)})
        problems.append(UsageError(
            f"{', '.join(choice.backends)}: one requirements file per backend of a multi-backend project",
            hint=f"pass {' or '.join(f'--framework {n}' for n in names)} to read the one for that framework"))
    all_reqs = [r for fd in founds + extra for r in fd.reqs]
    basis = all_reqs + [r for fd in founds + extra for r in fd.constraints + fd.overrides]
    d.declared = {r.name for r in basis}
    variants = [v for fd in founds + extra for v in fd.variants]
    dependents = load_dependents()
    fw_name = None if name == "none" else name
    keep = asked.cuda is None
    py = _marker_python(asked, [p for fd in founds + extra for p in fd.python])
    code = dominant(read_code_frameworks(root))  # what the code imports decides what the lines cannot
    try:
        d.inference = infer_framework(basis, variants, releases, dependents, fw_name, keep, py, code)
        optional = [r for fd in founds + extra for r in fd.optional]
        if d.inference.name is None and optional:
            basis = optional
            # nothing required names a framework: an extra that does (train = ["torch"]) is the best evidence left
            d.inference = infer_framework(optional, variants, releases, dependents, fw_name, keep, py, code)
            if d.inference.name:  # extras not installed: their lines for other Pythons are counted, not listed
                other = [n for n in d.inference.notes if n.endswith(NOT_APPLIED)]
                d.inference.notes = [n for n in d.inference.notes if n not in other] + [
                    f"framework {d.inference.name} inferred from optional extras only"
                    + (f" ({len(other)} of their lines are for another Python: not applied)" if other else "")]
        _keep_beside(d, extra)
        _narrow_to_locks(d, root, basis, variants, releases, dependents, fw_name, keep)
    except UsageError as err:
        if asked.framework is None:
            problems.append(err)
        else:  # the command line's framework decides: what the files say about it is only said
            d.inference = Inference(name=fw_name, notes=[f"--framework {asked.framework} decides over the repository's "
                                                         f"framework lines ({err.message})"])
    chosen = asked.framework or d.inference.framework
    if d.inference.name and chosen:  # lines the framework's own release rules out, all at once
        try:
            refuse_stale(d.inference.name, Requirement(chosen).specifier,
                         [rel.version for rel in releases.get(d.inference.name, [])], all_reqs)
        except UsageError as err:
            problems.append(err)
        except InvalidRequirement:
            pass  # the command line's spelling is refused where it is resolved
    fw_lines = [r for fd in founds for r in fd.reqs + fd.constraints
                if r.name in frameworks.by_distribution() or r.name in frameworks.companions()]
    d.framework_wins = bool((asked.framework or asked.cuda) and fw_lines or d.inference.others)


def _together(problems: list[UsageError]) -> UsageError:
    """Independent refusals, all at once: the first as the error line, every one (with its hint) in the hint."""
    if len(problems) == 1:
        return problems[0]
    first = problems[0]
    every = "\n  ".join(f"{p.message} → {p.hint}" if p.hint else p.message for p in problems)
    return UsageError(f"{first.message} (and {len(problems) - 1} more)", hint="every problem:\n  " + every)


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
    for r in d.inference.others:  # another framework's lines, installed as written (EasyLM's torch beside jax)
        if id(r) in copied and r.line not in d.packages:
            d.packages.append(r.line)


def _narrow_to_locks(d: Discovery, root: Path, reqs: list, variants: list, releases: dict[str, list], dependents,
                     asked: str | None, keep_variants: bool) -> None:
    """A lock file beside the project (uv.lock, poetry.lock, pdm.lock, Pipfile.lock) narrows the framework to the
    version it locked (and its CUDA variant), so the image runs what the repository's own lock runs; a lock that
    holds the only framework names it. The lock's other pins are said in one line, not copied."""
    for locked in read_locks(root):
        name = asked or d.inference.name
        if name is None:
            named = {frameworks.by_distribution()[dist] for dist in locked.framework if dist in frameworks.by_distribution()}
            name = named.pop() if len(named) == 1 else None
        lock_reqs, lock_variants, notes = lock_constraints(locked.framework, name, locked.file) if name else ([], [], [])
        d.read.append(locked.file)
        d.warnings.append(locked.note(name if lock_reqs else None))
        if not lock_reqs or asked and d.inference.framework is None:
            continue
        if [v for o, v in variants if "tool.uv" in o] or not keep_variants:  # an index or --cuda already chose
            lock_variants = []
        was = d.inference.notes
        d.inference = infer_framework(reqs + lock_reqs, variants + lock_variants, releases, dependents, asked, keep_variants)
        d.inference.notes = [n for n in was if n not in d.inference.notes] + d.inference.notes + notes
        return


def _marker_python(asked: Asked, pairs: list[tuple[str, SpecifierSet]]) -> str | None:
    """The minor the image's Python will be, for evaluating markers: --python, else the newest minor up to the
    default that every Python constraint of the files admits (the oldest above it when none below does)."""
    if asked.python:
        return re.sub(r"^[=~<>! ]*", "", asked.python).rsplit(".*", 1)[0][:4].rstrip(".") or None
    if not asked.default_python:
        return None
    ok = [m for m in _PYTHONS if all(s.contains(f"{m}.99", prereleases=True) or s.contains(f"{m}.0", prereleases=True)
                                     for _, s in pairs)]
    below = [m for m in ok if int(m[2:]) <= int(asked.default_python.split(".")[1])]
    return (below[-1] if below else ok[0]) if ok else asked.default_python


def _python(d: Discovery, pairs: list[tuple[str, SpecifierSet]], asked: Asked) -> str | None:
    """Every Python constraint, intersected (two that no version satisfies together are refused, naming both), at
    minor-version precision: envman resolves minor versions, so ``>=3.13.14`` admits 3.13 (the base image's patch
    must then be that new, which is said)."""
    if asked.python:
        if pairs:
            d.inference.notes.append(f"--python {asked.python} decides over the repository's Python constraints ("
                                     + "; ".join(f"{o}: {s}" for o, s in pairs) + ")")
        return None
    if not pairs:
        return None
    total = SpecifierSet()
    for i, (oa, sa) in enumerate(pairs):
        for ob, sb in pairs[i + 1:]:
            if not any(_admits(sa & sb, p) for p in _PYTHONS):
                raise UsageError(f"{oa}: Python {sa} contradicts {ob}: Python {sb}",
                                 hint="no Python version satisfies both: fix one of them, or pass --python")
        total &= sa
    minors = [p for p in _PYTHONS if _admits(total, p)]
    if minors and not any(total.contains(p, prereleases=True) for p in minors):
        text = f"=={minors[0]}.*" if len(minors) == 1 else f">={minors[0]},<3.{int(minors[-1][2:]) + 1}"
        d.warnings.append(f"Python {total} is a patch-level constraint; envman resolves minor versions: Python {text} "
                          f"(the base image's {minors[0]} must be a patch release that satisfies {total})")
        return text
    return str(total)


def _admits(spec: SpecifierSet, minor: str) -> bool:
    """Some patch release of ``minor`` satisfies ``spec`` (``>=3.13.14`` admits 3.13)."""
    try:
        return any(spec.contains(f"{minor}.{p}", prereleases=True) for p in range(0, 40)) or spec.contains(minor)
    except InvalidSpecifier:
        return False


def sub_projects(root: Path, depth: int = 3) -> list[str]:
    """Folders (up to ``depth`` levels down) that hold a dependency file of their own; a project's own
    subfolders are not listed again."""
    out: list[str] = []

    def walk(d: Path, level: int) -> None:
        for p in sorted(d.iterdir()):
            if not p.is_dir() or p.name.startswith((".", "_")) or p.name in ("docs", "doc", "node_modules", "tests"):
                continue
            if any((p / f).is_file() for f in DEP_FILES) or any(p.glob("requir*.txt")):
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
                          + shown, hint=f"run `envman init {_from_here(root / projects[0])}` for one of them")
    fw = dominant(read_code_frameworks(root))
    return UsageError(f"{root.name}: no dependency file found (looked for requirements*.txt, requirements/*.txt, "
                      f"pyproject.toml, {', '.join(reader_files())}, environment.yml)",
                      hint=(f"its code imports {fw}: pass --framework {fw}" if fw else
                            "pass --framework (e.g. --framework torch)") + ", or write envman.yaml with packages:")


def _from_here(path: Path) -> str:
    """``path`` as the user can type it from where they stand (a hint is followed from there, issue 38)."""
    try:
        rel = os.path.relpath(path, Path.cwd())
    except (OSError, ValueError):  # another drive (Windows), or no working directory
        rel = str(path)
    return shlex.quote(str(path) if rel.startswith("..") else rel)  # from elsewhere, the whole path
