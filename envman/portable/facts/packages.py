"""Installed Python packages of the environment under diagnosis, read without importing any of them."""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import struct
import sys
from typing import Any, cast

from .commands import read_text, run_command

_NORM = re.compile(r"[-_.]+")
# Wheels whose manylinux tag (WHEEL file) matters for the glibc check: the heavy native ones.
TAGGED = ("torch", "torchvision", "torchaudio", "tensorflow", "tensorflow-cpu", "tf-nightly", "numpy", "jaxlib",
          "triton", "flash-attn", "bitsandbytes", "onnxruntime-gpu")
_PY_PROBE = (
    "import json,struct,sys;print(json.dumps({'version':sys.version.split()[0],'bits':struct.calcsize('P')*8,"
    "'executable':sys.executable,'prefix':sys.prefix,'path':[p for p in sys.path if p]}))"
)


def norm(name: str) -> str:
    return _NORM.sub("-", name).lower()


def probe_packages(python: str | None = None, timeout: float = 10.0) -> dict[str, Any]:
    """Facts: python, pip, each framework's record, numpy, wheel_tags, extensions, conda, kernels."""
    env = target_environment(python, timeout)
    f: dict[str, Any] = {"python": {k: env[k] for k in ("version", "bits", "executable") if env.get(k) is not None}}
    if env.get("error"):
        f["_error"] = env["error"]
        return f
    if env.get("prefix"):
        f["python"]["prefix"] = os.path.realpath(env["prefix"])
    dists = scan_dists(env["path"])
    f["pip"] = {n: d[1] for n, d in sorted(dists.items())}
    from ..frameworks import registered

    for plugin in registered():  # each framework's own record: torch/version.py, TF's build_info.py, …
        rec = plugin.probe(dists, read_text)
        if rec:
            f[plugin.name] = rec
    if "numpy" in dists:
        f["numpy"] = dists["numpy"][1]
    tags = {n: t for n in TAGGED if n in dists and (t := _wheel_tags(dists[n]))}
    if tags:
        f["wheel_tags"] = tags
    f.update(_libraries(dists))
    conda = _conda(env.get("prefix"))
    if conda:
        f["conda"] = conda
    from .jupyter import probe_kernels

    try:
        f["jupyter_kernels"] = probe_kernels(f["python"].get("prefix"))
    except OSError:
        pass  # unknown, not a failed environment: the packages above stand
    return f


def _libraries(dists: dict[str, Any]) -> dict[str, Any]:
    """extensions and framework_libs: the compiled libraries, what they carry and where the loader finds theirs."""
    from .extensions import LoaderView, probe_extensions, probe_framework_libs

    where = LoaderView(sorted({d[0] for d in dists.values()}))
    out = {"extensions": probe_extensions(dists, where=where), "framework_libs": probe_framework_libs(dists, where)}
    return {k: v for k, v in out.items() if v}


def target_environment(python: str | None, timeout: float = 10.0) -> dict[str, Any]:
    """Which Python's packages to read: ``--python``, else $VIRTUAL_ENV, else the one running envman."""
    here = {"version": sys.version.split()[0], "bits": struct.calcsize("P") * 8, "executable": sys.executable,
            "prefix": sys.prefix, "path": [p for p in sys.path if p]}
    if python is None:
        venv = os.environ.get("VIRTUAL_ENV")
        if not venv or _same(venv, sys.prefix):
            return here
        python = os.path.join(venv, "bin", "python")
    exe = python if os.sep in python else (shutil.which(python) or python)
    # A venv's python is a symlink to the base interpreter: compare environments (prefixes), not binaries.
    if _same(_prefix_of(exe), sys.prefix) and _same(os.path.dirname(os.path.abspath(exe)),
                                                    os.path.dirname(os.path.abspath(sys.executable))):
        return here
    fast = _venv_layout(exe)
    if fast:
        return fast
    ran = run_command([exe, "-c", _PY_PROBE], timeout)
    if not ran.ok:
        return {"executable": exe, "error": ran.error or ran.text.splitlines()[-1:] or f"{exe} failed"}
    try:
        return cast("dict[str, Any]", json.loads(ran.out.strip().splitlines()[-1]))
    except (ValueError, IndexError):
        return {"executable": exe, "error": f"{exe}: unexpected output"}


def _same(a: str, b: str) -> bool:
    try:
        return os.path.realpath(a) == os.path.realpath(b)
    except OSError:
        return False


def _prefix_of(exe: str) -> str:
    return os.path.dirname(os.path.dirname(os.path.abspath(exe)))


def _venv_layout(exe: str) -> dict[str, Any] | None:
    """A plain venv's site-packages straight from its layout (pyvenv.cfg), without starting its Python."""
    prefix = _prefix_of(exe)
    cfg = read_text(os.path.join(prefix, "pyvenv.cfg"), 1 << 14)
    if cfg is None:
        return None
    kv = dict(re.findall(r"^\s*([\w-]+)\s*=\s*(.*?)\s*$", cfg, re.M))
    if kv.get("include-system-site-packages", "false").lower() == "true":
        return None  # the base interpreter's path matters too: ask the interpreter
    version = kv.get("version_info") or kv.get("version")
    site = sorted(glob.glob(os.path.join(prefix, "lib", "python3*", "site-packages")))
    if version:
        mm = ".".join(version.split(".")[:2])
        site = [s for s in site if f"python{mm}" in s] or site
    if not site or not version:
        return None
    return {"version": version, "bits": _elf_bits(exe), "executable": exe, "prefix": prefix, "path": site}


def _elf_bits(exe: str) -> int | None:
    try:
        with open(os.path.realpath(exe), "rb") as fh:
            head = fh.read(5)
    except OSError:
        return None
    return {1: 32, 2: 64}.get(head[4]) if head[:4] == b"\x7fELF" and len(head) == 5 else None


def scan_dists(paths: list[str]) -> dict[str, tuple[str, str, str]]:
    """normalised name -> (directory, version, metadata dir name); the first on the path wins, as in Python."""
    found: dict[str, tuple[str, str, str]] = {}
    for d in paths:
        try:
            entries = os.listdir(d)
        except OSError:
            continue
        for e in entries:
            if e.endswith(".dist-info"):
                name, _, ver = e[: -len(".dist-info")].rpartition("-")
            elif e.endswith(".egg-info"):
                parts = e[: -len(".egg-info")].split("-")
                name, ver = parts[0], (parts[1] if len(parts) > 1 else "")
                if not ver:
                    ver = _pkg_info_version(os.path.join(d, e)) or ""
            else:
                continue
            if not name or not ver:
                continue
            n = norm(name)
            if n not in found:
                found[n] = (d, ver, e)
    return found


def _pkg_info_version(path: str) -> str | None:
    text = read_text(os.path.join(path, "PKG-INFO") if os.path.isdir(path) else path, 1 << 14) or ""
    m = re.search(r"^Version:\s*(\S+)", text, re.M)
    return m.group(1) if m else None


def _wheel_tags(dist: tuple[str, str, str]) -> list[str]:
    loc, _, meta = dist
    text = read_text(os.path.join(loc, meta, "WHEEL"), 1 << 14) or ""
    return re.findall(r"^Tag:\s*(\S+)", text, re.M)


def _conda(prefix: str | None) -> dict[str, Any] | None:
    """A conda environment: whether its ``cpuonly`` metapackage pins a CPU pytorch."""
    if not prefix:
        return None
    meta = os.path.join(prefix, "conda-meta")
    try:
        names = os.listdir(meta)
    except OSError:
        return None
    c: dict[str, Any] = {"prefix": prefix, "cpuonly": any(n.startswith("cpuonly-") for n in names)}
    pt = sorted(n for n in names if n.startswith("pytorch-") and n[len("pytorch-"):][:1].isdigit())
    if pt:
        c["pytorch"] = pt[-1][len("pytorch-"): -len(".json")].replace("-", " ", 1)
    return c
