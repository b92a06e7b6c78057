"""Which GPU code a shared object carries, read from its ELF file with the standard library alone.

nvcc embeds device code in the ``.nv_fatbin`` section of a host object: one or more *fat binary
containers*, each a 16-byte header (magic ``0xBA55ED50``, u16 version, u16 header size, u64 size of the
entries that follow) and then entries. An entry header (64 bytes in every CUDA release seen) starts

    u16 kind (1 = PTX, 2 = ELF cubin = SASS)   u16 version   u32 header size   u64 payload size
    u32 compressed size   u32 -   u16 code minor   u16 code major   u32 arch (80 = sm_80 / compute_80)
    u32 name offset   u32 name length   u64 flags   u64 -   u64 uncompressed size   ...

and the next entry starts ``header size + payload size`` bytes later. A compressed payload is marked in the
flags: 0x2000 LZ4 (``-Xfatbin -compress-all``; ``--compress-mode=speed``), 0x8000 zstd (CUDA 12.8's
``--compress-mode``: nvcc 13.0.88 writes it for ``size`` on every entry and, by ``default``, for PTX). For PTX
the code version is the PTX ISA (8.5 for CUDA 12.5's nvcc), which decides which drivers can JIT it. Layout as
decoded by cuda-fatbin-decompression (RWTH, Apache-2.0) and checked here against nvcc 13.0's own output.

Only headers are read (a few seeks per entry), so a 500 MB flash-attn library costs microseconds, not a
read of its bulk. Arch-specific SASS (``sm_90a``) is reported as its base arch; the fat binary does not mark
it in the fields decoded here. ``dynamic_entries`` reads what the dynamic loader will look for (DT_NEEDED).
"""

from __future__ import annotations

import re
import struct
from typing import Any, BinaryIO

FATBIN_MAGIC = 0xBA55ED50
KIND_PTX = 1
KIND_ELF = 2
FLAG_COMPRESSED = 0x2000 | 0x8000  # LZ4 | zstd
MAX_ENTRIES = 16384  # flash-attn carries a few hundred, libtorch_cuda.so ~3000; a corrupt file must not loop forever


class NotElf(ValueError):
    pass


def _elf_layout(fh: BinaryIO) -> tuple[str, bool, list[tuple[str, int, int, int, int, int]]]:
    """(endian prefix, is 64-bit, sections [(name, type, offset, size, link, entsize)])."""
    ident = fh.read(16)
    if len(ident) < 16 or ident[:4] != b"\x7fELF":
        raise NotElf("not an ELF file")
    is64 = ident[4] == 2
    e = "<" if ident[5] == 1 else ">"
    hdr = struct.unpack(e + ("HHIQQQIHHHHHH" if is64 else "HHIIIIIHHHHHH"), fh.read(48 if is64 else 36))
    shoff, shentsize, shnum, shstrndx = hdr[5], hdr[10], hdr[11], hdr[12]
    if not shoff or not shnum or shnum > 65000:
        return e, is64, []
    fh.seek(shoff)
    raw = fh.read(shentsize * shnum)
    fmt = e + ("IIQQQQIIQQ" if is64 else "IIIIIIIIII")
    size = struct.calcsize(fmt)
    heads = []
    for i in range(shnum):
        chunk = raw[i * shentsize: i * shentsize + size]
        if len(chunk) < size:
            break
        s = struct.unpack(fmt, chunk)
        # (name index, type, offset, size, link, entsize)
        heads.append((s[0], s[1], s[4], s[5], s[6], s[9]))
    names = b""
    if shstrndx < len(heads):
        fh.seek(heads[shstrndx][2])
        names = fh.read(min(heads[shstrndx][3], 1 << 20))
    out = []
    for n, typ, off, sz, link, ent in heads:
        end = names.find(b"\0", n)
        out.append((names[n:end if end >= 0 else None].decode("ascii", "replace"), typ, off, sz, link, ent))
    return e, is64, out


def read_fatbin(path: str) -> dict[str, Any]:
    """``{"sass": ["sm_80", "sm_90"], "ptx": ["compute_90"], "ptx_isa": "8.5", "compressed": bool}`` for
    the GPU code in ``path`` (empty lists when it carries none). ``sass_rare``: SASS that fewer than half of the fat
    binary containers carry — a few kernels built for more GPUs than the library (libtorch_cuda.so 2.14: sm_103 in
    59 of 475 containers), which the library's arch list does not include. Raises OSError / ValueError on a file
    that cannot be read or is not ELF."""
    with open(path, "rb") as fh:
        _, _, sections = _elf_layout(fh)
        sec = next((s for s in sections if s[0] == ".nv_fatbin"), None)
        containers = _containers(fh, sec[2], sec[2] + sec[3]) if sec is not None else []
    entries = [e for c in containers for e in c]
    sass = {a for kind, a, _isa, _c in entries if kind == KIND_ELF}
    ptx = {a for kind, a, _isa, _c in entries if kind == KIND_PTX}
    isas = [isa for kind, _a, isa, _c in entries if kind == KIND_PTX]
    out: dict[str, Any] = {"sass": ["sm_%d" % a for a in sorted(sass)], "ptx": ["compute_%d" % a for a in sorted(ptx)]}
    if isas:
        out["ptx_isa"] = "%d.%d" % max(isas)
    if any(c for _k, _a, _i, c in entries):
        out["compressed"] = True
    count = {a: sum(1 for c in containers if any(k == KIND_ELF and x == a for k, x, _i, _c in c)) for a in sass}
    rare = sorted(a for a, n in count.items() if len(containers) >= 8 and 2 * n < len(containers))
    if rare:
        out["sass_rare"] = ["sm_%d" % a for a in rare]
    return out


def _containers(fh: BinaryIO, start: int, end: int) -> list[list[tuple[int, int, tuple[int, int], bool]]]:
    """The entries of each fat binary container in [start, end): (kind, arch, (code major, minor), compressed)."""
    out: list[list[tuple[int, int, tuple[int, int], bool]]] = []
    pos, seen = start, 0
    while pos + 16 <= end and seen < MAX_ENTRIES:
        fh.seek(pos)
        magic, _ver, hsize, fat_size = struct.unpack("<IHHQ", fh.read(16))
        if magic != FATBIN_MAGIC:
            pos += 8  # containers are 8-byte aligned; padding between them
            continue
        epos, eend = pos + hsize, min(pos + hsize + fat_size, end)
        here: list[tuple[int, int, tuple[int, int], bool]] = []
        while epos + 32 <= eend and seen < MAX_ENTRIES:
            fh.seek(epos)
            head = fh.read(48)
            if len(head) < 48:
                break
            kind, _v, ehsize, psize = struct.unpack_from("<HHIQ", head, 0)
            minor, major_, arch = struct.unpack_from("<HHI", head, 24)
            (flags,) = struct.unpack_from("<Q", head, 40)
            if ehsize < 32 or kind not in (KIND_PTX, KIND_ELF):
                break
            seen += 1
            here.append((kind, arch, (major_, minor), bool(flags & FLAG_COMPRESSED)))
            epos += ehsize + psize
        out.append(here)
        pos = max(pos + 16, (pos + hsize + fat_size + 7) & ~7)
    return out


DT_NEEDED = 1
DT_RPATH = 15
DT_RUNPATH = 29
SHT_DYNAMIC = 6
MAX_DYNAMIC = 4096  # entries read from .dynamic (a library has a few dozen)


def dynamic_entries(path: str) -> dict[str, list[str]]:
    """``{"needed": [...], "rpath": [...], "runpath": [...]}`` of the ELF object at ``path``: its DT_NEEDED sonames
    (``libcudart.so.11.0``, what the dynamic loader will look for) and the directories of DT_RPATH / DT_RUNPATH
    as written (``$ORIGIN/../../nvidia/cudnn/lib``). Each string is read at its offset in the string table, so a
    library whose table is larger than any buffer (libtorch_cuda.so: 4.5 MB) costs a few small reads."""
    out: dict[str, list[str]] = {"needed": [], "rpath": [], "runpath": []}
    with open(path, "rb") as fh:
        e, is64, sections = _elf_layout(fh)
        dyn = next((s for s in sections if s[1] == SHT_DYNAMIC), None)
        if dyn is None or dyn[4] >= len(sections):
            return out
        fmt = e + ("qQ" if is64 else "iI")
        step = struct.calcsize(fmt)
        fh.seek(dyn[2])
        raw = fh.read(min(dyn[3], MAX_DYNAMIC * step))
        _, _, str_off, str_size, _, _ = sections[dyn[4]]
        for i in range(0, len(raw) - step + 1, step):
            tag, val = struct.unpack_from(fmt, raw, i)
            if tag == 0:
                break
            key = {DT_NEEDED: "needed", DT_RPATH: "rpath", DT_RUNPATH: "runpath"}.get(tag)
            if key is None or val >= str_size:
                continue
            fh.seek(str_off + val)
            chunk = fh.read(min(4096, str_size - val))
            end = chunk.find(b"\0")
            text = chunk[:end if end >= 0 else None].decode("utf-8", "replace")
            if key == "needed":
                out["needed"].append(text)
            else:
                out[key] += [d for d in text.split(":") if d]
    return out


MAX_DYNSTR = 16 << 20
_OLD_STRING = re.compile(rb"_ZN3c10\w*?Ss")


def cxx11_abi(path: str) -> bool | None:
    """The C++ ABI a torch extension was built with, from the names its dynamic string table holds: True when it
    asks for ``std::__cxx11`` names (``_GLIBCXX_USE_CXX11_ABI=1``), False when its c10 names use the old ``Ss``
    string and none is ``__cxx11``; None when both or neither (nothing to tell)."""
    with open(path, "rb") as fh:
        _, _, sections = _elf_layout(fh)
        dynstr = next((s for s in sections if s[0] == ".dynstr"), None)
        if dynstr is None:
            return None
        fh.seek(dynstr[2])
        names = fh.read(min(dynstr[3], MAX_DYNSTR))
    new, old = b"St7__cxx11" in names, bool(_OLD_STRING.search(names))
    return new if new != old else None
