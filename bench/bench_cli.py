"""Whole-process timings of envman's CLI, side by side with their anchors.

    python bench/bench_cli.py [--runs N] [--no-lock] [--envman PATH]

- start-up:       `envman --version`, `envman lock --help` and `envman resolve --target h100 --framework torch
                  --json` beside a bare `python -c pass` (the interpreter's own start-up, the floor of any Python
                  CLI); `envman init --no-lock` on a copy of examples/quickstart vs the 0.3 s target.
- locks, for examples/quickstart and a typical training repository (~100 packages), each beside uv run
  directly on exactly the request that lock gives uv (its files and arguments, laid out as envman lays them
  out), warm caches, timed alternately so a drifting network weighs on both alike:
    first lock      a project with envman.yaml only            vs uv, unseeded          target: within 1.2x
    changed lock    a requirement changed (numpy<3 ↔ numpy<4)  vs uv, seeded            target: within 1.1x
    current lock    nothing changed: uv is not run             vs the 0.2 s target (uv alone beside it)
    lock --check    reads the lock and the inputs              vs uv, seeded
`--envman PATH` times another installation's console script (an older envman, say) on the same projects.
Medians of N runs; docs/performance.md keeps the figures.
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

QUICKSTART = "torch>=2.3\nnumpy<3\n"
# a typical training repository's requirements (resolves to ~100 packages)
TYPICAL = "torch\ntransformers\ndatasets\naccelerate\nscipy\npandas\nmatplotlib\nscikit-learn\nwandb\nnumpy<3\n"

# As installed: pip writes bytecode at install time, so a user's envman never compiles its modules on each run.
# Some machines set PYTHONDONTWRITEBYTECODE (this project's do): without it unset, every run would pay for
# compiling envman's sources, which no user pays.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "envman")], env=ENV, check=False,
               capture_output=True)


def _once(cmd: list[str], cwd: Path | None = None, env: dict | None = None) -> float:
    t = time.perf_counter()
    out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env or ENV)
    took = time.perf_counter() - t
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {out.stderr.strip()[-400:]}")
    return took


def timed(cmd: list[str], runs: int, setup=None) -> float:
    samples = []
    for _ in range(runs):
        if setup:
            setup()
        samples.append(_once(cmd))
    return statistics.median(samples)


def timed_pair(ours: list[str], ours_setup, anchor, runs: int) -> tuple[float, float]:
    """``ours`` and ``anchor`` (a uv command with its setup, folder and environment) alternately."""
    cmd, setup, cwd, env = anchor
    a, b = [], []
    for _ in range(runs):
        if ours_setup:
            ours_setup()
        a.append(_once(ours))
        setup()
        b.append(_once(cmd, cwd, env))
    return statistics.median(a), statistics.median(b)


def row(name: str, ours: float, anchor_name: str, anchor: float) -> str:
    return f"{name:<24} {ours * 1000:8.0f} ms   {anchor_name:<34} {anchor * 1000:8.0f} ms   ratio {ours / anchor:5.2f}"


def uv_replay(proj: Path, where: Path):
    """The uv command a lock of ``proj`` runs now (seeded with its pylock.toml when envman would seed it), and
    a setup that lays out its inputs as envman does. Found by running envman's lock in this process up to the
    moment it would start uv, on a copy of the project without envman.lock (so the Python lock is not kept)."""
    import envman.lock.uv as uv
    from envman.app.lock import lock_project

    copy = where.with_name(where.name + "-project")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(proj, copy)
    (copy / "envman.lock").unlink(missing_ok=True)
    seen = []

    class Captured(Exception):
        pass

    def capture(binary, request, timeout=None, progress=None):
        seen.append((binary, request))
        raise Captured

    real, uv.start_request = uv.start_request, capture
    try:
        lock_project(copy)
    except Captured:
        pass
    finally:
        uv.start_request = real
        shutil.rmtree(copy, ignore_errors=True)
    binary, request = seen[0]

    def setup():
        shutil.rmtree(where, ignore_errors=True)
        where.mkdir()
        for name, text in request.files:
            (where / name).write_text(text)

    return [binary, *request.args], setup, where, {**uv.uv_env(False), **dict(request.env)}


def bench_locks(label: str, reqs: str, proj: Path, fresh, td: Path, runs: int) -> None:
    fresh()
    (proj / "requirements.txt").write_text(reqs)
    subprocess.run(ENVMAN + ["init", str(proj), "--target", "h100", "--python", "3.11", "--no-lock"], check=True,
                   capture_output=True, env=ENV)
    spec = (proj / "envman.yaml").read_text()

    def bare():
        fresh()
        (proj / "requirements.txt").write_text(reqs)
        (proj / "envman.yaml").write_text(spec)

    bare()
    first, uv_first = timed_pair(ENVMAN + ["lock", str(proj)], bare, uv_replay(proj, td / "uv"), runs)
    print(row(f"first lock ({label})", first, "uv, same request, unseeded", uv_first))
    variants = [reqs.replace("numpy<3", "numpy<4"), reqs]

    def change():
        variants.reverse()
        (proj / "requirements.txt").write_text(variants[0])

    change()
    uv_changed = uv_replay(proj, td / "uv")
    changed, uv_seeded = timed_pair(ENVMAN + ["lock", str(proj)], change, uv_changed, runs)
    print(row(f"changed lock ({label})", changed, "uv, same request, seeded", uv_seeded))
    current = timed(ENVMAN + ["lock", str(proj)], runs)
    print(row(f"current lock ({label})", current, "target 0.2 s", 0.2))
    print(row(f"current lock ({label})", current, "uv, same request, seeded", uv_seeded))
    check = timed(ENVMAN + ["lock", "--check", str(proj)], runs)
    print(row(f"lock --check ({label})", check, "uv, same request, seeded", uv_seeded))


def main() -> None:
    global ENVMAN
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--no-lock", action="store_true", help="skip the uv comparisons (they need PyPI)")
    ap.add_argument("--envman", help="the console script to time (default: this installation's)")
    a = ap.parse_args()
    if a.envman:
        ENVMAN = [a.envman]
    print(f"median of {a.runs} runs, whole process: {ENVMAN[0]}")
    py = timed([sys.executable, "-c", "pass"], a.runs)
    for name, args in (("--version", ["--version"]), ("lock --help", ["lock", "--help"]),
                       ("resolve", ["resolve", "--target", "h100", "--framework", "torch", "--json"])):
        print(row(name, timed(ENVMAN + args, a.runs), "python -c pass (start-up floor)", py))
    with tempfile.TemporaryDirectory() as tmp:
        td = Path(tmp)
        proj = td / "quickstart"

        def fresh():
            shutil.rmtree(proj, ignore_errors=True)
            shutil.copytree(ROOT / "examples" / "quickstart", proj,  # the example's own files only
                            ignore=lambda _d, names: [n for n in names if n not in ("requirements.txt", "train.py")])

        ini = timed(ENVMAN + ["init", str(proj), "--target", "h100", "--python", "3.11", "--no-lock"], a.runs,
                    setup=fresh)
        print(row("init --no-lock", ini, "target 0.3 s", 0.3))
        if not a.no_lock:
            for label, reqs in (("quickstart", QUICKSTART), ("~100 pkgs", TYPICAL)):
                bench_locks(label, reqs, proj, fresh, td, a.runs)


if __name__ == "__main__":
    main()
