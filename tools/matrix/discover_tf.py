"""New TensorFlow releases on the index, proposed for tensorflow.yaml.

A TensorFlow line's CUDA/cuDNN are the tested build configuration; a wheel's ``[and-cuda]`` extra names the
NVIDIA wheels pip installs (exact pins up to 2.19, ranges from 2.20: the lower bound is the tested build).
A new patch of a known line is added to its ``patches`` list when its ``[and-cuda]`` floor agrees with the
line; a new line copies arch lists and platforms from the previous one and says so (``uncertain: true``).
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.requirements import Requirement
from packaging.version import Version

from envman.model import Matrix
from tools.matrix.discover import _flow, _linux_x86, _pick, _pythons, _q
from tools.matrix.pypi import Project, read_remote_wheel


@dataclass
class TfProposal:
    version: Version
    pythons: list[str]
    cuda: str | None  # X.Y floor of nvidia-cuda-runtime-cuXX in [and-cuda]
    cudnn: str | None  # X.Y floor of nvidia-cudnn-cuXX in [and-cuda]
    and_cuda: bool
    how: str


def _floor(req: Requirement) -> str | None:
    for s in req.specifier:
        if s.operator in ("==", ">=", "~=", "==="):
            return ".".join(s.version.split(".")[:2])
    return None


def and_cuda_floors(metadata: str) -> tuple[bool, str | None, str | None]:
    from email.parser import Parser

    meta = Parser().parsestr(metadata)
    found, cuda, cudnn = False, None, None
    for line in meta.get_all("Requires-Dist") or []:
        req = Requirement(line)
        if req.marker is None or "and-cuda" not in str(req.marker).replace("_", "-"):
            continue
        found = True
        if req.name.lower().startswith("nvidia-cuda-runtime-cu"):
            cuda = _floor(req)
        elif req.name.lower().startswith("nvidia-cudnn-cu"):
            cudnn = _floor(req)
    return found, cuda, cudnn


def discover_tensorflow(matrix: Matrix, project: Project, only: Version | None = None) -> list[TfProposal]:
    known = {r.version for r in matrix.frameworks["tensorflow"]}
    floor = min(known)
    by_version: dict[Version, list] = {}
    for f in project.files:
        v = Version(f.version.public)
        if f.yanked or not _linux_x86(f) or v.is_prerelease or v.is_devrelease or v < floor or v in known:
            continue
        if only is None or v == only:
            by_version.setdefault(v, []).append(f)
    out = []
    for v, files in sorted(by_version.items()):
        f = _pick(files)
        rw = read_remote_wheel(f)
        found, cuda, cudnn = and_cuda_floors(rw.metadata)
        out.append(TfProposal(v, _pythons(files), cuda, cudnn, found, f"{f.filename} on the index, METADATA by {rw.how}"))
    return out


def plan_tf_text(matrix: Matrix, text: str, proposals: list[TfProposal], index_url: str) -> tuple[str, list[str]]:
    from tools.matrix.yamledit import add_flow_item, append_line

    lines = {(r.version.major, r.version.minor): r for r in matrix.frameworks["tensorflow"]}
    report: list[str] = []
    new: dict[tuple[int, int], list[TfProposal]] = {}
    for p in proposals:
        key = (p.version.major, p.version.minor)
        rel = lines.get(key)
        if rel is None:
            new.setdefault(key, []).append(p)
            continue
        text = add_flow_item(text, key, "patches", _q(str(p.version)))
        report.append(f"+ tensorflow {p.version}: new patch of line {key[0]}.{key[1]} ({p.how})")
        gpu = next(v for v in rel.variants if v.name != "cpu")
        line_cudnn = ".".join((gpu.cudnn or "").split(".")[:2])
        if p.cuda and str(gpu.cuda) != p.cuda or p.cudnn and line_cudnn != p.cudnn:
            report.append(f"  ! its [and-cuda] floor is CUDA {p.cuda} / cuDNN {p.cudnn}; the line says {gpu.cuda} / {gpu.cudnn}")
        if set(p.pythons) - set(rel.python):
            report.append(f"  ! it has wheels for Python {', '.join(sorted(set(p.pythons) - set(rel.python)))}, not in the line's python list")
    for key, ps in sorted(new.items()):
        prev = next((r for r in matrix.frameworks["tensorflow"] if (r.version.major, r.version.minor) < key), None)
        base = next((v for v in prev.variants if v.name != "cpu"), None) if prev else None
        first = ps[0]
        cuda = first.cuda or (str(base.cuda) if base else "")
        cudnn = first.cudnn or (base.cudnn if base else "") or ""
        pys = sorted({x for p in ps for x in p.pythons}, key=lambda s: tuple(map(int, s.split("."))))
        archs = [a.sm for a in sorted(base.archs)] if base else []
        ptx = [a.sm for a in sorted(base.ptx)] if base else []
        src = f"{prev.version.major}.{prev.version.minor}" if prev else "nothing"
        note = (f"cuda/cudnn from the [and-cuda] floors of {first.version} (not yet the tested build configuration table); "
                f"archs, ptx and gpu_platforms copied from line {src}: not measured from this wheel")
        body = [
            f'  - line: {_q(f"{key[0]}.{key[1]}")}',
            f"    patches: {_flow([_q(str(p.version)) for p in ps])}",
            f"    python: {_flow([_q(x) for x in pys])}",
            f"    cuda: {_q(cuda)}",
            f"    cudnn: {_q(cudnn)}",
            f"    and_cuda: {'true' if first.and_cuda else 'false'}",
            "    gpu_platforms: [linux]",
            f"    archs: {_flow(archs)}",
        ] + ([f"    ptx: {_flow(ptx)}"] if ptx else []) + [
            f"    measured: {_q(f'tools.matrix sync: {index_url}: {first.how}')}",
            "    uncertain: true",
            f"    note: {_q(note)}",
        ]
        text = append_line(text, "\n" + "\n".join(body) + "\n")
        report.append(f"+ tensorflow {key[0]}.{key[1]}: new line: " + ", ".join(str(p.version) for p in ps))
        report.append(f"  ~ tensorflow {key[0]}.{key[1]}: archs copied from line {src} (uncertain)")
    return text, report
