"""The local NVIDIA driver and GPUs: NVML through nvidia-ml-py first, ``nvidia-smi`` as a fallback."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field


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


def scan_nvml() -> GpuScan:
    try:
        import pynvml  # nvidia-ml-py
    except ImportError:
        return GpuScan(error="nvidia-ml-py is not installed")
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, version mismatch …
        return GpuScan(error=f"NVML: {exc}")
    try:
        scan = GpuScan(driver=_text(pynvml.nvmlSystemGetDriverVersion()), source="nvml")
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            try:
                major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(h)
                cc = f"{major}.{minor}"
            except Exception:
                cc = None
            try:
                mem = int(pynvml.nvmlDeviceGetMemoryInfo(h).total // (1024 * 1024))
            except Exception:
                mem = None
            scan.gpus.append(LocalGpu(i, _text(pynvml.nvmlDeviceGetName(h)), cc, mem))
        return scan
    except Exception as exc:
        return GpuScan(error=f"NVML: {exc}")
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def scan_nvidia_smi(timeout: float = 5.0) -> GpuScan:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return GpuScan(error="nvidia-smi not found")
    try:
        out = subprocess.run(
            [exe, "--query-gpu=index,name,compute_cap,driver_version,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=timeout, check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return GpuScan(error=f"nvidia-smi: {exc}")
    if out.returncode != 0:
        return GpuScan(error=(out.stdout + out.stderr).strip() or f"nvidia-smi exited {out.returncode}")
    return parse_nvidia_smi_csv(out.stdout)


def parse_nvidia_smi_csv(text: str) -> GpuScan:
    scan = GpuScan(source="nvidia-smi")
    for line in text.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 5:
            continue
        idx, name, cc, drv, mem = parts[:5]
        scan.driver = drv
        scan.gpus.append(
            LocalGpu(int(idx) if idx.isdigit() else len(scan.gpus), name, cc if cc not in ("", "[N/A]") else None,
                     int(float(mem)) if mem.replace(".", "").isdigit() else None)
        )
    return scan


def scan_gpus() -> GpuScan:
    scan = scan_nvml()
    if scan.source:
        return scan
    smi = scan_nvidia_smi()
    if smi.source:
        return smi
    smi.error = f"{scan.error}; {smi.error}"
    return smi
