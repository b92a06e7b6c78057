"""``envman matrix refresh torch``: primary data read from a real wheel, compared with torch.yaml.

A torch wheel states its CUDA stack exactly: METADATA's Requires-Dist pins nvidia-cudnn-cuXX,
nvidia-nccl-cuXX and the CUDA runtime (nvidia-cuda-runtime-cuXX, or cuda-toolkit[...] from 2.9 on),
and torch/version.py holds ``cuda = 'X.Y'``. Both are read from the zip without importing torch.
The arch list is not in the metadata (it lives in the binaries), so refresh never invents one.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from email.parser import Parser
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

from envman.errors import ToolError, UsageError
from envman.model import Matrix


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
        meta = zf.read(meta_name).decode("utf-8")
        version_py = zf.read(ver_name).decode("utf-8")
    return facts_from_text(meta, version_py, path.name)


def facts_from_text(metadata: str, version_py: str | None, wheel: str) -> WheelFacts:
    """The CUDA stack a torch wheel pins. Without torch/version.py (a PEP 658 .metadata file only), the CUDA
    X.Y is read from the runtime pin (cuda-toolkit==13.2.2 or nvidia-cuda-runtime-cu12==12.6.77)."""
    meta = Parser().parsestr(metadata)
    cuda = _py_assign(version_py, "cuda") if version_py is not None else None
    facts = WheelFacts(version=meta["Version"], cuda=cuda, wheel=wheel)
    for line in meta.get_all("Requires-Dist") or []:
        req = Requirement(line)
        if req.marker is not None and "extra" in str(req.marker):
            continue
        pin = _exact_pin(req)
        if pin is None:
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


def _py_assign(src: str, name: str) -> str | None:
    m = re.search(rf"^{name}\s*(?::\s*[^=]+)?=\s*['\"]([^'\"]*)['\"]", src, re.M)
    return m.group(1) if m else None


def fetch_torch_wheel(version: str, python: str = "3.11", dest: Path | None = None) -> Path:
    """Let pip find the Linux x86_64 wheel (a local index or find-links first, if pip is set up so)."""
    dest = dest or Path(tempfile.mkdtemp(prefix="envman-refresh-"))
    cmd = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet",
        "--platform", "manylinux_2_28_x86_64", "--python-version", python, "--implementation", "cp",
        "-d", str(dest), f"torch=={version}",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wheels = sorted(dest.glob(f"torch-{version}*.whl"))
    if out.returncode != 0 or not wheels:
        tail = (out.stderr or out.stdout).strip().splitlines()[-1:] or ["no wheel"]
        raise ToolError(f"pip could not download torch=={version}: {tail[0]}", hint="pass --wheel PATH to read a wheel you have")
    return wheels[0]


@dataclass
class RefreshPlan:
    report: str
    mismatches: list[str]
    new_text: str | None


def plan_torch_refresh(matrix: Matrix, facts: WheelFacts, yaml_text: str) -> RefreshPlan:
    ver = Version(facts.version.split("+")[0])
    lines = [
        f"wheel {facts.wheel}: torch {facts.version}, torch/version.py cuda={facts.cuda!r} → variant {facts.variant}",
        f"  Requires-Dist pins: cudnn {facts.cudnn or '-'}, nccl {facts.nccl or '-'}, cuda runtime {facts.cuda_runtime or '-'}",
    ]
    mismatches: list[str] = []
    rels = matrix.frameworks["torch"]
    rel = next((r for r in rels if r.version == ver), None)
    same_line = next((r for r in rels if (r.version.major, r.version.minor) == (ver.major, ver.minor)), None)
    ref = rel or same_line
    if ref is None:
        mismatches.append(f"torch {ver.major}.{ver.minor} is not in torch.yaml: add the line by hand "
                          "(its arch lists come from .ci/manywheel/build_cuda.sh, which a wheel does not carry)")
        return RefreshPlan("\n".join(lines + [f"  ! {m}" for m in mismatches]), mismatches, None)
    if ref.pypi_default != facts.variant:
        mismatches.append(f"pypi_default: matrix says {ref.pypi_default}, the PyPI wheel is {facts.variant}")
    var = ref.variant(facts.variant)
    if var is None:
        mismatches.append(f"variant {facts.variant} is missing from torch {ref.version}")
    else:
        for fld, got in (("cudnn", facts.cudnn), ("nccl", facts.nccl)):
            have = getattr(var, fld)
            if got and have != got:
                mismatches.append(f"{facts.variant}.{fld}: matrix says {have}, the wheel pins {got}")
    for m in mismatches:
        lines.append(f"  - {m}")
    if rel is not None:
        if not mismatches:
            lines.append(f"  = torch {ver} {facts.variant} matches the matrix")
        return RefreshPlan("\n".join(lines), mismatches, None)
    new_text = _insert_patch(yaml_text, ver, facts)
    if new_text is None:
        mismatches.append(f"could not find the patches list of line {ver.major}.{ver.minor} in torch.yaml")
        return RefreshPlan("\n".join(lines + [f"  ! {mismatches[-1]}"]), mismatches, None)
    lines.append(f"  + torch {ver}: new patch of line {ver.major}.{ver.minor} (companions to fill in; marked uncertain)")
    return RefreshPlan("\n".join(lines), mismatches, new_text)


def _insert_patch(text: str, ver: Version, facts: WheelFacts) -> str | None:
    lines = text.splitlines(keepends=True)
    line_re = re.compile(rf"""^\s*-?\s*line:\s*["']{ver.major}\.{ver.minor}["']\s*$""")
    start = next((i for i, ln in enumerate(lines) if line_re.match(ln)), None)
    if start is None:
        return None
    pidx = next((i for i in range(start + 1, len(lines)) if re.match(r"^\s*patches:\s*$", lines[i])), None)
    if pidx is None or any(re.match(r"^\s*-\s*line:", lines[i]) for i in range(start + 1, pidx)):
        return None
    indent = len(lines[pidx]) - len(lines[pidx].lstrip())
    end = pidx + 1
    item_indent = None
    while end < len(lines):
        ln = lines[end]
        if ln.strip() == "" or ln.lstrip().startswith("#"):
            end += 1
            continue
        ind = len(ln) - len(ln.lstrip())
        if ind <= indent and not (ind == indent and ln.lstrip().startswith("- ")):
            break
        if ln.lstrip().startswith("- ") and item_indent is None:
            item_indent = ind
        if item_indent is not None and ind < item_indent:
            break
        end += 1
    pad = " " * (item_indent if item_indent is not None else indent + 2)
    entry = (
        f'{pad}- {{version: "{ver}", torchvision: null, torchaudio: null, '
        f'measured: "envman matrix refresh: {facts.wheel} METADATA + torch/version.py", uncertain: true, '
        f'note: "companion versions are not in the torch wheel; fill them in"}}\n'
    )
    while end > pidx + 1 and lines[end - 1].strip() == "":
        end -= 1
    return "".join(lines[:end] + [entry] + lines[end:])
