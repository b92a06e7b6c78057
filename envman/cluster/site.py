"""envman.yaml ``cluster:`` → a validated ``Site``: what only the site knows (its Slurm feature for the node
class, partition, account, GPUs per node, the Kubernetes namespace and taints).

PURE: app/cluster.py reads the section (envman.yaml or pyproject's [tool.envman]) and hands it here. Kept out
of the lock's identity on purpose: moving a job to another partition must not make the image's lock
stale. Every value reaches an #SBATCH line or a manifest, so each is matched against a strict pattern (no
spaces, quotes, `$`, backquotes or newlines can pass).

    cluster:
      constraint: h100          # sbatch --constraint: the node class's Slurm feature
      partition: gpu
      account: proj042
      time: "04:00:00"
      nodes: 2
      gpus_per_node: 8
      namespace: training       # Kubernetes
      tolerations: [nvidia.com/gpu]
      profiles:                 # per profile (envman.yaml profiles:), the same keys but tolerations
        a100: {constraint: a100, gpus_per_node: 4}
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from envman.cluster.plan import Site
from envman.errors import SpecError

KEYS = ("constraint", "partition", "account", "time", "nodes", "gpus_per_node", "namespace", "tolerations", "profiles")
_PATTERNS = {
    # Slurm feature expressions: names joined by & | , with [] () * counts and ! negation
    "constraint": (re.compile(r"^[A-Za-z0-9_.:&|,!*()\[\]-]{1,200}$"), "a Slurm feature expression like h100 or 'h100&ib'"),
    "partition": (re.compile(r"^[A-Za-z0-9_.,-]{1,100}$"), "a partition name like gpu"),
    "account": (re.compile(r"^[A-Za-z0-9_.-]{1,100}$"), "an account name like proj042"),
    "time": (re.compile(r"^(?:\d+-)?\d{1,3}(?::\d{2}){0,2}$"), "a Slurm time like 04:00:00 or 2-00:00:00"),
    "namespace": (re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$"), "a Kubernetes namespace like training"),
}
_TAINT = re.compile(r"^(?:[a-z0-9](?:[a-z0-9.-]{0,251}[a-z0-9])?/)?[A-Za-z0-9](?:[A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$")


def parse_site(raw: Any, source: str = "envman.yaml", where: str = "cluster", nested: bool = True) -> Site:
    if raw is None:
        return Site()
    if not isinstance(raw, dict):
        raise SpecError(f"{source}: {where}: expected a mapping (constraint: h100, partition: gpu …)")
    allowed = KEYS if nested else tuple(k for k in KEYS if k not in ("profiles", "tolerations"))
    for key in raw:
        if key not in allowed:
            near = difflib.get_close_matches(str(key), allowed, n=1)
            raise SpecError(f"{source}: {where}.{key}: unknown key",
                            hint=f"did you mean {near[0]}?" if near else "keys: " + ", ".join(allowed))
    values: dict[str, Any] = {k: _text(raw, k, source, where) for k in _PATTERNS}
    for k in ("nodes", "gpus_per_node"):
        values[k] = _count(raw, k, source, where)
    site = Site(**values)
    if not nested:
        return site
    tolerations = _tolerations(raw.get("tolerations"), source, where)
    profiles = _profiles(raw.get("profiles"), source, where)
    return Site(**values, tolerations=tolerations, profiles=profiles)


def _text(raw: dict, key: str, source: str, where: str) -> str | None:
    v = raw.get(key)
    if v is None:
        return None
    pattern, like = _PATTERNS[key]
    if not isinstance(v, (str, int)) or isinstance(v, bool) or not pattern.match(str(v)):
        raise SpecError(f"{source}: {where}.{key}: {str(v)[:80]!r} is not {like}",
                        hint="no spaces, quotes, $ or newlines: the value is written into job scripts")
    return str(v)


def _count(raw: dict, key: str, source: str, where: str) -> int | None:
    v = raw.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 4096:
        raise SpecError(f"{source}: {where}.{key}: {v!r} is not a whole number from 1 to 4096")
    return v


def _tolerations(v: Any, source: str, where: str) -> tuple[str, ...]:
    if v is None:
        return Site().tolerations
    if not isinstance(v, list) or not all(isinstance(t, str) and _TAINT.match(t) for t in v):
        raise SpecError(f"{source}: {where}.tolerations: expected a list of taint keys like [nvidia.com/gpu]")
    return tuple(v)


def _profiles(v: Any, source: str, where: str) -> tuple[tuple[str, Site], ...]:
    if v is None:
        return ()
    if not isinstance(v, dict):
        raise SpecError(f"{source}: {where}.profiles: expected a mapping of profile name → {{constraint: …}}")
    return tuple(sorted((str(name), parse_site(sub, source, f"{where}.profiles.{name}", nested=False))
                        for name, sub in v.items()))
