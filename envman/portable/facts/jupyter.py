"""Jupyter kernelspecs: which interpreter each notebook kernel starts, and whether it has a framework."""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import sys
import time
from typing import Any

from .commands import read_text

MAX_KERNELS = 64
MAX_KERNEL_JSON = 1 << 16
BUDGET_S = 0.5
# Distributions whose presence in a kernel's environment counts as "the framework is there".
FRAMEWORKS = {"torch": "torch", "tensorflow": "tensorflow", "tensorflow-cpu": "tensorflow", "tf-nightly": "tensorflow"}
_DIST = re.compile(r"^([A-Za-z0-9][\w.]*?)-([^-]+)\.dist-info\Z")


def kernel_dirs(prefixes: list[str]) -> list[str]:
    """Jupyter's data directories' ``kernels`` folders, in its search order, deduplicated."""
    dirs = [os.path.join(p, "kernels") for p in os.environ.get("JUPYTER_PATH", "").split(os.pathsep) if p]
    data = os.environ.get("JUPYTER_DATA_DIR")
    if data:
        dirs.append(os.path.join(data, "kernels"))
    home = os.path.expanduser("~")
    dirs += [os.path.join(home, ".local", "share", "jupyter", "kernels"),
             os.path.join(home, "Library", "Jupyter", "kernels")]
    if os.environ.get("APPDATA"):
        dirs.append(os.path.join(os.environ["APPDATA"], "jupyter", "kernels"))
    dirs += [os.path.join(p, "share", "jupyter", "kernels") for p in prefixes if p]
    dirs += ["/usr/local/share/jupyter/kernels", "/usr/share/jupyter/kernels"]
    return list(dict.fromkeys(dirs))


def env_prefix(exe: str) -> str:
    """The environment (sys.prefix) that ``exe`` starts, as CPython's getpath finds it; symlinks resolved."""
    d = os.path.dirname(os.path.abspath(exe))
    for cand in (d, os.path.dirname(d)):
        if os.path.isfile(os.path.join(cand, "pyvenv.cfg")):
            return os.path.realpath(cand)
    real = os.path.dirname(os.path.realpath(exe))
    return os.path.dirname(real) if os.path.basename(real).lower() in ("bin", "scripts") else real


def env_frameworks(prefix: str) -> dict[str, str]:
    """``{"torch": "2.7.1+cu128"}`` from the dist-info names in the environment's site-packages."""
    out: dict[str, str] = {}
    sites = glob.glob(os.path.join(prefix, "lib", "python3*", "site-packages"))
    sites += glob.glob(os.path.join(prefix, "Lib", "site-packages"))
    for site in sorted(sites):
        try:
            names = os.listdir(site)
        except OSError:
            continue
        for n in names:
            m = _DIST.match(n)
            if m:
                fw = FRAMEWORKS.get(re.sub(r"[-_.]+", "-", m.group(1)).lower())
                if fw and fw not in out:
                    out[fw] = m.group(2)
    return out


def probe_kernels(prefix: str | None, budget_s: float = BUDGET_S) -> list[dict[str, Any]]:
    """Facts ``jupyter_kernels``: one entry per kernelspec, the first of a name winning, as Jupyter's."""
    end = time.monotonic() + budget_s
    prefixes = [prefix or "", sys.prefix]
    found: list[dict[str, Any]] = []
    names: set[str] = set()
    envs: dict[str, dict[str, str]] = {}
    for d in kernel_dirs(prefixes):
        for spec in sorted(glob.glob(os.path.join(d, "*", "kernel.json"))):
            if len(found) >= MAX_KERNELS or time.monotonic() > end:
                return found
            name = os.path.basename(os.path.dirname(spec))
            if name.lower() in names:
                continue
            names.add(name.lower())
            found.append(_kernel(spec, name, envs))
    return found


def _kernel(spec: str, name: str, envs: dict[str, dict[str, str]]) -> dict[str, Any]:
    k: dict[str, Any] = {"name": name, "path": spec}
    try:
        raw = json.loads(read_text(spec, MAX_KERNEL_JSON) or "")
    except ValueError:
        k["error"] = "not JSON"
        return k
    if not isinstance(raw, dict):
        k["error"] = "not a JSON object"
        return k
    for key in ("display_name", "language"):
        if isinstance(raw.get(key), str):
            k[key] = raw[key]
    argv = raw.get("argv")
    if not isinstance(argv, list) or not argv or not isinstance(argv[0], str):
        k["error"] = "no argv"
        return k
    k["argv0"] = argv[0]
    exe = argv[0] if os.sep in argv[0] else shutil.which(argv[0])
    if not exe or not os.path.exists(exe):
        k["interpreter"] = None
        return k
    k["interpreter"] = os.path.abspath(exe)
    p = env_prefix(exe)
    k["prefix"] = p
    if p not in envs:
        envs[p] = env_frameworks(p)
    k["frameworks"] = envs[p]
    return k
