"""Code that compiles when it runs (issue 38, still open): a training script that runs ``make`` or ``g++`` as it
starts (``subprocess.run(["make", "-C", "ops"])``, ``os.system("g++ -shared …")``) stopped in an image without them.
Read from the project's ``.py`` files (ast, never run); the image then keeps a C/C++ toolchain, and init says why."""

from __future__ import annotations

import ast
import os
from collections.abc import Sequence
from pathlib import Path

from envman.portable.smoke import entry_imports, entry_script
from envman.project.codeimports import project_sources

# Debian's and Ubuntu's build-essential depends on gcc, g++, make and libc6-dev
# (https://packages.debian.org/bookworm/build-essential)
TOOLCHAIN = "build-essential"
_TOOLS = frozenset({"make", "gcc", "g++", "cc", "c++", "nvcc"})
_RUNNERS = frozenset({"system", "popen", "run", "call", "check_call", "check_output", "Popen", "getoutput",
                      "getstatusoutput", "spawnlp", "execvp"})


def runtime_toolchain(root: Path, command: Sequence[str] = ()) -> tuple[tuple[str, ...], list[str]]:
    """(the apt packages the code's own compiler runs need in the image, the note saying where the code runs them):
    the files the entry point reaches (portable/smoke.py's entry_script and entry_imports), else all the code."""
    entry, reached = entry_script(command, str(root)), set()  # type: str | None, set[str]
    if entry is not None:
        entry_imports(entry, str(root), reached)
    found = [f"{path.relative_to(root).as_posix()}:{line} runs {tool}" for path, text in project_sources(root)
             if path.name != "setup.py" and (not reached or os.path.normpath(path) in reached)
             and any(t in text for t in _TOOLS) for line, tool in _runs(text)]
    if not found:
        return (), []
    said = ", ".join(found[:3]) + (f" and {len(found) - 3} more" if len(found) > 3 else "")
    if all(f.endswith(" nvcc") for f in found):
        return (), [f"the code compiles when it runs ({said}): nvcc comes with a CUDA devel base: set cuda_devel: "
                    "true in envman.yaml"]
    return (TOOLCHAIN,), [f"the code compiles when it runs ({said}): the image keeps {TOOLCHAIN} (gcc, g++, make)"]


def _runs(text: str) -> list[tuple[int, str]]:
    """(line, tool) of each call that runs a compiler or make: its command's first word, a list's first item."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return []
    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and node.args and
                getattr(node.func, "attr", getattr(node.func, "id", "")) in _RUNNERS):
            continue
        first = node.args[0]
        first = first.elts[0] if isinstance(first, (ast.List, ast.Tuple)) and first.elts else first
        first = first.values[0] if isinstance(first, ast.JoinedStr) and first.values else first  # f"make -C {d}"
        words = first.value.split() if isinstance(first, ast.Constant) and isinstance(first.value, str) else []
        tool = os.path.basename(words[0]) if words else ""
        if tool in _TOOLS:
            out.append((node.lineno, tool))
    return out
