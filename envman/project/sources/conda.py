"""Conda environment files. Conda's own names for the framework and its CUDA runtime are mapped to the
matrix's terms: ``pytorch=2.1`` → ``torch==2.1.*``, ``pytorch-cuda=11.8`` / ``cudatoolkit=11.3`` → variant
cu118 / cu113, ``cpuonly`` → CPU, ``python=3.8`` → Python 3.8. The ``pip:`` section is read as a
requirements file, ``-r`` and ``-e`` lines included. Other conda packages have no PyPI equivalent envman
can vouch for: they are dropped, each one said."""

from __future__ import annotations

import re
from pathlib import Path

from envman.errors import UsageError
from envman.project.sources import Fate, Found
from envman.project.sources.pyproject import add_python, add_requirement

# conda name → PyPI name, for the packages whose framework pin matters (conda-forge/pytorch channel names)
RENAMES = {"pytorch": "torch", "pytorch-gpu": "torch", "pytorch-cpu": "torch", "tensorflow": "tensorflow",
           "tensorflow-gpu": "tensorflow", "tensorflow-cpu": "tensorflow-cpu", "torchvision": "torchvision",
           "torchaudio": "torchaudio"}
_SPEC = re.compile(r"^([A-Za-z0-9_.\-]+)(?:::)?\s*(.*)$")


def conda_spec(spec: str) -> str:
    """Conda's match spec → PEP 440: ``=2.1`` → ``==2.1.*``, ``==2.1.0`` stays, ``2.1.0=py3_0`` (build) drops the build."""
    spec = re.sub(r"([<>=!]=?)\s+", r"\1", spec.strip()).split(" ")[0]  # ">= 1.13" is one constraint
    if not spec:
        return ""
    if re.fullmatch(r"[<>!=]=?.*", spec) and not re.fullmatch(r"=[^=].*", spec):
        return spec
    ver = spec.lstrip("=").split("=")[0]
    if ver.endswith(".*"):
        return f"=={ver}"
    return f"=={ver}.*" if spec.startswith("=") and not spec.startswith("==") else f"=={ver}"


def conda_document(project: Path, rel: str) -> dict:
    """environment.yml as a mapping whose dependencies are a list; anything else is one error line."""
    from envman.inputs import MAX_SPEC, load_yaml, read_input

    hint = "fix the file, or name it off under skip: in envman.yaml"
    doc = load_yaml(read_input(project / rel, rel, MAX_SPEC, hint=hint), rel, hint=hint) or {}
    if not isinstance(doc, dict):
        raise UsageError(f"{rel}: expected a mapping (name, channels, dependencies), got {type(doc).__name__}", hint=hint)
    deps = doc.get("dependencies")
    if deps is not None and not isinstance(deps, list):
        raise UsageError(f"{rel}: dependencies: expected a list, got {type(deps).__name__}", hint=hint)
    return doc


def read_conda(project: Path, rel: str) -> Found:
    from envman.project.sources.requirements_txt import _read_line

    found = Found(rel)
    doc = conda_document(project, rel)
    for i, dep in enumerate(doc.get("dependencies") or []):
        where = f"{rel} dependencies[{i}]"
        if isinstance(dep, dict) and isinstance(dep.get("pip"), list):
            seen: set[Path] = set()
            for j, line in enumerate(dep["pip"]):
                if isinstance(line, str):
                    _read_line(project, rel, line.strip(), f"{rel} dependencies[{i}].pip[{j}]", found, False, seen)
            continue
        if not isinstance(dep, str):
            found.fates.append(Fate(where, str(dep), "dropped", "not a conda package spec"))
            continue
        m = _SPEC.match(dep.split("::")[-1].strip())
        name, spec = (m.group(1).lower(), m.group(2).strip()) if m else (dep, "")
        if "=" in name:
            name, _, rest = name.partition("=")
            spec = "=" + rest + spec
        ver = spec.lstrip("=").split("=")[0].strip()
        if name == "python":
            py = conda_spec(spec) if spec else ""
            if py:
                add_python(found, py, where)
            found.fates.append(Fate(where, dep, "rewrote", f"Python {py or 'any'}"))
        elif name in ("pytorch-cuda", "cudatoolkit", "cuda-toolkit", "cuda-version") and ver:
            variant = "cu" + "".join(ver.split(".")[:2])
            found.variants.append((where, variant))
            found.fates.append(Fate(where, dep, "rewrote", f"the framework's CUDA variant {variant}"))
        elif name == "cpuonly":
            found.variants.append((where, "cpu"))
            found.fates.append(Fate(where, dep, "rewrote", "a CPU stack"))
        elif name in RENAMES:
            text = f"{RENAMES[name]}{conda_spec(spec)}"
            add_requirement(found, text, where)
            found.fates[-1] = Fate(where, dep, "rewrote", f"→ {text!r}")
        elif name == "pip":
            found.fates.append(Fate(where, dep, "dropped", "the image has pip"))
        else:
            found.fates.append(Fate(where, dep, "dropped", "a conda package; add its PyPI name under packages: "
                                                         "or its Debian name under system_packages: if needed"))
    return found
