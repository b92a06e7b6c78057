"""What every framework plug-in shares: check records, version comparison, tolerances. Stdlib only."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, Optional, Tuple

from ..versions import arch_covers, split_local, vt

# Relative (Frobenius) error allowed against the CPU result: fp32 differs only by summation order;
# bf16 keeps 8 bits of mantissa.
TOL_FP32 = 1e-3
TOL_BF16 = 2e-2


class Installed(NamedTuple):
    """One installed framework as the doctor sees it, read from a facts dict (docs/facts.md) by its plug-in.
    The checks iterate these instead of naming torch or TensorFlow; the matrix (``Knowledge``) says the rest."""

    name: str  # the framework's matrix name: "torch"
    version: str  # as installed: "2.7.1+cu128", "2.15.1"
    variant: Optional[str]  # "cu128", "cpu", "rocm6.2"; None: not told (the matrix's GPU build is meant)
    cuda: Optional[str]  # "12.8", the CUDA it was built with; None: no CUDA, or not told
    gpu: Optional[bool]  # True: a CUDA build; False: it cannot use an NVIDIA GPU; None: not told
    cpu_only: bool = False  # a CPU-only build (ROCm/XPU builds are not: they use another accelerator)
    arch_list: Tuple[str, ...] = ()  # compiled-in archs when recorded ("sm_90", "compute_90"); (): the matrix's
    arch_source: str = "its build info"  # where a recorded arch list was read, for the verdict
    cudnn: Optional[str] = None  # the cuDNN it loads, when recorded
    cudnn_loaded: bool = False  # that cuDNN was read from the loaded library (--deep), not a wheel's version
    # what makes it a CPU-only build: the command that removes it, with the word that joins it to the install
    # that follows ("pip uninstall -y tensorflow-cpu &&", "conda remove cpuonly, then"), and why, in words for
    # the verdict ("conda's cpuonly package selects it")
    cpu_undo: Optional[str] = None
    cpu_why: str = ""
    # every kernel of the framework also carries PTX, so a GPU reached only through PTX JIT is a slow first
    # start, not a failure (TensorFlow); False: some kernels are SASS-only and fail there (torch)
    ptx_everywhere: bool = False
    # its wheels pin the NVIDIA libraries it was built with (torch); False: it loads what it finds and names
    # the sonames it needs (TensorFlow): then the doctor checks that they are there
    pins_cuda_wheels: bool = True
    needs_libs: Tuple[str, ...] = ()  # pins_cuda_wheels False: the CUDA library stems it opens (libcusolver)
    tag: str = ""  # the short name its own check ids start with ("tf" in tf-cuda-libs); "": its name
    # the wheels its own METADATA pins (Requires-Dist: nvidia-cudnn-cu12==9.1.0.70): ((name, specifier), …), and
    # those of them installed in another site-packages than the framework's (its RPATH does not reach them)
    requires: Tuple[Tuple[str, str], ...] = ()
    apart: Tuple[str, ...] = ()

    @property
    def base(self) -> str:
        return split_local(self.version)[0]

    @property
    def is_cuda(self) -> bool:
        return self.gpu is True and self.cuda is not None

    @property
    def label(self) -> str:
        """How verdicts name it, as its plug-in writes a build: 'torch 2.7.1+cu128', 'jax 0.7.2 (cuda13 plugin)'."""
        from . import label

        return label(self.name, self.version, self.variant)


def variant_label(name: str, version: str, variant: Optional[str]) -> str:
    """'torch 2.7.1+cu128' (the variant named even where the version has no local label); 'tensorflow 2.15.1'."""
    return f"{name} {split_local(version)[0]}+{variant}" if variant else f"{name} {version}"


class Plugin(NamedTuple):
    """One framework's plug-in: the smoke program's observer and checks, the doctor's probe and reader."""

    name: str
    # (gpu_visible, gpu_evidence) -> observations: imports the framework, records errors, never raises
    observe: Callable[[bool, str], dict[str, Any]]
    # PURE (expect, observations) -> checks that need no GPU
    evaluate: Callable[[dict[str, Any], dict[str, Any]], list[dict[str, Any]]]
    # PURE (expect, observations) -> checks run only when a GPU is visible
    evaluate_gpu: Callable[[dict[str, Any], dict[str, Any]], list[dict[str, Any]]]
    # PURE facts -> the installed framework (None: not installed), read from facts[name] and the rest
    installed: Callable[[Mapping[str, Any]], Optional[Installed]] = lambda facts: None
    # the probe, without importing anything: (distributions {name: (dir, version, dist-info)}, read(path, limit))
    # -> facts[name], or None when it is not installed
    probe: Callable[[Mapping[str, Any], Callable[[str, int], Optional[str]]], Optional[dict[str, Any]]] = lambda dists, read: None
    # pip names that install it (a project's `name==X` pin of one of them pins this framework)
    distributions: Tuple[str, ...] = ()
    # PURE (FactsView, Knowledge) -> findings: the doctor's checks about this framework alone (JAX: its four wheels
    # of one release, XLA's preallocation beside TensorFlow); everything generic reads ``installed``
    checks: Tuple[Callable[[Any, Any], list[Any]], ...] = ()
    # PURE (name, version, variant) -> how verdicts name a build of it (``variant_label``: 'torch 2.7.1+cu128')
    label: Callable[[str, str, Optional[str]], str] = variant_label


def check(name: str, ok: object, expected: object = None, observed: object = None, detail: str = "",
          gpu: bool = False) -> dict[str, Any]:
    return {"name": name, "status": "pass" if ok else "fail", "expected": expected, "observed": observed,
            "detail": detail, "gpu": gpu}


def skip(name: str, detail: str, gpu: bool = False) -> dict[str, Any]:
    return {"name": name, "status": "skip", "expected": None, "observed": None, "detail": detail, "gpu": gpu}


def release_matches(expected: object, observed: object) -> bool:
    """Equal on the parts both give: TF reports cuDNN as '9', torch CUDA as '13.0'."""
    e, o = vt(expected), vt(observed)
    n = min(len(e), len(o))
    return n > 0 and e[:n] == o[:n]


def cuda_variant(cuda: object) -> str:
    """'13.0' -> 'cu130', '12.6' -> 'cu126', None -> 'cpu' (the wheel-index naming)."""
    r = vt(cuda)
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


def device_checks(devices: list[dict[str, Any]], arch: list[str], ops: list[dict[str, Any]],
                  fp32: tuple[tuple[str, str], ...]) -> list[dict[str, Any]]:
    """Each GPU's capability against the arch list; each distinct capability's ops (``fp32``: (check name, op key))
    against the CPU, and its bf16 matmul from compute capability 8.0 on."""
    out = []
    for dev in devices:
        cc = dev.get("capability")
        if cc:
            ok, how = arch_covers(cc, arch)
            out.append(check("capability %s (%s)" % (".".join(map(str, cc)), dev.get("name", "?")), ok,
                             "covered by arch list", " ".join(arch), how, gpu=True))
    for op in ops:
        cc = tuple(op.get("capability") or (0, 0))
        tag = " on cc %d.%d" % cc
        out += [op_check(name + tag, op.get(key), TOL_FP32) for name, key in fp32]
        if cc >= (8, 0):
            out.append(op_check("bf16 matmul" + tag, op.get("bf16"), TOL_BF16))
        else:
            out.append(skip("bf16 matmul" + tag, "compute capability %d.%d has no native bf16" % cc, gpu=True))
    return out


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
