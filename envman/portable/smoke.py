#!/usr/bin/env python3
"""envman smoke test: does this Python environment match its lock, and does its GPU stack work?

Part of the portable island, copied whole into every image envman builds (/opt/envman/kit/envman_portable,
the expected stack beside it as /opt/envman/stack.json) and runnable on a host (`envman smoke --host`):
``python -m envman_portable.smoke`` with the kit on the path. Standard library only, Python 3.8+.

Exit codes:  0  every check passed, GPU checks included (or the stack is CPU-only)
             1  a check failed (or --require-gpu and no GPU visible)
             6  every non-GPU check passed, but no GPU was visible: neither pass nor fail

The JSON report goes to stdout (anything the frameworks print meanwhile goes to stderr); a human summary
goes to stderr unless --json. The code is split into observe_* (imports, runs things, records what it saw or
the error) and evaluate_*/decide (pure: observations -> checks -> exit code), so the GPU logic is tested
with recorded observations on machines without a GPU.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
import traceback
from contextlib import contextmanager

from .versions import arch_covers, parse_arch

SCHEMA = 1
EXIT_PASS, EXIT_FAIL, EXIT_NO_GPU = 0, 1, 6
DEFAULT_EXPECT = "/opt/envman/stack.json"
NO_GPU_LINE = "GPU checks skipped: no GPU visible"
CPU_STACK_LINE = "GPU checks not applicable: the expected stack is CPU-only"
# Relative (Frobenius) error allowed against the CPU result: fp32 differs only by summation order;
# bf16 keeps 8 bits of mantissa.
TOL_FP32 = 1e-3
TOL_BF16 = 2e-2


# ============================================================================ pure: checks and versions
def check(name, ok, expected=None, observed=None, detail="", gpu=False):
    return {"name": name, "status": "pass" if ok else "fail", "expected": expected, "observed": observed,
            "detail": detail, "gpu": gpu}


def skip(name, detail, gpu=False):
    return {"name": name, "status": "skip", "expected": None, "observed": None, "detail": detail, "gpu": gpu}


def release(text):
    """'2.14.1+cu130' -> (2, 14, 1); '13.0' -> (13, 0); None or junk -> ()."""
    if text is None:
        return ()
    m = re.match(r"\s*v?(\d+(?:\.\d+)*)", str(text))
    return tuple(int(p) for p in m.group(1).split(".")) if m else ()


def release_matches(expected, observed):
    """Equal on the parts both give: TF reports cuDNN as '9', torch CUDA as '13.0'."""
    e, o = release(expected), release(observed)
    n = min(len(e), len(o))
    return n > 0 and e[:n] == o[:n]


def split_local(version):
    public, _, local = str(version).partition("+")
    return public, (local or None)


def cuda_variant(cuda):
    """'13.0' -> 'cu130', '12.6' -> 'cu126', None -> 'cpu' (the wheel-index naming)."""
    r = release(cuda)
    return "cu%d%d" % (r[0], r[1]) if len(r) >= 2 else "cpu"


def torch_variant(version, cuda):
    """The local version names the variant (2.14.1+cu130); PyPI's default wheels carry none, so the
    CUDA torch was built with decides."""
    local = split_local(version)[1]
    if local and re.match(r"(cu\d+|cpu|rocm[\d.]+|xpu)$", local):
        return local
    return cuda_variant(cuda)


def cudnn_number(version):
    """'9.24.0.43' -> 92400 (cuDNN >= 9: major*10000 + minor*100 + patch); '8.9.7' -> 8907 (cuDNN 8:
    major*1000 + minor*100 + patch), the form torch.backends.cudnn.version() returns."""
    r = release(version) + (0, 0, 0)
    major, minor, patch = r[0], r[1], r[2]
    return major * 10000 + minor * 100 + patch if major >= 9 else major * 1000 + minor * 100 + patch


def cudnn_text(number):
    """92400 -> '9.24.0'; 8907 -> '8.9.7'."""
    n = int(number)
    if n >= 90000:
        return "%d.%d.%d" % (n // 10000, n % 10000 // 100, n % 100)
    return "%d.%d.%d" % (n // 1000, n % 1000 // 100, n % 100)


def nccl_text(value):
    """torch.cuda.nccl.version(): a tuple (2, 30, 7) in recent torch, an int in older (2708, 21805)."""
    if value is None:
        return None
    if isinstance(value, (tuple, list)):
        return ".".join(str(int(p)) for p in value[:3])
    n = int(value)
    if n >= 10000:  # NCCL >= 2.9: major*10000 + minor*100 + patch
        return "%d.%d.%d" % (n // 10000, n % 10000 // 100, n % 100)
    return "%d.%d.%d" % (n // 1000, n % 1000 // 100, n % 100)


def gpu_visibility(dev_nodes, smi_gpus, nvidia_visible_devices=None):
    """Is a GPU visible to this process? Evidence: /dev/nvidiaN device nodes, or nvidia-smi listing a GPU
    (WSL2 has no device nodes). NVIDIA_VISIBLE_DEVICES alone is no evidence: CUDA base images set it to
    'all' even in containers started without GPUs. Returns (visible, evidence)."""
    nodes = sorted(n for n in dev_nodes if re.match(r"/dev/nvidia\d+$", n))
    evidence = []
    if nodes:
        evidence.append("device nodes " + " ".join(nodes))
    if smi_gpus:
        evidence.append("nvidia-smi lists %d GPU(s)" % smi_gpus)
    if evidence:
        return True, "; ".join(evidence)
    why = "no /dev/nvidia[0-9]* device nodes, nvidia-smi %s" % (
        "absent" if smi_gpus is None else "lists no GPU")
    if nvidia_visible_devices not in (None, "", "void", "none"):
        why += " (NVIDIA_VISIBLE_DEVICES=%s, but the container was not given GPUs)" % nvidia_visible_devices
    return False, why


# ============================================================================ pure: expectations
def load_expect(data):
    """Validate the expected-stack document (docs/smoke.md); raises ValueError naming every problem."""
    problems = []
    if not isinstance(data, dict):
        raise ValueError("expected a JSON object")
    schema = data.get("schema")
    if schema != SCHEMA:
        problems.append("schema: %r, this smoke script reads schema %d%s" % (
            schema, SCHEMA, " (written by a newer envman)" if isinstance(schema, int) and schema > SCHEMA else ""))
    fw = data.get("framework")
    if fw is not None:
        if not isinstance(fw, dict):
            problems.append("framework: must be an object or null")
        else:
            for k in ("name", "version", "variant"):
                if not isinstance(fw.get(k), str) or not fw.get(k):
                    problems.append("framework.%s: missing or not a string" % k)
    for k in ("cuda", "cudnn", "nccl", "lock_hash"):
        if data.get(k) is not None and not isinstance(data.get(k), str):
            problems.append("%s: must be a string or null" % k)
    if not isinstance(data.get("python"), str):
        problems.append("python: missing or not a string like '3.11'")
    arch = data.get("arch_list", [])
    if not isinstance(arch, list) or not all(isinstance(a, str) and parse_arch(a) for a in arch):
        problems.append("arch_list: must be a list like ['sm_80', 'sm_90', 'compute_90']")
    imports = data.get("imports", [])
    if not isinstance(imports, list) or not all(
            isinstance(i, (list, tuple)) and len(i) == 2 and isinstance(i[0], str) and (i[1] is None or isinstance(i[1], str))
            for i in imports):
        problems.append("imports: must be a list of [distribution, module or null] pairs")
    if problems:
        raise ValueError("; ".join(problems))
    out = dict(data)
    out.setdefault("arch_list", [])
    out.setdefault("imports", [])
    for k in ("framework", "cuda", "cudnn", "nccl", "lock_hash"):
        out.setdefault(k, None)
    return out


def stack_is_cpu_only(expect):
    fw = expect.get("framework")
    return bool(fw) and fw.get("variant") == "cpu"


# ============================================================================ pure: evaluation
def evaluate_python(expect, observed_version):
    ok = release_matches(expect["python"], observed_version) and \
        len(release(observed_version)) >= len(release(expect["python"]))
    return check("python", ok, expect["python"], observed_version)


def evaluate_imports(expect, observed):
    """observed: {module: None on success or the error text}."""
    out = []
    for dist, module in expect["imports"]:
        err = observed.get(module, "not attempted")
        out.append(check("import " + module, err is None, "imports", "ok" if err is None else err,
                         "from distribution " + dist))
    return out


def evaluate_torch(expect, obs):
    """Non-GPU checks for a torch stack. obs: what observe_torch recorded."""
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
                             len(release(got)) >= min(3, len(release(expect["nccl"]))), expect["nccl"], got,
                             obs.get("nccl_error") or ""))
    if expect["arch_list"]:
        got = obs.get("arch_list") or []
        missing = [a for a in expect["arch_list"] if a not in got]
        extra = [a for a in got if a not in expect["arch_list"]]
        out.append(check("arch list", not missing, " ".join(expect["arch_list"]), " ".join(got),
                         ("missing " + " ".join(missing)) if missing else
                         ("also has " + " ".join(extra)) if extra else "equal"))
    return out


def evaluate_torch_gpu(expect, obs):
    """GPU checks for a torch stack on a machine where a GPU is visible."""
    if obs.get("import_error"):
        return []
    out = []
    if not obs.get("cuda_available"):
        why = obs.get("cuda_error") or "torch.cuda.is_available() is False"
        return [check("cuda available", False, True, False,
                      "a GPU is visible (%s) but torch cannot use it (%s): this stack would silently run on the "
                      "CPU" % (obs.get("gpu_evidence", "?"), why), gpu=True)]
    out.append(check("cuda available", True, True, True, "%d device(s)" % obs.get("device_count", 0), gpu=True))
    arch = obs.get("arch_list") or []
    for dev in obs.get("devices", []):
        ok, how = arch_covers(dev["capability"], arch)
        out.append(check("capability %s (%s)" % (".".join(map(str, dev["capability"])), dev.get("name", "?")), ok,
                         "covered by arch list", " ".join(arch), how, gpu=True))
    for op in obs.get("ops", []):
        cc = tuple(op["capability"])
        tag = " on cc %d.%d" % cc
        out.append(_op_check("matmul+backward" + tag, op.get("matmul"), TOL_FP32))
        out.append(_op_check("cudnn conv fwd+bwd" + tag, op.get("conv"), TOL_FP32))
        if cc >= (8, 0):
            out.append(_op_check("bf16 matmul" + tag, op.get("bf16"), TOL_BF16))
        else:
            out.append(skip("bf16 matmul" + tag, "compute capability %d.%d has no native bf16" % cc, gpu=True))
    nccl = obs.get("nccl_gpu")
    if expect["nccl"] or nccl is not None:
        ok = bool(nccl) and nccl.get("available") and nccl.get("version") is not None
        out.append(check("nccl present", ok, expect["nccl"] or "present", nccl and nccl.get("version"),
                         (nccl or {}).get("error") or "", gpu=True))
    return out


def _op_check(name, result, tol):
    if not result:
        return check(name, False, None, None, "not run", gpu=True)
    if result.get("error"):
        return check(name, False, "runs", None, result["error"], gpu=True)
    err = result.get("rel_err")
    ok = err is not None and err <= tol
    return check(name, ok, "rel. error <= %g vs CPU" % tol, None if err is None else "%.2e" % err,
                 result.get("detail", ""), gpu=True)


def evaluate_tensorflow(expect, obs):
    fw = expect["framework"]
    if obs.get("import_error"):
        return [check("framework", False, "tensorflow " + fw["version"], None,
                      "tensorflow does not import: " + obs["import_error"])]
    out = [check("framework version", split_local(obs.get("version"))[0] == split_local(fw["version"])[0],
                 fw["version"], obs.get("version"))]
    built = bool(obs.get("built_with_cuda"))
    if fw["variant"] == "cpu":
        out.append(check("framework variant", True, "cpu", "cuda" if built else "cpu",
                         "a CUDA-built TensorFlow also runs a CPU-only stack" if built else ""))
    else:
        out.append(check("framework variant", built, fw["variant"], "cuda" if built else "cpu",
                         "" if built else "this TensorFlow was built without CUDA"))
    if expect["cuda"]:
        got = obs.get("build_cuda")
        out.append(check("tf build cuda", release_matches(expect["cuda"], got), expect["cuda"], got))
    if expect["cudnn"]:
        got = obs.get("build_cudnn")
        out.append(check("tf build cudnn", release_matches(expect["cudnn"], got), expect["cudnn"], got,
                         "TensorFlow's build info gives cuDNN's major version only" if len(release(got)) == 1 else ""))
    return out


def evaluate_tensorflow_gpu(expect, obs):
    if obs.get("import_error"):
        return []
    gpus = obs.get("gpus") or []
    if not gpus:
        return [check("tf gpu listed", False, ">= 1 GPU", 0,
                      "a GPU is visible (%s) but TensorFlow lists none (%s): this stack would silently run on the "
                      "CPU" % (obs.get("gpu_evidence", "?"), obs.get("gpu_error") or "no GPU device"), gpu=True)]
    return [check("tf gpu listed", True, ">= 1 GPU", len(gpus), " ".join(gpus), gpu=True),
            _op_check("tf matmul on GPU", obs.get("matmul"), TOL_FP32)]


def decide(checks, gpu_visible, expect, require_gpu):
    """(exit code, status, notes): any failure -> 1; else no GPU visible for a GPU stack -> 6 (1 with
    --require-gpu); else 0."""
    notes = []
    cpu_only = stack_is_cpu_only(expect)
    if not gpu_visible:
        notes.append(CPU_STACK_LINE if cpu_only else NO_GPU_LINE)
    elif cpu_only:
        notes.append(CPU_STACK_LINE)
    if require_gpu and not gpu_visible:
        checks.append(check("gpu required", False, "a visible GPU", "none", "--require-gpu", gpu=True))
    if any(c["status"] == "fail" for c in checks):
        return EXIT_FAIL, "failed", notes
    if not gpu_visible and not cpu_only:
        return EXIT_NO_GPU, "no-gpu", notes
    return EXIT_PASS, "passed", notes


# Doctor findings about GPU visibility are this script's own "no GPU visible" verdict (exit 6), not failures.
DOCTOR_GPU_VISIBILITY = ("container-no-gpu", "docker-no-nvidia", "no-driver", "nvidia-smi-failed")


def evaluate_doctor(findings):
    """envman doctor's verdicts on this environment (the image carries its checks): an error fails the smoke
    test, except the GPU-visibility ones, which decide() reports as 'no GPU visible'."""
    if findings is None:
        return []
    errors = [f for f in findings if f.get("severity") == "error" and f.get("check") not in DOCTOR_GPU_VISIBILITY]
    detail = "; ".join("[%s] %s" % (f.get("check"), f.get("verdict")) for f in errors) or \
        "%d finding(s), no error" % len(findings)
    return [check("doctor", not errors, "no error", "%d error(s)" % len(errors), detail)]


def evaluate(expect, env_obs, fw_obs, import_obs, require_gpu=False, doctor=None):
    """Every check from the observations, and the verdict. Pure."""
    checks = [evaluate_python(expect, env_obs["python"])]
    fw = expect["framework"]
    visible = env_obs["gpu_visible"]
    if fw is not None:
        if fw["name"] == "torch":
            checks += evaluate_torch(expect, fw_obs)
        elif fw["name"] == "tensorflow":
            checks += evaluate_tensorflow(expect, fw_obs)
        else:
            checks.append(check("framework", False, fw["name"], None, "the smoke test knows torch and tensorflow"))
    checks += evaluate_imports(expect, import_obs)
    checks += evaluate_doctor(doctor)
    if visible and fw is not None and not stack_is_cpu_only(expect):
        if fw["name"] == "torch":
            checks += evaluate_torch_gpu(expect, fw_obs)
        elif fw["name"] == "tensorflow":
            checks += evaluate_tensorflow_gpu(expect, fw_obs)
    code, status, notes = decide(checks, visible, expect, require_gpu)
    return {"checks": checks, "exit_code": code, "status": status, "notes": notes}


# ============================================================================ observation (impure)
def _error(exc):
    return ("%s: %s" % (type(exc).__name__, exc)).strip()[:500]


def observe_environment():
    nodes = glob.glob("/dev/nvidia*")
    smi = shutil.which("nvidia-smi")
    smi_gpus, smi_lines = None, []
    if smi:
        try:
            p = subprocess.run([smi, "-L"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               universal_newlines=True, timeout=20, check=False)
            smi_lines = [ln for ln in p.stdout.splitlines() if ln.startswith("GPU ")]
            smi_gpus = len(smi_lines)
        except (OSError, subprocess.SubprocessError):
            smi_gpus = 0
    nvd = os.environ.get("NVIDIA_VISIBLE_DEVICES")
    visible, evidence = gpu_visibility(nodes, smi_gpus, nvd)
    return {"python": platform.python_version(), "gpu_visible": visible, "gpu_evidence": evidence,
            "nvidia_smi": smi_lines, "nvidia_visible_devices": nvd, "platform": platform.platform()}


def top_level_modules(dist):
    """The public top-level modules a distribution installs (top_level.txt, else its RECORD)."""
    try:
        from importlib import metadata
    except ImportError:  # Python < 3.8
        return []
    try:
        d = metadata.distribution(dist)
    except Exception:
        return []
    names = (d.read_text("top_level.txt") or "").split()
    if not names:
        for f in d.files or []:
            top = str(f).split("/")[0]
            if top.endswith((".dist-info", ".data", ".pth")) or top in ("..", "__pycache__", "bin"):
                continue
            names.append(top[:-3] if top.endswith(".py") else top)
    return sorted({n for n in names if n and not n.startswith("_") and n.replace("_", "a").isalnum()})


def expand_imports(expect):
    """[dist, null] means "whatever that distribution installs": every public top-level module of it."""
    out = []
    for dist, module in expect["imports"]:
        if module is not None:
            out.append([dist, module])
            continue
        found = top_level_modules(dist)
        out.extend([dist, m] for m in found) if found else out.append([dist, dist.replace("-", "_")])
    expect["imports"] = out
    return expect


KIT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the folder holding this package


def observe_doctor(kit=KIT_DIR, project_dir=None):
    """Run envman doctor's probes and checks from this island, with the matrix knowledge baked beside it
    (kit/knowledge.json). None when there is no knowledge file."""
    path = os.path.join(kit, "knowledge.json")
    if not os.path.isfile(path):
        return None
    try:
        from .doctor.checks import run_checks
        from .doctor.knowledge import Knowledge
        from .facts.gather import gather_facts

        with open(path) as fh:
            knowledge = Knowledge.from_dict(json.load(fh))
        facts = gather_facts(project_dir or os.getcwd(), python=sys.executable)
        return [f.to_dict() for f in run_checks(facts, knowledge)]
    except Exception as exc:  # the doctor is a bonus: its own failure is reported, never fatal
        return [{"severity": "warn", "check": "doctor-failed", "verdict": _error(exc), "remedy": ""}]


def observe_imports(expect):
    import importlib

    out = {}
    for _dist, module in expect["imports"]:
        try:
            importlib.import_module(module)
            out[module] = None
        except BaseException as exc:  # a broken extension can raise SystemExit & co
            if isinstance(exc, KeyboardInterrupt):
                raise
            out[module] = _error(exc)
    return out


def _rel_err(torch, got, ref):
    got, ref = got.detach().float().cpu(), ref.detach().float().cpu()
    return float((got - ref).norm() / ref.norm().clamp_min(1e-12))


def _torch_ops(torch, dev):
    res = {}
    g = torch.Generator().manual_seed(0)
    try:  # matmul + backward: d(sum(x @ w))/dx = ones @ w^T
        x = torch.randn(512, 512, generator=g).to(dev).requires_grad_()
        w = torch.randn(512, 512, generator=g).to(dev).requires_grad_()
        (x @ w).sum().backward()
        torch.cuda.synchronize(dev)
        ref = torch.ones(512, 512) @ w.detach().cpu().t()
        res["matmul"] = {"rel_err": _rel_err(torch, x.grad, ref)}
    except Exception as exc:
        res["matmul"] = {"error": _error(exc)}
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
        res["conv"] = {"rel_err": _rel_err(torch, yd, ref) if ok_grad else None,
                       "detail": "cudnn %s" % torch.backends.cudnn.version()}
        if not ok_grad:
            res["conv"] = {"error": "backward produced no finite gradients"}
    except Exception as exc:
        res["conv"] = {"error": _error(exc)}
    finally:
        torch.backends.cudnn.allow_tf32 = tf32
    try:
        a = torch.randn(256, 256, generator=g).bfloat16()
        b = torch.randn(256, 256, generator=g).bfloat16()
        c = (a.to(dev) @ b.to(dev))
        torch.cuda.synchronize(dev)
        res["bf16"] = {"rel_err": _rel_err(torch, c, a.float() @ b.float())}
    except Exception as exc:
        res["bf16"] = {"error": _error(exc)}
    return res


def observe_torch(gpu_visible, gpu_evidence):
    obs = {"gpu_visible": gpu_visible, "gpu_evidence": gpu_evidence}
    try:
        import torch
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        obs["import_error"] = _error(exc)
        return obs
    obs["version"] = str(torch.__version__)
    obs["cuda"] = getattr(torch.version, "cuda", None)
    try:
        obs["cudnn"] = torch.backends.cudnn.version()
    except Exception as exc:
        obs["cudnn"], obs["cudnn_error"] = None, _error(exc)
    try:
        obs["nccl"] = nccl_text(torch.cuda.nccl.version())
    except Exception as exc:
        obs["nccl"], obs["nccl_error"] = None, _error(exc)
    try:
        obs["cuda_available"] = bool(torch.cuda.is_available())
    except Exception as exc:
        obs["cuda_available"], obs["cuda_error"] = False, _error(exc)
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
        obs["nccl_gpu"] = {"available": False, "version": None, "error": _error(exc)}
    return obs


def observe_tensorflow(gpu_visible, gpu_evidence):
    obs = {"gpu_visible": gpu_visible, "gpu_evidence": gpu_evidence}
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        import tensorflow as tf
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        obs["import_error"] = _error(exc)
        return obs
    obs["version"] = str(tf.__version__)
    try:
        info = dict(tf.sysconfig.get_build_info())
        obs["built_with_cuda"] = bool(info.get("is_cuda_build", tf.test.is_built_with_cuda()))
        obs["build_cuda"], obs["build_cudnn"] = info.get("cuda_version"), info.get("cudnn_version")
    except Exception as exc:
        obs["built_with_cuda"], obs["build_error"] = False, _error(exc)
    try:
        obs["gpus"] = [d.name for d in tf.config.list_physical_devices("GPU")]
    except Exception as exc:
        obs["gpus"], obs["gpu_error"] = [], _error(exc)
    if gpu_visible and obs["gpus"]:
        try:
            import numpy as np

            a = np.random.default_rng(0).standard_normal((512, 512)).astype("float32")
            with tf.device("/GPU:0"):
                c = tf.linalg.matmul(tf.constant(a), tf.constant(a))
                where = c.device
            ref = a.astype("float64") @ a.astype("float64")
            err = float(np.linalg.norm(c.numpy() - ref) / np.linalg.norm(ref))
            obs["matmul"] = {"rel_err": err, "detail": "ran on " + where}
            if "GPU" not in where.upper():
                obs["matmul"] = {"error": "the matmul ran on %s, not the GPU" % where}
        except Exception as exc:
            obs["matmul"] = {"error": _error(exc)}
    return obs


@contextmanager
def stdout_to_stderr():
    """Frameworks print (at the C level too); the report must be the only thing on stdout."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


# ============================================================================ report
def run_smoke(expect_path, require_gpu=False):
    started = time.time()
    report = {"schema": SCHEMA, "tool": "envman-smoke", "expect_file": expect_path, "require_gpu": require_gpu}
    try:
        with open(expect_path, encoding="utf-8") as fh:
            expect = load_expect(json.load(fh))
    except (OSError, ValueError) as exc:
        report.update(checks=[check("expected stack", False, expect_path, None, _error(exc))],
                      exit_code=EXIT_FAIL, status="failed", notes=[], gpu={}, lock_hash=None)
        return report
    report["lock_hash"] = expect.get("lock_hash")
    with stdout_to_stderr():
        env_obs = observe_environment()
        fw, fw_obs = expect["framework"], {}
        if fw and fw["name"] == "torch":
            fw_obs = observe_torch(env_obs["gpu_visible"], env_obs["gpu_evidence"])
        elif fw and fw["name"] == "tensorflow":
            fw_obs = observe_tensorflow(env_obs["gpu_visible"], env_obs["gpu_evidence"])
        import_obs = observe_imports(expand_imports(expect))
        doctor = observe_doctor()
    report.update(evaluate(expect, env_obs, fw_obs, import_obs, require_gpu, doctor))
    if doctor is not None:
        report["doctor"] = doctor
    report["gpu"] = {"visible": env_obs["gpu_visible"], "evidence": env_obs["gpu_evidence"],
                     "nvidia_smi": env_obs["nvidia_smi"], "devices": fw_obs.get("devices", [])}
    report["observed"] = {"python": env_obs["python"], "platform": env_obs["platform"],
                          **{k: fw_obs.get(k) for k in ("version", "cuda", "cudnn", "nccl", "arch_list",
                                                        "build_cuda", "build_cudnn") if k in fw_obs}}
    report["duration_s"] = round(time.time() - started, 2)
    return report


def format_summary(report):
    lines = []
    for c in report.get("checks", []):
        val = c["observed"] if c["observed"] is not None else ""
        want = "" if c["status"] != "fail" or c["expected"] is None else " (expected %s)" % (c["expected"],)
        detail = (" - " + c["detail"]) if c["detail"] and c["status"] != "pass" else ""
        lines.append("  %-4s  %-32s %s%s%s" % (c["status"].upper(), c["name"], val, want, detail))
    lines += report.get("notes", [])
    word = {"passed": "passed", "failed": "FAILED", "no-gpu": "passed without GPU checks"}.get(report["status"])
    lines.append("smoke test %s (exit %d)" % (word, report["exit_code"]))
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description="envman smoke test of a Python/CUDA/framework stack")
    ap.add_argument("--expect", default=DEFAULT_EXPECT, help="expected-stack JSON (default %(default)s)")
    ap.add_argument("--require-gpu", action="store_true", help="no visible GPU is a failure (exit 1), not exit 6")
    ap.add_argument("--json", action="store_true", help="only the JSON report (no summary on stderr)")
    args = ap.parse_args(argv)
    try:
        report = run_smoke(args.expect, args.require_gpu)
    except Exception:  # the report must come out whatever broke
        report = {"schema": SCHEMA, "tool": "envman-smoke", "status": "failed", "exit_code": EXIT_FAIL, "notes": [],
                  "checks": [check("smoke script", False, None, None, traceback.format_exc()[-1500:])]}
    if not args.json:
        sys.stderr.write(format_summary(report) + "\n")
    sys.stdout.write(json.dumps(report, indent=2, sort_keys=True, default=str) + "\n")
    sys.stdout.flush()
    return report["exit_code"]


if __name__ == "__main__":
    sys.exit(main())
