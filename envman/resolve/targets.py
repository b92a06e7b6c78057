"""Turn what a user typed (``h100``, ``GeForce RTX 4090``, ``sm_89``, ``8.9``) into Targets. Pure."""

from __future__ import annotations

import difflib
import re

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
        _refuse_other_vendor(matrix, raw)
        raise UnknownGpuError(f"unknown GPU {raw!r}", hint=_closest_hint(matrix, raw))
    return Target(gpu.name, gpu.cc, gpu)


def _refuse_other_vendor(matrix: Matrix, raw: str) -> None:
    """mi300x, gaudi3, m3-max: another vendor's accelerator is said to be one, not matched to a near NVIDIA name."""
    key = normalize_gpu_name(raw)
    for o in matrix.other_accelerators:
        if any(re.fullmatch(p, key) for p in o.patterns):
            raise UnknownGpuError(
                f"{raw!r} is {'an' if o.vendor[:1] in 'AEIOU' else 'a'} {o.vendor} accelerator: envman builds CUDA "
                f"environments for NVIDIA GPUs only, and {o.vendor}/{o.stack} is outside its scope",
                hint="give an NVIDIA GPU (`envman matrix show gpus` lists them) or a compute capability like sm_90",
                exit_code=2,
            )


def _closest_hint(matrix: Matrix, raw: str) -> str:
    idx = _index(matrix)
    key = normalize_gpu_name(raw)
    close = difflib.get_close_matches(key, list(idx), n=8, cutoff=0.5)
    seen = list(dict.fromkeys(f"{idx[k].id} ({idx[k].name})" for k in close))
    if not seen:
        contains = sorted({f"{g.id} ({g.name})" for k, g in idx.items() if key and (key in k or k in key)})
        seen = contains[:5]
    if seen:
        return "did you mean: " + ", ".join(seen[:4]) + "? (or give a compute capability like sm_89)"
    return "`envman matrix show gpus` lists every known GPU; a compute capability like sm_89 also works"


def parse_targets(matrix: Matrix, texts: list[str] | tuple[str, ...]) -> tuple[Target, ...]:
    return tuple(dict.fromkeys(parse_target(matrix, t) for t in texts))
