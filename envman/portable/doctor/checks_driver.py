"""The driver against CUDA libraries installed without a framework of their CUDA major."""

from __future__ import annotations

import re

from ..versions import major, vcmp
from .checks_gpu import _cuda_frameworks, _driver_words
from .findings import Finding, error
from .knowledge import Knowledge
from .view import FactsView

_CUDA_PYTHON = ("cuda-python", "cuda-bindings")


def check_driver_wheels(v: FactsView, k: Knowledge) -> list[Finding]:
    """CUDA library wheels of a major the driver does not run, with no framework of that major."""
    if not v.driver and not v.driver_cuda:
        return []
    majors: dict[int, list[str]] = {}
    for name, ver in v.pip.items():
        m = _wheel_major(name, ver, k)
        if m is not None:
            majors.setdefault(m, []).append(f"{name} {ver}")
    fw_majors = {major(c) for _, c, _ in _cuda_frameworks(v, k)}
    out = []
    for m, wheels in sorted(majors.items()):
        floor = k.floor_driver(f"{m}.0")
        if m in fw_majors:
            continue
        if v.driver and floor:
            old = vcmp(v.driver, floor) < 0
        elif v.driver_cuda:
            old = (major(v.driver_cuda) or 0) < m
        else:
            continue
        if not old:
            continue
        shown = ", ".join(sorted(wheels)[:3]) + (" …" if len(wheels) > 3 else "")
        out.append(error(
            "driver-too-old",
            f"{_driver_words(v)} is too old for the CUDA {m} libraries installed here ({shown}): CUDA {m} needs driver "
            f"≥ {floor or '?'}; calls fail with 'CUDA driver version is insufficient for CUDA runtime version' "
            "(cudaErrorInsufficientDriver)",
            (f"install NVIDIA driver ≥ {floor}" if floor else "upgrade the NVIDIA driver")
            + f", or the CUDA {major(v.driver_cuda) or m - 1} builds of these packages",
        ))
    return out


def _wheel_major(name: str, ver: str, k: Knowledge) -> int | None:
    if name in _CUDA_PYTHON:
        return major(ver)
    m = re.search(r"^nvidia-[a-z0-9-]+-cu(\d+)\Z", name)
    if m:
        return int(m.group(1))
    return major(ver) if name in k.toolkit_wheels else None


CHECKS = (check_driver_wheels,)
