"""The machine itself: OS, distro, kernel, glibc, container, WSL, CPUs, memory, /dev/shm, disks."""

from __future__ import annotations

import glob
import os
import re
from typing import Any

from .commands import read_text

MIB = 1024 * 1024
GIB = 1024 * MIB


def probe_system(project_dir: str) -> dict[str, Any]:
    u = os.uname()
    f: dict[str, Any] = {"os": u.sysname, "arch": u.machine, "kernel": u.release, "distro": _distro()}
    try:
        f["glibc"] = (os.confstr("CS_GNU_LIBC_VERSION") or "").split()[-1]  # "glibc 2.36"; unset: IndexError
    except (ValueError, OSError, AttributeError, IndexError):
        pass
    kind = container_kind()
    f["in_container"] = kind is not None
    if kind:
        f["container"] = kind
        image = container_cuda(os.environ)
        if image:
            f["container_cuda"] = image
    f["wsl"] = wsl_version(u.release)
    if f["wsl"] == 2:
        f["wsl_linux_driver"] = _wsl_linux_driver()
    f["cpu_count"] = _cpus()
    ram = _meminfo_mib()
    if ram:
        f["ram_mib"] = ram
    limit = _cgroup_memory_limit_mib()
    if limit and (not ram or limit < ram):
        f["ram_limit_mib"] = limit
    try:
        st = os.statvfs("/dev/shm")
        f["shm_mib"] = st.f_blocks * st.f_frsize // MIB
    except OSError:
        pass
    f["disks"] = _disks(project_dir)
    f["device_nodes"] = sorted(os.path.basename(p) for p in glob.glob("/dev/nvidia*")) + (
        ["dxg"] if os.path.exists("/dev/dxg") else []
    )
    return f


def _distro() -> str | None:
    text = read_text("/etc/os-release") or read_text("/usr/lib/os-release")
    if not text:
        return None
    kv = dict(re.findall(r'^([A-Z_]+)="?([^"\n]*)"?$', text, re.M))
    return kv.get("PRETTY_NAME") or " ".join(x for x in (kv.get("NAME"), kv.get("VERSION_ID")) if x) or None


def container_cuda(env: Any) -> dict[str, str] | None:
    """The CUDA image this container was started from, as NVIDIA's images say it in their ENV (CUDA_VERSION=12.1.1,
    NVIDIA_REQUIRE_CUDA="cuda>=12.1 …", NV_CUDNN_VERSION): what the NVIDIA toolkit compares with the driver."""
    out = {k: str(env[e]) for k, e in (("cuda", "CUDA_VERSION"), ("require", "NVIDIA_REQUIRE_CUDA"),
                                       ("cudnn", "NV_CUDNN_VERSION"), ("product", "NVIDIA_PRODUCT_NAME")) if env.get(e)}
    if "cudnn" not in out and env.get("CUDNN_VERSION"):
        out["cudnn"] = str(env["CUDNN_VERSION"])
    return out or None


def container_kind() -> str | None:
    """docker | podman | kubernetes | lxc | containerd | container, or None on a host."""
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return "kubernetes"
    if os.path.exists("/run/.containerenv"):
        return "podman"
    if os.path.exists("/.dockerenv"):
        return "docker"
    env = os.environ.get("container")
    if env:
        return env
    cg = read_text("/proc/1/cgroup", 1 << 16) or ""
    for word, kind in (("kubepods", "kubernetes"), ("docker", "docker"), ("containerd", "containerd"), ("lxc", "lxc")):
        if word in cg:
            return kind
    return None


def wsl_version(release: str) -> int:
    """2 for WSL2 kernels ('5.15.153.1-microsoft-standard-WSL2'), 1 for WSL1 ('4.4.0-19041-Microsoft'), 0 if not WSL."""
    r = release.lower()
    if "microsoft" not in r:
        return 0
    return 2 if ("wsl2" in r or "microsoft-standard" in r) else 1


def _wsl_linux_driver() -> list[str]:
    """Traces of a Linux NVIDIA driver inside WSL2, where only the Windows driver's libraries belong."""
    pats = ("/usr/lib/x86_64-linux-gnu/libcuda.so.*", "/usr/lib64/libcuda.so.*", "/usr/lib/libcuda.so.*")
    found = [p for pat in pats for p in sorted(glob.glob(pat))
             if "/usr/lib/wsl/" not in os.path.realpath(p) and re.search(r"libcuda\.so\.\d+\.\d+", p)]
    found += sorted(glob.glob("/var/lib/dpkg/info/nvidia-driver-*.list"))[:1]
    if os.path.exists("/proc/driver/nvidia/version"):
        found.append("/proc/driver/nvidia/version")
    return found


def _cpus() -> int | None:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


def _meminfo_mib() -> int | None:
    text = read_text("/proc/meminfo", 1 << 14) or ""
    m = re.search(r"^MemTotal:\s+(\d+) kB", text, re.M)
    return int(m.group(1)) // 1024 if m else None


def _cgroup_memory_limit_mib() -> int | None:
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        t = (read_text(path, 64) or "").strip()
        if t.isdigit() and int(t) < (1 << 60):  # cgroup v1 says "unlimited" with a huge number
            return int(t) // MIB
    return None


def _disks(project_dir: str) -> list[dict[str, Any]]:
    out = []
    seen: set[int] = set()
    paths = [os.path.abspath(project_dir)]
    data = os.path.join(paths[0], "data")
    if os.path.isdir(data):
        paths.append(os.path.realpath(data))
    for p in paths:
        try:
            st = os.stat(p)
            vfs = os.statvfs(p)
        except OSError:
            continue
        if st.st_dev in seen:
            continue
        seen.add(st.st_dev)
        out.append({"path": p, "free_gib": round(vfs.f_bavail * vfs.f_frsize / GIB, 1),
                    "total_gib": round(vfs.f_blocks * vfs.f_frsize / GIB, 1), **_block_device(p, st.st_dev)})
    return out


def _block_device(path: str, dev: int) -> dict[str, Any]:
    """device name, rotational flag and whether it is a virtual disk (whose flag means nothing)."""
    sys_dir = None
    if os.major(dev) != 0:
        sys_dir = os.path.realpath(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}")
    else:  # overlay, btrfs subvolumes …: the mount's source device, when it is one
        src = _mount_source(path)
        if src and src.startswith("/dev/"):
            sys_dir = os.path.realpath(f"/sys/class/block/{os.path.basename(os.path.realpath(src))}")
    if not sys_dir or not os.path.isdir(sys_dir):
        return {}
    name = os.path.basename(sys_dir)
    rot = read_text(os.path.join(sys_dir, "queue", "rotational"), 8)
    if rot is None:  # a partition: the flag lives on its disk
        rot = read_text(os.path.join(os.path.dirname(sys_dir), "queue", "rotational"), 8)
    d: dict[str, Any] = {"device": name}
    if rot is not None and rot.strip() in ("0", "1"):
        d["rotational"] = rot.strip() == "1"
    if "/virtio" in sys_dir or name.startswith(("vd", "xvd")):
        d["virtual"] = True
    return d


def _mount_source(path: str) -> str | None:
    best, src = "", None
    for line in (read_text("/proc/self/mountinfo") or "").splitlines():
        parts = line.split(" - ")
        if len(parts) != 2:
            continue
        left, right = parts[0].split(), parts[1].split()
        if len(left) < 5 or len(right) < 2:
            continue
        mnt = left[4]
        if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
            best, src = mnt, right[1]
    return src
