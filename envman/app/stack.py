"""One stack's files, in named steps over values: resolve the stack, the requirement lines uv is asked for,
the Python lock (kept when uv's request is the last lock's, else one uv run), the source builds, envman.lock,
then the Dockerfile and the expected stack rendered from them. Nothing is written here (app/generate.py)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

from envman import __version__
from envman.app.basedigest import start_digest
from envman.app.lockinputs import ProjectInputs
from envman.errors import LockError, ToolError
from envman.files import ownership, sha256, with_header
from envman.image.stages import SourceBuilds, plan_source_builds, system_libraries
from envman.image.tables import load_image_tables
from envman.lock.apt import snapshot_stamp
from envman.lock.artifacts import (
    by_url,
    refuse_framework_build_without_framework,
    refuse_in_framework_closure,
    refuse_unbuildable,
    refuse_vcs,
    source_only,
)
from envman.lock.epoch import source_date_epoch
from envman.lock.layout import StackFiles
from envman.lock.lockfile import Lock, build_lock, try_read_lock
from envman.lock.pins import check_user_requirements, cuda_constraints, framework_pins, numpy_constraints
from envman.lock.sbom import SbomInputs, render_sbom
from envman.lock.uv import PythonLock, framework_closure, parse_uv_output, python_lock_job, python_platform
from envman.model import Matrix, Resolution
from envman.project.requirements import Req
from envman.project.spec import ProjectSpec
from envman.resolve.request import build_request
from envman.resolve.resolver import resolve_stack

KEPT = "Python lock kept: uv's request is the last lock's (`envman lock --upgrade` asks the index again)"


@dataclass(frozen=True)
class LockOptions:
    no_lock: bool = False  # make no Python lock (keep one whose inputs are unchanged), ask no registry
    upgrade: bool = False  # ask the index (and the base image's registry) again
    timeout: float | None = None  # seconds uv may take
    progress: Any = None
    offline_image: str | None = None  # a wheelhouse image every pip install of the Dockerfile reads
    pin_apt: Callable[[str, tuple[str, ...]], dict[str, str]] | None = None  # (base, packages) → pins: lock --pin-apt
    apt_snapshot: bool = False  # apt from the snapshot archive at the lock's date: lock --apt-snapshot


@dataclass
class Stack:
    """One stack's files, checked and rendered, not yet written."""

    files: StackFiles
    spec: ProjectSpec
    resolution: Resolution
    lock: Lock
    writes: list[tuple[Path, str]]
    gpu: bool
    notes: list[str]
    install_project: bool = False
    apt: tuple[str, ...] = ()  # what the Dockerfile installs with apt
    last: Lock | None = None  # the lock on disk before this run (None: none, or unreadable)


@dataclass
class Lines:
    """What uv is asked for: the framework's pins, the user's requirements and -c constraints, the project's
    build backend and extras."""

    pins: list[str]
    reqs: list[Req]
    constraints: list[Req]
    extra: list[str]
    overrides: list[Req] = field(default_factory=list)  # envman.yaml overrides: ([tool.uv] override-dependencies)
    notes: list[str] = field(default_factory=list)  # lines that yielded to the stack (framework_wins)

    @property
    def all(self) -> list[str]:
        return self.pins + [r.line for r in self.reqs] + self.extra

    @property
    def roots(self) -> list[str]:
        """The framework's distributions (where its own image layer starts)."""
        return [p.split("==")[0].split("[")[0] for p in self.pins]


@dataclass
class PythonFiles:
    """The bodies of a stack's Python locks (None: not locked), and the uv request they answer."""

    req: str | None = None
    fw: str | None = None
    pylock: str | None = None
    build: str | None = None  # a requirements.build.lock.txt kept from the last lock
    request: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def locked(self) -> PythonLock | None:
        return parse_uv_output(self.req) if self.req is not None else None


@dataclass
class Builds:
    """What the builder stage makes: the plan and its three locks' bodies."""

    plan: SourceBuilds | None = None
    source: str | None = None
    build: str | None = None
    rest: str | None = None  # the image's last install without the packages built from a URL
    notes: list[str] = field(default_factory=list)


def render_stack(inputs: ProjectInputs, spec: ProjectSpec, files: StackFiles, opts: LockOptions) -> Stack:
    """The stack ``spec`` asks for (the project's, or one profile's), its files named by ``files``."""
    label = f"profile {files.profile}: " if files.profile else ""
    res = resolve_stack(inputs.matrix, spec_request(inputs.matrix, spec))
    if spec.base_image:  # the user's own base: its glibc is not known, the lock keeps manylinux 2.28
        res = replace(res, glibc=None)
    lines = requirement_lines(inputs, spec, res)
    base, base_kind = (spec.base_image, "custom") if spec.base_image else (res.base_image, res.base_kind)
    last = try_read_lock(inputs.root / files.lock)
    # the base image's digest: kept from the last lock, or asked of its registry once uv runs (the thread's
    # imports of urllib and ssl would otherwise delay uv's start)
    digest = None if opts.no_lock else cache(lambda: start_digest(last, base, upgrade=opts.upgrade))
    try:
        python = python_locks(inputs, spec, res, lines, files, last, opts, digest)
    except ToolError as err:  # an index or uv failed: init still shows the stack it was locking
        err.stack, err.base_image = res, base  # type: ignore[attr-defined]
        raise
    notes = list(inputs.warnings) + lines.notes + python.notes
    if digest is not None:
        base_digest, digest_note = digest()()
        notes.append(digest_note)
    else:
        base_digest = _kept_digest(last, base, inputs.inputs_hash)
        if base_digest:
            notes.append(f"base image {base} pinned to {base_digest} (kept: --no-lock asks no registry)")
    tables = load_image_tables()
    locked = python.locked
    libs, lib_notes = system_libraries([p.name for p in locked.packages] if locked else [r.name for r in lines.reqs],
                                       tables.system_libraries)
    notes += lib_notes
    apt = tuple(sorted(set(spec.system_packages) | set(libs)))
    date = lock_date(python)
    pins, snapshot, apt_notes = apt_choice(last, apt, base, base_digest, date[0], opts)
    notes += apt_notes
    builds = source_builds(inputs, res, lines, python, base_kind, opts)
    notes += builds.notes
    pkg = inputs.package
    notes += _package_notes(pkg, builds, opts.no_lock)
    lock = build_lock(name=spec.name, inputs_hash=inputs.inputs_hash, res=res, base_image=base, base_kind=base_kind,
                      base_digest=base_digest, system_packages=list(apt), req_text=python.req, fw_text=python.fw,
                      pylock=python.pylock is not None, profile=files.profile, files=files, inputs=inputs.hashes,
                      platform=python_platform(res), request=python.request, apt_pins=pins, apt_snapshot=snapshot)
    lock = with_date(lock, last, date)

    # imported here, after uv started (its request needs none of them; _while_uv_resolves imports them)
    from envman.image.plan import plan_dockerfile, smoke_expectation, stack_summary, with_index_secret
    from envman.image.render import render_dockerfile, render_json

    # the lock's hash is final before anything names it: the digests of the files made from it are outside it
    own = project_checks(inputs.root, spec, pkg is not None)
    if own.env:
        notes.append(f"the project runs from its source tree: {own.env[0][1]} is on PYTHONPATH (its packages "
                     + ", ".join(str(i[1]) for i in own.imports) + ", which the smoke test imports)")
    plan = plan_dockerfile(
        name=spec.name, res=res, base_image=f"{base}@{base_digest}" if base_digest and "@" not in base else base,
        base_kind=base_kind, system_packages=apt, env=spec.env + own.env, command=spec.command, lock_hash=lock.lock_hash,
        inputs_hash=inputs.inputs_hash, fw_lock=files.fw if lines.pins and (python.fw is not None or opts.no_lock) else None,
        # the second install layer only when something beyond the framework's closure is locked
        req_lock=(files.rest if builds.rest is not None else files.req)
        if lines.all and (lines.reqs or lines.extra or not lines.pins) else None,
        version=__version__, stack_file=files.stack, offline_image=opts.offline_image, source_builds=builds.plan,
        source_lock=files.source if builds.plan is not None else None, devel_image=_devel_image(inputs.matrix, res),
        install_project=pkg is not None, build_lock=files.build if builds.build is not None else None,
        source_date_epoch=lock.source_date_epoch, sbom_file=files.sbom, apt_pins=pins, apt_snapshot=snapshot,
    )
    from envman.lock.indexes import SECRET, named_in

    if any(named_in(t or "") for t in (python.req, python.fw, python.pylock)):
        plan = with_index_secret(plan, SECRET)  # its private indexes' URLs reach pip as a build secret
    known = (last.data.get("files") or {}).get(files.dockerfile) if last is not None else None
    body = render_dockerfile(plan, known if isinstance(known, str) else None).lstrip("\n")
    known_sbom = (last.data.get("files") or {}).get(files.sbom) if last is not None else None
    sbom = render_sbom(SbomInputs(spec.name, lock.lock_hash, lock.source_date_epoch or 0, base, base_digest,
                                  python.pylock, {a: pins.get(a) for a in sorted({*apt, *pins})}, stack_summary(res),
                                  __version__), known_sbom if isinstance(known_sbom, str) else None)
    imports = [[r.name, None] for r in lines.reqs] + [[name, None] for name in lines.roots] + own.imports
    # the framework's distributions first, as a training script imports them: native libraries can clash by the
    # order they load in (tensorflow 2.20 before triton 3.8 segfaults, triton first does not; measured 2026-12-02)
    first = {str(n).lower(): i for i, n in enumerate(lines.roots)}
    order = sorted(imports, key=lambda i: (first.get(str(i[0]).lower(), len(first)), i[0], i[1] or ""))
    stack_text = render_json(smoke_expectation(res, order, lock.lock_hash, own.scripts))
    recorded = {files.dockerfile: body, files.stack: stack_text, files.pylock: python.pylock,
                files.source: builds.source, files.build: builds.build, files.rest: builds.rest, files.sbom: sbom}
    lock = lock.with_changes(files={k: body_digest(t) for k, t in recorded.items() if t is not None})
    root = inputs.root
    writes: list[tuple[Path, str]] = [(root / files.dockerfile, with_header(body, inputs.inputs_hash)),
                                      (root / files.stack, stack_text), (root / files.sbom, sbom)]
    locks = ((files.req, python.req), (files.fw, python.fw), (files.pylock, python.pylock),
             (files.source, builds.source), (files.build, builds.build), (files.rest, builds.rest))
    writes += [(root / name, with_header(text, inputs.inputs_hash)) for name, text in locks if text is not None]
    return Stack(files, spec, res, lock, writes, plan.gpu, [label + n for n in notes], pkg is not None,
                 plan.apt_packages, last)


def lock_date(python: PythonFiles) -> tuple[int, str]:
    """The lock's date (lock/epoch.py): the newest upload among the framework's locked files."""
    fw = [p.name for p in parse_uv_output(python.fw).packages] if python.fw is not None else []
    return source_date_epoch(python.pylock, fw)


def apt_choice(last: Lock | None, apt: tuple[str, ...], base: str, digest: str | None, sde: int,
               opts: LockOptions) -> tuple[dict[str, str], str | None, list[str]]:
    """The apt pins and snapshot of this lock: asked for now (--pin-apt, --apt-snapshot), else kept from the last
    lock while its apt packages and base image are the same (and not --upgrade); and the notes that say so."""
    if not apt:
        return {}, None, []
    same = (last is not None and not opts.upgrade and list(last.get("system_packages") or []) == list(apt)
            and last.base_image.get("ref") == base and last.base_image.get("digest") == digest)
    pins = opts.pin_apt(f"{base}@{digest}" if digest and "@" not in base else base, apt) if opts.pin_apt else (
        last.apt_pins if same and last is not None else {})
    snapshot = snapshot_stamp(sde) if opts.apt_snapshot else (last.apt_snapshot if same and last is not None else None)
    notes = []
    if pins:
        how = "by apt in the base image, now" if opts.pin_apt else "kept from the last lock"
        notes.append(f"apt: the closure of {', '.join(apt)} pinned ({len(pins)} package{'s' * (len(pins) != 1)}, {how})")
    else:
        notes.append(f"apt: {', '.join(apt)} not pinned: the build installs what the archive offers that day "
                     "(`envman lock --pin-apt` pins the closure)")
    if snapshot:
        notes.append(f"apt: from the snapshot archive at {snapshot} (snapshot.debian.org / snapshot.ubuntu.com "
                     "must be reachable from the build)")
    return pins, snapshot, notes


def with_date(lock: Lock, last: Lock | None, date: tuple[int, str]) -> Lock:
    """The lock's date and, for a re-lock to the same hash, the reproducible images `build --verify-repro`
    recorded: outside the lock's identity, as the date derives from pylock.toml, which it covers."""
    sde, where = date
    kept = [r for r in (last.reproducible.get("images") or []) if r.get("lock_hash") == lock.lock_hash] if last else []
    return lock.with_changes(reproducible={"source_date_epoch": sde, "source_date_epoch_from": where,
                                           **({"images": kept} if kept else {})})


@dataclass(frozen=True)
class ProjectChecks:
    imports: list[list[str | None]]  # [distribution, module or None] the smoke test imports of the project itself
    scripts: list[str]  # its console scripts, run with --help
    env: tuple[tuple[str, str], ...]  # PYTHONPATH when it runs from its source tree


def project_checks(root: Path, spec: ProjectSpec, installed: bool) -> ProjectChecks:
    """What the smoke test checks of the project itself: installed, what pip installed of its distribution (its
    top-level modules, read from the installed RECORD) and its console scripts' --help; run from its source, its
    top-level packages from the work directory, which is then on PYTHONPATH (said at init)."""
    from envman.image.plan import WORKDIR
    from envman.project.imports import console_scripts, distribution_name, top_level_packages
    from envman.project.requirements import read_pyproject

    doc = read_pyproject(root)
    if installed:
        dist = distribution_name(root, doc)
        return ProjectChecks([[dist, None]] if dist else [], console_scripts(root, doc), ())
    packages = top_level_packages(root)
    if not packages:
        return ProjectChecks([], [], ())
    env = () if any(k == "PYTHONPATH" for k, _ in spec.env) else (("PYTHONPATH", WORKDIR),)
    return ProjectChecks([[spec.name, p] for p in packages], [], env)


def body_digest(text: str) -> str:
    """The digest envman.lock records for a file made from it: its body, without envman's header line."""
    head, _, rest = text.partition("\n")
    return sha256(rest if "generated by envman" in head else text)


def spec_request(matrix: Matrix, spec: ProjectSpec):
    fields = {"framework": f"{spec.source}: framework", "python": f"{spec.source}: python",
              "driver": f"{spec.source}: driver", "cuda": f"{spec.source}: cuda"}
    return build_request(matrix, framework=spec.framework, python=spec.python, targets=list(spec.targets),
                         driver=spec.driver, cuda=spec.cuda, cpu=spec.cpu, cuda_devel=spec.cuda_devel, fields=fields,
                         own_base=bool(spec.base_image))


def profile_spec(spec: ProjectSpec, profile) -> ProjectSpec:
    """A profile overrides the GPU-facing keys of the project's spec."""
    over: dict = {"profiles": ()}
    if profile.targets:
        over.update(targets=profile.targets, cpu=False)
    if profile.cpu:
        over.update(cpu=True, targets=())
    for key in ("driver", "cuda", "framework", "python"):
        if getattr(profile, key):
            over[key] = getattr(profile, key)
    return replace(spec, **over)


def requirement_lines(inputs: ProjectInputs, spec: ProjectSpec, res: Resolution) -> Lines:
    """The framework's pins, then the user's requirements (checked against the stack), then the project's
    build backend and chosen extras (locked like everything else: the project then installs offline)."""
    reqs, constraints = inputs.requirements()
    pkg = inputs.package
    notes: list[str] = []
    wins = spec.framework_wins
    if numpy_constraints(res, inputs.matrix):
        notes.append(f"{res.framework} {res.version} was built against NumPy 1 (matrices/{res.framework}.yaml "
                     "numpy_abi: 1): numpy<2 is a constraint of the lock (NumPy 2 cannot load its compiled modules)")

    def checked(lines: list[Req]) -> list[Req]:
        return check_user_requirements(res, spec.companions, lines, wins, notes)

    # a -c line (or an override) on the framework is checked against the stack like a requirement; the others go to uv
    return Lines(framework_pins(res, spec.companions), checked(list(reqs)), checked(list(constraints)),
                 list(pkg.build_requires + pkg.extra_requires) if pkg else [], checked(list(inputs.overrides)), notes)


def python_locks(inputs: ProjectInputs, spec: ProjectSpec, res: Resolution, lines: Lines, files: StackFiles,
                 last: Lock | None, opts: LockOptions, digest: Callable[[], Any] | None = None) -> PythonFiles:
    """The stack's Python locks: kept when uv's request is the last lock's (uv lock's rule: ``--upgrade`` asks
    the index again), else one uv run; with --no-lock, the existing ones when their inputs are unchanged."""
    if not lines.all:
        return PythonFiles()
    root = inputs.root
    if opts.no_lock:
        old = _reusable_python_lock(root, files, inputs.inputs_hash)
        if old is None:
            return PythonFiles(notes=["--no-lock: Python dependencies are NOT locked yet; run `envman lock` before "
                                      "`envman build`"])
        return PythonFiles(*old, request=_last_request(last),
                           notes=["--no-lock: kept the existing Python lock (its inputs are unchanged)"])
    from envman.lock.indexes import lock_index_urls

    # the requirement files' own index options reach uv whole (their tokens too), through its environment
    index_urls = lock_index_urls(res.index_url, spec.index_urls, inputs.index_urls)
    constraints = (cuda_constraints(res, inputs.matrix.toolkit_wheels) + numpy_constraints(res, inputs.matrix)
                   + [c.line for c in lines.constraints])

    def job_with(more: list[str], more_overrides: list[str] | tuple[str, ...] = ()):
        return python_lock_job(lines.all, res.python, index_urls, lines.roots, res, upgrade=opts.upgrade,
                               previous=(_our_body(root / files.req), _our_body(root / files.pylock)),
                               timeout=opts.timeout, constraints=constraints + more,
                               find_links=tuple(spec.find_links),
                               overrides=[o.line for o in lines.overrides] + list(more_overrides))

    job = job_with([])
    key = job.key()  # what the inputs ask: the exclusions below follow from uv's answer to it
    seed = job.request.seed  # the last pylock.toml, when envman wrote it and nobody edited it (--upgrade: none)
    kept = seed is not None and _last_request(last) == key
    lr = job.finish(seed) if kept and seed is not None else job.compile(opts.progress, lambda: _while_uv_resolves(digest))
    excluded_notes: list[str] = []
    if not kept:
        lr, excluded_notes = _settled(lr, res.python, lines.all, job_with, opts, digest)
    notes = _check_user_hashes([*inputs.reqs, *inputs.constraints], lr.pylock_text) + excluded_notes
    notes.append(KEPT if kept else f"locked {len(lr.python_lock.packages)} Python packages with sha256 hashes (uv)")
    notes += lr.notes + stack_mismatches(res, lr.versions)
    if lr.sdist_only:
        notes.append(f"no wheel for {', '.join(sorted(lr.sdist_only))}: the image builds them from source")
    build = _our_body(root / files.build, made_from=inputs.inputs_hash) if kept else None
    return PythonFiles(lr.req_text, lr.fw_text if lines.pins else None, lr.pylock_text, build, key, notes)


def _settled(lr, python: str, inputs: list[str], job_with, opts: LockOptions, digest) -> tuple[Any, list[str]]:
    """uv's answer, corrected where the image would fail on it, and uv asked again (a few times at most):
    a pin whose Requires-Python excludes the target's Python (uv ignores the upper bounds there:
    backports-strenum 1.3.1 is <3.11; pip refuses it) is excluded (``name!=version``); of two distributions
    of one module (tensorflow beside tensorflow-cpu) the one the inputs name is kept (lock/one_module.py).
    One left is an error that names it."""
    from envman.lock.one_module import clashes, fix, load_families, load_orders, order_warnings

    families = load_families()
    constraints: list[str] = []
    overrides: list[str] = []
    notes: list[str] = []
    for _ in range(3):
        modules = fix(lr.versions, _via(lr), inputs, _requires_of(lr), families)
        if not lr.python_excluded and modules is None:
            return lr, notes + order_warnings(lr.versions, families, load_orders())
        for name, version, spec in lr.python_excluded:
            constraints.append(f"{name}!={version}")
            notes.append(f"{name} {version} requires Python {spec}, which excludes {python} (uv ignores the upper "
                         f"bounds of Requires-Python, pip refuses it): excluded, uv asked again")
        if modules is not None:
            overrides += modules.overrides
            constraints += modules.constraints
            notes += modules.notes
        lr = job_with(constraints, overrides).compile(opts.progress, lambda: _while_uv_resolves(digest))
    if lr.python_excluded:
        name, version, spec = lr.python_excluded[0]
        raise LockError(f"{name} {version} requires Python {spec}, not {python}, and uv found no other release for "
                        f"Python {python} after excluding {', '.join(c for c in constraints if '!=' in c)}",
                        hint=f"pass --python with a version {spec} admits, or pin {name} in envman.yaml constraints: "
                             "to a release that supports this Python")
    for family, held in clashes(lr.versions, families):
        raise LockError(f"the lock still holds {', '.join(held)}, which all install the module {family.module!r}, "
                        f"after uv was asked to keep one", hint="name exactly one of them in the project's requirements")
    return lr, notes


def _via(lr) -> dict[str, list[str]]:
    return {p.name: p.via for p in lr.python_lock.packages}


def _requires_of(lr) -> Callable[[str], list[str]]:
    """A locked package's Requires-Dist, read only when a clash asks (lock/graph.py's disk cache holds them)."""

    @cache
    def requires(name: str) -> list[str]:
        from envman.lock.graph import requires_dist
        from envman.lock.pylock import parse_pylock

        pkg = next((p for p in parse_pylock(lr.pylock_text or "") if p.name == name), None)
        return (requires_dist(pkg, 30.0) or []) if pkg is not None else []

    return requires


def source_builds(inputs: ProjectInputs, res: Resolution, lines: Lines, python: PythonFiles, base_kind: str,
                  opts: LockOptions) -> Builds:
    """The packages the lock pins without a wheel: refused when the image could not build them, else the
    builder stage's plan and locks (its build requirements locked by a second uv run, unless kept)."""
    locked, py_text = python.locked, python.pylock
    if py_text is None or locked is None:
        return Builds()
    tables = load_image_tables()
    reqs = inputs.reqs
    refuse_unbuildable(py_text, res.python)
    refuse_vcs(py_text, {**{r.line: r.origin for r in reqs if r.req.url}, **{r.name: r.origin for r in reqs}})
    src = source_only(py_text)
    refuse_framework_build_without_framework(
        [f"{n}=={v}" for n, v in src if n in tables.build_needs and tables.build_needs[n].framework], res.framework)
    if src and lines.pins:
        refuse_in_framework_closure(src, framework_closure(locked, lines.roots), res.framework)
    project, project_notes = _project_build(inputs, locked, res)
    sb = plan_source_builds(src, tables.build_needs, res.cuda if res.variant != "cpu" else None,
                            base_kind.startswith("cuda-"), tables.nvcc, project=project)
    if sb is None:
        return Builds()
    if sb.cuda and sb.nvcc is None and not base_kind.startswith("cuda-"):
        who = [n for n, _ in sb.packages] + (["the project"] if sb.project else [])
        raise LockError(f"{', '.join(who)} compiles CUDA code and no nvcc wheel is known "
                        f"for CUDA {res.cuda} (matrices/build_needs.yaml nvcc)",
                        hint="set cuda_devel: true in envman.yaml (an nvidia/cuda devel base), or pin a version with a wheel")
    built = {n for n, _ in sb.packages}
    rest = locked.render({p.name for p in locked.packages} - built) if by_url(py_text, built) else None
    build = (python.build if python.build is not None or opts.no_lock
             else _lock_build_deps(sb, _real_urls(py_text, inputs, res), locked, res))
    return Builds(sb, locked.render(built), build, rest, list(sb.notes) + project_notes)


def _real_urls(py_text: str, inputs: ProjectInputs, res: Resolution) -> str:
    """pylock.toml with its private indexes' URLs in place of their names (to fetch an sdist at lock time)."""
    import os

    from envman.lock.indexes import expand_indexes, project_indexes

    private = project_indexes(res.index_url, inputs.spec.index_urls, inputs.index_urls, os.environ)
    return expand_indexes(py_text, private, credentials=True)


def _package_notes(pkg, builds: Builds, no_lock: bool) -> list[str]:
    """What init says of the project as a package: how it is installed, what it compiles, what its build asks for."""
    if pkg is None:
        return []
    notes = [f"the project is a package ({pkg.kind}): installed into the image after its source, "
             "without dependencies (they are locked); editable in the devcontainer"
             + (f"; extras {', '.join(pkg.extras)} locked" if pkg.extras else "")]
    if pkg.compiled is not None:
        from envman.project.compiled import describe

        notes.append(describe(pkg.compiled) + ("" if builds.plan is not None or not pkg.compiled.kinds else
                                               " (after `envman lock`: --no-lock plans no builder)"))
    if pkg.backend_requires and no_lock:
        notes.append(f"the project's build asks for {', '.join(pkg.backend_requires)} ({pkg.backend_source}): what "
                     "the lock will not hold is installed in the builder stage, which then builds the project into a "
                     "wheel (after `envman lock`: --no-lock plans no builder)")
    return notes


def _project_build(inputs: ProjectInputs, locked, res: Resolution):
    """The project's own build, as a row of the builder's table (and its note), when it compiles code
    (envman/project/compiled.py) or its backend asks for what the lock does not hold (project/backend_requires.py):
    the image installs it offline, so setuptools would fetch a missing setup_requires there, and fail."""
    from envman.image.stages import BUILDER, BuildNeed
    from envman.lock.uv import target_environment
    from envman.project.backend_requires import unmet

    pkg = inputs.package
    if pkg is None:
        return None, []
    missing = unmet(pkg.backend_requires, {p.name: p.version for p in locked.packages},
                    target_environment(res.python, python_platform(res)))
    compiled = pkg.compiled if pkg.compiled is not None and pkg.compiled.kinds else None
    if compiled is None and not missing:
        return None, []
    notes = [f"the project's build asks for {', '.join(missing)} ({pkg.backend_source}), which the lock does not "
             f"hold and the image installs offline: the project is built into a wheel in the builder stage {BUILDER} "
             "with them (hash-checked, in the build lock); they never reach the image"] if missing else []
    return BuildNeed("the project", framework=bool(compiled and compiled.framework), cuda=bool(compiled and compiled.cuda),
                     compiler=compiled is not None, source=f"its {pkg.kind}",
                     build_requires=pkg.build_requires + (compiled.imports if compiled else ()) + pkg.backend_requires
                     ), notes


def _lock_build_deps(sb, py_text: str, locked, res: Resolution) -> str:
    """requirements.build.lock.txt: the sdists' own build requirements, the table's, nvcc; hashed by uv and
    constrained to the main lock's pins."""
    from envman.lock.build_deps import build_requires_of, compile_build_lock, fetch_sdist, sdist_urls

    urls = sdist_urls(py_text)
    reqs = list(sb.build_requires) + ([sb.nvcc[0], *sb.nvcc_also] if sb.nvcc else [])
    for name, _ in sb.packages:
        url, sha = urls[name]
        reqs.extend(build_requires_of(fetch_sdist(url, sha), url.rsplit("/", 1)[-1]))
    # a `name @ url` package pins a file, not a version: it cannot constrain uv (nor will a build need it)
    direct = by_url(py_text, {p.name for p in locked.packages})
    pins = {p.name: p.version for p in locked.packages if p.name not in direct}
    return compile_build_lock(reqs, pins, res.python,
                              [res.index_url] if res.index_url else [], platform=python_platform(res))


def stack_mismatches(res: Resolution, versions: dict[str, str]) -> list[str]:
    """Warnings where the locked NVIDIA wheels differ from what the matrix expects of the stack (cuDNN, NCCL,
    CUDA runtime): the smoke test and the driver floor follow the matrix, so the user must hear about it."""
    def locked(prefix: str) -> tuple[str, str] | None:
        for name, v in sorted(versions.items()):
            if re.fullmatch(prefix + r"(-cu\d+)?", name):
                return name, v
        return None

    out: list[str] = []
    for what, prefix, want in (("cuDNN", "nvidia-cudnn", res.cudnn), ("NCCL", "nvidia-nccl", res.nccl),
                               ("CUDA", "nvidia-cuda-runtime", res.cuda)):
        got = locked(prefix)
        if not want or got is None:
            continue
        parts = len(str(want).split("."))
        if got[1].split(".")[:min(parts, 2)] != str(want).split(".")[:min(parts, 2)]:
            out.append(f"warning: the lock pins {got[0]}=={got[1]} but the stack expects {what} {want} "
                       f"(smoke test and driver floor follow the stack); pin it with a constraint or choose another stack")
    return out


def _devel_image(matrix: Matrix, res: Resolution) -> str | None:
    if res.cuda is None:
        return None
    return next((img.devel for img in matrix.base_images.cuda if str(img.cuda) == res.cuda), None)


def _while_uv_resolves(digest: Callable[[], Any] | None = None) -> None:
    """What a lock needs later and can prepare while uv waits on the network (memoized where it is used)."""
    import yaml  # noqa: F401  (compose.yaml names the new lock hash: it is dumped again)

    from envman._compat import tomllib  # noqa: F401  (uv's pylock.toml is parsed right after it exits)
    from envman.image.kit import kit_files
    from envman.image.render import warm

    if digest is not None:
        digest()  # its registry is asked in a thread from now on
    warm()
    load_image_tables()
    kit_files()


def _our_body(path: Path, made_from: str | None = None) -> str | None:
    """A file envman generated and nobody edited, without its header (to seed uv's preferences); with
    ``made_from``, only when it was made from inputs of that hash."""
    o = ownership(path)
    if not o.exists or not o.ours or o.edited or (made_from is not None and o.inputs_hash != made_from):
        return None
    return path.read_text(encoding="utf-8").partition("\n")[2]


def _last_request(last: Lock | None) -> str | None:
    """The uv request the current lock's Python locks answer, when envman wrote it and nobody edited it."""
    key = last.python_lock.get("request") if last is not None and last.is_intact() else None
    return key if isinstance(key, str) else None


def _kept_digest(last: Lock | None, base: str, inputs_hash: str) -> str | None:
    """--no-lock asks no registry: keep the digest the current lock pinned, if it is for the same inputs."""
    if last is None:
        return None
    b = last.base_image
    if last.inputs_hash == inputs_hash and b.get("ref") == base:
        return b.get("digest")
    return None


def _check_user_hashes(reqs: list[Req], pylock_text: str | None) -> list[str]:
    """The requirement lines' own --hash options against the files the lock pins (a LockError on a mismatch)."""
    from envman.lock.pylock import parse_pylock
    from envman.lock.user_hashes import check_user_hashes

    return check_user_hashes(reqs, parse_pylock(pylock_text)) if pylock_text is not None else []


def _reusable_python_lock(root: Path, files: StackFiles,
                          inputs_hash: str) -> tuple[str, str | None, str | None, str | None] | None:
    def body(name: str) -> str | None:
        return _our_body(root / name, made_from=inputs_hash)

    req = body(files.req)
    if req is None:
        return None
    return req, body(files.fw), body(files.pylock), body(files.build)
