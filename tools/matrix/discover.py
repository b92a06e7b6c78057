"""What the index has that the matrix lacks: ``python -m tools.matrix outdated`` and ``sync PROJECT``.

Releases are discovered from the index itself (PEP 691 JSON simple API), never from pip: pip on a machine
may be capped by a constraint and would name an older "newest". A new torch release's pins come from its
wheel's METADATA (PEP 658, else HTTP range reads); the arch list lives in the binaries, so it is measured
only from a wheel at hand (``--wheel``), else copied from the previous release and marked uncertain.
"""

from __future__ import annotations

import re
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from packaging.version import Version

from envman.errors import UsageError
from envman.model import Matrix, Variant
from tools.matrix.pypi import DEFAULT_INDEX, IndexFile, Project, fetch_project, read_remote_wheel
from tools.matrix.wheel import WheelFacts, facts_from_text

PROJECTS = ("torch", "torchvision", "torchaudio", "tensorflow", "jax")


def known_versions(matrix: Matrix, project: str) -> set[Version]:
    """The releases of ``project`` the matrix names (companions count for torchvision/torchaudio)."""
    if project in ("torch", "tensorflow", "jax"):
        return {r.version for r in matrix.frameworks.get(project, ())}
    return {Version(v) for r in matrix.frameworks.get("torch", ()) for c, v in r.companions if c == project and v}


@dataclass(frozen=True)
class Outdated:
    project: str
    known: Version | None  # newest the matrix names
    newer: tuple[Version, ...]  # final releases on the index newer than that
    notes: tuple[str, ...] = ()  # what makes a newer release unusable as published (a CUDA extra naming no wheel)


def find_outdated(matrix: Matrix, index_url: str = DEFAULT_INDEX, projects=PROJECTS) -> list[Outdated]:
    out = []
    for name in projects:
        known = known_versions(matrix, name)
        newest = max(known) if known else None
        on_index = fetch_project(name, index_url).versions(final_only=True)
        out.append(Outdated(name, newest, tuple(v for v in on_index if newest is None or v > newest)))
    return out


# --- torch -----------------------------------------------------------------------------------------


def _linux_x86(f: IndexFile) -> bool:
    return any("linux" in p and p.endswith("x86_64") for p in f.platforms)


def _pythons(files) -> list[str]:
    """CPython versions with Linux x86_64 wheels (free-threaded cp313t/cp314t left out, as in torch.yaml)."""
    got = set()
    for f in files:
        for t in f.python_tags:
            m = re.fullmatch(r"cp(\d)(\d+)", t)
            if m:
                got.add((int(m.group(1)), int(m.group(2))))
    return [f"{a}.{b}" for a, b in sorted(got)]


def _pick(files: list[IndexFile]) -> IndexFile:
    """The wheel to read: a CPython 3.11/3.12 one if there is one (any would do: the pins are the same)."""
    def rank(f: IndexFile):
        tag = next((t for t in f.python_tags if re.fullmatch(r"cp\d+", t)), "")
        return (tag not in ("cp311", "cp312"), tag, f.filename)
    return sorted(files, key=rank)[0]


@dataclass
class Proposal:
    """One thing the matrix lacks, with what was read to fill it in."""
    version: Version
    variant: str  # "cu132", "cpu"
    plain: bool  # the wheel without a local label: the PyPI default
    facts: WheelFacts | None
    how: str  # where the pins came from
    archs: list[str] = field(default_factory=list)
    ptx: list[str] = field(default_factory=list)
    archs_from: str | None = None  # None: measured from the wheel at hand
    pythons: list[str] = field(default_factory=list)
    existing: bool = False  # the matrix has it: only compared (refresh --version V)


def measure_wheel_archs(path: Path) -> tuple[list[str], list[str]]:
    """SASS and PTX architectures of a torch wheel's CUDA libraries (torch/lib/*cuda*.so), read with the
    stdlib fat-binary reader after extracting each library alone."""
    from envman.errors import UsageError
    from envman.portable.fatbin import read_fatbin
    from tools.matrix.remote import copy_member

    sass: set[str] = set()
    ptx: set[str] = set()
    with zipfile.ZipFile(path) as zf, tempfile.TemporaryDirectory(prefix="envman-archs-") as tmp:
        for name in zf.namelist():
            base = name.rsplit("/", 1)[-1]
            if not (name.startswith("torch/lib/") and "cuda" in base and ".so" in base):
                continue
            target = Path(tmp) / base
            with open(target, "wb") as dst:
                copy_member(zf, name, dst, error=UsageError)  # bounded: a zip bomb is refused, not inflated
            got = read_fatbin(str(target))
            sass.update(got["sass"])
            ptx.update("sm_" + p.split("_", 1)[1] for p in got["ptx"])
            target.unlink()
    key = lambda a: int(a.split("_")[1])  # noqa: E731
    return sorted(sass, key=key), sorted(ptx, key=key)


def _previous_variant(matrix: Matrix, ver: Version, name: str) -> tuple[Variant, Version] | None:
    """The same variant of the newest release before ``ver`` that has it, else that release's PyPI default."""
    older = [r for r in matrix.frameworks["torch"] if r.version < ver]
    for r in older:
        v = r.variant(name)
        if v is not None:
            return v, r.version
    for r in older:
        v = r.variant(r.pypi_default) if r.pypi_default else None
        if v is not None and v.cuda is not None:
            return v, r.version
    return None


def discover_torch(matrix: Matrix, project: Project, wheel: Path | None = None,
                   only: Version | None = None) -> list[Proposal]:
    """Every (release, variant) with a Linux x86_64 wheel on the index that the matrix lacks, newer than the
    matrix's oldest line, with its pins read from METADATA (and torch/version.py when read by range)."""
    from tools.matrix.wheel import read_torch_wheel

    have = {(r.version, v.name) for r in matrix.frameworks["torch"] for v in r.variants}
    known = {r.version for r in matrix.frameworks["torch"]}
    floor = min(r.version for r in matrix.frameworks["torch"])
    groups: dict[tuple[Version, str | None], list[IndexFile]] = {}
    by_version: dict[Version, list[IndexFile]] = {}
    for f in project.files:
        if f.yanked or not _linux_x86(f):
            continue
        pub = Version(f.version.public)
        if pub.is_prerelease or pub.is_devrelease or pub < floor or (only is not None and pub != only):
            continue
        groups.setdefault((pub, f.local), []).append(f)
        by_version.setdefault(pub, []).append(f)
    local_facts = read_torch_wheel(wheel) if wheel is not None else None
    out = []
    for (ver, local), files in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
        if local is not None and (ver, local) in have:
            continue  # a labelled build the matrix names: nothing to read
        if local is None and ver in known and only is None:
            continue  # the unlabelled wheel is the line's pypi_default, which the matrix has (--version re-reads it)
        if local == "cpu":
            facts, how = None, f"index: {_pick(files).filename}"
            variant = "cpu"
        else:
            f = _pick(files)
            if local_facts is not None and wheel is not None and Version(local_facts.version).public == str(ver) \
                    and (local is None or local_facts.variant == local):
                facts, how = local_facts, f"{wheel.name} at hand: METADATA + torch/version.py"
            else:
                rw = read_remote_wheel(f, () if f.metadata_url else ("torch/version.py",))
                facts = facts_from_text(rw.metadata, rw.members.get("torch/version.py"), f.filename)
                read = "METADATA" + (" + torch/version.py" if rw.members else " (CUDA X.Y from the runtime pin)")
                how = f"{f.filename} on the index, {read} by {rw.how}"
            variant = local or facts.variant
        if (ver, variant) in have:
            if only is not None and facts is not None:  # --version V: check the matrix against the wheel
                out.append(Proposal(ver, variant, local is None, facts, how, existing=True))
            continue
        p = Proposal(ver, variant, local is None, facts, how, pythons=_pythons(by_version[ver]))
        if variant != "cpu":
            if facts is local_facts and facts is not None and wheel is not None:
                p.archs, p.ptx = measure_wheel_archs(wheel)
            else:
                prev = _previous_variant(matrix, ver, variant)
                if prev is not None:
                    pv, pver = prev
                    p.archs = [a.sm for a in sorted(pv.archs)]
                    p.ptx = [a.sm for a in sorted(pv.ptx)]
                    p.archs_from = f"torch {pver} {pv.name}"
        out.append(p)
    return out


def plan_text(matrix: Matrix, text: str, proposals: list[Proposal], index_url: str) -> tuple[str, list[str]]:
    """torch.yaml with the proposals added (block YAML, each cited and marked uncertain where guessed),
    and one report line per proposal."""
    from tools.matrix.yamledit import add_patch, add_variant, append_line

    lines_known = {(r.version.major, r.version.minor): r for r in matrix.frameworks["torch"]}
    report = []
    new_lines: dict[tuple[int, int], list[Proposal]] = {}
    for p in proposals:
        key = (p.version.major, p.version.minor)
        if p.existing:
            report += _compare(matrix, p)
            continue
        if key in lines_known:
            rel_versions = {r.version for r in matrix.frameworks["torch"]}
            if p.version not in rel_versions and p.plain:
                text = add_patch(text, p.version, _patch_yaml(p, index_url))
                report.append(f"+ torch {p.version}: new patch of line {key[0]}.{key[1]} ({p.how})")
                rel_versions.add(p.version)
                known_line = lines_known[key]
                if p.variant != known_line.pypi_default or known_line.variant(p.variant) is None:
                    report.append(f"  ! its PyPI wheel is {p.variant}; the line says pypi_default {known_line.pypi_default}")
                else:
                    v = known_line.variant(p.variant)
                    for fld in ("cudnn", "nccl"):
                        got = getattr(p.facts, fld) if p.facts else None
                        if got and getattr(v, fld) != got:
                            report.append(f"  ! {p.variant}.{fld}: the line says {getattr(v, fld)}, {p.version} pins {got}")
            elif lines_known[key].variant(p.variant) is None:
                text = add_variant(text, key, _variant_yaml(p, ""))
                report.append(f"+ torch {key[0]}.{key[1]} {p.variant}: new variant ({p.how})")
            else:
                report.append(f"= torch {p.version} {p.variant}: the line has this variant; its patch is missing (add it by hand)")
        else:
            new_lines.setdefault(key, []).append(p)
    for key, ps in sorted(new_lines.items()):
        text = append_line(text, _line_yaml(matrix, key, ps, index_url))
        report.append(f"+ torch {key[0]}.{key[1]}: new line: " + ", ".join(f"{p.version} {p.variant}" for p in ps))
    for p in proposals:
        if p.variant != "cpu" and p.archs_from:
            report.append(f"  ~ torch {p.version} {p.variant}: archs copied from {p.archs_from} (uncertain; --wheel PATH measures them)")
    return text, report


def _compare(matrix: Matrix, p: Proposal) -> list[str]:
    rel = next(r for r in matrix.frameworks["torch"] if r.version == p.version)
    v = rel.variant(p.variant)
    assert v is not None and p.facts is not None  # existing proposals are made for a variant the matrix has
    bad = [f"  ! {p.variant}.{fld}: the matrix says {getattr(v, fld)}, the wheel pins {getattr(p.facts, fld)}"
           for fld in ("cudnn", "nccl") if getattr(p.facts, fld) and getattr(v, fld) != getattr(p.facts, fld)]
    if p.facts.cuda and str(v.cuda) != p.facts.cuda:
        bad.append(f"  ! {p.variant}.cuda: the matrix says {v.cuda}, the wheel says {p.facts.cuda}")
    if p.plain and rel.pypi_default != p.variant:
        bad.append(f"  ! pypi_default: the matrix says {rel.pypi_default}, the PyPI wheel is {p.variant}")
    head = f"{'!' if bad else '='} torch {p.version} {p.variant}: " + ("differs from the wheel" if bad else "matches the wheel") + f" ({p.how})"
    return [head, *bad]


def _q(s: str) -> str:
    """A YAML double-quoted scalar that no text can end, break or colour: JSON's escapes are YAML's, and with
    ensure_ascii every control character (a newline, ESC, C1) is written as an escape, never raw."""
    import json

    return json.dumps(s, ensure_ascii=True)


def _flow(xs: list[str]) -> str:
    return "[" + ", ".join(xs) + "]"


def _patch_yaml(p: Proposal, index_url: str) -> list[str]:
    return [
        f"- version: {_q(str(p.version))}",
        "  torchvision: null",
        "  torchaudio: null",
        f"  measured: {_q(f'tools.matrix sync: {index_url}: {p.how}')}",
        "  uncertain: true",
        f"  note: {_q('companion versions are not in the torch wheel: fill them in (python -m tools.matrix sync torchvision)')}",
    ]


def _variant_yaml(p: Proposal, pad: str) -> str:
    if p.variant == "cpu":
        return f"{pad}- name: cpu\n{pad}  measured: {_q('tools.matrix sync: ' + p.how)}\n"
    f = p.facts
    assert f is not None  # a CUDA variant's proposal carries the wheel's facts
    rows = [f"- name: {p.variant}", f"  cuda: {_q(f.cuda or '')}"]
    if f.cudnn:
        rows.append(f"  cudnn: {_q(f.cudnn)}")
    if f.nccl:
        rows.append(f"  nccl: {_q(f.nccl)}")
    rows.append(f"  archs: {_flow(p.archs)}")
    if p.ptx:
        rows.append(f"  ptx: {_flow(p.ptx)}")
    pins = ", ".join(f"{k}=={v}" for k, v in sorted(f.pins.items()) if k.startswith(("nvidia-cudnn", "nvidia-nccl", "cuda-toolkit", "nvidia-cuda-runtime")))
    rows.append(f"  measured: {_q(f'tools.matrix sync: {p.how}; Requires-Dist {pins}; cuda {f.cuda}')}")
    if p.archs_from:
        rows += ["  uncertain: true",
                 f"  note: {_q(f'archs and ptx copied from {p.archs_from} (the previous release): not measured from this wheel; python -m tools.matrix sync torch --wheel PATH measures them')}"]
    else:
        rows.append("  # archs/ptx measured from the wheel's torch/lib/*cuda*.so fat binaries")
    return "".join(f"{pad}{r}\n" for r in rows)


def _line_yaml(matrix: Matrix, key: tuple[int, int], ps: list[Proposal], index_url: str) -> str:
    prev = next((r for r in matrix.frameworks["torch"] if (r.version.major, r.version.minor) < key), None)
    default = next((p.variant for p in ps if p.plain), None)
    uncertain_default = default is None
    if default is None:
        default = prev.pypi_default if prev and any(p.variant == prev.pypi_default for p in ps) else ps[0].variant
    pys = sorted({py for p in ps for py in p.pythons}, key=lambda s: tuple(map(int, s.split("."))))
    numpy = prev.numpy_abi if prev and prev.numpy_abi else 2
    notes = [f"numpy_abi {numpy} copied from torch {prev.version.major}.{prev.version.minor}" if prev else "numpy_abi assumed 2"]
    if uncertain_default:
        notes.append("the index has no unlabelled wheel: pypi_default not seen on PyPI")
    out = [
        f"  - line: {_q(f'{key[0]}.{key[1]}')}",
        f"    python: {_flow([_q(x) for x in pys])}",
        f"    pypi_default: {default}",
        f"    numpy_abi: {numpy}",
        f"    measured: {_q(f'tools.matrix sync: {index_url}: Linux x86_64 wheels for ' + ' '.join('cp' + x.replace('.', '') for x in pys))}",
        "    uncertain: true",
        f"    note: {_q('; '.join(notes))}",
        "    patches:",
    ]
    seen = set()
    for p in sorted(ps, key=lambda p: p.version):
        if p.version in seen:
            continue
        seen.add(p.version)
        out += ["      " + r for r in _patch_yaml(next((q for q in ps if q.version == p.version and q.plain), p), index_url)]
    out.append("    variants:")
    body = "\n".join(out) + "\n"
    variants: dict[str, Proposal] = {}
    for p in ps:
        variants.setdefault(p.variant, p)
    for name in sorted(variants, key=lambda n: (n == "cpu", n)):
        body += _variant_yaml(variants[name], "      ")
    return body


def require_project(name: str) -> str:
    if name not in PROJECTS:
        import difflib

        close = difflib.get_close_matches(name, PROJECTS, n=1)
        raise UsageError(f"unknown project {name!r}", hint=f"did you mean {close[0]}?" if close else "one of: " + ", ".join(PROJECTS))
    return name
