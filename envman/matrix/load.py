"""Load matrices/*.yaml, validate every field, and build the ``Matrix`` model.

Every problem is collected and reported at once as ``file: dotted.path: what is wrong`` — a data
maintainer fixing a refresh wants the whole list, not one error per run.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

from packaging.utils import canonicalize_name as normalize_dist
from packaging.version import Version

from envman import frameworks
from envman._validate import Ctx as _Ctx
from envman._validate import dupes as _dupes
from envman._validate import items as _items
from envman._validate import opt_str as _opt_str
from envman.diskcache import cached, files_digest
from envman.errors import DataError, MatrixError
from envman.inputs import MAX_DATA, read_data, read_regular
from envman.model import (
    BaseImages,
    Cc,
    CudaImage,
    CudaMajor,
    CudaRelease,
    CudnnRelease,
    Gpu,
    LegacyBranch,
    Matrix,
    OtherAccelerator,
    Provenance,
    ToolkitWheels,
    normalize_gpu_name,
)
from envman.resources import matrix_dir

SCHEMA = 1
REINSTALL = "reinstall envman, or undo the local edit"
T = TypeVar("T")


def matrix_files(fws: tuple[frameworks.Framework, ...]) -> tuple[str, ...]:
    """The files a matrix is read from: the shared ones, with each framework's own file in between."""
    return ("cuda.yaml", "gpus.yaml", *(fw.matrix_file for fw in fws), "cudnn.yaml", "base_images.yaml")


FILES = matrix_files(frameworks.FRAMEWORKS)  # the files of the frameworks envman ships
SEGMENTS = ("datacenter", "workstation", "consumer", "embedded")
HOST_ARCHS = ("x86_64", "aarch64")


def _yaml_load(text: str) -> Any:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: ~10x faster parse
    return yaml.load(text, Loader=loader)  # noqa: S506 - a SafeLoader


def load_tables(kind: str, files: tuple[str, ...], build: Callable[[dict[str, Any], str], T],
                directory: Path | None = None) -> T:
    """``build(documents, digest)`` of matrices/ table files beside the matrix (image/tables.py, lock/one_module.py):
    built once per process for the same bytes and kept on disk by their digest (parsing the YAML costs ~8 ms a
    run); a file that cannot be read or parsed is a DataError naming it."""
    d = directory or matrix_dir()
    return _tables(kind, tuple((f, read_data(d / f)) for f in files), build)


@lru_cache(maxsize=8)
def _tables(kind: str, raw: tuple[tuple[str, bytes], ...], build: Callable[[dict[str, Any], str], T]) -> T:
    import yaml

    def documents() -> dict[str, Any]:
        docs = {}
        for f, data in raw:
            try:
                docs[f] = yaml.load(data, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 - safe
            except yaml.YAMLError as exc:
                raise DataError(f"{f}: cannot read: {exc}", hint=REINSTALL) from None
        return docs

    digest = files_digest(dict(raw))
    return cached(kind, digest, documents, lambda docs: build(docs, digest))


def _check_schema(ctx: _Ctx, doc: Any) -> bool:
    if not isinstance(doc, dict):
        ctx.bad("(top)", "expected a mapping with 'schema: 1'")
        return False
    if doc.get("schema") != SCHEMA:
        ctx.bad("schema", f"expected {SCHEMA}, got {doc.get('schema')!r}")
        return False
    return True


def _load_cuda(ctx: _Ctx, doc: Any) -> tuple:
    drv_doc = ctx.req(doc, "assumed_current_driver", "", dict) or {}
    drv = ctx.version(drv_doc, "version", "assumed_current_driver") or Version("0")
    drv_prov = ctx.prov(drv_doc, "assumed_current_driver")
    legacy = []
    for p, e in _items(ctx, doc, "legacy_driver_branches", optional=True):
        cc_raw = ctx.req(e, "max_cc", p, str)
        branch = ctx.req(e, "branch", p, str)
        last = ctx.version(e, "last_driver", p, optional=True)
        prov = ctx.prov(e, p)
        try:
            cc = Cc.parse(cc_raw) if cc_raw else None
        except ValueError:
            ctx.bad(f"{p}.max_cc", f"expected a compute capability like '3.7', got {cc_raw!r}")
            cc = None
        if cc is not None and branch is not None:
            legacy.append(LegacyBranch(cc, branch, last, prov))
    majors = []
    for p, e in _items(ctx, doc, "majors"):
        major = ctx.req(e, "major", p, int)
        floor = ctx.version(e, "minor_compat_floor", p)
        prov = ctx.prov(e, p)
        if major is not None and floor is not None:
            majors.append(CudaMajor(major, floor, prov))
    _dupes(ctx, "majors", [m.major for m in majors], "major")
    rels = []
    for p, e in _items(ctx, doc, "releases"):
        v = ctx.version(e, "version", p)
        upd = ctx.req(e, "latest_update", p, str)
        drv_min = ctx.version(e, "min_driver", p)
        archs = ctx.archs(e, "archs", p)
        prov = ctx.prov(e, p)
        if v is None or drv_min is None:
            continue
        if len(v.release) != 2:
            ctx.bad(f"{p}.version", f"expected a major.minor release like '12.4', got '{v}'")
            continue
        if v.major not in {m.major for m in majors}:
            ctx.bad(f"{p}.version", f"CUDA {v.major}.x has no entry under majors (minor-version floor)")
        if isinstance(upd, str) and not upd.startswith(f"{v.major}.{v.minor}."):
            ctx.bad(f"{p}.latest_update", f"'{upd}' is not an update of {v}")
        rels.append(CudaRelease(v, upd or "", drv_min, archs, prov))
    _dupes(ctx, "releases", [r.version for r in rels], "CUDA release")
    return (drv, drv_prov, tuple(majors), tuple(sorted(rels, key=lambda r: r.version, reverse=True)), tuple(legacy),
            _load_toolkit_wheels(ctx, doc))


def _load_toolkit_wheels(ctx: _Ctx, doc: Any) -> ToolkitWheels:
    e = ctx.req(doc, "toolkit_wheels", "", dict) or {}
    names = ctx.req(e, "names", "toolkit_wheels", list) or []
    bad = [n for n in names if not isinstance(n, str) or normalize_dist(n) != n]
    if bad:
        ctx.bad("toolkit_wheels.names", f"expected normalized distribution names (PEP 503), got {bad!r}")
    since = ctx.req(e, "suffix_dropped_from", "toolkit_wheels", int)
    own = _load_own_minor(ctx, e, {n for n in names if isinstance(n, str)})
    return ToolkitWheels(tuple(n for n in names if isinstance(n, str)), since if isinstance(since, int) else 99,
                         ctx.prov(e, "toolkit_wheels"), own)


def _load_own_minor(ctx: _Ctx, e: Any, names: set[str]) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """toolkit_wheels.own_minor: {name: [CUDA majors where its minor is its own]}, each name one of ``names``."""
    raw = e.get("own_minor") if isinstance(e, dict) else None
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        ctx.bad("toolkit_wheels.own_minor", f"expected a mapping of name: [CUDA majors], got {raw!r}")
        return ()
    out = []
    for name, majors in sorted(raw.items()):
        p = f"toolkit_wheels.own_minor.{name}"
        if name not in names:
            ctx.bad(p, f"'{name}' is not in toolkit_wheels.names")
        elif not isinstance(majors, list) or not majors or not all(isinstance(m, int) and not isinstance(m, bool)
                                                                   for m in majors):
            ctx.bad(p, f"expected a list of CUDA majors (integers), got {majors!r}")
        else:
            out.append((name, tuple(sorted(majors))))
    return tuple(out)


def _cc_field(ctx: _Ctx, raw: Any, path: str) -> Cc | None:
    try:
        cc = Cc.parse(raw)
        if "." not in raw:
            raise ValueError
        return cc
    except ValueError:
        ctx.bad(path, f"expected a compute capability like '8.9', got {raw!r}")
        return None


def _load_driver_floors(ctx: _Ctx, doc: Any) -> dict[Cc, tuple[str, Version, Provenance]]:
    """driver_floors: compute capability -> (family, first driver branch, provenance)."""
    floors: dict[Cc, tuple[str, Version, Provenance]] = {}
    for p, e in _items(ctx, doc, "driver_floors", optional=True):
        cc_raw = ctx.req(e, "cc", p, str)
        family = ctx.req(e, "family", p, str)
        floor = ctx.version(e, "min_driver", p)
        prov = ctx.prov(e, p)
        cc = _cc_field(ctx, cc_raw, f"{p}.cc") if cc_raw is not None else None
        if cc is None or family is None or floor is None:
            continue
        if cc in floors:
            ctx.bad(f"{p}.cc", f"duplicate compute capability {cc}")
        floors[cc] = (family, floor, prov)
    return floors


def _load_other_accelerators(ctx: _Ctx, doc: Any) -> tuple[OtherAccelerator, ...]:
    """other_accelerators: vendors whose accelerators envman does not build for, with the names that mean them."""
    out: list[OtherAccelerator] = []
    for p, e in _items(ctx, doc, "other_accelerators", optional=True):
        vendor, stack = ctx.req(e, "vendor", p, str), ctx.req(e, "stack", p, str)
        pats = e.get("names") if isinstance(e, dict) else None
        if not isinstance(pats, list) or not pats or not all(isinstance(x, str) for x in pats):
            ctx.bad(f"{p}.names", "expected a list of regular expressions")
            continue
        for x in pats:
            try:
                re.compile(x)
            except re.error as exc:
                ctx.bad(f"{p}.names", f"{x!r} is not a regular expression: {exc}")
        prov = ctx.prov(e, p)
        if vendor and stack:
            out.append(OtherAccelerator(vendor, stack, tuple(pats), prov))
    return tuple(out)


def _load_gpu_driver(ctx: _Ctx, e: Any, p: str) -> tuple[Version | None, bool, tuple, Provenance | None]:
    """A GPU's ``driver:`` block, written by ``python -m tools.matrix sync nvidia-gpus``: (first listing, whether it is
    the floor, ((PCI device ID, first listing), ...), provenance)."""
    if e is None:
        return None, False, (), None
    if not isinstance(e, dict):
        ctx.bad(p, f"expected a mapping, got {e!r}")
        return None, False, (), None
    prov = ctx.prov(e, p)
    if e.get("proprietary") is True:
        return None, False, (), prov
    listed = ctx.version(e, "listed", p)
    is_floor = ctx.req(e, "floor", p, bool)
    raw = ctx.req(e, "pci", p, dict) or {}
    pci = []
    for dev in raw:
        if not (isinstance(dev, str) and re.fullmatch(r"[0-9A-F]{4}", dev)):
            ctx.bad(f"{p}.pci", f"expected 4 upper-case hex digits as a PCI device ID, got {dev!r}")
            continue
        v = ctx.version(raw, dev, f"{p}.pci")
        if v is not None:
            pci.append((dev, v))
    return listed, bool(is_floor), tuple(sorted(pci)), prov


def _load_gpus(ctx: _Ctx, doc: Any) -> tuple[Gpu, ...]:
    gpus: list[Gpu] = []
    owner: dict[str, str] = {}
    floors = _load_driver_floors(ctx, doc)
    for p, e in _items(ctx, doc, "gpus"):
        gid = ctx.req(e, "id", p, str)
        name = ctx.req(e, "name", p, str)
        cc_raw = ctx.req(e, "cc", p, str)
        seg = ctx.req(e, "segment", p, str)
        mem = e.get("memory_gib") if isinstance(e, dict) else None
        aliases = e.get("aliases", []) if isinstance(e, dict) else []
        prov = ctx.prov(e, p)
        if mem is not None and not isinstance(mem, (int, float)):
            ctx.bad(f"{p}.memory_gib", f"expected a number, got {mem!r}")
            mem = None
        if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
            ctx.bad(f"{p}.aliases", "expected a list of strings")
            aliases = []
        if seg is not None and seg not in SEGMENTS:
            ctx.bad(f"{p}.segment", f"expected one of {', '.join(SEGMENTS)}, got {seg!r}")
        cc = _cc_field(ctx, cc_raw, f"{p}.cc") if cc_raw is not None else None
        drv = _load_gpu_driver(ctx, e.get("driver") if isinstance(e, dict) else None, f"{p}.driver")
        host = e.get("host_arch") if isinstance(e, dict) else None
        if host is not None and host not in HOST_ARCHS:
            ctx.bad(f"{p}.host_arch", f"expected one of {', '.join(HOST_ARCHS)}, got {host!r}")
            host = None
        if gid is None or name is None or cc is None:
            continue
        family, floor, floor_prov = floors.get(cc, (None, None, None))
        listed, is_floor, pci, drv_prov = drv
        if is_floor and listed is not None:  # NVIDIA's list is this GPU's floor (gpus.yaml driver.floor)
            floor, floor_prov = listed, drv_prov
        if seg == "embedded":  # Jetson: the driver comes with JetPack, no desktop/server branch applies
            floor = floor_prov = None
        for a in [gid, name, *aliases]:
            key = normalize_gpu_name(a)
            if not key:
                ctx.bad(f"{p}.aliases", f"{a!r} normalises to nothing")
            elif key in owner and owner[key] != gid:
                ctx.bad(f"{p}.aliases", f"{a!r} also names {owner[key]} (normalised: {key!r})")
            else:
                owner[key] = gid
        gpus.append(Gpu(gid, name, cc, mem, seg or "", tuple(aliases), prov, family, floor, floor_prov, host,
                        listed, pci))
    _dupes(ctx, "gpus", [g.id for g in gpus], "id")
    return tuple(gpus)


def _load_cudnn(ctx: _Ctx, doc: Any) -> tuple[CudnnRelease, ...]:
    out = []
    for p, e in _items(ctx, doc, "releases"):
        v = ctx.version(e, "version", p)
        majors = ctx.req(e, "cuda_majors", p, list) or []
        cc_raw = ctx.req(e, "min_cc", p, (str, dict))
        prov = ctx.prov(e, p)
        if not all(isinstance(m, int) for m in majors):
            ctx.bad(f"{p}.cuda_majors", "expected a list of integers")
            majors = []
        # min_cc: one capability for every CUDA major, or a mapping {major: capability} where builds differ
        per = cc_raw if isinstance(cc_raw, dict) else {m: cc_raw for m in majors} if cc_raw else {}
        floors = []
        for m, raw in per.items():
            try:
                if not isinstance(raw, str):
                    raise ValueError
                floors.append((int(m), Cc.parse(raw)))
            except ValueError:
                ctx.bad(f"{p}.min_cc", f"expected a compute capability like '5.0', got {raw!r}")
        if v is not None and cc_raw is not None:
            out.append(CudnnRelease(v, tuple(majors), tuple(sorted(floors)), prov))
    _dupes(ctx, "releases", [r.version for r in out], "cuDNN release")
    return tuple(out)


def _load_base_images(ctx: _Ctx, doc: Any) -> BaseImages:
    slim = ctx.req(doc, "slim", "", dict) or {}
    pattern = ctx.req(slim, "image", "slim", str) or ""
    if pattern and "{python}" not in pattern:
        ctx.bad("slim.image", "must contain {python}")
    sprov = ctx.prov(slim, "slim")
    pol = ctx.req(doc, "python", "", dict) or {}
    default_py = ctx.req(pol, "default", "python", str) or "3.12"
    images = []
    for p, e in _items(ctx, doc, "cuda"):
        cuda = ctx.version(e, "cuda", p)
        upd = ctx.req(e, "update", p, str)
        cudnn = _opt_str(ctx, e, "cudnn", p)
        ubuntu = ctx.req(e, "ubuntu", p, str)
        py = ctx.req(e, "python", p, str)
        rt = ctx.req(e, "runtime", p, str)
        dv = ctx.req(e, "devel", p, str)
        prov = ctx.prov(e, p)
        if cuda is None or None in (upd, ubuntu, py, rt, dv):
            continue
        for k, ref in (("runtime", rt), ("devel", dv)):
            if upd not in ref:
                ctx.bad(f"{p}.{k}", f"'{ref}' does not carry update {upd}")
        images.append(CudaImage(cuda, upd, cudnn, ubuntu, py, rt, dv, prov))
    _dupes(ctx, "cuda", [i.cuda for i in images], "CUDA image")
    glibc = []
    for distro, e in sorted((doc.get("glibc") or {}).items()) if isinstance(doc.get("glibc"), dict) else ():
        version = e.get("version") if isinstance(e, dict) else None
        if not isinstance(version, str) or not re.fullmatch(r"2\.\d+", version):
            ctx.bad(f"glibc.{distro}.version", "expected a glibc version like '2.36'")
            continue
        ctx.prov(e, f"glibc.{distro}")
        glibc.append((str(distro), version))
    return BaseImages(pattern, sprov, default_py, tuple(sorted(images, key=lambda i: i.cuda, reverse=True)),
                      tuple(glibc))


def _cross_check(m: Matrix, problems: list[str], fws: tuple[frameworks.Framework, ...]) -> None:
    """Relations between files: every CUDA a build names exists, and its archs lie within it."""
    if not m.cuda:
        return  # cuda.yaml itself is broken: its own problems are already listed
    for fw, fname in ((f.name, f.matrix_file) for f in fws):
        seen: set[tuple[str, str]] = set()
        for rel in m.frameworks.get(fw, ()):
            for v in rel.variants:
                if v.cuda is None or (rel.version.base_version, v.name) in seen:
                    continue
                seen.add((rel.version.base_version, v.name))
                where = f"{fname}: {rel.version} {v.name}"
                cr = m.cuda_release(v.cuda)
                if cr is None:
                    problems.append(f"{where}: cuda: {v.cuda} is not a CUDA release in cuda.yaml")
                    continue
                beyond = [a.sm for a in v.archs + v.ptx if a not in cr.archs]
                if beyond:
                    problems.append(f"{where}: archs: {', '.join(beyond)} cannot be compiled by CUDA {cr.label}")
                if v.cudnn and m.cudnn and m.cudnn_release(v.cudnn) is None:
                    problems.append(f"{where}: cudnn: {v.cudnn} has no entry in cudnn.yaml")
    problems += [f"base_images.yaml: cuda {img.cuda}: not a CUDA release in cuda.yaml" for img in m.base_images.cuda
                 if m.cuda_release(img.cuda) is None]


def load_matrix(directory: Path | str | None = None) -> Matrix:
    """Read and validate every matrix file; raise MatrixError listing all problems."""
    d = Path(directory) if directory is not None else matrix_dir()
    return _load_cached(str(d.resolve()), tuple(f.name for f in frameworks.registered()))


@lru_cache(maxsize=4)
def _load_cached(directory: str, names: tuple[str, ...]) -> Matrix:
    d = Path(directory)
    fws = tuple(frameworks.get(n) for n in names)
    problems: list[str] = []
    raw: dict[str, bytes] = {}
    for name in matrix_files(fws):
        try:
            raw[name] = read_regular(d / name, MAX_DATA)
        except OSError as exc:
            problems.append(f"{name}: (file): cannot read: {exc.strerror or exc}")
    if problems:
        return _parse(raw, problems, fws)  # raises, naming every problem
    # parsing the YAML costs ~20 ms a run; building and validating the matrix from JSON data ~7 ms
    digest = files_digest(raw)
    # (the cache holds the files' documents, not objects built by this code: a change to the loader needs no new key)
    return cached(f"matrix-documents-{SCHEMA}", digest, lambda: _documents(raw, fws),
                  lambda docs: _build(docs, digest, fws))


def _parse(raw: dict[str, bytes], problems: list[str], fws: tuple[frameworks.Framework, ...]) -> Matrix:
    """The matrix from the files' bytes, every problem in one MatrixError."""
    docs = _documents(raw, fws, problems)
    return _build(docs, files_digest(raw), fws, problems)


def _documents(raw: dict[str, bytes], fws: tuple[frameworks.Framework, ...],
               problems: list[str] | None = None) -> dict[str, Any]:
    """Each file's YAML document (plain data); a file that does not parse is a problem (raised, with all the
    others, when the caller collects none)."""
    own = [] if problems is None else problems
    docs: dict[str, Any] = {}
    for name in matrix_files(fws):
        if name not in raw:
            continue
        try:
            docs[name] = _yaml_load(raw[name].decode("utf-8"))
        except Exception as exc:  # yaml errors carry line/column; show them as the path
            mark = getattr(exc, "problem_mark", None)
            where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "(parse)"
            own.append(f"{name}: {where}: invalid YAML: {getattr(exc, 'problem', None) or exc}")
    if problems is None and own:
        _build(docs, files_digest(raw), fws, own)  # raises, with every other file's problems too
    return docs


def _build(docs: dict[str, Any], digest: str, fws: tuple[frameworks.Framework, ...],
           problems: list[str] | None = None) -> Matrix:
    """The validated matrix from the files' documents: the same checks whether they were just parsed or read
    from the cache."""
    problems = [] if problems is None else problems
    files = matrix_files(fws)
    if not isinstance(docs, dict):
        raise MatrixError(["(cache): expected the matrix files' documents"])
    ctxs = {n: _Ctx(n, problems) for n in files}
    ok = {n: n in docs and _check_schema(ctxs[n], docs[n]) for n in files}

    def part(name: str, load: Any, default: Any) -> Any:  # a file missing or of another schema: empty
        return load(ctxs[name], docs[name]) if ok[name] else default

    drv, drv_prov, majors, cuda, legacy, wheels = part("cuda.yaml", _load_cuda, (
        Version("0"), Provenance(""), (), (), (), ToolkitWheels((), 99, Provenance(""))))
    gpus = part("gpus.yaml", _load_gpus, ())
    others = part("gpus.yaml", _load_other_accelerators, ())
    releases = {fw.name: part(fw.matrix_file, lambda c, d, fw=fw: fw.load_releases(d, c), ()) for fw in fws}
    cudnn = part("cudnn.yaml", _load_cudnn, ())
    base = part("base_images.yaml", _load_base_images, BaseImages("", Provenance(""), "3.12", ()))
    m = Matrix(drv, drv_prov, majors, cuda, gpus, releases, cudnn, base, digest, legacy, wheels, others)
    _cross_check(m, problems, fws)
    if problems:
        raise MatrixError(problems)
    return m
