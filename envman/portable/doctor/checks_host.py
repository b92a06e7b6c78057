"""Checks on the machine under the driver: NVSwitch without Fabric Manager, the cuda-compat package on
the wrong GPU or under a newer driver, a kernel module missing for the running kernel, Secure Boot."""

from __future__ import annotations

import re

from ..versions import vcmp
from .findings import Finding, error, warn
from .knowledge import Knowledge
from .view import FactsView, as_dict, as_list, as_num, as_str

# Forward compatibility (cuda-compat) runs on data-center and some professional GPUs only; GeForce and
# TITAN cards get CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE (804).
_CONSUMER = re.compile(r"geforce|titan|\bgtx\b|\brtx [2-5]0\d0", re.I)


def check_fabricmanager(v: FactsView, k: Knowledge) -> list[Finding]:
    n = as_num(v.f.get("nvswitch_count"))
    if not n:
        return []
    fm = as_dict(v.f.get("fabricmanager"))
    active = as_str(fm.get("active"))
    ver = as_str(fm.get("version"))
    if active == "active" and (not ver or not v.driver or vcmp(ver, v.driver) == 0):
        return []
    if active == "active":
        why = f"nvidia-fabricmanager {ver} runs, but the driver is {v.driver}: it refuses a different driver version"
    else:
        why = f"nvidia-fabricmanager is {active or 'not running'}"
    return [error(
        "fabricmanager",
        f"this NVSwitch system ({int(n)} NVSwitch devices, {v.gpu_summary()}) needs Fabric Manager of the driver's "
        f"version; {why}: CUDA init fails with error 802 'system not yet initialized'",
        f"sudo apt-get install nvidia-fabricmanager-<branch>={v.driver or '<driver version>'}* && "
        f"sudo systemctl enable --now nvidia-fabricmanager",
    )]


def check_cuda_compat(v: FactsView, k: Knowledge) -> list[Finding]:
    out = []
    path_dirs = [e.rstrip("/") for e in v.env.get("LD_LIBRARY_PATH", "").split(":") if e]
    for c in as_list(v.f.get("cuda_compat")):
        c = as_dict(c)
        path, ver = as_str(c.get("path")), as_str(c.get("version"))
        if not path or not ver:
            continue
        used = path.rsplit("/", 1)[0] in path_dirs
        sev = error if used else warn
        where = "on LD_LIBRARY_PATH" if used else "installed (used when on the loader path)"
        consumer = [g for g in v.gpus if _CONSUMER.search(g.name)]
        if consumer:
            out.append(sev(
                "cuda-compat-unsupported-gpu",
                f"the forward-compatibility libcuda {ver} ({path}) is {where}, but the {consumer[0].name} is a "
                f"GeForce-class GPU: CUDA fails with error 804 'forward compatibility was attempted on non supported HW'",
                f"take {path.rsplit('/', 1)[0]} off LD_LIBRARY_PATH (or apt-get remove cuda-compat-*) and upgrade "
                f"the driver instead",
            ))
        elif v.driver and vcmp(v.driver, ver) > 0:
            out.append(sev(
                "cuda-compat-older",
                f"the forward-compatibility libcuda {ver} ({path}) is {where}, but the host driver {v.driver} is newer: "
                f"CUDA fails with error 803 'system has unsupported display driver / cuda driver combination'",
                f"remove the compat package (apt-get remove cuda-compat-*) or take {path.rsplit('/', 1)[0]} off "
                f"LD_LIBRARY_PATH: driver {v.driver} runs that CUDA by itself",
            ))
    return out


def _unloaded_driver(v: FactsView) -> str | None:
    """The installed user-space driver's version when no kernel module is loaded on a host (None otherwise)."""
    kos = v.f.get("nvidia_ko")
    if not isinstance(kos, list) or v.in_container or as_str(v.f.get("driver_module")) or v.gpus:
        return None
    return as_str(v.f.get("nvml_lib")) or as_str(as_dict(v.f.get("libcuda")).get("version"))


def kernel_module_missing(v: FactsView) -> bool:
    """No nvidia.ko for the running kernel while the driver's libraries are installed: check_kernel_module
    names that cause, so the generic nvidia-smi failure stays quiet."""
    return _unloaded_driver(v) is not None and v.f.get("nvidia_ko") == []


def check_kernel_module(v: FactsView, k: Knowledge) -> list[Finding]:
    """Driver libraries installed, no module loaded, none built for the running kernel (DKMS after an
    upgrade), or Secure Boot refusing an unsigned one."""
    lib = _unloaded_driver(v)
    if not lib:
        return []  # a module is loaded, or no driver is installed (the no-driver check speaks)
    kos = as_list(v.f.get("nvidia_ko"))
    kernel = as_str(v.f.get("kernel")) or "the running kernel"
    if not kos:
        return [error(
            "kernel-module-missing",
            f"the NVIDIA driver {lib} is installed but no nvidia.ko exists for the running kernel {kernel} "
            f"(/lib/modules/{kernel}): a kernel upgrade without a DKMS rebuild; nvidia-smi says 'couldn't communicate "
            f"with the NVIDIA driver'",
            f"sudo apt-get install linux-headers-{kernel} && sudo dkms autoinstall -k {kernel} && sudo modprobe nvidia "
            f"(or boot the previous kernel)",
        )]
    if v.f.get("secure_boot") is True and v.f.get("nvidia_ko_signed") is False:
        return [error(
            "secure-boot-unsigned",
            f"Secure Boot is enabled and {kos[0]} is not signed: the kernel refuses to load it "
            f"('modprobe: ERROR: could not insert nvidia: Key was rejected by service')",
            "enrol the DKMS signing key (sudo mokutil --import /var/lib/dkms/mok.pub, then reboot and confirm), "
            "or disable Secure Boot",
        )]
    return []


CHECKS = (check_fabricmanager, check_cuda_compat, check_kernel_module)
