"""Remedy text shared by the checks: install commands built from knowledge, never from literals."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..versions import sm, vt
from .knowledge import Build, Knowledge, Release
from .view import FactsView


def torch_install(rel: Release, build: Build, v: FactsView) -> str:
    """``pip install torch==2.7.1 torchvision==0.22.1 --index-url …/cu128``: companions that are
    installed move along, or they would stop pairing with the new torch."""
    parts = [f"torch=={rel.version}"]
    for comp in ("torchvision", "torchaudio"):
        if v.pkg(comp) and rel.companion(comp):
            parts.append(f"{comp}=={rel.companion(comp)}")
    cmd = "pip install " + " ".join(parts)
    if build.index_url:
        cmd += f" --index-url {build.index_url}"
    return cmd


def tf_install(rel: Release) -> str:
    if "and-cuda" in rel.extras:
        return f"pip install '{rel.package}[and-cuda]=={rel.version}'"
    gpu = next((b for b in rel.builds if not b.is_cpu), None)
    extra = f" and CUDA {gpu.cuda} with cuDNN {gpu.cudnn}" if gpu and gpu.cudnn else ""
    return f"pip install {rel.package}=={rel.version}{extra}"


def install(rel: Release, build: Build, v: FactsView) -> str:
    return torch_install(rel, build, v) if rel.framework == "torch" else tf_install(rel)


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
        tail = f" ({framework} {b.label(rel.version)} {' and '.join(reasons)})" if reasons else ""
        return install(rel, b, v) + tail + why
    found = k.best_build(framework, ccs=ccs, prefer=prefer, python=v.python)
    if found:
        rel, b = found
        need = k.full_driver(b.cuda) or k.floor_driver(b.cuda)
        return f"install NVIDIA driver ≥ {need}, then {install(rel, b, v)}" + why
    return None


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


def newest_version(versions: Iterable[str]) -> str:
    return max(versions, key=vt)
