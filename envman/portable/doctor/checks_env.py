"""Checks on where training runs: container (its GPUs, its image's CUDA), Docker, WSL, shared memory, RAM, disks,
the library path."""

from __future__ import annotations

import re
from typing import Any

from ..versions import major, major_minor, vcmp, vt
from .checks_host import CONSUMER
from .checks_loader import loader_explains
from .findings import Finding, error, info, warn
from .knowledge import Knowledge, same_prefix
from .remedies import drop_ld_path, gib
from .view import FactsView, as_dict, as_list, as_num, as_str

# Policy thresholds (not compatibility data).
SHM_MIN_MIB = 1024  # Docker's default is 64 MiB; a DataLoader with a few workers needs far more
RAM_PER_VRAM = 2  # host RAM per byte of GPU memory before checkpoint loading gets tight
DISK_MIN_FREE_GIB = 10
DISK_MIN_FREE_FRACTION = 0.05

# Which pip package ships which library. The soname major of each equals that package's version major.
LIB_PACKAGES = {
    "libcudart": "nvidia-cuda-runtime",
    "libcudnn": "nvidia-cudnn",
    "libnvJitLink": "nvidia-nvjitlink",
    "libcublas": "nvidia-cublas",
    "libcublasLt": "nvidia-cublas",
    "libcusparse": "nvidia-cusparse",
    "libcufft": "nvidia-cufft",
    "libcurand": "nvidia-curand",
    "libcusolver": "nvidia-cusolver",
    "libnccl": "nvidia-nccl",
    "libnvrtc": "nvidia-cuda-nvrtc",
    "libcupti": "nvidia-cuda-cupti",
}


_CONTAINER_NOUN = {"docker": "Docker container", "podman": "Podman container", "kubernetes": "Kubernetes pod",
                   "lxc": "LXC container", "containerd": "containerd container"}


def _gpu_wanted(v: FactsView) -> str | None:
    """What on this system expects a GPU, for the container check's verdict."""
    fw = next((fw for fw in v.frameworks if fw.gpu is True), None)
    if fw is not None:
        return fw.label
    nvd = v.env.get("NVIDIA_VISIBLE_DEVICES")
    return f"NVIDIA_VISIBLE_DEVICES={nvd}" if nvd and nvd not in ("void", "none") else None


def check_container_gpu(v: FactsView, k: Knowledge) -> list[Finding]:
    """Inside a container started without GPU access (or without the driver libraries mounted)."""
    if not v.in_container or v.gpus:
        return []
    kind = _CONTAINER_NOUN.get(as_str(v.f.get("container")) or "", "container")
    nodes = [str(n) for n in as_list(v.f.get("device_nodes"))]
    has_nodes = any(re.fullmatch(r"nvidia\d+", n) for n in nodes)
    caps = v.env.get("NVIDIA_DRIVER_CAPABILITIES")
    if has_nodes and not v.gpus_known:
        return [] if gpu_lost(v) else _gpus_unlisted(v, kind, caps)
    if not v.gpus_known:
        return []
    wanted = _gpu_wanted(v)
    if wanted is None:
        return []  # a CPU image in a container without a GPU is fine
    nvd = v.env.get("NVIDIA_VISIBLE_DEVICES")
    why = f" (NVIDIA_VISIBLE_DEVICES={nvd})" if nvd in ("void", "none", "") else ""
    return [error(
        "container-no-gpu",
        f"inside a {kind} with no GPU visible{why}: {wanted} will run on the CPU",
        "restart it with GPU access: docker run --gpus all … (the host needs the NVIDIA Container Toolkit); "
        "Podman/CDI: --device nvidia.com/gpu=all; Kubernetes: resources.limits nvidia.com/gpu: 1",
    )]


def _gpus_unlisted(v: FactsView, kind: str, caps: str | None) -> list[Finding]:
    """Device nodes but no GPU list: the driver libraries are missing only when the facts show it (libcuda probed
    and absent, or NVML's own "library not found"); a list that was not recorded says nothing about the GPU."""
    libcuda = v.f.get("libcuda")
    nvml = as_str(v.f.get("nvml_error")) or ""
    if isinstance(libcuda, dict) and as_str(libcuda.get("path")):
        return [info(
            "container-gpu-unlisted",
            f"this {kind} has GPU device nodes and the driver library ({libcuda['path']}"
            f"{' ' + str(libcuda['version']) if as_str(libcuda.get('version')) else ''}), but the GPU list was not "
            f"collected (NVML: {nvml or 'unavailable'}): the GPU checks did not run",
            "run nvidia-smi inside the container to see what NVML says; NVIDIA_DRIVER_CAPABILITIES needs utility for it",
        )]
    absent = ("libcuda" in v.f and libcuda is None) or re.search(r"not found|no such file|cannot open", nvml, re.I)
    answered = as_str(v.f.get("driver")) and v.f.get("driver_source") != "kernel-module"
    if not absent or answered:
        return []  # (a user-space driver library answered, or nothing recorded either way: unknown, not missing)
    return [error(
        "container-no-gpu",
        f"this {kind} has GPU device nodes but no NVIDIA driver libraries (NVML: {nvml or 'unavailable'}; "
        f"NVIDIA_DRIVER_CAPABILITIES={caps or 'unset'})",
        "start it with NVIDIA_DRIVER_CAPABILITIES=compute,utility (or all) so the toolkit mounts libcuda and NVML",
    )]


# Base images that are for GPUs: a project whose Dockerfile starts FROM one needs GPUs inside its containers.
_GPU_BASE = re.compile(r"(^|/)(nvidia/cuda|cuda|pytorch/pytorch|tensorflow/tensorflow:[^ ]*gpu|nvcr\.io/nvidia/)", re.I)


def gpu_project(v: FactsView) -> str | None:
    """What says the project's containers want GPUs: its envman.lock's CUDA, or a Dockerfile FROM a GPU base."""
    lock = as_dict(v.f.get("lock"))
    if as_str(lock.get("cuda")):
        return f"its envman.lock's CUDA {lock['cuda']} stack"
    for d in as_list(v.f.get("dockerfiles")):
        img = next((str(b) for b in as_list(as_dict(d).get("from")) if _GPU_BASE.search(str(b))), None)
        if img:
            return f"its {as_str(as_dict(d).get('path')) or 'Dockerfile'} (FROM {img})"
    return None


def check_docker_toolkit(v: FactsView, k: Knowledge) -> list[Finding]:
    """A Docker engine (or snap's Docker) on a GPU host that cannot hand GPUs to containers."""
    d = as_dict(v.f.get("docker"))
    if d.get("reachable") is not True or not v.gpus:
        return []
    ver = as_str(d.get("version"))
    wants = gpu_project(v)
    root = as_str(d.get("root_dir")) or ""
    if root.startswith("/var/snap/"):
        return [(error if wants else warn)(
            "docker-snap",
            f"Docker{' ' + ver if ver else ''} is the snap package (its data is in {root}): it cannot run the NVIDIA "
            f"Container Toolkit's hook, so 'docker run --gpus all' fails with 'could not select device driver \"\" with "
            f"capabilities: [[gpu]]'" + (f"; the project needs GPUs in its containers ({wants})" if wants else ""),
            "sudo snap remove docker, install Docker from its apt repository (docs.docker.com/engine/install), then the "
            "NVIDIA Container Toolkit: sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker",
        )]
    if d.get("nvidia_runtime") is True or d.get("cdi") is True or d.get("toolkit") is True:
        return []
    if v.in_container and d.get("nvidia_runtime") is None:
        return []  # the host's toolkit cannot be seen from in here
    return [(error if wants else warn)(
        "docker-no-nvidia",
        f"Docker{' ' + ver if ver else ''} has no NVIDIA runtime, CDI spec or container toolkit: containers cannot use "
        f"this machine's {v.gpu_summary()} ('could not select device driver \"\" with capabilities: [[gpu]]')"
        + (f"; the project needs GPUs in its containers ({wants})" if wants else ""),
        "install the NVIDIA Container Toolkit (apt-get install nvidia-container-toolkit), then "
        "sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker",
    )]


def check_docker_daemon(v: FactsView, k: Knowledge) -> list[Finding]:
    """A project locked for an image where Docker is installed but its daemon does not answer."""
    d = as_dict(v.f.get("docker"))
    if v.in_container or d.get("reachable") is not False or d.get("installed") is not True:
        return []
    if not as_dict(v.f.get("lock")) or as_dict(v.f.get("lock")).get("missing"):
        return []  # no envman.lock: nothing here needs an image
    why = as_str(d.get("error")) or "the engine does not answer"
    return [error(
        "docker-daemon-down",
        f"Docker is installed but its daemon does not answer ({why}): this project's image cannot be built or run here",
        "start it: sudo systemctl start docker (or sudo dockerd &), or point DOCKER_HOST at an engine that runs",
    )]


def check_wsl(v: FactsView, k: Knowledge) -> list[Finding]:
    """WSL1 has no GPU; a Linux driver inside WSL2 breaks the one Windows provides."""
    wants = v.cuda_frameworks()
    if v.wsl == 1:
        distro = v.env.get("WSL_DISTRO_NAME") or "<distro>"
        cuda = next((fw for fw in wants if fw.gpu is True), None)
        return [(error if wants else warn)(
            "wsl1",
            "this is WSL1, which has no GPU access (CUDA on WSL needs WSL2)"
            + (f": {cuda.label} will run on the CPU" if cuda else ""),
            f"from Windows PowerShell: wsl --set-version {distro} 2 (the GPU comes from the Windows NVIDIA driver)",
        )]
    if v.wsl == 2:
        found = [str(p) for p in as_list(v.f.get("wsl_linux_driver"))]
        if found:
            return [error(
                "wsl2-linux-driver",
                f"a Linux NVIDIA driver is installed inside WSL2 ({found[0]}): it shadows the Windows driver's "
                f"/usr/lib/wsl/lib/libcuda.so and breaks CUDA",
                "remove it: sudo apt-get purge 'nvidia-driver-*' 'libnvidia-compute-*'; on WSL2 install only the "
                "Windows driver and, for nvcc, a cuda-toolkit-X-Y package (never 'cuda' or 'cuda-drivers')",
            )]
        nodes = v.f.get("device_nodes")
        if isinstance(nodes, list) and "dxg" not in nodes and not v.in_container:
            # WSL2's GPU is the Windows driver's, reached through the paravirtualised /dev/dxg (NVIDIA's CUDA on WSL
            # guide): without it nothing inside can see the GPU, whatever is installed there
            return [(error if wants else warn)(
                "wsl2-no-gpu",
                "this WSL2 has no /dev/dxg: Windows passes no GPU into it"
                + (f", so {wants[0].label} will run on the CPU" if wants else "")
                + " (CUDA on WSL needs Windows 11 or Windows 10 21H2 or later, a current WSL kernel and the Windows "
                "NVIDIA driver)",
                "update Windows, then from PowerShell: wsl --update; wsl --shutdown; install the current NVIDIA driver "
                "for Windows (nothing NVIDIA inside WSL but a cuda-toolkit-X-Y package)",
            )]
    return []


def check_shm(v: FactsView, k: Knowledge) -> list[Finding]:
    """/dev/shm too small for DataLoader workers (Docker's default is 64 MiB)."""
    shm = as_num(v.f.get("shm_mib"))
    if shm is None or not v.in_container or shm >= SHM_MIN_MIB:
        return []
    return [warn(
        "shm-small",
        f"/dev/shm is {shm:.0f} MiB in this container: DataLoader workers (num_workers > 0) crash with 'bus error' "
        f"or 'No space left on device'",
        "restart the container with --shm-size=16g (or --ipc=host); Kubernetes: mount an emptyDir with "
        "medium: Memory at /dev/shm",
    )]


def check_ram(v: FactsView, k: Knowledge) -> list[Finding]:
    """Host RAM below twice the total GPU memory."""
    ram = as_num(v.f.get("ram_mib"))
    limit = as_num(v.f.get("ram_limit_mib"))
    if limit and (ram is None or limit < ram):
        ram = limit
    vram = sum(g.mem_total_mib or 0 for g in v.gpus)
    if not ram or not vram or ram >= RAM_PER_VRAM * vram:
        return []
    per = f"{len(v.gpus)} × {gib(v.gpus[0].mem_total_mib)}" if len(v.gpus) > 1 else gib(vram)
    return [warn(
        "ram-small",
        f"RAM {gib(ram)}{' (container limit)' if ram == limit else ''} is less than twice the GPU memory "
        f"({per} = {gib(vram)}): loading checkpoints and pinned-memory DataLoaders can run out of host memory",
        f"add RAM (≥ {gib(RAM_PER_VRAM * vram)}), or load checkpoints with torch.load(..., mmap=True) and use fewer "
        f"DataLoader workers",
    )]


def check_disks(v: FactsView, k: Knowledge) -> list[Finding]:
    """The project/data disk is rotational, or nearly full."""
    out = []
    for d in as_list(v.f.get("disks")):
        if not isinstance(d, dict):
            continue
        path = as_str(d.get("path")) or "?"
        dev = as_str(d.get("device"))
        if d.get("rotational") is True and d.get("virtual") is not True:  # virtio disks all claim to spin
            out.append(warn(
                "disk-rotational",
                f"{path} is on a rotational disk{f' ({dev})' if dev else ''}: reading training data from it can starve "
                f"the GPUs",
                "move the data to an SSD/NVMe volume, or stage it onto local NVMe or into RAM before training",
            ))
        free, total = as_num(d.get("free_gib")), as_num(d.get("total_gib"))
        if free is not None and (free < DISK_MIN_FREE_GIB or (total and free < DISK_MIN_FREE_FRACTION * total)):
            of = f" of {total:.0f} GiB" if total else ""
            out.append(warn(
                "disk-full",
                f"the disk holding {path} has {free:.1f} GiB free{of}: checkpoints will fail to save",
                "free space (old checkpoints, ~/.cache/pip, ~/.cache/huggingface) or write outputs to another disk",
            ))
    return out


def _pip_lib(v: FactsView, stem: str) -> tuple[str, str] | None:
    found = v.wheels(LIB_PACKAGES.get(stem))
    if not found:
        return None
    name = max(found, key=lambda n: vt(found[n]))
    return name, found[name]


def check_ld_library_path(v: FactsView, k: Knowledge) -> list[Finding]:
    """LD_LIBRARY_PATH entries whose older CUDA libraries win over the pip wheels' (same soname)."""
    wants = v.cuda_frameworks()
    if not wants:
        return []
    # What the loader resolves for torch's own libraries was read (checks_loader says what LD_LIBRARY_PATH shadows):
    # torch's RPATH is searched before LD_LIBRARY_PATH, so only what cuDNN 8 dlopens by name (its sub-libraries,
    # pytorch/pytorch#119989) is still taken from LD_LIBRARY_PATH first.
    resolved = [fw.name for fw in wants] == ["torch"] and loader_explains(v)
    out = []
    for d in as_list(v.f.get("cuda_libs")):
        if not isinstance(d, dict) or d.get("from") != "LD_LIBRARY_PATH":
            continue
        older, maybe = _shadowing(v, d, resolved)
        if not older and not maybe:
            continue
        path = as_str(d.get("dir")) or "?"
        fix = drop_ld_path(v, path) + f" (drop {path}; the pip wheels bring their own libraries)"
        who = next((fw for fw in wants if fw.gpu is True), wants[0]).label
        if older:
            out.append(error(
                "ld-library-path",
                f"LD_LIBRARY_PATH entry {path} shadows the pip CUDA libraries {who} loads with older ones "
                f"({'; '.join(older)}): expect 'undefined symbol' or cuDNN version errors",
                fix,
            ))
        else:
            out.append(warn(
                "ld-library-path",
                f"LD_LIBRARY_PATH entry {path} holds {', '.join(maybe)} of unknown version: it is loaded before the "
                f"pip wheels' copies",
                fix,
            ))
    return out


def _shadowing(v: FactsView, d: dict[str, Any], resolved: bool) -> tuple[list[str], list[str]]:
    """(older, of unknown version) libraries of LD_LIBRARY_PATH directory ``d`` that a pip wheel of the same soname
    major provides; with ``resolved`` only cuDNN 8, whose sub-libraries it dlopens by name."""
    older, maybe = [], []
    for stem, ver in sorted(as_dict(d.get("libs")).items()):
        pip = _pip_lib(v, stem)
        if pip is None or major(ver) != major(pip[1]):
            continue  # another soname major is another library: no shadowing
        if resolved and not (stem == "libcudnn" and major(ver) == 8):
            continue
        if len(vt(ver)) == 1:
            maybe.append(f"{stem}.so.{ver} ({pip[0]} {pip[1]})")
        elif vcmp(ver, pip[1]) < 0 and not same_prefix(ver, pip[1]):
            older.append(f"{stem}.so.{ver} < {pip[0]} {pip[1]}")
    return older, maybe


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


CHECKS = (check_container_gpu, check_docker_toolkit, check_docker_daemon, check_wsl, check_shm, check_ram, check_disks,
          check_ld_library_path, check_gpu_lost, check_container_cuda)
