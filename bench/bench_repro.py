"""Two builds of one lock from scratch, per engine: do they give one image, how long does each take, how big is it.

    python bench/bench_repro.py [--torch] [--engines docker,podman] [--base envman-test-base:bookworm]

The project is a small numpy/tqdm one, or with --torch torch 2.14.1+cu130 from the wheelhouse (envman fetch,
build --offline; ~20 GB of disk at the peak). Each engine builds the same generated Dockerfile twice without
cache, through envman's engine classes, at the lock's SOURCE_DATE_EPOCH; podman and buildah get a private
containers/storage, removed at the end, and the Docker images are removed too. When two builds differ, the
files that differ are summed up by what differs (content, mtime …) from the two images' layers. The figures in
docs/reproducible.md come from this script.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
ENVMAN = [sys.executable, "-m", "envman.cli.main"]


def envman(*args: str, env: dict) -> None:
    subprocess.run([*ENVMAN, *args], check=True, env=env, stdout=subprocess.DEVNULL)


def project(tmp: Path, base: str, torch: bool, env: dict) -> Path:
    d = tmp / ("torch-repro" if torch else "quick-repro")
    d.mkdir()
    if torch:
        (d / "requirements.txt").write_text("torch==2.14.1\n")
        (d / "train.py").write_text("import torch\nprint(torch.__version__)\n")
        envman("init", str(d), "--target", "h100", "--python", "3.11", "--base-image", base, env=env)
        envman("fetch", str(d), env=env)
    else:
        (d / "requirements.txt").write_text("numpy==2.1.3\ntqdm==4.67.1\n")
        (d / "train.py").write_text("import numpy\n")
        envman("init", str(d), "--cpu", "--python", "3.11", "--base-image", base, env=env)
    return d


def measure(engine, d: Path, torch: bool) -> dict:
    from envman.app.build import BuildOptions, _offline_build_file, default_ca_bundle
    from envman.engine.archive import differences, read_image_archive
    from envman.image.plan import CA_SECRET
    from envman.lock.lockfile import read_lock

    lock = read_lock(d / "envman.lock")
    from envman.lock.layout import StackFiles

    names = StackFiles.for_profile(None)
    dockerfile = _offline_build_file(d, names, BuildOptions(offline=True), lambda s: None, engine) if torch \
        else d / "Dockerfile"
    ca = default_ca_bundle()
    engine.provide_base(lock.base_image["ref"])
    out: dict = {"engine": engine.describe(), "repro": engine.repro_support().how, "builds": []}
    archives = []
    for i in (1, 2):
        tag = f"bench-repro:{i}"
        r = engine.build(d, dockerfile=dockerfile, tags=[tag], secrets={CA_SECRET: ca} if ca else {}, no_cache=True,
                         source_date_epoch=lock.source_date_epoch, progress="plain", on_output=lambda s: None)
        with engine.export_image(tag) as stream:
            archives.append(read_image_archive(stream))
        size = sum(e[5] for layer in archives[-1].layers.values() for e in layer.values())
        out["builds"].append({"seconds": round(r.seconds, 1), "image_id": r.image_id, "bytes_in_layers": size})
        engine.remove_image(tag, force=True)
    diffs = differences(*archives, limit=10**6)
    kinds = collections.Counter(k for line in diffs for k in ("content", "mtime", "mode", "owner", "only in")
                                if k in line.rsplit(": ", 1)[-1])
    out["same_image"] = out["builds"][0]["image_id"] == out["builds"][1]["image_id"]
    out["differences"] = {"lines": len(diffs), "by_kind": dict(kinds), "first": diffs[:8]}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--torch", action="store_true")
    ap.add_argument("--engines", default="docker,podman")
    ap.add_argument("--base", default="envman-test-base:bookworm")
    args = ap.parse_args(argv)
    from envman.engine.daemonless import DaemonlessEngine
    from envman.engine.docker import Engine

    results = []
    with tempfile.TemporaryDirectory(prefix="envman-bench-repro-", dir="/var/tmp") as t:
        tmp = Path(t)
        conf = tmp / "storage.conf"
        conf.write_text(f'[storage]\ndriver = "overlay"\ngraphroot = "{tmp / "graph"}"\nrunroot = "{tmp / "run"}"\n')
        env = {**os.environ, "CONTAINERS_STORAGE_CONF": str(conf)}
        os.environ["CONTAINERS_STORAGE_CONF"] = str(conf)
        d = project(tmp, args.base, args.torch, env)
        try:
            for name in args.engines.split(","):
                engine = Engine() if name == "docker" else DaemonlessEngine(name)
                results.append(measure(engine, d, args.torch))
                print(json.dumps(results[-1], indent=2), flush=True)
        finally:
            from envman.app.build import wheelhouse_image

            wh = d / ".envman" / "wheelhouse"
            if wh.is_dir():
                subprocess.run(["docker", "rmi", "-f", wheelhouse_image(wh)], capture_output=True)
                shutil.rmtree(wh, ignore_errors=True)
            for argv_ in (["buildah", "rm", "--all"], ["podman", "rmi", "--all", "--force"]):
                subprocess.run(argv_, capture_output=True, env=env)
            subprocess.run(["docker", "rmi", "-f", "bench-repro:1", "bench-repro:2"], capture_output=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
