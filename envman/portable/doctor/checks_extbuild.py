"""Compiled torch extensions judged by what their own loader checks: release, CUDA build, C++ ABI."""

from __future__ import annotations

import re
from typing import Any

from ..frameworks.base import Installed
from ..versions import major_minor, split_local, vcmp
from .findings import Finding, error
from .knowledge import Knowledge
from .view import FactsView, as_dict, as_list, as_str

_TORCH_IN_LOCAL = re.compile(r"(?:torch|pt)(\d)\.?(\d{1,2})")
# +cu124torch2.4 / +cu12torch2.4cxx11abiFALSE / +cu118: the CUDA a wheel was built for (cu12: the major only)
_CUDA_IN_LOCAL = re.compile(r"^cu(\d{2,3})(?!\d)")
_ABI_IN_LOCAL = re.compile(r"cxx11abi(true|false)")


def _torch_wanted(e: dict[str, Any]) -> str | None:
    """The torch major.minor an extension wheel was built against: its METADATA pin (==X.Y.Z), its own build
    record, or the +cu123torch2.4 / +pt24 local version label."""
    req = as_str(e.get("requires_torch")) or ""
    m = re.fullmatch(r"==\s*([\d.]+)", req)
    if m:
        return major_minor(m.group(1))
    built = as_str(as_dict(e.get("built_for")).get("torch"))
    if built:
        return major_minor(split_local(built)[0])
    m = _TORCH_IN_LOCAL.search(_local(e))
    return f"{m.group(1)}.{m.group(2)}" if m else None


def _local(e: dict[str, Any]) -> str:
    return (as_str(e.get("version")) or "").partition("+")[2].lower()


def _ext_cuda(e: dict[str, Any]) -> str | None:
    """The CUDA an extension was built with: its build record, else its label (cu124 -> 12.4, cu12 -> 12), else the
    libcudart soname major its libraries ask for; None: not told, or a CPU build."""
    built = as_str(as_dict(e.get("built_for")).get("cuda"))
    if built:
        return built
    m = _CUDA_IN_LOCAL.match(_local(e))
    if m:
        d = m.group(1)
        return d if len(d) == 2 else f"{d[:-1]}.{d[-1]}"
    for f in as_list(e.get("files")):
        for so in as_list(as_dict(f).get("needed")):
            m = re.match(r"libcudart\.so\.(\d+)", str(so))
            if m:
                return m.group(1)
    return None


def _links_torch_cuda(e: dict[str, Any]) -> bool:
    """A C++ extension of a CUDA torch (its build record or label says so, or a library of it links libc10_cuda /
    libtorch_cuda): it cannot load beside a CPU torch. A package that brings its own CUDA and only uses torch from
    Python (onnxruntime-gpu, cupy, bitsandbytes' CPU fallback) can."""
    if as_str(as_dict(e.get("built_for")).get("cuda")) or (_TORCH_IN_LOCAL.search(_local(e)) and _CUDA_IN_LOCAL.match(_local(e))):
        return True
    return any(str(so).startswith(("libc10_cuda.so", "libtorch_cuda.so"))
               for f in as_list(e.get("files")) for so in as_list(as_dict(f).get("needed")))


def _ext_abi(e: dict[str, Any]) -> bool | None:
    if isinstance(e.get("cxx11_abi"), bool):
        return bool(e["cxx11_abi"])
    m = _ABI_IN_LOCAL.search(_local(e))
    return (m.group(1) == "true") if m else None


def _abi_word(flag: bool) -> str:
    return f"_GLIBCXX_USE_CXX11_ABI={int(flag)}"


def _reinstall(dist: str, ver: str) -> str:
    return (f"pip install --no-build-isolation --force-reinstall --no-deps {dist}=={ver.split('+')[0]} (builds it "
            f"against the installed torch)")


def check_ext_torch(v: FactsView, k: Knowledge) -> list[Finding]:
    """An extension its loader refuses beside this torch (release, CUDA/CPU build, C++ ABI); one finding each."""
    t = v.torch
    have = major_minor(t.base) if t else None
    if not t or not have:
        return []
    return [f for dist, e in sorted(as_dict(v.f.get("extensions")).items())
            if (f := _judge(v, k, t, str(dist), as_dict(e), have))]


def _judge(v: FactsView, k: Knowledge, t: Installed, dist: str, e: dict[str, Any], have: str) -> Finding | None:
    ver = as_str(e.get("version")) or "?"
    compares, same = k.loader(dist)
    want = _torch_wanted(e)
    if want is not None and vcmp(want, have) != 0 and not any(want in g and have in g for g in same):
        return error(
            "ext-torch-mismatch",
            f"{dist} {ver} was built for torch {want}, but {t.label} is installed: importing it fails with "
            f"'undefined symbol: _ZN3c10…' (torch's C++ ABI changes with every minor release)",
            f"{_reinstall(dist, ver)}, or go back to torch {want}",
        )
    ecuda = _ext_cuda(e)
    if ecuda and t.gpu is False and _links_torch_cuda(e):
        return error(
            "ext-torch-cpu",
            f"{dist} {ver} is a CUDA {ecuda} build, but {t.label} is a CPU-only build: its CUDA ops do not load "
            f"(xformers: 'xFormers can't load C++/CUDA extensions … you have {t.version}')",
            f"install torch's CUDA {ecuda} build ({t.base} from its cu{ecuda.replace('.', '')} index), then "
            f"{_reinstall(dist, ver)}",
        )
    built = as_str(as_dict(e.get("built_for")).get("torch"))
    label, have_label = split_local(built or "")[1], split_local(t.version)[1]
    if "cuda" in compares and t.cuda and ecuda and ("." in ecuda and vcmp(ecuda, t.cuda) != 0
                                                    or bool(label and have_label and label != have_label)):
        return error(
            "ext-torch-cuda-build",
            f"{dist} {ver} was built for torch {built or want or t.base} with CUDA {ecuda}, but {t.label} is the "
            f"CUDA {t.cuda} build: {dist} compares both and refuses to load its ops",
            f"install the {dist} {ver.split('+')[0]} built for torch {t.version} (from torch's own index: pip install "
            f"--force-reinstall --no-deps {dist}=={ver.split('+')[0]} --index-url "
            f"https://download.pytorch.org/whl/{t.variant or 'cu' + t.cuda.replace('.', '')}), or "
            f"{_reinstall(dist, ver)}",
        )
    mine, theirs = _ext_abi(e), as_dict(v.f.get("torch")).get("cxx11_abi")
    if mine is not None and isinstance(theirs, bool) and mine != theirs:
        return error(
            "ext-cxx11-abi",
            f"{dist} {ver} was built with {_abi_word(mine)}, {t.label} with {_abi_word(theirs)}: importing it fails "
            f"with 'undefined symbol: _ZN3c10…{'St7__cxx11' if mine else 'Ss'}…'",
            f"install the {dist} wheel built for cxx11abi{str(theirs).upper()}, or {_reinstall(dist, ver)}",
        )
    return None


CHECKS = (check_ext_torch,)
