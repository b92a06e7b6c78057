"""A Resolution as plain data: the stable JSON contract of ``envman resolve --json`` and the lock."""

from __future__ import annotations

from typing import Any

from envman.errors import ResolutionError
from envman.model import Resolution


def resolution_dict(res: Resolution) -> dict[str, Any]:
    fw = None
    if res.framework is not None:
        fw = {
            "name": res.framework,
            "version": str(res.version),
            "variant": res.variant,
            "index_url": res.index_url,
        }
    return {
        "framework": fw,
        "companions": {k: v for k, v in res.companions},
        "cuda": res.cuda,
        "cudnn": res.cudnn,
        "nccl": res.nccl,
        "python": res.python,
        "platform": res.platform,
        "base_image": res.base_image,
        "base_kind": res.base_kind,
        "min_driver": res.min_driver,
        "min_driver_minor_compat": res.min_driver_minor_compat,
        "driver": res.driver,
        "driver_assumed": res.driver_assumed,
        "driver_mode": res.driver_mode,
        "arch_list": list(res.arch_list),
        "ptx": list(res.ptx),
        "targets": [
            {"name": t.label, "compute_capability": str(t.cc), "sm": t.cc.sm, "id": t.gpu.id if t.gpu else None}
            for t in res.targets
        ],
        "notes": list(res.notes),
        "warnings": list(res.warnings),
    }


def refusal_dict(err: ResolutionError) -> dict[str, Any]:
    return {"error": err.message, "conflicts": list(err.conflicts), "alternatives": list(err.alternatives)}
