"""Every module the project's code imports is the standard library's, the project's own, or a locked
distribution's; one that is none of these is named with the distribution that provides it (issue 38, class 9:
training scripts stopped at `import requests` / `import pkg_resources` in images that passed their smoke test).
The fixtures are a few lines written here."""

from __future__ import annotations

import keyword
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from envman.app.lock import lock_project
from envman.project.lockedimports import SHOWN, missing_imports
from tests.fakes import install_fake_uv, numpy_pylock

TRAIN = """\
import os, json
import requests
import yaml
import pkg_resources
from mypkg import model
import helpers
from . import sibling
try:
    import wandb
except ImportError:
    wandb = None
try:
    from apex import amp
except (RuntimeError, ModuleNotFoundError):
    amp = None
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    import pandas
if sys.version_info < (3, 8):
    import importlib_metadata
import google.protobuf


def main():
    import cv2
"""


def _project(root: Path) -> Path:
    (root / "mypkg").mkdir(parents=True)
    (root / "mypkg" / "__init__.py").write_text("")
    # a fallback in the handler is as optional as the import it replaces
    (root / "helpers.py").write_text("import numpy\ntry:\n    import ujson as json\nexcept ImportError:\n"
                                     "    import simplejson as json\n")
    (root / "train.py").write_text(TRAIN)
    (root / "tests").mkdir()
    (root / "tests" / "test_train.py").write_text("import pytest\n")  # the image runs no tests
    (root / "setup.py").write_text("from setuptools import setup\nsetup(name='x')\n")
    (root / "old.py").write_text("print 'python 2'\nimport nothing_here\n")  # cannot run in the image: not read
    return root


def test_each_unlocked_module_is_named_with_its_file_line_and_distribution(tmp_path):
    assert missing_imports(_project(tmp_path), {"numpy": "2.1.0"}, "requirements.txt") == [
        "warning: train.py:2 imports requests, which nothing in the lock provides: add `requests` to requirements.txt",
        "warning: train.py:3 imports yaml, which nothing in the lock provides: add `pyyaml` to requirements.txt",
        "warning: train.py:4 imports pkg_resources, which nothing in the lock provides (setuptools 82 removed it): "
        "add `setuptools<82` to requirements.txt",
        "warning: train.py:21 imports google.protobuf, which nothing in the lock provides: add `protobuf` to "
        "requirements.txt",
        "warning: train.py:25 imports cv2, which nothing in the lock provides: add `opencv-python` (or one of "
        "`opencv-python-headless`, `opencv-contrib-python`, `opencv-contrib-python-headless`) to requirements.txt",
    ]


def test_nothing_is_said_when_the_lock_provides_every_import(tmp_path):
    locked = {"numpy": "2.1.0", "requests": "2.32.3", "PyYAML": "6.0.2", "setuptools": "80.9.0", "protobuf": "5.29.0",
              "opencv-python-headless": "4.11.0.86"}
    assert missing_imports(_project(tmp_path), locked, "requirements.txt") == []


def test_pkg_resources_from_a_setuptools_that_removed_it(tmp_path):
    (tmp_path / "run.py").write_text("import pkg_resources\n")
    assert missing_imports(tmp_path, {"setuptools": "82.0.1"}, "packages: in envman.yaml") == [
        "warning: run.py:1 imports pkg_resources, which setuptools 82 removed (the lock holds setuptools 82.0.1): "
        "pin `setuptools<82` in packages: in envman.yaml"]


def test_the_lines_are_capped_in_file_and_line_order(tmp_path):
    (tmp_path / "a.py").write_text("".join(f"import missing{i:02d}\n" for i in range(SHOWN + 3)))
    out = missing_imports(tmp_path, {}, "requirements.txt")
    assert len(out) == SHOWN + 1 and out[0].startswith("warning: a.py:1 imports missing00,")
    assert out[-1] == "warning: … and 3 more modules the code imports that nothing in the lock provides"


_NAMES = st.from_regex(r"[a-z][a-z0-9]{1,5}(_[a-z0-9]{1,5}){0,2}", fullmatch=True).filter(
    lambda n: n not in sys.stdlib_module_names and not keyword.iskeyword(n) and n not in {"yaml", "attr", "git"})


@settings(max_examples=40, deadline=None)
@given(name=_NAMES)
def test_a_module_is_resolved_by_its_normalized_distribution_name(tmp_path_factory, name):
    root = tmp_path_factory.mktemp("p")
    (root / "train.py").write_text(f"import {name}.sub as x\n")
    assert missing_imports(root, {name.replace("_", "-"): "1.0"}, "requirements.txt") == []
    said = missing_imports(root, {}, "requirements.txt")
    assert said == [f"warning: train.py:1 imports {name}, which nothing in the lock provides: add "
                    f"`{name.replace('_', '-')}` to requirements.txt"]


def test_lock_warns_and_no_lock_is_silent(tmp_path, monkeypatch):
    install_fake_uv(monkeypatch, tmp_path, numpy_pylock())
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "envman.yaml").write_text("name: imports\ncpu: true\npython: '3.11'\npackages: [numpy]\n")
    (proj / "train.py").write_text("import numpy\nimport requests\n")
    from envman.app.generate import generate
    from envman.project.spec import load_spec

    assert not [n for n in generate(proj, load_spec(proj), no_lock=True).notes if "imports" in n]  # nothing to hold
    out = lock_project(proj, force=True)
    assert [n for n in out.notes if "imports" in n] == [
        "warning: train.py:2 imports requests, which nothing in the lock provides: add `requests` to packages: in "
        "envman.yaml"]


def test_a_distribution_spelled_around_its_module_and_private_modules_are_not_warned_about(tmp_path):
    (tmp_path / "run.py").write_text("import markdown_it\nimport _ext_cuda\nfrom ext import _C\n")
    assert missing_imports(tmp_path, {"markdown-it-py": "3.0.0", "ext": "1"}, "requirements.txt") == []


def test_a_base_image_of_ones_own_is_held_to_the_lock_too(tmp_path, monkeypatch):
    """The project runs in the image's own venv, which sees none of the base image's packages: a mirror of
    python:3.11-slim (the README's --base-image use) must not switch the check off."""
    install_fake_uv(monkeypatch, tmp_path, numpy_pylock())
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "envman.yaml").write_text("name: imports\ncpu: true\npython: '3.11'\npackages: [numpy]\n"
                                      "base_image: mirror.example.com/python:3.11-slim-bookworm\n")
    (proj / "train.py").write_text("import numpy\nimport requests\n")
    out = lock_project(proj, force=True)
    assert [n for n in out.notes if "imports" in n] == [
        "warning: train.py:2 imports requests, which nothing in the lock provides: add `requests` to packages: in "
        "envman.yaml"]
