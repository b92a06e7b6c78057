"""The doctor's host side: the matrix → Knowledge adapter (memoised on disk) and facts files.

Loading the matrix costs about 25 ms even from envman.matrix's pickle cache (importing packaging and
the model dominates), over a tenth of the doctor's whole run; this JSON loads in about 2 ms. The derived
Knowledge is saved under the user's cache directory, keyed by a hash of the matrix files' bytes and
envman's version: any edit to the data, or a new envman, misses the cache and reloads through
``load_matrix`` (which validates). A cache that cannot be read or written is ignored.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from envman import __version__
from envman.errors import UsageError
from envman.files import write_atomic
import dataclasses

from envman.portable.doctor.knowledge import Build, ExtBuild, Feature, Knowledge, Release
from envman.portable.facts.gather import FACTS_SCHEMA

FORMAT = 2  # bump when Knowledge.to_dict changes shape


from envman.resources import cache_dir, matrix_dir

if TYPE_CHECKING:  # the model pulls in packaging: only the cache-miss path needs it
    from envman.model import Matrix


def matrix_key(directory: Path) -> str | None:
    h = hashlib.sha256(f"{__version__}\0{FORMAT}\0".encode())
    files = sorted(glob.glob(str(directory / "*.yaml")))
    if not files:
        return None
    for f in files:
        try:
            h.update(os.path.basename(f).encode() + b"\0" + Path(f).read_bytes() + b"\0")
        except OSError:
            return None
    return h.hexdigest()[:24]


def load_knowledge(directory: Path | None = None, use_cache: bool = True) -> Knowledge:
    """Knowledge for the matrix in ``directory`` (default: envman's own). Raises what load_matrix raises."""
    d = directory or matrix_dir()
    key = matrix_key(d) if use_cache else None
    path = cache_dir() / f"knowledge-{key}.json" if key else None
    if path is not None:
        try:
            return Knowledge.from_dict(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError):
            pass
    from envman.matrix.load import load_matrix

    k = with_extensions(knowledge_from_matrix(load_matrix(d)), d)
    if path is not None:
        _save(path, k)
    return k


def _save(path: Path, k: Knowledge) -> None:
    try:
        # Entries of other matrices stay: two checkouts sharing the cache must not evict each other.
        write_atomic(path, json.dumps(k.to_dict(), sort_keys=True, separators=(",", ":")))
    except OSError:
        pass


def knowledge_from_matrix(m: Matrix) -> Knowledge:
    """The adapter: plain strings and tuples out of the validated Matrix model."""
    rels: dict[str, tuple[Release, ...]] = {}
    for fw, lst in m.frameworks.items():
        rels[fw] = tuple(
            Release(
                fw, str(r.version), r.package, tuple(r.python), r.numpy_abi, r.pypi_default, tuple(r.companions),
                tuple(
                    Build(v.name, str(v.cuda) if v.cuda is not None else None, v.cudnn, v.nccl,
                          tuple(a.sm for a in v.archs), tuple(a.sm for a in v.ptx), v.index_url, _cudnn_floor(m, v))
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
    )


EXTENSIONS_FILE = "extensions.yaml"


def with_extensions(k: Knowledge, directory: Path) -> Knowledge:
    """``k`` plus matrices/extensions.yaml (feature floors, PTX ISA per CUDA, packages' own CUDA builds).
    The file is optional; a malformed entry is a DataError naming file and path."""
    from envman.errors import DataError

    p = Path(directory) / EXTENSIONS_FILE
    if not p.exists():
        return k
    import yaml

    doc = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    problems: list[str] = []

    def need(entry: dict, key: str, where: str) -> str:
        val = entry.get(key)
        if not isinstance(val, str) or not val:
            problems.append(f"{EXTENSIONS_FILE}: {where}.{key}: missing or not a quoted string")
            return ""
        return val

    features = []
    for i, f in enumerate(doc.get("features") or ()):
        where = f"features[{i}]"
        if not f.get("source"):
            problems.append(f"{EXTENSIONS_FILE}: {where}: no source")
        mc = need(f, "min_cc", where)
        asked = f.get("asked_by") or {}
        pkgs = tuple((str(p["name"]), str(p["version"]) if p.get("version") is not None else None)
                     for p in asked.get("packages") or ())
        cc = tuple(int(x) for x in mc.split(".")) if mc else (0, 0)
        features.append(Feature(need(f, "id", where), f.get("name") or f.get("id", ""), cc,
                                tuple(str(x) for x in asked.get("precision") or ()), pkgs,
                                f.get("fails", ""), f.get("instead", "")))
    ptx = {}
    for i, e in enumerate(doc.get("ptx_isa") or ()):
        if not e.get("source"):
            problems.append(f"{EXTENSIONS_FILE}: ptx_isa[{i}]: no source")
        ptx[need(e, "cuda", f"ptx_isa[{i}]")] = need(e, "isa", f"ptx_isa[{i}]")
    builds = []
    for i, b in enumerate(doc.get("builds") or ()):
        if not b.get("source"):
            problems.append(f"{EXTENSIONS_FILE}: builds[{i}]: no source")
        builds.append(ExtBuild(need(b, "package", f"builds[{i}]"), need(b, "from", f"builds[{i}]"),
                               need(b, "cuda", f"builds[{i}]"), b.get("cudnn")))
    tfw = doc.get("tensorflow_windows_native_gpu_last") or {}
    if problems:
        raise DataError("; ".join(problems))
    return dataclasses.replace(k, features=tuple(features), ptx_isa=ptx, ext_builds=tuple(builds),
                               tf_windows_gpu_last=tfw.get("version") if isinstance(tfw, dict) else None)


# --- facts files: `--dump-facts FILE` writes one, `--facts FILE` judges one from another machine --------


def read_facts_file(path: str) -> dict:
    """The facts in ``path``; a missing, unreadable or malformed file is a UsageError naming it."""
    import json

    hint = "create it on the machine to diagnose with `envman doctor --dump-facts facts.json`"
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        raise UsageError(f"facts file {path}: not found", hint=hint) from None
    except IsADirectoryError:
        raise UsageError(f"facts file {path}: is a directory", hint=hint) from None
    except (OSError, UnicodeDecodeError) as exc:
        why = getattr(exc, "strerror", None) or exc
        raise UsageError(f"facts file {path}: cannot be read: {why}", hint=hint) from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        where = f"line {exc.lineno}, column {exc.colno}: {exc.msg}" if hasattr(exc, "lineno") else str(exc)
        raise UsageError(f"facts file {path}: not valid JSON ({where})", hint=hint) from None
    if not isinstance(data, dict):
        raise UsageError(f"facts file {path}: expected a JSON object at the top, got {type(data).__name__}", hint=hint)
    schema = data.get("schema")
    if isinstance(schema, int) and schema > FACTS_SCHEMA:
        raise UsageError(f"facts file {path}: schema {schema} is newer than this envman reads ({FACTS_SCHEMA})",
                         hint="upgrade envman (pip install -U envman)")
    return data


def write_facts_file(path: str, facts: dict) -> None:
    import json

    write_atomic(path, json.dumps(facts, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def _cudnn_floor(m: Matrix, v) -> tuple[int, int] | None:
    """The lowest capability the variant's cuDNN supports, when the matrix is sure of it."""
    dnn = m.cudnn_release(v.cudnn) if v.cuda is not None else None
    cc = dnn.floor_for(v.cuda.major) if dnn is not None and not dnn.prov.uncertain else None
    return (cc.major, cc.minor) if cc is not None else None
