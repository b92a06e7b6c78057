"""The multi-node NCCL facts (portable/facts/network.py) and their doctor checks (doctor/checks_nccl.py):
each check fires on the node that has the problem and stays quiet on its near miss."""

from __future__ import annotations

import pytest

from envman.portable.doctor.checks import run_checks
from envman.portable.doctor.checks_nccl import ifname_matches
from envman.portable.facts import network


def node(**net):
    """A DGX-like node: 8 H100s, two ConnectX ports active, verbs device nodes, peermem, unlimited memlock."""
    n = {
        "interfaces": [{"name": "lo", "state": "unknown", "type": "loopback", "mtu": 65536, "speed_mbps": None},
                       {"name": "enp90s0", "state": "up", "type": "ether", "mtu": 9000, "speed_mbps": 100000},
                       {"name": "ibp12s0", "state": "up", "type": "infiniband", "mtu": 4092, "speed_mbps": 400000}],
        "ib_devices": [{"name": "mlx5_0", "ports": [{"port": "1", "state": "ACTIVE", "link_layer": "InfiniBand",
                                                    "rate": "400 Gb/sec (4X NDR)"}]},
                       {"name": "mlx5_1", "ports": [{"port": "1", "state": "ACTIVE", "link_layer": "InfiniBand",
                                                    "rate": "400 Gb/sec (4X NDR)"}]}],
        "dev_infiniband": ["rdma_cm", "uverbs0", "uverbs1"],
        "peermem_modules": ["nvidia_peermem"],
        "net_plugins": [],
        "memlock_kib": -1,
        "nccl_env": {},
    }
    n.update(net)
    gpus = [{"index": i, "name": "NVIDIA H100 80GB HBM3", "cc": "9.0", "mem_total_mib": 81559} for i in range(8)]
    return {"in_container": True, "driver": "580.95.05", "gpus": gpus, "network": n}


def ids(facts):
    return {f.check: f for f in run_checks(facts) if f.check.startswith(("nccl", "ib-", "memlock", "gpudirect"))}


def test_a_healthy_node_has_no_nccl_finding():
    assert ids(node()) == {}


@pytest.mark.parametrize("spec, names, want", [
    ("eth", ["lo", "eth0", "eth1", "ib0"], ["eth0", "eth1"]),
    ("=eth0", ["eth0", "eth01"], ["eth0"]),
    ("^docker,lo", ["lo", "docker0", "ens3"], ["ens3"]),
    ("ib,enp", ["lo", "ibp12s0", "enp90s0"], ["ibp12s0", "enp90s0"]),
])
def test_socket_ifname_follows_nccl_prefix_rules(spec, names, want):
    assert ifname_matches(spec, names) == want


def test_a_socket_ifname_that_names_no_interface_is_an_error():
    f = ids(node(nccl_env={"NCCL_SOCKET_IFNAME": "eth0"}))["nccl-socket-ifname"]
    assert f.severity == "error"
    assert "NCCL_SOCKET_IFNAME=eth0 selects no interface" in f.verdict and "enp90s0" in f.verdict
    assert "no socket interface found" in f.verdict
    # the near miss: a prefix that matches, or a down interface not being the only candidate
    assert "nccl-socket-ifname" not in ids(node(nccl_env={"NCCL_SOCKET_IFNAME": "enp"}))
    assert "nccl-socket-ifname" not in ids(node(nccl_env={"NCCL_SOCKET_IFNAME": "^docker,lo"}))


def test_infiniband_without_device_nodes_in_the_container_is_said():
    f = ids(node(dev_infiniband=[]))["ib-no-device-nodes"]
    assert f.severity == "warn" and "mlx5_0, mlx5_1" in f.verdict and "this container" in f.verdict
    assert "--device=/dev/infiniband" in f.remedy
    assert "ib-no-device-nodes" not in ids(node(ib_devices=[], dev_infiniband=[]))  # no IB at all: nothing to say


def test_ports_down_memlock_and_peermem():
    down = [{"name": "mlx5_0", "ports": [{"port": "1", "state": "DOWN", "link_layer": "InfiniBand", "rate": None}]}]
    assert "ib-ports-down" in ids(node(ib_devices=down))
    got = ids(node(memlock_kib=64))
    assert "memlock-limited" in got and "64 KiB" in got["memlock-limited"].verdict
    assert "memlock-limited" not in ids(node(memlock_kib=64, dev_infiniband=[]))  # IB unusable anyway: one finding
    assert ids(node(peermem_modules=[]))["gpudirect-rdma-off"].severity == "info"
    assert "nccl-ib-disabled" in ids(node(nccl_env={"NCCL_IB_DISABLE": "1"}))


def test_net_plugins_named_or_needed_by_efa():
    assert "nccl-net-plugin-missing" in ids(node(nccl_env={"NCCL_NET_PLUGIN": "aws-ofi"}))
    ok = node(nccl_env={"NCCL_NET_PLUGIN": "aws-ofi"}, net_plugins=["/opt/amazon/ofi-nccl/lib/libnccl-net-aws-ofi.so"])
    assert "nccl-net-plugin-missing" not in ids(ok)
    efa = [{"name": "efa_0", "ports": [{"port": "1", "state": "ACTIVE", "link_layer": "Unspecified", "rate": None}]}]
    assert "AWS EFA" in ids(node(ib_devices=efa))["nccl-net-plugin-missing"].verdict


def test_unknown_network_facts_stay_quiet():
    facts = node()
    del facts["network"]
    assert ids(facts) == {}
    assert ids({**node(), "network": "junk"}) == {}


def test_the_probe_reads_sysfs(monkeypatch):
    """The real probe on this machine returns the documented shape (docs/facts.md)."""
    got = network.probe_network()
    assert set(got) == {"interfaces", "ib_devices", "dev_infiniband", "peermem_modules", "net_plugins",
                        "memlock_kib", "nccl_env"}
    assert any(i["name"] == "lo" and i["type"] == "loopback" for i in got["interfaces"])
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "lo")
    assert network.probe_network()["nccl_env"]["NCCL_SOCKET_IFNAME"] == "lo"
