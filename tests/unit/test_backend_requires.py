"""What the project's build backend asks for beyond [build-system] requires (setup_requires, hatch build-hook
dependencies), and the builder stage building the project when the lock does not hold it (issue 20: Real-ESRGAN's
setup_requires=['cython', 'numpy'] failed the image's offline install of a pure-Python project)."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from envman.project.backend_requires import unmet
from envman.project.package import find_package
from tests import corpus

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
PATTERN = FIXTURES / "patterns" / "setup-requires"
ESRGAN = "xinntao__Real-ESRGAN"
ENV = {"python_version": "3.11", "python_full_version": "3.11.0", "sys_platform": "linux"}


def test_setup_py_setup_requires_are_what_setuptools_asks_for():
    pkg = find_package(PATTERN)
    assert pkg is not None and pkg.compiled is None  # pure Python
    assert pkg.backend_requires == ("cython", "numpy>=1.20", "pytest-runner; python_version < '3'")
    assert pkg.backend_source == "its setup.py's setup_requires"
    real = find_package(corpus.repo(ESRGAN))
    assert real is not None and real.compiled is None and real.backend_requires == ("cython", "numpy")


def test_setup_cfg_setup_requires_are_read_one_per_line_or_comma_separated(tmp_path):
    (tmp_path / "setup.py").write_text("from setuptools import setup\nsetup()\n")
    (tmp_path / "setup.cfg").write_text("[options]\npackages = p\nsetup_requires =\n    cython\n    # a comment\n"
                                        "    setuptools_scm>=8\n")
    (tmp_path / "p").mkdir()
    pkg = find_package(tmp_path)
    assert pkg is not None and pkg.backend_requires == ("cython", "setuptools_scm>=8")
    assert pkg.backend_source == "its setup.cfg's setup_requires"
    (tmp_path / "setup.cfg").write_text("[options]\npackages = p\nsetup_requires = cython, wheel\n")
    assert find_package(tmp_path).backend_requires == ("cython", "wheel")


def test_hatch_target_and_hook_dependencies_are_what_hatchling_asks_for(tmp_path):
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "__init__.py").write_text("")
    (tmp_path / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n'
        '[project]\nname = "p"\nversion = "1"\n'
        '[tool.hatch.build.targets.wheel]\ndependencies = ["hatch-fancy-pypi-readme"]\n'
        '[tool.hatch.build.hooks.custom]\ndependencies = ["jinja2>=3"]\n'
        '[tool.hatch.build.targets.wheel.hooks.mypyc]\ndependencies = ["hatch-mypyc"]\n'
        '[tool.hatch.build.targets.sdist]\ndependencies = ["not-for-the-wheel"]\n')
    pkg = find_package(tmp_path)
    assert pkg is not None and pkg.backend_requires == ("hatch-fancy-pypi-readme", "jinja2>=3", "hatch-mypyc")


def test_other_backends_ask_for_nothing_more_and_a_computed_setup_requires_is_not_guessed(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[build-system]\nrequires = ["flit_core"]\nbuild-backend = "flit_core.buildapi"\n'
                                             '[project]\nname = "p"\nversion = "1"\n')
    assert find_package(tmp_path).backend_requires == ()
    (tmp_path / "pyproject.toml").unlink()
    (tmp_path / "setup.py").write_text("from setuptools import setup\nNEEDS = ['cython']\nsetup(packages=['p'], "
                                       "setup_requires=NEEDS + ['x'])\n")
    assert find_package(tmp_path).backend_requires == ()


@pytest.mark.parametrize("locked,missing", [
    ({}, ("cython", "numpy>=1.20")),
    ({"numpy": "1.26.4"}, ("cython",)),
    ({"Cython": "3.0.11", "numpy": "1.19.5"}, ("numpy>=1.20",)),  # locked, but outside the specifier
    ({"cython": "3.0.11", "numpy": "2.1.0"}, ()),
])
def test_unmet_is_what_no_locked_version_satisfies_and_a_false_marker_asks_nothing(locked, missing):
    assert unmet(find_package(PATTERN).backend_requires, locked, ENV) == missing


def _project_build(pkg, locked: dict[str, str], matrix):
    from envman.app.sourcebuilds import _project_build
    from envman.resolve.request import build_request
    from envman.resolve.resolver import resolve_stack

    res = resolve_stack(matrix, build_request(matrix, framework="torch", targets=["h100"]))
    lock = SimpleNamespace(packages=[SimpleNamespace(name=n, version=v) for n, v in locked.items()])
    return res, _project_build(SimpleNamespace(package=pkg), lock, res)


def test_a_pure_project_whose_setup_requires_the_lock_lacks_is_built_in_the_builder(matrix):
    """Real-ESRGAN: numpy is locked (a runtime dependency), Cython is not."""
    res, (need, notes) = _project_build(find_package(corpus.repo(ESRGAN)), {"numpy": "2.2.6", "setuptools": "80.9.0"}, matrix)
    assert need is not None and not need.compiler and not need.cuda and not need.framework
    assert need.build_requires == ("setuptools>=40.8.0", "wheel", "cython", "numpy")
    assert notes == ["the project's build asks for cython (its setup.py's setup_requires), which the lock does not "
                     "hold and the image installs offline: the project is built into a wheel in the builder stage "
                     "envman-wheels with them (hash-checked, in the build lock); they never reach the image"]
    # everything it asks for locked: the image's last step installs it offline, no builder for it
    assert _project_build(find_package(corpus.repo(ESRGAN)), {"numpy": "2.2.6", "cython": "3.1.2"}, matrix)[1] == (None, [])


def test_the_builder_builds_the_pure_project_without_a_compiler_and_the_image_gets_only_its_wheel(matrix, tmp_path):
    from envman.image.plan import plan_dockerfile
    from envman.image.render import render_dockerfile
    from envman.image.stages import plan_source_builds

    res, (need, _) = _project_build(find_package(corpus.repo(ESRGAN)), {"numpy": "2.2.6"}, matrix)
    sb = plan_source_builds([], {}, res.cuda, False, {}, project=need)
    assert sb is not None and sb.project and not sb.compiler and not sb.cuda and "cython" in sb.build_requires
    assert "the project is pure Python (matrices/build_needs.yaml): no compiler in the builder" in sb.notes
    from envman.lockedstack import BaseImage, LockedStack, ProjectFacts

    plan = plan_dockerfile(LockedStack(name="p", res=res, base=BaseImage(res.base_image, res.base_kind),
                                       inputs_hash="1" * 64, fw_lock="fw.txt", req_lock="req.txt", builds=sb,
                                       source_lock="src.txt", project=ProjectFacts(installed=True),
                                       tools_lock="build.txt"), "0" * 64)
    builder, image = render_dockerfile(plan).split("\n# the image\n")
    assert "build-essential" not in builder and "-r /tmp/envman/build.txt" in builder
    assert "pip wheel --no-deps --no-build-isolation --no-index --no-cache-dir --wheel-dir /wheels-project" in builder
    assert "from=envman-wheels,source=/wheels-project" in image and "/tmp/envman/project-wheel/*.whl" in image
    assert "build.txt" not in image and "cp -a /app/. " not in image  # no offline setup.py run in the image


def test_the_project_is_still_built_where_it_was_when_it_compiles_or_asks_for_nothing(tmp_path, matrix):
    shutil.copytree(PATTERN, tmp_path / "p")
    (tmp_path / "p" / "setup.py").write_text("from setuptools import setup\nsetup(name='t', packages=['tinyscm'])\n")
    assert _project_build(find_package(tmp_path / "p"), {}, matrix)[1] == (None, [])
    c = FIXTURES / "patterns" / "c-extension"
    need, notes = _project_build(find_package(c), {}, matrix)[1]
    assert need is not None and need.compiler and notes == []


def test_init_without_a_lock_says_what_the_build_asks_for(tmp_path):
    from envman.app.init import InitOptions, init_project

    d = tmp_path / "esrgan"
    corpus.copy_repo(ESRGAN, d)
    out = init_project(d, InitOptions(no_lock=True, targets=("h100",)), detect_gpus=lambda: pytest.fail("no GPU probe"))
    assert ("the project's build asks for cython, numpy (its setup.py's setup_requires): what the lock will not hold "
            "is installed in the builder stage, which then builds the project into a wheel (after `envman lock`: "
            "--no-lock plans no builder)") in out.notes


@pytest.mark.parametrize("framework,abi", [("torch==2.1.*", True), ("torch==2.2.*", True), ("torch==2.3.*", False),
                                           ("torch", False)])
def test_a_framework_built_against_numpy_1_holds_the_lock_to_numpy_1(framework, abi):
    """Real-ESRGAN at torch 2.1.2 (the version its basicsr still imports with): uv chose numpy 2.4.6, torch 2.1.2's
    METADATA names no numpy, and the image failed the doctor's numpy-abi check (built 2026-12-02)."""
    from envman.lock.pins import numpy_constraints
    from envman.matrix.load import load_matrix
    from envman.resolve.request import build_request
    from envman.resolve.resolver import resolve_stack

    m = load_matrix()  # the shipped matrix: its numpy_abi rows are the facts
    res = resolve_stack(m, build_request(m, framework=framework, targets=["h100"], python="3.11"))
    assert numpy_constraints(res, m) == (["numpy<2"] if abi else [])


def test_a_package_importing_the_tensor_functionals_torchvision_removed_names_the_framework_that_has_them():
    """Real-ESRGAN at torch 2.14.1: basicsr 1.4.2 and gfpgan fail on torchvision.transforms.functional_tensor
    (built 2026-12-02); with --framework 'torch==2.1.*' (torchvision 0.16.2) the image was tagged good."""
    from envman.portable import smoke

    err = "ModuleNotFoundError: No module named 'torchvision.transforms.functional_tensor'"
    [c] = smoke.evaluate_imports({"imports": [["basicsr", "basicsr"]]}, {"basicsr": err})
    assert c["status"] == "fail" and "pass --framework 'torch==2.1.*' to envman init" in c["detail"]
    [c] = smoke.evaluate_imports({"imports": [["x", "x"]]}, {"x": "ModuleNotFoundError: No module named 'torchvision.io'"})
    assert c["detail"] == "from distribution x"  # torchvision itself is no removed module
