"""Checks on the machine under the driver: Fabric Manager, cuda-compat, kernel module, Secure Boot."""

from __future__ import annotations

import re

from ..versions import vcmp
from .findings import Finding, error, warn
from .knowledge import Knowledge
from .view import FactsView, as_dict, as_list, as_num, as_str

# Forward compatibility (cuda-compat) runs on data-center and some professional GPUs only; GeForce and
# TITAN cards get CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE (804).
CONSUMER = re.compile(r"geforce|titan|\bgtx\b|\brtx [2-5]0\d0", re.I)


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


def _loaded_libcuda(v: FactsView, name: str = "libcuda.so.1") -> dict[str, object]:
    """The ``libcuda_loaded`` entry for ``name``: which file the dynamic loader resolves ({} when not probed)."""
    return next((as_dict(e) for e in as_list(v.f.get("libcuda_loaded")) if as_dict(e).get("name") == name), {})


def check_cuda_compat(v: FactsView, k: Knowledge) -> list[Finding]:
    """The forward-compatibility libcuda on a GeForce-class GPU (error 804) or under a newer driver (803)."""
    out = []
    path_dirs = [e.rstrip("/") for e in v.env.get("LD_LIBRARY_PATH", "").split(":") if e]
    resolved = as_str(_loaded_libcuda(v).get("path")) or ""
    for c in as_list(v.f.get("cuda_compat")):
        c = as_dict(c)
        path, ver = as_str(c.get("path")), as_str(c.get("version"))
        if not path or not ver:
            continue
        folder = path.rsplit("/", 1)[0]
        used = folder in path_dirs or (bool(resolved) and resolved.rsplit("/", 1)[0] == folder)
        where = ("the libcuda the loader resolves" if resolved.startswith(folder) else "on LD_LIBRARY_PATH") if used \
            else "installed (used when on the loader path)"
        consumer = [g for g in v.gpus if CONSUMER.search(g.name)]
        if consumer:
            out.append(error(
                "cuda-compat-unsupported-gpu",
                f"the forward-compatibility libcuda {ver} ({path}) is {where}, but the {consumer[0].name} is a "
                f"GeForce-class GPU: CUDA fails with error 804 'forward compatibility was attempted on non supported HW'",
                f"upgrade the host driver to one that runs this CUDA by itself, and remove the compat library: "
                f"apt-get remove cuda-compat-* (in the image and on the host), or take {folder} off LD_LIBRARY_PATH",
            ))
        elif v.driver and vcmp(v.driver, ver) > 0:
            out.append((error if used else warn)(
                "cuda-compat-older",
                f"the forward-compatibility libcuda {ver} ({path}) is {where}, but the host driver {v.driver} is newer: "
                f"CUDA fails with error 803 'system has unsupported display driver / cuda driver combination'",
                f"remove the compat package (apt-get remove cuda-compat-*) or take {folder} off "
                f"LD_LIBRARY_PATH: driver {v.driver} runs that CUDA by itself",
            ))
    return out


def check_libcuda_stub(v: FactsView, k: Knowledge) -> list[Finding]:
    """The loader resolves the CUDA toolkit's link-time stub libcuda (…/lib64/stubs) instead of the driver's."""
    # the first name that resolves to the stub: one cause, one finding
    name = next((n for n in ("libcuda.so.1", "libcuda.so") if _loaded_libcuda(v, n).get("stub") is True), None)
    if name is None:
        return []
    e = _loaded_libcuda(v, name)
    path = as_str(e.get("path")) or "stubs/libcuda.so"
    folder = path.rsplit("/", 1)[0]
    how = "LD_LIBRARY_PATH puts" if e.get("from") == "LD_LIBRARY_PATH" else "the loader's cache (ld.so.conf) puts"
    fix = (f"drop {folder} from LD_LIBRARY_PATH" if e.get("from") == "LD_LIBRARY_PATH" else
           f"remove {folder} from /etc/ld.so.conf.d and run ldconfig (in an image: RUN rm -rf {folder} after the build "
           f"that linked against it)")
    return [error(
        "libcuda-stub",
        f"{how} the toolkit's stub {path} ahead of the driver's libcuda: programs that load {name} fail with "
        f"'CUDA driver is a stub library' (CUDA_ERROR_STUB_LIBRARY, 34)",
        fix,
    )]


def check_libcuda_unversioned(v: FactsView, k: Knowledge) -> list[Finding]:
    """Triton links `-lcuda` beside libcuda.so.1: no unversioned libcuda.so there fails the link."""
    triton = v.pkg("triton") or v.pkg("pytorch-triton")
    before = k.triton_lcuda_before
    if not triton or not before or vcmp(triton, before) >= 0 or as_str(v.f.get("os")) not in (None, "Linux"):
        return []
    one, dev = _loaded_libcuda(v), _loaded_libcuda(v, "libcuda.so")
    path = as_str(one.get("path"))
    found = bool(one) and one.get("path", "") is not None and one.get("stub") is not True
    # libcuda.so recorded with path null: looked for and absent (an older facts file without the entry: unknown)
    if not found or "path" not in dev or dev.get("path") or v.env.get("TRITON_LIBCUDA_PATH"):
        return []
    folder = path.rsplit("/", 1)[0] if path else "the directory of libcuda.so.1"
    return [warn(
        "libcuda-unversioned-missing",
        f"the loader finds libcuda.so.1{f' ({path})' if path else ''} but no libcuda.so: triton {triton} compiles its launcher "
        f"with -lcuda, so torch.compile and every Triton kernel fail with '/usr/bin/ld: cannot find -lcuda' "
        f"('libcuda.so cannot found!')",
        f"sudo ln -s libcuda.so.1 {folder}/libcuda.so && sudo ldconfig, or export TRITON_LIBCUDA_PATH to a directory "
        f"holding one (the toolkit's link-time stub is enough: /usr/local/cuda/lib64/stubs), or pip install "
        f"'triton>={before}' (it links libcuda.so.1) with a torch that allows it",
    )]


def _unloaded_driver(v: FactsView) -> str | None:
    """The installed user-space driver's version when no kernel module is loaded on a host (None otherwise)."""
    kos = v.f.get("nvidia_ko")
    if not isinstance(kos, list) or v.in_container or as_str(v.f.get("driver_module")) or v.gpus:
        return None
    found = as_str(v.f.get("nvml_lib")) or as_str(as_dict(v.f.get("libcuda")).get("version"))
    if found:
        return found
    # nvidia-smi itself is part of the user-space driver: its "couldn't communicate" says one is installed
    smi = (as_str(v.f.get("nvidia_smi_error")) or "").lower()
    return "(its nvidia-smi answers)" if "couldn't communicate with the nvidia driver" in smi else None


def kernel_module_missing(v: FactsView) -> bool:
    """No nvidia.ko for the running kernel while the driver's libraries are installed."""
    return _unloaded_driver(v) is not None and v.f.get("nvidia_ko") == []


def check_kernel_module(v: FactsView, k: Knowledge) -> list[Finding]:
    """Driver libraries but no module for the running kernel (DKMS), or Secure Boot refusing it."""
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


CHECKS = (check_fabricmanager, check_cuda_compat, check_libcuda_stub, check_libcuda_unversioned, check_kernel_module)
