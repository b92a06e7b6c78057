"""The matrix as the doctor's Knowledge (portable/doctor/knowledge.py), plus matrices/extensions.yaml, kept in the
user's cache (envman/diskcache.py) by the matrix files' bytes and envman's version: an edit to the data, or a new
envman, reloads through ``load_matrix`` (which validates); a hit imports neither packaging nor the model."""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, cast

from envman import __version__, frameworks
from envman.inputs import MAX_DATA, read_data, read_regular
from envman.resources import matrix_dir

FORMAT = 3  # bump when Knowledge.to_dict changes shape
EXTENSIONS_FILE = "extensions.yaml"

if TYPE_CHECKING:  # the model pulls in packaging: only the cache-miss path needs it; a lock's kit only the key
    from envman.model import Matrix
    from envman.portable.doctor.knowledge import Feature, Knowledge


def matrix_key(directory: Path) -> str | None:
    h = hashlib.sha256(f"{__version__}\0{FORMAT}\0".encode())
    files = sorted(glob.glob(str(directory / "*.yaml")))
    if not files:
        return None
    for f in files:
        try:
            h.update(os.path.basename(f).encode() + b"\0" + read_regular(f, MAX_DATA) + b"\0")
        except OSError:
            return None
    return h.hexdigest()[:24]


def load_knowledge(directory: Path | None = None) -> Knowledge:
    """Knowledge for the matrix in ``directory`` (default: envman's own). Raises what load_matrix raises.
    Kept on disk as JSON data under the matrix's key (envman/diskcache.py: a bad entry is a miss)."""
    from envman.diskcache import cached
    from envman.portable.doctor.knowledge import Knowledge

    d = directory or matrix_dir()
    key = matrix_key(d)

    def compute() -> dict:
        from envman.matrix.load import load_matrix

        return with_extensions(knowledge_from_matrix(load_matrix(d)), d).to_dict()

    if key is None:
        return Knowledge.from_dict(compute())
    return cached("knowledge", key, compute, Knowledge.from_dict)


def knowledge_from_matrix(m: Matrix) -> Knowledge:
    """The adapter: plain strings and tuples out of the validated Matrix model."""
    from envman.portable.doctor.knowledge import Build, Knowledge, Release

    rels: dict[str, tuple[Release, ...]] = {}
    # builds installed through an extra named like them (jax[cuda13]): the framework's CUDA extras
    extras = {f.name: {e for e, _ in f.cuda_extras} for f in frameworks.registered()}
    for fw, lst in m.frameworks.items():
        rels[fw] = tuple(
            Release(
                fw, str(r.version), r.package, tuple(r.python), r.numpy_abi, r.pypi_default, tuple(r.companions),
                tuple(
                    Build(v.name, str(v.cuda) if v.cuda is not None else None, v.cudnn, v.nccl,
                          tuple(a.sm for a in v.archs), tuple(a.sm for a in v.ptx), v.index_url, _cudnn_floor(m, v),
                          v.name if v.name in extras.get(fw, ()) else None)
                    for v in r.variants
                ),
                tuple(r.extras),
            )
            for r in lst
        )
    return Knowledge(
        {c.label: str(c.min_driver) for c in m.cuda},
        {mj.major: str(mj.minor_compat_floor) for mj in m.cuda_majors},
        rels,
        m.digest,
        tuple(((b.max_cc.major, b.max_cc.minor), b.branch, str(b.last_driver)) for b in m.legacy_branches
              if b.last_driver is not None),
        toolkit_wheels=m.toolkit_wheels.names,
        gpu_floors=_gpu_floors(m),
        cuda_images=tuple((str(i.cuda), i.cudnn, i.ubuntu, i.python) for i in m.base_images.cuda),
    )


def _gpu_floors(m: Matrix) -> dict[str, tuple[str, str]]:
    """The GPUs whose floor is NVIDIA's supported-GPU list, by the product names (NVML's) they are listed as."""
    from envman.portable.doctor.knowledge import gpu_key

    return {gpu_key(name): (str(g.min_driver), g.min_driver_prov.source) for g in m.gpus
            if g.listed is not None and g.min_driver == g.listed and g.min_driver_prov is not None
            for name in (g.name, *g.aliases) if any(ch.isupper() for ch in name)}  # product names, not slugs typed


def _cudnn_floor(m: Matrix, v) -> tuple[int, int] | None:
    """The lowest capability the variant's cuDNN supports, when the matrix is sure of it."""
    dnn = m.cudnn_release(v.cudnn) if v.cuda is not None else None
    cc = dnn.floor_for(v.cuda.major) if dnn is not None and not dnn.prov.uncertain else None
    return (cc.major, cc.minor) if cc is not None else None


class _Extensions:
    """extensions.yaml's document and the problems found in it, each naming the file and the dotted path."""

    def __init__(self, doc: dict) -> None:
        self.doc = doc
        self.problems: list[str] = []

    def rows(self, section: str, measured: bool = True) -> list[tuple[str, dict]]:
        """The section's entries, each a mapping that cites a source (or, with ``measured``, a measurement)."""
        out = []
        for i, e in enumerate(self.doc.get(section) or ()):
            where = f"{section}[{i}]"
            if not isinstance(e, dict):
                self.problems.append(f"{EXTENSIONS_FILE}: {where}: expected a mapping")
                continue
            if not (e.get("source") or (measured and e.get("measured"))):
                self.problems.append(f"{EXTENSIONS_FILE}: {where}: no source" + " or measured" * measured)
            out.append((where, e))
        return out

    def need(self, entry: dict, key: str, where: str) -> str:
        val = entry.get(key)
        if not isinstance(val, str) or not val:
            self.problems.append(f"{EXTENSIONS_FILE}: {where}.{key}: missing or not a quoted string")
            return ""
        return val


def with_extensions(k: Knowledge, directory: Path) -> Knowledge:
    """``k`` plus matrices/extensions.yaml (feature floors, PTX ISA per CUDA, packages' own CUDA builds).
    The file is optional; a malformed entry is a DataError naming file and path."""
    from envman.errors import DataError
    from envman.portable.doctor.knowledge import ExtBuild

    p = Path(directory) / EXTENSIONS_FILE
    if not p.exists():
        return k
    import yaml

    x = _Extensions(yaml.safe_load(read_data(p)) or {})
    need = x.need
    features = [_feature(f, need(f, "min_cc", w), need(f, "id", w)) for w, f in x.rows("features", measured=False)]
    ptx = {need(e, "cuda", w): need(e, "isa", w) for w, e in x.rows("ptx_isa", measured=False)}
    builds = [ExtBuild(need(b, "package", w), need(b, "from", w), need(b, "cuda", w), b.get("cudnn"))
              for w, b in x.rows("builds", measured=False)]
    sonames = tuple(_sonames(x))
    glibc = tuple((need(e, "package", w), need(e, "from", w), need(e, "glibc", w)) for w, e in x.rows("wheel_glibc"))
    windows = tuple((need(e, "package", w), need(e, "from", w)) for w, e in x.rows("windows_native"))
    lcuda = _triton_lcuda(x)
    loaders = tuple(_loader(x, w, e) for w, e in x.rows("loaders", measured=False))
    built = tuple((need(e, "package", w), need(e, "version", w), need(e, "cudnn", w))
                  for w, e in x.rows("cudnn_built", measured=False))
    quirks = tuple(_quirk(x, w, e) for w, e in x.rows("quirks", measured=False))
    if x.problems:
        raise DataError("; ".join(x.problems))
    tfw = x.doc.get("tensorflow_windows_native_gpu_last") or {}
    return dataclasses.replace(k, features=tuple(features), ptx_isa=ptx, ext_builds=tuple(builds),
                               tf_windows_gpu_last=tfw.get("version") if isinstance(tfw, dict) else None,
                               cuda_sonames=sonames, wheel_glibc=glibc, windows_native=windows,
                               triton_lcuda_before=lcuda, loaders=loaders, cudnn_built=built, quirks=quirks)


def _strings(x: _Extensions, e: dict, key: str, where: str) -> tuple[str, ...]:
    val = e.get(key) or []
    if not isinstance(val, list) or not all(isinstance(s, str) and s for s in val):
        x.problems.append(f"{EXTENSIONS_FILE}: {where}.{key}: expected a list of quoted strings")
        return ()
    return tuple(val)


_COMPARES = ("cuda",)


def _loader(x: _Extensions, where: str, e: dict) -> tuple[str, tuple[str, ...], tuple[tuple[str, ...], ...]]:
    """loaders[]: a package, what its loader compares beyond release/CPU/ABI, and torch releases of one ABI."""
    compares = _strings(x, e, "compares", where)
    x.problems += [f"{EXTENSIONS_FILE}: {where}.compares: {c!r} is not one of {', '.join(_COMPARES)}"
                   for c in compares if c not in _COMPARES]
    groups = e.get("same_abi") or []
    if not isinstance(groups, list) or not all(isinstance(g, list) for g in groups):
        x.problems.append(f"{EXTENSIONS_FILE}: {where}.same_abi: expected a list of lists of torch releases")
        groups = []
    same = tuple(_strings(x, {"g": g}, "g", f"{where}.same_abi") for g in groups)
    return x.need(e, "package", where), compares, same


def _quirk(x: _Extensions, where: str, e: dict) -> tuple[str, str, tuple[str, ...], str, str, str, str,
                                                        tuple[tuple[str, str], ...]]:
    sev = e.get("severity")
    if sev not in ("error", "warn", "info"):
        x.problems.append(f"{EXTENSIONS_FILE}: {where}.severity: expected error, warn or info")
    unless = e.get("unless_env") or {}
    if not isinstance(unless, dict) or not all(isinstance(v, str) for v in unless.values()):
        x.problems.append(f"{EXTENSIONS_FILE}: {where}.unless_env: expected VARIABLE: text")
        unless = {}
    need = x.need
    return (need(e, "id", where), need(e, "framework", where), _strings(x, e, "versions", where), str(sev),
            need(e, "says", where), need(e, "remedy", where), str(e.get("when_installed") or ""),
            tuple(sorted((str(a), b) for a, b in unless.items())))


def _feature(f: dict, mc: str, fid: str) -> Feature:
    from envman.portable.doctor.knowledge import Feature

    asked = f.get("asked_by") or {}
    pkgs = tuple((str(p["name"]), str(p["version"]) if p.get("version") is not None else None)
                 for p in asked.get("packages") or ())
    cc = cast("tuple[int, int]", tuple(int(x) for x in mc.split("."))) if mc else (0, 0)
    return Feature(fid, f.get("name") or f.get("id", ""), cc, tuple(str(x) for x in asked.get("precision") or ()),
                   pkgs, f.get("fails", ""), f.get("instead", ""))


def _sonames(x: _Extensions) -> Iterator[tuple[str, tuple[tuple[str, str], ...]]]:
    """cuda_sonames: per CUDA release, each library's stem → "soname version"."""
    for where, e in x.rows("cuda_sonames"):
        libs = e.get("libs")
        if not isinstance(libs, dict) or not all(isinstance(v, str) for v in libs.values()):
            x.problems.append(f"{EXTENSIONS_FILE}: {where}.libs: expected stem: \"soname version\" strings")
            continue
        yield x.need(e, "cuda", where), tuple(sorted((str(k), v) for k, v in libs.items()))


def _triton_lcuda(x: _Extensions) -> str | None:
    """extensions.yaml triton_links_libcuda_so.before: the first Triton whose launcher links libcuda.so.1."""
    e = x.doc.get("triton_links_libcuda_so")
    if e is None:
        return None
    if not (isinstance(e, dict) and (e.get("source") or e.get("measured"))):
        x.problems.append(f"{EXTENSIONS_FILE}: triton_links_libcuda_so: expected a mapping with source or measured")
        return None
    return x.need(e, "before", "triton_links_libcuda_so") or None
