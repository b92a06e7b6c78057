"""A framework that dlopens CUDA libraries by soname (TensorFlow) needs each one, and its cuDNN, here."""

from __future__ import annotations

from ..frameworks.base import Installed
from ..versions import major, major_minor, vcmp, vt
from .checks_env import LIB_PACKAGES
from .findings import Finding, error
from .knowledge import Knowledge
from .remedies import install
from .view import FactsView, as_dict, as_list


def check_tf_libs(v: FactsView, k: Knowledge) -> list[Finding]:
    """A framework that loads the CUDA libraries it finds (TensorFlow): missing, or of the wrong version."""
    if v.gpus_known and not v.gpus:
        return []  # (GPUs unknown — NVML down, a partial facts file — the packages still tell)
    return [f for fw in v.cuda_frameworks() if not fw.pins_cuda_wheels for f in _loaded_libs(v, k, fw)]


def _available(v: FactsView, stem: str) -> dict[int, list[tuple[str, str]]]:
    """soname major -> (version, where: a wheel or a file) of the library ``stem`` in this environment; a wheel's
    soname major is its version's major (nvidia-cufft-cu12 11.4 ships libcufft.so.11), a file's the first number
    after .so."""
    found = [(ver, name) for name, ver in v.wheels(LIB_PACKAGES.get(stem)).items()]
    found += [(str(lib), f"{as_dict(d).get('dir')}/{stem}.so.{lib}") for d in as_list(v.f.get("cuda_libs"))
              if major(lib := as_dict(as_dict(d).get("libs")).get(stem)) is not None]
    out: dict[int, list[tuple[str, str]]] = {}
    for ver, where in found:
        if (m := major(ver)) is not None:
            out.setdefault(m, []).append((ver, where))
    return out


def _shown(ver: str, where: str) -> str:
    return f"{where} {ver}" if where.startswith("nvidia-") else where


def _loaded_libs(v: FactsView, k: Knowledge, fw: Installed) -> list[Finding]:
    rel = k.release(fw.name, fw.base)
    gpu = k.build_of(fw.name, fw.base, fw.variant, fw.gpu)
    cuda = fw.cuda or (gpu.cuda if gpu else None)
    cudnn = (gpu.cudnn if gpu else None) or fw.cudnn
    if not cuda or not cudnn:
        return []
    cm, dm = major(cuda), major(cudnn)
    fix = install(rel) if rel else f"install CUDA {cuda} and cuDNN {cudnn}"
    check = f"{fw.tag or fw.name}-cuda-libs"
    sonames = k.sonames(cuda) or {"libcudart": str(cm)}
    missing, other_major = [], []
    dirs_known = isinstance(v.f.get("cuda_libs"), list)
    for stem in fw.needs_libs:
        want = str(dm) if stem == "libcudnn" else sonames.get(stem)
        if want is None:
            continue
        have = _available(v, stem)
        if major(want) in have or (not dirs_known and not have):
            continue  # (library directories not probed and no wheel of it: unknown, not missing)
        missing.append(f"{stem}.so.{want}")
        other_major += [(f"{stem}.so.{m}", _shown(*have[m][0])) for m in sorted(have)]
    pinned = _pinned_cudnn(v, k)
    if missing == [f"libcudnn.so.{dm}"] and pinned and major(pinned[1]) != dm and major(pinned[1]) in _available(v, "libcudnn"):
        return [_cross_major(v, k, fw, cudnn, pinned, check)]
    if missing:
        names = ", ".join(n for n, _ in other_major)
        seen = f" (here: {names}: {other_major[0][1]} …)" if len(other_major) > 1 else \
            f" (here: {names} ({other_major[0][1]}))" if other_major else ""
        return [error(
            check,
            f"{fw.label} needs CUDA {cuda} and cuDNN {cudnn}; not found: {', '.join(missing)}{seen}: 'Could not load "
            f"dynamic library '{missing[0]}'' — it will not see the GPU",
            fix,
        )]
    return _cudnn_minor(v, k, fw, cudnn, fix, check)


def _cudnn_minor(v: FactsView, k: Knowledge, fw: Installed, cudnn: str, fix: str, check: str) -> list[Finding]:
    """cuDNN of the right major but an older minor than the build ('Loaded runtime CuDNN library: 9.1.0 but source
    was compiled with: 9.3.0'): the newest one here decides."""
    dm = major(cudnn)
    found = _available(v, "libcudnn").get(dm, [])  # type: ignore[arg-type]
    if not found:
        return []
    have, where = max(found, key=lambda x: vt(x[0]))
    if vcmp(major_minor(have), major_minor(cudnn)) >= 0:
        return []
    verdict = (f"{_shown(have, where)} is installed, but {fw.label} was built with cuDNN {cudnn}: 'Loaded runtime CuDNN library: "
               f"{'.'.join(str(x) for x in (vt(have) + (0, 0, 0))[:3])} but source was compiled with: "
               f"{major_minor(cudnn)}.0'")
    why = fix
    other = _pinned_cudnn(v, k)  # (its cuDNN is among those found: the newest decides which one loads)
    if other and major(other[1]) == dm and vcmp(major_minor(other[1]), major_minor(cudnn)) < 0:
        ofw, want = other  # the other framework's wheel pins the cuDNN it was built with
        verdict += f"; {ofw.label} pins cuDNN {want}"
        why = (f"pip install '{where.split()[0] if where.startswith('nvidia-') else f'nvidia-cudnn-cu{major(fw.cuda or 0) or 12}'}"
               f">={major_minor(cudnn)}' ({ofw.name} runs on a newer cuDNN {dm} minor), or keep {ofw.name} and {fw.name} "
               f"in separate environments")
    return [error(check, verdict, why)]


def _cross_major(v: FactsView, k: Knowledge, fw: Installed, cudnn: str, pinned: tuple[Installed, str],
                 check: str) -> Finding:
    """Another framework's wheel pins a cuDNN of another major: one environment cannot hold both."""
    ofw, want = pinned
    dm, om = major(cudnn), major(want)
    wheel = next((f"{n} {ver}" for n, ver in v.wheels("nvidia-cudnn").items()
                  if major(ver) == om), f"cuDNN {want}")
    alt = next((r for r in k.releases.get(fw.name, ())  # the newest release whose GPU build uses cuDNN om
                if any(not b.is_cpu and b.cudnn and major(b.cudnn) == om for b in r.builds)), None)
    return error(
        check,
        f"{wheel} is installed, but {fw.label} was built with cuDNN {cudnn}; {ofw.label} needs cuDNN {om} "
        f"(libcudnn.so.{om}) and {fw.label} cuDNN {dm} (libcudnn.so.{dm}): in one environment only one of them can "
        f"use the GPU",
        (f"{install(alt)} (built with cuDNN {om}, like {ofw.label}), or " if alt else "")
        + f"keep {ofw.name} and {fw.name} in separate environments",
    )


def _pinned_cudnn(v: FactsView, k: Knowledge) -> tuple[Installed, str] | None:
    """A CUDA framework whose wheels pin their cuDNN (torch), and that cuDNN: its fact, else the matrix's build."""
    for fw in v.frameworks:
        if fw.is_cuda and fw.pins_cuda_wheels:
            b = k.build_of(fw.name, fw.base, fw.variant, fw.gpu) if fw.variant else None
            want = (b.cudnn if b else None) or fw.cudnn
            if want:
                return fw, want
    return None


CHECKS = (check_tf_libs,)
