"""The machine under the driver: libcuda, cuda-compat, NVSwitch and Fabric Manager, kernel module, Secure Boot."""

from __future__ import annotations

import glob
import os
import re
import time
from typing import Any

from .commands import read_text, run_command

LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
            "/usr/local/nvidia/lib64", "/usr/local/nvidia/lib", "/usr/lib/wsl/lib")
_VER = re.compile(r"\.so\.(\d+(?:\.\d+)+)\Z")
SECURE_BOOT_VAR = "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
SIG_MAGIC = b"~Module signature appended~\n"


def probe_host(timeout: float = 2.0) -> dict[str, Any]:
    f: dict[str, Any] = {"libcuda": _libcuda()}
    from .loader import resolve

    # a name the loader finds no file for is recorded with path null (known absent, not unknown)
    f["libcuda_loaded"] = [resolve(n) or {"name": n, "path": None} for n in ("libcuda.so.1", "libcuda.so")]
    f["cuda_compat"] = [{"path": p, "version": m.group(1)} for p in sorted(glob.glob("/usr/local/cuda*/compat/libcuda.so.*"))
                        if (m := _VER.search(p))]
    switches = [n for n in glob.glob("/dev/nvidia-nvswitch*") if not n.endswith("ctl")]
    switches += glob.glob("/proc/driver/nvidia-nvswitch/devices/*")
    f["nvswitch_count"] = len(set(os.path.basename(s) for s in switches))
    if f["nvswitch_count"]:
        ran = run_command(["systemctl", "is-active", "nvidia-fabricmanager"], timeout)
        f["fabricmanager"] = {"active": ran.out.strip() or ran.error or "unknown"}
        ver = run_command(["nv-fabricmanager", "--version"], timeout)
        m = re.search(r"(\d+\.\d+(?:\.\d+)?)", ver.text)
        if m:
            f["fabricmanager"]["version"] = m.group(1)
    f["nvidia_ko"] = _modules(os.uname().release)
    sb = _secure_boot()
    if sb is not None:
        f["secure_boot"] = sb
        if sb and f["nvidia_ko"]:
            signed = _signed(f["nvidia_ko"][0])
            if signed is not None:
                f["nvidia_ko_signed"] = signed
    return f


def _libcuda() -> dict[str, Any] | None:
    for p in (os.path.join(d, "libcuda.so.1") for d in LIB_DIRS):
        if os.path.exists(p):
            m = _VER.search(os.path.realpath(p))
            return {"path": p, **({"version": m.group(1)} if m else {})}
    return None


def _modules(release: str, budget_s: float = 0.5) -> list[str]:
    """nvidia.ko* files built for ``release`` (DKMS puts them in updates/dkms, distributions in kernel/…)."""
    root = os.path.join("/lib/modules", release)
    end = time.monotonic() + budget_s
    found = []
    for dirpath, dirs, files in os.walk(root):
        if time.monotonic() > end or dirpath.count(os.sep) - root.count(os.sep) > 5:
            dirs[:] = []
            continue
        found += [os.path.join(dirpath, n) for n in files if re.fullmatch(r"nvidia\.ko(\.\w+)?", n)]
    return sorted(found)


def _secure_boot() -> bool | None:
    if not os.path.isdir("/sys/firmware/efi"):
        return None
    try:
        with open(SECURE_BOOT_VAR, "rb") as fh:
            data = fh.read(8)
    except OSError:
        return False if os.path.isdir("/sys/firmware/efi/efivars") else None
    return len(data) >= 5 and data[4] == 1


def _signed(path: str) -> bool | None:
    """A plain .ko carries the appended-signature magic at its end; a compressed one cannot tell here."""
    if not path.endswith(".ko"):
        return None
    try:
        with open(path, "rb") as fh:
            fh.seek(-len(SIG_MAGIC), os.SEEK_END)
            return fh.read() == SIG_MAGIC
    except OSError:
        return None


def read_workload(project_dir: str) -> dict[str, Any] | None:
    """``workload.precision`` of the project's envman.yaml, read line by line (no yaml here)."""
    text = read_text(os.path.join(project_dir, "envman.yaml"), 1 << 16)
    if not text:
        return None
    m = re.search(r"^workload:\s*\n((?:[ \t]+.*\n?)*)", text, re.M)
    if not m:
        return None
    p = re.search(r"^[ \t]+precision:[ \t]*['\"]?([\w-]+)", m.group(1), re.M)
    return {"precision": p.group(1)} if p else None


PIN_FILES = ("requirements.txt", "requirements-gpu.txt", "requirements/base.txt")


def read_framework_pins(project_dir: str) -> dict[str, Any] | None:
    """``{"torch": {"version": "1.13.1", "file": "requirements.txt"}}``: framework pins of the project's
    envman.lock requirements or requirements files (the first file that pins one wins)."""
    from ..frameworks import registered

    out: dict[str, Any] = {}
    dists = {d: p.name for p in registered() for d in p.distributions}  # tensorflow-cpu==2.15.1 pins tensorflow
    for name in PIN_FILES:
        text = read_text(os.path.join(project_dir, name), 1 << 20)
        if not text:
            continue
        for m in re.finditer(r"^\s*([A-Za-z][\w.-]*)\s*==\s*([\w.+!-]+)", text, re.M):
            fw = dists.get(re.sub(r"[-_.]+", "-", m.group(1)).lower())
            if fw and fw not in out:
                out[fw] = {"version": m.group(2), "file": name}
    return out or None
