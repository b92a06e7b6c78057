"""What a lock reads from the project, read once per run, with the digest of every input; ``LockOptions``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from envman.app.uvalias import input_digest
from envman.errors import UsageError
from envman.files import sha256
from envman.image.tables import ImageTables, load_image_tables
from envman.lock.layout import StackFiles
from envman.lock.lockfile import canonical_json
from envman.model import Matrix
from envman.project.package import ProjectPackage, backend_refusal, find_package
from envman.project.req import Req
from envman.project.spec import ProjectSpec, validate_requirement

BASE_OVERRIDE = "base_image"  # the lock's inputs key for a --base-image override


@dataclass(frozen=True)
class LockOptions:
    no_lock: bool = False  # make no Python lock (keep one whose inputs are unchanged), ask no registry
    upgrade: bool = False  # ask the index (and the base image's registry) again
    timeout: float | None = None  # seconds uv may take
    progress: Any = None
    offline_image: str | None = None  # a wheelhouse image every pip install of the Dockerfile reads
    pin_apt: Callable[[str, tuple[str, ...]], dict[str, str]] | None = None  # (base, packages) → pins: lock --pin-apt
    apt_snapshot: bool = False  # apt from the snapshot archive at the lock's date: lock --apt-snapshot


@dataclass(frozen=True)
class ProjectInputs:
    root: Path
    spec: ProjectSpec
    matrix: Matrix
    package: ProjectPackage | None  # the project as a package to install into the image
    hashes: dict[str, str]
    tables: ImageTables  # matrices' build_needs and system_libraries, read once per run
    reqs: tuple[Req, ...] = ()  # the requirements to lock
    constraints: tuple[Req, ...] = ()  # what the files include with -c: they hold uv's resolution, install nothing
    overrides: tuple[Req, ...] = ()  # envman.yaml overrides: uv puts them in place of what packages ask
    warnings: tuple[str, ...] = ()  # of reading them
    index_urls: tuple[str, ...] = ()  # the files' index options, credentials and all: for uv only, never written
    unreadable: UsageError | None = None  # a requirements file that could not be read: raised when a lock needs it

    @classmethod
    def read(cls, root: Path, spec: ProjectSpec, matrix: Matrix) -> ProjectInputs:
        reqs, constraints, warnings, includes, unreadable, indexes = _read_requirements(root, spec)
        from envman.project.imports import without_own
        from envman.project.sources.pyproject import read_pyproject

        reqs, own = without_own(root, read_pyproject(root), reqs)
        warnings += own
        package = project_package(root, spec)
        tables = load_image_tables()
        hashes = input_hashes(root, spec, matrix, package, includes, tables)
        overrides = tuple(Req(validate_requirement(o, f"overrides[{i}]", spec.source), f"{spec.source} overrides[{i}]")
                          for i, o in enumerate(spec.overrides))
        return cls(root, spec, matrix, package, hashes, tables, tuple(reqs), tuple(constraints), overrides,
                   tuple(warnings), tuple(indexes), unreadable)

    @cached_property
    def inputs_hash(self) -> str:
        """The digest of every input, computed once per run (``with_base_image`` makes another value)."""
        return sha256(canonical_json(self.hashes))

    def requirements(self) -> tuple[tuple[Req, ...], tuple[Req, ...]]:
        """(requirements, constraints); the reading's error, when a file could not be read."""
        if self.unreadable is not None:
            raise self.unreadable
        return self.reqs, self.constraints

    def with_base_image(self, base_image: str | None) -> ProjectInputs:
        """A --base-image override for this run, recorded in the lock's inputs (not in the spec's hash)."""
        if not base_image or base_image == self.spec.base_image:
            return self
        return replace(self, spec=replace(self.spec, base_image=base_image),
                       hashes={**self.hashes, BASE_OVERRIDE: base_image})


def input_hashes(root: Path, spec: ProjectSpec, matrix: Matrix, package: ProjectPackage | None,
                 includes: list[str], tables: ImageTables) -> dict[str, str]:
    """What a lock depends on: the spec, the data, and every file read (``includes``: -r/-c files)."""
    # the workload says what is trained, and a price what it costs, not what is built: no edit of them makes the lock stale
    image_spec = {k: v for k, v in spec.to_data().items() if k not in ("workload", "price_per_gpu_hour")}
    h = {"spec": sha256(canonical_json(image_spec)), "matrices": matrix.digest,
         "image_tables": tables.digest}
    files = dict.fromkeys([*spec.requirements, *(package.files if package else ()), *includes, *spec.sources])
    from envman.inputs import MAX_REQUIREMENTS, present, read_input_bytes

    for f in files:
        p = root / f
        # bounded, and a regular file only (a FIFO would block, a 200 MB setup.py cost its size in memory): a
        # link loop, a FIFO, an unreadable or oversize file is refused by name; only an absent one is "missing"
        # `uv write`'s own edit of pyproject.toml stands for the file the lock was made from (app/uvalias.py)
        h[f"file:{f}"] = (input_digest(root, f, sha256(read_input_bytes(p, f, MAX_REQUIREMENTS)))
                          if present(p) else "missing")
    return h


def project_package(root: Path, spec: ProjectSpec) -> ProjectPackage | None:
    """The project as a package to install into the image, or None (install_project: false, or not a package)."""
    if spec.install_project is False:
        return None
    pkg = find_package(root, spec.project_extras)
    if pkg is None and spec.install_project:
        why = backend_refusal(root)
        raise UsageError(f"{spec.source}: install_project: {root.name} is not a package "
                         + (f"its build backend builds ({why})" if why else "(no pyproject.toml [build-system], no setup.py)"),
                         hint="add a [build-system] table to pyproject.toml (and configure its packages), or set "
                              "install_project: false")
    return pkg


def _read_requirements(root: Path, spec: ProjectSpec):
    """(requirements, constraints, warnings, the files they include, the first error met reading them, the
    index URLs their options name)."""
    from envman.project.sources.requirements_txt import read_requirements

    reqs: list[Req] = []
    constraints: list[Req] = []
    warnings: list[str] = []
    includes: list[str] = []
    indexes: list[str] = []
    unreadable = None
    for f in spec.requirements:
        try:
            found = read_requirements(root, f)
        except UsageError as exc:
            unreadable = unreadable or exc  # `lock --check` still says the file changed, by its digest
            continue
        reqs += found.reqs
        constraints += found.constraints
        warnings += found.warnings
        includes += found.includes
        indexes += [u for _, u in found.index_urls if u not in indexes]
    for i, p in enumerate(spec.packages):
        reqs.append(Req(validate_requirement(p, f"packages[{i}]", spec.source), f"{spec.source} packages[{i}]"))
    constraints += [Req(validate_requirement(c, f"constraints[{i}]", spec.source), f"{spec.source} constraints[{i}]")
                    for i, c in enumerate(spec.constraints)]
    return reqs, constraints, warnings, includes, unreadable, indexes


def stack_files(root: Path, profile: str | None) -> StackFiles:
    """Where a stack's files go in this repository: ``Dockerfile.envman`` beside a Dockerfile of its own."""
    if profile is not None:
        return StackFiles.for_profile(profile)
    from envman.project.coexist import place_files

    return StackFiles(dockerfile=place_files(root).dockerfile)
