"""TensorFlow: matrices/tensorflow.yaml (tested build configurations: one CUDA build per line, from PyPI),
and its names."""

from __future__ import annotations

from typing import Any

from packaging.version import InvalidVersion, Version

from envman._validate import Ctx, dupes, items, opt_str, pythons
from envman.frameworks.base import Framework
from envman.model import FrameworkRelease, Variant


def load_releases(doc: Any, ctx: Ctx) -> tuple[FrameworkRelease, ...]:
    out: list[FrameworkRelease] = []
    for p, e in items(ctx, doc, "releases"):
        line = ctx.version(e, "line", p)
        py = pythons(ctx, e, p)
        cuda = ctx.version(e, "cuda", p)
        cudnn = opt_str(ctx, e, "cudnn", p)
        and_cuda = e.get("and_cuda") if isinstance(e, dict) else None
        if not isinstance(and_cuda, bool):
            ctx.bad(f"{p}.and_cuda", f"expected true/false, got {and_cuda!r}")
            and_cuda = False
        plats = e.get("gpu_platforms") if isinstance(e, dict) else None
        if not isinstance(plats, list):
            ctx.bad(f"{p}.gpu_platforms", "expected a list like [linux]")
        archs = ctx.archs(e, "archs", p)
        ptx = ctx.archs(e, "ptx", p, optional=True)
        prov = ctx.prov(e, p)
        patches = ctx.req(e, "patches", p, list) or []
        if line is None or cuda is None:
            continue
        name = f"cu{cuda.major}{cuda.minor}"
        gpu = Variant(name, cuda, cudnn, None, archs, ptx, None, and_cuda, prov)
        cpu = Variant("cpu", None, None, None, (), (), None, True, prov)
        for k, pv in enumerate(patches):
            try:
                ver = Version(str(pv))
                if not isinstance(pv, str) or (ver.major, ver.minor) != (line.major, line.minor):
                    raise InvalidVersion
            except InvalidVersion:
                ctx.bad(f"{p}.patches[{k}]", f"expected a quoted {line}.x version, got {pv!r}")
                continue
            out.append(
                FrameworkRelease(
                    "tensorflow", ver, py, name, (), None, (gpu, cpu), prov, "tensorflow",
                    ("and-cuda",) if and_cuda else (),
                )
            )
    dupes(ctx, "releases", [r.version for r in out], "tensorflow version")
    return tuple(sorted(out, key=lambda r: r.version, reverse=True))


_DISTS = ("tensorflow", "tensorflow-gpu", "tensorflow-cpu", "tf-nightly")

TENSORFLOW = Framework(
    name="tensorflow",
    matrix_file="tensorflow.yaml",
    load_releases=load_releases,
    distributions=_DISTS,
    aliases=("tf", "tensorflow-gpu", "tensorflow-cpu"),
    pins_cuda_wheels=False,  # tensorflow[and-cuda] asks for nvidia-*>= floors only
    modules=(("tensorflow", _DISTS), ("keras", ("keras", "tf-keras", *_DISTS))),
)
