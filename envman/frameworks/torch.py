"""PyTorch: matrices/torch.yaml (releases → patches with companions, variants served from a wheel index
named per variant), and its names."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from envman._validate import Ctx, dupes, items, opt_str, patch_python, pythons
from envman.frameworks.base import Framework
from envman.model import PLATFORMS, FrameworkRelease, Provenance, Variant

COMPANIONS = ("torchvision", "torchaudio")


def _platforms(ctx: Ctx, ve: Any, vp: str, v: Variant) -> Variant:
    """``platforms: [x86_64, aarch64]`` (absent: x86_64 only) and, with aarch64, an ``aarch64:`` mapping that
    cites the aarch64 build and gives its arch lists where they differ."""
    raw = ve.get("platforms", ["x86_64"])
    if not isinstance(raw, list) or not raw or any(p not in PLATFORMS for p in raw) or len(set(raw)) != len(raw):
        ctx.bad(f"{vp}.platforms", f"expected a list of distinct {', '.join(PLATFORMS)}, got {raw!r}")
        return v
    arm = ve.get("aarch64")
    if "aarch64" not in raw:
        if arm is not None:
            ctx.bad(f"{vp}.aarch64", "given, but aarch64 is not in platforms")
        return replace(v, platforms=tuple(raw))
    if not isinstance(arm, dict):
        ctx.bad(f"{vp}.aarch64", "missing: an aarch64 build cites its wheel (measured: or source:)")
        return replace(v, platforms=tuple(raw))
    ap = f"{vp}.aarch64"
    archs = ctx.archs(arm, "archs", ap, optional=True) if arm.get("archs") is not None else None
    ptx = ctx.archs(arm, "ptx", ap, optional=True) if arm.get("ptx") is not None else None
    return replace(v, platforms=tuple(raw), aarch64_archs=archs, aarch64_ptx=ptx, aarch64_prov=ctx.prov(arm, ap))


def _aarch64_default(ctx: Ctx, e: Any, p: str, variants: list[Variant]) -> str | None:
    """``pypi_default_aarch64``: the variant the plain PyPI wheel on Linux aarch64 is, one with aarch64 wheels."""
    arm_default = e.get("pypi_default_aarch64") if isinstance(e, dict) else None
    arm_names = {v.name for v in variants if "aarch64" in v.platforms}
    if arm_default is None or arm_default in arm_names:
        return arm_default
    ctx.bad(f"{p}.pypi_default_aarch64", f"'{arm_default}' is not one of this release's aarch64 variants "
                                         f"({', '.join(sorted(arm_names)) or 'none'})")
    return None


def load_releases(doc: Any, ctx: Ctx) -> tuple[FrameworkRelease, ...]:
    index = ctx.req(doc, "index_url", "", str) or ""
    if index and "{variant}" not in index:
        ctx.bad("index_url", "must contain {variant}")
    out: list[FrameworkRelease] = []
    for p, e in items(ctx, doc, "releases"):
        line = ctx.version(e, "line", p)
        py = pythons(ctx, e, p)
        default = e.get("pypi_default") if isinstance(e, dict) else None
        numpy_abi = e.get("numpy_abi") if isinstance(e, dict) else None
        if numpy_abi not in (None, 1, 2):
            ctx.bad(f"{p}.numpy_abi", f"expected 1 or 2, got {numpy_abi!r}")
            numpy_abi = None
        prov = ctx.prov(e, p)
        variants = []
        for j, ve in enumerate(ctx.req(e, "variants", p, list) or []):
            vp = f"{p}.variants[{j}]"
            vname = ctx.req(ve, "name", vp, str)
            if vname is None:
                continue
            vprov = ctx.prov(ve, vp)
            if vname == "cpu":
                v = Variant("cpu", None, None, None, (), (), index.replace("{variant}", "cpu"), True, vprov)
            else:
                cuda = ctx.version(ve, "cuda", vp)
                if cuda is not None and vname != f"cu{cuda.major}{cuda.minor}":
                    ctx.bad(f"{vp}.name", f"'{vname}' does not match cuda '{cuda}' (expected cu{cuda.major}{cuda.minor})")
                v = Variant(vname, cuda, opt_str(ctx, ve, "cudnn", vp), opt_str(ctx, ve, "nccl", vp), ctx.archs(ve, "archs", vp),
                            ctx.archs(ve, "ptx", vp, optional=True), index.replace("{variant}", vname), True, vprov)
            variants.append(_platforms(ctx, ve, vp, v) if isinstance(ve, dict) else v)
        dupes(ctx, f"{p}.variants", [v.name for v in variants], "variant")
        names = {v.name for v in variants}
        if default is not None and default not in names:
            ctx.bad(f"{p}.pypi_default", f"'{default}' is not one of this release's variants ({', '.join(sorted(names))})")
        arm_default = _aarch64_default(ctx, e, p, variants)
        for k, pe in enumerate(ctx.req(e, "patches", p, list) or []):
            pp = f"{p}.patches[{k}]"
            ver = ctx.version(pe, "version", pp)
            pprov = ctx.prov(pe, pp)
            if ver is None or line is None:
                continue
            if (ver.major, ver.minor) != (line.major, line.minor):
                ctx.bad(f"{pp}.version", f"'{ver}' is not a {line} release")
            comps = []
            for c in COMPANIONS:
                cv = pe.get(c) if isinstance(pe, dict) else None
                if cv is not None and not isinstance(cv, str):
                    ctx.bad(f"{pp}.{c}", f"expected a quoted version or null, got {cv!r}")
                    cv = None
                comps.append((c, cv))
            rel_prov = pprov if pprov.source else prov
            if prov.uncertain and not rel_prov.uncertain:
                rel_prov = Provenance(rel_prov.source, True, prov.note)
            out.append(
                FrameworkRelease(
                    "torch", ver, patch_python(ctx, pe, pp, py), default, tuple(comps), numpy_abi,
                    tuple(variants), rel_prov, "torch", pypi_default_aarch64=arm_default,
                )
            )
    dupes(ctx, "releases", [r.version for r in out], "torch version")
    return tuple(sorted(out, key=lambda r: r.version, reverse=True))


TORCH = Framework(
    name="torch",
    matrix_file="torch.yaml",
    load_releases=load_releases,
    distributions=("torch",),
    aliases=("pytorch",),
    companions=COMPANIONS,
    index_packages=("torch", *COMPANIONS, "triton", "pytorch-triton"),
    modules=(("torch", ("torch",)),),
)
