"""Whole-process timings of envman's CLI, side by side with their anchors.

    python bench/bench_cli.py [--runs N]

- resolve:        `envman resolve --target h100 --framework torch --json` vs the 0.3 s target and a bare
                  `python -c pass` (the interpreter's own start-up, the floor of any Python CLI)
- init --no-lock: `envman init --no-lock` on a copy of examples/quickstart vs the 0.3 s target
- lock:           `envman lock` vs the same `uv pip compile` run directly (warm uv cache, same inputs);
                  target: within 1.1x
Medians of N runs. Numbers go in the README.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENVMAN = [sys.executable, "-m", "envman.cli.main"]
BIN = Path(sys.executable).parent / "envman"
if BIN.exists():
    ENVMAN = [str(BIN)]


# a typical training repository's requirements (resolves to ~100 packages)
TYPICAL = "torch\ntransformers\ndatasets\naccelerate\nscipy\npandas\nmatplotlib\nscikit-learn\nwandb\n"


# As installed: pip writes bytecode at install time, so a user's envman never compiles its modules on each run.
# Some machines set PYTHONDONTWRITEBYTECODE (this project's do): without it unset, every run would pay ~0.1 s
# of compiling envman's sources, which no user pays.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(__file__).resolve().parents[1] / "envman")],
               env=ENV, check=False, capture_output=True)


def timed(cmd: list[str], runs: int, cwd: Path | None = None, setup=None) -> float:
    samples = []
    for _ in range(runs):
        if setup:
            setup()
        t = time.perf_counter()
        out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=ENV)
        samples.append(time.perf_counter() - t)
        if out.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed: {out.stderr.strip()[-400:]}")
    return statistics.median(samples)


def row(name: str, ours: float, anchor_name: str, anchor: float) -> str:
    return f"{name:<18} {ours * 1000:8.0f} ms   {anchor_name:<34} {anchor * 1000:8.0f} ms   ratio {ours / anchor:5.2f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--no-lock", action="store_true", help="skip the uv comparison (needs PyPI)")
    a = ap.parse_args()
    print(f"median of {a.runs} runs, whole process")
    py = timed([sys.executable, "-c", "pass"], a.runs)
    res = timed(ENVMAN + ["resolve", "--target", "h100", "--framework", "torch", "--json"], a.runs)
    print(row("resolve", res, "target 0.3 s", 0.3))
    print(row("resolve", res, "python -c pass (start-up floor)", py))
    with tempfile.TemporaryDirectory() as td:
        proj = Path(td) / "quickstart"

        def fresh():
            shutil.rmtree(proj, ignore_errors=True)
            shutil.copytree(ROOT / "examples" / "quickstart", proj,  # the example's own files only
                            ignore=lambda _d, names: [n for n in names if n not in ("requirements.txt", "train.py")])

        ini = timed(ENVMAN + ["init", str(proj), "--target", "h100", "--python", "3.11", "--no-lock"], a.runs, setup=fresh)
        print(row("init --no-lock", ini, "target 0.3 s", 0.3))
        if not a.no_lock:
            from envman.lock.uv import uv_compile_command

            for label, reqs in (("lock (quickstart)", "torch>=2.3\nnumpy<3\n"), ("lock (101 pkgs)", TYPICAL)):
                fresh()
                (proj / "requirements.txt").write_text(reqs)
                subprocess.run(ENVMAN + ["init", str(proj), "--target", "h100", "--python", "3.11"], check=True,
                               capture_output=True)
                lock = timed(ENVMAN + ["lock", str(proj)], a.runs)
                inp = Path(td) / "requirements.in"
                inp.write_text(reqs.replace("torch>=2.3", "torch==2.14.1").replace("torch\n", "torch==2.14.1\n"))
                cmd = uv_compile_command(inp, Path(td) / "out.txt", "3.11", [])
                direct = timed(cmd.args, a.runs, cwd=inp.parent)
                print(row(label, lock, "uv pip compile (same inputs)", direct))


if __name__ == "__main__":
    main()
