"""PURE: the per-node preflight reports of a readiness run (NAME_<lock12>.nodes.RUNTIME.sbatch writes one JSON
per node) → one table by node class: nodes with the same GPUs and driver form a class; each class shows the
lock's verdict on it and what multi-node NCCL will find there.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any


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
    names = sorted({str(g.get("name")) for g in r.get("gpus") or [] if isinstance(g, dict)})
    n = int(r.get("gpu_count") or 0)
    return f"{n}× {', '.join(names)}" if n else "no GPU"


def nccl_summary(net: Any) -> str:
    if not isinstance(net, dict):
        return "not probed"
    env = net.get("nccl_env") or {}
    parts = [f"IFNAME={env['NCCL_SOCKET_IFNAME']}"] if env.get("NCCL_SOCKET_IFNAME") else []
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
    node = str(r.get("node") or "?")
    out = []
    for c in r.get("checks") or []:
        if isinstance(c, dict) and c.get("status") == "fail":
            want = f" (expected {c['expected']})" if c.get("expected") is not None else ""
            out.append(f"{node}: {c.get('name')} {c.get('observed')}{want}")
    return out or ([f"{node}: preflight exited {r.get('exit_code')}"] if r.get("exit_code") else [])


def allreduce_line(doc: dict[str, Any]) -> str:
    """One all-reduce report (envman_portable.allreduce) in words."""
    where = str(doc.get("node") or "?")
    if not doc.get("ok"):
        return f"{where}: FAILED {doc.get('error') or 'wrong sum'}"
    return (f"{where}: {doc.get('world_size')} ranks over {doc.get('backend')}, busbw {doc.get('busbw_gbps')} GB/s "
            f"({doc.get('bytes', 0) // 2**20} MiB)")


def node_classes(reports: list[dict[str, Any]], allreduce: dict[str, dict[str, Any]] | None = None) -> list[NodeClass]:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in reports:
        groups[(_gpus(r), str(r.get("driver") or "no driver"))].append(r)
    out = []
    for (gpus, driver), rs in sorted(groups.items()):
        rs = sorted(rs, key=lambda r: str(r.get("node")))
        shm = sorted({f"{r['shm_mib']} MiB" for r in rs if isinstance(r.get("shm_mib"), int)})
        out.append(NodeClass(
            gpus=gpus, driver=driver, nodes=tuple(str(r.get("node")) for r in rs),
            ready=tuple(str(r.get("node")) for r in rs if r.get("exit_code") == 0),
            failures=tuple(f for r in rs for f in _failures(r)),
            nccl=" | ".join(sorted({nccl_summary(r.get("network")) for r in rs})), shm=", ".join(shm) or "?",
            allreduce=tuple(allreduce_line(allreduce[str(r.get("node"))]) for r in rs
                            if allreduce and str(r.get("node")) in allreduce),
        ))
    return out
