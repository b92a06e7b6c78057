"""PURE: (matrix, request) → the newest consistent stack, with a reason for every choice.

No IO here: no files, no environment, no subprocess. Every candidate (release × variant) is judged
against every constraint; the verdicts are kept so that a refusal can name exactly what blocks and
which nearby stacks would work if one constraint moved.

Preference order (documented in docs/commands.md, deterministic):
  1. SASS coverage of every target over PTX-only coverage (PTX JIT is a fallback, never a default);
  2. the newest framework release;
  3. full driver compatibility over CUDA minor-version compatibility (PTX JIT — Triton,
     torch.compile — can fail below the full floor);
  4. the highest CUDA;
  5. the variant the plain PyPI wheel is (one index fewer), then the variant name.
Python: the highest the release publishes wheels for that matches the request, capped at the
matrix's default Python when the request names none.
"""

from __future__ import annotations

import re
from typing import cast

from packaging.version import Version

from envman.errors import ResolutionError, UsageError
from envman.model import (
    PLATFORMS,
    Cc,
    CudaImage,
    CudaRelease,
    FrameworkRelease,
    Gpu,
    LegacyBranch,
    Matrix,
    Note,
    Request,
    Resolution,
    Target,
    Variant,
    sass_covers,
)
from envman.resolve.candidates import (
    Candidate,
    best_candidate,
    candidates_for,
    describe_target,
    host_arch,
    pick_python,
    python_key,
    python_span,
    show_spec,
)
from envman.resolve.refusal import refusal


def check_request(matrix: Matrix, req: Request) -> None:
    """Input errors (exit 1) that are not resolution failures."""
    if req.framework is not None and req.framework not in matrix.frameworks:
        raise UsageError(
            f"unknown framework {req.framework!r}",
            hint=f"envman knows: {', '.join(sorted(matrix.frameworks))} (or leave the framework out)",
        )
    if not req.cpu and not req.targets:
        raise UsageError("no target GPU", hint="pass --target GPU (repeatable) or --cpu")
    if req.framework and len(req.python):
        known = sorted({p for r in matrix.frameworks[req.framework] for p in r.python}, key=python_key)
        if not any(req.python.contains(p, prereleases=True) for p in known):
            raise UsageError(
                f"no {req.framework} release has wheels for Python {show_spec(req.python)}",
                hint=f"{req.framework} publishes wheels for Python {python_span(tuple(known))}",
            )


def resolve_stack(matrix: Matrix, req: Request) -> Resolution:
    check_request(matrix, req)
    driver = req.driver if req.driver is not None else matrix.assumed_driver
    notes: list[Note] = []
    ceiling = _driver_ceiling(matrix, req)
    if req.driver is None and not req.cpu:
        if ceiling is not None and ceiling[1].last_driver is not None and ceiling[1].last_driver < driver:
            t, b = ceiling
            driver = cast(Version, b.last_driver)
            notes.append(Note(
                "driver",
                f"driver: none given; assuming {driver}, the last {b.branch} driver: {describe_target(t)} runs no newer "
                "branch (pass --driver to resolve for another)",
            ))
        else:
            notes.append(Note(
                "driver",
                f"driver: none given; assuming a current driver {matrix.assumed_driver} "
                "(pass --driver to resolve for an older one)",
            ))
    if not req.cpu:
        driver = _check_targets(matrix, req, driver, notes)
        _platform_note(req, notes)
    if req.framework is None:
        return _resolve_no_framework(matrix, req, driver, notes)
    cands = candidates_for(matrix, req, driver)
    best = best_candidate(cands)
    if best is None:
        raise refusal(matrix, req, cands, driver)
    if req.driver is None and not req.cpu and best.mode == "minor-compat":
        driver, best = _assumed_driver_runs_fully(matrix, req, cands, best, driver, notes)
        if best.mode == "full" and driver != matrix.assumed_driver:
            cands = candidates_for(matrix, req, driver)
    return _build(matrix, req, best, cands, driver, notes)


def _assumed_driver_runs_fully(matrix: Matrix, req: Request, cands: list[Candidate], best: Candidate,
                               driver: Version, notes: list[Note]) -> tuple[Version, Candidate]:
    """With no --driver, the default stack must not need a warning: the newest build the assumed driver runs
    fully (not through minor-version compatibility, where PTX JIT — Triton, torch.compile — can fail) wins over a
    newer one it runs only that way; when there is none, the driver that build needs is assumed, and said."""
    full = [c for c in cands if c.mode == "full" and not c.failures]
    cr = matrix.cuda_release(best.var.cuda)
    floor = cr.min_driver if cr else None
    if full and floor is not None:
        why = (f"needs driver ≥ {floor} for full support: the assumed driver {driver} runs it only through "
               "minor-version compatibility (pass --driver to resolve for the driver you run)")
        for c in cands:
            if c.mode == "minor-compat" and not c.failures:
                c.failures["driver"] = why
        return driver, cast(Candidate, best_candidate(cands))
    ceiling = _driver_ceiling(matrix, req)
    if floor is None or ceiling is not None and cast(Version, ceiling[1].last_driver) < floor:
        return driver, best  # no driver runs it fully: the minor-compat warning stays
    again = best_candidate(candidates_for(matrix, req, floor))
    if again is None or again.mode != "full":
        return driver, best
    notes[:] = [n for n in notes if not (n.topic == "driver" and "assuming a current driver" in n)]
    notes.append(Note("driver", f"driver: none given; assuming ≥ {floor}, the floor of CUDA {cr.label if cr else ''} for "
                                f"{again.rel.framework} {again.rel.version} {again.var.name}, the newest build that fits "
                                f"(the current driver {driver} runs none of the builds that fit fully; pass --driver to resolve for yours)"))
    return floor, again


def _check_targets(matrix: Matrix, req: Request, driver: Version, notes: list[Note]) -> Version:
    """Targets no stack can serve, whatever the framework: a Jetson, or a GPU older drivers cannot run.
    Returns the driver to resolve for (raised to a target's floor when none was given)."""
    for t in req.targets:
        if t.gpu is not None and t.gpu.segment == "embedded":
            raise ResolutionError(
                f"{t.label} is a Jetson (compute capability {t.cc} ({t.cc.sm})): envman resolves Linux x86_64 "
                "PyPI/download.pytorch.org stacks, which do not run on JetPack (L4T, aarch64, integrated GPU)",
                conflicts=[f"{t.label}: Jetson modules run the CUDA, cuDNN and driver of their JetPack release"],
                alternatives=[],
                hint="use NVIDIA's Jetson route: JetPack's L4T containers (nvcr.io/nvidia/l4t-jetpack, "
                "nvcr.io/nvidia/l4t-pytorch, nvcr.io/nvidia/l4t-ml) or the Jetson wheels of NVIDIA's Jetson AI Lab "
                "(https://pypi.jetson-ai-lab.io) and 'Installing PyTorch for Jetson Platform' "
                "(https://docs.nvidia.com/deeplearning/frameworks/install-pytorch-jetson-platform/)",
            )
    _check_host_archs(req)
    floors = [(t, g) for t in req.targets if (g := _floor_gpu(matrix, t)) is not None]
    if not floors:
        return driver
    top, top_gpu = max(floors, key=lambda x: cast(Version, x[1].min_driver))  # _floor_gpu keeps GPUs with a floor
    if req.driver is None:
        if driver < cast(Version, top_gpu.min_driver):
            notes.append(Note("driver", f"driver: none given; assuming ≥ {top_gpu.min_driver}, the first driver "
                                        f"that runs {describe_target(top)} ({_floor_why(top_gpu)})"))
            return cast(Version, top_gpu.min_driver)
        return driver
    blocked = [(t, g) for t, g in floors if driver < cast(Version, g.min_driver)]
    if blocked:
        t, g = max(blocked, key=lambda x: cast(Version, x[1].min_driver))
        short = re.sub(r"^(NVIDIA )?(GeForce |Tesla )?", "", t.gpu.name) if t.gpu else describe_target(t)
        prov = g.min_driver_prov
        unsure = f" (matrix data uncertain: {prov.note})" if prov and prov.uncertain else ""
        raise ResolutionError(
            f"{short} needs NVIDIA driver ≥ {g.min_driver} ({_floor_why(g)}); driver {driver} cannot run it",
            conflicts=[f"{describe_target(x)}: {_floor_fact(y)}" for x, y in blocked]
                      + ([f"source: {prov.source}{unsure}"] if prov else []),
            alternatives=[{"kind": "driver", "change": f"upgrade the NVIDIA driver to ≥ {g.min_driver}"}],
            hint=f"upgrade the NVIDIA driver to ≥ {g.min_driver} "
            f"({f'R{cast(Version, g.min_driver).major} or a later branch' if _from_list(g) else f'the {g.family} floor'}), "
            "or pass the "
            "driver the machines really run with --driver",
        )
    return driver


def _from_list(g: Gpu) -> bool:
    return g.listed is not None and g.min_driver == g.listed


def _floor_why(g: Gpu) -> str:
    """Where a GPU's floor comes from: NVIDIA's supported-GPU list (first release naming it), or its generation."""
    family = g.family or "its generation"
    return f"{family}; NVIDIA lists it from R{g.min_driver.major}" if _from_list(g) and g.min_driver else family


def _floor_fact(g: Gpu) -> str:
    if _from_list(g):
        return f"NVIDIA's supported-GPU list names it from driver {g.min_driver} (R{cast(Version, g.min_driver).major}) on"
    return f"{g.family or 'its generation'} runs on driver branch {g.min_driver} or newer"


def _check_host_archs(req: Request) -> None:
    """One image runs on one CPU architecture: a Grace (aarch64) target and an x86_64 one need two profiles."""
    by_arch: dict[str, list[str]] = {}
    for t in req.targets:
        by_arch.setdefault(t.gpu.host_arch if t.gpu is not None and t.gpu.host_arch else "x86_64", []).append(t.label)
    if len(by_arch) < 2:
        return
    arm, x86 = by_arch.get("aarch64", []), by_arch.get("x86_64", [])
    raise ResolutionError(
        f"the targets sit in hosts of two CPU architectures: {', '.join(arm)} (aarch64, Grace) and "
        f"{', '.join(x86)} (x86_64); one image runs on one of them",
        conflicts=[f"{', '.join(arm)}: Linux aarch64 (linux/arm64) wheels and image",
                   f"{', '.join(x86)}: Linux x86_64 (linux/amd64) wheels and image"],
        alternatives=[{"kind": "targets", "change": "split the targets into profiles (one per host architecture)"}],
        hint="split the targets into profiles, one per host architecture",
    )


def _platform_note(req: Request, notes: list[Note]) -> None:
    if host_arch(req) != "aarch64":
        return
    hosts = ", ".join(t.label for t in req.targets)
    notes.append(Note("platform", f"platform linux/arm64: {hosts} sit{'s' if len(req.targets) == 1 else ''} in a Grace "
                                  "(aarch64) host; only builds with Linux aarch64 (SBSA) wheels are candidates"))


def _floor_gpu(matrix: Matrix, t: Target) -> Gpu | None:
    """The GPU whose driver floor applies to a target: its own, or for a bare capability (sm_90) the lowest
    floor among the known non-Jetson GPUs of that capability."""
    if t.gpu is not None:
        return t.gpu if t.gpu.min_driver is not None else None
    same = [g for g in matrix.gpus if g.cc == t.cc and g.min_driver is not None and g.segment != "embedded"]
    return min(same, key=lambda g: cast(Version, g.min_driver)) if same else None


def _driver_ceiling(matrix: Matrix, req: Request) -> tuple[Target, LegacyBranch] | None:
    """(target, branch) of the target whose support ends earliest, when one of them is a legacy GPU (the branch
    always has a last_driver)."""
    best: tuple[Target, LegacyBranch] | None = None
    for t in req.targets:
        b = matrix.last_driver_for(t.cc)
        if b is not None and b.last_driver is not None and (
                best is None or b.last_driver < cast(Version, best[1].last_driver)):
            best = (t, b)
    return best


def _build(matrix: Matrix, req: Request, c: Candidate, cands: list[Candidate], driver: Version,
           notes: list[Note]) -> Resolution:
    """The chosen candidate as a Resolution: each decision adds its reason (a Note) or a warning."""
    rel, var = c.rel, c.var
    warnings = _legacy_driver_warning(matrix, req)
    notes.append(_release_note(req, rel, cands))
    if req.cpu:
        notes.append(Note("variant", f"{var.name}: CPU-only build requested (--cpu)"))
    else:
        cr = matrix.cuda_release(var.cuda)
        assert cr is not None
        notes.append(_variant_note(req, c, cands, cr, driver))
        warnings += _driver_mode_warnings(matrix, req, c, cr, driver)
        warnings += _coverage_warnings(req, c)
        warnings.extend(c.soft)
        if var.prov.uncertain:
            warnings.append(f"{rel.framework} {rel.version} {var.name}: matrix data marked uncertain: {var.prov.note}")
    notes.append(_python_note(matrix, req, c))
    base, base_kind, base_note = _base_image(matrix, req, var, c.python or matrix.base_images.default_python, rel)
    notes.append(base_note)
    if base_kind.startswith("cuda-"):
        c.python = _system_python(matrix, req, rel, var, c.python, notes)
    if var.cudnn:
        notes.append(Note("libraries", f"cuDNN {var.cudnn}" + (f", NCCL {var.nccl}" if var.nccl else "")
                          + f": what {rel.framework} {rel.version} {var.name} is built with"))
    return _resolution(matrix, req, c, driver, base, base_kind, notes, warnings)


def _legacy_driver_warning(matrix: Matrix, req: Request) -> list[str]:
    """A driver given past the last branch of a legacy target (a K80 on R535)."""
    ceiling = _driver_ceiling(matrix, req)
    if req.driver is None or ceiling is None or not req.driver > cast(Version, ceiling[1].last_driver):
        return []
    t, b = ceiling
    return [f"driver {req.driver} cannot drive {describe_target(t)}: its support ends with {b.branch} "
            f"(last driver {b.last_driver})"]


def _release_note(req: Request, rel: FrameworkRelease, cands: list[Candidate]) -> Note:
    """Why this release: the newest that fits, and what kept the next newer one out."""
    fw_text = req.framework_text or rel.framework
    newer_blocked = [x for x in cands if x.rel.version > rel.version and "framework" not in x.failures and x.failures]
    why_not = ""
    if newer_blocked:
        top = max(newer_blocked, key=lambda x: (x.rel.version, x.var.name == x.rel.pypi_default, x.var.cuda or Version("0")))
        why_not = f"; newer {top.rel.version} is out: " + "; ".join(top.failures.values())
    return Note("framework", f"{rel.framework} {rel.version}: newest release matching '{fw_text}' that fits every "
                             f"constraint{why_not}")


def _variant_note(req: Request, c: Candidate, cands: list[Candidate], cr: CudaRelease, driver: Version) -> Note:
    """Why this build: its CUDA runs on the driver, its arch list covers the targets; the siblings it beat."""
    var = c.var
    others = [x for x in cands if x.rel.version == c.rel.version and x.var.name != var.name]
    rejected = [f"{x.var.name} ({'; '.join(x.failures.values())})" for x in others if x.failures]
    sass_targets = [t for t in req.targets if t not in c.ptx_only]
    return Note("variant", (
        f"{var.name}: CUDA {cr.label} runs on driver {driver} "
        f"({'fully, ≥ ' + str(cr.min_driver) if c.mode == 'full' else 'through minor-version compatibility'}) "
        + (f"and its arch list carries SASS for {', '.join(describe_target(t) for t in sass_targets)}" if sass_targets else "")
        + (f"; PTX only for {', '.join(describe_target(t) for t in c.ptx_only)}" if c.ptx_only else "")
        + (f"; not {', '.join(rejected)}" if rejected else "")
    ))


def _driver_mode_warnings(matrix: Matrix, req: Request, c: Candidate, cr: CudaRelease, driver: Version) -> list[str]:
    """Minor-version compatibility works, with limits worth saying."""
    if c.mode != "minor-compat":
        return []
    major = matrix.cuda_major(cr.version.major)
    ceiling = _driver_ceiling(matrix, req)
    if ceiling is not None and cast(Version, ceiling[1].last_driver) < cr.min_driver:
        fix = f"no upgrade is possible: {describe_target(ceiling[0])} runs no driver past {ceiling[1].branch}"
    else:
        fix = f"upgrade the driver to ≥ {cr.min_driver} for full support"
    return [
        f"driver {driver} is below CUDA {cr.label}'s full-compatibility floor {cr.min_driver}; it runs "
        f"only through CUDA {cr.version.major}.x minor-version compatibility (≥ {major.minor_compat_floor if major else '?'}): "
        f"PTX JIT (Triton, torch.compile, custom kernels) can fail — {fix}"
    ]


def _coverage_warnings(req: Request, c: Candidate) -> list[str]:
    """Targets served by PTX only, by another minor's SASS, or sitting in a host envman cannot build for."""
    var = c.var
    out = [
        f"{describe_target(t)} is covered only by PTX ({' '.join(a.sm for a in var.ptx)}): the driver must JIT-compile "
        "every kernel at first use (slow start, and it fails if the driver is older than the PTX)"
        for t in c.ptx_only
    ]
    for t in req.targets:
        best = sass_covers(var.archs, t.cc) if t not in c.ptx_only else None
        if best is not None and (best.major, best.minor) != (t.cc.major, t.cc.minor):
            out.append(f"{describe_target(t)} relies on {best.sm} code on a {t.cc} device (same-major binary "
                       f"compatibility): the build's arch list has no {t.cc.sm}")
    return out


def _python_note(matrix: Matrix, req: Request, c: Candidate) -> Note:
    rel, default = c.rel, matrix.base_images.default_python
    if req.python and len(req.python):
        capped = python_key(c.python or "0.0") <= python_key(default) and any(
            req.python.contains(p, prereleases=True) and python_key(p) > python_key(c.python or "0.0") for p in rel.python)
        return Note("python", f"Python {c.python}: newest Python matching '{show_spec(req.python)}' with "
                              f"{rel.framework} {rel.version} wheels" + (f", capped at envman's default {default}" if capped else ""))
    return Note("python", f"Python {c.python}: newest Python {rel.framework} {rel.version} publishes wheels for "
                          f"({python_span(rel.python)}), capped at envman's default {default}")


def _resolution(matrix: Matrix, req: Request, c: Candidate, driver: Version, base: str, base_kind: str,
                notes: list[Note], warnings: list[str]) -> Resolution:
    rel, var = c.rel, c.var
    index = None if var.name == rel.pypi_default_on(c.arch) else var.index_url
    cr = matrix.cuda_release(var.cuda)
    major = matrix.cuda_major(cr.version.major) if cr else None
    return Resolution(
        framework=rel.framework,
        version=rel.version,
        variant=var.name,
        index_url=index,
        package=rel.package,
        companions=rel.companions,
        cuda=cr.label if cr else None,
        cudnn=var.cudnn,
        nccl=var.nccl,
        python=c.python or matrix.base_images.default_python,
        base_image=base,
        base_kind=base_kind,
        glibc=matrix.base_images.glibc_of(base),
        min_driver=str(cr.min_driver) if cr else None,
        min_driver_minor_compat=str(major.minor_compat_floor) if major else None,
        driver_mode=c.mode if not req.cpu else None,
        driver=str(driver) if not req.cpu else None,
        driver_assumed=req.driver is None and not req.cpu,
        arch_list=tuple(a.sm for a in sorted(var.archs)),
        ptx=tuple(a.sm for a in sorted(var.ptx)),
        targets=req.targets,
        extras=rel.extras if not var.is_cpu else (),
        notes=tuple(notes),
        warnings=tuple(warnings),
        platform=PLATFORMS[c.arch],
    )


def _base_image(matrix: Matrix, req: Request, var: Variant, python: str,
                rel: FrameworkRelease | None) -> tuple[str, str, Note]:
    img: str | CudaImage  # the slim image's name, or the CUDA image's entry
    needs_system = var.cuda is not None and (req.cuda_devel or not var.brings_cuda)
    if not needs_system:
        img = matrix.base_images.slim.replace("{python}", python)
        why = "its wheels bring their own CUDA libraries" if var.cuda is not None else "no system CUDA needed"
        return img, "slim", Note("base-image", f"base image {img}: slim Python base; {why} (no second CUDA copy)")
    kind = "devel" if req.cuda_devel else "runtime"
    exact = [i for i in matrix.base_images.cuda if i.cuda == var.cuda]
    if not exact:
        raise ResolutionError(
            f"no nvidia/cuda base image is known for CUDA {var.cuda}",
            conflicts=[f"base_images.yaml has no entry for CUDA {var.cuda}"],
            alternatives=[],
            hint="pass --base-image to use your own base",
        )
    img = exact[0]
    ref = img.devel if req.cuda_devel else img.runtime
    reason = "cuda_devel: the project compiles CUDA code and needs nvcc" if req.cuda_devel else (
        f"{rel.framework if rel else 'the stack'} {rel.version if rel else ''} loads CUDA {var.cuda} from the system"
    )
    if var.cudnn and img.cudnn and not var.cudnn.startswith(img.cudnn):
        reason += f" (image cuDNN {img.cudnn} vs build {var.cudnn})"
    return ref, f"cuda-{kind}", Note("base-image", f"base image {ref}: {reason}")


def _system_python(matrix: Matrix, req: Request, rel: FrameworkRelease, var: Variant, chosen: str | None,
                   notes: list[Note]) -> str | None:
    """nvidia/cuda images carry their distro's Python: the stack must use that one."""
    img = next(i for i in matrix.base_images.cuda if i.cuda == var.cuda)
    if img.python == chosen:
        return chosen
    if req.own_base:  # --base-image: the user's image brings the CUDA libraries and the Python
        notes.append(Note("base-image", f"the base image is yours: it must carry CUDA {var.cuda}'s libraries "
                                        f"(cuDNN {var.cudnn or '-'}) and Python {chosen}, as {img.runtime} would"))
        return chosen
    if img.python in rel.python and req.python.contains(img.python, prereleases=True):
        notes[:] = [n for n in notes if n.topic != "python"]  # the image decides, not the wheels
        notes.append(Note("python", f"Python {img.python}: the Python of {img.runtime.split(':')[0]}:{img.update} "
                                    f"on Ubuntu {img.ubuntu}"))
        return img.python
    raise ResolutionError(
        f"{rel.framework} {rel.version} {var.name} needs a system CUDA image, whose Python is {img.python}",
        conflicts=[f"Python {req.python or chosen} requested; Ubuntu {img.ubuntu} in {img.runtime} has Python {img.python}"
                   + ("" if img.python in rel.python else f", which {rel.framework} {rel.version} has no wheels for")],
        alternatives=[],
        hint=f"use Python {img.python}, or pass --base-image with a CUDA {var.cuda} image that has your Python",
    )


def _resolve_no_framework(matrix: Matrix, req: Request, driver: Version, notes: list[Note]) -> Resolution:
    py = pick_python(_all_slim_pythons(matrix), req.python, matrix.base_images.default_python)
    if py is None:
        raise UsageError(f"no supported Python matches {req.python}", hint=f"envman's default is {matrix.base_images.default_python}")
    if req.cpu:
        img = matrix.base_images.slim.replace("{python}", py)
        notes.append(Note("base-image", f"no framework, CPU only: base image {img}"))
        return _plain(req, py, img, "slim", None, None, notes, ())
    # Pick the newest toolkit this driver fully runs that compiles for every target.
    viable = [cr for cr in matrix.cuda if req.cuda.contains(cr.version, prereleases=True) and driver >= cr.min_driver
              and all(sass_covers(cr.archs, t.cc) for t in req.targets)]
    if not viable:
        raise ResolutionError(
            "no CUDA toolkit fits the driver and every target",
            conflicts=[f"driver {driver}; targets {', '.join(describe_target(t) for t in req.targets)}; cuda {req.cuda or 'any'}"],
            alternatives=[],
            hint="relax --cuda or upgrade the driver",
        )
    cr = viable[0]
    notes.append(Note(
        "cuda",
        f"CUDA {cr.label}: newest toolkit that driver {driver} fully supports (≥ {cr.min_driver}) and that compiles for "
        + ", ".join(describe_target(t) for t in req.targets),
    ))
    if req.cuda_devel:
        imgs = [i for i in matrix.base_images.cuda if i.cuda == cr.version] or [
            i for i in matrix.base_images.cuda if i.cuda <= cr.version
        ]
        if not imgs:
            raise ResolutionError(f"no nvidia/cuda base image is known for CUDA {cr.label}", [], [], hint="pass --base-image")
        img, kind = imgs[0].devel, "cuda-devel"
        notes.append(Note("base-image", f"base image {img}: cuda_devel needs nvcc"))
    else:
        img, kind = matrix.base_images.slim.replace("{python}", py), "slim"
        notes.append(Note("base-image", f"base image {img}: no framework asked for, so the image carries no CUDA of its own"))
    major = matrix.cuda_major(cr.version.major)
    return _plain(req, py, img, kind, cr.label, (str(cr.min_driver), str(major.minor_compat_floor) if major else None), notes, cr.archs, driver)


def _all_slim_pythons(matrix: Matrix) -> tuple[str, ...]:
    pys = {p for rels in matrix.frameworks.values() for r in rels for p in r.python}
    return tuple(sorted(pys, key=python_key))


def _plain(req: Request, py: str, img: str, kind: str, cuda: str | None,
           drivers: tuple[str, str | None] | None, notes: list[Note], archs: tuple[Cc, ...],
           driver: Version | None = None) -> Resolution:
    return Resolution(
        framework=None, version=None, variant=None, index_url=None, package=None, companions=(),
        cuda=cuda, cudnn=None, nccl=None, python=py, base_image=img, base_kind=kind,
        min_driver=drivers[0] if drivers else None, min_driver_minor_compat=drivers[1] if drivers else None,
        driver_mode="full" if cuda else None, driver=str(driver) if driver is not None else None,
        driver_assumed=req.driver is None and not req.cpu, arch_list=tuple(a.sm for a in sorted(archs)), ptx=(),
        targets=req.targets, extras=(), notes=tuple(notes), warnings=(), platform=PLATFORMS[host_arch(req)],
    )
