"""A stack's Python locks: the requirement lines uv is asked for, then the locks (kept, or one uv run)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path
from typing import Any

from envman.app.lockinputs import LockOptions, ProjectInputs
from envman.errors import LockError
from envman.files import ownership, sha256
from envman.lock.layout import StackFiles
from envman.lock.lockfile import Lock
from envman.lock.pins import check_user_requirements, cuda_constraints, framework_pins, numpy_constraints
from envman.lock.pylock import parse_pylock
from envman.lock.user_hashes import check_user_hashes
from envman.lock.uv import PythonLock, parse_uv_output, python_lock_job
from envman.model import Resolution
from envman.project.req import Req
from envman.project.sources.locks import preference_seed
from envman.project.spec import ProjectSpec

KEPT = "Python lock kept: uv's request is the last lock's (`envman lock --upgrade` asks the index again)"


@dataclass
class Lines:
    """What uv is asked for: the framework's pins, the user's requirements and -c constraints, the project's."""

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

    @cached_property
    def locked(self) -> PythonLock | None:
        """uv's answer, parsed once per run: every locked package."""
        return parse_uv_output(self.req) if self.req is not None else None

    @property
    def framework_names(self) -> list[str]:
        """The framework's locked closure: the packages whose block requirements.framework.lock.txt holds (a
        subset of ``locked``, rendered from the same answer: read off it, not parsed again)."""
        if self.fw is None or self.locked is None:
            return []
        heads = set(self.fw.splitlines())
        return [p.name for p in self.locked.packages if p.lines[0] in heads]


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
        return check_user_requirements(res, lines, wins, notes)

    # a -c line (or an override) on the framework is checked against the stack like a requirement; the others go to uv
    return Lines(framework_pins(res, spec.companions), checked(list(reqs)), checked(list(constraints)),
                 list(pkg.build_requires + pkg.extra_requires) if pkg else [], checked(list(inputs.overrides)), notes)


def python_locks(inputs: ProjectInputs, spec: ProjectSpec, res: Resolution, lines: Lines, files: StackFiles,
                 last: Lock | None, opts: LockOptions, digest: Callable[[], Any] | None = None) -> PythonFiles:
    """The stack's Python locks: kept when uv's request is the last lock's, else one uv run."""
    if not lines.all:
        return PythonFiles()
    root = inputs.root
    if opts.no_lock:
        made = made_from(last, inputs.inputs_hash)
        req, fw, pylock, build = (_our_body(root / n, made) for n in (files.req, files.fw, files.pylock, files.build))
        if req is None:
            return PythonFiles(notes=["--no-lock: Python dependencies are NOT locked yet; run `envman lock` before "
                                      "`envman build`"])
        return PythonFiles(req, fw, pylock, build, request=_last_request(last),
                           notes=["--no-lock: kept the existing Python lock (its inputs are unchanged)"])
    from envman.lock.indexes import lock_index_urls

    # the requirement files' own index options reach uv whole (their tokens too), through its environment
    index_urls = lock_index_urls(res.index_url, spec.index_urls, inputs.index_urls)
    constraints = (cuda_constraints(res, inputs.matrix.toolkit_wheels, lines.reqs + lines.constraints) + numpy_constraints(res, inputs.matrix)
                   + [c.line for c in lines.constraints])

    ours = _our_body(root / files.pylock)
    # a first lock prefers the repository lock's pins (uv keeps those that fit); later ones, envman's own lock
    repo_seed = None if ours is not None or opts.upgrade else preference_seed(_repo_pins(root))

    def job_with(more: list[str], more_overrides: list[str] | tuple[str, ...] = ()):
        return python_lock_job(lines.all, res.python, index_urls, lines.roots, res, upgrade=opts.upgrade,
                               previous=(_our_body(root / files.req), ours or repo_seed),
                               timeout=opts.timeout, constraints=constraints + more,
                               find_links=tuple(spec.find_links),
                               overrides=[o.line for o in lines.overrides] + list(more_overrides))

    job = job_with([])
    key = job.key()  # what the inputs ask: the exclusions below follow from uv's answer to it
    seed = job.request.seed  # the last pylock.toml, when envman wrote it and nobody edited it (--upgrade: none)
    kept = ours is not None and seed is not None and _last_request(last) == key
    lr = job.finish(seed) if kept and seed is not None else job.compile(opts.progress, lambda: _while_uv_resolves(digest))
    excluded_notes: list[str] = []
    if not kept:
        lr, excluded_notes = _settled(lr, res.python, lines.all, job_with, opts, digest)
    # the requirement lines' own --hash options against the files the lock pins (a LockError on a mismatch)
    notes = check_user_hashes([*inputs.reqs, *inputs.constraints], parse_pylock(lr.pylock_text or "")) + excluded_notes
    notes.append(KEPT if kept else f"locked {len(lr.python_lock.packages)} Python packages with sha256 hashes (uv)")
    notes += lr.notes + stack_mismatches(res, lr.versions)
    if lr.sdist_only:
        notes.append(f"no wheel for {', '.join(sorted(lr.sdist_only))}: the image builds them from source")
    build = _our_body(root / files.build, made_from(last, inputs.inputs_hash)) if kept else None
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
        modules = fix(lr.versions, {p.name: p.via for p in lr.python_lock.packages}, inputs, _requires_of(lr), families)
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


def _requires_of(lr) -> Callable[[str], list[str]]:
    """A locked package's Requires-Dist, read only when a clash asks (lock/graph.py's disk cache holds them)."""

    @cache
    def requires(name: str) -> list[str]:
        from envman.lock.graph import requires_dist

        pkg = next((p for p in parse_pylock(lr.pylock_text or "") if p.name == name), None)
        return (requires_dist(pkg, 30.0) or []) if pkg is not None else []

    return requires


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
        g, w = (tuple(map(int, v.split(".")[:min(parts, 2)])) for v in (got[1], str(want)))
        if g != w and (what == "CUDA" or g[0] != w[0] or g < w):  # cuDNN and NCCL are held to floors (lock/pins.py)
            out.append(f"warning: the lock pins {got[0]}=={got[1]} but the stack expects {what} {want} "
                       f"(smoke test and driver floor follow the stack); pin it with a constraint or choose another stack")
    return out


def _while_uv_resolves(digest: Callable[[], Any] | None = None) -> None:
    """What a lock needs later and can prepare while uv waits on the network (memoized where it is used)."""
    import yaml  # noqa: F401  (compose.yaml names the new lock hash: it is dumped again)

    from envman._compat import tomllib  # noqa: F401  (uv's pylock.toml is parsed right after it exits)
    from envman.image.kit import kit_text
    from envman.image.render import warm

    if digest is not None:
        digest()  # its registry is asked in a thread from now on
    warm()
    kit_text()


def made_from(last: Lock | None, inputs_hash: str) -> tuple[str, frozenset[str]]:
    """The inputs' hash and the digests of the lock files' bodies the last lock records when it was made from
    those inputs (none otherwise): which lock files on disk this run may keep."""
    if last is None or not last.is_intact() or last.inputs_hash != inputs_hash:
        return inputs_hash, frozenset()
    py = last.python_lock
    recorded = [py.get("requirements_sha256"), py.get("framework_sha256"), *(last.get("files") or {}).values()]
    return inputs_hash, frozenset(d for d in recorded if isinstance(d, str))


def _our_body(path: Path, made: tuple[str, frozenset[str]] | None = None) -> str | None:
    """A file envman generated and nobody edited, without its header (to seed uv's preferences); with ``made``
    (``made_from``), only when it was made from those inputs: its body is one the last lock of those inputs
    records (a lock file's header names only its content), or its header names them (an older envman's file)."""
    o = ownership(path)
    if not o.exists or not o.ours or o.edited:
        return None
    from envman.inputs import read_regular_text

    try:
        body = read_regular_text(path).partition("\n")[2]  # bounded; a FIFO put there since never blocks
    except (OSError, UnicodeDecodeError):
        return None
    if made is not None and o.inputs_hash != made[0] and sha256(body) not in made[1]:
        return None
    return body


def _repo_pins(root: Path) -> tuple[tuple[str, str], ...]:
    from envman.errors import UsageError
    from envman.project.sources.locks import preferences

    try:
        return preferences(root)
    except UsageError:  # an unreadable repository lock: init said so; preferences are only a starting point
        return ()


def _last_request(last: Lock | None) -> str | None:
    """The uv request the current lock's Python locks answer, when envman wrote it and nobody edited it."""
    key = last.python_lock.get("request") if last is not None and last.is_intact() else None
    return key if isinstance(key, str) else None

