"""``envman uv write`` as a use case: envman's stack written into the uv project's pyproject.toml."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

from envman.errors import LockError, UsageError
from envman.inputs import MAX_SPEC, read_input
from envman.model import Matrix
from envman.redact import redact

PYPROJECT = "pyproject.toml"


@dataclass(frozen=True)
class UvPlan:
    path: Path
    before: str
    after: str
    changes: tuple[str, ...]
    source: str  # where the stack came from, for the user ("envman.lock 1a2b3c4d5e6f: torch 2.14.1 cu130")
    notes: tuple[str, ...] = ()

    @property
    def current(self) -> bool:
        """True when pyproject.toml already says what envman would write (what `--check` asks)."""
        return self.before == self.after

    def diff(self) -> str:
        """The change as a unified diff, for display: a URL's credentials in the context lines are cut
        (``https://bob:TOKEN@host`` → ``https://host``), as in every line envman prints; the file keeps them."""
        return redact("".join(difflib.unified_diff(self.before.splitlines(keepends=True),
                                                   self.after.splitlines(keepends=True),
                                                   f"{PYPROJECT} (now)", f"{PYPROJECT} (envman's stack)")))


def lock_name(profile: str | None) -> str:
    from envman.lock.layout import StackFiles

    return StackFiles.for_profile(profile).lock


def plan_uv_write(root: Path, profile: str | None = None) -> UvPlan:
    """What `envman uv write` would change in ``root``'s pyproject.toml. Raises UsageError/LockError."""
    from envman.matrix.load import load_matrix
    from envman.project.uvwrite import edit_pyproject

    path = root / PYPROJECT
    before = read_input(path, PYPROJECT, MAX_SPEC, hint="run it in a uv project (uv init makes one)")
    target, source, notes = _target(root, profile, load_matrix())
    edit = edit_pyproject(before, target)
    return UvPlan(path, before, edit.text, tuple(redact(c) for c in edit.changes), source, tuple(notes))


def write_uv_plan(plan: UvPlan) -> None:
    """Write the plan's pyproject.toml, unless the file changed since it was planned (nothing is lost)."""
    from envman.files import write_atomic

    if read_input(plan.path, PYPROJECT, MAX_SPEC) != plan.before:
        raise UsageError(f"{PYPROJECT} changed while envman was planning its edit; nothing was written",
                         hint="run `envman uv write` again")
    # a pyproject.toml linked from elsewhere in the project is written where it lives (the link stays)
    write_atomic(plan.path, plan.after, mode=plan.path.stat().st_mode & 0o7777, within=plan.path.parent)
    from envman.app.uvalias import record_write

    record_write(plan.path.parent, PYPROJECT, plan.before, plan.after)  # uv write's own edit leaves the lock current


@dataclass(frozen=True)
class _Stack:
    framework: str
    version: str
    variant: str | None
    index_url: str | None
    companions: dict
    python: str | None
    source: str


def _from_lock(root: Path, profile: str | None) -> _Stack | None:
    from envman.lock.lockfile import try_read_lock

    name = lock_name(profile)
    lock = try_read_lock(root / name)
    if lock is None:
        return None
    if not lock.is_intact():
        raise LockError(f"{name} was edited by hand (its lock_hash does not match)", hint="run `envman lock` first")
    fw = lock.stack.get("framework")
    if not isinstance(fw, dict):
        raise UsageError(f"{name}: the stack has no framework, so there is no index to write",
                         hint="envman uv write is for projects whose lock holds torch (or another framework)")
    return _Stack(str(fw["name"]), str(fw["version"]), fw.get("variant"), fw.get("index_url"),
                  dict(lock.stack.get("companions") or {}), lock.stack.get("python"), f"{name} {lock.short_hash}")


def _target(root: Path, profile: str | None, matrix: Matrix):
    from packaging.version import Version

    from envman.project.uvwrite import UvTarget

    notes: list[str] = []
    stack = _from_lock(root, profile)
    if stack is None:
        res = _resolve(root, profile, matrix)
        notes.append(f"no {lock_name(profile)} yet: the stack is the resolver's answer for envman.yaml "
                     "(`envman lock` pins it)")
        stack = _Stack(str(res.framework), str(res.version), res.variant, res.index_url, dict(res.companions),
                       res.python, "the resolver (envman.yaml)")
    release = next((r for r in matrix.frameworks.get(stack.framework, ()) if str(r.version) == stack.version), None)
    if release is None:
        notes.append(f"{stack.framework} {stack.version} is not in envman's matrix any more: requires-python is "
                     "left as it is")
    pythons = sorted(release.python, key=Version) if release else []
    target = UvTarget(
        package=release.package if release else stack.framework,
        version=Version(stack.version).public,
        variant=stack.variant,
        index_url=stack.index_url,
        companions=tuple(sorted((c, Version(v).public) for c, v in stack.companions.items() if v)),
        python_floor=pythons[0] if pythons else None,
        python=stack.python,
    )
    where = f"{stack.source}: {target.package} {target.version}" + (f" {stack.variant}" if stack.variant else "")
    return target, where, notes


def _resolve(root: Path, profile: str | None, matrix: Matrix):
    from envman.app.resolve import resolve_request
    from envman.project.spec import load_spec

    spec = load_spec(root)
    if spec is None:
        raise UsageError(f"{root.name}: no envman.lock and no envman.yaml", hint="run `envman init` first")
    if profile is not None or spec.profiles:
        raise LockError(f"no {lock_name(profile)} yet: a profile's stack is read from its lock",
                        hint="run `envman lock` first")
    if not spec.targets and not spec.cpu:
        raise LockError(f"no {lock_name(None)} yet and {spec.source} names no targets",
                        hint="run `envman lock` first (it records the stack), or add targets: to envman.yaml")
    return resolve_request(spec.framework, spec.python, spec.targets, spec.driver, spec.cuda, spec.cpu,
                           spec.cuda_devel, matrix=matrix)
