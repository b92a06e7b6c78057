"""A first build against the rebuild after an edit of envman.yaml's `command:` (issue 36.3).

    python bench/bench_rebuild.py [--base envman-test-base:bookworm] [--keep]

The project is small on purpose: JAX on the CPU (jax, jaxlib, numpy, scipy, ml_dtypes, opt_einsum) plus `six`,
a framework layer of ~150 MB of wheels standing in for torch's 6 GB one. envman inits it; the first build runs
with --no-cache (every layer built; pip's download cache mount is whatever earlier builds left in it), then
`command:` is edited, `envman lock` re-locks, and the Dockerfile is built again. Both builds go through the
client `envman build` uses, with plain progress; the script prints both times, the lock's, and which steps of
the image stage ran again. Needs a Docker engine and PyPI; takes a few minutes. The images are removed.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ENVMAN = [sys.executable, "-m", "envman.cli.main"]


def sh(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    out = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return out


def build(client, d: Path, tag: str, no_cache: bool) -> tuple[float, str]:
    from envman.app.build import default_ca_bundle
    from envman.engine.buildkit import build_command

    ca = default_ca_bundle()
    argv, env = build_command(client, d, tags=[tag], secrets={"envman_ca": ca} if ca else None, no_cache=no_cache)
    t = time.perf_counter()
    out = sh(argv, env={**os.environ, **env})
    return time.perf_counter() - t, out.stdout + out.stderr


def rebuilt(progress: str) -> list[str]:
    """The image stage's steps that ran again (not CACHED), by their instruction."""
    named, cached = {}, set()
    for line in progress.splitlines():
        if m := re.match(r"^(#\d+) \[(stage-\d+) +\d+/\d+\] (\S+ \S+)", line):
            named[m.group(1)] = m.group(3)
        elif re.match(r"^#\d+ CACHED$", line):
            cached.add(line.split()[0])
    return [text for vid, text in named.items() if vid not in cached]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", default="envman-test-base:bookworm")
    ap.add_argument("--keep", action="store_true", help="keep the project directory")
    args = ap.parse_args()
    from envman.engine.docker import Engine

    engine = Engine()
    client = engine.build_client
    work = Path(tempfile.mkdtemp(prefix="envman-bench-rebuild-"))
    d = work / "rebuild-bench"
    d.mkdir()
    (d / "requirements.txt").write_text("jax\nsix\n")
    (d / "train.py").write_text("import jax\nprint(jax.__version__)\n")
    tags = ["rebuild-bench:first", "rebuild-bench:edited"]
    try:
        sh([*ENVMAN, "init", str(d), "--cpu", "--python", "3.11", "--base-image", args.base])
        first, _ = build(client, d, tags[0], no_cache=True)
        spec = d / "envman.yaml"
        spec.write_text(spec.read_text() + "command: [python, train.py, --edited]\n")
        t = time.perf_counter()
        sh([*ENVMAN, "lock", str(d)])
        lock = time.perf_counter() - t
        again, progress = build(client, d, tags[1], no_cache=False)
        print(f"client: {client.describe()}")
        print(f"first build (--no-cache):            {first:6.1f} s")
        print(f"envman lock after editing command:   {lock:6.1f} s")
        print(f"rebuild after editing command:       {again:6.1f} s")
        print("steps of the image stage run again: " + ("; ".join(rebuilt(progress)) or "none"))
    finally:
        for tag in tags:
            engine.remove_image(tag, force=True)
        if args.keep:
            print(f"kept {d}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
