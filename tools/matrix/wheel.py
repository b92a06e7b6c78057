"""What a torch wheel states about its build, read without importing torch.

A torch wheel states its CUDA stack exactly: METADATA's Requires-Dist pins nvidia-cudnn-cuXX,
nvidia-nccl-cuXX and the CUDA runtime (nvidia-cuda-runtime-cuXX, or cuda-toolkit[...] from 2.9 on),
and torch/version.py holds ``cuda = 'X.Y'``. The arch list is not in the metadata (it lives in the
binaries: ``discover.measure_wheel_archs``).
"""

from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass, field
from email.parser import Parser
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from envman.errors import ToolError, UsageError


@dataclass
class WheelFacts:
    version: str
    cuda: str | None
    cudnn: str | None = None
    nccl: str | None = None
    cuda_runtime: str | None = None
    pins: dict[str, str] = field(default_factory=dict)
    wheel: str = ""

    @property
    def variant(self) -> str:
        return "cpu" if not self.cuda else "cu" + self.cuda.replace(".", "")


def _exact_pin(req: Requirement) -> str | None:
    for s in req.specifier:
        if s.operator in ("==", "==="):
            return s.version
    return None


def read_torch_wheel(path: Path | str) -> WheelFacts:
    path = Path(path)
    try:
        zf = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as exc:
        raise UsageError(f"{path}: not a readable wheel ({exc})", hint="pass a torch-*.whl file") from None
    with zf:
        names = zf.namelist()
        meta_name = next((n for n in names if n.endswith(".dist-info/METADATA")), None)
        ver_name = "torch/version.py" if "torch/version.py" in names else None
        if meta_name is None or ver_name is None:
            raise UsageError(f"{path}: no METADATA or torch/version.py inside", hint="is this a torch wheel?")
        from envman.lock.remote import read_member

        meta = read_member(zf, meta_name, error=UsageError).decode("utf-8", "replace")
        version_py = read_member(zf, ver_name, error=UsageError).decode("utf-8", "replace")
    return facts_from_text(meta, version_py, path.name)


def facts_from_text(metadata: str, version_py: str | None, wheel: str) -> WheelFacts:
    """The CUDA stack a torch wheel pins. Without torch/version.py (a PEP 658 .metadata file only), the CUDA
    X.Y is read from the runtime pin (cuda-toolkit==13.2.2 or nvidia-cuda-runtime-cu12==12.6.77)."""
    meta = Parser().parsestr(metadata)
    cuda = _py_assign(version_py, "cuda") if version_py is not None else None
    _check_versions(wheel, cuda, meta["Version"])
    facts = WheelFacts(version=meta["Version"], cuda=cuda, wheel=wheel)
    for line in meta.get_all("Requires-Dist") or []:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue  # not a requirement: it pins nothing envman reads
        if req.marker is not None and "extra" in str(req.marker):
            continue
        pin = _exact_pin(req)
        if pin is None or not _VERSION.fullmatch(pin.split("+")[0]):
            continue
        name = req.name.lower()
        facts.pins[name] = pin
        if name.startswith("nvidia-cudnn-cu"):
            facts.cudnn = pin
        elif name.startswith("nvidia-nccl-cu"):
            facts.nccl = pin
        elif name.startswith("nvidia-cuda-runtime") or name == "cuda-toolkit":
            facts.cuda_runtime = pin
    if version_py is None and facts.cuda_runtime:
        facts.cuda = ".".join(facts.cuda_runtime.split(".")[:2])
    return facts


_VERSION = re.compile(r"\d+(?:\.\d+){0,5}")


def _check_versions(wheel: str, cuda: str | None, version: str | None) -> None:
    """What an index serves is checked before it becomes YAML or a report line: a version is a version."""
    if cuda is not None and not _VERSION.fullmatch(cuda):
        raise ToolError(f"{wheel}: torch/version.py: cuda = {cuda!r} is not a CUDA version",
                        hint="not a torch wheel envman reads (refresh reads only what a wheel states)")
    if not _VERSION.fullmatch(str(version or "").split("+")[0]):
        raise ToolError(f"{wheel}: METADATA: Version {version!r} is not a version", hint="not a wheel envman reads")


def _py_assign(src: str, name: str) -> str | None:
    m = re.search(rf"^{name}[ \t]*(?::[ \t]*[^=\n]+)?=[ \t]*['\"]([^'\"\n]*)['\"]", src, re.M)
    return m.group(1) if m else None
