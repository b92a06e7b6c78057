#!/usr/bin/env python3
"""Achieved matmul TFLOP/s per precision and device memory bandwidth, to set against gpu_perf's figures.

    python3 probe_roofline.py [--dry-run]

Prints one JSON object. A square n×n×n product is 2·n³ FLOP; each figure is the mean of `reps` timed
products after warm-ups, on random data (zeros run faster on Hopper: KINDS.md saw 894 vs 788 TFLOP/s).
Bandwidth: a device-to-device copy of a large buffer moves 2 × its bytes (read + write), as
`cudaMemcpy` benchmarks count it. fp32 is measured twice: with TF32 off (PyTorch's default for matmuls)
and on. With --dry-run the sizes are tiny and the CPU runs them: the code path is exercised, the
numbers mean nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def timed(torch, fn, reps: int, device: str) -> float:
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for _ in range(3):
        fn()
    sync()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    sync()
    return (time.perf_counter() - t0) / reps


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dry-run", action="store_true")
    a = ap.parse_args()
    import torch

    device = "cuda" if torch.cuda.is_available() and not a.dry_run else "cpu"
    if device != "cuda" and not a.dry_run:
        print(json.dumps({"status": "skipped", "reason": "torch sees no GPU"}))
        return 0
    n, reps, copy_bytes = (8192, 10, 4 << 30) if device == "cuda" else (256, 2, 1 << 22)
    out: dict = {"status": "ok", "device": device, "n": n, "reps": reps, "tflops": {}}
    cases = [("bf16", torch.bfloat16, False), ("fp16", torch.float16, False),
             ("tf32", torch.float32, True), ("fp32", torch.float32, False)]
    for name, dtype, tf32 in cases:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        x = torch.randn(n, n, device=device, dtype=dtype)
        y = torch.randn(n, n, device=device, dtype=dtype)
        dt = timed(torch, lambda x=x, y=y: x @ y, reps, device)
        out["tflops"][name] = round(2 * n ** 3 / dt / 1e12, 2)
    torch.backends.cuda.matmul.allow_tf32 = False
    src = torch.empty(copy_bytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    dt = timed(torch, lambda: dst.copy_(src), reps, device)
    out["copy_bytes"] = copy_bytes
    out["bandwidth_gb_s"] = round(2 * copy_bytes / dt / 1e9, 1)
    if device == "cuda":
        out["gpu"] = torch.cuda.get_device_name(0)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
