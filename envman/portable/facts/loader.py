"""Which file the dynamic loader would open for a soname, found the way glibc's ld.so looks (without loading
anything): LD_LIBRARY_PATH, then /etc/ld.so.cache (what ldconfig wrote from ld.so.conf), then the default
directories. So a toolkit's stub libcuda (…/lib64/stubs/libcuda.so) or the forward-compatibility one
(/usr/local/cuda/compat/libcuda.so.1) that comes first is seen for what it is.

RPATH/RUNPATH of the program are not modelled: the answer is what a plain `dlopen("libcuda.so.1")` gets.
"""

from __future__ import annotations

import os
import re
import struct
from typing import Any

CACHE = "/etc/ld.so.cache"
DEFAULT_DIRS = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
                "/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib")
_NEW = b"glibc-ld.so.cache1.1"
_VER = re.compile(r"\.so\.(\d+(?:\.\d+)+)$")


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


def _cache(path: str = CACHE) -> list[tuple[str, str]]:
    try:
        with open(path, "rb") as fh:
            return cache_entries(fh.read(8 << 20))
    except OSError:
        return []


def resolve(soname: str, environ: dict[str, str] | None = None, cache: list[tuple[str, str]] | None = None,
            defaults: tuple[str, ...] = DEFAULT_DIRS) -> dict[str, Any] | None:
    """{name, path, version, from, stub} of the file ld.so opens for ``soname``, or None when none is found."""
    env = os.environ if environ is None else environ
    for d in [p for p in env.get("LD_LIBRARY_PATH", "").split(":") if p]:
        p = os.path.join(d, soname)
        if os.path.exists(p):
            return _entry(soname, p, "LD_LIBRARY_PATH")
    for name, p in (_cache() if cache is None else cache):
        if name == soname and os.path.exists(p):
            return _entry(soname, p, "ld.so.cache")
    for d in defaults:
        p = os.path.join(d, soname)
        if os.path.exists(p):
            return _entry(soname, p, "default")
    return None


def _entry(soname: str, path: str, how: str) -> dict[str, Any]:
    real = os.path.realpath(path)
    m = _VER.search(real)
    # the toolkit ships its link-time stubs in a directory named stubs (lib64/stubs, targets/*/lib/stubs); a
    # file's size says nothing on its own (WSL's libcuda is small and real)
    stub = "/stubs/" in os.path.dirname(path) + "/" or "/stubs/" in os.path.dirname(real) + "/"
    return {"name": soname, "path": path, "version": m.group(1) if m else None, "from": how, "stub": stub}
