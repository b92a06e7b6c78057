"""envman.yaml ``cluster:`` → a validated ``Site``: what only the site knows (its Slurm feature for the node
class, partition, account, GPUs per node, the Kubernetes namespace and taints).

PURE: app/cluster.py reads the section (envman.yaml or pyproject's [tool.envman]) and hands it here. Kept out
of the lock's identity on purpose: moving a job to another partition must not make the image's lock
stale. Every value reaches an #SBATCH line or a manifest, so each is matched against a strict pattern (no
spaces, quotes, `$`, backquotes or newlines can pass). Every key, with an example: docs/cluster.md, "envman.yaml
`cluster:`".

Patterns are ASCII and matched whole (``fullmatch``: ``$`` would let a trailing newline through, and a digit class in
Python's default accepts any script's digits).
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from envman.cluster.plan import PROFILE_FIELDS, Site
from envman.cluster.values import mount
from envman.errors import SpecError

KEYS = (*PROFILE_FIELDS, "mounts", "tolerations", "profiles")
_SCRIPT_HINT = "no spaces, quotes, $ or newlines: the value is written into job scripts"
_PATTERNS = {
    # Slurm feature expressions: names joined by & | , with [] () * counts and ! negation
    "constraint": (re.compile(r"[A-Za-z0-9_.:&|,!*()\[\]-]{1,200}", re.ASCII),
                   "a Slurm feature expression like h100 or 'h100&ib'"),
    "partition": (re.compile(r"[A-Za-z0-9_.,-]{1,100}", re.ASCII), "a partition name like gpu"),
    "account": (re.compile(r"[A-Za-z0-9_.-]{1,100}", re.ASCII), "an account name like proj042"),
    "time": (re.compile(r"(?:[0-9]{1,4}-)?[0-9]{1,3}(?::[0-9]{2}){0,2}", re.ASCII),
             "a Slurm time like 04:00:00 or 2-00:00:00"),
    "mem": (re.compile(r"[1-9][0-9]{0,8}[KMGT]?", re.ASCII), "a Slurm memory size like 480G"),
    "namespace": (re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?", re.ASCII), "a Kubernetes namespace like training"),
}
_COUNTS = {"nodes": 4096, "gpus_per_node": 4096, "cpus_per_gpu": 1024}
_TAINT = re.compile(r"(?:[a-z0-9](?:[a-z0-9.-]{0,251}[a-z0-9])?/)?[A-Za-z0-9](?:[A-Za-z0-9._-]{0,61}[A-Za-z0-9])?",
                    re.ASCII)


def parse_site(raw: Any, source: str = "envman.yaml", where: str = "cluster", nested: bool = True) -> Site:
    if raw is None:
        return Site()
    if not isinstance(raw, dict):
        raise SpecError(f"{source}: {where}: expected a mapping (constraint: h100, partition: gpu …)",
                        hint="see docs/cluster.md#site-settings for the keys")
    allowed = KEYS if nested else PROFILE_FIELDS
    for key in raw:
        if key not in allowed:
            near = difflib.get_close_matches(str(key), allowed, n=1)
            raise SpecError(f"{source}: {where}.{key}: unknown key",
                            hint=f"did you mean {near[0]}?" if near else "keys: " + ", ".join(allowed))
    values: dict[str, Any] = {k: _text(raw, k, source, where) for k in _PATTERNS}
    for k in _COUNTS:
        values[k] = _count(raw, k, source, where)
    if not nested:
        return Site(**values)
    tolerations = _tolerations(raw.get("tolerations"), source, where)
    mounts = _mounts(raw.get("mounts"), source, where)
    profiles = _profiles(raw.get("profiles"), source, where)
    return Site(**values, tolerations=tolerations, mounts=mounts, profiles=profiles)


def _text(raw: dict, key: str, source: str, where: str) -> str | None:
    v = raw.get(key)
    if v is None:
        return None
    pattern, like = _PATTERNS[key]
    if not isinstance(v, (str, int)) or isinstance(v, bool) or not pattern.fullmatch(str(v)):
        raise SpecError(f"{source}: {where}.{key}: {str(v)[:80]!r} is not {like}", hint=_SCRIPT_HINT)
    return str(v)


def _count(raw: dict, key: str, source: str, where: str) -> int | None:
    v = raw.get(key)
    if v is None:
        return None
    top = _COUNTS[key]
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= top:
        raise SpecError(f"{source}: {where}.{key}: {str(v)[:80]!r} is not a whole number from 1 to {top}",
                        hint=f"write it without quotes, e.g. {key}: 8")
    return v


def _tolerations(v: Any, source: str, where: str) -> tuple[str, ...]:
    if v is None:
        return Site().tolerations
    if not isinstance(v, list) or not all(isinstance(t, str) and _TAINT.fullmatch(t) for t in v):
        raise SpecError(f"{source}: {where}.tolerations: expected a list of taint keys like [nvidia.com/gpu]",
                        hint="each a Kubernetes taint key: [prefix/]name, letters, digits, '-', '_', '.'")
    return tuple(v)


def _mounts(v: Any, source: str, where: str) -> tuple[str, ...]:
    if v is None:
        return ()
    if not isinstance(v, list):
        raise SpecError(f"{source}: {where}.mounts: expected a list like [/shared/data:/data:ro]",
                        hint="each SRC[:DST[:ro|rw]], absolute paths on the nodes")
    taken = {"/dev/shm"}  # the job's own (Kubernetes: a memory-backed emptyDir); a mount path is mounted once
    for i, m in enumerate(v):
        problem = mount(m) if isinstance(m, str) else f"expected a string, got {type(m).__name__}"
        if not problem:
            dst = (m.split(":") * 2)[1].rstrip("/") or "/"  # DST, or SRC when there is none
            problem = f"mounts on {dst}, which another mount or the job's /dev/shm takes" if dst in taken else None
            taken.add(dst)
        if problem:
            raise SpecError(f"{source}: {where}.mounts[{i}]: {str(m)[:80]!r} {problem}",
                            hint="each SRC[:DST[:ro|rw]], absolute paths on the nodes, e.g. /shared/data:/data:ro")
    return tuple(v)


def _profiles(v: Any, source: str, where: str) -> tuple[tuple[str, Site], ...]:
    if v is None:
        return ()
    if not isinstance(v, dict):
        raise SpecError(f"{source}: {where}.profiles: expected a mapping of profile name → {{constraint: …}}",
                        hint="e.g. profiles: {a100: {constraint: a100, gpus_per_node: 4}}")
    return tuple(sorted((str(name), parse_site(sub, source, f"{where}.profiles.{name}", nested=False))
                        for name, sub in v.items()))


def check_profiles(site: Site, declared: list[str], source: str = "envman.yaml") -> None:
    """cluster.profiles may only name profiles envman.yaml declares: a typo would silently apply nothing."""
    for name, _ in site.profiles:
        if name not in declared:
            near = difflib.get_close_matches(name, declared, n=1)
            raise SpecError(f"{source}: cluster.profiles.{name}: no such profile in profiles:",
                            hint=f"did you mean {near[0]}?" if near else
                            "declared profiles: " + (", ".join(declared) or "none (add a profiles: section first)"))
