"""What the checks know about the world, derived from the matrix; stdlib only (a JSON copy in images)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Iterator

from ..versions import major, major_minor, ptx_for, sass_for, split_arch_list, vcmp, vge, vt


@dataclass(frozen=True)
class Build:
    """One variant of a framework release: ``cu128`` (CUDA 12.8) or ``cpu``."""

    variant: str
    cuda: str | None  # "12.8"
    cudnn: str | None
    nccl: str | None
    archs: tuple[str, ...]  # SASS: ("sm_80", "sm_90")
    ptx: tuple[str, ...]
    index_url: str | None
    cudnn_min_cc: tuple[int, int] | None = None  # its cuDNN runs on nothing older (None: unknown or uncertain)
    extra: str | None = None  # the extra of the release's package that installs this build (jax[cuda13])

    @property
    def is_cpu(self) -> bool:
        return self.cuda is None


@dataclass(frozen=True)
class Release:
    framework: str  # torch | tensorflow
    version: str  # "2.7.1"
    package: str
    python: tuple[str, ...]
    numpy_abi: int | None
    pypi_default: str | None  # variant the plain PyPI wheel is
    companions: tuple[tuple[str, str | None], ...]  # (("torchvision", "0.22.1"), ...)
    builds: tuple[Build, ...]
    extras: tuple[str, ...] = ()

    def build(self, variant: str | None) -> Build | None:
        return next((b for b in self.builds if b.variant == variant), None)

    def companion(self, name: str) -> str | None:
        return dict(self.companions).get(name)

    @property
    def line(self) -> str:
        return major_minor(self.version) or self.version


@dataclass(frozen=True)
class Feature:
    """A GPU feature with a hardware floor (matrices/extensions.yaml ``features``)."""

    id: str  # "bf16"
    name: str
    min_cc: tuple[int, int]
    precisions: tuple[str, ...] = ()  # workload.precision values that ask for it
    packages: tuple[tuple[str, str | None], ...] = ()  # (dist, version prefix) whose presence asks for it
    fails: str = ""
    instead: str = ""


@dataclass(frozen=True)
class ExtBuild:
    """From ``since`` on, ``package``'s PyPI wheel is built for CUDA ``cuda`` (major) and cuDNN ``cudnn``."""

    package: str
    since: str
    cuda: str
    cudnn: str | None = None


@dataclass(frozen=True)
class Knowledge:
    min_driver: dict[str, str] = field(default_factory=dict)  # CUDA "12.8" -> full-compatibility driver
    minor_floor: dict[int, str] = field(default_factory=dict)  # CUDA major -> minor-version-compat floor
    releases: dict[str, tuple[Release, ...]] = field(default_factory=dict)  # newest first
    digest: str | None = None  # the matrix's digest, to tell which data judged
    # GPUs up to this compute capability run no driver past this branch: ((major, minor), "R470", "470.256.02")
    legacy: tuple[tuple[tuple[int, int], str, str], ...] = ()
    features: tuple[Feature, ...] = ()
    ptx_isa: dict[str, str] = field(default_factory=dict)  # CUDA "12.4" -> newest PTX ISA "8.4" it JITs
    ext_builds: tuple[ExtBuild, ...] = ()  # newest first per package
    tf_windows_gpu_last: str | None = None  # last TensorFlow with GPU support on native Windows
    # NVIDIA wheels numbered by the CUDA toolkit (matrices/cuda.yaml toolkit_wheels): their version's major
    # is the CUDA major where the name carries no -cuNN
    toolkit_wheels: tuple[str, ...] = ()
    # GPU product name as NVML spells it (gpu_key) -> (first driver NVIDIA's supported-GPU list names it in, source)
    gpu_floors: dict[str, tuple[str, str]] = field(default_factory=dict)
    # matrices/extensions.yaml: the sonames each CUDA release's libraries carry ((cuda, ((stem, soname), …)), …),
    # the glibc a package's wheels need from a release on ((package, from, glibc), …), the first release of a
    # package with a native-Windows build ((package, from), …)
    cuda_sonames: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()
    wheel_glibc: tuple[tuple[str, str, str], ...] = ()
    windows_native: tuple[tuple[str, str], ...] = ()
    # matrices/base_images.yaml: NVIDIA's CUDA images ((cuda "11.8", cudnn "8", ubuntu "22.04", python "3.10"), …),
    # which say what an image FROM nvidia/cuda:… holds (the distro's python3 per Ubuntu release)
    cuda_images: tuple[tuple[str, str | None, str, str], ...] = ()
    # matrices/extensions.yaml triton_links_libcuda_so: the first Triton release whose launcher links libcuda.so.1,
    # not -lcuda (which needs an unversioned libcuda.so)
    triton_lcuda_before: str | None = None
    # matrices/extensions.yaml `loaders`: (package, what its loader compares beyond release/CPU/ABI, torch minor
    # releases of one C++ ABI (("2.4", "2.5"), …)); `cudnn_built`: (package, version, cuDNN it was compiled with);
    # `quirks`: (id, framework, versions, severity, says, remedy, when_installed, ((variable, text), …) of unless_env)
    loaders: tuple[tuple[str, tuple[str, ...], tuple[tuple[str, ...], ...]], ...] = ()
    cudnn_built: tuple[tuple[str, str, str], ...] = ()
    quirks: tuple[tuple[str, str, tuple[str, ...], str, str, str, str, tuple[tuple[str, str], ...]], ...] = ()

    def loader(self, package: str) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]:
        """(what ``package``'s loader compares beyond release/CPU/ABI, torch releases sharing one C++ ABI)."""
        return next(((c, s) for p, c, s in self.loaders if p == package), ((), ()))

    def built_cudnn(self, package: str, version: str | None) -> str | None:
        return next((c for p, v, c in self.cudnn_built if p == package and v == version), None)

    def quirks_of(self, framework: str, version: str | None) -> list[tuple[str, str, str, str, str, tuple[tuple[str, str], ...]]]:
        """(id, severity, says, remedy, when_installed, unless_env) of the known defects of this release."""
        return [(q[0], *q[3:]) for q in self.quirks if q[1] == framework and version in q[2]]

    def sonames(self, cuda: str | None) -> dict[str, str]:
        """{stem: soname version} of CUDA ``cuda``'s libraries ('libcufft' -> '10' for 11.8): the newest row of its
        major that is not newer than it; {} when the table has none."""
        rows = [(c, libs) for c, libs in self.cuda_sonames if major(c) == major(cuda) and vcmp(c, cuda) <= 0]
        return dict(max(rows, key=lambda r: vt(r[0]))[1]) if rows and cuda else {}

    def glibc_for(self, package: str, version: str | None) -> str | None:
        """The glibc ``package``'s Linux wheels of ``version`` need, when the table says."""
        hits = [(f, g) for p, f, g in self.wheel_glibc if p == package and version and vcmp(version, f) >= 0]
        return max(hits, key=lambda h: vt(h[0]))[1] if hits else None

    def windows_since(self, package: str) -> str | None:
        return next((f for p, f in self.windows_native if p == package), None)

    def max_ptx_isa(self, cuda: str | None) -> str | None:
        """The newest PTX ISA a driver supporting CUDA ``cuda`` can JIT (the newest row not above it)."""
        known = [c for c in self.ptx_isa if vcmp(c, cuda) <= 0] if cuda else []
        return self.ptx_isa[max(known, key=vt)] if known else None

    def ext_build_for(self, package: str, cuda_major: int | None) -> ExtBuild | None:
        """The newest listed release line of ``package`` built for that CUDA major."""
        hits = [b for b in self.ext_builds if b.package == package and major(b.cuda) == cuda_major]
        return max(hits, key=lambda b: vt(b.since)) if hits else None

    def package_floor(self, dist: str, version: str | None) -> tuple[int, int] | None:
        """The compute-capability floor a feature puts on an installed package (flash-attn 2.x → 8.0): below it
        no build of the package runs, so a rebuild is no remedy. ``dist`` PEP 503-normalised."""
        floors = [tuple(f.min_cc) for f in self.features for name, prefix in f.packages
                  if name.replace("_", "-").lower() == dist and version
                  and (prefix is None or vt(version)[:len(vt(prefix))] == vt(prefix))]
        return max(floors) if floors else None  # type: ignore[return-value]

    def driver_ceiling(self, cc: tuple[int, int]) -> tuple[str, str] | None:
        """(branch, last driver) that ends support for a GPU of this capability, or None."""
        hits = [(mc, br, last) for mc, br, last in self.legacy if tuple(cc) <= tuple(mc) and last]
        return min(hits)[1:] if hits else None

    # --- lookups -----------------------------------------------------------------------------

    def build_of(self, name: str, version: str, variant: str | None, gpu: bool | None) -> Build | None:
        """The matrix's build of an installed framework: its variant's, else (a framework that does not name
        its variants, like TensorFlow) the release's GPU build unless it is known to be a CPU build."""
        rel = self.release(name, version)
        if rel is None:
            return None
        if variant:
            return rel.build(variant)
        return None if gpu is False else next((b for b in rel.builds if not b.is_cpu), None)

    def companion_names(self, framework: str) -> tuple[str, ...]:
        """Every companion any release of ``framework`` names, in the order they are listed."""
        out: list[str] = []
        for r in self.releases.get(framework, ()):
            out += [c for c, _ in r.companions if c not in out]
        return tuple(out)

    def release(self, framework: str, version: str | None) -> Release | None:
        """The release of that version, else the newest patch of its minor line (patches share builds)."""
        if not version:
            return None
        base = str(version).split("+")[0]
        rels = self.releases.get(framework, ())
        exact = next((r for r in rels if vcmp(r.version, base) == 0), None)
        if exact:
            return exact
        line = vt(base)[:2]
        return next((r for r in rels if vt(r.version)[:2] == line), None)

    def newest(self, framework: str) -> Release | None:
        rels = self.releases.get(framework, ())
        return rels[0] if rels else None

    def full_driver(self, cuda: str | None) -> str | None:
        return self.min_driver.get(major_minor(cuda) or "")

    def floor_driver(self, cuda: str | None) -> str | None:
        m = major(cuda)
        return self.minor_floor.get(m) if m is not None else None

    def driver_mode(self, driver: str | None, cuda: str | None, driver_cuda: str | None = None) -> str | None:
        """'full' | 'minor' (minor-version compatibility) | 'too-old' | None; floors are inclusive. With no data on
        ``cuda`` the driver's own CUDA still tells: across majors always; within one, where the major has no
        minor-version compatibility (none before CUDA 11: the matrix's `majors` list the ones that have it), a driver
        runs no runtime newer than its own CUDA."""
        full, floor = self.full_driver(cuda), self.floor_driver(cuda)
        if driver and cuda and (full is not None or floor is not None):
            if full is not None and vge(driver, full):
                return "full"
            return "minor" if floor is not None and vge(driver, floor) else "too-old"
        older = major(driver_cuda) is not None and vcmp(major_minor(driver_cuda), major_minor(cuda)) < 0
        return "too-old" if older and (major(driver_cuda) != major(cuda) or floor is None) else None

    # --- searches that name remedies ---------------------------------------------------------

    def _candidates(self, framework: str, prefer: Release | None) -> Iterator[tuple[Release, Build]]:
        """Preferred release first (newest CUDA first), then every release newest first."""
        order = ([prefer] if prefer else []) + [r for r in self.releases.get(framework, ()) if r is not prefer]
        for rel in order:
            for b in sorted(rel.builds, key=lambda b: vt(b.cuda), reverse=True):
                if not b.is_cpu:
                    yield rel, b

    def best_build(
        self,
        framework: str,
        *,
        ccs: list[tuple[int, int]] | tuple[tuple[int, int], ...] = (),
        driver: str | None = None,
        prefer: Release | None = None,
        python: str | None = None,
        cuda_major: int | None = None,
    ) -> tuple[Release, Build] | None:
        """The newest GPU build whose SASS covers every device, that runs on ``driver`` and has wheels
        for ``python``; the preferred release wins when one of its builds qualifies."""
        for rel, b in self._candidates(framework, prefer):
            sass, _ = split_arch_list(b.archs)
            if any(sass_for(sass, c) is None for c in ccs):
                continue
            if b.cudnn_min_cc and any(tuple(c) < tuple(b.cudnn_min_cc) for c in ccs):
                continue  # e.g. cuDNN 9 in torch 2.4+ cu118 builds: no Kepler, whatever the arch list says
            if driver and self.driver_mode(driver, b.cuda) == "too-old":
                continue
            if python and rel.python and python not in rel.python:
                continue
            if cuda_major is not None and major(b.cuda) != cuda_major:
                continue
            return rel, b
        return None

    def first_release(self, framework: str, pred: Callable[..., bool]) -> Release | None:  # callers bind extra defaults
        """The oldest release satisfying ``pred`` (releases are stored newest first)."""
        return next((r for r in reversed(self.releases.get(framework, ())) if pred(r)), None)

    # --- (de)serialisation: the image's smoke test carries knowledge as JSON ------------------

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = json.loads(json.dumps(asdict(self)))  # as JSON carries it: lists, string keys
        d["ext_builds"] = [[b.package, b.since, b.cuda, b.cudnn] for b in self.ext_builds]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Knowledge:
        t = {f.name: _tuples(d[f.name]) for f in fields(cls) if d.get(f.name) is not None}
        t["minor_floor"] = {int(k): v for k, v in t.get("minor_floor", {}).items()}
        t["releases"] = {fw: tuple(Release(**dict(r, builds=tuple(Build(**b) for b in r["builds"]))) for r in rels)
                         for fw, rels in t.get("releases", {}).items()}
        t["features"] = tuple(Feature(**f) for f in t.get("features", ()))
        t["ext_builds"] = tuple(ExtBuild(*b) for b in t.get("ext_builds", ()))
        return cls(**t)


def _tuples(x: Any) -> Any:
    """JSON's lists as the tuples the dataclasses hold, all the way down."""
    if isinstance(x, dict):
        return {k: _tuples(v) for k, v in x.items()}
    return tuple(_tuples(v) for v in x) if isinstance(x, list) else x


def covers(build_archs: tuple[str, ...] | list[str], build_ptx: tuple[str, ...] | list[str],
           device: tuple[int, int]) -> str | None:
    """'sass' when the build carries SASS that runs on ``device``, 'ptx' when only PTX JIT reaches it."""
    sass, ptx_in_list = split_arch_list(build_archs)
    _, ptx2 = split_arch_list([f"compute_{a[3:]}" if str(a).startswith("sm_") else a for a in build_ptx])
    if sass_for(sass, device):
        return "sass"
    if ptx_for(ptx_in_list + ptx2, device):
        return "ptx"
    return None


def same_prefix(a: str, b: str) -> bool:
    """'12.8' vs '12.8.93': equal on the parts the shorter one names."""
    n = min(len(vt(a)), len(vt(b)))
    return vt(a)[:n] == vt(b)[:n]


def gpu_key(name: str) -> str:
    """A GPU product name as NVML and NVIDIA's list spell it: case, spacing and 'NVIDIA ' ignored."""
    s = " ".join(name.lower().split())
    return s[7:] if s.startswith("nvidia ") else s
