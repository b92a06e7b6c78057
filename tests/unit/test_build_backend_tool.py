"""A whole tool as the build backend stays out of the training image (issue 38, still open): a project built by
`poetry.masonry.api` (requires poetry) had poetry and ~50 packages locked into the image's venv, only so that the
image could install the project offline. Our own few-line fixture of that pyproject (the pattern of Poetry
projects written before poetry-core)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from envman.app.sourcebuilds import _project_build
from envman.project.package import find_package

PYPROJECT = """\
[tool.poetry]
name = "poet"
version = "0.1.0"
description = ""
authors = ["x <x@example.com>"]

[tool.poetry.dependencies]
python = ">=3.10"
numpy = "^2.0"

[build-system]
requires = ["{requires}"]
build-backend = "{backend}"
"""
RES = SimpleNamespace(python="3.11", arch="x86_64", platform="linux-x86_64")


def _project(root: Path, requires: str, backend: str) -> Path:
    (root / "poet").mkdir(parents=True)
    (root / "poet" / "__init__.py").write_text("")
    (root / "pyproject.toml").write_text(PYPROJECT.format(requires=requires, backend=backend))
    return root


def test_poetry_as_the_backend_is_built_in_the_builder_and_never_locked_for_the_image(tmp_path):
    pkg = find_package(_project(tmp_path / "p", "poetry>=0.12", "poetry.masonry.api"))
    assert (pkg.build_requires, pkg.backend_requires) == ((), ("poetry>=0.12",))
    need, notes = _project_build(SimpleNamespace(package=pkg), SimpleNamespace(packages=[]), RES)
    assert need is not None and need.build_requires == ("poetry>=0.12",) and not need.compiler
    assert notes == ["the project's build asks for poetry>=0.12 (its build backend, a whole tool "
                     "(matrices/build_backends.yaml)), which the lock does not hold and the image installs offline: "
                     "the project is built into a wheel in the builder stage envman-wheels with them (hash-checked, "
                     "in the build lock); they never reach the image"]


def test_poetry_core_the_backend_library_is_still_locked_and_the_image_builds_the_project(tmp_path):
    pkg = find_package(_project(tmp_path / "p", "poetry-core>=1.0.0", "poetry.core.masonry.api"))
    # build_requires: what requirement_lines locks with the image's packages (app/pythonlocks.py)
    assert (pkg.build_requires, pkg.backend_requires) == (("poetry-core>=1.0.0",), ())
    locked = SimpleNamespace(packages=[SimpleNamespace(name="poetry-core", version="2.5.0")])
    assert _project_build(SimpleNamespace(package=pkg), locked, RES) == (None, [])
