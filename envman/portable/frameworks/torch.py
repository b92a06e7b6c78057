"""PyTorch in the smoke program: ``observe_torch`` records; the checks on its observations are pure."""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Callable, Mapping
from typing import Any, Optional

from ..versions import major_minor, split_local, vt
from .base import (
    Installed,
    Plugin,
    check,
    cuda_variant,
    device_checks,
    error,
    import_observed,
    release_matches,
    skip,
)


def torch_variant(version: object, cuda: object) -> str:
    """The variant from the local version (2.14.1+cu130), else from the CUDA torch was built with."""
    local = split_local(version)[1]
    if local and re.match(r"(cu\d+|cpu|rocm[\d.]+|xpu)\Z", local):
        return local
    return cuda_variant(cuda)


def cudnn_number(version: object) -> int:
    """'9.24.0.43' -> 92400, '8.9.7' -> 8907: the number torch.backends.cudnn.version() returns."""
    r = vt(version) + (0, 0, 0)
    major, minor, patch = r[0], r[1], r[2]
    return major * 10000 + minor * 100 + patch if major >= 9 else major * 1000 + minor * 100 + patch


def cudnn_text(number: int | str) -> str:
    """92400 -> '9.24.0'; 8907 -> '8.9.7'."""
    return _unpacked(int(number), int(number) >= 90000)


def _unpacked(n: int, wide: bool) -> str:
    """major*10000 + minor*100 + patch (``wide``), else major*1000 + minor*100 + patch, as text."""
    m = 10000 if wide else 1000
    return "%d.%d.%d" % (n // m, n % m // 100, n % 100)


def nccl_text(value: int | tuple[int, ...] | list[int] | None) -> str | None:
    """torch.cuda.nccl.version(): a tuple (2, 30, 7) in recent torch, an int in older (2708, 21805)."""
    if value is None:
        return None
    if isinstance(value, (tuple, list)):
        return ".".join(str(int(p)) for p in value[:3])
    return _unpacked(int(value), int(value) >= 10000)  # NCCL >= 2.9: the wide packing


def evaluate_torch(expect: dict[str, Any], obs: dict[str, Any]) -> list[dict[str, Any]]:
    fw = expect["framework"]
    if obs.get("import_error"):
        return [check("framework", False, "torch " + fw["version"], None,
                      "torch does not import: " + obs["import_error"])]
    out = []
    version, cuda = obs.get("version"), obs.get("cuda")
    want = split_local(fw["version"])[0]
    out.append(check("framework version", split_local(version)[0] == want, fw["version"], version))
    variant = torch_variant(version, cuda)
    out.append(check("framework variant", variant == fw["variant"], fw["variant"], variant,
                     "from the version's local part" if split_local(version)[1] else "from torch.version.cuda"))
    if expect["cuda"] is not None or cuda is not None:
        ok = cuda is not None and expect["cuda"] is not None and release_matches(expect["cuda"], cuda)
        out.append(check("torch.version.cuda", ok, expect["cuda"] or "none (a CPU build)", cuda))
    if expect["cudnn"]:
        n = obs.get("cudnn")
        want_n = cudnn_number(expect["cudnn"])
        why = "" if n is not None else "torch.backends.cudnn.version() is None" + (
            ": " + obs["cudnn_error"] if obs.get("cudnn_error") else " (cuDNN not found)")
        out.append(check("cudnn", n == want_n, "%s (%d)" % (expect["cudnn"], want_n),
                         None if n is None else "%s (%d)" % (cudnn_text(n), n), why))
    if expect["nccl"]:
        got = obs.get("nccl")
        if got is None and obs.get("nccl_error") and not obs.get("gpu_visible"):
            out.append(skip("nccl", "NCCL version not readable without a GPU: " + obs["nccl_error"]))
        else:
            out.append(check("nccl", got is not None and release_matches(expect["nccl"], got) and
                             len(vt(got)) >= min(3, len(vt(expect["nccl"]))), expect["nccl"], got,
                             obs.get("nccl_error") or ""))
    if expect["arch_list"]:
        got = obs.get("arch_list") or []
        missing = [a for a in expect["arch_list"] if a not in got]
        extra = [a for a in got if a not in expect["arch_list"]]
        out.append(check("arch list", not missing, " ".join(expect["arch_list"]), " ".join(got),
                         ("missing " + " ".join(missing)) if missing else
                         ("also has " + " ".join(extra)) if extra else "equal"))
    return out


def evaluate_torch_gpu(expect: dict[str, Any], obs: dict[str, Any]) -> list[dict[str, Any]]:
    if obs.get("import_error"):
        return []
    out = []
    if not obs.get("cuda_available"):
        why = obs.get("cuda_error") or "torch.cuda.is_available() is False"
        return [check("cuda available", False, True, False,
                      "a GPU is visible (%s) but torch cannot use it (%s): this stack would silently run on the "
                      "CPU" % (obs.get("gpu_evidence", "?"), why), gpu=True)]
    out.append(check("cuda available", True, True, True, "%d device(s)" % obs.get("device_count", 0), gpu=True))
    out += device_checks(obs.get("devices", []), obs.get("arch_list") or [], obs.get("ops", []),
                         (("matmul+backward", "matmul"), ("cudnn conv fwd+bwd", "conv")))
    nccl: Any = obs.get("nccl_gpu")  # a dict, or None when torch did not get that far
    if expect["nccl"] or nccl is not None:
        ok = bool(nccl) and nccl.get("available") and nccl.get("version") is not None
        out.append(check("nccl present", ok, expect["nccl"] or "present", nccl and nccl.get("version"),
                         (nccl or {}).get("error") or "", gpu=True))
    return out


def _rel_err(torch: Any, got: Any, ref: Any) -> float:
    got, ref = got.detach().float().cpu(), ref.detach().float().cpu()
    return float((got - ref).norm() / ref.norm().clamp_min(1e-12))


def _torch_ops(torch: Any, dev: Any) -> dict[str, Any]:
    res: dict[str, Any] = {}
    g = torch.Generator().manual_seed(0)
    try:  # matmul + backward: d(sum(x @ w))/dx = ones @ w^T
        x = torch.randn(512, 512, generator=g).to(dev).requires_grad_()
        w = torch.randn(512, 512, generator=g).to(dev).requires_grad_()
        (x @ w).sum().backward()
        torch.cuda.synchronize(dev)
        ref = torch.ones(512, 512) @ w.detach().cpu().t()
        res["matmul"] = {"rel_err": _rel_err(torch, x.grad, ref)}
    except Exception as exc:
        res["matmul"] = {"error": error(exc)}
    tf32 = torch.backends.cudnn.allow_tf32
    try:  # cuDNN conv forward + backward, compared with the CPU (TF32 off: compare fp32 with fp32)
        torch.backends.cudnn.allow_tf32 = False
        conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        xc = torch.randn(4, 3, 32, 32, generator=g)
        ref = conv(xc)
        conv_d = torch.nn.Conv2d(3, 8, 3, padding=1).to(dev)
        conv_d.load_state_dict(conv.state_dict())
        xd = xc.to(dev).requires_grad_()
        yd = conv_d(xd)
        yd.sum().backward()
        torch.cuda.synchronize(dev)
        ok_grad = xd.grad is not None and conv_d.weight.grad is not None and bool(torch.isfinite(xd.grad).all())
        res["conv"] = {"rel_err": _rel_err(torch, yd, ref), "detail": "cudnn %s" % torch.backends.cudnn.version()} \
            if ok_grad else {"error": "backward produced no finite gradients"}
    except Exception as exc:
        res["conv"] = {"error": error(exc)}
    finally:
        torch.backends.cudnn.allow_tf32 = tf32
    try:
        a = torch.randn(256, 256, generator=g).bfloat16()
        b = torch.randn(256, 256, generator=g).bfloat16()
        c = (a.to(dev) @ b.to(dev))
        torch.cuda.synchronize(dev)
        res["bf16"] = {"rel_err": _rel_err(torch, c, a.float() @ b.float())}
    except Exception as exc:
        res["bf16"] = {"error": error(exc)}
    return res


def observe_torch(gpu_visible: bool, gpu_evidence: str) -> dict[str, Any]:
    obs: dict[str, Any] = {"gpu_visible": gpu_visible, "gpu_evidence": gpu_evidence}
    torch = import_observed("torch", obs)
    if torch is None:
        return obs
    obs["version"] = str(torch.__version__)
    obs["cuda"] = getattr(torch.version, "cuda", None)
    try:
        obs["cudnn"] = torch.backends.cudnn.version()
    except Exception as exc:
        obs["cudnn"], obs["cudnn_error"] = None, error(exc)
    try:
        obs["nccl"] = nccl_text(torch.cuda.nccl.version())
    except Exception as exc:
        obs["nccl"], obs["nccl_error"] = None, error(exc)
    try:
        obs["cuda_available"] = bool(torch.cuda.is_available())
    except Exception as exc:
        obs["cuda_available"], obs["cuda_error"] = False, error(exc)
    # get_arch_list() is empty without a usable device; the compiled-in flags are not.
    arch = torch.cuda.get_arch_list() if obs["cuda_available"] else []
    if not arch and hasattr(torch._C, "_cuda_getArchFlags"):
        flags = torch._C._cuda_getArchFlags()
        arch = flags.split() if flags else []
    obs["arch_list"] = list(arch)
    if not (gpu_visible and obs["cuda_available"]):
        return obs
    obs["device_count"] = torch.cuda.device_count()
    obs["devices"], obs["ops"] = [], []
    seen = set()
    for i in range(obs["device_count"]):
        cc = list(torch.cuda.get_device_capability(i))
        obs["devices"].append({"index": i, "name": torch.cuda.get_device_name(i), "capability": cc})
        if tuple(cc) not in seen:  # one set of ops per distinct capability
            seen.add(tuple(cc))
            obs["ops"].append(dict(_torch_ops(torch, torch.device("cuda", i)), capability=cc, device=i))
    try:
        import torch.distributed as dist

        obs["nccl_gpu"] = {"available": bool(dist.is_available() and dist.is_nccl_available()),
                           "version": nccl_text(torch.cuda.nccl.version())}
    except Exception as exc:
        obs["nccl_gpu"] = {"available": False, "version": None, "error": error(exc)}
    return obs


# --- the doctor's side: what the package probe records (docs/facts.md `torch`) and how the checks read it ----

def _assignments(text: str) -> dict[str, Any]:
    """Top-level ``name = literal`` / ``name: T = literal`` lines of a generated module."""
    out = {}
    for m in re.finditer(r"^(\w+)\s*(?::[^=\n]+)?=\s*(.+)$", text, re.M):
        try:
            out[m.group(1)] = ast.literal_eval(m.group(2).strip())
        except (ValueError, SyntaxError):
            continue
    return out


def _wheel_version(dists: Mapping[str, Any], pattern: str) -> Optional[str]:
    rx = re.compile(pattern + "$")
    return next((d[1] for n, d in sorted(dists.items()) if rx.match(n)), None)


_REQUIRES = re.compile(r"^Requires-Dist:[ \t]*((?:nvidia|cuda|triton|pytorch-triton)[\w.-]*)(\[[^\]]*\])?[ \t]*"
                       r"\(?([^;\n)]*)\)?[ \t]*(?:;(.*))?$", re.M | re.I)


def _pinned_wheels(metadata: str) -> dict[str, str]:
    """{name: specifier} of the CUDA wheels (and Triton) torch's METADATA requires on every install, extras' ones
    left out: what a --no-deps install or an installer that ignored them lacks."""
    out = {}
    for m in _REQUIRES.finditer(metadata):
        if "extra" in (m.group(4) or ""):
            continue
        out[re.sub(r"[-_.]+", "-", m.group(1)).lower()] = m.group(3).strip()
    return out


def probe_torch(dists: Mapping[str, Any], read: Callable[[str, int], Optional[str]]) -> Optional[dict[str, Any]]:
    """torch/version.py (a generated literal: no import) and the cuDNN/NCCL wheels of its CUDA major."""
    if "torch" not in dists:
        return None
    loc, ver, _ = dists["torch"]
    t: dict[str, Any] = {"version": ver, "location": os.path.join(loc, "torch")}
    vals = _assignments(read(os.path.join(loc, "torch", "version.py"), 1 << 16) or "")
    if isinstance(vals.get("__version__"), str):
        t["version"] = vals["__version__"]
    t.update({k: vals[k] for k in ("cuda", "hip", "git_version", "debug") if k in vals})
    abi = _cxx11_abi(loc, read)
    if abi is not None:
        t["cxx11_abi"] = abi
    req = _pinned_wheels(read(os.path.join(loc, dists["torch"][2], "METADATA"), 1 << 18) or "")
    if req:
        t["requires"] = req
        norm = {re.sub(r"[-_.]+", "-", n).lower(): n for n in req}
        t["apart"] = sorted(n for n in norm if n in dists and os.path.realpath(dists[n][0]) != os.path.realpath(loc))
    cm = str(t.get("cuda") or "").split(".")[0]
    if cm:
        cudnn = _wheel_version(dists, rf"nvidia-cudnn(-cu{cm})?")
        if cudnn:
            t["cudnn"], t["cudnn_source"] = cudnn, "wheel"
        nccl = _wheel_version(dists, rf"nvidia-nccl(-cu{cm})?")
        if nccl:
            t["nccl"] = nccl
    return t


def _cxx11_abi(loc: str, read: Callable[[str, int], Optional[str]]) -> Optional[bool]:
    """The C++ ABI torch was built with, without importing it: the flag its CMake config hands extensions (torch
    before 2.7 wrote -D_GLIBCXX_USE_CXX11_ABI=0 there), else the names libc10.so exports (std::__cxx11 or the old
    Ss string; a small library: about a millisecond)."""
    cfg = read(os.path.join(loc, "torch", "share", "cmake", "Torch", "TorchConfig.cmake"), 1 << 16) or ""
    m = re.search(r"_GLIBCXX_USE_CXX11_ABI=([01])", cfg)
    if m:
        return m.group(1) == "1"
    from ..fatbin import cxx11_abi

    try:
        return cxx11_abi(os.path.join(loc, "torch", "lib", "libc10.so"))
    except (OSError, ValueError):
        return None


def _text(x: object) -> Optional[str]:
    if x is None or isinstance(x, (dict, list)):
        return None
    s = str(x).strip()
    return s or None


def installed_torch(facts: Mapping[str, Any]) -> Optional[Installed]:
    t = facts.get("torch")
    t = t if isinstance(t, dict) else {}
    version = _text(t.get("version"))
    if not version:
        return None
    cuda = _text(t.get("cuda"))
    cuda = major_minor(cuda)
    label = split_local(version)[1]
    variant = label or _text(t.get("variant")) or ("rocm" if _text(t.get("hip")) else cuda_variant(cuda))
    conda = facts.get("conda")
    cpuonly = isinstance(conda, dict) and conda.get("cpuonly") is True
    arch = t.get("arch_list")
    raw_req, raw_apart = t.get("requires"), t.get("apart")
    req: dict[str, Any] = raw_req if isinstance(raw_req, dict) else {}
    if not req and cuda is not None:
        req = {"triton": ""}  # not recorded (an older facts file): every Linux CUDA wheel of torch >= 2.0 requires it
    apart: list[Any] = raw_apart if isinstance(raw_apart, list) else []
    return Installed(
        "torch", version, variant, cuda, gpu=cuda is not None,
        requires=tuple(sorted((str(k), str(v)) for k, v in req.items())), apart=tuple(str(a) for a in apart),
        cpu_only=cuda is None and not str(variant).startswith(("rocm", "xpu")),
        arch_list=tuple(str(a) for a in arch) if isinstance(arch, list) else (),
        arch_source="torch.cuda.get_arch_list()", cudnn=_text(t.get("cudnn")), cudnn_loaded=t.get("cudnn_source") == "loaded",
        cpu_undo="conda remove cpuonly, then" if cpuonly else None,
        cpu_why="conda's cpuonly package selects it" if cpuonly else "",
    )


PLUGIN = Plugin("torch", observe_torch, evaluate_torch, evaluate_torch_gpu, installed_torch, probe_torch, ("torch",))
