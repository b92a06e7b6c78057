"""Checks on what installed wheels and the project's pins can load here (glibc, Windows, METADATA pins)."""

from __future__ import annotations

import re

from ..versions import vcmp
from .findings import Finding, error
from .knowledge import Knowledge
from .view import FactsView, as_dict, as_list, as_str

# mmcv's compiled ops are a module of their own (mmcv._ext): without it its CUDA ops cannot import, nor the packages
# below, which are only usable with them. mmcv 1.x named the lite build "mmcv" and the one with ops "mmcv-full"; from
# 2.0 "mmcv" has the ops again.
_MMCV_EXT = re.compile(r"(^|/)mmcv/_ext[.\w-]*\.(so|pyd)\Z")
_NEEDS_OPS = ("mmdet", "mmsegmentation", "mmdet3d", "mmpose", "mmocr", "mmrotate", "mmaction2")


def check_framework_wheels(v: FactsView, k: Knowledge) -> list[Finding]:
    """A framework's METADATA-pinned nvidia-* wheels missing, or in another site-packages than it."""
    out = []
    for fw in v.frameworks:
        pins = {n: spec for n, spec in fw.requires if n.startswith(("nvidia-", "cuda-"))}
        if not pins or not v.pip:
            continue
        missing = sorted(n for n in pins if not v.pkg(n))
        apart = sorted(n for n in fw.apart if n in pins)
        if not missing and not apart:
            continue
        lib = _lib(missing + apart, pins)
        check = f"{fw.tag or fw.name}-wheels-missing"
        if missing:
            reqs = " ".join(f"'{n}{pins[n]}'" for n in missing)
            out.append(error(
                check,
                f"{fw.label} pins {len(missing)} wheel{'s' if len(missing) != 1 else ''} its METADATA requires that "
                f"{'are' if len(missing) != 1 else 'is'} not installed ({', '.join(missing[:4])}"
                f"{' …' if len(missing) > 4 else ''}): import {fw.name} fails with '{lib}: cannot open shared object "
                f"file'",
                f"pip install {reqs} (or reinstall {fw.name} without --no-deps)",
            ))
        else:
            loc = as_str(as_dict(v.f.get(fw.name)).get("location")) or f"{fw.name}'s site-packages"
            out.append(error(
                check,
                f"{', '.join(apart[:3])}{' …' if len(apart) > 3 else ''} {'are' if len(apart) != 1 else 'is'} installed "
                f"in another site-packages than {fw.label} ({loc}): its libraries look for them beside themselves, so "
                f"import {fw.name} fails with '{lib}: cannot open shared object file'",
                f"reinstall them next to it: pip install --force-reinstall --no-deps --target "
                f"{loc.rsplit('/', 1)[0] if '/' in loc else '<site-packages of torch>'} "
                + " ".join(f"'{n}{pins[n]}'" for n in apart),
            ))
    return out


def _lib(names: list[str], pins: dict[str, str]) -> str:
    """The soname the loader names first for these wheels (cuDNN is what torch's import stops at): a wheel's soname
    major is its version's (nvidia-cudnn-cu12==9.1.0.70 ships libcudnn.so.9)."""
    for n in sorted(names, key=lambda n: (not n.startswith("nvidia-cudnn"), n)):
        m = re.match(r"nvidia-(cudnn|cublas|nccl|cufft|curand|cusparse|cusolver)(?:-cu\d+)?\Z", n)
        if m:
            ver = re.search(r"(\d+)", pins.get(n, ""))
            return f"lib{m.group(1)}.so.{ver.group(1)}" if ver else f"lib{m.group(1)}.so"
    return "libcudnn.so"


def check_pin_glibc(v: FactsView, k: Knowledge) -> list[Finding]:
    """A project pin (torch==2.7.1) whose Linux wheels need a newer glibc than this machine's."""
    glibc = as_str(v.f.get("glibc"))
    if not glibc or as_str(v.f.get("os")) not in (None, "Linux"):
        return []
    out = []
    for fw, p in sorted(v.pins().items()):
        ver = as_str(p.get("version"))
        rel = k.release(fw, ver)
        need = k.glibc_for(rel.package if rel else fw, (ver or "").split("+")[0])
        if not need or vcmp(glibc, need) >= 0:
            continue
        older = [r.version for r in k.releases.get(fw, ()) if not k.glibc_for(r.package, r.version)]
        alt = f", or pin {fw}=={older[0]}, the newest release whose wheels run on glibc {glibc}" if older else ""
        out.append(error(
            "pin-no-wheels-for-glibc",
            f"{p.get('file') or 'the project'} pins {fw}=={ver}, whose Linux wheels are manylinux_{need.replace('.', '_')} "
            f"(glibc ≥ {need}); this machine has glibc {glibc}: 'No matching distribution found for {fw}=={ver}'",
            f"run it in a container with glibc ≥ {need} (envman build makes one){alt}",
        ))
    return out


def check_windows_binary(v: FactsView, k: Knowledge) -> list[Finding]:
    """A package whose wheel carries Linux CUDA libraries only, installed on native Windows."""
    if as_str(v.f.get("os")) != "Windows":
        return []
    out = []
    for dist, e in sorted(as_dict(v.f.get("extensions")).items()):
        since = k.windows_since(dist)
        files = [str(as_dict(f).get("file")) for f in as_list(as_dict(e).get("files"))]
        linux = [f for f in files if re.search(r"cuda[^/]*\.so\Z", f)]
        if not since or not linux or any(f.endswith(".dll") for f in files):
            continue
        ver = as_str(as_dict(e).get("version")) or "?"
        out.append(error(
            "bnb-windows-binary" if dist == "bitsandbytes" else "ext-windows-binary",
            f"{dist} {ver} has no native-Windows build (its wheel carries Linux libraries only: "
            f"{linux[0].rsplit('/', 1)[-1]} …): on Windows it falls back to the CPU ('CUDA Setup failed despite GPU "
            f"being available')",
            f"pip install -U '{dist}>={since}' (the first release with a win_amd64 wheel), or run it in WSL2",
        ))
    return out


def check_compiled_ops(v: FactsView, k: Knowledge) -> list[Finding]:
    """mmcv without mmcv._ext: the lite package, or a source build that skipped the ops."""
    out = []
    exts = as_dict(v.f.get("extensions"))
    for dist in ("mmcv", "mmcv-full"):
        ver = v.pkg(dist)
        if not ver or dist not in exts:
            continue  # (not probed: unknown)
        files = [str(as_dict(f).get("file")) for f in as_list(as_dict(exts[dist]).get("files"))]
        if as_dict(exts[dist]).get("truncated") or any(_MMCV_EXT.search(f) for f in files):
            continue
        users = [p for p in _NEEDS_OPS if v.pkg(p)]
        lite = dist == "mmcv" and ver.split(".")[0] == "1"
        why = f" ({', '.join(users)} needs them)" if users else ""
        t = v.torch
        index = (f"https://download.openmmlab.com/mmcv/dist/{t.variant}/torch{'.'.join(t.base.split('.')[:2])}.0/"
                 "index.html" if t and t.variant else "the OpenMMLab index for this torch and CUDA")
        fix = (f"pip uninstall -y mmcv && pip install mmcv-full -f {index}" if lite else
               "pip install -U openmim && mim install mmcv (a build with ops for this torch and CUDA), or rebuild it with "
               "MMCV_WITH_OPS=1 FORCE_CUDA=1 pip install --no-build-isolation mmcv")
        out.append(error(
            "ext-missing-ops",
            f"{dist} {ver} has no compiled ops{' (the lite package)' if lite else ''}{why}: 'ModuleNotFoundError: No "
            "module named 'mmcv._ext''",
            fix,
        ))
    return out


CHECKS = (check_framework_wheels, check_pin_glibc, check_windows_binary, check_compiled_ops)
