"""Conda environment files. Conda's own names for the framework and its CUDA runtime are mapped to the
matrix's terms: ``pytorch=2.1`` → ``torch==2.1.*``, ``pytorch-cuda=11.8`` / ``cudatoolkit=11.3`` → variant
cu118 / cu113, ``cpuonly`` → CPU, ``python=3.8`` (or a patch pin, ``python=3.9.18``) → Python 3.8 (3.9): envman
chooses a minor version, the base image brings its newest patch. The ``pip:`` section is read as a requirements
file, ``-r`` and ``-e`` lines included. Other conda packages have no PyPI equivalent envman can vouch for: they
are dropped, each one said — or, for an export (``conda env export``: build strings on every line, hundreds of
them), said in one line.

An export records the machine it was made on: ``conda_platform`` tells a Windows or macOS export (its build
strings and its platform-only packages: vc, vs2015_runtime, ucrt …; a ``prefix: C:\\…``) from a Linux one."""

from __future__ import annotations

import re
from pathlib import Path

from envman.errors import UsageError
from envman.inputs import MAX_SPEC, load_yaml, read_input
from envman.project.sources import Fate, Found
from envman.project.sources.pyproject import add_python, add_requirement
from envman.project.sources.requirements_txt import _read_line

# conda name → PyPI name, for the packages whose framework pin matters (conda-forge/pytorch channel names)
RENAMES = {"pytorch": "torch", "pytorch-gpu": "torch", "pytorch-cpu": "torch", "tensorflow": "tensorflow",
           "tensorflow-gpu": "tensorflow", "tensorflow-cpu": "tensorflow-cpu", "torchvision": "torchvision",
           "torchaudio": "torchaudio"}
_SPEC = re.compile(r"^([A-Za-z0-9_.\-]+)(?:::)?\s*(.*)\Z")
# packages only a Windows (or macOS) conda environment holds, and the build-string prefixes of their channels
_WINDOWS_ONLY = ("vc", "vs2015_runtime", "vc14_runtime", "ucrt", "wincertstore", "win_inet_pton", "pywin32", "m2w64-gcc-libs")
_LINUX_RUNTIME = ("libgcc-ng", "libstdcxx-ng", "_libgcc_mutex", "ld_impl_linux-64", "libgcc")
_EXPORT_DROPS_SHOWN = 6  # an export's dropped packages are said in one line, naming this many


def conda_spec(spec: str) -> str:
    """Conda's match spec → PEP 440: ``=2.1`` → ``==2.1.*``, ``==2.1.0`` stays, ``2.1.0=py3_0`` (build) drops the build."""
    spec = re.sub(r"([<>=!]=?)\s+", r"\1", spec.strip())  # ">= 1.13" is one constraint
    spec = re.sub(r"\s*,\s*", ",", spec).split(" ")[0]  # ">=3.8, <3.10" too: its upper bound is kept
    if not spec:
        return ""
    if re.fullmatch(r"[<>!=]=?.*", spec) and not re.fullmatch(r"=[^=].*", spec):
        return spec
    ver = spec.lstrip("=").split("=")[0]
    if ver.endswith(".*"):
        return f"=={ver}"
    return f"=={ver}.*" if spec.startswith("=") and not spec.startswith("==") else f"=={ver}"


def conda_document(project: Path, rel: str) -> dict:
    """environment.yml as a mapping whose dependencies are a list; anything else is one error line."""
    hint = "fix the file, or name it off under skip: in envman.yaml"
    doc = load_yaml(read_input(project / rel, rel, MAX_SPEC, hint=hint), rel, hint=hint) or {}
    if not isinstance(doc, dict):
        raise UsageError(f"{rel}: expected a mapping (name, channels, dependencies), got {type(doc).__name__}", hint=hint)
    deps = doc.get("dependencies")
    if deps is not None and not isinstance(deps, list):
        raise UsageError(f"{rel}: dependencies: expected a list, got {type(deps).__name__}", hint=hint)
    return doc


def conda_platform(doc: dict) -> str | None:
    """"windows" / "macos" when the file is an export of such an environment (``prefix: C:\\…``, or its
    platform-only packages: the MSVC runtime, ucrt …), else None (Linux, or a hand-written file)."""
    prefix = doc.get("prefix")
    if isinstance(prefix, str) and re.match(r"^[A-Za-z]:[\\/]", prefix):
        return "windows"
    if isinstance(prefix, str) and prefix.startswith(("/Users/", "/opt/homebrew/")):
        return "macos"
    names = {str(d).split("::")[-1].split("=")[0].strip().lower() for d in doc.get("dependencies") or [] if isinstance(d, str)}
    if len(names & set(_WINDOWS_ONLY)) >= 2:
        return "windows"
    if {"libcxx", "appnope"} <= names and not names & set(_LINUX_RUNTIME):  # clang's C++ runtime, not GCC's
        return "macos"
    return None


def is_export(doc: dict) -> bool:
    """``conda env export`` output: most conda lines carry a build string (``numpy=1.23.1=py39h…_0``)."""
    deps = [d for d in doc.get("dependencies") or [] if isinstance(d, str)]
    built = [d for d in deps if re.fullmatch(r"[^=\s]+=[^=\s]+=[^=\s]+", d.split("::")[-1].strip())]
    return len(deps) >= 10 and len(built) * 2 > len(deps)


def read_conda(project: Path, rel: str, doc: dict | None = None) -> Found:
    """A conda environment file; ``doc``: conda dependencies another format holds (pixi.toml's)."""
    found = Found(rel)
    doc = conda_document(project, rel) if doc is None else doc
    dropped: list[str] = []
    export = is_export(doc)
    for i, dep in enumerate(doc.get("dependencies") or []):
        where = f"{rel} dependencies[{i}]"
        if isinstance(dep, dict) and isinstance(dep.get("pip"), list):
            seen: set[Path] = set()
            for j, line in enumerate(dep["pip"]):
                if isinstance(line, str):
                    _read_line(project, rel, line.strip(), f"{rel} dependencies[{i}].pip[{j}]", found, False, seen)
            continue
        if not isinstance(dep, str):
            found.fates.append(Fate(where, str(dep), "dropped", "not a conda package spec"))
            continue
        m = _SPEC.match(dep.split("::")[-1].strip())
        name, spec = (m.group(1).lower(), m.group(2).strip()) if m else (dep, "")
        if "=" in name:
            name, _, rest = name.partition("=")
            spec = "=" + rest + spec
        ver = spec.lstrip("=").split("=")[0].strip()
        if name == "python":
            _python_line(found, dep, spec, where)
        elif name in ("pytorch-cuda", "cudatoolkit", "cuda-toolkit", "cuda-version") and ver:
            _cuda_line(found, dep, spec, ver, where)
        elif name == "cpuonly":
            found.variants.append((where, "cpu"))
            found.fates.append(Fate(where, dep, "rewrote", "a CPU stack"))
        elif name in RENAMES:
            text = f"{RENAMES[name]}{conda_spec(spec)}"
            add_requirement(found, text, where)
            found.fates[-1] = Fate(where, dep, "rewrote", f"→ {text!r}")
        elif name == "pip":
            found.fates.append(Fate(where, dep, "dropped", "the image has pip"))
        elif export:
            dropped.append(name)
        else:
            found.fates.append(Fate(where, dep, "dropped", "a conda package; add its PyPI name under packages: "
                                                         "or its Debian name under system_packages: if needed"))
    _say_export(found, rel, dropped)
    return found


def _cuda_line(found: Found, dep: str, spec: str, ver: str, where: str) -> None:
    if not re.fullmatch(r"=?=?\s*\d+(\.\d+)*(\.\*)?(=\S+)?", spec.strip()):
        # a range (cudatoolkit>=10) is no CUDA pin: the stack's CUDA is chosen for the GPUs, said
        found.fates.append(Fate(where, dep, "dropped", "a CUDA range, not a pin: the CUDA is chosen for the "
                                                       "targets (pass --cuda to choose one)"))
        return
    variant = "cu" + "".join(ver.split(".")[:2])
    found.variants.append((where, variant))
    found.fates.append(Fate(where, dep, "rewrote", f"the framework's CUDA variant {variant}"))


def _say_export(found: Found, rel: str, dropped: list[str]) -> None:
    """An export's hundreds of conda packages, in one line."""
    if dropped:
        shown = ", ".join(dropped[:_EXPORT_DROPS_SHOWN]) + (" …" if len(dropped) > _EXPORT_DROPS_SHOWN else "")
        found.fates.append(Fate(f"{rel} dependencies", f"{len(dropped)} conda packages", "dropped",
                                f"an export of a conda environment ({shown}): conda's own builds, with no PyPI "
                                "equivalent envman can vouch for; add one's PyPI name under packages: if needed"))


def _python_line(found: Found, dep: str, spec: str, where: str) -> None:
    py, why = conda_python(spec)
    if py:
        add_python(found, py, where)
    found.fates.append(Fate(where, dep, "rewrote", f"Python {py or 'any'}{why}"))


def conda_python(spec: str) -> tuple[str, str]:
    """Conda's Python pin as a minor-version constraint: ``=3.9.18`` (or ``3.9.18=h…_0``) → ``==3.9.*``, said:
    envman's stacks are per minor version (the wheels' cp39 tag), and the base image brings the newest patch."""
    if not spec:
        return "", ""
    py = conda_spec(spec)
    m = re.fullmatch(r"==(\d+)\.(\d+)\.(\d+)(?:\.\*)?", py)
    if m:
        return f"=={m.group(1)}.{m.group(2)}.*", (f" (conda pins the patch release {m.group(1)}.{m.group(2)}.{m.group(3)}; "
                                                  "the image's Python is the base image's newest patch of that minor)")
    return py, ""
