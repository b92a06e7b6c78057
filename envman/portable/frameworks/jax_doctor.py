"""JAX in the doctor: its probe record, ``installed_jax`` and the checks only JAX needs. Stdlib only."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from typing import Any, Optional

from ..doctor.findings import Finding, error, info, warn
from ..versions import major_minor, vcmp
from .base import Installed

BUILDS = ("cuda12", "cuda13")
KERNEL_LIBS = ("_prng.so", "_linalg.so", "_solver.so")  # the plugin's libraries with CUDA kernels
# what TensorFlow installs as (its GPU-capable wheels; tensorflow-cpu never touches the GPU)
TF_GPU_DISTS = ("tensorflow", "tensorflow-gpu", "tf-nightly")
# XLA_FLAGS entries that quietly cost a run: (flag, what it does)
XLA_FLAG_PITFALLS = (
    ("--xla_dump_to", "dumps every compiled HLO module to that folder: slow steps and a disk that fills"),
    ("--xla_gpu_cuda_data_dir", "points XLA at a CUDA installation of its own instead of the nvidia-* wheels' "
                                "ptxas and libdevice: another CUDA than the lock's"),
    ("--xla_gpu_autotune_level=0", "turns GEMM/convolution autotuning off: slower kernels"),
)


def _ver(dists: Mapping[str, Any], name: str) -> Optional[str]:
    d = dists.get(name)
    return str(d[1]) if d else None


def _first(dists: Mapping[str, Any], names: tuple[str, ...]) -> Optional[str]:
    return next((v for v in (_ver(dists, n) for n in names) if v), None)


def plugin_archs(where: Optional[str]) -> list[str]:
    """The SASS of a CUDA plugin's kernel libraries, read from their fat binaries (``where``: its package folder)."""
    from ..fatbin import read_fatbin

    found: set[str] = set()
    for name in KERNEL_LIBS if where else ():
        try:
            found.update(read_fatbin(os.path.join(where or "", name))["sass"])
        except (OSError, ValueError):
            continue
    return sorted(found, key=lambda a: int(re.sub(r"\D", "", a)))


def probe_jax(dists: Mapping[str, Any], read: Callable[[str, int], Optional[str]]) -> Optional[dict[str, Any]]:
    """facts["jax"]: jax, jaxlib, each CUDA plugin and its pjrt, and the nvidia-* wheels of the plugin's CUDA."""
    if "jax" not in dists:
        return None
    rec: dict[str, Any] = {"version": _ver(dists, "jax"), "jaxlib": _ver(dists, "jaxlib"), "plugins": {}}
    for b in BUILDS:
        plugin = _ver(dists, "jax-%s-plugin" % b)
        if plugin:
            where = os.path.join(dists["jax-%s-plugin" % b][0], "jax_%s_plugin" % b)
            rec["plugins"][b] = {"plugin": plugin, "pjrt": _ver(dists, "jax-%s-pjrt" % b), "arch_list": plugin_archs(where)}
    build = next(iter(rec["plugins"]), None)
    if build is not None:
        m = build[4:]
        rec["cudnn"] = _first(dists, ("nvidia-cudnn-cu%s" % m, "nvidia-cudnn"))
        rec["cuda_runtime"] = _first(dists, ("nvidia-cuda-runtime-cu%s" % m, "nvidia-cuda-runtime"))
    return rec


def _build(rec: Mapping[str, Any]) -> Optional[str]:
    plugins = rec.get("plugins")
    found = [b for b in BUILDS if isinstance(plugins, dict) and isinstance(plugins.get(b), dict)]
    return found[-1] if found else None  # two plugins: judged by the newer (jax-two-plugins says the rest)


# jaxlib 0.4.25+cuda12.cudnn89: a CUDA jaxlib from before the plugins (jax_cuda_releases.html), its label naming the
# CUDA major and the cuDNN it was built with
_LABEL = re.compile(r"\+cuda(\d+)\.cudnn(\d)(\d+)\Z")


def jaxlib_label(rec: Mapping[str, Any]) -> Optional[tuple[str, str]]:
    """(CUDA major, cuDNN X.Y) of a jaxlib whose version carries the +cudaNN.cudnnXY label."""
    m = _LABEL.search(str(rec.get("jaxlib") or ""))
    return (m.group(1), f"{m.group(2)}.{m.group(3)}") if m else None


def installed_jax(facts: Mapping[str, Any]) -> Optional[Installed]:
    rec = facts.get("jax")
    if not isinstance(rec, dict) or not isinstance(rec.get("version"), str) or not rec["version"].strip():
        return None
    build = _build(rec)
    label = jaxlib_label(rec)
    if build is None and label:
        # it loads the CUDA and cuDNN it finds (jax[cuda12_local] / _pip of old): check_jax_cudnn judges its label
        return Installed("jax", rec["version"].strip(), f"cuda{label[0]}", label[0], gpu=True,
                         arch_source="its build info", pins_cuda_wheels=False)
    plugin = rec["plugins"][build] if build else {}
    runtime = rec.get("cuda_runtime")
    arch = plugin.get("arch_list")
    return Installed(
        "jax", rec["version"].strip(), build or "cpu",
        major_minor(runtime) if isinstance(runtime, str) and runtime else None,
        gpu=build is not None, cpu_only=build is None,
        arch_list=tuple(str(a) for a in arch) if isinstance(arch, list) else (),
        arch_source="the fat binaries of jax-%s-plugin's kernel libraries" % build if build else "its build info",
        cudnn=str(rec["cudnn"]) if rec.get("cudnn") else None,
        cpu_why="jax without jax[cuda12] or jax[cuda13] has no CUDA plugin: XLA runs on the CPU only",
    )


# ============================================================================ checks only JAX needs (pure)
def check_jax_parts(v: Any, k: Any) -> list[Finding]:
    """jaxlib, jax-cudaNN-plugin and -pjrt of one release (the companion check pairs what the matrix knows)."""
    rec = v.f.get("jax")
    if not isinstance(rec, dict) or not rec.get("version"):
        return []
    jax, jaxlib = str(rec["version"]), rec.get("jaxlib")
    if not jaxlib:
        return [error("jax-parts-mismatch", f"jax {jax} is installed without jaxlib: it does not import",
                      f"pip install 'jax[cuda13]=={jax}' (or jax[cuda12], or jax=={jax} for the CPU)")]
    known = k.release("jax", jax) is not None
    out: list[Finding] = []
    if not known and vcmp(jaxlib, jax) > 0:
        out.append(error("jax-parts-mismatch", f"jaxlib {jaxlib} is newer than jax {jax}: jax refuses a jaxlib newer "
                                               "than itself at import", f"pip install jax=={jaxlib}"))
    raw = rec.get("plugins")
    plugins: dict[str, Any] = raw if isinstance(raw, dict) else {}
    for b, parts in sorted(plugins.items()):
        if not isinstance(parts, dict):
            continue
        want = parts.get("plugin") if known else jaxlib
        bad = [f"jax-{b}-{kind} {parts.get(kind) or 'missing'}" for kind in (("pjrt",) if known else ("plugin", "pjrt"))
               if parts.get(kind) != want]
        if bad:
            out.append(error("jax-parts-mismatch", f"{', '.join(bad)} beside jax-{b}-plugin {parts.get('plugin')} and "
                                                   f"jaxlib {jaxlib}: XLA's CUDA backend of another release fails to "
                                                   "load, and JAX falls back to the CPU",
                             f"pip install 'jax[{b}]=={jax}' (it pins jaxlib, the plugin and pjrt to one release)"))
    if len(plugins) > 1:
        first = sorted(plugins)[0]
        out.append(warn("jax-two-plugins", f"two CUDA plugins are installed ({', '.join(sorted(plugins))}): each brings "
                                           "its own nvidia-* wheels, and JAX uses one",
                        f"pip uninstall -y jax-{first}-plugin jax-{first}-pjrt"))
    return out


def _tf_on_gpu(v: Any) -> Optional[str]:
    tf = v.f.get("tensorflow")
    if not isinstance(tf, dict) or tf.get("is_cuda_build") is False:
        return None
    dist = next((d for d in TF_GPU_DISTS if v.pkg(d)), None)
    return f"{dist} {v.pkg(dist)}" if dist else None


def check_jax_beside_tensorflow(v: Any, k: Any) -> list[Finding]:
    """JAX and a GPU TensorFlow in one process: XLA preallocates 75% of the GPU, TensorFlow takes the rest."""
    fw = v.framework("jax")
    tf = _tf_on_gpu(v)
    if fw is None or not fw.gpu or tf is None or (v.gpus_known and not v.gpus):
        return []
    env = v.env
    jax_ok = env.get("XLA_PYTHON_CLIENT_PREALLOCATE", "").lower() == "false" or "XLA_PYTHON_CLIENT_MEM_FRACTION" in env \
        or env.get("XLA_PYTHON_CLIENT_ALLOCATOR", "").lower() == "platform"
    tf_ok = env.get("TF_FORCE_GPU_ALLOW_GROWTH", "").lower() == "true"
    if jax_ok and tf_ok:
        return []
    unset = [x for x, ok in (("XLA_PYTHON_CLIENT_PREALLOCATE=false", jax_ok), ("TF_FORCE_GPU_ALLOW_GROWTH=true", tf_ok))
             if not ok]
    return [warn("jax-tf-gpu-memory",
                 f"{fw.label} and {tf} share this environment: XLA preallocates 75% of each GPU when JAX starts and "
                 f"TensorFlow maps the rest, so whichever starts second runs out of memory (not set: {', '.join(unset)})",
                 f"for tf.data input pipelines: pip uninstall -y {tf.split()[0]} && pip install tensorflow-cpu=="
                 f"{tf.split()[1]}; else export {' '.join(unset)}")]


def check_jax_env(v: Any, k: Any) -> list[Finding]:
    """JAX_PLATFORMS and XLA_FLAGS that keep a CUDA JAX off the GPU or slow it down."""
    fw = v.framework("jax")
    if fw is None:
        return []
    out: list[Finding] = []
    platforms = v.env.get("JAX_PLATFORMS", "").strip().lower()
    if fw.gpu and v.gpus and platforms and not {"cuda", "gpu"} & set(platforms.split(",")):
        out.append(warn("jax-platforms", f"JAX_PLATFORMS={platforms}: {fw.label} will not use {v.gpu_summary()}",
                        "unset JAX_PLATFORMS (or JAX_PLATFORMS=cuda, which fails loudly instead of running on the CPU)"))
    flags = v.env.get("XLA_FLAGS", "").split()
    stray = [f for f in flags if not f.startswith("--")]
    if stray:
        out.append(error("xla-flags", f"XLA_FLAGS holds {', '.join(stray)}, not a --flag: XLA aborts at start-up "
                                      "('Unknown flags in XLA_FLAGS')", "write each flag as --name=value"))
    for flag, why in XLA_FLAG_PITFALLS:
        hit = next((f for f in flags if f == flag or f.startswith(flag.split("=")[0] + "=") and (
            "=" not in flag or f == flag)), None)
        if hit:
            out.append(info("xla-flags", f"XLA_FLAGS {hit} {why}", f"drop {hit.split('=')[0]} from XLA_FLAGS"))
    return out


def _cudnn_here(v: Any, cuda_major: str) -> Optional[tuple[str, str]]:
    """(version, where) of the cuDNN a JAX of CUDA ``cuda_major`` finds: its nvidia-cudnn wheel, else a system one."""
    for name in (f"nvidia-cudnn-cu{cuda_major}", "nvidia-cudnn"):
        if v.pkg(name):
            return v.pkg(name), name
    for d in v.f.get("cuda_libs") or ():
        ver = ((d or {}).get("libs") or {}).get("libcudnn") if isinstance(d, dict) else None
        if isinstance(ver, str) and ver.count(".") >= 1:
            return ver, f"libcudnn in {d.get('dir')}"
    return None


def _cudnn_wanted(v: Any, k: Any, rec: Mapping[str, Any]) -> Optional[tuple[str, str, str]]:
    """(CUDA major, the cuDNN this JAX was compiled with, what says so): the jaxlib's +cudnnXY label, else the
    plugin's row in extensions.yaml cudnn_built, else the matrix's cuDNN floor of the build (matrices/jax.yaml: the
    floor the image's smoke program holds the build to too)."""
    label = jaxlib_label(rec)
    if label:
        return label[0], label[1], f"jaxlib {rec.get('jaxlib')}'s label"
    build = _build(rec)
    if build is None:
        return None
    plugin = rec["plugins"][build].get("plugin")
    built = k.built_cudnn(f"jax-{build}-plugin", plugin)
    if built:
        return build[4:], built, f"jax-{build}-plugin {plugin} was compiled with it"
    return None  # the matrix's own floor: the generic cudnn-too-old check judges it


def check_jax_cudnn(v: Any, k: Any) -> list[Finding]:
    """The cuDNN here against the one this JAX was compiled with: another major or an older minor."""
    rec = v.f.get("jax")
    if not isinstance(rec, dict):
        return []
    want = _cudnn_wanted(v, k, rec)
    here = _cudnn_here(v, want[0]) if want else None
    if not want or not here:
        return []
    cm, built, why = want
    have, where = here
    if have.split(".")[0] == built.split(".")[0] and vcmp(major_minor(have) or have, major_minor(built) or built) >= 0:
        return []
    pkg = where if where.startswith("nvidia-cudnn") else f"nvidia-cudnn-cu{cm}"
    fix = f"pip install '{pkg}=={built.split('.')[0]}.{built.split('.')[1]}.*'"
    if have.split(".")[0] != built.split(".")[0]:
        fix = (f"{fix} (or a JAX built for cuDNN {have.split('.')[0]}: pip install -U 'jax[cuda{cm}]', whose plugin "
               f"wheels pull the cuDNN they need)")
    return [error("cudnn-too-old" if have.split(".")[0] == built.split(".")[0] else "cudnn-mismatch",
                  f"cuDNN {have} ({where}) is not the cuDNN {built} jax {rec.get('version')} was compiled with ({why}): "
                  f"'Loaded runtime CuDNN library: {have} but source was compiled with: {built}', and JAX falls back "
                  f"to the CPU", fix)]


CHECKS = (check_jax_parts, check_jax_beside_tensorflow, check_jax_env, check_jax_cudnn)
