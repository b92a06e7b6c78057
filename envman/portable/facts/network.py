"""What NCCL sees of the network on this node (/sys, /proc, /dev and getrlimit only)."""

from __future__ import annotations

import glob
import os
import re
from typing import Any

from .commands import read_text

# the net plugins NCCL loads by name (libnccl-net.so, or libnccl-net-<NCCL_NET_PLUGIN>.so)
PLUGIN_GLOB = "libnccl-net*.so*"
LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib",
            "/opt/amazon/ofi-nccl/lib", "/opt/amazon/ofi-nccl/lib64", "/opt/hpcx/nccl_rdma_sharp_plugin/lib")
# kernel modules for GPUDirect RDMA: nvidia-peermem (driver 470+) or Mellanox's older nv_peer_mem
PEERMEM_MODULES = ("nvidia_peermem", "nv_peer_mem")
ARPHRD = {"1": "ether", "32": "infiniband", "772": "loopback"}


def probe_network() -> dict[str, Any]:
    return {
        "interfaces": interfaces(),
        "ib_devices": ib_devices(),
        "dev_infiniband": _listdir("/dev/infiniband"),
        "peermem_modules": [m for m in PEERMEM_MODULES if os.path.isdir("/sys/module/" + m)],
        "net_plugins": net_plugins(),
        "memlock_kib": memlock_kib(),
        "nccl_env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")},
    }


def interfaces() -> list[dict[str, Any]]:
    out = []
    for name in _listdir("/sys/class/net"):
        base = "/sys/class/net/" + name
        speed = _int(read_text(base + "/speed"))
        out.append({
            "name": name,
            "state": (read_text(base + "/operstate") or "").strip() or None,
            "type": ARPHRD.get((read_text(base + "/type") or "").strip(), "other"),
            "mtu": _int(read_text(base + "/mtu")),
            "speed_mbps": speed if speed is not None and speed > 0 else None,
        })
    return out


def ib_devices() -> list[dict[str, Any]]:
    """/sys/class/infiniband: mlx5_0 … (InfiniBand or RoCE, by each port's link layer), efa_0 on AWS."""
    out = []
    for dev in _listdir("/sys/class/infiniband"):
        ports = []
        for port in _listdir("/sys/class/infiniband/%s/ports" % dev):
            base = "/sys/class/infiniband/%s/ports/%s" % (dev, port)
            state = (read_text(base + "/state") or "").strip()  # "4: ACTIVE"
            ports.append({
                "port": port,
                "state": state.split(":", 1)[-1].strip() or None,
                "link_layer": (read_text(base + "/link_layer") or "").strip() or None,
                "rate": (read_text(base + "/rate") or "").strip() or None,
            })
        out.append({"name": dev, "ports": ports})
    return out


def net_plugins() -> list[str]:
    dirs = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d] + list(LIB_DIRS)
    found: list[str] = []
    for d in dict.fromkeys(dirs):
        found += sorted(glob.glob(os.path.join(d, PLUGIN_GLOB)))
    return found


def memlock_kib() -> int | None:
    """The soft RLIMIT_MEMLOCK in KiB; -1 is unlimited; None when unreadable."""
    try:
        import resource
    except ImportError:
        return None
    try:
        soft, _hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    except (OSError, ValueError):
        return None
    return -1 if soft == resource.RLIM_INFINITY else int(soft // 1024)


def _listdir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def _int(text: str | None) -> int | None:
    m = re.match(r"\s*(-?\d+)", text or "")
    return int(m.group(1)) if m else None
