"""Compiled GPU extensions: the kernels and CUDA sonames of each ``.so``, read from the files, bounded."""

from __future__ import annotations

import glob
import json
import os
import re
import time
from typing import Any

from ..fatbin import cxx11_abi, dynamic_entries, read_fatbin
from . import loader
from .commands import read_text

# Distributions that ship CUDA code compiled against torch (or their own CUDA): flash-attn, xformers, …
EXTENSION_DISTS = (
    "flash-attn", "flash-attn-3", "xformers", "bitsandbytes", "mamba-ssm", "causal-conv1d", "apex", "deepspeed",
    "vllm", "onnxruntime-gpu", "transformer-engine", "transformer-engine-torch", "auto-gptq", "exllamav2",
    "torch-scatter", "torch-sparse", "torch-cluster", "natten", "sageattention", "liger-kernel", "fbgemm-gpu",
    # libraries outside torch's ecosystem that bring CUDA code of their own (libggml-cuda.so, mmcv._ext, …)
    "llama-cpp-python", "onnxruntime-genai-cuda", "mmcv", "mmcv-full", "ctranslate2", "faiss-gpu", "cupy-cuda11x",
    "cupy-cuda12x", "paddlepaddle-gpu", "torch-tensorrt", "spconv-cu118", "spconv-cu120", "spconv-cu121",
)
# Any other distribution whose name says it is a GPU build (or a package of kernels: sgl-kernel) is read too (the NVIDIA libraries themselves are not:
# they are what the extensions load, not extensions; nor are the frameworks, which have records of their own)
_GPU_NAME = re.compile(r"^(?!nvidia-|tensorflow|tf-|jax)[a-z0-9.-]*((-gpu|-cuda|-cu\d{2,3}|-cuda\d+x?)(-|$)|-kernels?$)")
MAX_FILES_PER_DIST = 64
MAX_FILES = 256
BUDGET_S = 2.0
# Sonames worth recording: CUDA's libraries and torch's (a torch extension links libc10/libtorch*).
_NEEDED = re.compile(r"^lib(cudart|cublas|cublasLt|cudnn|cufft|curand|cusparse|cusolver|nccl|nvrtc|nvJitLink|"
                     r"cupti|cuda|c10|c10_cuda|torch|torch_cuda|torch_cpu|torch_python)\.so")
# Of those, the CUDA toolkit's and cuDNN's (not the driver's libcuda, not torch's own): where the loader finds
# them is recorded (``resolved``), and where else they lie when it finds none (``elsewhere``).
_CUDA_LIB = re.compile(r"^lib(cudart|cublas|cublasLt|cudnn(_[a-z_]+)?|cufft|curand|cusparse|cusolver|nccl|nvrtc|"
                       r"nvJitLink|cupti)\.so")
_REQ_TORCH = re.compile(r"^Requires-Dist:[ \t]*torch(?![\w-])[ \t]*(\(?[^;\n]*?\)?)[ \t]*(?:;.*)?$", re.M | re.I)
# what else a probe need not open: the frameworks, the NVIDIA libraries, pure-Python neighbours of torch
_SKIP = re.compile(r"^(nvidia-|torch$|torchvision$|torchaudio$|tensorflow|tf-|jax|triton$|pytorch-triton)")


def _torch_extensions(dists: dict[str, tuple[str, str, str]], known: set[str], end: float) -> list[str]:
    """Other distributions whose METADATA requires torch itself: a package that ships compiled code against torch
    (lmdeploy, sgl-kernel, gsplat, …) is one of them; those without a shared library are dropped later."""
    out = []
    for n in sorted(dists):
        if n in known or _SKIP.match(n) or time.monotonic() > end:
            continue
        loc, _ver, meta = dists[n]
        head = read_text(os.path.join(loc, meta, "METADATA"), 1 << 14) or ""
        if _REQ_TORCH.search(head.split("\n\n", 1)[0]):
            out.append(n)
    return out


def probe_extensions(dists: dict[str, tuple[str, str, str]], budget_s: float = BUDGET_S,
                     where: LoaderView | None = None) -> dict[str, Any]:
    """``{dist: {version, requires_torch, files: [{file, sass, ptx, ptx_isa, needed}], truncated}}``."""
    end = time.monotonic() + budget_s
    out: dict[str, Any] = {}
    total = 0
    where = where or LoaderView(sorted({d[0] for d in dists.values()}))
    named = list(EXTENSION_DISTS) + sorted(n for n in dists if n not in EXTENSION_DISTS and _GPU_NAME.match(n))
    others = _torch_extensions(dists, set(named), time.monotonic() + budget_s / 4)
    for name in named + others:
        if name not in dists:
            continue
        loc, ver, meta = dists[name]
        e: dict[str, Any] = {"version": ver}
        md = read_text(os.path.join(loc, meta, "METADATA"), 1 << 16) or ""
        m = _REQ_TORCH.search(md)
        if m:
            e["requires_torch"] = m.group(1).strip("() ") or "any"
        files: list[dict[str, Any]] = []
        for rel in _shared_objects(loc, meta):
            if total >= MAX_FILES or len(files) >= MAX_FILES_PER_DIST or time.monotonic() > end:
                e["truncated"] = True
                break
            total += 1
            files.append(_library(loc, rel, where, e))
        e["files"] = files
        built = _built_for(loc, name)
        if built:
            e["built_for"] = built
        if files or name not in others:  # (a package that only requires torch and ships no library: not one)
            out[name] = e
    return out


def _library(loc: str, rel: str, where: LoaderView, e: dict[str, Any] | None) -> dict[str, Any]:
    """One shared library of a distribution: its fat binary and loader record (a Windows .dll: its name only); with
    ``e``, the first torch-linked one also sets the distribution's C++ ABI (``e["cxx11_abi"]``)."""
    path = os.path.join(loc, rel)
    one: dict[str, Any] = {"file": rel}
    if rel.endswith(".dll"):
        return one
    try:
        one.update(read_fatbin(path))
        one.update(library_record(path, where))
        if e is not None and "libc10.so" in one.get("needed", ()) and "cxx11_abi" not in e:
            abi = cxx11_abi(path)
            if abi is not None:
                e["cxx11_abi"] = abi
    except (OSError, ValueError, IndexError) as exc:  # struct.error is a ValueError
        one["error"] = f"{type(exc).__name__}: {exc}"
    return one


# A package's own record of the torch it was built for: xformers/cpp_lib.json {"version": {"torch": "2.6.0+cu124",
# "cuda": 1204}} is what xformers' loader compares with torch.__version__ and torch.version.cuda.
BUILD_RECORDS = {"xformers": "xformers/cpp_lib.json"}


def _built_for(loc: str, name: str) -> dict[str, str] | None:
    rel = BUILD_RECORDS.get(name)
    text = read_text(os.path.join(loc, rel), 1 << 16) if rel else None
    try:
        ver = json.loads(text)["version"] if text else None
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(ver, dict) or not isinstance(ver.get("torch"), str):
        return None
    out = {"torch": ver["torch"]}
    cuda = ver.get("cuda")
    if isinstance(cuda, int) and not isinstance(cuda, bool) and cuda > 0:  # major*100 + minor: 1204 -> "12.4"
        out["cuda"] = f"{cuda // 100}.{cuda % 100}"
    return out


# A framework's own CUDA libraries, whose sonames the loader resolves like an extension's (torch 1.12's cu113
# wheels found cuDNN through RUNPATH $ORIGIN, after LD_LIBRARY_PATH; torch 2.x uses RPATH, searched before it).
FRAMEWORK_LIBS = {"torch": ("torch/lib/libtorch_cuda*.so",)}


def probe_framework_libs(dists: dict[str, tuple[str, str, str]], where: LoaderView) -> dict[str, Any]:
    """``{framework: [{file, needed, rpath|runpath, resolved, elsewhere}]}`` for FRAMEWORK_LIBS (its arch list too,
    without importing it: torch.cuda.get_arch_list())."""
    out: dict[str, Any] = {}
    for fw, patterns in FRAMEWORK_LIBS.items():
        if fw not in dists:
            continue
        loc = dists[fw][0]
        files = [_library(loc, os.path.relpath(path, loc), where, None)
                 for pat in patterns for path in sorted(glob.glob(os.path.join(loc, pat)))]
        if files:
            out[fw] = files
    return out


class LoaderView:
    """What the loader needs to be asked, read once per probe (ld.so.cache, LD_LIBRARY_PATH, …)."""

    def __init__(self, site_dirs: list[str], environ: dict[str, str] | None = None,
                 cache: list[tuple[str, str]] | None = None, defaults: tuple[str, ...] = loader.DEFAULT_DIRS,
                 unsearched: list[str] | None = None):
        self.environ = dict(os.environ if environ is None else environ)
        self.cache = loader.cache_list() if cache is None else cache
        self.defaults = defaults
        self.unsearched = loader.unsearched_dirs(site_dirs, self.environ) if unsearched is None else unsearched


def library_record(path: str, where: LoaderView) -> dict[str, Any]:
    """``needed`` (CUDA and torch sonames of DT_NEEDED), ``rpath``/``runpath`` when set, ``resolved`` {soname: the
    file ld.so opens for it from this library, or null} for the CUDA ones, ``elsewhere`` {soname: [copies off the
    loader's path]} for those it cannot find."""
    dyn = dynamic_entries(path)
    rec: dict[str, Any] = {"needed": [n for n in dyn["needed"] if _NEEDED.match(n)]}
    for key in ("rpath", "runpath"):
        if dyn[key]:
            rec[key] = dyn[key]
    cuda = [n for n in dyn["needed"] if _CUDA_LIB.match(n)]
    if not cuda:
        return rec
    resolved: dict[str, Any] = {}
    elsewhere: dict[str, list[str]] = {}
    for name in cuda:
        hit = loader.resolve(name, where.environ, where.cache, where.defaults, rpath=dyn["rpath"], runpath=dyn["runpath"],
                             origin=os.path.dirname(os.path.abspath(path)))
        resolved[name] = {k: hit[k] for k in ("path", "from", "version", "own", "own_version") if hit.get(k)} if hit else None
        if hit is None:
            copies = loader.found_elsewhere(name, where.unsearched)
            if copies:
                elsewhere[name] = copies
    rec["resolved"] = resolved
    if elsewhere:
        rec["elsewhere"] = elsewhere
    return rec


def _shared_objects(loc: str, meta: str) -> list[str]:
    """``*.so`` paths (relative to ``loc``) the distribution's RECORD lists, sorted; ``*.dll`` too (a Windows
    build's libraries: that they exist is the fact, their contents are not read)."""
    text = read_text(os.path.join(loc, meta, "RECORD"), 8 << 20)
    if text is None:
        return []
    rels = {line.split(",", 1)[0] for line in text.splitlines()}
    return sorted(r for r in rels if (r.endswith((".so", ".dll")) or ".so." in os.path.basename(r)) and not r.startswith(".."))
