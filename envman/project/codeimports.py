"""The frameworks a project's own code imports, read from its ``.py`` files (never run): evidence of the framework
as strong as a requirement line. A detection repository with a CUDA extension built against torch may name torch
nowhere in its requirements; its code still does ``import torch`` (issue 38, class 1).

Read with a line pattern rather than ``ast``: Python 2 files parse too, and a large tree is read in well under a
second. Only the count of files per module is kept."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from envman import frameworks
from envman.errors import UsageError
from envman.inputs import read_regular

# folders that are not the project's code: environments, build output, vendored trees, envman's own kit
_SKIP = {".git", ".hg", ".venv", "venv", "env", ".tox", ".nox", "node_modules", "site-packages", "__pycache__",
         "build", "dist", ".envman", "third_party", "3rdparty", "external", "vendor"}
_MAX_FILES = 5000
_MAX_BYTES = 1_000_000
_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+([A-Za-z_]\w*)[\w.]*[ \t]+import\b|import[ \t]+([^#\n;]+))", re.M)
# the most-imported framework is the project's when each other one is imported by at most this share as many files
_DOMINANT = 4


def read_code_frameworks(root: Path) -> dict[str, int]:
    """How many of the project's ``.py`` files import each framework's modules (top-level names)."""
    modules = {m for fw in frameworks.registered() for m, _ in fw.modules}
    counts: dict[str, int] = {}
    for _, text in project_sources(root):
        for m in module_names(text) & modules:
            counts[m] = counts.get(m, 0) + 1
    return counts


def project_sources(root: Path) -> Iterator[tuple[Path, str]]:
    """The project's own ``.py`` files and their text, in a stable order: at most ``_MAX_FILES`` of them, none over
    ``_MAX_BYTES``, none in an environment, build output or vendored tree."""
    seen = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP and not d.startswith("."))
        for fn in sorted(filenames):
            if not fn.endswith(".py"):
                continue
            seen += 1
            if seen > _MAX_FILES:
                return
            p = Path(dirpath) / fn
            try:  # a FIFO in a .py file's place is an OSError here, never a read that blocks
                text = read_regular(p, _MAX_BYTES).decode("utf-8", errors="replace")
            except OSError:
                continue
            yield p, text


def module_names(text: str) -> set[str]:
    names: set[str] = set()
    for frm, imp in _IMPORT.findall(text):
        if frm:
            names.add(frm)
        else:
            names.update(part.strip().split(".")[0].split(" ")[0] for part in imp.split(","))
    return names


@dataclass
class CodeFrameworks:
    """What the code imports, per framework: (module, files) pairs, and the verdict over the dependency files."""

    files: dict[str, int] = field(default_factory=dict)  # module → files importing it
    framework: str | None = None  # the framework the code uses, when the dependency files name none
    notes: list[str] = field(default_factory=list)


def _ranked(files: dict[str, int]) -> list[tuple[str, int]]:
    """(framework, files importing one of its modules), most first."""
    per_fw = {fw.name: max((files.get(m, 0) for m, _ in fw.modules), default=0) for fw in frameworks.registered()}
    return sorted(((k, n) for k, n in per_fw.items() if n), key=lambda kv: (-kv[1], kv[0]))


def dominant(files: dict[str, int]) -> str | None:
    """The framework the code runs on: the most imported, when each other one is imported by at most a quarter as
    many files (a stray ``import tensorflow`` for TensorBoard beside a torch codebase); None when none is."""
    ranked = _ranked(files)
    if not ranked or any(k * _DOMINANT > ranked[0][1] for _, k in ranked[1:]):
        return None
    return ranked[0][0]


def judge(files: dict[str, int], chosen: str | None, declared: set[str], where: str) -> CodeFrameworks:
    """``chosen``: the framework the dependency files gave (None: none); ``declared``: the distributions they name.
    Pure. Without a framework from the files, the one the code imports is the project's (a note says so), or —
    several imported about as much — a refusal naming each and the option for each. A framework module the code
    imports that neither the stack nor a declared distribution provides is named in a warning."""
    out = CodeFrameworks(files=dict(files))
    ranked = _ranked(files)
    if chosen is None and ranked:
        top, n = ranked[0]
        if dominant(files):
            out.framework = top
            out.notes.append(f"framework {top}: the code imports it ({_files(n)}) and no dependency file names it "
                             f"(pass --framework to choose a release)")
        else:
            said = " and ".join(f"{name} ({_files(k)})" for name, k in ranked)
            raise UsageError(f"{where}: the code imports {said}, and no dependency file names a framework",
                             hint=" or ".join(f"pass --framework {name}" for name, _ in ranked)
                             + " (the one the training code runs on)")
    stack = out.framework or chosen
    for fw in frameworks.registered():
        for module, dists in fw.modules:
            k = files.get(module, 0)
            if not k or (fw.name == stack and module == fw.modules[0][0]) or set(dists) & declared:
                continue
            if fw.name == stack and module != fw.modules[0][0] and set(fw.distributions) & set(dists):
                continue  # keras with TensorFlow: TensorFlow brings it
            out.notes.append(f"warning: the code imports {module} ({_files(k)}), which no dependency file names "
                             f"and the stack does not hold: add {dists[0]} under packages: in envman.yaml if that "
                             f"code runs in the image")
    return out


def _files(n: int) -> str:
    return f"{n} .py file" + ("" if n == 1 else "s")
