"""pixi's ``pixi.toml``: ``[dependencies]`` are conda packages (read as a conda environment file's: ``pytorch`` →
torch, ``python`` → the Python, ``cuda-version`` → the CUDA variant), ``[pypi-dependencies]`` PyPI requirements
(``name = "spec"`` or a table with ``version``/``extras``/``git``/``path``, as a Pipfile's), ``[feature.*]``
optional environments (said, not installed), ``[system-requirements] cuda`` the driver's CUDA (said). The format:
https://pixi.sh/latest/reference/pixi_manifest/. Its lock file, pixi.lock, is not read."""

from __future__ import annotations

from pathlib import Path

from envman.project.sources import Fate, Found
from envman.project.sources.conda import read_conda
from envman.project.sources.pipfile import _text, read_toml_file
from envman.project.sources.pyproject import add_requirement

FILE = "pixi.toml"


def read_pixi(root: Path, wanted: tuple[str, ...] = ()) -> Found | None:
    doc = read_toml_file(root, FILE, {"feature": dict, "system-requirements": dict})
    if doc is None:
        return None
    conda = doc.get("dependencies") if isinstance(doc.get("dependencies"), dict) else {}
    lines = [name if str(spec).strip() in ("", "*") else f"{name} {spec}" for name, spec in conda.items()
             if isinstance(spec, str)]
    found = read_conda(root, FILE, {"dependencies": lines})
    pypi = doc.get("pypi-dependencies") if isinstance(doc.get("pypi-dependencies"), dict) else {}
    for name, value in pypi.items():
        text, why = _text(name, value)
        where = f"{FILE} pypi-dependencies.{name}"
        if text is None:
            found.fates.append(Fate(where, f"{name} = {value!r}", "dropped", why))
        else:
            add_requirement(found, text, where)
    for feature, table in sorted((doc.get("feature") or {}).items()):
        if isinstance(table, dict) and (table.get("dependencies") or table.get("pypi-dependencies")):
            n = len(table.get("dependencies") or {}) + len(table.get("pypi-dependencies") or {})
            found.fates.append(Fate(f"{FILE} feature.{feature}", f"{n} packages", "dropped",
                                    "a pixi feature (an optional environment): not installed; name its packages "
                                    "under packages: in envman.yaml to install them"))
    cuda = (doc.get("system-requirements") or {}).get("cuda")
    if cuda is not None:
        found.fates.append(Fate(f"{FILE} system-requirements.cuda", str(cuda), "dropped",
                                "the CUDA the driver must support: the image's CUDA is chosen for the targets"))
    return found
