"""What only importing the framework tells (``envman doctor --deep``): is CUDA usable, does a GPU op run."""

from __future__ import annotations

from .findings import Finding, error
from .knowledge import Knowledge
from .view import FactsView, as_dict, as_list, as_str


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    # A traceback's last line names the exception; a warning's first line says what is wrong.
    return lines[-1] if lines and lines[0].startswith("Traceback") else (lines[0] if lines else "")


def check_deep(v: FactsView, k: Knowledge) -> list[Finding]:
    deep = as_dict(v.f.get("deep"))
    t = as_dict(deep.get("torch"))
    if not t:
        return []
    if as_str(t.get("error")):
        return [error("deep-import", f"import torch fails: {_first_line(t['error'])}",
                      "reinstall torch in this environment (pip install --force-reinstall torch==<version> "
                      "--index-url <the index it came from>)")]
    out = []
    if v.gpus and v.torch and v.torch.is_cuda and t.get("cuda_available") is False:
        warned = [_first_line(w) for w in as_list(t.get("warnings")) if str(w).strip()]
        out.append(error(
            "deep-cuda-unavailable",
            f"torch.cuda.is_available() is False on a machine with {v.gpu_summary()}"
            + (f": {warned[0]}" if warned else ""),
            "fix the errors above; python -c 'import torch; torch.cuda.init()' prints torch's own reason",
        ))
    if as_str(t.get("op_error")):
        out.append(error(
            "deep-gpu-op",
            f"a tiny GPU op failed on {v.torch.label if v.torch else 'torch'}: {_first_line(t['op_error'])}",
            "see the arch and driver findings; rerun with CUDA_LAUNCH_BLOCKING=1 for the failing kernel",
        ))
    return out


CHECKS = (check_deep,)
