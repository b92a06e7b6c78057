"""JAX: matrices/jax.yaml (every jax release with its CUDA plugin builds, read from PyPI by
tools/matrix/discover_jax.py), its names, and its pin format.

A JAX CUDA stack is ``jax[cuda12]==V`` (or ``[cuda13]``): the extra pins ``jaxlib`` and ``jax-cudaNN-plugin``
exactly, and the plugin pins ``jax-cudaNN-pjrt``. envman pins jaxlib and the plugin itself too, so a jax-only
release (0.4.35, whose extra allows the previous plugin) locks the same way every time. The plugin's NVIDIA
wheels are floors (``nvidia-cudnn-cu13>=9.12``): the lock holds them to the build's CUDA, cuDNN and NCCL.
"""

from __future__ import annotations

from typing import Any

from envman._validate import Ctx, dupes, items, opt_str, pythons
from envman.frameworks.base import Framework
from envman.model import FrameworkRelease, Resolution, Variant

JAXLIB = "jaxlib"
PLUGIN = "jax-cuda{}-plugin"
BUILDS = ("cuda12", "cuda13")  # the extras jax publishes, one per CUDA major
# the extras of jax that choose a CUDA plugin (jax[cuda] is cuda12's old name; -local: the plugin without nvidia-*)
CUDA_EXTRAS = (("cuda12", "12"), ("cuda13", "13"), ("cuda", "12"), ("cuda12-pip", "12"), ("cuda12-local", "12"),
               ("cuda13-local", "13"))
REFUSED_EXTRAS = (("tpu", "a TPU stack (libtpu): envman builds images for NVIDIA GPUs and the CPU, and neither runs "
                          "it"),)
# what a repository names beside jax for its input pipelines (tf.data, tensorflow-datasets): TensorFlow on
# the CPU, in the same image; the GPU-capable wheel would take the GPU's memory and load the nvidia-* wheels
CPU_BESIDE = (("tensorflow", "tensorflow-cpu"), ("tensorflow-gpu", "tensorflow-cpu"),
              ("tensorflow-cpu", "tensorflow-cpu"), ("tf-nightly", "tf-nightly-cpu"))


def _build(ctx: Ctx, b: Any, bp: str, release_python: tuple[str, ...]) -> tuple[Variant, str, tuple[str, ...]] | None:
    """One ``builds[]`` entry → (its variant, its plugin version, its Pythons)."""
    name = ctx.req(b, "name", bp, str)
    plugin = ctx.version(b, "plugin", bp)
    py = pythons(ctx, b, bp) if isinstance(b, dict) and "python" in b else release_python
    cuda = ctx.version(b, "cuda", bp)
    cudnn = opt_str(ctx, b, "cudnn", bp)
    nccl = opt_str(ctx, b, "nccl", bp)
    archs = ctx.archs(b, "archs", bp)
    ptx = ctx.archs(b, "ptx", bp, optional=True)
    wheels = b.get("wheels") if isinstance(b, dict) else None
    if wheels is not None and not (isinstance(wheels, dict) and all(isinstance(v, str) for v in wheels.values())):
        ctx.bad(f"{bp}.wheels", "expected a mapping of nvidia-* wheel -> quoted floor version")
    prov = ctx.prov(b, bp)
    if name is None or plugin is None or cuda is None:
        return None
    if name not in BUILDS:
        ctx.bad(f"{bp}.name", f"expected one of {', '.join(BUILDS)}, got {name!r}")
        return None
    if name != f"cuda{cuda.major}":
        ctx.bad(f"{bp}.cuda", f"'{cuda}' is not a CUDA {name[4:]} release")
    return Variant(name, cuda, cudnn, nccl, archs, ptx, None, True, prov), str(plugin), py


def load_releases(doc: Any, ctx: Ctx) -> tuple[FrameworkRelease, ...]:
    """jax.yaml: releases → builds (one per CUDA plugin), plus the CPU build every release has."""
    out: list[FrameworkRelease] = []
    for p, e in items(ctx, doc, "releases"):
        ver = ctx.version(e, "version", p)
        jaxlib = ctx.version(e, "jaxlib", p)
        py = pythons(ctx, e, p)
        prov = ctx.prov(e, p)
        variants: list[Variant] = []
        plugins: list[tuple[str, str | None]] = []
        common = set(py)
        for j, b in enumerate(ctx.req(e, "builds", p, list) or []):
            got = _build(ctx, b, f"{p}.builds[{j}]", py)
            if got is None:
                continue
            var, plugin, bpy = got
            variants.append(var)
            plugins.append((PLUGIN.format(var.name[4:]), plugin))
            common &= set(bpy)  # one Python list per release: the Pythons every build has wheels for
        dupes(ctx, f"{p}.builds", [v.name for v in variants], "build")
        if ver is None or jaxlib is None:
            continue
        variants.append(Variant("cpu", None, None, None, (), (), None, True, prov))
        companions = ((JAXLIB, str(jaxlib)), *sorted(plugins))
        out.append(FrameworkRelease("jax", ver, tuple(x for x in py if x in common), "cpu", companions, None,
                                    tuple(variants), prov, "jax"))
    dupes(ctx, "releases", [r.version for r in out], "jax version")
    return tuple(sorted(out, key=lambda r: r.version, reverse=True))


def pins(res: Resolution, companions: tuple[str, ...]) -> list[str]:
    """``jax[cuda13]==0.12.0``, ``jaxlib==0.12.0``, ``jax-cuda13-plugin==0.12.0``; the CPU build is
    ``jax==V`` and its jaxlib. ``companions`` (envman.yaml) names none of JAX's: jaxlib and the plugin always go."""
    if res.framework is None:
        return []
    comp = dict(res.companions)
    out = [f"jax[{res.variant}]=={res.version}" if res.variant in BUILDS else f"jax=={res.version}"]
    if comp.get(JAXLIB):
        out.append(f"{JAXLIB}=={comp[JAXLIB]}")
    plugin = PLUGIN.format(str(res.variant)[4:]) if res.variant in BUILDS else None
    if plugin and comp.get(plugin):
        out.append(f"{plugin}=={comp[plugin]}")  # its [with-cuda] extra comes through jax's [cudaNN]
    return out


JAX = Framework(
    name="jax",
    matrix_file="jax.yaml",
    load_releases=load_releases,
    distributions=("jax",),
    companions=(JAXLIB, *(PLUGIN.format(m) for m in (12, 13))),  # the pjrt wheel is pinned by the plugin
    pins=pins,
    pins_cuda_wheels=False,  # the plugin's [with-cuda] extra asks for nvidia-*>= floors only
    cpu_beside=CPU_BESIDE,
    cuda_extras=CUDA_EXTRAS,
    refused_extras=REFUSED_EXTRAS,
    # "JAX will preallocate 75% of the total GPU memory" (https://docs.jax.dev/en/latest/gpu_memory_allocation.html)
    memory_fraction=("XLA_PYTHON_CLIENT_MEM_FRACTION", 0.75),
    modules=(("jax", ("jax",)), ("flax", ("flax",))),
)
