"""envman all-reduce under torchrun: every rank sums ones through NCCL; rank 0 prints one JSON line."""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from collections.abc import Sequence
from typing import Any


def bandwidths(nbytes: int, seconds: float, world: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s, nccl-tests' PERFORMANCE.md definitions for all-reduce."""
    if seconds <= 0:
        return 0.0, 0.0
    alg = nbytes / seconds / 1e9
    return alg, alg * 2 * (world - 1) / world if world > 1 else alg


def run(mib: int, iters: int, backend: str | None) -> dict[str, Any]:
    import torch
    import torch.distributed as dist

    cuda = torch.cuda.is_available() and backend != "gloo"
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if cuda:
        torch.cuda.set_device(local)
    dist.init_process_group(backend or ("nccl" if cuda else "gloo"))
    try:
        world, rank = dist.get_world_size(), dist.get_rank()
        n = max(1, mib * 1024 * 1024 // 4)
        buf = torch.ones(n, dtype=torch.float32, device="cuda" if cuda else "cpu")
        best = float("inf")
        for i in range(iters + 1):  # the first is a warm-up (NCCL builds its rings then)
            buf.fill_(1.0)
            if cuda:
                torch.cuda.synchronize()
            t = time.perf_counter()
            dist.all_reduce(buf)
            if cuda:
                torch.cuda.synchronize()
            if i:
                best = min(best, time.perf_counter() - t)
        ok = bool(torch.all(buf == float(world)).item())
        flags = torch.tensor([0 if ok else 1], device=buf.device)
        dist.all_reduce(flags)
        alg, bus = bandwidths(n * 4, best, world)
        return {"tool": "envman-allreduce", "ok": ok and int(flags.item()) == 0, "world_size": world, "rank": rank,
                "node": os.environ.get("SLURMD_NODENAME") or socket.gethostname(), "backend": dist.get_backend(),
                "bytes": n * 4, "seconds": round(best, 6), "algbw_gbps": round(alg, 3), "busbw_gbps": round(bus, 3),
                "nccl": ".".join(map(str, torch.cuda.nccl.version())) if cuda else None}
    finally:
        dist.destroy_process_group()


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="envman all-reduce across the ranks torchrun started")
    ap.add_argument("--mib", type=int, default=64, help="buffer size in MiB (default %(default)s)")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--backend", choices=("nccl", "gloo"), help="default: nccl with GPUs, gloo without")
    args = ap.parse_args(argv)
    try:
        report = run(args.mib, args.iters, args.backend)
    except Exception as exc:  # the verdict must come out whatever broke (NCCL errors are RuntimeErrors)
        report = {"tool": "envman-allreduce", "ok": False, "rank": int(os.environ.get("RANK", "0")),
                  "node": os.environ.get("SLURMD_NODENAME") or socket.gethostname(),
                  "error": "%s: %s" % (type(exc).__name__, str(exc)[:500])}
    if report.get("rank") == 0 or not report["ok"]:
        sys.stdout.write(json.dumps(report, sort_keys=True) + "\n")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
