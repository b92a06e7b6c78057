"""What every framework plug-in of the smoke program shares: the check records, version comparison, the
tolerances of GPU-against-CPU comparisons. Standard library only, Python 3.8+ (this package is copied whole
into images as envman_portable)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, NamedTuple

# Relative (Frobenius) error allowed against the CPU result: fp32 differs only by summation order;
# bf16 keeps 8 bits of mantissa.
TOL_FP32 = 1e-3
TOL_BF16 = 2e-2


class Plugin(NamedTuple):
    """One framework in the smoke program, found by the expected stack's ``framework.name``."""

    name: str
    # (gpu_visible, gpu_evidence) -> observations: imports the framework, records errors, never raises
    observe: Callable[[bool, str], dict[str, Any]]
    # PURE (expect, observations) -> checks that need no GPU
    evaluate: Callable[[dict[str, Any], dict[str, Any]], list[dict[str, Any]]]
    # PURE (expect, observations) -> checks run only when a GPU is visible
    evaluate_gpu: Callable[[dict[str, Any], dict[str, Any]], list[dict[str, Any]]]


def check(name: str, ok: object, expected: object = None, observed: object = None, detail: str = "",
          gpu: bool = False) -> dict[str, Any]:
    return {"name": name, "status": "pass" if ok else "fail", "expected": expected, "observed": observed,
            "detail": detail, "gpu": gpu}


def skip(name: str, detail: str, gpu: bool = False) -> dict[str, Any]:
    return {"name": name, "status": "skip", "expected": None, "observed": None, "detail": detail, "gpu": gpu}


def release(text: object) -> tuple[int, ...]:
    """'2.14.1+cu130' -> (2, 14, 1); '13.0' -> (13, 0); None or junk -> ()."""
    if text is None:
        return ()
    m = re.match(r"\s*v?(\d+(?:\.\d+)*)", str(text))
    return tuple(int(p) for p in m.group(1).split(".")) if m else ()


def release_matches(expected: object, observed: object) -> bool:
    """Equal on the parts both give: TF reports cuDNN as '9', torch CUDA as '13.0'."""
    e, o = release(expected), release(observed)
    n = min(len(e), len(o))
    return n > 0 and e[:n] == o[:n]


def split_local(version: object) -> tuple[str, str | None]:
    public, _, local = str(version).partition("+")
    return public, (local or None)


def cuda_variant(cuda: object) -> str:
    """'13.0' -> 'cu130', '12.6' -> 'cu126', None -> 'cpu' (the wheel-index naming)."""
    r = release(cuda)
    return "cu%d%d" % (r[0], r[1]) if len(r) >= 2 else "cpu"


def op_check(name: str, result: dict[str, Any] | None, tol: float) -> dict[str, Any]:
    if not result:
        return check(name, False, None, None, "not run", gpu=True)
    if result.get("error"):
        return check(name, False, "runs", None, result["error"], gpu=True)
    err = result.get("rel_err")
    ok = err is not None and err <= tol
    return check(name, ok, "rel. error <= %g vs CPU" % tol, None if err is None else "%.2e" % err,
                 result.get("detail", ""), gpu=True)


def error(exc: BaseException) -> str:
    return ("%s: %s" % (type(exc).__name__, exc)).strip()[:500]


def import_observed(module: str, obs: dict[str, Any]) -> Any:
    """The framework's module, or None with ``obs["import_error"]`` set: whatever its import raises (a missing
    library, a broken build, SystemExit) is an observation of the environment, never fatal to the smoke test."""
    import importlib

    try:
        return importlib.import_module(module)
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        obs["import_error"] = error(exc)
        return None
