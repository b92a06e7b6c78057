"""Which of a package's per-CUDA or per-GPU-generation compiled libraries load here (issue #20)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from ..versions import split_arch_list, vt
from .view import FactsView, as_dict, as_list, as_str

# A CUDA release in a file or directory name: _cuda118, -cu121, /cuda12/, _cuda11x (never inside a word:
# 'libcudart' has no digits after 'cuda', 'libcuda.so.1' is not preceded by a separator)
_CUDA_TAG = re.compile(r"(?<=[_\-/.])(?:cuda|cu)[-_]?(\d{2,3})x?(?=[_.\-/])", re.I)


def cuda_token(path: str) -> tuple[str, str] | None:
    """'bitsandbytes/libbitsandbytes_cuda118.so' -> ('bitsandbytes/libbitsandbytes_*.so', '11.8');
    'lib/cuda12/libx.so' -> ('lib/*/libx.so', '12'); None for a name without one."""
    m = _CUDA_TAG.search("/" + path)
    if not m:
        return None
    digits = m.group(1)
    cuda = digits if len(digits) == 2 else f"{digits[:-1]}.{digits[-1]}"
    key = ("/" + path)[: m.start()] + "*" + ("/" + path)[m.end():]
    return key[1:], cuda


def dists(v: FactsView) -> Iterator[tuple[str, str, list[dict[str, Any]]]]:
    """(dist, version, its library files) of each probed package with compiled libraries (facts ``extensions``)."""
    for dist, e in sorted(as_dict(v.f.get("extensions")).items()):
        e = as_dict(e)
        files = [f for f in as_list(e.get("files")) if isinstance(f, dict) and as_str(f.get("file"))]
        yield dist, as_str(e.get("version")) or "?", files


def groups(files: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Files with the same name but for their CUDA token form one group (its CUDA builds); others stand alone."""
    by_key: dict[str, list[dict[str, Any]]] = {}
    out: list[list[dict[str, Any]]] = []
    for f in files:
        tok = cuda_token(as_str(f.get("file")) or "")
        if tok is None:
            out.append([f])
            continue
        if tok[0] not in by_key:
            by_key[tok[0]] = []
            out.append(by_key[tok[0]])
        by_key[tok[0]].append(f)
    return out


def siblings(f: dict[str, Any], files: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The other CUDA builds of ``f``'s library."""
    tok = cuda_token(as_str(f.get("file")) or "")
    if tok is None:
        return []
    return [x for x in files if x is not f and (cuda_token(as_str(x.get("file")) or "") or ("",))[0] == tok[0]]


def name_for(f: dict[str, Any], cuda: str) -> str:
    """The file name of ``f``'s build for ``cuda`` ('…_cuda118.so', '12.4' -> '…_cuda124.so')."""
    path = as_str(f.get("file")) or ""
    return _CUDA_TAG.sub(lambda m: m.group(0).replace(m.group(1), cuda.replace(".", ""), 1), "/" + path, count=1)[1:]


def file_cuda(f: dict[str, Any]) -> str | None:
    tok = cuda_token(as_str(f.get("file")) or "")
    return tok[1] if tok else None


def pick(group: list[dict[str, Any]], cuda: str | None) -> dict[str, Any]:
    """The member a package loads for an environment of CUDA ``cuda``: the exact build, else the newest of that
    major at or below it, else the newest of that major, else the first."""
    if len(group) == 1 or not cuda:
        return group[0]
    want = vt(cuda)
    same = [f for f in group if vt(file_cuda(f))[:1] == want[:1]]
    exact = [f for f in same if vt(file_cuda(f)) == want[:len(vt(file_cuda(f)))]]
    below = [f for f in same if vt(file_cuda(f)) <= want]
    for cands in (exact, below, same):
        if cands:
            return max(cands, key=lambda f: vt(file_cuda(f)))
    return group[0]


def loaded(files: list[dict[str, Any]], cuda: str | None, loads: Callable[[dict[str, Any]], bool],
           forced: bool = False) -> list[dict[str, Any]]:
    """The files that load: every lone file; of each group of CUDA builds, the one for ``cuda`` when it loads or
    the choice is ``forced`` (a variable names it), else those that load, else (none loads: ext-cuda-libs says
    so) the one for ``cuda``."""
    out = []
    for g in groups(files):
        if len(g) == 1:
            out += g
            continue
        chosen = pick(g, cuda)
        ok = [f for f in g if loads(f)]
        out += [chosen] if forced or chosen in ok or not ok else ok
    return out


def archs(f: dict[str, Any]) -> list[str]:
    return [str(a) for a in as_list(f.get("sass")) + as_list(f.get("ptx"))]


def only_newer(f: dict[str, Any], c: tuple[int, int]) -> bool:
    """Every kernel the file carries is for GPUs newer than ``c``: a build for later generations, which a package
    that also ships code for ``c`` does not load there (FlashAttention builds on a T4, cuBLASLt builds on a V100)."""
    sass, ptx = split_arch_list(archs(f))
    return bool(sass or ptx) and all((a[0], a[1]) > tuple(c) for a in sass + ptx)
