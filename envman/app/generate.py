"""Use cases over a project directory: init, lock, lock --check. Orchestrates the pure core and the
adapters (spec, requirements, uv, render) and writes files only after every step succeeded."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from envman import __version__
from envman.app.basedigest import BaseDigests
from envman.app.doctor import kit_files
from envman.app.pythonlock import Guessing, PythonLocker
from envman.errors import EnvmanError, LockError, ResolutionError, UsageError
from envman.files import WritePlan, ownership, sha256, with_header
from envman.image.context import dockerignore_text
from envman.image.plan import compose_plan, devcontainer_plan, plan_dockerfile, smoke_expectation
from envman.image.render import DOCKERIGNORE, render_dockerfile, render_json, render_yaml, warm
from envman.image.stages import plan_source_builds, system_libraries
from envman.image.tables import load_image_tables
from envman.lock.artifacts import (
    by_url,
    refuse_framework_build_without_framework,
    refuse_in_framework_closure,
    refuse_unbuildable,
    refuse_vcs,
    source_only,
)
from envman.lock.lockfile import LOCK_FILE, Lock, canonical_json, read_lock, render_lock, try_read_lock
from envman.lock.pins import check_user_requirements, cuda_constraints, framework_pins
from envman.lock.uv import (
    FW_LOCK,
    PYLOCK,
    REQ_LOCK,
    CudaMajorConflict,
    build_lock,
    framework_closure,
    parse_uv_output,
    python_lock_job,
)
from envman.matrix.load import load_matrix
from envman.model import Matrix, Resolution
from envman.project.package import ProjectPackage, find_package
from envman.project.requirements import Req
from envman.project.spec import SPEC_FILE, ProjectSpec, load_spec, parse_spec, validate_requirement
from envman.resolve.request import build_request
from envman.resolve.resolver import resolve_stack

SOURCE_LOCK = "requirements.source.lock.txt"  # the source-only packages, with their sdists' hashes (builder stage)
BUILD_LOCK = "requirements.build.lock.txt"  # what the builder stage builds them with, hashed
# the image's last install when the builder built a package locked by URL: the lock without it (pip would
# fetch and build a `name @ url` line again, however installed its wheel already is)
REST_LOCK = ".envman/requirements.rest.lock.txt"
BASE_OVERRIDE = "base_image"  # the lock's inputs key for a --base-image override
GENERATED = ("Dockerfile", ".dockerignore", "compose.yaml", ".devcontainer/devcontainer.json",
             ".envman/stack.json")


@dataclass
class Outcome:
    resolution: Resolution
    lock: Lock
    written: list[Path] = field(default_factory=list)
    unchanged: list[Path] = field(default_factory=list)
    spec_created: bool = False
    notes: list[str] = field(default_factory=list)
    built: list = field(default_factory=list)


def project_name(root: Path) -> str:
    n = re.sub(r"[^a-z0-9]+", "-", root.resolve().name.lower()).strip("-")
    return n or "envman-project"


def spec_request(matrix: Matrix, spec: ProjectSpec):
    fields = {"framework": f"{spec.source}: framework", "python": f"{spec.source}: python",
              "driver": f"{spec.source}: driver", "cuda": f"{spec.source}: cuda"}
    return build_request(matrix, framework=spec.framework, python=spec.python, targets=list(spec.targets),
                         driver=spec.driver, cuda=spec.cuda, cpu=spec.cpu, cuda_devel=spec.cuda_devel, fields=fields)


def user_requirements(root: Path, spec: ProjectSpec) -> list[Req]:
    return user_inputs(root, spec)[0]


def user_inputs(root: Path, spec: ProjectSpec) -> tuple[list[Req], list[Req], list[str]]:
    """The requirements to lock, the constraints the requirement files include with ``-c`` (they hold uv's
    resolution, they install nothing) and the warnings of reading them."""
    from envman.project.sources.requirements_txt import read_requirements

    reqs: list[Req] = []
    constraints: list[Req] = []
    warnings: list[str] = []
    for f in spec.requirements:
        found = read_requirements(root, f)
        reqs += found.reqs
        constraints += found.constraints
        warnings += found.warnings
    for i, p in enumerate(spec.packages):
        reqs.append(Req(validate_requirement(p, f"packages[{i}]", spec.source), f"{spec.source} packages[{i}]"))
    return reqs, constraints, warnings


def input_hashes(root: Path, spec: ProjectSpec, matrix: Matrix) -> dict[str, str]:
    """What a lock depends on, hashed one by one so `lock --check` can say which input changed."""
    # the workload says what is trained, not what is built: editing it does not make the lock stale
    image_spec = {k: v for k, v in spec.to_data().items() if k != "workload"}
    h = {"spec": sha256(canonical_json(image_spec)), "matrices": matrix.digest,
         "image_tables": load_image_tables().digest}
    pkg = project_package(root, spec)
    files = list(spec.requirements) + [f for f in (pkg.files if pkg else ()) if f not in spec.requirements]
    for f in spec.requirements:
        # files a requirements file pulls in with -r/-c are inputs of the lock as much as the file itself
        try:
            from envman.project.sources.requirements_txt import read_requirements

            files += [i for i in read_requirements(root, f).includes if i not in files]
        except UsageError:
            pass  # the lock step reports it; here the file's own hash says it changed
    # files init copied packages from (pyproject.toml, setup.py, setup.cfg, environment.yml): an edit there
    # is an input change too, which `lock --check` names (the packages were copied: init --force re-reads)
    files += [f for f in spec.sources if f not in files]
    for f in files:
        p = root / f
        try:
            # only a regular file is read (a FIFO would block); the lock step reports anything else
            h[f"file:{f}"] = sha256(p.read_bytes()) if p.is_file() else "missing"
        except OSError:
            h[f"file:{f}"] = "missing"
    return h


def project_package(root: Path, spec: ProjectSpec) -> ProjectPackage | None:
    """The project as a package to install into the image, or None (install_project: false, or not a package)."""
    if spec.install_project is False:
        return None
    pkg = find_package(root, spec.project_extras)
    if pkg is None and spec.install_project:
        raise UsageError(f"{spec.source}: install_project: {root.name} is not a package "
                         "(no pyproject.toml [build-system], no setup.py)",
                         hint="add a [build-system] table to pyproject.toml, or set install_project: false")
    return pkg


def combined(hashes: dict[str, str]) -> str:
    return sha256(canonical_json(hashes))


def _base(spec: ProjectSpec, res: Resolution) -> tuple[str, str]:
    if spec.base_image:
        return spec.base_image, "custom"
    return res.base_image, res.base_kind


@dataclass(frozen=True)
class Names:
    """Where one stack's files go: plain names, or ``envman.P.lock``/``Dockerfile.P`` … for profile P."""

    profile: str | None
    lock: str = LOCK_FILE
    dockerfile: str = "Dockerfile"
    req: str = REQ_LOCK
    fw: str = FW_LOCK
    pylock: str = PYLOCK
    stack: str = ".envman/stack.json"
    source: str = SOURCE_LOCK
    build: str = BUILD_LOCK
    rest: str = REST_LOCK

    @classmethod
    def for_root(cls, root: Path) -> Names:
        """The default stack's names in this repository: ``Dockerfile.envman`` beside a Dockerfile of its own."""
        from envman.project.coexist import place_files

        return cls(None, dockerfile=place_files(root).dockerfile)

    @classmethod
    def for_profile(cls, p: str | None, root: Path | None = None) -> Names:
        if p is None:
            return cls.for_root(root) if root is not None else cls(None)
        return cls(p, f"envman.{p}.lock", f"Dockerfile.{p}", f"requirements.{p}.lock.txt",
                   f"requirements.{p}.framework.lock.txt", f"pylock.{p}.toml", f".envman/stack.{p}.json",
                   f"requirements.{p}.source.lock.txt", f"requirements.{p}.build.lock.txt",
                   f".envman/requirements.{p}.rest.lock.txt")


@dataclass
class Built:
    names: Names
    spec: ProjectSpec
    resolution: Resolution
    lock: Lock
    files: list[tuple[Path, str]]
    gpu: bool
    notes: list[str]
    install_project: bool = False
    apt: tuple[str, ...] = ()  # what the Dockerfile installs with apt


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


def with_base_override(spec: ProjectSpec, hashes: dict[str, str],
                       base_image: str | None) -> tuple[ProjectSpec, dict[str, str]]:
    if not base_image or base_image == spec.base_image:
        return spec, hashes
    return replace(spec, base_image=base_image), {**hashes, BASE_OVERRIDE: base_image}


def _build_one(root: Path, spec: ProjectSpec, names: Names, hashes: dict[str, str], no_lock: bool,
               matrix: Matrix, offline_image: str | None = None, upgrade: bool = False,
               timeout: float | None = None, python_lock: PythonLocker | None = None,
               digests: BaseDigests | None = None) -> Built:
    """One stack's files. ``python_lock`` answers its Python lock with uv (needed unless ``no_lock``);
    ``digests``, the base image's digest (each image asked once however many passes make the files)."""
    req = spec_request(matrix, spec)
    res = resolve_stack(matrix, req)
    all_reqs, user_cons, read_warnings = user_inputs(root, spec)
    reqs = check_user_requirements(res, spec.companions, all_reqs)
    # a -c line on the framework is checked against the stack like a requirement; the others go to uv
    cons = check_user_requirements(res, spec.companions, user_cons)
    pins = framework_pins(res, spec.companions)
    pkg = project_package(root, spec)
    # the project's build backend and chosen extras are locked like everything else: it then installs offline
    extra_lines = list(pkg.build_requires + pkg.extra_requires) if pkg else []
    lines = pins + [r.line for r in reqs] + extra_lines
    inputs_hash = combined(hashes)
    base, base_kind = _base(spec, res)

    req_text = fw_text = py_text = reused_build = None
    fresh = False
    label = f"profile {names.profile}: " if names.profile else ""
    notes: list[str] = [label + w for w in read_warnings]
    # the base image's digest: kept from the last lock, or asked of its registry while uv resolves
    digest_job = None if no_lock else (digests or BaseDigests(upgrade=upgrade)).start(root / names.lock, base)
    if lines and not no_lock:
        index_urls = ([res.index_url] if res.index_url else []) + list(spec.index_urls)
        roots = [p.split("==")[0].split("[")[0] for p in pins]
        job = python_lock_job(lines, res.python, index_urls, roots, res, upgrade=upgrade,
                              previous=(_our_body(root / names.req), _our_body(root / names.pylock)), timeout=timeout,
                              constraints=cuda_constraints(res, matrix.toolkit_wheels) + [c.line for c in cons],
                              find_links=tuple(spec.find_links))
        assert python_lock is not None, "a lock needs a PythonLocker"
        lr = python_lock(job)
        req_text, py_text = lr.req_text, lr.pylock_text
        notes.extend(label + n for n in _check_user_hashes(all_reqs + user_cons, lr.pylock_text))
        fw_text = lr.fw_text if pins else None
        fresh = True
        notes.append(f"{label}locked {len(lr.python_lock.packages)} Python packages with sha256 hashes (uv)")
        notes.extend(f"{label}{n}" for n in lr.notes + stack_mismatches(res, lr.versions))
        if lr.sdist_only:
            notes.append(f"{label}no wheel for {', '.join(sorted(lr.sdist_only))}: the image builds them from source")
    elif lines and no_lock:
        old = _reusable_python_lock(root, names, inputs_hash)
        if old is not None:
            req_text, fw_text, py_text, reused_build = old
            notes.append(f"{label}--no-lock: kept the existing Python lock (its inputs are unchanged)")
        else:
            notes.append(f"{label}--no-lock: Python dependencies are NOT locked yet; run `envman lock` before `envman build`")

    if digest_job is not None:
        base_digest, digest_note = digest_job()
        notes.append(label + digest_note)
    else:
        base_digest = _kept_digest(root, names, base, inputs_hash)
        if base_digest:
            notes.append(f"{label}base image {base} pinned to {base_digest} (kept: --no-lock asks no registry)")
    tables = load_image_tables()
    locked = parse_uv_output(req_text) if req_text is not None else None
    names_locked = [p.name for p in locked.packages] if locked else [r.name for r in reqs]
    libs, lib_notes = system_libraries(names_locked, tables.system_libraries)
    notes.extend(label + n for n in lib_notes)
    apt = tuple(sorted(set(spec.system_packages) | set(libs)))
    sb = source_text = build_text = rest_text = None
    if py_text is not None and locked is not None:
        refuse_unbuildable(py_text, res.python)
        refuse_vcs(py_text, {**{r.line: r.origin for r in all_reqs if r.req.url}, **{r.name: r.origin for r in all_reqs}})
        src = source_only(py_text)
        refuse_framework_build_without_framework(
            [f"{n}=={v}" for n, v in src if n in tables.build_needs and tables.build_needs[n].framework], res.framework)
        if src and pins:
            roots = [p.split("==")[0].split("[")[0] for p in pins]
            refuse_in_framework_closure(src, framework_closure(locked, roots), res.framework)
        sb = plan_source_builds(src, tables.build_needs, res.cuda if res.variant != "cpu" else None,
                                base_kind.startswith("cuda-"), tables.nvcc)
        if sb is not None and sb.cuda and sb.nvcc is None and not base_kind.startswith("cuda-"):
            raise LockError(f"{', '.join(n for n, _ in sb.packages)} compiles CUDA code and no nvcc wheel is known "
                            f"for CUDA {res.cuda} (matrices/build_needs.yaml nvcc)",
                            hint="set cuda_devel: true in envman.yaml (an nvidia/cuda devel base), or pin a version with a wheel")
        if sb is not None:
            built_names = {n for n, _ in sb.packages}
            source_text = locked.render(built_names)
            notes.extend(label + n for n in sb.notes)
            if by_url(py_text, built_names):
                rest_text = locked.render({p.name for p in locked.packages} - built_names)
            if fresh and python_lock is not None:
                python_lock.needs_real_answer()  # a second uv run and sdist downloads: never on a guess
            build_text = _lock_build_deps(sb, py_text, locked, res) if fresh else reused_build
    if pkg is not None:
        notes.append(f"{label}the project is a package ({pkg.kind}): installed into the image after its source, "
                     "without dependencies (they are locked); editable in the devcontainer"
                     + (f"; extras {', '.join(pkg.extras)} locked" if pkg.extras else ""))
    lock = build_lock(name=spec.name, inputs_hash=inputs_hash, res=res, base_image=base, base_kind=base_kind,
                      base_digest=base_digest, system_packages=list(apt), req_text=req_text,
                      fw_text=fw_text, pylock=py_text is not None, profile=names.profile,
                      file_names={"requirements": names.req, "framework": names.fw, "pylock": names.pylock},
                      inputs=hashes, dockerfile=names.dockerfile)
    def render(lock_hash: str, offline: str | None):
        plan = plan_dockerfile(
            name=spec.name, res=res, base_image=f"{base}@{base_digest}" if base_digest and "@" not in base else base,
            base_kind=base_kind,
            system_packages=apt, env=spec.env, command=spec.command, lock_hash=lock_hash,
            inputs_hash=inputs_hash, fw_lock=names.fw if pins and (fw_text is not None or no_lock) else None,
            # the second install layer only when something beyond the framework's closure is locked
            req_lock=(names.rest if rest_text is not None else names.req) if lines and (reqs or extra_lines or not pins)
            else None, version=__version__,
            stack_file=names.stack, offline_image=offline, source_builds=sb,
            source_lock=names.source if sb is not None else None, devel_image=_devel_image(matrix, res),
            install_project=pkg is not None, build_lock=names.build if build_text is not None else None,
        )
        return plan, render_dockerfile(plan).lstrip("\n")

    imports = [[r.name, None] for r in reqs] + [[p.split("==")[0].split("[")[0], None] for p in pins]
    # The Dockerfile and stack.json carry the lock's hash, and the lock records their digests: each is
    # recorded with the hash blanked out (file_digest), then rendered with the final hash.
    h0 = lock.lock_hash
    plan, body = render(h0, None)
    stack_text = render_json(smoke_expectation(res, sorted(imports), h0))
    recorded = {names.dockerfile: body, names.stack: stack_text, names.pylock: py_text,
                names.source: source_text, names.build: build_text, names.rest: rest_text}
    lock = lock.with_changes(files={k: file_digest(t, h0) for k, t in recorded.items() if t is not None})
    if offline_image is not None:
        plan, body = render(lock.lock_hash, offline_image)
    else:
        body = rehash(body, h0, lock.lock_hash)
    stack_text = rehash(stack_text, h0, lock.lock_hash)
    files: list[tuple[Path, str]] = [(root / names.dockerfile, with_header(body, inputs_hash))]
    files.append((root / names.stack, stack_text))
    locked_files = ((names.req, req_text), (names.fw, fw_text), (names.pylock, py_text), (names.source, source_text),
                    (names.build, build_text), (names.rest, rest_text))
    files += [(root / name, with_header(text, inputs_hash)) for name, text in locked_files if text is not None]
    return Built(names, spec, res, lock, files, plan.gpu, notes, pkg is not None, plan.apt_packages)


_BLANK = "0" * 64


def rehash(text: str, old: str, new: str) -> str:
    """``text`` with the lock hash ``old`` (and its 12-character short form) replaced by ``new``."""
    return text.replace(old, new).replace(old[:12], new[:12])


def file_digest(text: str, lock_hash: str) -> str:
    """The digest envman.lock records for a generated file: its body (without envman's header line) with the
    lock's own hash blanked out, since the file names the lock that names it."""
    head, _, rest = text.partition("\n")
    if "generated by envman" in head:
        text = rest
    return sha256(rehash(text, lock_hash, _BLANK))


def _lock_build_deps(sb, py_text: str, locked, res: Resolution) -> str:
    """requirements.build.lock.txt: the sdists' own build requirements, the table's, nvcc; hashed by uv and
    constrained to the main lock's pins."""
    from envman.lock.build_deps import build_requires_of, compile_build_lock, fetch_sdist, sdist_urls
    from envman.lock.uv import python_platform

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


def _devel_image(matrix: Matrix, res: Resolution) -> str | None:
    if res.cuda is None:
        return None
    return next((img.devel for img in matrix.base_images.cuda if str(img.cuda) == res.cuda), None)


def shared_stacks(built: list[Built]) -> list[list[str]]:
    groups: dict[tuple, list[str]] = {}
    for b in built:
        groups.setdefault(b.lock.stack_key(), []).append(b.names.profile or "default")
    return [g for g in groups.values() if len(g) > 1]


def generate(root: Path, spec: ProjectSpec, *, no_lock: bool = False, force: bool = False,
             matrix: Matrix | None = None, upgrade: bool = False,
             extra: list[tuple[Path, str]] | None = None, timeout: float | None = None,
             progress=None, speculative=None, base_image: str | None = None) -> Outcome:
    """``base_image``: a --base-image override for this run, recorded in the lock's inputs (not in the
    spec's hash), so `lock --check` and `build --base-image` find the lock current.

    ``speculative``: uv already running on the last lock's request. A re-lock's uv usually answers with
    the lock it was seeded with: every file is made and checked from that guess while uv runs, and kept
    when uv's answer is the guess (app/pythonlock.py)."""
    matrix = matrix or load_matrix()
    hashes = input_hashes(root, spec, matrix)
    spec, hashes = with_base_override(spec, hashes, base_image)
    from envman.project.coexist import place_files

    place = place_files(root)  # before any slow step: the repository's own files decide envman's names
    locker = PythonLocker(None if spec.profiles else speculative, progress, guess=not spec.profiles,
                          while_waiting=_while_uv_resolves, remember_for=None if spec.profiles else root)

    digests = BaseDigests(upgrade=upgrade)

    def plan() -> _Planned:
        return _plan(root, spec, hashes, matrix, place, locker, digests, no_lock=no_lock, force=force, upgrade=upgrade,
                     timeout=timeout, extra=extra)

    try:
        try:
            planned: _Planned | None = plan()
        except (EnvmanError, Guessing):
            if not locker.guessing:
                raise
            planned = None  # met on a guess: met again on uv's own answer, or not
        guessed = locker.guessing
        if not locker.settle() or planned is None:
            planned = plan()
        elif guessed and planned.changes:
            planned.recheck()  # files may have changed while uv ran
    finally:
        locker.close()
        if speculative is not None:
            speculative.cancel()  # unused (profiles, --no-lock, other inputs): never leave it running
    return _commit(planned)


@dataclass
class _Planned:
    """Everything a generate() run writes, checked against the project, not yet written."""

    built: list[Built]
    wp: WritePlan
    check: Callable[[], None]  # raises a UsageError when a file to write was edited by hand (without --force)
    notes: list[str]
    changes: list[tuple[Path, str]] = field(default_factory=list)

    def recheck(self) -> None:
        self.check()
        self.changes = self.wp.changes()


def _plan(root: Path, spec: ProjectSpec, hashes: dict[str, str], matrix: Matrix, place, locker: PythonLocker,
          digests: BaseDigests, *, no_lock: bool, force: bool, upgrade: bool, timeout: float | None,
          extra: list[tuple[Path, str]] | None) -> _Planned:
    if spec.profiles:
        built = [_build_one(root, profile_spec(spec, p), Names.for_profile(p.name), hashes, no_lock, matrix,
                            upgrade=upgrade, timeout=timeout, python_lock=locker, digests=digests)
                 for p in spec.profiles]
    else:
        built = [_build_one(root, spec, Names.for_root(root), hashes, no_lock, matrix, upgrade=upgrade, timeout=timeout,
                            python_lock=locker, digests=digests)]
    inputs_hash = combined(hashes)
    files: list[tuple[Path, str]] = []
    for b in built:
        files.extend(b.files)
    gi = root / ".gitignore"
    gitignore = gi.read_text(encoding="utf-8", errors="replace") if gi.is_file() else None
    files.append((root / place.dockerignore, with_header(dockerignore_text(DOCKERIGNORE, gitignore), inputs_hash)))
    services = [(b.names.profile, b.names.dockerfile, f"{spec.name}:{b.lock.short_hash}", b.gpu) for b in built]
    files.append((root / place.compose, with_header(render_yaml(compose_plan(spec.name, services)), inputs_hash)))
    first = built[0]
    files.append((root / place.devcontainer,
                  with_header(render_json(devcontainer_plan(spec.name, first.gpu,
                                                            place.devcontainer_dockerfile(first.names.dockerfile),
                                                            editable=first.install_project)),
                              inputs_hash, "//")))
    kit = kit_files()
    files.extend((root / ".envman" / "kit" / rel, text) for rel, text in sorted(kit.items()))

    generated = WritePlan(list(files))

    def check() -> None:
        generated.check(root, force)
        for b in built:
            _check_lock_owner(root, b.names.lock, force)

    files.extend(extra or ())  # e.g. the envman.yaml init creates: in the same all-or-nothing write
    for b in built:  # envman.lock last: it is the commit point
        files.append((root / b.names.lock, render_lock(b.lock)))
    wp = WritePlan(files, root=root)
    notes = list(place.notes) + [n for b in built for n in b.notes]
    for group in shared_stacks(built):
        notes.append("profiles " + ", ".join(group) + " share one stack (their images differ only in labels)")
    if len(built) > 1:
        for b in built:
            fw = b.lock["stack"].get("framework") or {}
            notes.append(f"profile {b.names.profile}: {fw.get('name')} {fw.get('version')} {fw.get('variant')}, "
                         f"Python {b.lock['stack']['python']} → {b.names.dockerfile}, {b.names.lock}")
    if spec.workload:  # will the training run fit the GPUs this stack is for? (envman fit, from envman.yaml)
        from envman.app.fit import workload_verdicts

        targets = tuple(dict.fromkeys(t for b in built for t in b.spec.targets))
        fit_notes, fit_warnings = workload_verdicts(spec.workload, targets, str(root))
        notes += fit_notes + [f"warning: {w}" for w in fit_warnings]
    planned = _Planned(built, wp, check, notes)
    planned.recheck()
    return planned


def _commit(planned: _Planned) -> Outcome:
    """Write what changed, all or nothing (envman.lock last)."""
    wp = planned.wp
    written = wp.write(planned.changes)
    first = planned.built[0]
    out = Outcome(first.resolution, first.lock, written, [p for p, _ in wp.files if p not in written],
                  notes=planned.notes)
    out.built = planned.built
    return out


def offline_dockerfile(root: Path, profile: str | None, offline_image: str | None) -> str:
    """The project's Dockerfile as this envman renders it now; with ``offline_image``, every pip install
    reads that wheelhouse image, bind-mounted, with --no-index. Rendered from the same plan as the
    Dockerfile, so the two never drift apart."""
    return offline_built(root, profile, offline_image).files[0][1]


def offline_built(root: Path, profile: str | None, offline_image: str | None) -> Built:
    """``offline_dockerfile``'s stack, its Dockerfile first among its files."""
    spec = _require_spec(root)
    matrix = load_matrix()
    hashes = input_hashes(root, spec, matrix)
    names = Names.for_profile(profile, root)
    kept = try_read_lock(root / names.lock)  # the lock's --base-image override, if it was made with one
    spec, hashes = with_base_override(spec, hashes, kept.inputs.get(BASE_OVERRIDE) if kept else None)
    if profile is not None:
        prof = next((p for p in spec.profiles if p.name == profile), None)
        if prof is None:
            raise UsageError(f"no profile {profile!r} in {spec.source}",
                             hint="profiles: " + ", ".join(p.name for p in spec.profiles))
        spec = profile_spec(spec, prof)
    built = _build_one(root, spec, names, hashes, True, matrix, offline_image=offline_image)
    pylock, source = _read_text(root / names.pylock), _read_text(root / names.source)
    if offline_image is not None and pylock and source:
        # the builder fetches a `name @ url` line from its URL whatever --no-index says
        url_built = by_url(pylock.partition("\n")[2],
                           {p.name for p in parse_uv_output(source.partition("\n")[2]).packages})
        if url_built:
            raise UsageError(f"{', '.join(sorted(url_built))}: locked by URL (see {names.source}), which an offline "
                             "build cannot fetch",
                             hint="build online (the builder stage fetches and hash-checks it), or publish the "
                                  "package to an index the wheelhouse reads and pin it by version")
    return built


def _while_uv_resolves() -> None:
    """What a lock needs later and can prepare while uv waits on the network (memoized where it is used)."""
    from envman._compat import tomllib  # noqa: F401  (uv's pylock.toml is parsed right after it exits)

    warm()
    load_image_tables()
    kit_files()


def _our_body(path: Path) -> str | None:
    """A file envman generated and nobody edited, without its header (to seed uv's preferences)."""
    o = ownership(path)
    if not o.exists or not o.ours or o.edited:
        return None
    return path.read_text(encoding="utf-8").partition("\n")[2]


def _kept_digest(root: Path, names: Names, base: str, inputs_hash: str) -> str | None:
    """--no-lock asks no registry: keep the digest the current lock pinned, if it is for the same inputs."""
    old = try_read_lock(root / names.lock)
    if old is None:
        return None
    b = old.base_image
    if old.inputs_hash == inputs_hash and b.get("ref") == base:
        return b.get("digest")
    return None


def _check_user_hashes(reqs: list[Req], pylock_text: str | None) -> list[str]:
    """The requirement lines' own --hash options against the files the lock pins (a LockError on a mismatch)."""
    from envman.lock.pylock import parse_pylock
    from envman.lock.user_hashes import check_user_hashes

    return check_user_hashes(reqs, parse_pylock(pylock_text)) if pylock_text is not None else []


def _reusable_python_lock(root: Path, names: Names,
                          inputs_hash: str) -> tuple[str, str | None, str | None, str | None] | None:
    def body(name: str) -> str | None:
        p = root / name
        o = ownership(p)
        if not o.exists or not o.ours or o.edited or o.inputs_hash != inputs_hash:
            return None
        return p.read_text(encoding="utf-8").partition("\n")[2]

    req = body(names.req)
    if req is None:
        return None
    return req, body(names.fw), body(names.pylock), body(names.build)


def _check_lock_owner(root: Path, name: str, force: bool) -> None:
    p = root / name
    if force or not p.exists():
        return
    lock = try_read_lock(p)
    if lock is None or not lock.is_intact():
        raise UsageError(f"would overwrite {name} (edited by hand or not envman's)",
                         hint="re-run with --force to regenerate it")


def spec_yaml(spec: ProjectSpec) -> str:
    head = (
        "# envman.yaml: what this project needs. Edit it, then run `envman lock`.\n"
        "# Keys: name, python, framework, companions, requirements, packages, system_packages,\n"
        "#       targets + driver (or cpu: true), cuda, cuda_devel, command, env, profiles, base_image,\n"
        "#       install_project (true | false | [extras]; default: when the project is a package)\n"
    )
    return head + render_yaml(spec.to_data())


@dataclass
class InitOptions:
    targets: tuple[str, ...] = ()
    driver: str | None = None
    cpu: bool = False
    python: str | None = None
    framework: str | None = None
    base_image: str | None = None
    no_lock: bool = False
    force: bool = False
    timeout: float | None = None  # seconds uv may take (a stalled index ends the lock with its name)


def init_project(root: Path, opts: InitOptions, detect_gpus=None, progress=None) -> Outcome:
    if not root.is_dir():
        raise UsageError(f"{root}: not a directory", hint="pass the path of your training repository")
    if opts.base_image is not None:
        from envman.project.spec import validate_base_image

        validate_base_image(opts.base_image)  # the same check as envman.yaml's base_image
    spec = load_spec(root)
    created = False
    notes: list[str] = []
    if spec is None:
        from envman.project.discover import discover_repo, nothing_found

        matrix = load_matrix()
        found = discover_repo(root, {k: list(v) for k, v in matrix.frameworks.items()})
        if not found.read and not opts.framework:
            raise nothing_found(root)
        inf = found.inference
        cpu = opts.cpu
        if inf.cpu and not opts.targets and not opts.cpu:
            cpu = True
            notes.append("a CPU stack: the repository asks for a CPU build of its framework")
        elif inf.cpu and opts.targets:
            notes.append("the repository asks for a CPU build of its framework; --target was given, so a GPU stack is resolved")
        targets, driver = list(opts.targets), opts.driver
        if not cpu and not targets:
            if detect_gpus is None:  # this machine's GPUs (raises a UsageError naming --target and --cpu)
                from envman.app.resolve import detected_targets as detect_gpus
            targets, drv, note = detect_gpus()
            notes.append(note)
            driver = driver or (f">={drv}" if drv else None)
        data = {
            "name": project_name(root),
            "python": opts.python or _python_from(found.python),
            "framework": opts.framework or inf.framework,
            "companions": list(inf.companions),
            "requirements": list(found.requirement_files),
            "packages": list(found.packages),
            "cpu": cpu,
            "targets": [] if cpu else targets,
            "driver": driver,
            "cuda": inf.cuda if not opts.framework and not cpu else None,
            "base_image": opts.base_image,
            # `-e .` asks for the project; it can only be installed when it is a package (pyproject
            # [build-system] or setup.py): otherwise its source is in the image's work dir and that is all
            "install_project": found.install_project and find_package(root) is not None,
            "sources": found.copied_from,
            "index_urls": found.index_urls,
            "find_links": found.find_links,
        }
        if found.install_project and find_package(root) is None:
            notes.append("the requirements install the repository itself (-e . / .), but it is not a package "
                         "(no pyproject.toml [build-system], no setup.py): its source is copied to the image's work "
                         "directory and not installed")
        spec = parse_spec({k: v for k, v in data.items() if v not in (None, [], False)}, SPEC_FILE)
        if found.read:
            notes.append("found dependencies in: " + ", ".join(found.read))
        notes.extend(found.report()[1:] if found.read else found.report())
        notes.extend(inf.notes)
        if inf.framework:
            notes.append(f"framework constraint from the repository: {inf.framework}")
        elif not opts.framework:
            notes.append("no framework (torch, tensorflow, jax) named by the repository, directly or through a package that "
                         "pulls one: the image has none; pass --framework or set framework in envman.yaml if it needs one")
        if found.python:
            notes.append(f"Python constraint from the repository: {found.python}")
        created = True
    else:
        given = [n for n, v in (("--target", opts.targets), ("--driver", opts.driver), ("--cpu", opts.cpu),
                                ("--python", opts.python), ("--framework", opts.framework)) if v]
        if given:
            raise UsageError(f"{spec.source} exists; {', '.join(given)} would be ignored",
                             hint=f"edit {spec.source} instead (it is the single source of truth)")
        if opts.base_image and opts.base_image != spec.base_image:
            notes.append(f"base image overridden for this run: {opts.base_image} (add base_image to {spec.source} to keep it)")
    p = root / SPEC_FILE
    out = _init_generate(root, spec, created, opts, progress, notes)
    if created and p in out.written:
        out.written.remove(p)
        out.written.insert(0, p)
    out.spec_created = created
    out.notes = notes + [n for n in out.notes if n not in notes]  # discovery's report already has its warnings
    return out


def _init_generate(root: Path, spec: ProjectSpec, created: bool, opts: InitOptions, progress,
                   notes: list[str]) -> Outcome:
    """init's files. When a locked package pulls nvidia-* wheels of another CUDA major than the stack's
    (mamba-ssm's cutlass wheels are CUDA 12 only) and nobody chose the CUDA, the stack is resolved once more
    for that major, and envman.yaml says so; when no stack has it, the original refusal stands."""
    extra = [(root / SPEC_FILE, spec_yaml(spec))] if created else None
    try:
        return generate(root, spec, no_lock=opts.no_lock, force=opts.force, timeout=opts.timeout, progress=progress,
                        extra=extra, base_image=None if created else opts.base_image)
    except CudaMajorConflict as conflict:
        if not created or spec.cuda or spec.cpu:
            raise  # the user's envman.yaml (or --cuda) chose the CUDA: the hint says what to change
        retry = replace(spec, cuda=str(conflict.major))
        try:
            out = generate(root, retry, no_lock=opts.no_lock, force=opts.force, timeout=opts.timeout,
                           progress=progress, extra=[(root / SPEC_FILE, spec_yaml(retry))])
        except (ResolutionError, CudaMajorConflict):
            raise conflict from None
        notes.append(f"{conflict.message.split(' (')[0]} needs CUDA {conflict.major}: the stack is resolved for CUDA "
                     f"{conflict.major} instead (cuda: \"{conflict.major}\" in envman.yaml)")
        return out


def _python_from(text: str | None) -> str | None:
    if not text:
        return None
    m = re.fullmatch(r"\s*=?=?\s*(\d+\.\d+)(\.\*|\.\d+)?\s*", text)
    return m.group(1) if m else text.strip()


def lock_project(root: Path, *, force: bool = False, base_image: str | None = None, upgrade: bool = False,
                 timeout: float | None = None, progress=None, speculative=None) -> Outcome:
    """``speculative``: uv already started on the previous lock's request (envman.lock.uvproc.speculate)."""
    if base_image is not None:
        from envman.project.spec import validate_base_image

        validate_base_image(base_image)  # the same check as envman.yaml's base_image
    try:
        spec = _require_spec(root)
        return generate(root, spec, force=force, upgrade=upgrade, timeout=timeout, progress=progress,
                        speculative=None if upgrade else speculative, base_image=base_image)
    finally:
        if speculative is not None:
            speculative.cancel()


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


def _require_spec(root: Path) -> ProjectSpec:
    spec = load_spec(root)
    if spec is None:
        raise UsageError(f"no {SPEC_FILE} (or [tool.envman] in pyproject.toml) in {root}", hint="run `envman init` first")
    return spec


def check_lock(root: Path) -> list[str]:
    """Why the lock is stale (empty when it is current). With profiles, every profile's lock is checked."""
    spec = _require_spec(root)
    now = input_hashes(root, spec, load_matrix())
    names = [Names.for_profile(p.name) for p in spec.profiles] or [Names(None)]
    stale: list[str] = []
    for n in names:
        lock = read_lock(root / n.lock)
        then = lock.inputs
        over = then.get(BASE_OVERRIDE)
        current = {**now, BASE_OVERRIDE: over} if isinstance(over, str) and over else now
        for msg in _changed_inputs(spec, current, then) + _changed_lock_files(root, n, lock):
            if msg not in stale:
                stale.append(msg)
        if not lock.is_intact():
            stale.append(f"{n.lock} was edited by hand")
    return stale


def _changed_inputs(spec: ProjectSpec, now: dict[str, str], then: Mapping[str, Any]) -> list[str]:
    labels = {"spec": spec.source, "matrices": "envman's matrices (compatibility data)"}
    copied = {f"file:{f}" for f in spec.sources}
    out = []
    for k in sorted(set(now) | set(then)):
        if now.get(k) != then.get(k):
            msg = f"{labels.get(k, k.removeprefix('file:'))} changed since the lock"
            if k in copied:
                msg += f" (init copied its packages into {spec.source}: `envman init --force` reads it again)"
            out.append(msg)
    return out


def _changed_lock_files(root: Path, n: Names, lock: Lock) -> list[str]:
    """The Python locks the lock names (sha256 of their bodies) and the files it records (Dockerfile,
    .envman/stack.json, pylock.toml …) against what is on disk."""
    out = []
    pl = lock.python_lock
    recorded = lock.get("files")
    checks = [(str(pl[key]), pl.get(sha_key), True) for key, sha_key in
              (("requirements", "requirements_sha256"), ("framework", "framework_sha256")) if pl.get(key)]
    checks += [(name, digest, False) for name, digest in sorted(recorded.items() if isinstance(recorded, dict) else ())]
    for name, want, body_only in checks:
        text = _read_text(root / name)
        if text is None:
            out.append(f"{name} is missing")
        elif (sha256(text.partition("\n")[2]) if body_only else file_digest(text, lock.lock_hash)) != want:
            out.append(f"{name} differs from the one {n.lock} records")
    return out


def _read_text(path: Path) -> str | None:
    """The file's text; None when it is not there; "" when it cannot be read (it then matches no digest)."""
    try:
        return path.read_text(encoding="utf-8") if path.is_file() else None
    except (OSError, UnicodeDecodeError):
        return ""
