"""What building CUDA extensions depends on: nvcc, the CUDA home, gcc, variables, CUDA libraries."""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
from typing import Any

from .commands import read_text, run_command

# Only these variables are recorded: a facts file travels in bug reports and must not carry secrets.
ENV_NAMES = (
    "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "LD_LIBRARY_PATH", "CUDA_HOME",
    "CUDA_PATH", "VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "PYTORCH_CUDA_ALLOC_CONF", "CUDA_MODULE_LOADING",
    "CUDA_LAUNCH_BLOCKING", "TORCH_CUDA_ARCH_LIST", "CC", "CXX", "NVCC_CCBIN", "NCCL_P2P_DISABLE", "NCCL_IB_DISABLE",
    "NCCL_SOCKET_IFNAME", "OMP_NUM_THREADS", "TF_FORCE_GPU_ALLOW_GROWTH", "XLA_FLAGS", "WSL_DISTRO_NAME",
    "BNB_CUDA_VERSION", "JAX_PLATFORMS", "XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION",
    "XLA_PYTHON_CLIENT_ALLOCATOR", "TRITON_LIBCUDA_PATH",
    # what NVIDIA's CUDA images set: the image a container was started from (facts `container_cuda`)
    "CUDA_VERSION", "NVIDIA_REQUIRE_CUDA", "NVIDIA_DISABLE_REQUIRE", "NV_CUDNN_VERSION", "CUDNN_VERSION",
    "NVIDIA_PRODUCT_NAME",
)
_LIB = re.compile(
    r"^(libcudart|libcudnn|libnvJitLink|libcublas|libcublasLt|libcusparse|libcufft|libcurand|libcusolver|libnccl|"
    r"libnvrtc|libcupti)\.so\.(\d+(?:\.\d+)*)\Z"
)
_SYSTEM_LIB_DIRS = ("/lib", "/usr/lib", "/lib64", "/usr/lib64", "/usr/lib/x86_64-linux-gnu",
                    "/usr/lib/aarch64-linux-gnu")
_NVCC_RELEASE = re.compile(r"release (\d+\.\d+), V(\d+(?:\.\d+)+)")
_GCC_MAX = (re.compile(r"gcc versions later than (\d+) are not supported"), re.compile(r"#if __GNUC__ > (\d+)"))


def probe_toolchain(environ: dict[str, str] | None = None, timeout: float = 5.0) -> dict[str, Any]:
    env = dict(os.environ if environ is None else environ)
    f: dict[str, Any] = {"env": {k: env[k] for k in ENV_NAMES if k in env}}
    path_nvcc = shutil.which("nvcc", path=env.get("PATH"))
    f["nvcc"] = nvcc_info(path_nvcc, timeout) if path_nvcc else None
    f["cuda_home"] = cuda_home(env, path_nvcc, f["nvcc"], timeout)
    ran = run_command(["gcc", "-dumpfullversion", "-dumpversion"], timeout)
    f["gcc"] = ran.out.strip() if ran.ok and ran.out.strip() else None
    f["cuda_libs"] = cuda_libs(env.get("LD_LIBRARY_PATH", ""))
    return f


def nvcc_info(path: str, timeout: float) -> dict[str, Any]:
    d: dict[str, Any] = {"path": path}
    real = _unwrap(os.path.realpath(path))
    toolkit = os.path.dirname(os.path.dirname(real))
    if os.path.isfile(os.path.join(toolkit, "bin", "nvcc")):
        d["toolkit"] = toolkit
    ran = run_command([path, "--version"], timeout)
    m = _NVCC_RELEASE.search(ran.out)
    if m:
        d["version"], d["full"] = m.group(1), m.group(2)
    elif ran.error or not ran.ok:
        d["error"] = ran.error or ran.text[-300:]
    mg = max_gcc(toolkit) or max_gcc(os.path.dirname(os.path.dirname(path)))
    if mg:
        d["max_gcc"] = mg
    # Debian/Ubuntu's nvidia-cuda-toolkit puts nvcc in /usr/bin, its toolkit in /usr/lib/nvidia-cuda-toolkit.
    d["distro"] = path.startswith("/usr/bin/") and "/usr/local/" not in real and "/opt/" not in real
    return d


def _unwrap(path: str) -> str:
    """A wrapper script (`exec /usr/local/cuda-13.0/bin/nvcc "$@"`, Debian's /usr/bin/nvcc) -> the nvcc it runs."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except OSError:
        return path
    if not head.startswith(b"#!"):
        return path
    m = re.search(rb"(/[^\s\"']+/bin/nvcc)\b", head)
    return os.path.realpath(m.group(1).decode()) if m and os.path.isfile(m.group(1).decode()) else path


def max_gcc(toolkit: str) -> int | None:
    """The newest gcc major this toolkit's nvcc accepts, read from its own crt/host_config.h."""
    for cand in [os.path.join(toolkit, "include", "crt", "host_config.h"),
                 *glob.glob(os.path.join(toolkit, "targets", "*", "include", "crt", "host_config.h"))]:
        text = read_text(cand, 1 << 17)
        if not text:
            continue
        for rx in _GCC_MAX:
            m = rx.search(text)
            if m:
                return int(m.group(1))
    return None


def cuda_home(env: dict[str, str], path_nvcc: str | None, nvcc: dict[str, Any] | None,
              timeout: float) -> dict[str, Any] | None:
    """The CUDA home torch.utils.cpp_extension would pick (CUDA_HOME, CUDA_PATH, nvcc, /usr/local/cuda)."""
    if env.get("CUDA_HOME"):
        home, source = env["CUDA_HOME"], "CUDA_HOME"
    elif env.get("CUDA_PATH"):
        home, source = env["CUDA_PATH"], "CUDA_PATH"
    elif path_nvcc:
        home, source = os.path.dirname(os.path.dirname(path_nvcc)), "nvcc"
    elif os.path.isdir("/usr/local/cuda"):
        home, source = "/usr/local/cuda", "/usr/local/cuda"
    else:
        return None
    d: dict[str, Any] = {"path": home, "source": source}
    nv = os.path.join(home, "bin", "nvcc")
    if nvcc and path_nvcc and os.path.realpath(nv) == os.path.realpath(path_nvcc):
        same = {k: nvcc[k] for k in ("version", "max_gcc") if k in nvcc}
        d.update({"nvcc_version": same.get("version"), **({"max_gcc": same["max_gcc"]} if "max_gcc" in same else {})})
    elif os.path.isfile(nv):
        v = _toolkit_version(home)
        if not v:
            m = _NVCC_RELEASE.search(run_command([nv, "--version"], timeout).out)
            v = m.group(1) if m else None
        d["nvcc_version"] = v
        mg = max_gcc(home)
        if mg:
            d["max_gcc"] = mg
    else:
        d["nvcc_version"] = None
    return d


def _toolkit_version(home: str) -> str | None:
    """version.json ({"cuda": {"version": "12.4.1"}}, CUDA 11.1+) saves running nvcc."""
    try:
        v = json.loads(read_text(os.path.join(home, "version.json"), 1 << 16) or "")["cuda"]["version"]
        return ".".join(str(v).split(".")[:2])
    except (ValueError, KeyError, TypeError):
        return None


def cuda_libs(ld_library_path: str) -> list[dict[str, Any]]:
    """[{dir, from, libs: {stem: version}}] of CUDA/cuDNN library directories on the search path."""
    out = []
    seen: set[str] = set()
    ld = [p for p in ld_library_path.split(":") if p]
    dirs = [(p, "LD_LIBRARY_PATH") for p in ld] + [(p, "system") for p in _ld_conf_dirs() + list(_SYSTEM_LIB_DIRS)]
    for d, origin in dirs:
        real = os.path.realpath(d)
        if real in seen:
            continue
        seen.add(real)
        try:
            names = os.listdir(d)
        except OSError:
            continue
        libs: dict[str, str] = {}
        for n in names:
            m = _LIB.match(n)
            if m:
                stem, ver = m.group(1), m.group(2)
                if len(ver.split(".")) > len(libs.get(stem, "").split(".")) or stem not in libs:
                    libs[stem] = ver
        if libs:
            out.append({"dir": d, "from": origin, "libs": dict(sorted(libs.items()))})
    return out


def _ld_conf_dirs() -> list[str]:
    confs = ["/etc/ld.so.conf", *sorted(glob.glob("/etc/ld.so.conf.d/*.conf"))]
    lines = (ln.split("#")[0].strip() for conf in confs for ln in (read_text(conf, 1 << 14) or "").splitlines())
    return [ln for ln in lines if ln.startswith("/")]  # (not `include`: it names more files)
