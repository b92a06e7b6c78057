"""Checks on compiled GPU extensions and GPU features with a hardware floor (matrices/extensions.yaml)."""

from __future__ import annotations

import re
from typing import Any

from ..versions import arch_covers, major, major_minor, ptx_for, split_arch_list, vcmp, vt
from . import variants
from .checks_env import LIB_PACKAGES
from .findings import Finding, error, info
from .knowledge import Feature, Knowledge
from .remedies import capability
from .view import FactsView, as_dict, as_list, as_str, group_label, norm_name

# Which pip package ships which CUDA library an extension may link (all but CUPTI, a profiler's).
_LIB_DIST = {stem: dist for stem, dist in LIB_PACKAGES.items() if stem != "libcupti"}
_BNB_LIB = re.compile(r"libbitsandbytes_cuda(\d+)\w*\.(?:so|dll)\Z", re.I)
_SONAME = re.compile(r"^(lib[A-Za-z]+)\.so\.(\d+)(?:\.\d+)*\Z")
# What the loader failing means for each package, in the words of its users' bug reports.
_LOAD_FAILS = {
    "onnxruntime-gpu": "the CUDAExecutionProvider fails to load and onnxruntime silently falls back to the CPU",
    "bitsandbytes": "bitsandbytes falls back to its CPU library ('CUDA Setup failed' / 8-bit optimizers unavailable)",
}


def _env_cuda(v: FactsView) -> str | None:
    """The CUDA a package that ships one build per CUDA release loads its build for: BNB_CUDA_VERSION, else the
    installed framework's (torch's, whose libraries it shares)."""
    env = v.env.get("BNB_CUDA_VERSION", "")
    if re.fullmatch(r"\d{3}", env):
        return f"{env[:2]}.{env[2]}"
    fw = next((fw for fw in v.frameworks if fw.is_cuda), None)
    return fw.cuda if fw else None


def _forced(v: FactsView, dist: str) -> bool:
    """The build is chosen by a variable, not by what loads (BNB_CUDA_VERSION for bitsandbytes)."""
    return dist == "bitsandbytes" and bool(v.env.get("BNB_CUDA_VERSION"))


def _short(name: str) -> str:
    """'flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so' -> 'flash_attn_2_cuda.so'."""
    return re.sub(r"\.(cpython|abi3|cp\d)[^/]*\.so$", ".so", name.rsplit("/", 1)[-1])


def check_ext_archs(v: FactsView, k: Knowledge) -> list[Finding]:
    """An extension with neither SASS for the GPU nor PTX it can JIT; only the libraries that load."""
    out: list[Finding] = []
    ccs = v.gpu_ccs()
    if not ccs:
        return out
    for dist, ver, files in variants.dists(v):
        used = [f for f in variants.loaded(files, _env_cuda(v), lambda f: not _missing_sonames(v, f), forced=_forced(v, dist))
                if variants.archs(f)]
        floor = k.package_floor(dist, ver)
        for c in ccs:
            out += _ext_arch(v, k, dist, ver, used, floor, c, files)
    return out


def _ext_arch(v: FactsView, k: Knowledge, dist: str, ver: str, files: list[dict[str, Any]],
              floor: tuple[int, int] | None, c: tuple[int, int], every: list[dict[str, Any]]) -> list[Finding]:
    label, gpus = capability(c), group_label(v.gpus_with_cc(c))
    covering = [f for f in files if arch_covers(c, variants.archs(f))[0]]
    for f in files:
        if f in covering or (floor and tuple(c) < floor):
            continue  # (below the package's own floor no build of it runs: gpu-too-old-<feature> says so)
        if covering and variants.only_newer(f, c):
            continue  # a build for later GPUs beside one for this GPU: the package loads the other here
        other = sorted({variants.file_cuda(x) or "" for x in variants.siblings(f, every)
                        if arch_covers(c, variants.archs(x))[0]}, key=vt)
        instead = (f"use a {(v.torch.name + ' ') if v.torch else ''}build for CUDA {other[-1]}, whose "
                   f"{_short(variants.name_for(f, other[-1]))} carries sm_{c[0]}{c[1]}, or " if other else "")
        return [error(
            "ext-arch-not-covered",
            f"{_short(f['file'])} ({dist} {ver}) carries {' '.join(variants.archs(f))}; the {gpus} is {label}: no "
            f"kernel of it runs there ('no kernel image is available for execution on the device')",
            f"{instead}rebuild it for this GPU: TORCH_CUDA_ARCH_LIST=\"{c[0]}.{c[1]}\" pip install --no-binary {dist} "
            f"--no-build-isolation --force-reinstall {dist}=={ver.split('+')[0]} (or use a release whose "
            f"wheel lists sm_{c[0]}{c[1]})",
        )]
    for f in covering:
        s, p = split_arch_list(variants.archs(f))
        if any(a[0] == c[0] and a[1] <= c[1] for a in s):
            continue  # SASS runs: PTX is never JIT-compiled
        isa = as_str(f.get("ptx_isa"))
        drv_isa = k.max_ptx_isa(v.driver_cuda)
        if ptx_for(p, c) and isa and drv_isa and vcmp(isa, drv_isa) > 0:
            return [error(
                "ext-ptx-too-new",
                f"{_short(f['file'])} ({dist} {ver}) reaches the {gpus} ({label}) only through PTX ISA {isa}, "
                f"newer than driver {v.driver or '?'} (CUDA {v.driver_cuda}) can JIT (≤ {drv_isa}): "
                f"'the provided PTX was compiled with an unsupported toolchain'",
                f"upgrade the NVIDIA driver, or install a {dist} build with SASS for sm_{c[0]}{c[1]}",
            )]
    return []


def _provided_majors(v: FactsView, stem: str) -> set[int] | None:
    """CUDA library majors this environment can load for ``stem``; None when nothing is known."""
    t = v.torch
    vers: list[object] = []  # of each provider here: its version, whose major is the soname's
    if stem in ("libcudart", "libcublas", "libcublasLt", "libcufft", "libcurand", "libcusparse", "libcusolver",
                "libnvrtc", "libnvJitLink") and t and t.is_cuda:
        vers.append(t.cuda)
    if stem == "libcudnn" and t and t.cudnn:
        vers.append(t.cudnn)
    # nvidia-cuda-runtime-cu12 12.4.127 -> 12; nvidia-cudnn-cu12 9.1.0.70 -> 9 (soname major = version major)
    vers += v.wheels(_LIB_DIST.get(stem)).values()
    vers += [ver for d in as_list(v.f.get("cuda_libs")) if (ver := as_str(as_dict(as_dict(d).get("libs")).get(stem)))]
    return {m for ver in vers if (m := major(ver)) is not None} if vers else None


def _missing_sonames(v: FactsView, f: dict[str, Any]) -> list[str]:
    """The CUDA sonames ``f`` names whose major no provider here has (unknown providers: not missing). One the
    probe found installed off the loader's path is left to checks_loader, which says where it is."""
    out = []
    away = as_dict(f.get("elsewhere"))
    for so in as_list(f.get("needed")):
        m = _SONAME.match(str(so))
        if not m or as_list(away.get(so)):
            continue
        have = _provided_majors(v, m.group(1))
        if have is not None and int(m.group(2)) not in have:
            out.append(str(so))
    return out


def check_ext_cuda_libs(v: FactsView, k: Knowledge) -> list[Finding]:
    """An extension linked against CUDA libraries of a major this environment does not have."""
    out = []
    for dist, ver, files in variants.dists(v):
        missing: dict[str, str] = {}
        builds: list[str] = []
        if dist == "bitsandbytes" and check_bnb_binary(v, k):
            continue  # no build for this CUDA at all: bnb-cuda-binary says so
        for g in variants.groups(files):
            chosen = variants.pick(g, _env_cuda(v))
            needs = _missing_sonames(v, chosen)
            if len(g) > 1 and (not needs or (not _forced(v, dist) and any(not _missing_sonames(v, f) for f in g))):
                continue  # the build it loads for this CUDA, or (it tries them) one of them, loads
            for so in needs:
                missing.setdefault(so, _short(str(chosen.get("file"))))
            if len(g) > 1 and needs:
                builds = sorted({f"CUDA {variants.file_cuda(x)}" for x in g}, key=vt)
        if missing:
            out.append(_cuda_libs_finding(v, k, dist, ver, missing, builds))
    return out


def _cuda_libs_finding(v: FactsView, k: Knowledge, dist: str, ver: str, missing: dict[str, str],
                       builds: list[str]) -> Finding:
    sonames = sorted(missing)
    files = sorted(set(missing.values()))
    t = v.torch
    cm = [major(t.cuda)] if t and t.is_cuda else []
    have = f"this environment has CUDA {cm[0]} ({t.label})" if t and cm else "this environment has no such library"
    if builds:
        have += f"; none of its builds ({', '.join(builds)}) loads"
    fails = _LOAD_FAILS.get(dist, f"loading {', '.join(files)} fails ('{sonames[0]}: cannot open shared object file')")
    fix = None
    b = k.ext_build_for(dist, cm[0]) if cm else None
    if b is not None:
        fix = (f"pip install '{dist}>={b.since}' (built for CUDA {b.cuda}"
               + (f" and cuDNN {b.cudnn}" if b.cudnn else "") + ")")
    elif cm:
        fix = f"install a {dist} build for CUDA {cm[0]}, or the CUDA {cm[0]}-era libraries it names"
    return error("ext-cuda-libs", f"{', '.join(files)} ({dist} {ver}) needs {', '.join(sonames)}; {have}: {fails}", fix)


def check_bnb_binary(v: FactsView, k: Knowledge) -> list[Finding]:
    """bitsandbytes picks libbitsandbytes_cudaXYZ.so by torch's CUDA (or BNB_CUDA_VERSION): none there."""
    e = as_dict(as_dict(v.f.get("extensions")).get("bitsandbytes"))
    names = [str(as_dict(f).get("file")).rsplit("/", 1)[-1] for f in as_list(e.get("files"))]
    # Linux .so and Windows .dll: the same names (libbitsandbytes_cuda128.dll, the file 'Could not find the
    # bitsandbytes CUDA binary at …' names on Windows)
    have = sorted({m.group(1) for n in names if (m := _BNB_LIB.match(n))})
    ext = "dll" if any(n.lower().endswith(".dll") for n in names) else "so"
    if not have:
        return []
    env = v.env.get("BNB_CUDA_VERSION")
    t = v.torch
    want = env or ("".join(str(x) for x in vt(t.cuda)[:2]) if t and t.is_cuda else None)
    if not want or want in have:
        return []
    src = f"BNB_CUDA_VERSION={env}" if env or not t else f"{t.label} (CUDA {t.cuda})"
    return [error(
        "bnb-cuda-binary",
        f"bitsandbytes {e.get('version') or '?'} looks for libbitsandbytes_cuda{want}.{ext} because of {src}, but ships "
        f"only {', '.join(f'cuda{h}' for h in have)}: it cannot load its CUDA library",
        "unset BNB_CUDA_VERSION" if env else "pip install -U bitsandbytes (newer releases ship more CUDA builds)",
    )]


def _asked(v: FactsView, feat: Feature) -> str | None:
    """What on this machine asks for ``feat``: a package or the project's workload.precision."""
    prec = as_str(as_dict(v.f.get("workload")).get("precision"))
    if prec and prec.lower() in feat.precisions:
        return f"the project's workload.precision is {prec}"
    for name, prefix in feat.packages:
        ver = v.pkg(name)
        if ver and (prefix is None or vt(ver)[:len(vt(prefix))] == vt(prefix)):
            return f"{norm_name(name)} {ver} is installed"
    return None


def check_capability_floor(v: FactsView, k: Knowledge) -> list[Finding]:
    """bf16 / FlashAttention-2 on < 8.0, Triton and torch.compile on < 7.0, FP8 on < 8.9."""
    out = []
    for feat in k.features:
        low = [c for c in v.gpu_ccs() if tuple(c) < tuple(feat.min_cc)]
        if not low:
            continue
        why = _asked(v, feat)
        if why is None:
            continue
        gpus = [g for c in low for g in v.gpus_with_cc(c)]
        c = low[0]
        need = "%d.%d" % tuple(feat.min_cc)
        dep = _pulled_in(v, feat)
        out.append((info if dep else error)(
            f"gpu-too-old-{feat.id}",
            f"{feat.name} needs compute capability ≥ {need}; the {group_label(gpus)} is {capability(c)} "
            f"and {why}" + (f" ({dep}: it matters only where the project uses it)" if dep else "") + f": {feat.fails}",
            feat.instead or None,
        ))
    return out


def _pulled_in(v: FactsView, feat: Feature) -> str | None:
    """What installed the package that asks for ``feat``, when a framework did as its own dependency (every Linux
    CUDA torch wheel requires triton): nothing the project chose asks for the feature then."""
    if as_str(as_dict(v.f.get("workload")).get("precision")) in feat.precisions:
        return None
    names = [norm_name(n) for n, _ in feat.packages if v.pkg(n)]
    for fw in v.frameworks:
        deps = {norm_name(n) for n, _ in fw.requires}
        if names and all(n in deps for n in names):
            return f"installed as {fw.label}'s own dependency"
    return None


def tf_windows_native(v: FactsView, k: Knowledge) -> bool:
    """TensorFlow on native Windows past the last release with GPU support: a CPU build whatever is installed (its
    one cause, said by check_tf_windows; check_cpu_build leaves it)."""
    last = k.tf_windows_gpu_last
    tf = v.framework("tensorflow")
    return bool(as_str(v.f.get("os")) == "Windows" and tf and last and vcmp(major_minor(tf.version), last) > 0)


def check_tf_windows(v: FactsView, k: Knowledge) -> list[Finding]:
    """Native Windows TensorFlow past the last release with GPU support runs on the CPU."""
    tf = v.framework("tensorflow")
    last = k.tf_windows_gpu_last
    if not tf_windows_native(v, k) or tf is None or last is None:
        return []
    if not (v.gpus or any(n.startswith("nvidia-") for n in v.pip) or tf.gpu):
        return []
    t = vt(last)
    after = f"{t[0]}.{t[1] + 1}" if len(t) > 1 else str(t[0] + 1)  # the line after the last one with GPU support
    return [error(
        "tf-windows-native",
        f"{tf.label} on native Windows has no GPU support (the last release with it is {last}): it "
        f"runs on the CPU whatever CUDA is installed",
        f"use WSL2 (pip install 'tensorflow[and-cuda]' inside it), or natively: pip install 'tensorflow<{after}' "
        f"with the CUDA and cuDNN it was tested with (tensorflow.org/install/source_windows#gpu)",
    )]


def check_python_bits(v: FactsView, k: Knowledge) -> list[Finding]:
    """A 32-bit interpreter: no CUDA framework publishes 32-bit wheels."""
    bits = as_dict(v.f.get("python")).get("bits")
    if bits != 32:
        return []
    exe = as_str(as_dict(v.f.get("python")).get("executable")) or "this Python"
    return [error(
        "python-32bit",
        f"{exe} is a 32-bit Python {v.python or ''}: torch, TensorFlow and the CUDA wheels exist only for 64-bit "
        f"interpreters ('No matching distribution found for torch')",
        "install a 64-bit Python (python.org's 'Windows installer (64-bit)', or uv python install) and recreate the "
        "virtual environment with it",
    )]


def check_pin_python(v: FactsView, k: Knowledge) -> list[Finding]:
    """A project pin (torch==1.13.1) with no wheels for the running Python."""
    out = []
    for fw, p in sorted(v.pins().items()):
        ver = as_str(p.get("version"))
        rel = k.release(fw, ver)
        if not v.python or rel is None or not rel.python or v.python in rel.python:
            continue
        out.append(error(
            "pin-no-wheels-for-python",
            f"{p.get('file') or 'the project'} pins {fw}=={ver}, which has no wheels for Python {v.python} (it was "
            f"published for Python {', '.join(rel.python)}): 'No matching distribution found for {fw}=={ver}'",
            f"use Python {rel.python[-1]} for this project (uv venv --python {rel.python[-1]}), or move the pin to a "
            f"release with Python {v.python} wheels",
        ))
    return out


CHECKS = (check_ext_archs, check_ext_cuda_libs, check_bnb_binary, check_capability_floor,
          check_tf_windows, check_python_bits, check_pin_python)
