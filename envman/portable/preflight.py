"""envman preflight: is THIS node ready for the lock's image? (docs/cluster.md, the preflight)"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from collections.abc import Sequence
from typing import Any

from .frameworks.base import check
from .smoke import EXIT_NO_GPU, run_smoke
from .versions import vcmp

EXIT_READY, EXIT_NOT_READY = 0, 1


# ============================================================================ pure
def evaluate_driver(driver: str | None, floor: str | None) -> dict[str, Any] | None:
    """The lock's driver floor against this node's driver; None when the lock names no floor (a CPU stack)."""
    if not floor:
        return None
    if not driver:
        return check("driver floor", False, ">= " + floor, None,
                     "no NVIDIA driver answers on this node (NVML and nvidia-smi)")
    ok = vcmp(driver, floor) >= 0
    detail = "" if ok else ("the image's CUDA needs driver >= %s; this runtime does not enforce "
                            "NVIDIA_REQUIRE_CUDA, so envman checks it here" % floor)
    return check("driver floor", ok, ">= " + floor, driver, detail, gpu=True)


def evaluate_gpu_count(count: int, wanted: int) -> dict[str, Any] | None:
    if wanted <= 0:
        return None
    return check("gpus on node", count >= wanted, ">= %d" % wanted, count,
                 "" if count >= wanted else "the job asked for %d GPU(s) per node" % wanted, gpu=True)


def decide(smoke_code: int, extra: Sequence[dict[str, Any] | None], require_gpu: bool) -> int:
    if any(c is not None and c["status"] == "fail" for c in extra):
        return EXIT_NOT_READY
    if smoke_code == 0 or (smoke_code == EXIT_NO_GPU and not require_gpu):
        return EXIT_READY
    return EXIT_NOT_READY


def summary_lines(report: dict[str, Any]) -> list[str]:
    node = report.get("node") or "?"
    lines = []
    for c in report.get("checks", []):
        if c["status"] == "fail":
            want = "" if c.get("expected") is None else " (expected %s)" % (c["expected"],)
            detail = (" - " + c["detail"]) if c.get("detail") else ""
            lines.append("preflight %s: FAIL %s: %s%s%s" % (node, c["name"], c.get("observed"), want, detail))
    verdict = "ready" if report["exit_code"] == EXIT_READY else "NOT READY"
    driver = report.get("driver") or "no driver"
    lines.append("preflight %s: %s (driver %s, %d GPU(s), smoke %s, lock %s)" % (
        node, verdict, driver, report.get("gpu_count", 0), report.get("smoke_status"),
        str(report.get("lock_hash") or "?")[:12]))
    return lines


# ============================================================================ observation
def node_name() -> str:
    """The scheduler's name for this node (a container's hostname is often the image's or the pod's)."""
    return os.environ.get("ENVMAN_NODE") or os.environ.get("SLURMD_NODENAME") or socket.gethostname()


def observe_node() -> dict[str, Any]:
    from .facts.nvidia import scan_gpus

    scan = scan_gpus()
    gpus = [{"name": g.name, "cc": g.cc, "memory_mib": g.mem_total_mib} for g in scan.gpus]
    try:
        st = os.statvfs("/dev/shm")
        shm: int | None = st.f_blocks * st.f_frsize // (1024 * 1024)
    except OSError:
        shm = None
    return {"node": node_name(), "driver": scan.driver, "gpus": gpus, "gpu_count": len(gpus),
            "driver_error": None if scan.driver else scan.error, "shm_mib": shm}


def observe_network() -> dict[str, Any] | None:
    from .facts.network import probe_network

    try:
        return probe_network()
    except Exception as exc:  # a probe failure is a fact, not a crash
        return {"error": "%s: %s" % (type(exc).__name__, exc)}


def run_preflight(expect: str, *, min_driver: str | None = None, min_gpus: int = 0,
                  require_gpu: bool = False) -> dict[str, Any]:
    smoke = run_smoke(expect, require_gpu)
    node = observe_node()
    extra = [evaluate_driver(node["driver"], min_driver), evaluate_gpu_count(node["gpu_count"], min_gpus)]
    code = decide(int(smoke.get("exit_code", EXIT_NOT_READY)), extra, require_gpu)
    return {
        "schema": 1, "tool": "envman-preflight", "exit_code": code, **node,
        "min_driver": min_driver, "min_gpus": min_gpus, "require_gpu": require_gpu,
        "lock_hash": smoke.get("lock_hash"), "smoke_status": smoke.get("status"),
        "smoke_exit_code": smoke.get("exit_code"),
        "checks": [c for c in extra if c is not None] + list(smoke.get("checks", [])),
        "notes": list(smoke.get("notes", [])), "doctor": smoke.get("doctor"), "network": observe_network(),
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="envman preflight: is this node ready for the image's lock?")
    ap.add_argument("--expect", default="/opt/envman/stack.json", help="expected-stack JSON (default %(default)s)")
    ap.add_argument("--min-driver", help="the lock's NVIDIA driver floor, e.g. 580.65.06")
    ap.add_argument("--min-gpus", type=int, default=0, help="GPUs this node must show (the job's per-node count)")
    ap.add_argument("--require-gpu", action="store_true", help="no visible GPU is a failure")
    ap.add_argument("--json", action="store_true", help="print the JSON report on stdout")
    args = ap.parse_args(argv)
    try:
        report = run_preflight(args.expect, min_driver=args.min_driver, min_gpus=args.min_gpus,
                               require_gpu=args.require_gpu)
    except Exception as exc:  # the verdict must come out whatever broke
        report = {"schema": 1, "tool": "envman-preflight", "exit_code": EXIT_NOT_READY, "node": node_name(),
                  "checks": [check("preflight", False, None, None, "%s: %s" % (type(exc).__name__, exc))]}
    sys.stderr.write("\n".join(summary_lines(report)) + "\n")
    if args.json:
        sys.stdout.write(json.dumps(report, sort_keys=True, default=str) + "\n")
    sys.stdout.flush()
    return int(report["exit_code"])


if __name__ == "__main__":
    sys.exit(main())
