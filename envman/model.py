"""Frozen value types shared by every layer: the matrix, a resolution request and its answer.

Raw dicts never travel past the loaders: versions are ``packaging`` objects and architectures are
``Cc`` values from here on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from envman.portable.versions import arch_tuple, runs_ptx, runs_sass


class Ver(Version):
    """A Version that prints as written: drivers are '570.124.06', never '570.124.6'."""

    def __init__(self, text: str):
        super().__init__(text)
        self._text = str(text).strip()

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"<Ver {self._text!r}>"

    # Version's slots would drop _text: rebuild from the text (matrix cache)
    def __reduce__(self) -> tuple[type[Ver], tuple[str]]:
        return (Ver, (self._text,))


_SM = re.compile(r"^sm_(\d+)(\d)([af]?)\Z")
_CC = re.compile(r"^(\d+)\.(\d)\Z")


@dataclass(frozen=True, order=True)
class Cc:
    """A CUDA compute capability, e.g. 8.9 (= ``sm_89``); as a build target it may carry the
    arch-specific (``sm_90a``) or family (``sm_100f``) suffix."""

    major: int
    minor: int
    suffix: str = ""

    @classmethod
    def parse(cls, text: str) -> Cc:
        """Accept ``sm_89``, ``sm_90a``, ``sm_100f``, ``8.9`` or ``89``; raise ValueError otherwise."""
        t = str(text).strip().lower()
        if m := _SM.match(t):
            return cls(int(m.group(1)), int(m.group(2)), m.group(3))
        if m := _CC.match(t):
            return cls(int(m.group(1)), int(m.group(2)))
        if t.isdigit() and len(t) in (2, 3):
            return cls(int(t[:-1]), int(t[-1]))
        raise ValueError(f"not a compute capability: {text!r}")

    @property
    def sm(self) -> str:
        return f"sm_{self.major}{self.minor}{self.suffix}"

    @property
    def arch(self) -> tuple[int, ...]:
        """The portable island's architecture tuple."""
        return arch_tuple(self.major, self.minor, self.suffix)

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


def sass_covers(archs: tuple[Cc, ...], device: Cc) -> Cc | None:
    """The best SASS in ``archs`` that runs on ``device``, by the one rule in ``envman.portable.versions``."""
    usable = [a for a in archs if runs_sass(a.arch, device.arch)]
    return max(usable) if usable else None


def ptx_covers(ptx: tuple[Cc, ...], device: Cc) -> Cc | None:
    """The best PTX in ``ptx`` the driver can JIT-compile for ``device`` (the same one rule)."""
    usable = [a for a in ptx if runs_ptx(a.arch, device.arch)]
    return max(usable) if usable else None


@dataclass(frozen=True)
class Provenance:
    source: str
    uncertain: bool = False
    note: str | None = None


@dataclass(frozen=True)
class CudaMajor:
    major: int
    minor_compat_floor: Version
    prov: Provenance


@dataclass(frozen=True)
class ToolkitWheels:
    """NVIDIA's PyPI wheels numbered by the CUDA toolkit version (matrices/cuda.yaml ``toolkit_wheels``)."""

    names: tuple[str, ...]  # their version's major is the CUDA major they belong to
    suffix_dropped_from: int  # from this CUDA major on the names carry no -cuNN
    prov: Provenance
    # (name, CUDA majors) where that name's minor is its own, not the toolkit's (nvidia-cublas-cu11 11.11 in CUDA 11.8)
    own_minor: tuple[tuple[str, tuple[int, ...]], ...] = ()

    def minor_numbered(self, major: int) -> list[str]:
        """The names whose X.Y is the toolkit's in CUDA ``major``: what a lock may hold to the variant's X.Y.*."""
        own = {n for n, majors in self.own_minor if major in majors}
        return [n for n in self.names if n not in own]

    def for_major(self, base: str, major: int) -> list[str]:
        """The names ``base`` is published under for a CUDA major: nvidia-cublas-cu12; nvidia-cublas-cu13 and
        nvidia-cublas for 13."""
        return [f"{base}-cu{major}"] + ([base] if major >= self.suffix_dropped_from else [])


@dataclass(frozen=True)
class OtherAccelerator:
    """Another vendor's accelerators (gpus.yaml other_accelerators): a target whose normalised name matches one of
    ``patterns`` (full-match regular expressions) is refused with one sentence naming ``vendor`` and ``stack``."""

    vendor: str
    stack: str
    patterns: tuple[str, ...]
    prov: Provenance


@dataclass(frozen=True)
class LegacyBranch:
    """GPUs up to ``max_cc`` run no driver newer than ``last_driver`` (None: the branch is still maintained)."""

    max_cc: Cc
    branch: str
    last_driver: Version | None
    prov: Provenance


@dataclass(frozen=True)
class CudaRelease:
    version: Version  # X.Y
    latest_update: str
    min_driver: Version  # full compatibility (Linux)
    archs: tuple[Cc, ...]
    prov: Provenance

    @property
    def label(self) -> str:
        return f"{self.version.major}.{self.version.minor}"


@dataclass(frozen=True)
class Gpu:
    id: str
    name: str
    cc: Cc
    memory_gib: float | None
    segment: str
    aliases: tuple[str, ...]
    prov: Provenance
    family: str | None = None  # architecture family named in messages ("Hopper")
    min_driver: Version | None = None  # first driver that runs this GPU at all ("550.40.65", or a branch "450")
    min_driver_prov: Provenance | None = None
    host_arch: str | None = None  # "aarch64" on Grace systems; None: x86_64 hosts (or not recorded)
    listed: Version | None = None  # first release of NVIDIA's supported-GPU list that names it (gpus.yaml driver:)
    pci: tuple[tuple[str, Version], ...] = ()  # PCI device IDs ("2335") with the first release listing each


@dataclass(frozen=True)
class Variant:
    """One build of a framework release: a CUDA variant (``cu128``) or ``cpu``."""

    name: str
    cuda: Version | None
    cudnn: str | None
    nccl: str | None
    archs: tuple[Cc, ...]
    ptx: tuple[Cc, ...]
    index_url: str | None  # None: the plain PyPI package is this build
    brings_cuda: bool  # the wheels carry their own CUDA libraries (no system CUDA needed)
    prov: Provenance
    platforms: tuple[str, ...] = ("x86_64",)  # CPU architectures with Linux wheels of this build
    # the aarch64 (SBSA) build where it differs or was cited apart: its arch lists (None: as x86_64) and provenance
    aarch64_archs: tuple[Cc, ...] | None = None
    aarch64_ptx: tuple[Cc, ...] | None = None
    aarch64_prov: Provenance | None = None

    def on(self, arch: str) -> Variant:
        """This build as it is on ``arch`` (its arch lists and provenance there)."""
        if arch != "aarch64":
            return self
        return replace(self, archs=self.aarch64_archs if self.aarch64_archs is not None else self.archs,
                       ptx=self.aarch64_ptx if self.aarch64_ptx is not None else self.ptx,
                       prov=self.aarch64_prov or self.prov)

    @property
    def is_cpu(self) -> bool:
        return self.cuda is None


@dataclass(frozen=True)
class FrameworkRelease:
    framework: str  # "torch" | "tensorflow"
    version: Version
    python: tuple[str, ...]
    pypi_default: str | None  # variant name of the plain PyPI wheel on Linux x86_64
    companions: tuple[tuple[str, str | None], ...]
    numpy_abi: int | None
    variants: tuple[Variant, ...]
    prov: Provenance
    package: str  # the distribution name to install (torch, tensorflow)
    extras: tuple[str, ...] = ()
    pypi_default_aarch64: str | None = None  # variant the plain PyPI wheel on Linux aarch64 is (None: not recorded)

    def pypi_default_on(self, arch: str) -> str | None:
        return self.pypi_default_aarch64 if arch == "aarch64" else self.pypi_default

    def variant(self, name: str) -> Variant | None:
        return next((v for v in self.variants if v.name == name), None)


@dataclass(frozen=True)
class CudnnRelease:
    version: Version  # major.minor
    cuda_majors: tuple[int, ...]
    min_cc: tuple[tuple[int, Cc], ...]  # (CUDA major, lowest compute capability of that build)
    prov: Provenance

    def floor_for(self, cuda_major: int) -> Cc | None:
        return next((cc for m, cc in self.min_cc if m == cuda_major), None)


@dataclass(frozen=True)
class CudaImage:
    cuda: Version
    update: str
    cudnn: str | None
    ubuntu: str
    python: str
    runtime: str
    devel: str
    prov: Provenance


@dataclass(frozen=True)
class BaseImages:
    slim: str  # pattern with {python}
    slim_prov: Provenance
    default_python: str
    cuda: tuple[CudaImage, ...]
    glibc: tuple[tuple[str, str], ...] = ()  # distribution ("bookworm", "ubuntu22.04") → its glibc ("2.36")

    def glibc_of(self, image: str) -> str | None:
        """The glibc of a base image envman chose, from the distribution its tag names."""
        return next((v for distro, v in self.glibc if distro in image), None)


@dataclass(frozen=True)
class Matrix:
    assumed_driver: Version
    assumed_driver_prov: Provenance
    cuda_majors: tuple[CudaMajor, ...]
    cuda: tuple[CudaRelease, ...]
    gpus: tuple[Gpu, ...]
    frameworks: dict[str, tuple[FrameworkRelease, ...]]  # newest first
    cudnn: tuple[CudnnRelease, ...]
    base_images: BaseImages
    digest: str  # sha256 over the matrix files' bytes: lets a lock notice changed data
    legacy_branches: tuple[LegacyBranch, ...] = ()
    toolkit_wheels: ToolkitWheels = ToolkitWheels((), 99, Provenance(""))
    other_accelerators: tuple[OtherAccelerator, ...] = ()

    def last_driver_for(self, cc: Cc) -> LegacyBranch | None:
        """The driver branch that ends support for a GPU of this capability (the lowest applicable one)."""
        hits = [b for b in self.legacy_branches if cc <= b.max_cc]
        return min(hits, key=lambda b: b.max_cc) if hits else None

    def cuda_release(self, version: Version | None) -> CudaRelease | None:
        if version is None:
            return None
        return next((c for c in self.cuda if c.version == version), None)

    def cuda_major(self, major: int) -> CudaMajor | None:
        return next((m for m in self.cuda_majors if m.major == major), None)

    def cudnn_release(self, full: str | None) -> CudnnRelease | None:
        if not full:
            return None
        parts = full.split(".")
        if len(parts) < 2:
            return None
        mm = Version(".".join(parts[:2]))
        return next((c for c in self.cudnn if c.version == mm), None)


# --- a resolution request and its answer -------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """A GPU to serve: from gpus.yaml (``gpu`` set) or a bare capability (``sm_89``)."""

    label: str
    cc: Cc
    gpu: Gpu | None = None


@dataclass(frozen=True)
class Request:
    framework: str | None = None  # "torch" / "tensorflow"
    framework_spec: SpecifierSet = field(default_factory=SpecifierSet)
    framework_text: str | None = None  # what the user typed, for messages
    python: SpecifierSet = field(default_factory=SpecifierSet)
    targets: tuple[Target, ...] = ()
    driver: Version | None = None
    cuda: SpecifierSet = field(default_factory=SpecifierSet)
    variant: str | None = None  # a pinned build, e.g. from torch==2.6.0+cu124
    cpu: bool = False
    cuda_devel: bool = False  # the project compiles CUDA code: needs nvcc of the framework's CUDA
    own_base: bool = False  # the image starts from the user's base (--base-image): its Python is theirs to match


class Note(str):
    """One reason the resolver gives, with its topic ("driver", "framework", "variant", "python",
    "base-image", "libraries", "targets", "cuda"). It is its text wherever text is wanted (JSON, the CLI);
    the topic lets a later decision replace an earlier reason without matching strings."""

    topic: str

    def __new__(cls, topic: str, text: str) -> Note:
        self = super().__new__(cls, text)
        self.topic = topic
        return self

    # pickles (the matrix cache, multiprocessing) keep the topic
    def __reduce__(self) -> tuple[type[Note], tuple[str, str]]:
        return (Note, (self.topic, str(self)))


@dataclass(frozen=True)
class Resolution:
    framework: str | None
    version: Version | None
    variant: str | None
    index_url: str | None
    package: str | None
    companions: tuple[tuple[str, str | None], ...]
    cuda: str | None
    cudnn: str | None
    nccl: str | None
    python: str
    base_image: str
    base_kind: str  # "slim" | "cuda-runtime" | "cuda-devel"
    min_driver: str | None  # full compatibility
    min_driver_minor_compat: str | None  # the major's floor, when minor-version compatibility applies
    driver_mode: str | None  # "full" | "minor-compat" | None (cpu)
    driver: str | None
    driver_assumed: bool
    arch_list: tuple[str, ...]
    ptx: tuple[str, ...]
    targets: tuple[Target, ...]
    extras: tuple[str, ...]
    notes: tuple[str, ...]  # Note values: the reasons, in the order the decisions were taken
    warnings: tuple[str, ...]
    platform: str = "linux/amd64"  # the image platform: "linux/arm64" when the targets sit in aarch64 hosts
    glibc: str | None = None  # the base image's glibc ("2.36"): the newest manylinux tag its wheels may carry

    @property
    def arch(self) -> str:
        """The CPU architecture of the stack's wheels: "x86_64" or "aarch64"."""
        return PLATFORM_ARCH.get(self.platform, "x86_64")


# image platform ↔ CPU architecture of the wheels (manylinux tags, gpus.yaml host_arch)
PLATFORMS = {"x86_64": "linux/amd64", "aarch64": "linux/arm64"}
PLATFORM_ARCH = {v: k for k, v in PLATFORMS.items()}


# GPU names, normalised the same way by the matrix loader and the target lookup
_GPU_DROP = re.compile(r"\b(nvidia|geforce|tesla)\b")
_GPU_NON_ALNUM = re.compile(r"[^a-z0-9]+")


def normalize_gpu_name(text: str) -> str:
    """``NVIDIA GeForce RTX 4090`` and ``rtx-4090`` both become ``rtx4090``."""
    t = _GPU_DROP.sub(" ", str(text).lower())
    return _GPU_NON_ALNUM.sub("", t)


def target_environment(python: str, platform: str) -> dict[str, str]:
    """The PEP 508 marker environment of the image: Linux, the stack's CPU architecture and Python (the names no
    lock decides, platform_release and the like, as on this host)."""
    from packaging.markers import default_environment

    return {**{k: str(v) for k, v in default_environment().items()},
            "sys_platform": "linux", "platform_system": "Linux", "os_name": "posix",
            "platform_machine": platform.split("-")[0], "python_version": python, "python_full_version": f"{python}.0",
            "implementation_name": "cpython", "platform_python_implementation": "CPython"}
