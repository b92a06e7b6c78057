"""PyTorch's release build matrices: ``tools/scripts/generate_binary_build_matrix.py`` of pytorch/test-infra
at every ``release/X.Y`` branch, which names the CUDA versions built for Linux x86_64 and aarch64, the
stable CUDA (the plain PyPI wheel's) and the Python versions of each release.

Only the file's literal constants are read (``ast.literal_eval`` of top-level assignments; nothing is run).
A release branch validates the release being made on the ``test`` channel (release candidates); its
``release`` key still holds the previous release until late (release/2.7 says 11.8/12.4/12.6 under
``release`` and 11.8/12.6/12.8 under ``test``; 2.7 shipped cu118/cu126/cu128), so the ``test`` lists are
the release's.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from datetime import date
from typing import Any

from packaging.version import InvalidVersion, Version

from tools.matrix.sources.snapshot import Snapshot

NAME = "torch-builds"
SLUG = "pytorch/test-infra"
URL = f"https://github.com/{SLUG}"
FILE = "tools/scripts/generate_binary_build_matrix.py"
KEYS = ("CUDA_ARCHES_DICT", "CUDA_AARCH64_ARCHES_DICT", "CUDA_AARCH64_ARCHES", "STABLE_CUDA_VERSIONS",
        "PYTHON_ARCHES_DICT", "TORCH_ONLY_PYTHON_ARCHES", "CUDA_CUDNN_VERSIONS", "CURRENT_CANDIDATE_VERSION",
        "CURRENT_STABLE_VERSION")
CHANNEL = "test"
# 2.5/2.6 name their one aarch64 CUDA build only inside a function: ``CUDA_AARCH64: "cu124",``
IMPLIED_AARCH64 = re.compile(r'CUDA_AARCH64:\s*"cu(\d{2})(\d)"')


def parse_constants(text: str) -> dict[str, Any]:
    """The literal top-level assignments of the build-matrix script that envman reads (nothing is executed)."""
    out: dict[str, Any] = {}
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id in KEYS:
            try:
                out[target.id] = ast.literal_eval(value)
            except (ValueError, SyntaxError):
                continue
    if "CUDA_AARCH64_ARCHES" not in out and "CUDA_AARCH64_ARCHES_DICT" not in out:
        m = IMPLIED_AARCH64.search(text)
        if m:
            out["CUDA_AARCH64_ARCHES"] = [f"{m.group(1)}.{m.group(2)}-aarch64"]
    return out


def _line(branch: str) -> Version | None:
    m = re.fullmatch(r"release/(\d+\.\d+)", branch)
    if not m:
        return None
    try:
        return Version(m.group(1))
    except InvalidVersion:
        return None


def read_source(repo, today: date | None = None) -> Snapshot:
    heads = {b: c for b, c in repo.refs("heads").items() if _line(b) is not None}
    order = sorted(heads, key=lambda b: _line(b))  # type: ignore[arg-type, return-value]
    consts = []
    for b in order:
        got = parse_constants(repo.show(heads[b], FILE))
        line = b.split("/", 1)[1]
        consts += [[line, k, json.dumps(got[k], sort_keys=True)] for k in KEYS if k in got]
    newest = order[-1] if order else ""
    return Snapshot(NAME, {
        "url": repo.url,
        "revision": f"{newest} ({heads.get(newest, '')})",
        "read": (today or date.today()).isoformat(),
        "what": f"{FILE} at every release/X.Y branch: its literal constants (CUDA builds per platform, stable "
                "CUDA, Python versions; the 'test' channel is the release's)",
    }, {"branches": [[b.split("/", 1)[1], heads[b]] for b in order], "constants": consts})


@dataclass(frozen=True)
class ReleaseBuild:
    line: str  # "2.14"
    commit: str
    cuda: tuple[str, ...]  # CUDA versions built for Linux x86_64 ("12.6", "13.0")
    cuda_aarch64: tuple[str, ...]  # CUDA versions built for Linux aarch64 (SBSA)
    stable: str | None  # the stable CUDA (the plain PyPI wheel's, when the file says)
    python: tuple[str, ...]  # CPython versions, free-threaded ("3.14t") left out
    url: str

    def variants(self, arch: str = "x86_64") -> set[str]:
        return {"cu" + c.replace(".", "") for c in (self.cuda if arch == "x86_64" else self.cuda_aarch64)}


def _channel(value: Any) -> Any:
    return value.get(CHANNEL) if isinstance(value, dict) else value


def builds(snap: Snapshot) -> dict[str, ReleaseBuild]:
    commits = {r[0]: r[1] for r in snap.rows("branches") if len(r) >= 2}
    consts: dict[str, dict[str, Any]] = {}
    for r in snap.rows("constants"):
        if len(r) == 3:
            consts.setdefault(r[0], {})[r[1]] = json.loads(r[2])
    url = snap.meta.get("url", URL)
    out = {}
    for line, c in consts.items():
        cuda = tuple(_channel(c.get("CUDA_ARCHES_DICT")) or ())
        arm_raw = _channel(c.get("CUDA_AARCH64_ARCHES_DICT")) or c.get("CUDA_AARCH64_ARCHES") or ()
        arm = tuple(a.removesuffix("-aarch64") for a in arm_raw)
        preview = set(c.get("TORCH_ONLY_PYTHON_ARCHES") or ())  # CPython pre-releases, never in a release
        py = tuple(p for p in _channel(c.get("PYTHON_ARCHES_DICT")) or () if not p.endswith("t") and p not in preview)
        stable = _channel(c.get("STABLE_CUDA_VERSIONS"))
        out[line] = ReleaseBuild(line, commits.get(line, ""), cuda, arm, stable, py,
                                 f"{url}/blob/{commits.get(line, 'release/' + line)}/{FILE}")
    return out
