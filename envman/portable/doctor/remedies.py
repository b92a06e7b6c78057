"""Remedy text shared by the checks: install commands built from knowledge, never from literals."""

from __future__ import annotations

from collections.abc import Sequence

from ..frameworks import label
from ..versions import sm
from .knowledge import Build, Knowledge, Release
from .view import FactsView


def install(rel: Release, build: Build | None = None, v: FactsView | None = None) -> str:
    """The install command of a release's build (its index, extra, or the CUDA and cuDNN it needs)."""
    b = build or next((b for b in rel.builds if not b.is_cpu), None)
    extras = rel.extras or ((b.extra,) if b is not None and b.extra else ())
    if extras:  # the extra pulls the CUDA wheels (tensorflow[and-cuda]) or the build itself (jax[cuda13])
        return f"pip install '{rel.package}[{','.join(extras)}]=={rel.version}'"
    parts = [f"{rel.package}=={rel.version}"]
    for comp, ver in rel.companions:
        if v is not None and ver and v.pkg(comp):
            parts.append(f"{comp}=={ver}")
    cmd = "pip install " + " ".join(parts)
    if b is not None and b.index_url:
        return cmd + f" --index-url {b.index_url}"
    if b is not None and not b.is_cpu and b.cudnn:
        return cmd + f" and CUDA {b.cuda} with cuDNN {b.cudnn}"
    return cmd


def build_for(
    k: Knowledge, framework: str, v: FactsView, *, prefer: Release | None, ccs: list[tuple[int, int]] | None = None,
    why: str = "",
) -> str | None:
    """A remedy naming the newest build that covers the GPUs and runs on this driver, with the reason;
    when no build runs on this driver, the newest that covers the GPUs and the driver it needs."""
    ccs = v.gpu_ccs() if ccs is None else ccs
    found = k.best_build(framework, ccs=ccs, driver=v.driver, prefer=prefer, python=v.python)
    if found:
        rel, b = found
        reasons = []
        if ccs:
            reasons.append("covers " + ", ".join(sm(c) for c in ccs))
        if v.driver:
            reasons.append(f"runs on driver {v.driver}")
        tail = f" ({label(framework, rel.version, b.variant)} {' and '.join(reasons)})" if reasons else ""
        return install(rel, b, v) + tail + why
    found = k.best_build(framework, ccs=ccs, prefer=prefer, python=v.python)
    if found:
        rel, b = found
        need = k.full_driver(b.cuda) or k.floor_driver(b.cuda)
        return f"install NVIDIA driver ≥ {need}, then {install(rel, b, v)}" + why
    return None


def drop_ld_path(v: FactsView, folder: str) -> str:
    """The command that takes ``folder`` off LD_LIBRARY_PATH."""
    rest = [e for e in v.env.get("LD_LIBRARY_PATH", "").split(":") if e and e.rstrip("/") != folder.rstrip("/")]
    return f"export LD_LIBRARY_PATH={':'.join(rest)}" if rest else "unset LD_LIBRARY_PATH"


def fmt_archs(archs: Sequence[tuple[int, ...]]) -> str:
    return " ".join(sm(a) if isinstance(a, tuple) else str(a) for a in archs) or "none"


def capability(c: tuple[int, int]) -> str:
    """'8.6 (sm_86)': the compute capability as NVIDIA's tables print it and the arch as error messages do."""
    return f"{c[0]}.{c[1]} ({sm(c)})"


def mib(x: float | None) -> str:
    """'1843 MiB', as nvidia-smi prints memory (what users paste into searches)."""
    return "? MiB" if x is None else f"{x:.0f} MiB"


def gib(mib: float | None) -> str:
    if mib is None:
        return "?"
    g = mib / 1024
    return f"{g:.0f} GiB" if g >= 10 else f"{g:.1f} GiB"

