"""PURE: the candidates a resolution chooses from — every (release, variant) judged against the request,
with what blocks it. Shared by the resolver (which picks the best) and the refusal (which explains why
none fits)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from envman import frameworks
from envman.model import (
    FrameworkRelease,
    Matrix,
    Request,
    Target,
    Variant,
    ptx_covers,
    sass_covers,
)

KINDS = ("framework", "python", "platform", "driver", "arch", "cuda", "cudnn")


@dataclass
class Candidate:
    rel: FrameworkRelease
    var: Variant
    python: str | None
    failures: dict[str, str] = field(default_factory=dict)
    mode: str | None = None  # driver: "full" | "minor-compat"
    ptx_only: tuple[Target, ...] = ()
    soft: list[str] = field(default_factory=list)  # verdicts resting on uncertain data: warn, never block
    arch: str = "x86_64"  # the CPU architecture the request builds for

    def key(self) -> tuple[bool, Version, bool, bool, Version, str]:
        return (
            not self.ptx_only,
            self.rel.version,
            self.mode == "full",
            # PyPI's default build before a newer CUDA from the framework's own index, when it fits the GPUs and
            # the driver (issue 38: cu129 from download.pytorch.org had been chosen over PyPI's cu128)
            self.var.name == self.rel.pypi_default_on(self.arch),
            self.var.cuda or Version("0"),
            self.var.name,
        )


def describe_target(t: Target) -> str:
    """A capability written both ways, ``3.7 (sm_37)``, with the GPU's name when there is one."""
    return f"{t.cc} ({t.cc.sm}, {t.label})" if t.gpu else f"{t.cc} ({t.cc.sm})"


def python_key(p: str) -> tuple[int, ...]:
    return tuple(int(x) for x in p.split("."))


def pick_python(available: tuple[str, ...], spec: SpecifierSet, default: str) -> str | None:
    ok = sorted((p for p in available if spec.contains(p, prereleases=True)), key=python_key)
    if not ok:
        return None
    # a floor (requires-python = ">=3.8") does not lift the default cap; only a repository that needs a
    # newer Python than the cap gets one, and then the oldest that satisfies it
    capped = [p for p in ok if python_key(p) <= python_key(default)]
    return capped[-1] if capped else ok[0]


def driver_verdict(matrix: Matrix, var: Variant, driver: Version) -> tuple[str | None, str | None]:
    """(mode, failure): mode "full" or "minor-compat" when the driver runs the variant's CUDA."""
    cr = matrix.cuda_release(var.cuda)
    if cr is None:
        return None, f"CUDA {var.cuda} is not in cuda.yaml"
    if driver >= cr.min_driver:
        return "full", None
    major = matrix.cuda_major(cr.version.major)
    if major is not None and driver >= major.minor_compat_floor:
        return "minor-compat", None
    floor = f"; {cr.version.major}.x minor-version floor {major.minor_compat_floor}" if major else ""
    return None, f"driver {driver} is below {var.name}'s requirement ≥ {cr.min_driver}{floor}"


def host_arch(req: Request) -> str:
    """The CPU architecture of the targets' hosts ("aarch64" for Grace systems); the resolver has already
    refused a request whose targets sit in hosts of different architectures."""
    archs = {t.gpu.host_arch for t in req.targets if t.gpu is not None and t.gpu.host_arch}
    return "aarch64" if archs == {"aarch64"} else "x86_64"


def lifted(matrix: Matrix, req: Request, rel: FrameworkRelease, var: Variant) -> Variant:
    """A build whose wheels only set floors (jax, tensorflow[and-cuda]) at a newer CUDA of its major when the
    request excludes the matrix's (the oldest its floors allow): the oldest cuda.yaml release the request admits."""
    if var.cuda is None or req.cuda.contains(var.cuda, prereleases=True) or frameworks.get(rel.framework).pins_cuda_wheels:
        return var
    up = [c.version for c in matrix.cuda if c.version.major == var.cuda.major and c.version > var.cuda
          and req.cuda.contains(c.version, prereleases=True)]
    return replace(var, cuda=min(up)) if up else var


def judge(matrix: Matrix, req: Request, rel: FrameworkRelease, var: Variant, driver: Version,
          arch: str = "x86_64") -> Candidate:
    py = pick_python(rel.python, req.python, matrix.base_images.default_python)
    c = Candidate(rel, lifted(matrix, req, rel, var.on(arch)), py, arch=arch)
    var = c.var
    if not req.framework_spec.contains(rel.version, prereleases=True):
        c.failures["framework"] = f"{rel.framework} {rel.version} does not match {req.framework_text}"
    if arch not in var.platforms:
        c.failures["platform"] = f"{rel.framework} {rel.version} {var.name} has no Linux {arch} wheels (in the matrix)"
    if py is None:
        c.failures["python"] = (
            f"{rel.framework} {rel.version} has no wheels for Python {show_spec(req.python)} (it has {python_span(rel.python)})"
        )
    if req.cpu:
        return c
    if var.cuda is not None and not req.cuda.contains(var.cuda, prereleases=True):
        c.failures["cuda"] = f"{var.name} has CUDA {var.cuda}, not {req.cuda}"
    elif req.variant is not None and var.name != req.variant:
        c.failures["cuda"] = f"{var.name} is not the requested build +{req.variant}"
    mode, why = driver_verdict(matrix, var, driver)
    c.mode = mode
    if why:
        c.failures["driver"] = why
    uncovered = [t for t in req.targets if not sass_covers(var.archs, t.cc)]
    c.ptx_only = tuple(t for t in uncovered if ptx_covers(var.ptx, t.cc))
    missing = [t for t in uncovered if t not in c.ptx_only]
    if missing:
        newest = max(var.archs).sm if var.archs else "none"
        c.failures["arch"] = (
            f"{rel.framework} {rel.version} {var.name} carries no SASS for "
            + ", ".join(describe_target(t) for t in missing)
            + f" (its arch list: {' '.join(a.sm for a in sorted(var.archs)) or newest})"
        )
    dnn = matrix.cudnn_release(var.cudnn)
    floor = dnn.floor_for(var.cuda.major) if dnn is not None and var.cuda is not None else None
    if floor is not None and dnn is not None:  # a floor comes from a cuDNN release
        low = [t for t in req.targets if t.cc < floor]
        if low:
            why = (
                f"cuDNN {var.cudnn} of {var.name} needs compute capability ≥ {floor}; "
                + ", ".join(f"{t.label} is {t.cc}" for t in low)
            )
            if dnn.prov.uncertain:
                c.soft.append(why + f" (matrix data uncertain: {dnn.prov.note})")
            else:
                c.failures["cudnn"] = why
    return c


def show_spec(spec: SpecifierSet) -> str:
    """``==3.11.*`` reads back as the ``3.11`` the user typed."""
    text = str(spec)
    if text.startswith("==") and text.endswith(".*") and "," not in text:
        return text[2:-2]
    return text


def python_span(pys: tuple[str, ...]) -> str:
    s = sorted(pys, key=python_key)
    if not s:
        return "none"
    return s[0] if len(s) == 1 else f"{s[0]}–{s[-1]}"


def candidates_for(matrix: Matrix, req: Request, driver: Version) -> list[Candidate]:
    arch = host_arch(req)
    return [judge(matrix, req, rel, var, driver, arch) for rel in matrix.frameworks.get(req.framework or "", ())
            for var in rel.variants if var.is_cpu == req.cpu]


def best_candidate(cands: list[Candidate], ignore: frozenset[str] = frozenset()) -> Candidate | None:
    ok = [c for c in cands if not (set(c.failures) - ignore)]
    return max(ok, key=Candidate.key) if ok else None
