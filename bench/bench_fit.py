"""Time the analytic `envman fit` path (the budget is 0.3 s per run, torch not involved).

    .venv/bin/python bench/bench_fit.py            # prints the median of 15 fresh processes
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import time

RUNS = 15
# a fresh interpreter each run: import time is part of what a user waits for. The command is registered
# on a bare Typer app so the measurement does not depend on envman/cli/main.py.
CODE = """
import typer
from envman.cli.fit import register
app = typer.Typer()
register(app)
@app.callback()
def _root(): pass
app(args=sys.argv[1:], prog_name="envman", standalone_mode=False)
"""
ARGS = ["fit", "--model", "llama-3.1-8b", "--seq", "4096", "--batch", "4", "--target", "h100",
        "--compare", "h100,a100,rtx-4090,l4", "--global-batch", "256", "--json"]


def main() -> int:
    times, cpu = [], []
    for _ in range(RUNS):
        t0, r0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-c", "import sys\n" + CODE, *ARGS], check=False, stdout=subprocess.DEVNULL)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        times.append(time.perf_counter() - t0)
        cpu.append(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)  # less sensitive to a busy machine
    base = []
    for _ in range(5):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        base.append(time.perf_counter() - t0)
    med = statistics.median(times)
    print(f"envman fit (analytic, {RUNS} fresh processes): median {med:.3f} s "
          f"(min {min(times):.3f}, max {max(times):.3f}); bare python start {statistics.median(base):.3f} s; "
          f"budget 0.300 s: {'OK' if med <= 0.3 else 'OVER'}; child CPU median {statistics.median(cpu):.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
