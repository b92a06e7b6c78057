#!/usr/bin/env python3
"""``envman doctor`` against ``python -m torch.utils.collect_env``: whole-process wall time, side by side.

Both examine the same environment: a venv with torch installed (``--python PATH``, else one created
under /tmp with ``pip install torch==2.13.0``; pip's configuration decides which build, the CPU wheel on
envman's dev machines). Runs alternate between the two commands after one warm-up each, so page
cache and CPU frequency treat them alike; the median of ``--runs`` is reported with min and max.

Target (issue "envman doctor"): doctor ≤ 0.3 s, about ten times faster than collect_env.

    python bench/bench_doctor.py [--python /path/to/venv/bin/python] [--runs 15]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

TARGET_S = 0.3
TARGET_RATIO = 10.0
DEFAULT_VENV = "/tmp/envman-bench-torch"


def has_torch(python: str) -> bool:
    code = "import importlib.util,sys; sys.exit(0 if importlib.util.find_spec('torch') else 1)"
    return subprocess.run([python, "-c", code], capture_output=True).returncode == 0


def torch_python(args: argparse.Namespace) -> str:
    if args.python:
        if not has_torch(args.python):
            sys.exit(f"error: {args.python} has no torch installed")
        return args.python
    py = os.path.join(args.venv, "bin", "python")
    if os.path.exists(py) and has_torch(py):
        return py
    print(f"creating {args.venv} with {args.torch_spec} (once) …", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", args.venv], check=True)
    subprocess.run([py, "-m", "pip", "install", "-q", args.torch_spec], check=True)
    return py


def envman_command() -> list[str]:
    exe = os.path.join(os.path.dirname(sys.executable), "envman")
    if os.path.exists(exe):
        return [exe]
    found = shutil.which("envman")
    return [found] if found else [sys.executable, "-c", "from envman.cli.main import run; run()"]


def once(argv: list[str]) -> tuple[float, int]:
    t0 = time.perf_counter()
    rc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    return time.perf_counter() - t0, rc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", help="an interpreter with torch installed (default: a venv under /tmp)")
    ap.add_argument("--venv", default=DEFAULT_VENV, help=f"where to create that venv (default {DEFAULT_VENV})")
    ap.add_argument("--torch-spec", default="torch==2.13.0", help="what to pip install into it")
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()

    py = torch_python(args)
    envman = envman_command()
    cmds = {
        "envman doctor": envman + ["doctor", "--python", py],
        "collect_env": [py, "-m", "torch.utils.collect_env"],
        "envman --version (CLI floor)": envman + ["--version"],
    }
    times: dict[str, list[float]] = {k: [] for k in cmds}
    codes: dict[str, int] = {}
    for name, argv in cmds.items():  # warm-up: page cache, .pyc files, envman's knowledge cache
        codes[name] = once(argv)[1]
    for _ in range(args.runs):
        for name, argv in cmds.items():
            times[name].append(once(argv)[0])

    torch_ver = subprocess.run([py, "-c", "import importlib.metadata as m; print(m.version('torch'))"],
                               capture_output=True, text=True).stdout.strip()
    print(f"environment: {py} (torch {torch_ver}); {args.runs} runs each, alternating, after one warm-up")
    print(f"{'command':<30} {'median':>8} {'min':>8} {'max':>8}  exit")
    for name, ts in times.items():
        print(f"{name:<30} {statistics.median(ts):>7.3f}s {min(ts):>7.3f}s {max(ts):>7.3f}s  {codes[name]}")
    doc, ce = statistics.median(times["envman doctor"]), statistics.median(times["collect_env"])
    ratio = ce / doc
    print(f"ratio collect_env / envman doctor: {ratio:.1f}x")
    print(f"target ≤ {TARGET_S} s: {'met' if doc <= TARGET_S else 'NOT met'}; "
          f"target ~{TARGET_RATIO:.0f}x: {'met' if ratio >= TARGET_RATIO else 'not met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
