"""Turn what a user typed (``h100``, ``GeForce RTX 4090``, ``sm_89``, ``8.9``) into Targets. Pure."""

from __future__ import annotations

import difflib

from envman.errors import UnknownGpuError
from envman.model import Cc, Gpu, Matrix, Target, normalize_gpu_name


def _index(matrix: Matrix) -> dict[str, Gpu]:
    idx: dict[str, Gpu] = {}
    for g in matrix.gpus:
        for a in (g.id, g.name, *g.aliases):
            idx.setdefault(normalize_gpu_name(a), g)
    return idx


def find_gpu(matrix: Matrix, text: str) -> Gpu | None:
    return _index(matrix).get(normalize_gpu_name(text))


def parse_target(matrix: Matrix, text: str) -> Target:
    raw = str(text).strip()
    low = raw.lower()
    if low.startswith("sm_") or (len(low) <= 4 and "." in low):
        try:
            cc = Cc.parse(low)
        except ValueError:
            raise UnknownGpuError(
                f"target {raw!r} is not a compute capability", hint="write it as sm_89 or 8.9"
            ) from None
        return Target(cc.sm, cc)
    gpu = find_gpu(matrix, raw)
    if gpu is None:
        raise UnknownGpuError(f"unknown GPU {raw!r}", hint=_closest_hint(matrix, raw))
    return Target(gpu.name, gpu.cc, gpu)


def _closest_hint(matrix: Matrix, raw: str) -> str:
    idx = _index(matrix)
    key = normalize_gpu_name(raw)
    close = difflib.get_close_matches(key, list(idx), n=8, cutoff=0.5)
    seen: list[str] = []
    for k in close:
        g = idx[k]
        label = f"{g.id} ({g.name})"
        if label not in seen:
            seen.append(label)
    if not seen:
        contains = sorted({f"{g.id} ({g.name})" for k, g in idx.items() if key and (key in k or k in key)})
        seen = contains[:5]
    if seen:
        return "did you mean: " + ", ".join(seen[:4]) + "? (or give a compute capability like sm_89)"
    return "`envman matrix show gpus` lists every known GPU; a compute capability like sm_89 also works"


def parse_targets(matrix: Matrix, texts: list[str] | tuple[str, ...]) -> tuple[Target, ...]:
    out: list[Target] = []
    for t in texts:
        tgt = parse_target(matrix, t)
        if tgt not in out:
            out.append(tgt)
    return tuple(out)
