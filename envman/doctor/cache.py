"""Knowledge, memoised: the one module in envman/doctor that touches files.

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

from .knowledge import Knowledge

FORMAT = 1  # bump when Knowledge.to_dict changes shape


def matrix_dir() -> Path:
    """Where load_matrix() reads by default (envman.matrix.default_matrix_dir, without importing yaml)."""
    pkg = Path(__file__).resolve().parent.parent
    for cand in (pkg / "matrices", pkg.parent / "matrices"):
        if (cand / "cuda.yaml").is_file():
            return cand
    return pkg.parent / "matrices"


def cache_dir() -> Path:
    """The same directory envman.matrix caches its pickled Matrix in."""
    if os.environ.get("ENVMAN_CACHE_DIR"):
        return Path(os.environ["ENVMAN_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "envman"


def matrix_key(directory: Path) -> str | None:
    from .. import __version__

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
    from ..matrix import load_matrix
    from .knowledge import knowledge_from_matrix

    k = knowledge_from_matrix(load_matrix(d))
    if path is not None:
        _save(path, k)
    return k


def _save(path: Path, k: Knowledge) -> None:
    try:
        from ..fsutil import write_atomic

        # Entries of other matrices stay: two checkouts sharing the cache must not evict each other.
        write_atomic(path, json.dumps(k.to_dict(), sort_keys=True, separators=(",", ":")))
    except OSError:
        pass
