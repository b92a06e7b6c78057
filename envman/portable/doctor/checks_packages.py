"""Checks on the installed Python packages: CUDA wheels, companions, cuDNN, NumPy, Python, glibc, and per-release
defects no version rule predicts (matrices/extensions.yaml ``quirks``)."""

from __future__ import annotations

import re

from ..frameworks.base import Installed
from ..versions import major, major_minor, split_local, variant_cuda, vcmp, vt
from .findings import Finding, error, info, warn
from .knowledge import Knowledge
from .view import FactsView, as_dict, as_list, as_str

_NVIDIA = re.compile(r"^nvidia-[a-z0-9-]+\Z")
_SUFFIX = re.compile(r"-cu(\d+)\Z")
# PEP 600 defines these legacy manylinux tags by the glibc they need (a spec, not compatibility data).
_LEGACY_MANYLINUX = {"manylinux1": "2.5", "manylinux2010": "2.12", "manylinux2014": "2.17"}


def cuda_major_of(name: str, version: str, k: Knowledge) -> int | None:
    """The CUDA major an NVIDIA wheel belongs to: its -cuNN suffix, else (CUDA 13 on dropped the suffix where
    the version is the toolkit's: k.toolkit_wheels) its version's major; None for self-numbered libraries."""
    m = _SUFFIX.search(name)
    if m:
        return int(m.group(1))
    return major(version) if name in k.toolkit_wheels else None


def check_cuda_wheels(v: FactsView, k: Knowledge) -> list[Finding]:
    """nvidia-* wheels of two CUDA majors, or two NCCLs, in one environment."""
    out: list[Finding] = []
    by_major: dict[int, list[str]] = {}
    ncc = v.wheels("nvidia-nccl")
    for name, ver in v.pip.items():
        if len(ncc) > 1 and name in ncc:
            continue  # one cause, one finding: nccl-duplicate below
        if _NVIDIA.match(name) or name == "cuda-toolkit":
            m = cuda_major_of(name, ver, k)
            if m is not None:
                by_major.setdefault(m, []).append(name)
    cfw = next((fw for fw in v.frameworks if fw.cuda), None)  # the first that says its CUDA
    want = major(cfw.cuda) if cfw else None
    if len(by_major) > 1:
        keep = want if want in by_major else max(by_major, key=lambda m: len(by_major[m]))
        drop = sorted(n for m, ns in by_major.items() if m != keep for n in ns)
        listing = "; ".join(
            f"CUDA {m}: " + ", ".join(f"{n} {v.pip[n]}" for n in sorted(ns)[:3]) + (" …" if len(ns) > 3 else "")
            for m, ns in sorted(by_major.items())
        )
        who = f" ({cfw.label} uses CUDA {want})" if cfw and want == keep else ""
        out.append(warn(
            "cuda-wheels-mixed",
            f"nvidia-* wheels of CUDA {' and '.join(str(m) for m in sorted(by_major))} are installed together{who}: "
            f"{listing}",
            f"pip uninstall -y {' '.join(drop)}",
        ))
    if len(ncc) > 1:
        keep_n = next((n for n in ncc if want is not None and cuda_major_of(n, ncc[n], k) == want), None)
        drop_n = [n for n in ncc if n != keep_n] if keep_n else sorted(ncc)[:-1]
        keep_n = keep_n or sorted(ncc)[-1]
        out.append(error(
            "nccl-duplicate",
            f"{len(ncc)} NCCLs are installed: {', '.join(f'{n} {ver}' for n, ver in ncc.items())}: each wheel writes "
            f"the same nvidia/nccl/lib/libnccl.so.2, so the last one installed wins whatever the metadata says, and "
            f"ranks with different NCCL builds hang in their first large collective",
            f"pip uninstall -y {' '.join(drop_n)} && pip install --force-reinstall --no-deps {keep_n}=={ncc[keep_n]} "
            f"(uninstalling one removes the file both wrote)",
        ))
    return out


def check_companions(v: FactsView, k: Knowledge) -> list[Finding]:
    """A companion (torchvision, torchaudio) of another release or another variant than its framework."""
    return [f for fw in v.frameworks for f in _companions(v, k, fw)]


def _companions(v: FactsView, k: Knowledge, fw: Installed) -> list[Finding]:
    out = []
    rel = k.release(fw.name, fw.base)
    exact = rel if rel and vcmp(rel.version, fw.base) == 0 else None
    tv = fw.variant
    build = rel.build(tv) if rel else None
    index = f" --index-url {build.index_url}" if build and build.index_url else ""
    for comp in k.companion_names(fw.name):
        cv = v.pkg(comp)
        if not cv:
            continue
        base, label = split_local(cv)
        expected = exact.companion(comp) if exact else None
        if expected and vcmp(base, expected) != 0:
            out.append(error(
                "companion-mismatch",
                f"{comp} {cv} does not pair with {fw.label}: {fw.name} {fw.base} pairs with {comp} {expected}",
                f"pip install {comp}=={expected}{index}",
            ))
            continue
        own = next((r for r in k.releases.get(fw.name, ())
                    if r.companion(comp) and vcmp(r.companion(comp), base) == 0), None)
        # a companion's build is told by its local label, or by the index it came from; a release whose builds are
        # chosen otherwise (jax[cuda13] and one jaxlib for every build) has no companion variant to compare
        by_index = own is not None and any(b.index_url for b in own.builds)
        cvar = label or (own.pypi_default if own and by_index else None)
        if not cvar or not tv or cvar.split(".")[0] == tv:  # jaxlib's cuda12.cudnn89: the CUDA build is its first part
            continue
        cm, tm = variant_cuda(cvar), variant_cuda(tv)
        severe = (cm is None) != (tm is None) or (cm and tm and major(cm) != major(tm))
        out.append((error if severe else warn)(
            "companion-mismatch",
            f"{comp} {cv} is the {cvar} build, {fw.label} the {tv} build"
            + (": its CUDA ops fail to load" if severe else ""),
            f"pip install --force-reinstall {comp}=={expected or base}{index}" if index
            else f"reinstall {comp} {expected or base} from the index {fw.name}'s {tv} build came from",
        ))
    return out


def _installed_cudnn(v: FactsView, fw: Installed, cuda_major: int | None, k: Knowledge) -> tuple[str, str] | None:
    """(version, where) of the cuDNN the framework loads: the loaded one (--deep) or the pip wheel."""
    if fw.cudnn and fw.cudnn_loaded:
        return fw.cudnn, f"loaded by {fw.name}"
    wheels = v.wheels("nvidia-cudnn")
    if cuda_major is not None:
        wheels = {n: ver for n, ver in wheels.items() if cuda_major_of(n, ver, k) in (cuda_major, None)}
    if wheels:
        name = max(wheels, key=lambda n: vt(wheels[n]))
        return wheels[name], name
    return None


def check_cudnn(v: FactsView, k: Knowledge) -> list[Finding]:
    """cuDNN older than the one a framework whose wheels pin it (torch) was built with."""
    out = []
    for fw in v.frameworks:
        if not fw.is_cuda or not fw.pins_cuda_wheels:
            continue
        b = k.build_of(fw.name, fw.base, fw.variant, fw.gpu)
        if not b or not b.cudnn:
            continue
        cm = major(fw.cuda)
        got = _installed_cudnn(v, fw, cm, k)
        if not got:
            continue
        have, where = got
        if major(have) == major(b.cudnn) and vcmp(major_minor(have), major_minor(b.cudnn)) >= 0:
            continue
        pkg = where if where.startswith("nvidia-cudnn") else f"nvidia-cudnn-cu{cm}"
        out.append(error(
            "cudnn-too-old",
            f"cuDNN {have} ({where}) is older than the cuDNN {b.cudnn} {fw.label} was built with",
            f"pip install {pkg}=={b.cudnn}",
        ))
    return out


def check_numpy(v: FactsView, k: Knowledge) -> list[Finding]:
    """NumPy 2 with a framework release built against NumPy 1."""
    np = as_str(v.f.get("numpy")) or v.pkg("numpy")
    if not np or major(np) is None or major(np) < 2:  # type: ignore[operator]
        return []
    out = []
    for fw, ver in ((i.name, i.base) for i in v.frameworks):
        rel = k.release(fw, ver)
        if not rel or rel.numpy_abi != 1:
            continue
        first2 = k.first_release(fw, lambda r, ver=ver: r.numpy_abi == 2 and vcmp(r.version, ver) > 0)
        fix = "pip install 'numpy<2'"
        if first2:
            fix += f", or upgrade to {fw} {first2.version} (built against NumPy 2)"
        out.append(error(
            "numpy-abi",
            f"numpy {np} with {fw} {ver}, which was built against NumPy 1: 'A module that was compiled using "
            f"NumPy 1.x cannot be run in NumPy 2.x'",
            fix,
        ))
    return out


def check_python(v: FactsView, k: Knowledge) -> list[Finding]:
    """Python outside the versions the framework release has wheels for."""
    if not v.python:
        return []
    out = []
    for fw, ver in ((i.name, i.base) for i in v.frameworks):
        rel = k.release(fw, ver)
        if not rel or not rel.python or v.python in rel.python:
            continue
        newer = k.first_release(fw, lambda r, ver=ver: v.python in r.python and vcmp(r.version, ver) > 0)
        fix = f"use Python {rel.python[-1]} (uv venv -p {rel.python[-1]})"
        if newer:
            fix += f", or {fw} {newer.version}, the first with Python {v.python} wheels"
        out.append(warn(
            "python-unsupported",
            f"Python {v.python} is outside {fw} {ver}'s wheels (Python {', '.join(rel.python)}): this install was "
            f"built from source or copied from another Python",
            fix,
        ))
    return out


def _glibc_needed(tag: str) -> str | None:
    m = re.search(r"manylinux_(\d+)_(\d+)_", tag)
    if m:
        return f"{m.group(1)}.{m.group(2)}"
    m = re.search(r"(manylinux\d+)_", tag)
    return _LEGACY_MANYLINUX.get(m.group(1)) if m else None


def check_glibc(v: FactsView, k: Knowledge) -> list[Finding]:
    """glibc older than an installed wheel's manylinux tag demands."""
    glibc = as_str(v.f.get("glibc"))
    if not glibc:
        return []
    out = []
    for name, tags in sorted(as_dict(v.f.get("wheel_tags")).items()):
        needs = [n for n in (_glibc_needed(str(t)) for t in as_list(tags)) if n]
        if not needs:
            continue
        need = min(needs, key=vt)
        if vcmp(glibc, need) < 0:
            out.append(error(
                "glibc-too-old",
                f"glibc {glibc} is older than {name}{' ' + str(v.pkg(name)) if v.pkg(name) else ''}'s wheel needs "
                f"(manylinux glibc ≥ {need})",
                f"run on a distro with glibc ≥ {need} (or in a container built from one), or install a {name} "
                f"release whose wheels are tagged for glibc {glibc}",
            ))
    return out


def check_in_matrix(v: FactsView, k: Knowledge) -> list[Finding]:
    """The judged data must know the framework; say so when it does not."""
    out = []
    for fw, ver in ((i.name, i.base) for i in v.frameworks):
        if not k.releases.get(fw):
            continue
        if k.release(fw, ver) is None:
            newest = k.newest(fw)
            out.append(info(
                "not-in-matrix",
                f"{fw} {ver} is not in envman's matrix (newest known: {newest.version if newest else '-'}): its "
                f"pairings, arch list and cuDNN are not checked",
                "update envman, or run `envman doctor --deep` to read what torch reports about itself" if fw == "torch"
                else "update envman",
            ))
    return out


def check_quirks(v: FactsView, k: Knowledge) -> list[Finding]:
    out = []
    for fw in v.frameworks:
        if fw.gpu is False:
            continue
        for qid, sev, says, fix, when, unless in k.quirks_of(fw.name, fw.base):
            if when and not v.pkg(when):
                continue
            if any(text in v.env.get(var, "") for var, text in unless):
                continue  # the workaround is in place
            out.append(Finding(sev, qid, f"{fw.label} {says}", fix))
    return out


CHECKS = (check_in_matrix, check_cuda_wheels, check_companions, check_cudnn, check_numpy,
          check_python, check_glibc, check_quirks)
