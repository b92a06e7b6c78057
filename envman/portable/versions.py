"""Version and compute-capability arithmetic on the stdlib alone, with THE SASS/PTX rule (runs_sass/runs_ptx)."""

from __future__ import annotations

import re
from collections.abc import Sequence

_ARCH = re.compile(r"^(sm|compute)_(\d+)([af]?)\Z")
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


def split_local(version: object) -> tuple[str, str | None]:
    """'2.7.1+cu128' -> ('2.7.1', 'cu128'); '2.7.1' -> ('2.7.1', None)."""
    base, _, local = str(version).partition("+")
    return base, (local or None)


def variant_cuda(variant: str | None) -> str | None:
    """'cu128' -> '12.8', 'cu118' -> '11.8', 'cu130' -> '13.0'; None for cpu/rocm/unknown."""
    m = re.fullmatch(r"cu(\d+)(\d)", variant or "")
    return f"{m.group(1)}.{m.group(2)}" if m else None


# --- compute capabilities: (major, minor) tuples -------------------------------------------------

_SM = re.compile(r"^(?:sm|compute)_(\d+)(\d)[a-z]?\Z")
_DOTTED = re.compile(r"^(\d+)\.(\d+)\Z")


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


def parse_arch(arch: object) -> tuple[str, int, int, str] | None:
    """'sm_86' -> ('sm', 8, 6, ''); 'sm_90a' -> ('sm', 9, 0, 'a'); 'compute_120' -> ('compute', 12, 0, '')."""
    m = _ARCH.match(str(arch or "").strip().lower())
    if not m:
        return None
    num = int(m.group(2))
    return m.group(1), num // 10, num % 10, m.group(3)


def arch_tuple(major: int, minor: int, suffix: str = "") -> tuple[int, ...]:
    return (major, minor, suffix) if suffix else (major, minor)  # type: ignore[return-value]


def split_arch_list(archs: Sequence[object]) -> tuple[list[tuple[int, ...]], list[tuple[int, ...]]]:
    """torch.cuda.get_arch_list() style ['sm_80', 'sm_90a', 'compute_90'] -> (SASS, PTX)."""
    sass: list[tuple[int, ...]] = []
    ptx: list[tuple[int, ...]] = []
    for a in archs or ():
        p = parse_arch(a)
        if p is None:
            continue
        kind, major, minor, suffix = p
        (ptx if kind == "compute" else sass).append(arch_tuple(major, minor, suffix))
    return sass, ptx


def runs_sass(arch: tuple[int, ...], device: tuple[int, ...]) -> bool:
    """SASS runs only within a major and never on a lower minor (CUDA Programming Guide, "Binary
    Compatibility"): sm_86 runs on 8.9, sm_90 never on 12.0. Arch-specific code (sm_90a, sm_100a) runs on
    exactly that capability; family code (sm_100f) on the same major from that minor up."""
    suffix = arch[2] if len(arch) > 2 else ""
    if arch[0] != device[0]:
        return False
    return arch[1] == device[1] if suffix == "a" else arch[1] <= device[1]


def runs_ptx(arch: tuple[int, ...], device: tuple[int, ...]) -> bool:
    """PTX for compute_X.Y JITs for any device >= X.Y; arch-specific PTX (compute_90a) only for X.Y."""
    suffix = arch[2] if len(arch) > 2 else ""
    base, dev = (arch[0], arch[1]), (device[0], device[1])
    return base == dev if suffix == "a" else base <= dev


def sass_for(archs: list[tuple[int, ...]], device: tuple[int, ...]) -> tuple[int, ...] | None:
    """The best SASS in ``archs`` that runs on ``device``, or None."""
    return max((a for a in archs if runs_sass(a, device)), key=lambda a: (a[0], a[1]), default=None)


def ptx_for(ptx: list[tuple[int, ...]], device: tuple[int, ...]) -> tuple[int, ...] | None:
    return max((a for a in ptx if runs_ptx(a, device)), key=lambda a: (a[0], a[1]), default=None)


def arch_name(a: tuple[int, ...], kind: str = "sm") -> str:
    return "%s_%d%d%s" % (kind, a[0], a[1], a[2] if len(a) > 2 else "")


sm = arch_name  # (8, 6) -> 'sm_86'


def arch_covers(capability: Sequence[int], arch_list: Sequence[str]) -> tuple[bool, str]:
    """(covered, explanation) of a device of compute capability (major, minor) by ``arch_list``."""
    device = (int(capability[0]), int(capability[1]))
    label = "%d.%d" % device
    sass, ptx = split_arch_list(arch_list)
    best = sass_for(sass, device)
    if best is not None:
        how = "exact match" if best[1] == device[1] else "same major, lower minor"
        return True, "%s SASS runs on %s (%s)" % (arch_name(best), label, how)
    jit = ptx_for(ptx, device)
    if jit is not None:
        return True, "no SASS for %s; %s PTX is JIT-compiled for it (slow first start)" % (label, arch_name(jit, "compute"))
    same = [arch_name(a) for a in sass if a[0] == device[0]]
    if same:
        why = "only %s for major %d, none of it runs on %s" % (" ".join(same), device[0], label)
    else:
        why = "no sm_%d* SASS and no PTX <= %s" % (device[0], label)
    return False, "%s: %s cannot run on compute capability %s" % (why, " ".join(arch_list) or "(empty list)", label)

