"""PURE: the locked stack, one immutable value, of which envman.lock (lock/lockfile.py ``build_lock``), the
Dockerfile plan (image/plan.py ``plan_dockerfile``), the SBOM (lock/sbom.py ``stack_sbom``) and stack.json
(image/plan.py ``stack_expectation``) are projections — as uv's one ``Lock`` is of its exports. app/stack.py
builds it once per stack, from the resolution, uv's answer and the project; nothing here reads a file.

Ranked below image/plan.py (tests/unit/test_architecture.py) so that the pure planner can read it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from envman.image.stages import SourceBuilds
from envman.lock.layout import StackFiles
from envman.model import Resolution


@dataclass(frozen=True)
class BaseImage:
    ref: str  # as the user or the resolver named it (a tag, or already name@digest)
    kind: str  # the resolver's base kind (slim, cuda-runtime …), or "custom" for a --base-image
    digest: str | None = None  # pinned when a registry answered (or kept from the last lock)

    @property
    def pinned(self) -> str:
        """What FROM names: the ref with its digest, when there is one and the ref does not carry it already."""
        return f"{self.ref}@{self.digest}" if self.digest and "@" not in self.ref else self.ref


@dataclass(frozen=True)
class LockedBodies:
    """The bodies of the stack's lock files, without envman's header (None: not made by this lock)."""

    req: str | None = None  # requirements.lock.txt: every Python package, hashed
    fw: str | None = None  # requirements.framework.lock.txt: the framework's closure
    pylock: str | None = None  # pylock.toml
    request: str | None = None  # the digest of the uv request these answer
    source: str | None = None  # the builder stage's source-only packages
    build: str | None = None  # what the builder builds them with
    rest: str | None = None  # the last install without the packages built from a URL


@dataclass(frozen=True)
class ProjectFacts:
    """The project itself, as the image installs and the smoke test checks it."""

    installed: bool = False  # installed as a package after its source
    imports: tuple[tuple[str, str | None], ...] = ()  # [distribution, module or None], in the order they import
    scripts: tuple[str, ...] = ()  # console scripts the smoke test runs with --help
    env: tuple[tuple[str, str], ...] = ()  # the spec's env:, then PYTHONPATH when it runs from its source tree
    command: tuple[str, ...] = ()  # the image's CMD


@dataclass(frozen=True)
class LockedStack:
    """One stack, locked: everything its files are made from. ``fw_lock``/``req_lock``/``source_lock``/``tools_lock``
    name the lock files the image's install steps mount (None: no such step); ``files`` None is a stack not tied to
    a repository's names (the lock then records neither its inputs nor its Dockerfile)."""

    name: str
    res: Resolution
    base: BaseImage
    inputs_hash: str
    files: StackFiles | None = None
    profile: str | None = None
    inputs: Mapping[str, str] | None = None  # each input's digest (lock --check names the one that changed)
    locked: LockedBodies = LockedBodies()
    apt: tuple[str, ...] = ()  # the system packages the image installs with apt
    apt_pins: Mapping[str, str] = field(default_factory=dict)
    apt_snapshot: str | None = None
    source_date_epoch: int | None = None  # the lock's date (lock/epoch.py); None: the Dockerfile sets none
    date_from: str = ""  # where the date came from (the newest upload among the framework's files)
    builds: SourceBuilds | None = None  # the builder stage's plan
    fw_lock: str | None = None
    req_lock: str | None = None
    source_lock: str | None = None
    tools_lock: str | None = None
    project: ProjectFacts = ProjectFacts()
    devel_image: str | None = None  # the CUDA devel image CUDA sources build on
    offline_image: str | None = None  # a wheelhouse image every pip install reads (envman fetch)
    version: str = ""  # the envman that locked it

    @property
    def stack_file(self) -> str:
        return self.files.stack if self.files is not None else StackFiles().stack

    @property
    def sbom_file(self) -> str | None:
        return self.files.sbom if self.files is not None else None
