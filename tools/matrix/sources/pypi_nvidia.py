"""NVIDIA's CUDA wheels on PyPI: cuda-toolkit (one metapackage per toolkit update), nvidia-cuda-nvcc, cuDNN
and NCCL. PyPI is reachable from every machine envman runs on, so this source is read live; the snapshot
(matrices/sources/nvidia-pypi.tsv) records the newest final release of each project when the data was last
synced and reviewed, which ``matrix outdated`` compares with PyPI now.

A new cuda-toolkit release of a known minor is an *update* when it moves the nvcc or CUDA runtime pins, a
*respin* when only libraries moved (cuBLAS, cuFFT …): a respin keeps the minor's driver floor (13.0.3, 13.1.2,
13.4.3 are respins). PyPI serves no PEP 658 metadata for these wheels: METADATA is read by HTTP range requests.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from email.parser import Parser

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import Version

from tools.matrix.sources.snapshot import Snapshot

NAME = "nvidia-pypi"
PROJECTS = ("cuda-toolkit", "nvidia-cuda-nvcc", "nvidia-cudnn-cu12", "nvidia-cudnn-cu13", "nvidia-nccl-cu12",
            "nvidia-nccl-cu13")
UPDATE_PINS = ("nvidia-cuda-nvcc", "nvidia-cuda-runtime")


def finals(project) -> list[Version]:
    return [v for v in project.versions(final_only=True)]


def read_source(projects: dict, today: date | None = None, index_url: str = "https://pypi.org/simple") -> Snapshot:
    """``projects``: {name: index.Project} as fetched; the newest final release of each."""
    rows = [[name, str(max(finals(p))) if finals(p) else "-"] for name, p in sorted(projects.items())]
    return Snapshot(NAME, {
        "url": index_url, "revision": "newest final releases", "read": (today or date.today()).isoformat(),
        "what": "the newest final release of each NVIDIA CUDA project on PyPI when the matrix was last synced",
    }, {"newest": rows})


def seen(snap: Snapshot) -> dict[str, Version]:
    return {r[0]: Version(r[1]) for r in snap.rows("newest") if len(r) == 2 and r[1] != "-"}


def pins(metadata: str) -> dict[str, str]:
    out = {}
    for line in Parser().parsestr(metadata).get_all("Requires-Dist") or []:
        try:
            r = Requirement(line)
        except InvalidRequirement:
            continue
        out[r.name] = str(r.specifier)
    return out


@dataclass(frozen=True)
class ToolkitRelease:
    version: Version
    kind: str  # "update" | "respin" | "new minor" | "first"
    moved: tuple[str, ...]  # the pins that changed against the previous release of the minor


def classify(versions: list[Version], read_pins) -> list[ToolkitRelease]:
    """Each cuda-toolkit release against the previous one of its minor (``read_pins(v)`` → its pins)."""
    out = []
    prev: dict[tuple[int, int], tuple[Version, dict[str, str]]] = {}
    for v in sorted(versions):
        key = (v.major, v.minor)
        p = read_pins(v)
        if key not in prev:
            out.append(ToolkitRelease(v, "first", ()))
        else:
            before = prev[key][1]
            moved = tuple(sorted(k for k in set(p) | set(before) if p.get(k) != before.get(k)))
            kind = "update" if any(k in moved for k in UPDATE_PINS) else "respin"
            out.append(ToolkitRelease(v, kind, moved))
        prev[key] = (v, p)
    return out


def check(matrix, snap: Snapshot) -> list[str]:
    """What PyPI had when last synced that the data lacks: a CUDA minor (cuda-toolkit), an update of a
    minor newer than its latest_update, a cuDNN minor."""
    got = seen(snap)
    probs = []
    tk = got.get("cuda-toolkit")
    if tk is not None:
        cr = matrix.cuda_release(Version(f"{tk.major}.{tk.minor}"))
        if cr is None:
            probs.append(f"cuda.yaml: releases: CUDA {tk.major}.{tk.minor} (cuda-toolkit {tk} on PyPI) is missing")
        elif Version(cr.latest_update) < tk:
            probs.append(f"cuda.yaml: releases[{cr.label}].latest_update: {cr.latest_update}, PyPI has cuda-toolkit {tk}")
    have = {(c.version.major, c.version.minor) for c in matrix.cudnn}
    for name in ("nvidia-cudnn-cu12", "nvidia-cudnn-cu13"):
        v = got.get(name)
        if v is not None and (v.major, v.minor) not in have:
            probs.append(f"cudnn.yaml: releases: cuDNN {v.major}.{v.minor} ({name} {v} on PyPI) is missing")
    return probs
