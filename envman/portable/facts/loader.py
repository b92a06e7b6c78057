"""Which file glibc's ld.so would open for a soname (RPATH, LD_LIBRARY_PATH, RUNPATH, cache, defaults)."""

from __future__ import annotations

import glob
import os
import re
import struct
from typing import Any

CACHE = "/etc/ld.so.cache"
DEFAULT_DIRS = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
                "/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib")
_NEW = b"glibc-ld.so.cache1.1"
_VER = re.compile(r"\.so\.(\d+(?:\.\d+)+)\Z")


def cache_entries(data: bytes) -> list[tuple[str, str]]:
    """(soname, path) of an ld.so.cache in the new format (glibc >= 2.x writes it, alone or after the old one),
    in the file's order, which is the order ld.so searches it."""
    base = data.find(_NEW)
    if base < 0 or len(data) < base + 48:
        return []
    nlibs = struct.unpack_from("<I", data, base + 20)[0]
    out = []
    for i in range(min(nlibs, 1 << 16)):
        off = base + 48 + 24 * i
        if off + 24 > len(data):
            break
        _flags, key, value = struct.unpack_from("<iII", data, off)
        out.append((_cstr(data, base + key), _cstr(data, base + value)))
    return out


def _cstr(data: bytes, at: int) -> str:
    end = data.find(b"\0", at)
    return data[at:end if end >= 0 else len(data)].decode("utf-8", "replace") if 0 <= at < len(data) else ""


def cache_list(path: str = CACHE) -> list[tuple[str, str]]:
    try:
        with open(path, "rb") as fh:
            return cache_entries(fh.read(8 << 20))
    except OSError:
        return []


def search_dirs(environ: dict[str, str] | None = None, rpath: list[str] | tuple[str, ...] = (),
                runpath: list[str] | tuple[str, ...] = (), origin: str | None = None) -> list[tuple[str, str]]:
    """(directory, how) in the order ld.so searches them for an object's DT_NEEDED, before the cache."""
    env = os.environ if environ is None else environ

    def expand(dirs: list[str] | tuple[str, ...], how: str) -> list[tuple[str, str]]:
        return [(os.path.normpath(d.replace("${ORIGIN}", origin or "").replace("$ORIGIN", origin or "")), how)
                for d in dirs if origin is not None or not ("$ORIGIN" in d or "${ORIGIN}" in d)]

    ld = [(p, "LD_LIBRARY_PATH") for p in env.get("LD_LIBRARY_PATH", "").split(":") if p]
    if runpath:
        return ld + expand(runpath, "RUNPATH")
    return expand(rpath, "RPATH") + ld


def resolve(soname: str, environ: dict[str, str] | None = None, cache: list[tuple[str, str]] | None = None,
            defaults: tuple[str, ...] = DEFAULT_DIRS, rpath: list[str] | tuple[str, ...] = (),
            runpath: list[str] | tuple[str, ...] = (), origin: str | None = None) -> dict[str, Any] | None:
    """{name, path, version, from, stub} of the file ld.so opens for ``soname``, or None when none is found; with
    an object's RPATH/RUNPATH, ``own`` is the copy its own directories hold when another one comes first."""
    dirs = search_dirs(environ, rpath, runpath, origin)
    own_dirs = [d for d, how in dirs if how in ("RPATH", "RUNPATH")]
    for d, how in dirs:
        p = os.path.join(d, soname)
        if os.path.exists(p):
            e = _entry(soname, p, how)
            if how == "LD_LIBRARY_PATH":
                own = next((os.path.join(o, soname) for o in own_dirs if os.path.exists(os.path.join(o, soname))), None)
                if own and os.path.realpath(own) != os.path.realpath(p):
                    e["own"] = own
                    m = _VER.search(os.path.realpath(own))
                    e["own_version"] = m.group(1) if m else None
            return e
    for name, p in (cache_list() if cache is None else cache):
        if name == soname and os.path.exists(p):
            return _entry(soname, p, "ld.so.cache")
    for d in defaults:
        p = os.path.join(d, soname)
        if os.path.exists(p):
            return _entry(soname, p, "default")
    return None


def unsearched_dirs(site_dirs: list[str], environ: dict[str, str] | None = None) -> list[str]:
    """Where CUDA libraries are often installed without being on the loader's path: the nvidia-* wheels'
    ``site-packages/nvidia/*/lib``, a conda environment's ``lib``, the toolkits' ``/usr/local/cuda*/lib64``."""
    env = os.environ if environ is None else environ
    pats = [os.path.join(s, "nvidia", "*", "lib") for s in site_dirs]
    pats += [os.path.join(env["CONDA_PREFIX"], "lib")] if env.get("CONDA_PREFIX") else []
    pats += ["/usr/local/cuda*/lib64", "/usr/local/cuda*/targets/*/lib"]
    return list(dict.fromkeys(d for pat in pats for d in sorted(glob.glob(pat)) if os.path.isdir(d)))


def found_elsewhere(soname: str, dirs: list[str]) -> list[str]:
    return [os.path.join(d, soname) for d in dirs if os.path.exists(os.path.join(d, soname))]


def _entry(soname: str, path: str, how: str) -> dict[str, Any]:
    real = os.path.realpath(path)
    m = _VER.search(real)
    # the toolkit ships its link-time stubs in a directory named stubs (lib64/stubs, targets/*/lib/stubs); a
    # file's size says nothing on its own (WSL's libcuda is small and real)
    stub = "/stubs/" in os.path.dirname(path) + "/" or "/stubs/" in os.path.dirname(real) + "/"
    return {"name": soname, "path": path, "version": m.group(1) if m else None, "from": how, "stub": stub}
