"""The local NVIDIA driver and GPUs: NVML through nvidia-ml-py first, ``nvidia-smi`` as a fallback."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from .commands import read_text, run_command


@dataclass(frozen=True)
class LocalGpu:
    index: int
    name: str
    cc: str | None  # "9.0"
    mem_total_mib: int | None


@dataclass
class GpuScan:
    driver: str | None = None
    gpus: list[LocalGpu] = field(default_factory=list)
    source: str | None = None  # "nvml" | "nvidia-smi"
    error: str | None = None  # why neither answered, verbatim where possible


def _text(v: object) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def scan_nvidia_smi(timeout: float = 5.0) -> GpuScan:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return GpuScan(error="nvidia-smi not found")
    try:
        out = subprocess.run(
            [exe, "--query-gpu=index,name,compute_cap,driver_version,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=timeout, check=False,
            stdin=subprocess.DEVNULL,  # under `envman mcp`, stdin is the protocol channel
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return GpuScan(error=f"nvidia-smi: {exc}")
    if out.returncode != 0:
        return GpuScan(error=(out.stdout + out.stderr).strip() or f"nvidia-smi exited {out.returncode}")
    return parse_nvidia_smi_csv(out.stdout)


def parse_nvidia_smi_csv(text: str) -> GpuScan:
    gpus = parse_smi_query(text, ["index", "name", "compute_cap", "driver_version", "memory.total"])
    return _scan(gpus[-1].get("driver_version") if gpus else None, gpus, "nvidia-smi")


def _scan(driver: str | None, gpus: list[dict[str, Any]], source: str) -> GpuScan:
    return GpuScan(driver, [LocalGpu(g["index"], g["name"], g.get("cc"), g.get("mem_total_mib")) for g in gpus], source)


def scan_gpus() -> GpuScan:
    """The driver and GPUs: NVML (the doctor's query), else nvidia-smi."""
    nvml, err, _ = _nvml_facts()
    if nvml is not None:
        return _scan(nvml["driver"], nvml["gpus"], "nvml")
    smi = scan_nvidia_smi()
    if not smi.source:
        smi.error = f"{err}; {smi.error}"
    return smi


# --- doctor facts (docs/facts.md): driver, per-GPU health, processes ------------------------------

MIB = 1024 * 1024
# NVML's clocks-event-reason bits (nvml.h, nvmlClocksEventReason*): API constants, not compatibility data.
REASON_BITS = (
    (0x1, "gpu_idle"), (0x2, "applications_clocks_setting"), (0x4, "sw_power_cap"), (0x8, "hw_slowdown"),
    (0x10, "sync_boost"), (0x20, "sw_thermal_slowdown"), (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"), (0x100, "display_clock_setting"),
)
_SMI_RICH = (
    "index,name,uuid,compute_cap,driver_version,memory.total,memory.used,temperature.gpu,power.draw,power.limit,"
    "power.default_limit,{reasons}.active,ecc.errors.uncorrected.volatile.total,mig.mode.current"
)
_NA = ("", "[n/a]", "n/a", "[not supported]", "not supported", "[unknown error]", "[insufficient permissions]")


def reason_names(mask: int) -> list[str]:
    return [name for bit, name in REASON_BITS if mask & bit]


def probe_nvidia(timeout: float = 5.0) -> dict[str, Any]:
    """Driver and GPU facts: NVML, else ``nvidia-smi`` (recording NVML's error), the kernel module last."""
    f: dict[str, Any] = {}
    mod = kernel_module_version()
    if mod:
        f["driver_module"] = mod
    lib = nvml_library_version()
    if lib:
        f["nvml_lib"] = lib
    pci = pci_nvidia_gpus()
    if pci is not None:
        f["pci_nvidia_gpus"] = pci
    err: str | None
    if not _dev_nodes() and not os.path.exists("/dev/dxg"):
        # NVML needs /dev/nvidiactl (or WSL2's /dev/dxg): without them, skip loading it (~10 ms).
        got, err, lib_missing = None, "NVML: no NVIDIA device nodes (/dev/nvidia*)", True
    else:
        got, err, lib_missing = _nvml_facts()
    if got is not None:
        f.update(got)
        f["driver_source"] = "nvml"
        return f
    f["nvml_error"] = err
    exe = shutil.which("nvidia-smi")
    if exe:
        smi, smi_err = _smi_facts(exe, timeout)
        if smi is not None:
            f.update(smi)
            f["driver_source"] = "nvidia-smi"
            return f
        f["nvidia_smi_error"] = smi_err
    if mod:
        f["driver"] = mod
        f["driver_source"] = "kernel-module"
    if lib_missing and not exe and not mod and not any(n[len("nvidia"):].isdigit() for n in _dev_nodes()):
        f["gpus"] = []  # no driver anywhere: known to have no usable GPU (not merely unknown)
    return f


def _dev_nodes() -> list[str]:
    try:
        return [n for n in os.listdir("/dev") if n.startswith("nvidia")]
    except OSError:
        return []


def kernel_module_version() -> str | None:
    text = read_text("/proc/driver/nvidia/version") or ""
    m = re.search(r"Kernel Module(?: for [\w-]+)?\s+(\d+\.\d+(?:\.\d+)?)", text)
    if m:
        return m.group(1)
    v = (read_text("/sys/module/nvidia/version") or "").strip()
    return v or None


def nvml_library_version() -> str | None:
    """The user-space driver's version, from libnvidia-ml.so.<version>'s file name."""
    for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/lib/aarch64-linux-gnu"):
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for n in names:
            m = re.fullmatch(r"libnvidia-ml\.so\.(\d+\.\d+(?:\.\d+)?)", n)
            if m:
                return m.group(1)
    return None


def pci_nvidia_gpus() -> int | None:
    """NVIDIA display/3D controllers on the PCI bus, whether or not a driver answers."""
    base = "/sys/bus/pci/devices"
    try:
        devs = os.listdir(base)
    except OSError:
        return None
    return sum(1 for d in devs if (read_text(f"{base}/{d}/vendor") or "").strip() == "0x10de"
               and (read_text(f"{base}/{d}/class") or "").startswith("0x03"))  # a display or 3D controller


def _nvml_facts() -> tuple[dict[str, Any] | None, str | None, bool]:
    """(facts, error, library missing)."""
    try:
        import pynvml  # nvidia-ml-py
    except ImportError:
        return None, "nvidia-ml-py is not installed", False
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # LibraryNotFound, DriverNotLoaded, LibRmVersionMismatch …
        missing = getattr(exc, "value", None) == getattr(pynvml, "NVML_ERROR_LIBRARY_NOT_FOUND", object())
        return None, f"NVML: {exc}", missing
    try:
        f: dict[str, Any] = {"driver": _text(pynvml.nvmlSystemGetDriverVersion())}
        cv = _try(pynvml.nvmlSystemGetCudaDriverVersion_v2) or _try(pynvml.nvmlSystemGetCudaDriverVersion)
        if cv:
            f["driver_cuda"] = f"{cv // 1000}.{(cv % 1000) // 10}"
        gpus, procs = [], []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            gpus.append(_nvml_gpu(pynvml, h, i))
            for p in _try(pynvml.nvmlDeviceGetComputeRunningProcesses, h) or []:
                used = getattr(p, "usedGpuMemory", None)
                procs.append({"gpu": i, "pid": p.pid, "used_mib": used // MIB if isinstance(used, int) else None,
                              "name": (read_text(f"/proc/{p.pid}/comm", 4096) or "").strip() or None})
        f["gpus"] = gpus
        f["gpu_processes"] = procs
        return f, None, False
    except Exception as exc:
        return None, f"NVML: {exc}", False
    finally:
        _try(pynvml.nvmlShutdown)


def _nvml_gpu(pynvml: Any, h: Any, i: int) -> dict[str, Any]:
    g: dict[str, Any] = {"index": i, "name": _text(pynvml.nvmlDeviceGetName(h))}
    uuid = _try(pynvml.nvmlDeviceGetUUID, h)
    if uuid:
        g["uuid"] = _text(uuid)
    cc = _try(pynvml.nvmlDeviceGetCudaComputeCapability, h)
    if cc:
        g["cc"] = f"{cc[0]}.{cc[1]}"
    mem = _try(pynvml.nvmlDeviceGetMemoryInfo, h)
    if mem is not None:
        g["mem_total_mib"] = int(mem.total // MIB)
        g["mem_used_mib"] = int(mem.used // MIB)
    t = _try(pynvml.nvmlDeviceGetTemperature, h, pynvml.NVML_TEMPERATURE_GPU)
    if t is not None:
        g["temp_c"] = t
    for key, fn in (("power_draw_w", pynvml.nvmlDeviceGetPowerUsage),
                    ("power_limit_w", pynvml.nvmlDeviceGetEnforcedPowerLimit),
                    ("default_power_limit_w", pynvml.nvmlDeviceGetPowerManagementDefaultLimit)):
        mw = _try(fn, h)
        if mw is not None:
            g[key] = round(mw / 1000, 1)
    reasons = (getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
               or pynvml.nvmlDeviceGetCurrentClocksThrottleReasons)
    mask = _try(reasons, h)
    if mask is not None:
        g["clocks_event_reasons"] = reason_names(int(mask))
    ecc = _try(pynvml.nvmlDeviceGetTotalEccErrors, h, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
               pynvml.NVML_VOLATILE_ECC)
    if ecc is not None:
        g["ecc_uncorrected"] = int(ecc)
    rr = _try(pynvml.nvmlDeviceGetRemappedRows, h)
    if rr is not None:
        g["row_remap_pending"] = bool(rr[2])
        g["row_remap_failed"] = bool(rr[3])
    mig = _try(pynvml.nvmlDeviceGetMigMode, h)
    if mig is not None:
        g["mig"] = bool(mig[0])
    return g


def _try(fn: Callable[..., Any], *args: Any) -> Any:
    """An NVML query that a GPU may not support (NotSupported on GeForce, NoPermission in containers)."""
    try:
        return fn(*args)
    except Exception:
        return None


def _smi_facts(exe: str, timeout: float) -> tuple[dict[str, Any] | None, str | None]:
    out = None
    for reasons in ("clocks_event_reasons", "clocks_throttle_reasons"):
        fields = _SMI_RICH.format(reasons=reasons)
        out = run_command([exe, f"--query-gpu={fields}", "--format=csv,noheader,nounits"], timeout)
        if out.ok:
            f = {"gpus": parse_smi_query(out.out, fields.split(","))}
            if f["gpus"]:
                f["driver"] = f["gpus"][0].pop("driver_version", None)
                for g in f["gpus"][1:]:
                    g.pop("driver_version", None)
            apps = run_command([exe, "--query-compute-apps=gpu_uuid,pid,process_name,used_memory",
                                "--format=csv,noheader,nounits"], timeout)
            if apps.ok:
                f["gpu_processes"] = parse_smi_apps(apps.out, {g.get("uuid"): g["index"] for g in f["gpus"]})
            return f, None
        if "not a valid field" not in out.text.lower():
            break
    basic = scan_nvidia_smi(timeout)
    if basic.source:
        return {"driver": basic.driver, "gpus": [asdict(g) for g in basic.gpus]}, None
    return None, (out.error or out.text) if out else basic.error


def _na(v: str) -> str | None:
    return None if v.strip().lower() in _NA else v.strip()


def _num(v: str | None) -> float | None:
    try:
        return float(v) if v is not None else None
    except ValueError:
        return None


def parse_smi_query(text: str, fields: list[str]) -> list[dict[str, Any]]:
    """Rows of ``nvidia-smi --query-gpu=<fields> --format=csv,noheader,nounits`` as facts.gpus entries."""
    gpus: list[dict[str, Any]] = []
    for line in text.strip().splitlines():
        vals = [_na(p) for p in line.split(",")]
        if len(vals) != len(fields):
            continue
        row = dict(zip(fields, vals))
        idx = row.get("index")
        g: dict[str, Any] = {"index": int(idx) if idx and idx.isdigit() else len(gpus), "name": row.get("name") or "NVIDIA GPU"}
        for src, key in (("uuid", "uuid"), ("compute_cap", "cc"), ("driver_version", "driver_version")):
            if row.get(src):
                g[key] = row[src]
        for src, key, conv in (
            ("memory.total", "mem_total_mib", int), ("memory.used", "mem_used_mib", int),
            ("temperature.gpu", "temp_c", int),
            ("power.draw", "power_draw_w", float), ("power.limit", "power_limit_w", float),
            ("power.default_limit", "default_power_limit_w", float),
            ("ecc.errors.uncorrected.volatile.total", "ecc_uncorrected", int),
        ):
            n = _num(row.get(src))
            if n is not None:
                g[key] = conv(n)
        reasons = row.get("clocks_event_reasons.active") or row.get("clocks_throttle_reasons.active")
        if reasons:
            try:
                g["clocks_event_reasons"] = reason_names(int(reasons, 16))
            except ValueError:
                pass
        mig = row.get("mig.mode.current")
        if mig:
            g["mig"] = mig.lower() == "enabled"
        gpus.append(g)
    return gpus


def parse_smi_apps(text: str, uuid_index: dict[str | None, int]) -> list[dict[str, Any]]:
    procs = []
    for line in text.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 4 or not parts[1].isdigit():
            continue
        used = _num(_na(parts[3]))
        procs.append({"gpu": uuid_index.get(parts[0], 0), "pid": int(parts[1]),
                      "used_mib": int(used) if used is not None else None, "name": os.path.basename(parts[2]) or None})
    return procs
