"""Checks on what multi-node NCCL needs from a node (NCCL's env-variable docs, GPUDirect RDMA guide)."""

from __future__ import annotations

from typing import Any

from .findings import Finding, error, info, warn
from .knowledge import Knowledge
from .view import FactsView, as_dict, as_list, as_num, as_str


def _net(v: FactsView) -> dict[str, Any]:
    return as_dict(v.f.get("network"))


def _ib(net: dict[str, Any]) -> list[dict[str, Any]]:
    return [as_dict(d) for d in as_list(net.get("ib_devices")) if as_str(as_dict(d).get("name"))]


def _active_ports(devs: list[dict[str, Any]]) -> list[str]:
    return [f"{as_str(d.get('name'))}/{as_str(as_dict(p).get('port'))}" for d in devs for p in as_list(d.get("ports"))
            if as_str(as_dict(p).get("state")) == "ACTIVE"]


def _ib_usable(net: dict[str, Any]) -> bool:
    """Devices in /sys and their verbs device nodes in /dev/infiniband (what a container must be given)."""
    return bool(_ib(net)) and any(n.startswith("uverbs") for n in (as_str(x) or "" for x in as_list(net.get("dev_infiniband"))))


def ifname_matches(spec: str, names: list[str]) -> list[str]:
    """The interfaces NCCL_SOCKET_IFNAME selects: prefixes, `=` for exact names, `^` to exclude."""
    exclude = spec.startswith("^")
    body = spec[1:] if exclude else spec
    exact = body.startswith("=")
    parts = [p for p in (body[1:] if exact else body).split(",") if p]
    return [n for n in names if any(n == p if exact else n.startswith(p) for p in parts) != exclude]


def check_socket_ifname(v: FactsView, k: Knowledge) -> list[Finding]:
    net = _net(v)
    spec = as_str(as_dict(net.get("nccl_env")).get("NCCL_SOCKET_IFNAME"))
    ifs = [as_dict(i) for i in as_list(net.get("interfaces"))]
    if not spec or not ifs:
        return []
    names = [as_str(i.get("name")) or "" for i in ifs if as_str(i.get("state")) in ("up", "unknown")]
    if ifname_matches(spec, names):
        return []
    have = ", ".join(n for n in names if n != "lo") or "none besides lo"
    return [error(
        "nccl-socket-ifname",
        f"NCCL_SOCKET_IFNAME={spec} selects no interface that is up on this node (up: {have}): NCCL fails with "
        "'Bootstrap : no socket interface found'",
        f"set NCCL_SOCKET_IFNAME to this node's interface prefix (e.g. {names[0] if names else 'eth'}), or unset it",
    )]


def check_ib_in_container(v: FactsView, k: Knowledge) -> list[Finding]:
    net = _net(v)
    devs = _ib(net)
    if not devs or _ib_usable(net) or "dev_infiniband" not in net:
        return []
    names = ", ".join(as_str(d.get("name")) or "" for d in devs)
    where = "this container" if v.f.get("in_container") else "this node"
    return [warn(
        "ib-no-device-nodes",
        f"InfiniBand/RoCE devices ({names}) exist but {where} has no /dev/infiniband/uverbs*: NCCL falls back to "
        "TCP sockets, many times slower across nodes",
        "give the container the devices: docker --device=/dev/infiniband (Kubernetes: the RDMA device plugin's "
        "resource; enroot/pyxis and Apptainer bind /dev by default)",
    )]


def check_ib_ports(v: FactsView, k: Knowledge) -> list[Finding]:
    devs = _ib(_net(v))
    ports = [p for d in devs for p in as_list(d.get("ports"))]
    if not ports or _active_ports(devs):
        return []
    return [warn(
        "ib-ports-down",
        f"no InfiniBand/RoCE port is ACTIVE ({', '.join(as_str(d.get('name')) or '' for d in devs)}): "
        "NCCL uses TCP sockets between nodes",
        "check the cable/switch and the subnet manager (ibstat; sminfo), or set NCCL_IB_DISABLE=1 to say so",
    )]


def check_ib_disabled(v: FactsView, k: Knowledge) -> list[Finding]:
    net = _net(v)
    if as_str(as_dict(net.get("nccl_env")).get("NCCL_IB_DISABLE")) != "1" or not _ib_usable(net):
        return []
    active = _active_ports(_ib(net))
    if not active:
        return []
    return [warn(
        "nccl-ib-disabled",
        f"NCCL_IB_DISABLE=1, but InfiniBand/RoCE ports are active ({', '.join(active)}): NCCL uses TCP sockets",
        "unset NCCL_IB_DISABLE unless the fabric is known to be broken",
    )]


def check_memlock(v: FactsView, k: Knowledge) -> list[Finding]:
    net = _net(v)
    kib = as_num(net.get("memlock_kib"))
    if kib is None or kib < 0 or not _ib_usable(net):
        return []
    return [warn(
        "memlock-limited",
        f"the locked-memory limit is {kib:.0f} KiB: ibverbs pins NCCL's buffers and fails ('ibv_reg_mr failed', "
        "'Cannot allocate memory') unless it is unlimited",
        "ulimit -l unlimited (Slurm: PropagateResourceLimits and slurmd's own LimitMEMLOCK=infinity; "
        "docker: --ulimit memlock=-1)",
    )]


def check_gpudirect(v: FactsView, k: Knowledge) -> list[Finding]:
    net = _net(v)
    if "peermem_modules" not in net or as_list(net.get("peermem_modules")) or not v.gpus or not _ib_usable(net):
        return []
    return [info(
        "gpudirect-rdma-off",
        "InfiniBand is usable but neither nvidia_peermem nor nv_peer_mem is loaded: NCCL stages GPU buffers "
        "through host memory (no GPUDirect RDMA) unless it uses DMA-BUF (open kernel modules)",
        "sudo modprobe nvidia-peermem (shipped with the driver since 470)",
    )]


def check_net_plugin(v: FactsView, k: Knowledge) -> list[Finding]:
    net = _net(v)
    if "net_plugins" not in net:
        return []
    plugins = [as_str(p) or "" for p in as_list(net.get("net_plugins"))]
    wanted = as_str(as_dict(net.get("nccl_env")).get("NCCL_NET_PLUGIN"))
    if wanted and wanted != "none" and not any(f"libnccl-net-{wanted}.so" in p or p.endswith(wanted) for p in plugins):
        return [warn("nccl-net-plugin-missing",
                     f"NCCL_NET_PLUGIN={wanted}, but no libnccl-net-{wanted}.so is on the library path: NCCL "
                     "ignores it and uses its internal transports",
                     "install the plugin into the image, or put its folder on LD_LIBRARY_PATH")]
    efa = [as_str(d.get("name")) for d in _ib(net) if (as_str(d.get("name")) or "").startswith("efa")]
    if efa and not plugins:
        return [warn("nccl-net-plugin-missing",
                     f"AWS EFA devices ({', '.join(e or '' for e in efa)}) but no NCCL net plugin (libnccl-net*.so): "
                     "NCCL cannot use EFA and falls back to TCP sockets",
                     "install aws-ofi-nccl in the image (AWS's Deep Learning images carry it)")]
    return []


CHECKS = (check_socket_ifname, check_ib_in_container, check_ib_ports, check_ib_disabled, check_memlock,
          check_gpudirect, check_net_plugin)
