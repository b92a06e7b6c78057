"""Whole-process timings of envman's CLI, side by side with their anchors.

    python bench/bench_cli.py [--runs N] [--no-lock] [--envman PATH [--envman PATH]] [--project NAME ...]

- start-up:       `envman --version`, `envman lock --help` and `envman resolve --target h100 --framework torch
                  --json` beside a bare `python -c pass` (the interpreter's own start-up, the floor of any Python
                  CLI); `envman init --no-lock` on a copy of examples/quickstart vs the 0.3 s target.
- locks, for examples/quickstart, a typical training repository (~100 packages) and a larger torch training
  stack (~125 packages, where uv takes ~1.7 s), each beside uv run directly on exactly the request that lock
  gives uv (its files and arguments, laid out as envman lays them out), warm caches, timed alternately so a
  drifting network weighs on both alike:
    first lock      a project with envman.yaml only            vs uv, unseeded          target: within 1.2x
    changed lock    a requirement changed (numpy<3 ↔ numpy<4)  vs uv, seeded            target: within 1.1x
    current lock    nothing changed: uv is not run             vs the 0.2 s target (uv alone beside it)
    lock --check    reads the lock and the inputs              vs uv, seeded
`--envman PATH` times another installation's console script; given twice (an older envman and this one), both
are timed in turn on the same projects, each beside the same uv run.
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
BIN = Path(sys.executable).parent / "envman"
ENVMANS = [[str(BIN)] if BIN.exists() else [sys.executable, "-m", "envman.cli.main"]]

QUICKSTART = "torch>=2.3\nnumpy<3\n"
# a typical training repository's requirements (resolves to ~100 packages)
TYPICAL = "torch\ntransformers\ndatasets\naccelerate\nscipy\npandas\nmatplotlib\nscikit-learn\nwandb\nnumpy<3\n"
# a larger torch training stack (~125 packages, every one a wheel): uv takes ~1.7 s on it here, what a user meets
TRAINING = ("torch\ntorchvision\nlightning\ntransformers\ndatasets\naccelerate\npeft\nbitsandbytes\nevaluate\nwandb\n"
            "einops\ntimm\nsentencepiece\ntensorboard\nscikit-learn\nmatplotlib\nnumpy<3\n")
PROJECTS = {"quickstart": QUICKSTART, "~100 pkgs": TYPICAL, "training ~125 pkgs": TRAINING}

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


def timed(cmds: list[list[str]], runs: int, setup=None) -> list[float]:
    """The median of each command, run in turn (a drifting machine weighs on each alike)."""
    samples: list[list[float]] = [[] for _ in cmds]
    for _ in range(runs):
        for cmd, out in zip(cmds, samples):
            if setup:
                setup()
            out.append(_once(cmd))
    return [statistics.median(x) for x in samples]


def timed_pair(ours: list[tuple[list[str], object]], anchor, runs: int) -> tuple[list[float], float]:
    """Each of ``ours`` ((command, setup) pairs) and ``anchor`` (a uv command with its setup, folder and
    environment) in turn."""
    cmd, setup, cwd, env = anchor
    a: list[list[float]] = [[] for _ in ours]
    b = []
    for _ in range(runs):
        for (one, one_setup), out in zip(ours, a):
            if one_setup:
                one_setup()
            out.append(_once(one))
        setup()
        b.append(_once(cmd, cwd, env))
    return [statistics.median(x) for x in a], statistics.median(b)


def row(name: str, ours: list[float], anchor_name: str, anchor: float) -> str:
    mine = "   ".join(f"{t * 1000:6.0f} ms (ratio {t / anchor:5.2f})" for t in ours)
    return f"{name:<34} {mine}   {anchor_name:<32} {anchor * 1000:6.0f} ms"


def uv_replay(proj: Path, where: Path):
    """The uv command a lock of ``proj`` runs now (seeded with its pylock.toml when envman would seed it), and
    a setup that lays out its inputs as envman does. Found by running envman's lock in this process up to the
    moment it would start uv, on a copy of the project without envman.lock (so the Python lock is not kept)."""
    import envman.lock.uvproc as uv
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


def bench_locks(label: str, reqs: str, fresh, td: Path, runs: int) -> None:
    """Every row for one project. Each installation locks its own copy (two envmans with different data would
    find each other's lock stale); uv's request is captured from the first copy."""
    projs = [td / f"lock-{i}" for i in range(len(ENVMANS))]
    specs = []
    for envman, proj in zip(ENVMANS, projs):
        fresh(proj)
        (proj / "requirements.txt").write_text(reqs)
        subprocess.run(envman + ["init", str(proj), "--target", "h100", "--python", "3.11", "--no-lock"], check=True,
                       capture_output=True, env=ENV)
        specs.append((proj / "envman.yaml").read_text())

    def bare(proj: Path, spec: str):
        def setup():
            fresh(proj)
            (proj / "requirements.txt").write_text(reqs)
            (proj / "envman.yaml").write_text(spec)
        return setup

    for proj, spec in zip(projs, specs):
        bare(proj, spec)()
    lock = [e + ["lock", str(p)] for e, p in zip(ENVMANS, projs)]
    first, uv_first = timed_pair(list(zip(lock, [bare(p, s) for p, s in zip(projs, specs)])),
                                 uv_replay(projs[0], td / "uv"), runs)
    print(row(f"first lock ({label})", first, "uv, same request, unseeded", uv_first))
    variants = [reqs.replace("numpy<3", "numpy<4"), reqs]

    def change(proj: Path):
        def setup():
            req = proj / "requirements.txt"
            req.write_text(variants[1] if req.read_text() == variants[0] else variants[0])
        return setup

    change(projs[0])()  # uv's request of the first change: numpy<4 seeded with the numpy<3 lock
    uv_changed = uv_replay(projs[0], td / "uv")
    change(projs[0])()  # back to what is locked: each timed run below is a change
    changed, uv_seeded = timed_pair(list(zip(lock, [change(p) for p in projs])), uv_changed, runs)
    print(row(f"changed lock ({label})", changed, "uv, same request, seeded", uv_seeded))
    current = timed(lock, runs)
    print(row(f"current lock ({label})", current, "target 0.2 s", 0.2))
    print(row(f"current lock ({label})", current, "uv, same request, seeded", uv_seeded))
    check = timed([e + ["lock", "--check", str(p)] for e, p in zip(ENVMANS, projs)], runs)
    print(row(f"lock --check ({label})", check, "uv, same request, seeded", uv_seeded))


def main() -> None:
    global ENVMANS
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--no-lock", action="store_true", help="skip the uv comparisons (they need PyPI)")
    ap.add_argument("--envman", action="append", help="a console script to time (default: this installation's); "
                    "given twice, both are timed in turn, each on its own copy of the same projects (an older envman "
                    "beside this one)")
    ap.add_argument("--project", action="append", choices=list(PROJECTS), help="lock only these (default: all)")
    a = ap.parse_args()
    if a.envman:
        ENVMANS = [[e] for e in a.envman]
    print(f"median of {a.runs} runs, whole process: {', '.join(e[0] for e in ENVMANS)}")
    py = timed([[sys.executable, "-c", "pass"]], a.runs)[0]
    for name, args in (("--version", ["--version"]), ("lock --help", ["lock", "--help"]),
                       ("resolve", ["resolve", "--target", "h100", "--framework", "torch", "--json"])):
        print(row(name, timed([e + args for e in ENVMANS], a.runs), "python -c pass (start-up floor)", py))
    with tempfile.TemporaryDirectory() as tmp:
        td = Path(tmp)
        proj = td / "quickstart"

        def fresh(where: Path = proj):
            shutil.rmtree(where, ignore_errors=True)
            shutil.copytree(ROOT / "examples" / "quickstart", where,  # the example's own files only
                            ignore=lambda _d, names: [n for n in names if n not in ("requirements.txt", "train.py")])

        ini = timed([e + ["init", str(proj), "--target", "h100", "--python", "3.11", "--no-lock"] for e in ENVMANS],
                    a.runs, setup=fresh)
        print(row("init --no-lock", ini, "target 0.3 s", 0.3))
        if not a.no_lock:
            for label in a.project or PROJECTS:
                bench_locks(label, PROJECTS[label], fresh, td, a.runs)


if __name__ == "__main__":
    main()
