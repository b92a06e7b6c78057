"""Checks on the driver, the GPUs and whether the installed frameworks (and CUDA library wheels) can use them."""

from __future__ import annotations

import re
from typing import Any

from ..frameworks.base import Installed
from ..versions import major, sm, split_arch_list, vcmp
from .checks_env import gpu_lost
from .checks_extensions import tf_windows_native
from .checks_host import kernel_module_missing
from .checks_packages import cuda_major_of
from .findings import Finding, error, info, warn
from .knowledge import Knowledge, Release, covers, gpu_key
from .remedies import build_for, capability, fmt_archs, install, mib
from .view import FactsView, as_dict, as_list, as_num, as_str, group_label

# Policy, not compatibility data: memory other processes may hold before we call the GPU "busy".
HELD_FRACTION = 0.10
# A power limit this close to the default is the default (boards report 699.99 W against 700 W).
POWER_TOLERANCE = 0.98
_THERMAL = ("sw_thermal_slowdown", "hw_thermal_slowdown")
_HW_SLOW = ("hw_slowdown", "hw_power_brake_slowdown")


def _cuda_frameworks(v: FactsView, k: Knowledge) -> list[tuple[Installed, str, Release | None]]:
    """(framework, CUDA X.Y, release) of each installed CUDA build (untold CUDA: the matrix's)."""
    out = []
    for fw in v.cuda_frameworks():
        rel = k.release(fw.name, fw.base)
        b = k.build_of(fw.name, fw.base, fw.variant, fw.gpu)
        cuda = fw.cuda or (b.cuda if b else None)
        if cuda:
            out.append((fw, cuda, rel))
    return out


def check_driver(v: FactsView, k: Knowledge) -> list[Finding]:
    """The driver below the runtime's minor-version-compat floor (or, told only its CUDA, below that)."""
    if not v.driver and not v.driver_cuda:
        return []
    out = []
    for fw, cuda, rel in _cuda_frameworks(v, k):
        if k.driver_mode(v.driver, cuda, v.driver_cuda) != "too-old":
            continue
        full, floor = k.full_driver(cuda), k.floor_driver(cuda)
        need = f"CUDA {cuda} needs driver ≥ {full or floor}"
        if full and floor and vcmp(full, floor) != 0:
            need += f" (≥ {floor} with minor-version compatibility)"
        if v.driver_cuda:
            need += f"; this driver supports CUDA ≤ {v.driver_cuda}"
        remedy = f"install NVIDIA driver ≥ {full or floor}" if (full or floor) else "upgrade the NVIDIA driver"
        ceilings = [(c, k.driver_ceiling(c)) for c in v.gpu_ccs()]
        stuck = [(c, ce) for c, ce in ceilings if ce is not None and vcmp(ce[1], floor or full or "0") < 0]
        if stuck and v.driver:
            c, (branch, last) = stuck[0]
            remedy = (f"no driver that new runs a {c[0]}.{c[1]} GPU (support ends with {branch}, last {last}): "
                      "keep this driver")
        alt = k.best_build(fw.name, ccs=v.gpu_ccs(), driver=v.driver, prefer=rel, python=v.python) if v.driver else None
        if alt:
            arel, ab = alt
            remedy += f", or the build that runs on driver {v.driver}: {install(arel, ab, v)}"
        out.append(error("driver-too-old", f"{_driver_words(v)} is too old for {fw.label}: {need}", remedy))
    return out


def _driver_words(v: FactsView) -> str:
    return f"driver {v.driver}" if v.driver else f"the driver (CUDA {v.driver_cuda})"


def _fatbin_archs(v: FactsView, name: str) -> tuple[list[Any], list[str], str] | None:
    """The arch list in a framework's own library (facts ``framework_libs``: libtorch_cuda.so's fat binary), as
    torch.cuda.get_arch_list() would say it: the SASS most of its kernels carry, and its PTX."""
    sass: set[str] = set()
    ptx: set[str] = set()
    files = []
    for f in as_list(as_dict(v.f.get("framework_libs")).get(name)):
        f = as_dict(f)
        if not as_list(f.get("sass")) and not as_list(f.get("ptx")):
            continue
        rare = {str(a) for a in as_list(f.get("sass_rare"))}
        sass |= {str(a) for a in as_list(f.get("sass")) if str(a) not in rare}
        ptx |= {str(a) for a in as_list(f.get("ptx"))}
        files.append(str(f.get("file")))
    if not files:
        return None
    sass_l, ptx_l = (sorted(s, key=lambda a: int(a.split("_", 1)[1])) for s in (sass, ptx))
    return sass_l + ptx_l, ptx_l, f"the fat binary of {', '.join(files)}"


def _archs(v: FactsView, fw: Installed, k: Knowledge) -> tuple[list[Any], list[str], str] | None:
    """(SASS, PTX, where read) of a build: recorded (--deep), else its fat binary, else the matrix's."""
    if fw.arch_list:
        ptx = split_arch_list(fw.arch_list)[1]
        return list(fw.arch_list), [f"compute_{a[0]}{a[1]}" for a in ptx], fw.arch_source
    b = k.build_of(fw.name, fw.base, fw.variant, fw.gpu)
    return _fatbin_archs(v, fw.name) or ((list(b.archs), list(b.ptx), "envman's matrix") if b else None)


def check_arch(v: FactsView, k: Knowledge) -> list[Finding]:
    """Every GPU needs SASS of its own major (minor ≤ the device's) in the build, or at least PTX."""
    ccs = v.gpu_ccs()
    if not ccs:
        return []
    out: list[Finding] = []
    for fw in v.cuda_frameworks():
        archs = _archs(v, fw, k)
        rel = k.release(fw.name, fw.base)
        if archs is None and rel is not None:  # (an unknown release is reported once, by not-in-matrix)
            out.append(info(
                "arch-unknown",
                f"envman's matrix has no {fw.variant} build of {fw.name} {rel.line}: whether {fw.label} covers "
                f"{fmt_archs(ccs)} is not checked",
                f"run `envman doctor --deep` to read the arch list from {fw.name} itself",
            ))
        elif archs is not None:
            out += _arch_findings(v, k, fw, rel, archs, ccs)
    return out


def _arch_findings(v: FactsView, k: Knowledge, fw: Installed, rel: Release | None,
                   archs: tuple[list[Any], list[str], str], ccs: list[tuple[int, int]]) -> list[Finding]:
    sass_l, ptx_l, src = archs
    shown = fmt_archs(split_arch_list(sass_l)[0])
    out = []
    for c in ccs:
        how = covers(sass_l, ptx_l, c)
        if how == "sass":
            continue
        who = group_label(v.gpus_with_cc(c))
        if how == "ptx" and fw.ptx_everywhere:
            out.append(info(
                "arch-ptx-only",
                f"{who} is {capability(c)} and runs {fw.label} through PTX JIT (no SASS for it): the first start "
                f"compiles kernels for minutes",
                "set CUDA_CACHE_MAXSIZE=4294967296 so the JIT cache keeps the compiled kernels",
            ))
            continue
        fix = build_for(k, fw.name, v, prefer=rel) or _ptx_release(k, fw, c) or (
            f"no {fw.name} build in envman's matrix carries {sm(c)}: build {fw.name} from source for "
            f"compute capability {c[0]}.{c[1]}"
        )
        if how == "ptx":
            out.append(warn(
                "arch-ptx-only",
                f"{who} is {capability(c)} and has no SASS in {fw.label} (SASS {shown}, from {src}): it runs only "
                f"through PTX JIT — minutes of compilation at start, and kernels without PTX fail",
                fix,
            ))
        else:
            out.append(error(
                "arch-not-covered",
                f"{who} is {capability(c)}, not in {fw.label}'s arch list ({shown}, from {src}): CUDA kernels "
                f"fail with 'no kernel image is available for execution on the device'",
                fix,
            ))
    return out


def _ptx_release(k: Knowledge, fw: Installed, c: tuple[int, int]) -> str | None:
    """For a framework whose kernels all carry PTX: the newest release that reaches ``c`` at least through it."""
    if not fw.ptx_everywhere:
        return None
    rel = next((r for r in k.releases.get(fw.name, ()) for b in r.builds
                if not b.is_cpu and covers(b.archs, b.ptx, c)), None)
    return install(rel) if rel else None


def check_cpu_build(v: FactsView, k: Knowledge) -> list[Finding]:
    """A CPU-only build on a machine with an NVIDIA GPU."""
    if not v.gpus:
        return []
    out = []
    where = f"this machine has {v.gpu_summary()}" + (f" (driver {v.driver})" if v.driver else "")
    for fw in v.frameworks:
        if not fw.cpu_only or (fw.name == "tensorflow" and tf_windows_native(v, k)):
            continue
        rel = k.release(fw.name, fw.base)
        # no variant: one GPU build per release (TensorFlow), whose install says it all
        fix = (install(rel) if rel else None) if fw.variant is None else build_for(k, fw.name, v, prefer=rel)
        fix = fix or f"install a CUDA build of {fw.name}"
        if fw.cpu_undo:
            fix = f"{fw.cpu_undo} {fix}"
        verdict = f"{fw.label} is a CPU-only build, but {where}: training will not use the GPU"
        if fw.cpu_why:
            verdict += f" ({fw.cpu_why})"
        out.append(error("cpu-only-build", verdict, fix))
    return out


def check_nvml(v: FactsView, k: Knowledge) -> list[Finding]:
    """NVML driver/library mismatch (driver upgraded, old kernel module still loaded); other smi failures."""
    smi = as_str(v.f.get("nvidia_smi_error")) or ""
    nvml = as_str(v.f.get("nvml_error")) or ""
    mod, lib = as_str(v.f.get("driver_module")), as_str(v.f.get("nvml_lib"))
    differ = bool(mod and lib and vcmp(mod, lib) != 0)
    if differ or "mismatch" in smi.lower() or "mismatch" in nvml.lower():
        parts = [f"kernel module {mod} is loaded, user-space library is {lib}"] if differ else []
        quote = smi or nvml
        if quote:
            parts.append(f"'{quote.splitlines()[0].strip()}'")
        return [error(
            "nvml-mismatch",
            "NVIDIA driver/library version mismatch" + (": " + "; ".join(parts) if parts else ""),
            "reboot, or stop every GPU process and reload the kernel module: "
            "sudo rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && sudo modprobe nvidia",
        )]
    if smi and not v.gpus and not kernel_module_missing(v) and not gpu_lost(v):
        return [error(
            "nvidia-smi-failed",
            f"nvidia-smi fails: '{smi.splitlines()[0].strip()}'",
            "check that the kernel module is loaded (lsmod | grep nvidia; sudo dmesg | grep -i nvrm); after a kernel "
            "update, reinstall the driver so DKMS rebuilds the module, then reboot",
        )]
    return []


def check_no_driver(v: FactsView, k: Knowledge) -> list[Finding]:
    """No GPU answered on a host: an error when one sits on the PCI bus, else a note for a CUDA build."""
    if v.gpus or not v.gpus_known or v.in_container or v.wsl == 1 or v.f.get("nvidia_smi_error"):
        return []
    fws = _cuda_frameworks(v, k)
    cuda = fws[0][1] if fws else None
    need = (k.full_driver(cuda) or k.floor_driver(cuda)) if cuda else None
    pci = as_num(v.f.get("pci_nvidia_gpus"))
    if pci:
        why = as_str(v.f.get("nvml_error"))
        return [error(
            "no-driver",
            f"{pci:.0f} NVIDIA GPU{'s' if pci != 1 else ''} on the PCI bus, but no NVIDIA driver answers"
            + (f" ({why})" if why else ""),
            f"install the NVIDIA driver{f' ≥ {need}' if need else ''} and reboot; if it is installed, load it "
            "(sudo modprobe nvidia; sudo dmesg | grep -i nvrm says why it fails)",
        )]
    if not fws:
        return []
    fw, cuda, _ = fws[0]
    return [info(
        "no-gpu",
        f"no NVIDIA GPU or driver found: {fw.label} (CUDA {cuda}) will run on the CPU",
        f"if this machine has an NVIDIA GPU, install driver ≥ {need}" if need else None,
    )]


def check_visible_devices(v: FactsView, k: Knowledge) -> list[Finding]:
    """CUDA_VISIBLE_DEVICES that hides every GPU or names a missing one (CUDA stops at the first bad entry)."""
    if "CUDA_VISIBLE_DEVICES" not in v.env or not v.gpus:
        return []
    val = v.env["CUDA_VISIBLE_DEVICES"]
    n = len(v.gpus)
    entries = [e.strip() for e in val.split(",")] if val.strip() else []
    visible: list[str] = []
    bad = None
    for e in entries:
        if re.fullmatch(r"\d+", e):
            ok = int(e) < n
        elif e.startswith("GPU-"):
            uuids = [g.uuid for g in v.gpus if g.uuid]
            ok = not uuids or any(u.startswith(e) for u in uuids)  # a unique prefix is enough for CUDA
        else:
            ok = e.startswith("MIG-")
        if not ok:
            bad = e
            break
        visible.append(e)
    all_idx = ",".join(str(i) for i in range(n))
    if not visible:
        why = f" (its entry {bad!r} does not exist)" if bad is not None and bad != "" else ""
        return [error(
            "cuda-visible-devices",
            f"CUDA_VISIBLE_DEVICES={val!r} hides every GPU{why}; {n} present: {v.gpu_summary()}",
            f"unset CUDA_VISIBLE_DEVICES, or export CUDA_VISIBLE_DEVICES={all_idx}",
        )]
    if bad is not None:
        keep = [e for e in entries if e != bad and not (e.isdigit() and int(e) >= n)]
        return [warn(
            "cuda-visible-devices",
            f"CUDA_VISIBLE_DEVICES={val!r} names GPU {bad!r}, which does not exist (GPUs here: {all_idx}): CUDA "
            f"stops at that entry, so only {','.join(visible)} {'is' if len(visible) == 1 else 'are'} visible",
            f"export CUDA_VISIBLE_DEVICES={','.join(keep)}",
        )]
    return []


def check_health(v: FactsView, k: Knowledge) -> list[Finding]:
    """Thermal slowdown, a lowered power limit, uncorrected ECC errors, pending row remaps; MIG mode."""
    out = []
    for g in v.gpus:
        r = g.raw
        reasons = [str(x) for x in as_list(r.get("clocks_event_reasons"))]
        temp = as_num(r.get("temp_c"))
        at = f" at {temp:.0f} °C" if temp is not None else ""
        hot = [x for x in reasons if x in _THERMAL]
        slow = [x for x in reasons if x in _HW_SLOW]
        if hot or slow:
            out.append(warn(
                "gpu-thermal" if hot else "gpu-slowdown",
                f"{g.label} is slowing its clocks ({', '.join(hot + slow)}){at}",
                "check cooling, fans and power cabling (nvidia-smi -q -d TEMPERATURE,PERFORMANCE shows the reasons)",
            ))
        pl, dpl = as_num(r.get("power_limit_w")), as_num(r.get("default_power_limit_w"))
        if pl and dpl and pl < dpl * POWER_TOLERANCE:
            out.append(warn(
                "gpu-power-limit",
                f"{g.label} power limit {pl:.0f} W is below its default {dpl:.0f} W",
                f"sudo nvidia-smi -i {g.index} -pl {dpl:.0f}",
            ))
        ecc = as_num(r.get("ecc_uncorrected"))
        if ecc and ecc > 0:
            out.append(error(
                "gpu-ecc",
                f"{g.label} has {ecc:.0f} uncorrected ECC error{'s' if ecc != 1 else ''} since the driver loaded",
                f"stop the jobs on GPU {g.index} and reset it (sudo nvidia-smi -r -i {g.index}) or reboot; "
                "if the errors return, have the GPU replaced",
            ))
        if r.get("row_remap_failed") is True:
            out.append(error(
                "gpu-row-remap",
                f"{g.label} failed a row remap: its memory has an unrepairable row",
                "drain the node and have the GPU replaced",
            ))
        elif r.get("row_remap_pending") is True:
            out.append(warn(
                "gpu-row-remap",
                f"{g.label} has a pending row remap (a failing memory row waits to be retired)",
                f"reset the GPU (sudo nvidia-smi -r -i {g.index}) or reboot to apply it",
            ))
    return out + _mig(v)


def _mig(v: FactsView) -> list[Finding]:
    """MIG mode: one GPU is a note; several are a warning, since a CUDA process enumerates one MIG instance, so a
    multi-GPU run (torchrun, DDP, NCCL) cannot span them."""
    mig = [g for g in v.gpus if g.raw.get("mig") is True or str(g.raw.get("mig")).lower() == "enabled"]
    if len(mig) == 1:
        return [info(
            "gpu-mig",
            f"{mig[0].label} is in MIG mode: CUDA sees its MIG instances, not the whole GPU",
            "list them with nvidia-smi -L and pick one: export CUDA_VISIBLE_DEVICES=MIG-<uuid>",
        )]
    if not mig:
        return []
    return [warn(
        "gpu-mig",
        f"{len(mig)} GPUs are in MIG mode ({', '.join(str(g.index) for g in mig)}): a CUDA process sees one MIG "
        "instance, so a multi-GPU run cannot span them (torch.cuda.device_count() is 1; NCCL across instances "
        "is not supported)",
        "run one single-GPU job per MIG instance (CUDA_VISIBLE_DEVICES=MIG-<uuid>), or disable MIG for multi-GPU "
        "training: sudo nvidia-smi -i " + ",".join(str(g.index) for g in mig) + " -mig 0 (then reset the GPUs)",
    )]


def check_memory_held(v: FactsView, k: Knowledge) -> list[Finding]:
    """GPU memory already held by other processes (or by ones this container cannot see)."""
    out = []
    procs: dict[int, list[dict[str, Any]]] = {}
    for p in as_list(v.f.get("gpu_processes")):
        if isinstance(p, dict) and isinstance(p.get("gpu"), int):
            procs.setdefault(p["gpu"], []).append(p)
    free = [g.index for g in v.gpus
            if not procs.get(g.index) and (g.mem_used_mib or 0) < HELD_FRACTION * (g.mem_total_mib or 1)]
    for g in v.gpus:
        total = g.mem_total_mib
        if not total:
            continue
        mine = procs.get(g.index, [])
        held = sum(as_num(p.get("used_mib")) or 0 for p in mine)
        idle = [i for i in free if i != g.index]
        other = f", or use an idle GPU: export CUDA_VISIBLE_DEVICES={idle[0]}" if idle else ""
        used = max(g.mem_used_mib or 0, held)  # NVML's used memory and the processes' sum can disagree
        room = f"{mib(max(total - used, 0))} free of {mib(total)}"
        if mine and held >= HELD_FRACTION * total:
            top = sorted(mine, key=lambda p: -(as_num(p.get("used_mib")) or 0))[:3]
            who = ", ".join(
                " ".join(str(x) for x in (f"pid {p.get('pid')}", p.get("name")) if x)
                + (f": {mib(as_num(p.get('used_mib')))}" if as_num(p.get("used_mib")) is not None else "")
                for p in top
            )
            pids = " ".join(str(p.get("pid")) for p in mine)
            out.append(warn(
                "gpu-memory-held",
                f"{g.label}: {room}; {mib(held)} held by {len(mine)} other "
                f"process{'es' if len(mine) != 1 else ''} ({who})",
                f"stop them (kill {pids})" + other,
            ))
        elif not mine and g.mem_used_mib and g.mem_used_mib >= HELD_FRACTION * total:
            out.append(warn(
                "gpu-memory-held",
                f"{g.label}: {room}; {mib(g.mem_used_mib)} in use by processes not visible here "
                f"(another container or user)",
                "find them on the host: nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv"
                + other,
            ))
    return out


def check_gpu_floor(v: FactsView, k: Knowledge) -> list[Finding]:
    """The driver must be one NVIDIA's supported-GPU list names this GPU in (the matrix's per-GPU floor)."""
    if not v.driver:
        return []
    return [error("driver-below-gpu-floor",
                  f"driver {v.driver} cannot run {g.label}: NVIDIA's supported-GPU list names it from driver {floor[0]} "
                  f"(R{floor[0].split('.')[0]}) on ({floor[1]})",
                  f"install NVIDIA driver ≥ {floor[0]}")
            for g in v.gpus if (floor := k.gpu_floors.get(gpu_key(g.name))) is not None and vcmp(v.driver, floor[0]) < 0]


_CUDA_PYTHON = ("cuda-python", "cuda-bindings")


def check_driver_wheels(v: FactsView, k: Knowledge) -> list[Finding]:
    """CUDA library wheels of a major the driver does not run, with no framework of that major."""
    if not v.driver and not v.driver_cuda:
        return []
    majors: dict[int, list[str]] = {}
    for name, ver in v.pip.items():
        m = _wheel_major(name, ver, k)
        if m is not None:
            majors.setdefault(m, []).append(f"{name} {ver}")
    fw_majors = {major(c) for _, c, _ in _cuda_frameworks(v, k)}
    out = []
    for m, wheels in sorted(majors.items()):
        floor = k.floor_driver(f"{m}.0")
        if m in fw_majors:
            continue
        if v.driver and floor:
            old = vcmp(v.driver, floor) < 0
        elif v.driver_cuda:
            old = (major(v.driver_cuda) or 0) < m
        else:
            continue
        if not old:
            continue
        shown = ", ".join(sorted(wheels)[:3]) + (" …" if len(wheels) > 3 else "")
        out.append(error(
            "driver-too-old",
            f"{_driver_words(v)} is too old for the CUDA {m} libraries installed here ({shown}): CUDA {m} needs driver "
            f"≥ {floor or '?'}; calls fail with 'CUDA driver version is insufficient for CUDA runtime version' "
            "(cudaErrorInsufficientDriver)",
            (f"install NVIDIA driver ≥ {floor}" if floor else "upgrade the NVIDIA driver")
            + f", or the CUDA {major(v.driver_cuda) or m - 1} builds of these packages",
        ))
    return out


def _wheel_major(name: str, ver: str, k: Knowledge) -> int | None:
    if name in _CUDA_PYTHON:
        return major(ver)
    return cuda_major_of(name, ver, k) if name.startswith("nvidia-") or name in k.toolkit_wheels else None


CHECKS = (check_nvml, check_driver, check_gpu_floor, check_arch, check_cpu_build, check_no_driver,
          check_visible_devices, check_health, check_memory_held, check_driver_wheels)
