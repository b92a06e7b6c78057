"""Version and compute-capability arithmetic for the checks, on the standard library alone.

The checks must run inside a built image whose Python may have nothing but the stdlib (the smoke test
copies envman/doctor/ into it), so they cannot lean on ``packaging`` or ``envman.model``. Versions here
are tuples of ints ("570.124.06" -> (570, 124, 6)); the same-major SASS rule mirrors
``envman.model.sass_covers`` and a unit test keeps the two in agreement.
"""

from __future__ import annotations

import re

_NUM = re.compile(r"\d+")
_LEAD = re.compile(r"^\s*v?(\d+(?:\.\d+)*)")


def vt(text: object) -> tuple[int, ...]:
    """Leading numeric release of a version string: '2.7.1+cu128' -> (2, 7, 1); '' -> ()."""
    if text is None:
        return ()
    m = _LEAD.match(str(text))
    return tuple(int(p) for p in m.group(1).split(".")) if m else ()


def vcmp(a: object, b: object) -> int:
    """-1/0/1 comparing two versions numerically, missing trailing parts counting as 0."""
    ta, tb = vt(a), vt(b)
    n = max(len(ta), len(tb))
    ta, tb = ta + (0,) * (n - len(ta)), tb + (0,) * (n - len(tb))
    return (ta > tb) - (ta < tb)


def vge(a: object, b: object) -> bool:
    return vcmp(a, b) >= 0


def major(text: object) -> int | None:
    t = vt(text)
    return t[0] if t else None


def major_minor(text: object) -> str | None:
    """'12.8.93' -> '12.8'; '9' -> '9.0'; None when no number."""
    t = vt(text)
    if not t:
        return None
    return f"{t[0]}.{t[1] if len(t) > 1 else 0}"


def split_local(version: str) -> tuple[str, str | None]:
    """'2.7.1+cu128' -> ('2.7.1', 'cu128'); '2.7.1' -> ('2.7.1', None)."""
    base, _, local = str(version).partition("+")
    return base, (local or None)


def cuda_variant(cuda: str | None) -> str:
    """The wheel variant name of a CUDA version: '12.8' -> 'cu128', None -> 'cpu'."""
    t = vt(cuda)
    if not t:
        return "cpu"
    return f"cu{t[0]}{t[1] if len(t) > 1 else 0}"


def variant_cuda(variant: str | None) -> str | None:
    """'cu128' -> '12.8', 'cu118' -> '11.8', 'cu130' -> '13.0'; None for cpu/rocm/unknown."""
    m = re.fullmatch(r"cu(\d+)(\d)", variant or "")
    return f"{m.group(1)}.{m.group(2)}" if m else None


# --- compute capabilities: (major, minor) tuples -------------------------------------------------

_SM = re.compile(r"^(?:sm|compute)_(\d+)(\d)[a-z]?$")
_DOTTED = re.compile(r"^(\d+)\.(\d+)$")


def cc(text: object) -> tuple[int, int] | None:
    """'8.9', 'sm_89', 'sm_90a', 'compute_90', '89' -> (8, 9); None when unreadable."""
    t = str(text or "").strip().lower()
    if m := _SM.match(t):
        return int(m.group(1)), int(m.group(2))
    if m := _DOTTED.match(t):
        return int(m.group(1)), int(m.group(2))
    if t.isdigit() and len(t) in (2, 3):
        return int(t[:-1]), int(t[-1])
    return None


def sm(c: tuple[int, int]) -> str:
    return f"sm_{c[0]}{c[1]}"


def split_arch_list(archs: list | tuple) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """torch.cuda.get_arch_list() style ['sm_80', 'sm_90', 'compute_90'] -> (SASS, PTX)."""
    sass, ptx = [], []
    for a in archs or ():
        s = str(a).strip().lower()
        c = cc(s)
        if c is None:
            continue
        (ptx if s.startswith("compute_") else sass).append(c)
    return sass, ptx


def sass_for(archs: list[tuple[int, int]], device: tuple[int, int]) -> tuple[int, int] | None:
    """SASS runs only within a major and never on a lower minor (CUDA Programming Guide,
    "Binary Compatibility"): sm_86 code runs on 8.9, sm_90 code never on 12.0."""
    usable = [a for a in archs if a[0] == device[0] and a[1] <= device[1]]
    return max(usable) if usable else None


def ptx_for(ptx: list[tuple[int, int]], device: tuple[int, int]) -> tuple[int, int] | None:
    """PTX for compute_X.Y is JIT-compiled by the driver for any device of capability >= X.Y."""
    usable = [a for a in ptx if a <= device]
    return max(usable) if usable else None


def numbers(text: object) -> list[int]:
    return [int(n) for n in _NUM.findall(str(text or ""))]
