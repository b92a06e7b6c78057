"""Whole-process timings of envman's CLI, side by side with their anchors.

    python bench/bench_cli.py [--runs N]

- resolve:        `envman resolve --target h100 --framework torch --json` vs the 0.3 s target and a bare
                  `python -c pass` (the interpreter's own start-up, the floor of any Python CLI)
- init --no-lock: `envman init --no-lock` on a copy of examples/quickstart vs the 0.3 s target
- lock:           a re-lock (`envman lock` of an unchanged, locked project) vs uv run directly on exactly the
                  request that lock gives uv (the files and arguments envman records in its cache, seeded with
                  the project's pylock.toml as envman seeds it), warm uv cache; target: within 1.1x. The two
                  are timed alternately, so a drifting network weighs on both alike.
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
            for label, reqs in (("lock (quickstart)", "torch>=2.3\nnumpy<3\n"), ("lock (101 pkgs)", TYPICAL)):
                fresh()
                (proj / "requirements.txt").write_text(reqs)
                subprocess.run(ENVMAN + ["init", str(proj), "--target", "h100", "--python", "3.11"], check=True,
                               capture_output=True, env=ENV)
                lock, direct = timed_pair(ENVMAN + ["lock", str(proj)], *uv_replay(proj, Path(td) / "uv"), a.runs)
                print(row(label, lock, "uv, same request (uv pip compile)", direct))


def uv_replay(proj: Path, where: Path):
    """The uv command envman's last lock of ``proj`` ran, and a setup that lays out its inputs as envman does."""
    import json

    from envman.lock.uvstart import request_file, uv_binary, uv_env

    req = json.loads(Path(request_file(str(proj))).read_text())
    seed = (proj / "pylock.toml").read_text().partition("\n")[2]

    def setup():
        shutil.rmtree(where, ignore_errors=True)
        where.mkdir()
        for name, text in req["files"]:
            (where / name).write_text(text)
        (where / "pylock.toml").write_text(seed)

    return [uv_binary(), *req["args"]], setup, where, uv_env(False)


def timed_pair(ours: list[str], anchor: list[str], setup, cwd: Path, env: dict, runs: int) -> tuple[float, float]:
    a, b = [], []
    for _ in range(runs):
        a.append(_once(ours, None, ENV))
        setup()
        b.append(_once(anchor, cwd, env))
    return statistics.median(a), statistics.median(b)


def _once(cmd: list[str], cwd: Path | None, env: dict) -> float:
    t = time.perf_counter()
    out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env)
    took = time.perf_counter() - t
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {out.stderr.strip()[-400:]}")
    return took

if __name__ == "__main__":
    main()
