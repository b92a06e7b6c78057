"""What podman and buildah must be told on this machine to start a container at all: which OCI runtime, and
which resource limits.

Both are measured from the machine, never assumed:

- **The runtime.** crun refuses to start containers on *hybrid* cgroups (v1 controllers under
  /sys/fs/cgroup plus a cgroup2 tree at /sys/fs/cgroup/unified: "cgroups in hybrid mode not supported"),
  runc starts them. On hybrid cgroups envman passes ``--runtime runc``; elsewhere the engine's own default
  stands. ``ENVMAN_OCI_RUNTIME`` names one explicitly.
- **Limits.** podman (as root) gives every container RLIMIT_NOFILE 1048576 and RLIMIT_NPROC 4194304; raising
  a hard limit needs CAP_SYS_RESOURCE, which a process in a container or sandbox often lacks, and then runc
  fails with "error setting rlimit type 7: operation not permitted". Without that capability envman asks for
  the limits it has itself (nproc capped at the kernel's pid_max: no more processes can exist anyway).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from envman.engine.errors import EngineError

CAP_SYS_RESOURCE = 24  # linux/capability.h


def cgroup_mode(mounts: str) -> str:
    """"unified" (cgroup v2 only), "hybrid" (v1 controllers + a v2 tree beside them), "legacy" (v1 only) or
    "none", from the text of /proc/self/mounts."""
    found = {(f[2], f[1] == "/sys/fs/cgroup") for f in map(str.split, mounts.splitlines()) if len(f) >= 3}  # (type, root?)
    v1 = any(fstype == "cgroup" for fstype, _ in found)
    v2_root, v2_elsewhere = ("cgroup2", True) in found, ("cgroup2", False) in found
    if v2_root and not v1:
        return "unified"
    if v1:
        return "hybrid" if v2_elsewhere or v2_root else "legacy"
    return "none"


@dataclass(frozen=True)
class RuntimeChoice:
    runtime: str | None  # None: the engine's own default
    why: str

    def args(self) -> list[str]:
        return ["--runtime", self.runtime] if self.runtime else []


def choose_runtime(mode: str, which: Callable[[str], str | None] | None = None,
                   env: Mapping[str, str] | None = None) -> RuntimeChoice:
    """The OCI runtime to pass (or None for the engine's default), with the reason said to the user."""
    env = os.environ if env is None else env
    which = which or shutil.which
    if env.get("ENVMAN_OCI_RUNTIME"):
        return RuntimeChoice(env["ENVMAN_OCI_RUNTIME"], "ENVMAN_OCI_RUNTIME")
    if mode != "hybrid":
        return RuntimeChoice(None, f"the engine's default runtime ({mode} cgroups)")
    if which("runc"):
        return RuntimeChoice("runc", "hybrid cgroups, where crun cannot start containers")
    found = "crun" if which("crun") else "no OCI runtime"
    raise EngineError(f"this machine has hybrid cgroups (v1 and v2 side by side), which crun cannot run containers on, "
                      f"and runc is not installed (found: {found})",
                      hint="install runc (`apt-get install -y runc`) or set ENVMAN_OCI_RUNTIME to a runtime that works here")


def has_capability(status: str, bit: int) -> bool:
    """Whether CapEff in the text of /proc/self/status holds capability ``bit``."""
    for line in status.splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> bit & 1)
    return True  # no such line (not Linux?): let the engine decide


def _limits(text: str) -> dict[str, tuple[str, str]]:
    """{"Max open files": (soft, hard), …} from the text of /proc/self/limits."""
    out = {}
    for line in text.splitlines()[1:]:
        parts = line.split()
        for name in ("Max open files", "Max processes"):
            if line.startswith(name) and len(parts) >= 5:
                soft, hard = parts[len(name.split()):len(name.split()) + 2]
                out[name] = (soft, hard)
    return out


def ulimit_args(status: str, limits: str, pid_max: str) -> list[str]:
    """``--ulimit`` options for ``podman run``: none when this process may raise hard limits, else its own."""
    if has_capability(status, CAP_SYS_RESOURCE):
        return []
    have = _limits(limits)
    args = []
    if "Max open files" in have:
        soft, hard = have["Max open files"]
        args += ["--ulimit", f"nofile={soft}:{hard}"]
    if "Max processes" in have:
        cap = int(pid_max) if pid_max.strip().isdigit() else None

        def capped(v: str) -> str:
            if v == "unlimited":
                return str(cap) if cap else "-1"
            return str(min(int(v), cap)) if cap else v

        soft, hard = have["Max processes"]
        args += ["--ulimit", f"nproc={capped(soft)}:{capped(hard)}"]
    return args


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except OSError:
        return ""


def machine_runtime() -> RuntimeChoice:
    return choose_runtime(cgroup_mode(_read("/proc/self/mounts")))


def machine_ulimits() -> list[str]:
    return ulimit_args(_read("/proc/self/status"), _read("/proc/self/limits"), _read("/proc/sys/kernel/pid_max"))
