"""JAX releases on the index, read into matrices/jax.yaml: ``python -m tools.matrix sync jax``.

A JAX CUDA stack is four wheels that must agree exactly: ``jax``, ``jaxlib``, ``jax-cudaNN-plugin`` (the
kernels jaxlib calls: PRNG, linear algebra, solvers) and ``jax-cudaNN-pjrt`` (XLA's CUDA backend), chosen
by jax's ``[cudaNN]`` extra. Everything the matrix says of a build is read from those wheels:

- the plugin version: the ``jax-cudaNN-plugin`` requirement under jax's ``cudaNN`` extra (METADATA);
- the NVIDIA wheels: the ``nvidia-*`` requirements under the plugin's ``with-cuda`` extra (under jax's own
  ``cudaNN`` extra before 0.4.30). They are floors (``nvidia-cudnn-cu13>=9.12.0.46,<10``): the CUDA X.Y
  of a build is the highest minor the CUDA-numbered floors name, cuDNN and NCCL their floors' X.Y;
- the Python versions: the CPython tags of the Linux x86_64 wheels of jaxlib and of the plugin;
- SASS and PTX: the fat binaries of the plugin's kernel libraries (``_prng.so``, ``_linalg.so``,
  ``_solver.so``), range-read out of the remote wheel (about 1-3 MB a build; nothing else is downloaded)
  and walked by ``envman.portable.fatbin``. The XLA backend (``xla_cuda_plugin.so`` in the pjrt wheel,
  130-400 MB) is built with the same ``HERMETIC_CUDA_COMPUTE_CAPABILITIES``.

PyPI serves no PEP 658 metadata for these wheels (2026-12): METADATA comes by HTTP range requests.
The file is generated whole (``render_jax_yaml``): a refresh reads every release again and shows the diff.
"""

from __future__ import annotations

import re
import tempfile
import zipfile
from dataclasses import dataclass, field
from email.parser import Parser
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from envman.model import Matrix
from tools.matrix.pypi import IndexFile, Project, read_remote_wheel
from tools.matrix.remote import RangeReader

KERNEL_LIBS = ("_prng.so", "_linalg.so", "_solver.so")  # the plugin's libraries that carry CUDA kernels
MAJORS = (12, 13)
PLUGIN = "jax-cuda{}-plugin"
PJRT = "jax-cuda{}-pjrt"
FIRST = Version("0.4.22")  # the first jax whose [cuda12] extra installs jax-cuda12-plugin from PyPI


@dataclass
class PluginBuild:
    """One CUDA build of a jax release, as its wheels state it."""

    major: int
    plugin: str  # the jax-cudaNN-plugin (and -pjrt) version jax's extra pins
    pythons: list[str]
    floors: dict[str, str]  # nvidia-* distribution -> its floor (the lower bound of the requirement)
    archs: list[str] = field(default_factory=list)  # SASS, sm_XY
    ptx: list[str] = field(default_factory=list)  # PTX, sm_XY
    ptx_isa: str | None = None
    how: str = ""

    @property
    def name(self) -> str:
        return f"cuda{self.major}"

    def floor(self, base: str) -> str | None:
        """The floor of ``base`` (nvidia-cudnn) under its CUDA-numbered name or the bare one (CUDA 13)."""
        return self.floors.get(f"{base}-cu{self.major}") or self.floors.get(base)

    def floor_cuda(self) -> tuple[int, int]:
        """The highest CUDA X.Y the floors of the CUDA-numbered wheels name (runtime, cuBLAS, nvcc …)."""
        best = (self.major, 0)
        for name, v in self.floors.items():
            rel = Version(v).release
            if _toolkit_numbered(name, self.major) and rel[0] == self.major and len(rel) >= 2:
                best = max(best, (rel[0], rel[1]))
        return best

    def cuda(self, toolkits: list[tuple[Version, frozenset[str]]]) -> str:
        """The CUDA X.Y of this build: the oldest toolkit of its major (``toolkits``: cuda.yaml's releases and
        the archs each compiles) that every floor allows and that compiles every measured arch."""
        floor = self.floor_cuda()
        need = set(self.archs) | set(self.ptx)
        for v, archs in sorted(toolkits):
            if v.major == self.major and (v.major, v.minor) >= floor and need <= archs:
                return f"{v.major}.{v.minor}"
        return f"{floor[0]}.{floor[1]}"  # no toolkit in cuda.yaml fits: the loader's cross-check says so


@dataclass
class JaxRelease:
    version: Version
    jaxlib: str
    pythons: list[str]
    builds: list[PluginBuild]
    how: str


# CUDA-numbered wheels: their version is the CUDA toolkit's (nvidia-cublas-cu12 12.8.4.1 ships with CUDA 12.8);
# cuDNN, NCCL, cuFFT, cuSOLVER, cuSPARSE, NVSHMEM carry their own numbers
_TOOLKIT = ("nvidia-cuda-runtime", "nvidia-cuda-nvcc", "nvidia-cuda-cupti", "nvidia-cuda-nvrtc", "nvidia-cublas",
            "nvidia-nvjitlink")


def _toolkit_numbered(name: str, major: int) -> bool:
    return any(name in (base, f"{base}-cu{major}") for base in _TOOLKIT)


def _requirements(metadata: str) -> list[Requirement]:
    out = []
    for line in Parser().parsestr(metadata).get_all("Requires-Dist") or []:
        try:
            out.append(Requirement(line))
        except InvalidRequirement:
            continue
    return out


def _extra_of(req: Requirement) -> str | None:
    """The extra a requirement belongs to (``extra == 'cuda12'``), normalized (with_cuda -> with-cuda)."""
    m = re.search(r"""extra\s*==\s*["']([^"']+)["']""", str(req.marker or ""))
    return canonicalize_name(m.group(1)) if m else None


def _exact(req: Requirement) -> str | None:
    """``==0.4.26`` or ``<=0.4.38,>=0.4.38``: the one version a requirement allows, else None."""
    eq = [s.version for s in req.specifier if s.operator in ("==", "===")]
    if eq:
        return eq[0]
    lo = {s.version for s in req.specifier if s.operator == ">="}
    hi = {s.version for s in req.specifier if s.operator == "<="}
    both = lo & hi
    return next(iter(both)) if both else None


def _floor(req: Requirement) -> str | None:
    for s in req.specifier:
        if s.operator in (">=", "==", "~=", "==="):
            return s.version
    return None


def extra_pins(jax_metadata: str, major: int) -> tuple[SpecifierSet | None, str | None, dict[str, str]]:
    """(plugin versions, jaxlib version, nvidia floors) that jax's ``cudaNN`` extra names. A jax-only release
    (0.4.35) allows the previous plugin too: ``jax-cuda12-plugin[with_cuda]<=0.4.35,>=0.4.34``."""
    plugin: SpecifierSet | None = None
    jaxlib = None
    floors: dict[str, str] = {}
    for req in _requirements(jax_metadata):
        if _extra_of(req) != f"cuda{major}":
            continue
        name = canonicalize_name(req.name)
        if name == PLUGIN.format(major):
            plugin = req.specifier
        elif name == "jaxlib":
            jaxlib = _exact(req)
        elif name.startswith("nvidia-") and (f := _floor(req)):
            floors[name] = f
    return plugin, jaxlib, floors


def with_cuda_floors(plugin_metadata: str) -> dict[str, str]:
    """The nvidia-* floors under the plugin's ``with-cuda`` extra (0.4.30 on)."""
    out: dict[str, str] = {}
    for req in _requirements(plugin_metadata):
        name = canonicalize_name(req.name)
        if _extra_of(req) == "with-cuda" and name.startswith("nvidia-") and (f := _floor(req)):
            out[name] = f
    return out


def base_jaxlib(jax_metadata: str) -> str | None:
    """The jaxlib a jax release requires without extras, when it names one version."""
    for req in _requirements(jax_metadata):
        if canonicalize_name(req.name) == "jaxlib" and req.marker is None:
            return _exact(req)
    return None


def _linux_x86(f: IndexFile) -> bool:
    return any("linux" in p and p.endswith("x86_64") for p in f.platforms)


def _cpythons(files: list[IndexFile]) -> list[str]:
    """CPython versions with Linux x86_64 wheels; free-threaded builds (cp313t) left out, as in torch.yaml."""
    got = set()
    for f in files:
        for t in f.python_tags:
            m = re.fullmatch(r"cp(\d)(\d+)", t)
            if m:
                got.add((int(m.group(1)), int(m.group(2))))
    return [f"{a}.{b}" for a, b in sorted(got)]


def _files(project: Project, version: str) -> list[IndexFile]:
    return [f for f in project.files if str(f.version) == version and not f.yanked and _linux_x86(f)]


def _pick(files: list[IndexFile]) -> IndexFile:
    """The wheel to read: CPython 3.12 if there is one (any would do: the builds of one release are the same)."""
    def rank(f: IndexFile) -> tuple[bool, str]:
        return ("cp312" not in f.python_tags, f.filename)
    return sorted(files, key=rank)[0]


def _sm(arch: str) -> str:
    return "sm_" + arch.split("_", 1)[1]


def _sort(archs: set[str]) -> list[str]:
    return sorted(archs, key=lambda a: int(re.sub(r"\D", "", a)))


def measure_members(f: IndexFile, members: tuple[str, ...] = KERNEL_LIBS) -> tuple[list[str], list[str], str | None, list[str]]:
    """(SASS archs, PTX archs, newest PTX ISA, members read) of the named libraries inside a remote wheel,
    each range-read into a temporary file alone and walked by the fat-binary reader."""
    from envman.portable.fatbin import read_fatbin

    sass: set[str] = set()
    ptx: set[str] = set()
    isa: tuple[int, ...] | None = None
    read: list[str] = []
    reader = RangeReader(f.url, f.size)
    with zipfile.ZipFile(reader) as zf, tempfile.TemporaryDirectory(prefix="envman-jax-") as tmp:
        for name in zf.namelist():
            base = name.rsplit("/", 1)[-1]
            if base not in members:
                continue
            target = Path(tmp) / base
            with zf.open(name) as src, open(target, "wb") as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
            got = read_fatbin(str(target))
            target.unlink()
            read.append(base)
            sass.update(got["sass"])
            ptx.update(_sm(p) for p in got["ptx"])
            if got.get("ptx_isa"):
                v = tuple(int(x) for x in got["ptx_isa"].split("."))
                isa = v if isa is None or v > isa else isa
    return _sort(sass), _sort(ptx), ".".join(map(str, isa)) if isa else None, read


def read_release(version: Version, projects: dict[str, Project], measure: bool = True) -> JaxRelease | None:
    """One jax release and its CUDA builds, from the wheels on the index (None: no build on PyPI)."""
    jax_files = [f for f in projects["jax"].files if str(f.version) == str(version) and not f.yanked]
    if not jax_files:
        return None
    jf = sorted(jax_files, key=lambda f: f.filename)[0]
    meta = read_remote_wheel(jf)
    jaxlib = base_jaxlib(meta.metadata)
    builds = []
    lib_version = None
    for major in MAJORS:
        allowed, lib, floors = extra_pins(meta.metadata, major)
        name = PLUGIN.format(major)
        if allowed is None or name not in projects:
            continue
        on_index = [v for v in projects[name].versions(final_only=True) if allowed.contains(v)]
        if not on_index:
            continue
        # the plugin of the jaxlib the extra pins (0.4.35 pins jaxlib 0.4.34 and allows plugins 0.4.34-0.4.35:
        # pip would mix them), else the newest it allows
        plugin = lib if lib is not None and Version(lib) in on_index else str(max(on_index))
        pfiles = _files(projects[name], plugin)
        if not pfiles:
            continue
        lib_version = lib_version or lib
        pf = _pick(pfiles)
        rw = read_remote_wheel(pf)
        floors = {**floors, **with_cuda_floors(rw.metadata)}
        b = PluginBuild(major, plugin, _cpythons(pfiles), floors, how=f"{pf.filename}: METADATA ({rw.how})")
        if measure:
            b.archs, b.ptx, b.ptx_isa, read = measure_members(pf)
            b.how += f"; SASS/PTX from the fat binaries of {', '.join(read)} (range requests)"
        builds.append(b)
    if not builds:
        return None
    lib_version = lib_version or jaxlib or str(version)
    pys = _cpythons(_files(projects["jaxlib"], lib_version))
    return JaxRelease(version, lib_version, pys, builds, f"{jf.filename}: METADATA ({meta.how})")


def missing_plugins(version: Version, projects: dict[str, Project]) -> list[str]:
    """What a jax release's CUDA extras ask for that the index does not have: `pip install 'jax[cuda12]==V'` then
    fails to resolve (jax 0.12.1's [cuda12] named a jax-cuda12-plugin release PyPI never had), so sync proposes
    no build for that major and outdated says why."""
    jax_files = [f for f in projects["jax"].files if str(f.version) == str(version) and not f.yanked]
    if not jax_files:
        return []
    meta = read_remote_wheel(sorted(jax_files, key=lambda f: f.filename)[0]).metadata
    out = []
    for major in MAJORS:
        allowed, _lib, _floors = extra_pins(meta, major)
        name = PLUGIN.format(major)
        if allowed is None:
            continue
        have = projects[name].versions(final_only=True) if name in projects else []
        if not any(allowed.contains(v) for v in have):
            out.append(f"jax {version}'s [cuda{major}] extra asks for {name}{allowed}, which the index does not have")
    return out


def jax_versions(projects: dict[str, Project], since: Version = FIRST) -> list[Version]:
    """Final jax releases from ``since`` on, oldest first."""
    return [v for v in projects["jax"].versions(final_only=True) if v >= since]


def fetch_projects(index_url: str) -> dict[str, Project]:
    from tools.matrix.pypi import fetch_project

    names = ["jax", "jaxlib"] + [n.format(m) for m in MAJORS for n in (PLUGIN,)]
    return {n: fetch_project(n, index_url) for n in names}


# ---------------------------------------------------------------------------- the file


def _q(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _xy(v: str | None) -> str | None:
    return ".".join(v.split(".")[:2]) if v else None


HEADER = """\
# JAX: every jax release whose [cuda12]/[cuda13] extra installs the CUDA plugin wheels from PyPI
# (jax >= {first}), generated by `python -m tools.matrix sync jax` (tools/matrix/discover_jax.py) from {index}
# on {date}. Do not edit by hand: a refresh reads every release again and shows the diff.
# A jax release without plugins of its own (0.4.35: `jaxlib==0.4.34; extra == "cuda12"`) is listed with
# the jaxlib and plugin its extra resolves to.
#
# Where each field comes from (every entry's `measured:` names the wheel it was read from):
#   version, jaxlib   jax's METADATA: `jaxlib` under the cudaNN extra (jax, jaxlib, plugin and pjrt agree exactly).
#   python            CPython tags (free-threaded left out) of the Linux x86_64 jaxlib wheels of that version.
#   builds[].plugin   the jax-cudaNN-plugin of that jaxlib (else the newest the extra allows); it pins jax-cudaNN-pjrt.
#   builds[].python   CPython tags of that plugin's Linux x86_64 wheels.
#   builds[].wheels   the nvidia-* floors under the plugin's `with-cuda` extra (jax's own cudaNN extra before
#                     0.4.30): the versions pip may not go below. Floors, not pins.
#   builds[].cuda     the oldest CUDA X.Y in cuda.yaml that every CUDA-numbered floor allows (runtime, nvcc,
#                     cuBLAS, cuPTI, nvrtc, nvJitLink) and whose nvcc compiles every measured arch. The lock
#                     holds the CUDA-numbered wheels to it; the driver floor of each CUDA major is cuda.yaml's
#                     (`majors`), not repeated here.
#   builds[].cudnn    X.Y of the nvidia-cudnn-cuNN floor: the cuDNN jaxlib is built with (XLA refuses an
#                     older one at run time: "Loaded runtime CuDNN library ... but source was compiled with ...").
#   builds[].nccl     X.Y of the nvidia-nccl-cuNN floor.
#   builds[].archs    measured: SASS in the CUDA fat binaries of the plugin's {libs}, range-read
#                     from the cp312 (else the first) Linux x86_64 wheel; `ptx` the PTX found there and `ptx_isa`
#                     its newest PTX ISA (8.3 = CUDA 12.3's nvcc, 8.7 = 12.8, 8.8 = 12.9, 9.0 = 13.0). XLA
#                     compiles its own fused kernels for the device at run time (ptxas from nvidia-cuda-nvcc),
#                     so these lists bound the precompiled kernels (PRNG, solvers, linear algebra) JAX ships.
#                     Arch-specific SASS (sm_100a) is reported as its base arch, as for torch.
"""


def toolkits(matrix: Matrix) -> list[tuple[Version, frozenset[str]]]:
    """cuda.yaml's releases and the archs each compiles: what a build's CUDA X.Y is chosen from."""
    return [(c.version, frozenset(a.sm for a in c.archs)) for c in matrix.cuda]


def render_jax_yaml(releases: list[JaxRelease], kits: list[tuple[Version, frozenset[str]]], index_url: str,
                    date: str) -> str:
    """The whole matrices/jax.yaml for ``releases`` (newest first in the file); ``kits``: ``toolkits(matrix)``."""
    out = [HEADER.format(first=FIRST, index=index_url, date=date, libs=", ".join(KERNEL_LIBS))]
    out.append("schema: 1\nreleases:\n")
    for r in sorted(releases, key=lambda r: r.version, reverse=True):
        out.append(f"  - version: {_q(str(r.version))}\n")
        out.append(f"    jaxlib: {_q(r.jaxlib)}\n")
        out.append(f"    python: [{', '.join(_q(p) for p in r.pythons)}]\n")
        out.append(f"    measured: {_q(f'{index_url}/jax/ {r.how}, {date}')}\n")
        out.append("    builds:\n")
        for b in sorted(r.builds, key=lambda b: b.major, reverse=True):
            out.append(f"      - name: {b.name}\n")
            out.append(f"        plugin: {_q(b.plugin)}\n")
            out.append(f"        python: [{', '.join(_q(p) for p in b.pythons)}]\n")
            out.append(f"        cuda: {_q(b.cuda(kits))}\n")
            if b.floor("nvidia-cudnn"):
                out.append(f"        cudnn: {_q(_xy(b.floor('nvidia-cudnn')) or '')}\n")
            if b.floor("nvidia-nccl"):
                out.append(f"        nccl: {_q(_xy(b.floor('nvidia-nccl')) or '')}\n")
            wheels = ", ".join(f"{k}: {_q(v)}" for k, v in sorted(b.floors.items()))
            out.append(f"        wheels: {{{wheels}}}\n")
            out.append(f"        archs: [{', '.join(b.archs)}]\n")
            if b.ptx:
                out.append(f"        ptx: [{', '.join(b.ptx)}]\n")
            if b.ptx_isa:
                out.append(f"        ptx_isa: {_q(b.ptx_isa)}\n")
            plugin_index = f"{index_url}/{PLUGIN.format(b.major)}/"
            out.append(f"        measured: {_q(f'{plugin_index} {b.how}, {date}')}\n")
    return "".join(out)


def discover_jax(index_url: str, since: Version = FIRST, only: Version | None = None,
                 measure: bool = True) -> list[JaxRelease]:
    projects = fetch_projects(index_url)
    out = []
    for v in jax_versions(projects, since):
        if only is not None and v != only:
            continue
        r = read_release(v, projects, measure)
        if r is not None:
            out.append(r)
    return out


CHECKS_BEGIN = "# --- cross-checks (kept by a refresh) ---"
CHECKS_END = "# --- end of cross-checks ---"


def kept_checks(old_text: str) -> str:
    """The cross-check notes of the current file (written by hand once, kept by every refresh)."""
    if CHECKS_BEGIN not in old_text or CHECKS_END not in old_text:
        return ""
    start = old_text.index(CHECKS_BEGIN)
    end = old_text.index(CHECKS_END) + len(CHECKS_END)
    return old_text[start:end] + "\n"


def plan_jax_text(matrix: Matrix, old_text: str, releases: list[JaxRelease], index_url: str,
                  date: str) -> tuple[str, list[str]]:
    """jax.yaml regenerated from ``releases``, and one report line per release added or gone."""
    have = {r.version for r in matrix.frameworks.get("jax", ())}
    now = {r.version for r in releases}
    report = [f"+ jax {v}: new release ({', '.join(b.name for b in r.builds)})"
              for r in sorted(releases, key=lambda r: r.version) if (v := r.version) not in have]
    report += [f"- jax {v}: in the matrix, no CUDA build on the index any more" for v in sorted(have - now)]
    text = render_jax_yaml(releases, toolkits(matrix), index_url, date)
    checks = kept_checks(old_text)
    if checks:
        text = text.replace("schema: 1\n", checks + "schema: 1\n", 1)
    return text, report or [f"= jax: {len(releases)} releases re-read from {index_url}"]
