"""Checks on the interpreters that Jupyter kernels start (facts ``jupyter_kernels``, docs/facts.md)."""

from __future__ import annotations

import re

from .findings import Finding, warn
from .knowledge import Knowledge
from .view import FactsView, as_dict, as_list, as_str

# argv[0] of a kernel that is itself a Python (python, python3, python3.12, python.exe, pythonw); wrappers
# (conda run, env, a shell script) start an interpreter envman cannot name, so they are not judged.
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?w?(\.exe)?\Z", re.I)


def check_jupyter_kernels(v: FactsView, k: Knowledge) -> list[Finding]:
    """A notebook kernel of another environment than the one holding the CUDA framework."""
    stack = [(fw.name, fw.label) for fw in v.frameworks if fw.gpu is True]  # the CUDA builds examined
    py = as_dict(v.f.get("python"))
    exe, prefix = as_str(py.get("executable")), as_str(py.get("prefix"))
    if not stack or not exe or not prefix:
        return []
    out = []
    for raw in as_list(v.f.get("jupyter_kernels")):
        kern = as_dict(raw)
        name, argv0 = as_str(kern.get("name")), as_str(kern.get("argv0"))
        lang = (as_str(kern.get("language")) or "python").lower()
        if not name or not argv0 or lang != "python" or not _PYTHON.match(re.split(r"[\\/]", argv0)[-1]):
            continue
        kprefix = as_str(kern.get("prefix"))
        interp = as_str(kern.get("interpreter"))
        if kprefix == prefix or interp == exe:
            continue
        fws = as_dict(kern.get("frameworks"))
        missing = [(fw, label) for fw, label in stack if not (ver := as_str(fws.get(fw))) or ver.endswith("+cpu")]
        if not missing:
            continue  # its own environment has the framework too: a choice, not a mistake
        fw, label = missing[0]
        where = f"'{argv0}', which is not found" if interp is None else interp + (
            f" (environment {kprefix})" if kprefix else "")
        there = as_str(fws.get(fw))
        got = (f"{fw} {there} there instead" if there else
               f"no {fw} there: `import {fw}` fails with ModuleNotFoundError")
        display = as_str(kern.get("display_name"))
        shown = f"'{name}'" + (f" ({display})" if display and display != name else "")
        install = "" if v.pkg("ipykernel") else f"{exe} -m pip install ipykernel && "
        out.append(warn(
            "jupyter-kernel-interpreter",
            f"Jupyter kernel {shown} starts {where}, not {exe}, which has {label}: notebooks on that kernel get "
            f"{got}",
            f"{install}{exe} -m ipykernel install --user --name {name}"
            + (f" --display-name \"{display}\"" if display else ""),
        ))
    return out


CHECKS = (check_jupyter_kernels,)
