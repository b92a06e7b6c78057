"""Load matrices/*.yaml, validate every field, and build the ``Matrix`` model.

Every problem is collected and reported at once as ``file: dotted.path: what is wrong`` — a data
maintainer fixing a refresh wants the whole list, not one error per run.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from envman.errors import MatrixError
from envman.model import (
    BaseImages,
    Cc,
    CudaImage,
    CudaMajor,
    CudaRelease,
    CudnnRelease,
    FrameworkRelease,
    Gpu,
    LegacyBranch,
    Matrix,
    Provenance,
    Variant,
    Ver,
)
from envman.model import normalize_gpu_name

SCHEMA = 1
FILES = ("cuda.yaml", "gpus.yaml", "torch.yaml", "tensorflow.yaml", "cudnn.yaml", "base_images.yaml")
SEGMENTS = ("datacenter", "workstation", "consumer", "embedded")
HOST_ARCHS = ("x86_64", "aarch64")


def default_matrix_dir() -> Path:
    from envman.resources import matrix_dir

    return matrix_dir()


def _yaml_load(text: str) -> Any:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: ~10x faster parse
    return yaml.load(text, Loader=loader)  # noqa: S506 - a SafeLoader


class _Ctx:
    """Collects problems for one file; ``at`` builds dotted paths."""

    def __init__(self, file: str, problems: list[str]):
        self.file = file
        self.problems = problems

    def bad(self, path: str, what: str) -> None:
        self.problems.append(f"{self.file}: {path}: {what}")

    def req(self, obj: Any, key: str, path: str, kind: type | tuple = object) -> Any:
        if not isinstance(obj, dict):
            self.bad(path, "expected a mapping")
            return None
        if key not in obj or obj[key] is None:
            self.bad(f"{path}.{key}" if path else key, "missing")
            return None
        val = obj[key]
        if not isinstance(val, kind) or (kind is str and isinstance(val, bool)):
            self.bad(f"{path}.{key}" if path else key, f"expected {_kind_name(kind)}, got {val!r}")
            return None
        return val

    def version(self, obj: Any, key: str, path: str, *, optional: bool = False) -> Version | None:
        if optional and (not isinstance(obj, dict) or obj.get(key) is None):
            return None
        raw = self.req(obj, key, path, (str, int, float))
        if raw is None:
            return None
        p = f"{path}.{key}" if path else key
        if not isinstance(raw, str):
            self.bad(p, f"write versions as quoted strings, got {raw!r}")
            return None
        try:
            return Ver(raw)
        except InvalidVersion:
            self.bad(p, f"not a version: {raw!r}")
            return None

    def archs(self, obj: Any, key: str, path: str, *, optional: bool = False) -> tuple[Cc, ...]:
        if optional and (not isinstance(obj, dict) or obj.get(key) is None):
            return ()
        raw = self.req(obj, key, path, list)
        if raw is None:
            return ()
        out = []
        for i, a in enumerate(raw):
            try:
                if not str(a).startswith("sm_"):
                    raise ValueError
                out.append(Cc.parse(str(a)))
            except ValueError:
                self.bad(f"{path}.{key}[{i}]", f"not an architecture like sm_86: {a!r}")
        if len(set(out)) != len(out):
            self.bad(f"{path}.{key}", "duplicate architectures")
        return tuple(out)

    def prov(self, obj: Any, path: str) -> Provenance:
        if not isinstance(obj, dict):
            return Provenance("")
        src = obj.get("source") if obj.get("source") is not None else obj.get("measured")
        if not isinstance(src, str) or not src.strip():
            self.bad(f"{path}.source" if path else "source", "missing: every entry cites a primary source URL or 'measured: <how>'")
            src = ""
        elif "source" in obj and not src.startswith(("http://", "https://", "measured:")):
            self.bad(f"{path}.source", f"not a URL or 'measured: <how>': {src!r}")
        elif "measured" in obj and "source" not in obj:
            src = "measured: " + src
        unc = obj.get("uncertain", False)
        note = obj.get("note")
        if not isinstance(unc, bool):
            self.bad(f"{path}.uncertain", f"expected true/false, got {unc!r}")
            unc = False
        if unc and not note:
            self.bad(f"{path}.note", "missing: an uncertain entry says what is unsure")
        return Provenance(src, unc, note if isinstance(note, str) else None)


def _kind_name(kind: Any) -> str:
    names = {str: "a string", list: "a list", dict: "a mapping", int: "an integer", bool: "true/false"}
    if isinstance(kind, tuple):
        return " or ".join(names.get(k, k.__name__) for k in kind)
    return names.get(kind, getattr(kind, "__name__", str(kind)))


def _items(ctx: _Ctx, doc: Any, key: str) -> list[tuple[str, Any]]:
    lst = ctx.req(doc, key, "", list)
    return [(f"{key}[{i}]", e) for i, e in enumerate(lst or [])]


def _check_schema(ctx: _Ctx, doc: Any) -> bool:
    if not isinstance(doc, dict):
        ctx.bad("(top)", "expected a mapping with 'schema: 1'")
        return False
    if doc.get("schema") != SCHEMA:
        ctx.bad("schema", f"expected {SCHEMA}, got {doc.get('schema')!r}")
        return False
    return True


def _dupes(ctx: _Ctx, path: str, keys: list[Any], what: str) -> None:
    seen: set[Any] = set()
    for k in keys:
        if k is not None and k in seen:
            ctx.bad(path, f"duplicate {what} {k}")
        seen.add(k)


def _load_cuda(ctx: _Ctx, doc: Any) -> tuple:
    drv_doc = ctx.req(doc, "assumed_current_driver", "", dict) or {}
    drv = ctx.version(drv_doc, "version", "assumed_current_driver") or Version("0")
    drv_prov = ctx.prov(drv_doc, "assumed_current_driver")
    legacy = []
    for p, e in ([(f"legacy_driver_branches[{i}]", x) for i, x in enumerate(doc.get("legacy_driver_branches") or [])]
                 if isinstance(doc, dict) else []):
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
    return drv, drv_prov, tuple(majors), tuple(sorted(rels, key=lambda r: r.version, reverse=True)), tuple(legacy)


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
    raw = doc.get("driver_floors") if isinstance(doc, dict) else None
    if raw is None:
        return floors
    if not isinstance(raw, list):
        ctx.bad("driver_floors", "expected a list")
        return floors
    for i, e in enumerate(raw):
        p = f"driver_floors[{i}]"
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
        own_floor = ctx.version(e, "min_driver", p, optional=True)
        host = e.get("host_arch") if isinstance(e, dict) else None
        if host is not None and host not in HOST_ARCHS:
            ctx.bad(f"{p}.host_arch", f"expected one of {', '.join(HOST_ARCHS)}, got {host!r}")
            host = None
        if gid is None or name is None or cc is None:
            continue
        family, floor, floor_prov = floors.get(cc, (None, None, None))
        if own_floor is not None:  # a GPU's own floor overrides its generation's, with the GPU's source
            floor, floor_prov = own_floor, prov
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
        gpus.append(Gpu(gid, name, cc, mem, seg or "", tuple(aliases), prov, family, floor, floor_prov, host))
    _dupes(ctx, "gpus", [g.id for g in gpus], "id")
    return tuple(gpus)


def _load_torch(ctx: _Ctx, doc: Any) -> tuple[FrameworkRelease, ...]:
    index = ctx.req(doc, "index_url", "", str) or ""
    if index and "{variant}" not in index:
        ctx.bad("index_url", "must contain {variant}")
    out: list[FrameworkRelease] = []
    for p, e in _items(ctx, doc, "releases"):
        line = ctx.version(e, "line", p)
        py = _pythons(ctx, e, p)
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
                variants.append(Variant("cpu", None, None, None, (), (), index.replace("{variant}", "cpu"), True, vprov))
                continue
            cuda = ctx.version(ve, "cuda", vp)
            if cuda is not None and vname != f"cu{cuda.major}{cuda.minor}":
                ctx.bad(f"{vp}.name", f"'{vname}' does not match cuda '{cuda}' (expected cu{cuda.major}{cuda.minor})")
            cudnn = _opt_str(ctx, ve, "cudnn", vp)
            nccl = _opt_str(ctx, ve, "nccl", vp)
            archs = ctx.archs(ve, "archs", vp)
            ptx = ctx.archs(ve, "ptx", vp, optional=True)
            variants.append(Variant(vname, cuda, cudnn, nccl, archs, ptx, index.replace("{variant}", vname), True, vprov))
        _dupes(ctx, f"{p}.variants", [v.name for v in variants], "variant")
        names = {v.name for v in variants}
        if default is not None and default not in names:
            ctx.bad(f"{p}.pypi_default", f"'{default}' is not one of this release's variants ({', '.join(sorted(names))})")
        for k, pe in enumerate(ctx.req(e, "patches", p, list) or []):
            pp = f"{p}.patches[{k}]"
            ver = ctx.version(pe, "version", pp)
            pprov = ctx.prov(pe, pp)
            if ver is None or line is None:
                continue
            if (ver.major, ver.minor) != (line.major, line.minor):
                ctx.bad(f"{pp}.version", f"'{ver}' is not a {line} release")
            comps = []
            for c in ("torchvision", "torchaudio"):
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
                    "torch", ver, _patch_python(ctx, pe, pp, py), default, tuple(comps), numpy_abi,
                    tuple(variants), rel_prov, "torch",
                )
            )
    _dupes(ctx, "releases", [r.version for r in out], "torch version")
    return tuple(sorted(out, key=lambda r: r.version, reverse=True))


def _load_tensorflow(ctx: _Ctx, doc: Any) -> tuple[FrameworkRelease, ...]:
    out: list[FrameworkRelease] = []
    for p, e in _items(ctx, doc, "releases"):
        line = ctx.version(e, "line", p)
        py = _pythons(ctx, e, p)
        cuda = ctx.version(e, "cuda", p)
        cudnn = _opt_str(ctx, e, "cudnn", p)
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
    _dupes(ctx, "releases", [r.version for r in out], "tensorflow version")
    return tuple(sorted(out, key=lambda r: r.version, reverse=True))


def _pythons(ctx: _Ctx, e: Any, p: str) -> tuple[str, ...]:
    py = ctx.req(e, "python", p, list) or []
    good = []
    for i, v in enumerate(py):
        if not isinstance(v, str) or len(v.split(".")) != 2:
            ctx.bad(f"{p}.python[{i}]", f"expected a quoted 'X.Y', got {v!r}")
        else:
            good.append(v)
    return tuple(good)


def _patch_python(ctx: _Ctx, pe: Any, pp: str, default: tuple[str, ...]) -> tuple[str, ...]:
    if isinstance(pe, dict) and "python" in pe:
        return _pythons(ctx, pe, pp)
    return default


def _opt_str(ctx: _Ctx, obj: Any, key: str, path: str) -> str | None:
    val = obj.get(key) if isinstance(obj, dict) else None
    if val is not None and not isinstance(val, str):
        ctx.bad(f"{path}.{key}", f"write versions as quoted strings, got {val!r}")
        return None
    return val


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
        if None in (cuda, upd, ubuntu, py, rt, dv):
            continue
        for k, ref in (("runtime", rt), ("devel", dv)):
            if upd not in ref:
                ctx.bad(f"{p}.{k}", f"'{ref}' does not carry update {upd}")
        images.append(CudaImage(cuda, upd, cudnn, ubuntu, py, rt, dv, prov))
    _dupes(ctx, "cuda", [i.cuda for i in images], "CUDA image")
    return BaseImages(pattern, sprov, default_py, tuple(sorted(images, key=lambda i: i.cuda, reverse=True)))


def _cross_check(m: Matrix, problems: list[str]) -> None:
    """Relations between files: every CUDA a build names exists, and its archs lie within it."""
    if not m.cuda:
        return  # cuda.yaml itself is broken: its own problems are already listed
    for fw, fname in (("torch", "torch.yaml"), ("tensorflow", "tensorflow.yaml")):
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
    for img in m.base_images.cuda:
        if m.cuda_release(img.cuda) is None:
            problems.append(f"base_images.yaml: cuda {img.cuda}: not a CUDA release in cuda.yaml")


def _digest(texts: dict[str, bytes]) -> str:
    h = hashlib.sha256()
    for name in sorted(texts):
        h.update(name.encode() + b"\0" + texts[name] + b"\0")
    return h.hexdigest()


def load_matrix(directory: Path | str | None = None) -> Matrix:
    """Read and validate every matrix file; raise MatrixError listing all problems."""
    d = Path(directory) if directory is not None else default_matrix_dir()
    return _load_cached(str(d.resolve()))


def _cache_path(digest: str) -> Path | None:
    from envman import __version__
    from envman.resources import cache_dir

    # the pickle holds model classes: a new envman (whose classes may differ) never reads an old one
    return cache_dir() / f"matrix-{SCHEMA}-{__version__}-{digest[:32]}.pickle"


def _read_cache(digest: str) -> Matrix | None:
    """A validated matrix, pickled under the digest of the exact bytes it came from: parsing and
    validating the YAML costs ~50 ms a run; unpickling ~3 ms. Any doubt means a fresh parse."""
    import pickle

    path = _cache_path(digest)
    try:
        with open(path, "rb") as fh:
            m = pickle.load(fh)
        return m if isinstance(m, Matrix) and m.digest == digest else None
    except Exception:
        return None


def _write_cache(m: Matrix) -> None:
    import pickle

    from envman.files import write_atomic

    try:
        write_atomic(_cache_path(m.digest), pickle.dumps(m, protocol=pickle.HIGHEST_PROTOCOL))
    except Exception:
        pass  # a read-only home is fine: we just parse every time


@lru_cache(maxsize=4)
def _load_cached(directory: str) -> Matrix:
    d = Path(directory)
    problems: list[str] = []
    raw: dict[str, bytes] = {}
    for name in FILES:
        try:
            raw[name] = (d / name).read_bytes()
        except OSError as exc:
            problems.append(f"{name}: (file): cannot read: {exc.strerror or exc}")
    if not problems:
        cached = _read_cache(_digest(raw))
        if cached is not None:
            return cached
    m = _parse(raw, problems)
    _write_cache(m)
    return m


def _parse(raw: dict[str, bytes], problems: list[str]) -> Matrix:
    docs: dict[str, Any] = {}
    for name in FILES:
        if name not in raw:
            continue
        try:
            docs[name] = _yaml_load(raw[name].decode("utf-8"))
        except Exception as exc:  # yaml errors carry line/column; show them as the path
            mark = getattr(exc, "problem_mark", None)
            where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "(parse)"
            problems.append(f"{name}: {where}: invalid YAML: {getattr(exc, 'problem', None) or exc}")
    ctxs = {n: _Ctx(n, problems) for n in FILES}
    ok = {n: n in docs and _check_schema(ctxs[n], docs[n]) for n in FILES}
    if ok["cuda.yaml"]:
        drv, drv_prov, majors, cuda, legacy = _load_cuda(ctxs["cuda.yaml"], docs["cuda.yaml"])
    else:
        drv, drv_prov, majors, cuda, legacy = Version("0"), Provenance(""), (), (), ()
    gpus = _load_gpus(ctxs["gpus.yaml"], docs["gpus.yaml"]) if ok["gpus.yaml"] else ()
    torch = _load_torch(ctxs["torch.yaml"], docs["torch.yaml"]) if ok["torch.yaml"] else ()
    tf = _load_tensorflow(ctxs["tensorflow.yaml"], docs["tensorflow.yaml"]) if ok["tensorflow.yaml"] else ()
    cudnn = _load_cudnn(ctxs["cudnn.yaml"], docs["cudnn.yaml"]) if ok["cudnn.yaml"] else ()
    base = (
        _load_base_images(ctxs["base_images.yaml"], docs["base_images.yaml"])
        if ok["base_images.yaml"]
        else BaseImages("", Provenance(""), "3.12", ())
    )
    m = Matrix(drv, drv_prov, majors, cuda, gpus, {"torch": torch, "tensorflow": tf}, cudnn, base, _digest(raw), legacy)
    _cross_check(m, problems)
    if problems:
        raise MatrixError(problems)
    return m
