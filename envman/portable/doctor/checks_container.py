"""Checks on a container's view of the GPU: GPUs lost while running, an image's CUDA above the driver."""

from __future__ import annotations

import re

from ..versions import major_minor
from .checks_host import CONSUMER
from .findings import Finding, error
from .knowledge import Knowledge
from .view import FactsView, as_dict, as_list, as_str


def gpu_lost(v: FactsView) -> str | None:
    """The first GPU device node of a container whose NVML answers 'Unknown Error', else None."""
    msg = " ".join(x for x in (as_str(v.f.get("nvml_error")), as_str(v.f.get("nvidia_smi_error"))) if x)
    if not v.in_container or v.gpus or "unknown error" not in msg.lower():
        return None
    return next((str(n) for n in as_list(v.f.get("device_nodes")) if re.fullmatch(r"nvidia\d+", str(n))), None)


def check_gpu_lost(v: FactsView, k: Knowledge) -> list[Finding]:
    """NVML's 'Unknown Error' beside the device nodes: the cgroup lost the GPUs (nvidia-container-toolkit#48)."""
    first = gpu_lost(v)
    if first is None:
        return []
    return [error(
        "container-gpu-lost",
        f"this container has /dev/{first} and the driver library but NVML fails with 'Failed to initialize NVML: "
        f"Unknown Error': it lost access to its GPUs while running (a systemd reload of the host's units resets the "
        f"container's device cgroup)",
        "recreate the container (docker rm -f, then docker run --gpus …); on the host, stop it recurring: sudo nvidia-ctk "
        "system create-dev-char-symlinks --create-all (and its udev rule), or start containers with --device "
        "/dev/nvidia0 … per device, or cgroupfs instead of systemd (NVIDIA/nvidia-container-toolkit#48)",
    )]


def check_container_cuda(v: FactsView, k: Knowledge) -> list[Finding]:
    """An image built FROM a CUDA release the host driver does not run (CUDA_VERSION, set by NVIDIA's images)."""
    cuda = as_str(as_dict(v.f.get("container_cuda")).get("cuda"))
    if not v.in_container or not cuda or not v.driver:
        return []
    mm = major_minor(cuda)
    mode = k.driver_mode(v.driver, mm, v.driver_cuda)
    consumer = [g for g in v.gpus if CONSUMER.search(g.name)]
    # Minor-version compatibility needs no compat library on data-center GPUs; a GeForce-class one gets either the
    # toolkit's refusal (NVIDIA_REQUIRE_CUDA lists no brand=geforce exception for this driver) or, when the image
    # carries cuda-compat, error 804 (with a compat library here: check_cuda_compat's finding).
    geforce = mode == "minor" and consumer and not as_list(v.f.get("cuda_compat"))
    if not geforce and mode != "too-old":
        return []
    need = k.full_driver(mm) if geforce else k.full_driver(mm) or k.floor_driver(mm)
    return [error(
        "container-cuda-newer",
        (f"this container was started from a CUDA {cuda} image, newer than the CUDA {v.driver_cuda or '?'} of the "
         f"host driver {v.driver}, on a {consumer[0].name}: GeForce-class GPUs get no minor-version compatibility in "
         f"containers — 'nvidia-container-cli: requirement error: unsatisfied condition: cuda>={mm}', or with the "
         f"image's cuda-compat, error 804 'forward compatibility was attempted on non supported HW'") if geforce else
        (f"this container was started from a CUDA {cuda} image, but the host driver {v.driver} supports CUDA ≤ "
         f"{v.driver_cuda or '?'}: CUDA calls fail with 'CUDA driver version is insufficient for CUDA runtime version' "
         f"(error 35)"),
        (f"install NVIDIA driver ≥ {need} on the host, or" if need else "upgrade the host's NVIDIA driver, or")
        + f" build the image FROM a CUDA ≤ {v.driver_cuda or 'the driver’s'} base (envman init --driver {v.driver} picks one)",
    )]


CHECKS = (check_gpu_lost, check_container_cuda)
