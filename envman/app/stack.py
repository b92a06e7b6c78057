"""One stack's files, in named steps over values; nothing is written here (app/generate.py)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

from envman import __version__
from envman.app.basedigest import start_digest
from envman.app.lockinputs import LockOptions, ProjectInputs
from envman.app.pythonlocks import python_locks, requirement_lines
from envman.app.sourcebuilds import Builds, source_builds
from envman.errors import ToolError
from envman.files import sha256, with_header
from envman.image.stages import system_libraries
from envman.lock.apt import snapshot_stamp
from envman.lock.epoch import source_date_epoch
from envman.lock.layout import StackFiles
from envman.lock.lockfile import Lock, build_lock, try_read_lock
from envman.lock.sbom import stack_sbom
from envman.lock.toolchain import runtime_toolchain
from envman.lockedstack import BaseImage, LockedBodies, LockedStack, ProjectFacts
from envman.model import Matrix, Resolution
from envman.project.req import pinned_in
from envman.project.spec import ProjectSpec
from envman.resolve.request import build_request
from envman.resolve.resolver import resolve_stack


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


def render_stack(inputs: ProjectInputs, spec: ProjectSpec, files: StackFiles, opts: LockOptions) -> Stack:
    """The stack ``spec`` asks for (the project's, or one profile's), its files named by ``files``: locked into one
    value (``lock_stack``), of which envman.lock, the Dockerfile, the SBOM and stack.json are projections."""
    label = f"profile {files.profile}: " if files.profile else ""
    stack, last, notes = lock_stack(inputs, spec, files, opts)
    lock = with_date(build_lock(stack), last, (stack.source_date_epoch or 0, stack.date_from))

    # imported here, after uv started (its request needs none of them; _while_uv_resolves imports them)
    from envman.image.plan import plan_dockerfile, stack_expectation, with_index_secret
    from envman.image.render import render_dockerfile, render_json

    # the lock's hash is final before anything names it: the digests of the files made from it are outside it
    plan = plan_dockerfile(stack, lock.lock_hash)
    from envman.lock.indexes import SECRET, named_in

    bodies = stack.locked
    if any(named_in(t or "") for t in (bodies.req, bodies.fw, bodies.pylock)):
        plan = with_index_secret(plan, SECRET)  # its private indexes' URLs reach pip as a build secret
    known = {k: v for k, v in ((last.data.get("files") or {}) if last else {}).items() if isinstance(v, str)}
    body = render_dockerfile(plan, known.get(files.dockerfile)).lstrip("\n")
    sbom = stack_sbom(stack, lock.lock_hash)
    stack_text = render_json(stack_expectation(stack, lock.lock_hash))
    locks = ((files.req, bodies.req), (files.fw, bodies.fw), (files.pylock, bodies.pylock),
             (files.source, bodies.source), (files.build, bodies.build), (files.rest, bodies.rest))
    recorded = {files.dockerfile: body, files.stack: stack_text, files.sbom: sbom, **dict(locks[2:])}
    lock = lock.with_changes(files={k: body_digest(t) for k, t in recorded.items() if t is not None})
    root = inputs.root
    writes: list[tuple[Path, str]] = [(root / files.dockerfile, with_header(body, stack.inputs_hash)),
                                      (root / files.stack, stack_text), (root / files.sbom, sbom)]
    # a lock file's header names its content only: the install step that mounts it is then cached while its locked
    # lines are (an edit of command: or env: changes the inputs' hash, not these bytes); envman.lock names the inputs
    writes += [(root / name, with_header(text, None)) for name, text in locks if text is not None]
    return Stack(files, spec, stack.res, lock, writes, plan.gpu, [label + n for n in notes], stack.project.installed,
                 plan.apt_packages, last)


def lock_stack(inputs: ProjectInputs, spec: ProjectSpec, files: StackFiles,
               opts: LockOptions) -> tuple[LockedStack, Lock | None, list[str]]:
    """The stack locked: resolved, its Python locks (uv run once, or kept), its source builds, its base image's
    digest and apt choice, the project's facts; with the lock on disk before this run and what init says of it."""
    res = resolve_stack(inputs.matrix, spec_request(inputs.matrix, spec))
    if spec.base_image:  # the user's own base: its glibc is not known, the lock keeps manylinux 2.28
        res = replace(res, glibc=None)
    lines = requirement_lines(inputs, spec, res)
    base, base_kind = (spec.base_image, "custom") if spec.base_image else (res.base_image, res.base_kind)
    inputs_hash = inputs.inputs_hash
    last = try_read_lock(inputs.root / files.lock)
    # the base image's digest: kept from the last lock, or asked of its registry once uv runs (the thread's
    # imports of urllib and ssl would otherwise delay uv's start)
    digest = None if opts.no_lock else cache(lambda: start_digest(last, base, upgrade=opts.upgrade))
    try:
        python = python_locks(inputs, spec, res, lines, files, last, opts, digest)
    except ToolError as err:  # an index or uv failed: init still shows the stack it was locking
        err.stack, err.base_image = res, base  # type: ignore[attr-defined]
        where = pinned_in(f"{err.message}\n{err.hint}", lines.reqs + lines.constraints)
        err.hint = f"{where}\n{err.hint}" if where else err.hint
        raise
    notes = list(inputs.warnings) + lines.notes + python.notes
    notes += _age_notes(inputs, spec, res, lines.reqs, python.pylock)
    if digest is not None:
        base_digest, digest_note = digest()()
        notes.append(digest_note)
    else:
        base_digest = None  # --no-lock asks no registry: the current lock's, if it is for the same inputs and base
        if last is not None and last.inputs_hash == inputs_hash and last.base_image.get("ref") == base:
            base_digest = last.base_image.get("digest")
        if base_digest:
            notes.append(f"base image {base} pinned to {base_digest} (kept: --no-lock asks no registry)")
    tables = inputs.tables
    locked = python.locked
    libs, lib_notes = system_libraries([p.name for p in locked.packages] if locked else [r.name for r in lines.reqs],
                                       tables.system_libraries)
    tools, tool_notes = runtime_toolchain(inputs.root, spec.command)  # the code runs make or g++ as it starts
    notes += [*lib_notes, *tool_notes, *_import_notes(inputs.root, spec, locked)]
    apt = tuple(sorted(set(spec.system_packages) | set(libs) | set(tools)))
    date = source_date_epoch(python.pylock, python.framework_names)  # the newest upload of the framework's files
    pins, snapshot, apt_notes = apt_choice(last, apt, base, base_digest, date[0], opts)
    notes += apt_notes
    builds = source_builds(inputs, res, lines, python, base_kind, opts)
    notes += builds.notes
    pkg = inputs.package
    notes += _package_notes(pkg, builds, opts.no_lock)
    own = project_checks(inputs.root, spec, pkg is not None)
    if own.env:
        notes.append(f"the project runs from its source tree: {own.env[0][1]} is on PYTHONPATH (its packages "
                     + ", ".join(str(i[1]) for i in own.imports) + ", which the smoke test imports)")
    # a requirement whose marker is false in the image (mlx; sys_platform == 'darwin') is not one of the image's
    imports = ([(r.name, None) for r in lines.reqs if _in_image(r.req.marker, res)]
               + [(name, None) for name in lines.roots] + own.imports)
    # the framework's distributions first, as a training script imports them: native libraries can clash by the
    # order they load in (tensorflow 2.20 before triton 3.8 segfaults, triton first does not; measured 2026-12-02)
    first = {str(n).lower(): i for i, n in enumerate(lines.roots)}
    order = sorted(imports, key=lambda i: (first.get(str(i[0]).lower(), len(first)), i[0], i[1] or ""))
    stack = LockedStack(
        name=spec.name, res=res, base=BaseImage(base, base_kind, base_digest), inputs_hash=inputs_hash, files=files,
        profile=files.profile, inputs=inputs.hashes,
        locked=LockedBodies(python.req, python.fw, python.pylock, python.request, builds.source, builds.build,
                            builds.rest),
        apt=apt, apt_pins=pins, apt_snapshot=snapshot, source_date_epoch=date[0], date_from=date[1],
        builds=builds.plan,
        fw_lock=files.fw if lines.pins and (python.fw is not None or opts.no_lock) else None,
        # the second install layer only when something beyond the framework's closure is locked
        req_lock=(files.rest if builds.rest is not None else files.req)
        if lines.all and (lines.reqs or lines.extra or not lines.pins) else None,
        source_lock=files.source if builds.plan is not None else None,
        tools_lock=files.build if builds.build is not None else None,
        project=ProjectFacts(pkg is not None, tuple(order), tuple(own.scripts), spec.env + own.env, spec.command),
        devel_image=next((i.devel for i in inputs.matrix.base_images.cuda if str(i.cuda) == res.cuda), None),
        offline_image=opts.offline_image, version=__version__)
    return stack, last, notes


def _age_notes(inputs: ProjectInputs, spec: ProjectSpec, res: Resolution, reqs: list, pylock: str | None) -> list[str]:
    """init's age rule (project/age.py) once uv has locked: the exact pins dated by their files' upload-time."""
    if not pylock or res.framework is None:
        return []
    from datetime import datetime, timezone

    from envman.lock.pylock import parse_pylock
    from envman.project.age import say_age
    from envman.resolve.request import parse_framework

    total = parse_framework(spec.framework, tuple(inputs.matrix.frameworks))[1]
    days = {p.name: datetime.fromtimestamp(min(t), timezone.utc).date() for p in parse_pylock(pylock)
            if (t := [f.uploaded for f in p.files if f.uploaded is not None])}
    notes: list[str] = []
    say_age(res.framework, reqs, total, [r.version for r in inputs.matrix.frameworks.get(res.framework, ())],
            notes, days, inputs.root)
    return notes


def _import_notes(root: Path, spec: ProjectSpec, locked) -> list[str]:
    """What the project's code imports that nothing locked provides (project/lockedimports.py). Nothing without a
    lock (--no-lock: nothing to hold the imports against). A base image of the user's own is no excuse: the project
    runs in the image's own venv (image/plan.py), which sees none of the base's packages."""
    if locked is None:
        return []
    from envman.project.lockedimports import missing_imports

    add_to = spec.requirements[0] if spec.requirements else f"packages: in {spec.source}"
    return missing_imports(root, {p.name: p.version for p in locked.packages}, add_to)


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
    imports: list[tuple[str, str | None]]  # (distribution, module or None) the smoke test imports of the project itself
    scripts: list[str]  # its console scripts, run with --help
    env: tuple[tuple[str, str], ...]  # PYTHONPATH when it runs from its source tree


def project_checks(root: Path, spec: ProjectSpec, installed: bool) -> ProjectChecks:
    """What the smoke test checks of the project itself: installed, what pip installed of its distribution (its
    top-level modules, read from the installed RECORD) and its console scripts' --help; run from its source, its
    top-level packages from the work directory, which is then on PYTHONPATH (said at init)."""
    from envman.image.plan import WORKDIR
    from envman.project.imports import console_scripts, distribution_name, top_level_packages
    from envman.project.sources.pyproject import read_pyproject

    doc = read_pyproject(root)
    if installed:
        dist = distribution_name(root, doc)
        return ProjectChecks([(dist, None)] if dist else [], console_scripts(root, doc), ())
    packages = top_level_packages(root)
    if not packages:
        return ProjectChecks([], [], ())
    env = () if any(k == "PYTHONPATH" for k, _ in spec.env) else (("PYTHONPATH", WORKDIR),)
    return ProjectChecks([(spec.name, p) for p in packages], [], env)


def body_digest(text: str) -> str:
    """The digest envman.lock records for a file made from it: its body, without envman's header line."""
    head, _, rest = text.partition("\n")
    return sha256(rest if "generated by envman" in head else text)


def spec_request(matrix: Matrix, spec: ProjectSpec):
    fields = {k: f"{spec.source}: {k}" for k in ("framework", "python", "driver", "cuda")}
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


def _in_image(marker, res: Resolution) -> bool:
    """The requirement's marker holds in the image (none: it does); one packaging cannot evaluate stands."""
    from envman.lock.uv import target_environment

    try:
        return marker is None or bool(marker.evaluate(target_environment(res.python, res.arch)))
    except Exception:
        return True
