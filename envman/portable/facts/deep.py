"""``envman doctor --deep``: import the framework in a child process with a timeout (a hang is recorded)."""

from __future__ import annotations

import json
from typing import Any

from .commands import run_command

MARK = "ENVMAN-DEEP:"
TORCH_SCRIPT = r"""
import json, sys, warnings
out = {}
try:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import torch
        out["version"] = torch.__version__
        out["cuda"] = torch.version.cuda
        abi = getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", None)  # the C++ ABI extensions must be built with
        if isinstance(abi, bool):
            out["cxx11_abi"] = abi
        try:
            out["arch_list"] = list(torch.cuda.get_arch_list())
        except Exception as e:
            out["arch_error"] = repr(e)
        try:
            v = torch.backends.cudnn.version()
            if v:
                out["cudnn"] = "%d.%d.%d" % (v // 10000, v // 100 % 100, v % 100) if v >= 90000 else \
                    "%d.%d.%d" % (v // 1000, v // 100 % 10, v % 100)
        except Exception as e:
            out["cudnn_error"] = repr(e)
        out["cuda_available"] = bool(torch.cuda.is_available())
        if out["cuda_available"]:
            out["device_count"] = torch.cuda.device_count()
            try:
                x = torch.arange(1024, device="cuda", dtype=torch.float32)
                s = float((x * 2).sum().item())
                torch.cuda.synchronize()
                out["op"] = "ok" if s == 1023 * 1024 else "wrong result %r" % s
            except Exception as e:
                out["op_error"] = "%s: %s" % (type(e).__name__, e)
            try:
                out["nccl"] = ".".join(str(p) for p in torch.cuda.nccl.version())
            except Exception:
                pass
    out["warnings"] = [str(w.message) for w in caught][:10]
except BaseException as e:
    import traceback
    out["error"] = "".join(traceback.format_exception_only(type(e), e)).strip()
print("ENVMAN-DEEP:" + json.dumps(out))
"""


def probe_deep(python: str, timeout: float = 120.0) -> dict[str, Any]:
    """{"torch": {...}} from importing torch under ``python``; {"error": ...} when the child died."""
    ran = run_command([python, "-c", TORCH_SCRIPT], timeout)
    line = next((ln for ln in ran.out.splitlines() if ln.startswith(MARK)), None)
    if line is None:
        why = ran.error or (ran.text.strip().splitlines() or [f"exit status {ran.rc}"])[-1]
        return {"error": f"{python} -c 'import torch' died: {why}"}
    try:
        return {"torch": json.loads(line[len(MARK):])}
    except ValueError:
        return {"error": "unreadable output from the torch probe"}


def merge_deep(facts: dict[str, Any], deep: dict[str, Any]) -> None:
    """Fold what torch reported about itself into facts.torch (it outranks what files said)."""
    facts["deep"] = deep
    t = deep.get("torch") or {}
    if "error" in t or not isinstance(facts.get("torch"), dict):
        return
    if t.get("arch_list"):
        facts["torch"]["arch_list"] = t["arch_list"]
    if isinstance(t.get("cxx11_abi"), bool):
        facts["torch"]["cxx11_abi"] = t["cxx11_abi"]
    if t.get("cudnn"):
        facts["torch"].update(cudnn=t["cudnn"], cudnn_source="loaded")
