"""envman's image against a minimal hand-written Dockerfile that installs the same wheels on the same base.

    python bench/bench_build.py [--base envman-test-base:bookworm] [--keep]

Both build offline from the same wheelhouse image (envman fetch, imported once), with the same client
(BuildKit), cold (--no-cache, build cache pruned first). Reported side by side:
  image size (target ≤ 1.03x), cold build time (target ≤ 1.2x), and envman's rebuild after a source-only
  edit (target ≤ 5 s, no dependency layer rebuilt).
Needs a Docker engine and about 12 GB of disk; takes a few minutes (torch 2.14.1+cu130, 2.9 GB of wheels).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENVMAN = [sys.executable, "-m", "envman.cli.main"]

HANDWRITTEN = """\
FROM {base}
RUN python3 -m venv /opt/venv
RUN --mount=type=bind,from={wheels},target=/wheels /opt/venv/bin/pip install --no-index --find-links /wheels torch==2.14.1
COPY . /app
WORKDIR /app
"""


def sh(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    out = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return out


def size(ref: str) -> int:
    return int(sh(["docker", "image", "inspect", ref, "--format", "{{.Size}}"]).stdout.strip())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", default="envman-test-base:bookworm")
    ap.add_argument("--keep", action="store_true", help="keep the images and wheelhouse afterwards")
    a = ap.parse_args()
    from envman.app.build import wheelhouse_image
    from envman.engine.docker import Engine

    engine = Engine()
    client = engine.build_client
    tmp = Path(tempfile.mkdtemp(prefix="envman-bench-build-"))
    proj = tmp / "proj"
    shutil.copytree(ROOT / "examples" / "quickstart", proj,  # the example's own files only
                    ignore=lambda _d, names: [n for n in names if n not in ("requirements.txt", "train.py")])
    (proj / "requirements.txt").write_text("torch==2.14.1\n")
    refs: list[str] = []
    try:
        sh(ENVMAN + ["init", str(proj), "--target", "h100", "--python", "3.11", "--base-image", a.base])
        sh(ENVMAN + ["fetch", str(proj)])
        wh = proj / ".envman" / "wheelhouse"
        wheels = wheelhouse_image(wh)
        if not engine.image_exists(wheels):
            engine.import_dir(wh, wheels)
        refs.append(wheels)
        lock = json.loads((proj / "envman.lock").read_text())
        ours = f"{lock['name']}:{lock['lock_hash'][:12]}"

        hand_ctx = tmp / "hand"
        hand_ctx.mkdir()
        shutil.copy(proj / "train.py", hand_ctx / "train.py")
        (hand_ctx / "Dockerfile").write_text(HANDWRITTEN.format(base=a.base, wheels=wheels))
        env = {"DOCKER_BUILDKIT": "1", "PATH": "/usr/bin:/bin"}

        sh(["docker", "builder", "prune", "-af"])
        t = time.perf_counter()
        cmd = [client.path, "build", "--no-cache", "-t", "envman-bench-hand:1", str(hand_ctx)]
        if client.kind == "buildx":
            cmd = [client.path, "buildx", "build", "--load", "--no-cache", "-t", "envman-bench-hand:1", str(hand_ctx)]
        sh(cmd, env=env)
        hand_s = time.perf_counter() - t
        refs.append("envman-bench-hand:1")

        sh(["docker", "builder", "prune", "-af"])
        t = time.perf_counter()
        sh(ENVMAN + ["build", str(proj), "--offline", "--no-smoke", "--rebuild", "--progress", "plain"])
        ours_s = time.perf_counter() - t
        refs.append(ours)

        (proj / "train.py").write_text((proj / "train.py").read_text() + "\n# a source-only edit\n")
        t = time.perf_counter()
        edit = sh(ENVMAN + ["build", str(proj), "--offline", "--no-smoke", "--rebuild", "--progress", "plain"])
        edit_s = time.perf_counter() - t
        pip = {ln.split()[0] for ln in edit.stdout.splitlines() if ln.startswith("#") and "pip install" in ln}
        cached = {ln.split()[0] for ln in edit.stdout.splitlines() if ln.endswith("CACHED")}

        hs, os_ = size("envman-bench-hand:1"), size(ours)
        print(f"{'measure':<34}{'envman':>12}{'hand-written':>14}{'ratio':>8}  target")
        print(f"{'image size':<34}{os_ / 1e9:>10.2f} GB{hs / 1e9:>12.2f} GB{os_ / hs:>8.3f}  <= 1.03")
        print(f"{'cold build (no cache)':<34}{ours_s:>11.1f} s{hand_s:>13.1f} s{ours_s / hand_s:>8.2f}  <= 1.2")
        print(f"{'rebuild after a source-only edit':<34}{edit_s:>11.1f} s{'':>14}{'':>8}  <= 5 s; "
              f"dependency layers cached: {'yes' if pip and pip <= cached else 'NO'}")
        print(f"(client: {client.describe()}; envman's times include its own start-up and lock check)")
    finally:
        if not a.keep:
            for r in refs:
                engine.remove_image(r, force=True)
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
