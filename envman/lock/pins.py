"""PURE: the exact framework requirement lines a resolution stands for, and contradiction checks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from envman import frameworks
from envman.errors import UsageError
from envman.frameworks.base import on_cpu
from envman.model import Matrix, Resolution, ToolkitWheels, target_environment
from envman.project.infer import spec_floor
from envman.project.req import Req


def framework_pins(res: Resolution, companions: tuple[str, ...]) -> list[str]:
    """The exact requirement lines of ``res`` (``torch==2.6.0+cu124``, companions to match), in its framework's pin format."""
    if res.framework is None:
        return []
    return frameworks.get(res.framework).pins(res, companions)


def check_user_requirements(res: Resolution, reqs: list[Req], yield_to_stack: bool = False,
                            notes: list[str] | None = None) -> list[Req]:
    """Drop the user's framework/companion lines after checking they agree with the stack. ``yield_to_stack``
    (envman.yaml ``framework_wins``, set when init chose against the repository's lines: ``--framework``/``--cuda``,
    or the CUDA-marked one of two frameworks): a line that disagrees is dropped and said in ``notes`` instead of
    refused, and a line of another framework (``tensorflow==2.15.0.post1`` beside a torch stack) is a plain
    package, installed as written."""
    comp = dict(res.companions)
    dists = frameworks.by_distribution()
    rest: list[Req] = []
    host = frameworks.get(res.framework) if res.framework is not None else None
    for r in reqs:
        fw = dists.get(r.name)
        if (fw is not None or r.name in comp) and not applies(r, res):
            continue  # `torch==2.10.0+cu130; platform_machine == "aarch64"` on an x86_64 stack: not the image's line
        if host is not None and fw is not None and fw != host.name and r.name in dict(host.cpu_beside):
            # tensorflow beside jax: the same range, the CPU wheel (the GPU one would take the GPU and its libraries)
            rest.append(replace(r, req=on_cpu(r.req, dict(host.cpu_beside)[r.name]), raw=None))
            continue
        if host is not None and fw is not None and fw != host.name and yield_to_stack:
            rest.append(r)  # another framework beside the stack's, as init chose and said: installed as written
            continue
        if host is not None and fw == host.name and (err := host.refusal(r.req, r.origin)) is not None:
            raise err
        if fw is not None or r.name in comp:
            chosen = str(res.version) if fw is not None else comp.get(r.name)
            label = f"{res.framework} {res.version} ({res.variant})" if fw is not None else f"{r.name} {chosen}"
            if res.framework is None or (fw is not None and fw != res.framework):
                raise UsageError(
                    f"{r.origin}: asks for {r.req}, but the stack has no {fw or r.name}",
                    hint="set framework in envman.yaml to match, or remove the line",
                )
            # torch==2.0.1+cu118 names the build as well: it holds when the stack is that variant's build
            local = f"{chosen}+{res.variant}" if chosen is not None and res.variant else None
            agrees = chosen is not None and (_contains(r.req.specifier, chosen) or bool(local and _contains(r.req.specifier, local)))
            if not agrees and yield_to_stack and notes is not None:
                notes.append(f"{r.origin}: {r.req} yields to the stack's {label} (framework_wins: true in envman.yaml)")
            elif not agrees:
                raise UsageError(
                    f"{r.origin}: asks for {r.req}, but the stack pins {label}",
                    hint="relax the requirement, or set framework in envman.yaml to a range that includes it and re-run init",
                )
            continue
        rest.append(r)
    return rest


def applies(r: Req, res: Resolution) -> bool:
    """The line's environment marker holds for the image: Linux, the stack's CPU architecture and Python."""
    if r.req.marker is None:
        return True
    try:  # packaging fills the names no lock decides (platform_release …) from this host, as target_environment does
        return r.req.marker.evaluate(target_environment(res.python, res.arch))
    except Exception:  # a marker packaging cannot evaluate: the line stands
        return True


def _contains(spec: SpecifierSet, version: str) -> bool:
    return spec.contains(Version(version), prereleases=True) or spec.contains(version.split("+")[0], prereleases=True)


def cuda_constraints(res: Resolution, wheels: ToolkitWheels, reqs: Sequence[Req] = ()) -> list[str]:
    """uv constraints that hold a framework whose wheels only set floors (tensorflow[and-cuda], jax) to the CUDA
    X.Y the resolution chose (what the driver floor is computed for), and to its cuDNN and NCCL floors within
    their majors (floors, as the wheels' own: a second framework may need a newer NCCL). ``wheels``: the
    CUDA-numbered NVIDIA wheels (matrices/cuda.yaml); one whose minor is its own in that CUDA major (cuBLAS 11.11
    in CUDA 11.8) is left to the framework's own requirement. Constraints add no package. A line of ``reqs`` (the
    project's, under its markers) that no held version meets is refused, naming it and the matrix fact."""
    if res.framework is None or res.cuda is None or frameworks.get(res.framework).pins_cuda_wheels:
        return []
    major = int(res.cuda.split(".")[0])

    def names(base: str) -> list[str]:
        return wheels.for_major(base, major)

    held = {n: (f"=={res.cuda}.*", f"CUDA {res.cuda}") for base in wheels.minor_numbered(major) for n in names(base)}
    for base, floor, what in (("nvidia-cudnn", res.cudnn, "cuDNN"), ("nvidia-nccl", res.nccl, "NCCL")):
        if floor:
            held.update({n: (f">={floor},<{int(floor.split('.')[0]) + 1}", f"{what} >= {floor}") for n in names(base)})
    for r in reqs:
        if r.name in held and applies(r, res) and not _meets(SpecifierSet(held[r.name][0]), r.req.specifier):
            spec, fact = held[r.name]
            low = spec_floor(r.req.specifier) if fact.startswith("CUDA") else ""
            raise UsageError(
                f"{r.origin}: asks for {r.req}, but the stack holds {r.name}{spec}: {fact} of {res.framework} "
                f"{res.version} {res.variant} (matrices/{res.framework}.yaml, from its wheels' floors on PyPI)",
                hint=f"re-run `envman init` with --cuda {low} (that build takes any CUDA {major}.x its floors allow), or relax the line"
                if low.startswith(f"{major}.") else "relax the line, or drop it (the stack brings that wheel)")
    return sorted(f"{n}{spec}" for n, (spec, _) in held.items())


def _meets(hold: SpecifierSet, line: SpecifierSet) -> bool:
    """Some version satisfies both: probed at every bound either names and the ends of each X.Y.* series."""
    bounds = [s.version.removesuffix(".*") for s in (*hold, *line) if s.operator != "==="]
    probes = [p for b in bounds for p in (b, f"{b}.0", f"{b}.99999")]
    return any(hold.contains(p, prereleases=True) and line.contains(p, prereleases=True) for p in probes)


def numpy_constraints(res: Resolution, matrix: Matrix) -> list[str]:
    """``numpy<2`` when the framework release was built against NumPy 1 (its matrix row's ``numpy_abi: 1``): NumPy 2
    cannot load its compiled modules ('A module that was compiled using NumPy 1.x cannot be run in NumPy 2.x'),
    and its METADATA does not say so (torch 2.1.2 names no numpy), so uv would choose NumPy 2 and the image would
    fail the doctor's numpy-abi check. A constraint adds no package."""
    if res.framework is None or res.version is None:
        return []
    base = Version(res.version.base_version)
    rel = next((r for r in matrix.frameworks.get(res.framework, ()) if Version(r.version.base_version) == base), None)
    return ["numpy<2"] if rel is not None and rel.numpy_abi == 1 else []
