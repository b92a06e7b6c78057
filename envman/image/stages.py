"""PURE: what the image needs beyond the locked wheels — a builder stage for source-only packages, the
CUDA toolkit when one of them compiles CUDA code, apt libraries that popular wheels load, and the
project's own installation. Plain values in (the lock's names, the tables), plain values out; the
Dockerfile planner (plan.py) places them.

Why a builder stage: the final stage installs with ``--only-binary=:all:`` so a layer never compiles
anything; a package PyPI has only as an sdist (deepspeed, promise, seqeval) is built into a wheel in a
separate stage from its hash-checked sdist, and only the wheel crosses over. Compilers, nvcc and build
tools stay in the builder, so the final image is as small as if every package had shipped a wheel.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

BUILDER = "envman-wheels"
WHEELS_DIR = "/wheels"
PROJECT_MOUNT = "/tmp/envman/project"
PROJECT_WHEELS = "/wheels-project"  # the builder's wheel of the project's own compiled code
EDITABLE_ARG = "ENVMAN_EDITABLE"


@dataclass(frozen=True)
class BuildNeed:
    """One row of matrices/build_needs.yaml."""

    name: str
    framework: bool = False  # imports the framework at build time: no build isolation, framework installed first
    cuda: bool = False  # compiles CUDA code: nvcc of the stack's CUDA in the builder
    compiler: bool = True  # needs a C/C++ compiler (unknown packages are assumed to)
    build_requires: tuple[str, ...] = ()
    source: str = ""
    apt: tuple[str, ...] = ()  # system tools the build runs (swig), apt-installed in the builder stage only


@dataclass(frozen=True)
class SystemLibraries:
    """One row of matrices/system_libraries.yaml."""

    name: str
    apt: tuple[str, ...]
    alternative: str | None = None
    source: str = ""


@dataclass(frozen=True)
class NvccWheel:
    """nvcc from PyPI for one CUDA major (matrices/build_needs.yaml ``nvcc``)."""

    major: str
    wheel: str
    home: str  # under site-packages: holds bin/nvcc
    source: str = ""
    also: tuple[str, ...] = ()  # its unversioned NVIDIA dependencies, pinned to the same CUDA minor


@dataclass(frozen=True)
class SourceBuilds:
    """What the builder stage must do for the lock's source-only packages."""

    packages: tuple[tuple[str, str], ...]  # (name, version), sorted
    framework: bool  # some package imports the framework while building
    cuda: bool  # some package compiles CUDA code
    compiler: bool
    build_requires: tuple[str, ...]
    notes: tuple[str, ...]
    nvcc: tuple[str, str] | None = None  # (requirement, home) when nvcc comes from a wheel
    nvcc_also: tuple[str, ...] = ()  # requirements pinning nvcc's NVIDIA dependencies to the same minor
    project: bool = False  # the project itself (compiled code, or build requirements the lock lacks) is built here too
    apt: tuple[str, ...] = ()  # system tools the builds run (BuildNeed.apt), sorted


def plan_source_builds(source_only: Iterable[tuple[str, str]], needs: Mapping[str, BuildNeed],
                       cuda: str | None, cuda_base: bool,
                       nvcc_wheels: Mapping[str, NvccWheel] | None = None,
                       project: BuildNeed | None = None) -> SourceBuilds | None:
    """``source_only``: locked (name, version) pairs with no wheel for the target. ``cuda``: the stack's CUDA
    (None on a CPU stack); ``cuda_base``: the base image brings the CUDA toolkit's runtime (nvidia/cuda).
    ``project``: what the project's own build needs, when it is built in the builder too (it compiles code, or
    its backend asks for what the image's lock does not hold)."""
    pkgs = tuple(sorted(set(source_only)))
    if not pkgs and project is None:
        return None
    rows = [needs.get(n, BuildNeed(n)) for n, _ in pkgs] + ([project] if project is not None else [])
    framework = any(r.framework for r in rows)
    wants_cuda = any(r.cuda for r in rows)
    compiler = any(r.compiler for r in rows) or wants_cuda
    tools = sorted({t for r in rows for t in r.build_requires} | ({"setuptools", "wheel"} if framework else set()))
    names = ", ".join(f"{n}=={v}" for n, v in pkgs)
    notes = [f"{names}: no wheel for the target platform on the index; built from the hash-checked sdist "
             f"into a wheel in the builder stage {BUILDER} (the image installs wheels only)"] if pkgs else []
    notes += _row_notes(rows)
    nvcc = None
    also: tuple[str, ...] = ()
    if wants_cuda:
        who = ", ".join(r.name for r in rows if r.cuda)
        if cuda is None:
            notes.append(f"{who} compiles CUDA code but the stack has no CUDA: it builds without its CUDA ops")
            wants_cuda = False
        elif cuda_base:
            notes.append(f"{who} compiles CUDA code: the builder stage uses the CUDA {cuda} devel image of the stack "
                         "(nvcc and headers); the final image keeps the runtime base and gets only the wheel")
        else:
            row = (nvcc_wheels or {}).get(cuda.split(".")[0])
            where = f"{row.wheel}=={cuda}.*" if row else "(no nvcc wheel known for this CUDA major)"
            notes.append(f"{who} compiles CUDA code: the builder stage installs nvcc {cuda} from NVIDIA's "
                         f"{where} wheel (smaller than a devel base image, and in the builder only: "
                         "the final image gets only the wheel)")
            if row:
                nvcc = (f"{row.wheel}=={cuda}.*", row.home)
                also = tuple(f"{a}=={cuda}.*" for a in row.also)
    elif not compiler:
        notes.append(("they are" if pkgs else "the project is") + " pure Python (matrices/build_needs.yaml): "
                     "no compiler in the builder")
    apt = tuple(sorted({a for r in rows for a in r.apt}))
    return SourceBuilds(pkgs, framework, wants_cuda, compiler, tuple(tools), tuple(notes), nvcc, also, project is not None,
                        apt)


def _row_notes(rows: list[BuildNeed]) -> list[str]:
    """What a row asks of the builder beyond a compiler: the framework at build time, system tools."""
    notes = []
    for r in rows:
        why = r.source or "matrices/build_needs.yaml"
        if r.framework:
            notes.append(f"{r.name} imports the framework while it builds ({why}): "
                         "the builder installs the locked framework first and builds without build isolation")
        if r.apt:
            notes.append(f"{r.name} runs {', '.join(r.apt)} while it builds ({why}): apt-installed in the builder "
                         "stage only")
    return notes


def system_libraries(locked: Iterable[str], table: Mapping[str, SystemLibraries]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """apt packages the locked distributions load at import time, and a note per distribution that needs any."""
    apt: set[str] = set()
    notes: list[str] = []
    for name in sorted(set(locked)):
        row = table.get(name)
        if row is None:
            continue
        apt.update(row.apt)
        alt = f"; or depend on {row.alternative}, which needs none of them" if row.alternative and row.alternative not in locked else ""
        notes.append(f"{name} loads {', '.join(row.apt)} from the system: added to the image's apt packages{alt}")
    return tuple(sorted(apt)), tuple(notes)


def project_install_command(venv: str, source: str = "/app") -> str:
    """Install the project itself without touching the locked layers: no dependencies (they are locked), no
    index (its build backend is locked too), no build isolation (that would fetch an unpinned backend).
    pip builds in the source tree (build/, *.egg-info, whatever setup.py writes), so it builds a copy of the
    image's source in a tmpfs (PROJECT_MOUNT) that no layer keeps — not a read-write bind mount of the
    context, which buildah writes through to the user's project directory. With the build arg set (the
    devcontainer) it is an editable install of /app instead."""
    pip = f"{venv}/bin/pip install --no-deps --no-build-isolation --no-index --no-cache-dir"
    return (f'if [ -n "${EDITABLE_ARG}" ]; then {pip} --editable .; '
            f"else cp -a {source}/. {PROJECT_MOUNT}/ && {pip} {PROJECT_MOUNT}; fi")
