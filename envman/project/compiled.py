"""Does the project compile code of its own when it is installed — a C/C++ or Cython extension, a CUDAExtension,
a native build backend — and what does that build need (the framework imported while building, nvcc)?

Read from its files, never by running them: the names setup.py calls (``Extension``, ``CppExtension``,
``CUDAExtension``, ``Pybind11Extension``, ``cythonize``) and imports (``torch.utils.cpp_extension``, ``Cython``),
and the build backend pyproject.toml names (scikit-build-core, meson-python, setuptools-rust, maturin …). Such a
project is built into a wheel in the image's builder stage (compilers there, nvcc when it compiles CUDA; only the
wheel reaches the final image); an extension its setup.py lets fail (``optional=True``, an ``…ALLOW_ERRORS``
switch) or that the code builds at run time (``torch.utils.cpp_extension.load``) is said."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from envman.inputs import MAX_SPEC, read_regular
from envman.project.files import setup_py_tree, small_text

# setup.py calls → what they compile
_CALLS = {"Extension": "a C/C++ extension", "CppExtension": "a C++ extension (torch)", "CUDAExtension": "a CUDA extension",
          "Pybind11Extension": "a pybind11 extension", "cythonize": "Cython modules"}
# modules setup.py imports while building → the distribution that provides them
_BUILD_IMPORTS = {"numpy": "numpy", "Cython": "cython", "pybind11": "pybind11", "packaging": "packaging"}
# PEP 517 backends (and build requirements) that compile: requirement name → what
_BACKENDS = {"scikit-build-core": "a CMake build (scikit-build-core)", "scikit-build": "a CMake build (scikit-build)",
             "meson-python": "a Meson build (meson-python)", "setuptools-rust": "a Rust extension (setuptools-rust)",
             "maturin": "a Rust extension (maturin)", "cython": "Cython modules", "pybind11": "a pybind11 extension",
             "nanobind": "a nanobind extension"}


@dataclass(frozen=True)
class Compiled:
    kinds: tuple[str, ...]  # "a CUDA extension", "Cython modules" …
    framework: bool  # the build imports the framework (torch.utils.cpp_extension)
    cuda: bool  # it compiles CUDA code
    optional: bool  # setup.py lets the build of an extension fail (the project then runs without it)
    at_runtime: bool  # the code compiles extensions when it runs (torch.utils.cpp_extension.load)
    imports: tuple[str, ...] = ()  # what setup.py imports while building, beyond the framework (numpy, Cython …)


def _setup_py(root: Path) -> tuple[set[str], set[str], str, bool]:
    """(names called, modules imported, the text, whether it computes ``ext_modules=``: anything but an empty list)
    of setup.py; empty when there is none or it does not parse."""
    tree = setup_py_tree(root)
    if tree is None:
        return set(), set(), "", False
    # every name it uses, called or bound (`extension = CUDAExtension` … `extension(...)`)
    calls = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    calls |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    calls |= {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    imports = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imports |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    ext = next((n.value for n in ast.walk(tree) if isinstance(n, ast.keyword) and n.arg == "ext_modules"), None)
    computed = ext is not None and not (isinstance(ext, (ast.List, ast.Tuple)) and not ext.elts)
    return calls, imports, small_text(root, "setup.py") or "", computed


def compiled_code(root: Path, build_requires: tuple[str, ...] = ()) -> Compiled | None:
    """What the project compiles when it is built, or None (pure Python). ``build_requires``: pyproject's
    ``[build-system] requires``."""
    calls, imports, text, computed = _setup_py(root)
    kinds = [what for name, what in _CALLS.items() if name in calls]
    if not kinds and computed:
        kinds.append("extensions its setup.py computes (ext_modules=…)")
    for r in build_requires:
        name = re.split(r"[<>=!~\[; ]", r.strip(), maxsplit=1)[0].lower().replace("_", "-")
        if name in _BACKENDS and _BACKENDS[name] not in kinds:
            kinds.append(_BACKENDS[name])
    cuda = "CUDAExtension" in calls or bool(re.search(r"""['"][^'"]+\.cu['"]""", text))
    framework = any(m == "torch" or m.startswith("torch.") for m in imports)
    optional = bool(re.search(r"optional\s*=\s*True|ALLOW_ERRORS|BUILD_ALLOW", text))
    at_runtime = _loads_at_runtime(root)
    if not kinds:
        return Compiled((), False, False, False, True) if at_runtime else None
    used = tuple(sorted({d for m, d in _BUILD_IMPORTS.items() if any(i == m or i.startswith(m + ".") for i in imports)}))
    return Compiled(tuple(kinds), framework, cuda, optional, at_runtime, used)


def _loads_at_runtime(root: Path, limit: int = 400) -> bool:
    """The code builds an extension when it runs (``torch.utils.cpp_extension.load(…)``, ``load_inline``): read from
    at most ``limit`` of its Python files, names only."""
    for path in sorted(root.rglob("*.py"))[:limit]:
        if path.name == "setup.py" or any(part in (".venv", "venv", "node_modules", ".git", ".envman") for part in path.parts):
            continue
        try:
            text = read_regular(path, MAX_SPEC).decode("utf-8", errors="replace")
        except OSError:
            continue
        if "cpp_extension" in text and re.search(r"\bload(_inline)?\s*\(", text):
            return True
    return False


def describe(c: Compiled) -> str:
    """One line for init's notes."""
    what = " and ".join(c.kinds) if c.kinds else "no extension at install time"
    parts = [f"the project compiles {what}"]
    if c.kinds:
        parts.append("it is built into a wheel in the builder stage (compilers there"
                     + (", nvcc for its CUDA code" if c.cuda else "") + "; only the wheel reaches the image)")
    if c.optional:
        parts.append("its setup.py lets an extension's build fail: check the builder's log for a skipped one")
    if c.at_runtime:
        parts.append("its code also compiles extensions when it runs (torch.utils.cpp_extension.load), which needs "
                     "a compiler and nvcc in the image: set cuda_devel: true in envman.yaml for an nvidia/cuda devel base")
    return "; ".join(parts)
