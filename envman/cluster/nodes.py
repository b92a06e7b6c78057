"""PURE: the per-node preflight reports of a readiness run (NAME_<lock12>.nodes.RUNTIME.sbatch writes one JSON
per node) → one table by node class: nodes with the same GPUs and driver form a class; each class shows the
lock's verdict on it and what multi-node NCCL will find there.

The reports come from every node of a job: untrusted input. Each is held to ``report_problem`` (the types the
preflight writes) before it is read, and every string that reaches the table is one printable line
(``printable``): a GPU name holding a newline cannot fake a table line.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")
MAX_TEXT = 200  # characters of one value in the table


def printable(value: Any) -> str:
    """One line of printable text: control and bidi characters shown as escapes, long values cut."""
    text = str(value)
    text = _UNPRINTABLE.sub(lambda m: repr(m.group())[1:-1], text)
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


def _is(*kinds: type) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, kinds) and not isinstance(v, bool)  # a bool is no count


def _opt(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: v is None or check(v)


def _dicts(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, dict) for x in v)


# field → the check its value must pass, as envman_portable.preflight and .allreduce write them
PREFLIGHT_FIELDS = {"node": _is(str), "exit_code": _is(int), "gpu_count": _opt(_is(int)), "gpus": _opt(_dicts),
                    "driver": _opt(_is(str)), "shm_mib": _opt(_is(int)), "checks": _opt(_dicts),
                    "network": _opt(_is(dict))}
ALLREDUCE_FIELDS = {"ok": lambda v: isinstance(v, bool), "node": _opt(_is(str)), "world_size": _opt(_is(int)),
                    "busbw_gbps": _opt(_is(int, float)), "bytes": _opt(_is(int)), "backend": _opt(_is(str)),
                    "error": _opt(_is(str))}
NETWORK_FIELDS = {"nccl_env": _opt(_is(dict)), "ib_devices": _opt(_dicts), "dev_infiniband": _opt(_is(list)),
                  "net_plugins": _opt(_is(list)), "memlock_kib": _opt(_is(int)), "peermem_modules": _opt(_is(list))}


def report_problem(doc: Any) -> str | None:
    """Why a node's report cannot be read, or None: each field the table reads has the preflight's type."""
    if not isinstance(doc, dict):
        return "not a JSON object"
    allreduce = doc.get("tool") == "envman-allreduce"
    fields = ALLREDUCE_FIELDS if allreduce else PREFLIGHT_FIELDS
    for name in ("ok",) if allreduce else ("node", "exit_code"):
        if name not in doc:
            return f"no {name}"
    for name, ok in fields.items():
        if name in doc and not ok(doc[name]):
            return f"{name}: unexpected {type(doc[name]).__name__}"
    net = doc.get("network")
    return _network_problem(net) if isinstance(net, dict) else None


def _network_problem(net: dict[str, Any]) -> str | None:
    for name, ok in NETWORK_FIELDS.items():
        if name in net and not ok(net[name]):
            return f"network.{name}: unexpected {type(net[name]).__name__}"
    for d in net.get("ib_devices") or []:
        ports = d.get("ports")
        if not (ports is None or _dicts(ports)):
            return "network.ib_devices[].ports: not a list of objects"
    return None


@dataclass(frozen=True)
class NodeClass:
    gpus: str  # "8× NVIDIA H100 80GB HBM3" or "no GPU"
    driver: str
    nodes: tuple[str, ...]
    ready: tuple[str, ...]  # nodes whose preflight passed
    failures: tuple[str, ...]  # "gpu-a17: driver floor 570.124.06 (expected >= 580.65.06)"
    nccl: str  # "IFNAME=ib; IB 2/2 ports active; peermem; memlock unlimited"
    shm: str
    allreduce: tuple[str, ...] = ()  # "gpu-a17: 8 ranks, busbw 361.2 GB/s" per node that ran one

    @property
    def verdict(self) -> str:
        if len(self.ready) == len(self.nodes):
            return "ready"
        return f"NOT READY ({len(self.nodes) - len(self.ready)}/{len(self.nodes)})"


def _gpus(r: dict[str, Any]) -> str:
    names = sorted({printable(g.get("name")) for g in r.get("gpus") or [] if isinstance(g, dict)})
    n = r.get("gpu_count") or 0
    return f"{n}× {', '.join(names)}" if n else "no GPU"


def nccl_summary(net: Any) -> str:
    if not isinstance(net, dict):
        return "not probed"
    env = net.get("nccl_env") or {}
    parts = [f"IFNAME={printable(env['NCCL_SOCKET_IFNAME'])}"] if env.get("NCCL_SOCKET_IFNAME") else []
    ports = [p for d in net.get("ib_devices") or [] for p in (d.get("ports") or []) if isinstance(p, dict)]
    active = sum(1 for p in ports if p.get("state") == "ACTIVE")
    if not ports:
        parts.append("no IB/RoCE (TCP sockets)")
    else:
        verbs = any(str(n).startswith("uverbs") for n in net.get("dev_infiniband") or [])
        parts.append(f"IB {active}/{len(ports)} ports active" + ("" if verbs else ", no /dev/infiniband"))
        parts.append("peermem" if net.get("peermem_modules") else "no peermem")
    if net.get("net_plugins"):
        parts.append(f"{len(net['net_plugins'])} net plugin(s)")
    mem = net.get("memlock_kib")
    parts.append("memlock unlimited" if mem == -1 else (f"memlock {mem} KiB" if isinstance(mem, int) else "memlock ?"))
    return "; ".join(parts)


def _failures(r: dict[str, Any]) -> list[str]:
    node = printable(r.get("node") or "?")
    out = []
    for c in r.get("checks") or []:
        if isinstance(c, dict) and c.get("status") == "fail":
            want = f" (expected {printable(c['expected'])})" if c.get("expected") is not None else ""
            out.append(f"{node}: {printable(c.get('name'))} {printable(c.get('observed'))}{want}")
    return out or ([f"{node}: preflight exited {r.get('exit_code')}"] if r.get("exit_code") else [])


def allreduce_line(doc: dict[str, Any]) -> str:
    """One all-reduce report (envman_portable.allreduce) in words."""
    where = printable(doc.get("node") or "?")
    if not doc.get("ok"):
        return f"{where}: FAILED {printable(doc.get('error') or 'wrong sum')}"
    return (f"{where}: {doc.get('world_size')} ranks over {printable(doc.get('backend'))}, busbw "
            f"{doc.get('busbw_gbps')} GB/s ({(doc.get('bytes') or 0) // 2**20} MiB)")


def node_classes(reports: list[dict[str, Any]], allreduce: dict[str, dict[str, Any]] | None = None) -> list[NodeClass]:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in reports:
        groups[(_gpus(r), printable(r.get("driver") or "no driver"))].append(r)
    out = []
    for (gpus, driver), rs in sorted(groups.items()):
        rs = sorted(rs, key=lambda r: str(r.get("node")))
        shm = sorted({f"{r['shm_mib']} MiB" for r in rs if isinstance(r.get("shm_mib"), int)})
        out.append(NodeClass(
            gpus=gpus, driver=driver, nodes=tuple(printable(r.get("node")) for r in rs),
            ready=tuple(printable(r.get("node")) for r in rs if r.get("exit_code") == 0),
            failures=tuple(f for r in rs for f in _failures(r)),
            nccl=" | ".join(sorted({nccl_summary(r.get("network")) for r in rs})), shm=", ".join(shm) or "?",
            allreduce=tuple(allreduce_line(allreduce[str(r.get("node"))]) for r in rs
                            if allreduce and str(r.get("node")) in allreduce),
        ))
    return out
