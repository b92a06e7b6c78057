"""A read-only, defensive view of a facts dict: missing or mistyped keys answer None / empty."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from ..frameworks import registered as plugins
from ..frameworks.base import Installed, Plugin
from ..versions import cc, major_minor

_NAME_NORM = re.compile(r"[-_.]+")


def norm_name(name: str) -> str:
    """PEP 503 normalisation: 'Nvidia_CUDNN.cu12' -> 'nvidia-cudnn-cu12'."""
    return _NAME_NORM.sub("-", str(name)).lower()


def _installed(p: Plugin, facts: dict[str, Any]) -> Installed | None:
    try:
        return p.installed(facts)
    except Exception:  # noqa: BLE001 - a plug-in tripping over malformed facts: that framework is unknown
        return None


def as_dict(x: object) -> dict[str, Any]:
    return x if isinstance(x, dict) else {}


def as_list(x: object) -> list[Any]:
    return x if isinstance(x, list) else []


def as_num(x: object) -> float | None:
    if isinstance(x, bool):
        return None
    if isinstance(x, (int, float)):
        return float(x)
    try:
        return float(str(x).strip())
    except (TypeError, ValueError):
        return None


def as_str(x: object) -> str | None:
    if x is None or isinstance(x, (dict, list)):
        return None
    s = str(x).strip()
    return s or None


class Gpu:
    def __init__(self, raw: dict[str, Any], pos: int):
        self.raw = raw
        idx = raw.get("index")
        self.index: int = idx if isinstance(idx, int) and not isinstance(idx, bool) else pos
        self.name: str = as_str(raw.get("name")) or "NVIDIA GPU"
        self.cc: tuple[int, int] | None = cc(raw.get("cc"))
        self.uuid: str | None = as_str(raw.get("uuid"))
        self.mem_total_mib = as_num(raw.get("mem_total_mib"))
        self.mem_used_mib = as_num(raw.get("mem_used_mib"))

    @property
    def label(self) -> str:
        return f"GPU {self.index} {self.name}"


class FactsView:
    def __init__(self, facts: dict[str, Any]):
        self.f = facts if isinstance(facts, dict) else {}
        f = self.f
        gl = f.get("gpus")
        self.gpus_known = isinstance(gl, list)
        self.gpus = [Gpu(g, i) for i, g in enumerate(as_list(gl)) if isinstance(g, dict)]
        self.driver = as_str(f.get("driver"))
        self.driver_cuda = driver_cuda_text(f.get("driver_cuda"))
        self.pip = {norm_name(k): as_str(v) or "" for k, v in as_dict(f.get("pip")).items()}
        self.env = {str(k): ("" if v is None else str(v)) for k, v in as_dict(f.get("env")).items()}
        self._frameworks: list[Installed] | None = None
        py = as_dict(f.get("python"))
        self.python = major_minor(py.get("version")) if py.get("version") else None
        self.in_container = f.get("in_container") is True
        w = f.get("wsl")
        self.wsl = w if isinstance(w, int) and not isinstance(w, bool) else None

    # --- frameworks: each plug-in reads its own record (envman/portable/frameworks) -------------

    @property
    def frameworks(self) -> list[Installed]:
        """The installed frameworks, in registry order."""
        if self._frameworks is None:
            self._frameworks = [i for p in plugins() if (i := _installed(p, self.f)) is not None]
        return self._frameworks

    def framework(self, name: str) -> Installed | None:
        return next((i for i in self.frameworks if i.name == name), None)

    def cuda_frameworks(self) -> list[Installed]:
        """Installed frameworks that are (or may be: not told) CUDA builds."""
        return [i for i in self.frameworks if i.gpu is not False]

    @property
    def torch(self) -> Installed | None:
        """torch, which compiled extensions and the toolchain checks are about."""
        return self.framework("torch")

    # --- packages ----------------------------------------------------------------------------

    def pkg(self, name: str) -> str | None:
        return self.pip.get(norm_name(name)) or None

    def wheels(self, dist: str | None) -> dict[str, str]:
        """The installed wheels of ``dist`` for any CUDA major ('nvidia-cudnn': nvidia-cudnn-cu12 9.1.0.70, …)."""
        if not dist:
            return {}
        pattern = re.compile(rf"^{re.escape(dist)}(-cu\d+)?\Z")
        return {n: v for n, v in sorted(self.pip.items()) if pattern.match(n)}

    def pins(self) -> dict[str, dict[str, Any]]:
        """The project's framework pins (facts ``pins``), and envman.lock's framework where no file pins it."""
        pins = {fw: as_dict(p) for fw, p in as_dict(self.f.get("pins")).items()}
        fw = as_dict(as_dict(self.f.get("lock")).get("framework"))
        if as_str(fw.get("name")) and as_str(fw.get("version")):
            pins.setdefault(str(fw["name"]), {"version": fw["version"], "file": "envman.lock"})
        return pins

    # --- GPUs --------------------------------------------------------------------------------

    def gpu_ccs(self) -> list[tuple[int, int]]:
        return sorted({g.cc for g in self.gpus if g.cc})

    def gpus_with_cc(self, c: tuple[int, int]) -> list[Gpu]:
        return [g for g in self.gpus if g.cc == c]

    def gpu_summary(self) -> str:
        if not self.gpus:
            return "no NVIDIA GPU"
        return ", ".join(f"{n}× {name}" for name, n in Counter(g.name for g in self.gpus).items())

    def stack_summary(self) -> str:
        parts = [fw.label for fw in self.frameworks]
        if self.gpus_known or self.gpus:
            parts.append(self.gpu_summary())
        if self.driver:
            parts.append(f"driver {self.driver}")
        if self.python:
            parts.append(f"Python {self.python}")
        return ", ".join(parts)


def driver_cuda_text(value: Any) -> str | None:
    """The driver's CUDA as X.Y, from '12.8' or the integer CUDA prints (12080 -> '12.8')."""
    if isinstance(value, bool):
        return None
    text = str(value) if isinstance(value, int) else as_str(value)
    if text and re.fullmatch(r"\d{4,6}", text.strip()):
        n = int(text)
        return f"{n // 1000}.{n % 1000 // 10}"
    return text


def group_label(gpus: list[Gpu]) -> str:
    """'GPU 0 NVIDIA H200' or 'GPUs 0, 1, 2 NVIDIA H200' (same model)."""
    if len(gpus) == 1:
        return gpus[0].label
    return f"GPUs {', '.join(str(g.index) for g in gpus)} {gpus[0].name}"

