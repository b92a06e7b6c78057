"""Rules from the round on repositories nobody here had seen (issue 38, docs/repos.md "unseen repositories"), each
on a few lines written here that reproduce the pattern; the comment names the repository and commit that showed it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_repo_rules import _init, _tree  # tests/unit is on the path

from envman.app.init import InitOptions, init_project
from envman.errors import ResolutionError, UsageError
from envman.project.discover import requirement_candidates
from envman.project.reqfiles import key_of


# seen in google-deepmind/dqn_zoo@45061f4: its only dependency file is docker_requirements.txt (the pip freeze its
# Dockerfile installs); envman said "no dependency file found" and its hint led to an image without any of it
def test_a_requirements_file_named_with_a_prefix_is_read(tmp_path):
    root = _tree(tmp_path / "zoo", {"docker_requirements.txt": "torch==2.5.1\nrlax==0.1.6\n", "run.py": "import torch\n"})
    out, spec = _init(root)
    assert spec["requirements"] == ["docker_requirements.txt"]
    assert str(out.resolution.version) == "2.5.1"


def test_a_prefixed_dev_file_beside_the_core_is_skipped_said(tmp_path):
    root = _tree(tmp_path / "p", {"requirements.txt": "torch\n", "dev-requirements.txt": "pytest\n",
                                  "floyd_requirements.txt": "tensorboard\n"})
    out, spec = _init(root)
    assert spec["requirements"] == ["requirements.txt"]
    assert "skipped dev-requirements.txt: a dev/test/docs/hardware variant; name it under requirements: in envman.yaml to use it" in out.notes
    assert ("skipped floyd_requirements.txt: an optional feature set beside the core (requirements.txt); name it under "
            "requirements: in envman.yaml to use it") in out.notes


@given(role=st.sampled_from(["docker", "dev", "test", "gpu", "floyd", "install", "cu121", "torch-cuda"]),
       sep=st.sampled_from(["-", "_", "."]), word=st.sampled_from(["requirements", "requirement", "requirments"]))
def test_a_role_before_the_word_means_what_it_means_after_it(role, sep, word):
    assert key_of(f"{role}{sep}{word}.txt") == key_of(f"requirements{sep}{role}.txt") == role
    assert key_of(f"{word}.txt") == ""


# seen in google-research/big_vision@0127fb6: nothing at the top, big_vision/requirements.txt beside the package's
# __init__.py (its README: `pip install -r big_vision/requirements.txt` from the top); envman called it a collection
# and its hint made the package folder the image's root, where `import big_vision` fails
def test_the_requirements_of_the_repositorys_own_package_are_the_repositorys(tmp_path):
    root = _tree(tmp_path / "bv", {"bv/__init__.py": "", "bv/train.py": "import torch\nfrom bv import models\n",
                                   "bv/requirements.txt": "torch>=2.4\neinops\n"})
    out, spec = _init(root)
    assert spec["requirements"] == ["bv/requirements.txt"] and out.resolution.framework == "torch"
    assert "found dependencies in: bv/requirements.txt" in out.notes


def test_a_sub_folder_that_is_no_package_is_still_a_collection(tmp_path):
    root = _tree(tmp_path / "mono", {"sub/requirements.txt": "torch\n"})
    assert requirement_candidates(root) == []
    with pytest.raises(UsageError) as ei:
        _init(root)
    assert ei.value.message == "mono: no dependency file at the top; it is a collection of 1 projects: sub"


def test_a_package_folders_file_is_not_read_beside_a_top_level_one(tmp_path):
    root = _tree(tmp_path / "r", {"setup.py": "from setuptools import setup\nsetup(name='r', install_requires=['torch'])\n",
                                  "r/__init__.py": "", "r/requirements.txt": "tensorflow\n"})
    assert requirement_candidates(root) == []


# class 7 — seen in jaywalnut310/vits@2e561ba (torch==1.6.0), CompVis/latent-diffusion@a506df5 (pytorch=1.7.0) and
# pdebench/PDEBench@9754b4c (torch~=1.13.0) on an H100: the hint "torch>=2.0 (2.0.0 cu118)", typed as
# --framework 'torch>=2.0', gave torch 2.14.1, not the 2.0 it named
def test_a_refusals_nearest_release_is_named_as_the_option_that_takes_it(tmp_path):
    root = _tree(tmp_path / "old", {"requirements.txt": "torch==1.13.1\nnumpy<2\n"})
    with pytest.raises(ResolutionError) as ei:
        _init(root)
    assert ei.value.hint == "nearest working alternative: torch>=2.0 (2.0.0 cu118): pass --framework 'torch==2.0.*'"
    out, _ = _init(root, framework="torch==2.0.*")  # the hint, followed as typed
    assert str(out.resolution.version).startswith("2.0.")


# seen in unslothai/unsloth@015bdef: the core names no framework, 172 extras do, and every extra's line for another
# Python was said on a line of its own (44 lines about extras that are not installed)
def test_lines_for_other_pythons_in_extras_not_installed_are_counted_not_listed(tmp_path):
    extras = "\n".join(f'x{i} = ["torch @ https://example.org/torch-2.6.0-cp3{i}-linux.whl ; python_version == \'3.{i}\'"]'
                       for i in (9, 10, 11))
    root = _tree(tmp_path / "u", {"pyproject.toml": f'[project]\nname = "u"\nversion = "1"\ndependencies = ["rich"]\n'
                                                    f'[project.optional-dependencies]\nhf = ["torch"]\n{extras}\n'})
    out, _ = _init(root)
    assert "framework torch inferred from optional extras only (3 of their lines are for another Python: not applied)" in out.notes
    assert not any(n.endswith("the image's: not applied") for n in out.notes)


# class 7 — seen in experiencor/keras-yolo3@768c524 (after its hint --framework 'tensorflow==2.10.*': uv refused
# tensorflow-estimator==1.15.1) and google-deepmind/dqn_zoo@45061f4 (after 'jax==0.4.*': scipy==1.8.1): uv names
# the pin, not the file that holds it
_UV_SAYS = ("  x No solution found when resolving dependencies:\n  `-> Because tensorflow==2.10.1 depends on "
            "tensorflow-estimator>=2.10.0,<2.11 and you require tensorflow==2.10.1, we can conclude that you require "
            "tensorflow-estimator>=2.10.0,<2.11.\n      And because you require tensorflow-estimator==1.15.1, we can "
            "conclude that your requirements are unsatisfiable.\n")


def test_a_pin_uv_refuses_is_named_with_the_line_that_holds_it(tmp_path, monkeypatch):
    import sys

    from envman.errors import ToolError

    exe = tmp_path / "fake-uv"
    exe.write_text(f"#!{sys.executable}\nimport sys\nsys.stderr.write({_UV_SAYS!r})\nsys.exit(1)\n")
    exe.chmod(0o755)
    monkeypatch.setattr("envman.lock.uv.uv_binary", lambda: str(exe))
    monkeypatch.setattr("envman.lock.uvproc.uv_binary", lambda: str(exe))
    monkeypatch.setenv("ENVMAN_CACHE_DIR", str(tmp_path / "cache"))
    # (init itself now refuses keras/estimator pins beside tensorflow 2.10, matrices/lockstep.yaml: here a release
    # whose metadata init does not hold, so that uv is the one to refuse it)
    root = _tree(tmp_path / "k", {"requirements.txt": "tensorflow==2.21.0\nKeras>=3\ntensorflow-estimator==1.15.1\n"})
    with pytest.raises(ToolError) as ei:
        init_project(root, InitOptions(targets=("h100",)))
    assert ei.value.hint.split("\n")[:2] == [
        "pinned in requirements.txt:3: tensorflow-estimator==1.15.1: relax or drop it", "uv says:"]


# seen in chaidiscovery/chai-lab@(corpus) and AI-Hypercomputer/maxdiffusion (corpus): hatch-requirements-txt reads
# the dependencies from the files its hook names; envman read none of them
def test_the_files_hatch_requirements_txt_names_are_the_core(tmp_path):
    root = _tree(tmp_path / "h", {"pyproject.toml": '[project]\nname = "h"\nversion = "1"\ndynamic = ["dependencies"]\n'
                                                    '[build-system]\nrequires = ["hatchling", "hatch-requirements-txt"]\n'
                                                    'build-backend = "hatchling.build"\n'
                                                    '[tool.hatch.metadata.hooks.requirements_txt]\nfiles = ["deps.in"]\n',
                                  "deps.in": "torch==2.5.1\neinops\n"})
    out, spec = _init(root)
    assert str(out.resolution.version) == "2.5.1" and spec["requirements"] == ["deps.in"]
    assert "found dependencies in: deps.in named by pyproject.toml as its dependencies" in out.notes


# seen in AI-Hypercomputer/maxtext@e591f30: `dependencies = []`, the install is `pip install -e .[cuda12]` (its extras
# read by hatch-requirements-txt: tpu, cuda12, runner, docs); envman took jax from the code and nothing else
_EMPTY_CORE = ('[project]\nname = "m"\nversion = "1"\ndependencies = []\ndynamic = ["optional-dependencies"]\n'
               '[tool.hatch.metadata.hooks.requirements_txt.optional-dependencies]\n'
               'tpu = ["reqs/tpu.txt"]\ncuda12 = ["reqs/cuda12.txt"]\n')


def test_an_empty_core_installs_with_the_extra_named_for_a_cuda_gpu(tmp_path):
    root = _tree(tmp_path / "m", {"pyproject.toml": _EMPTY_CORE, "reqs/tpu.txt": "jax[tpu]\n",
                                  "reqs/cuda12.txt": "jax>=0.4.30\nflax\ntensorflow\n"})
    out, spec = _init(root)
    assert (out.resolution.framework, out.resolution.variant, spec["cuda"]) == ("jax", "cuda12", "12")
    assert spec["requirements"] == ["reqs/cuda12.txt"]
    assert ("pyproject.toml: the core is empty; the cuda12 extra is its install for a CUDA GPU (pip install .[cuda12]): "
            "read as the core") in out.notes


def test_a_core_of_its_own_keeps_its_gpu_extra_optional(tmp_path):
    root = _tree(tmp_path / "c", {"pyproject.toml": '[project]\nname = "c"\nversion = "1"\ndependencies = ["torch"]\n'
                                                    '[project.optional-dependencies]\ngpu = ["cupy-cuda12x"]\n'})
    out, spec = _init(root)
    assert "packages" not in spec or "cupy-cuda12x" not in spec["packages"]
    assert "pyproject.toml project.optional-dependencies.gpu: not installed, 1 line (cupy-cuda12x): an optional extra or " \
           "group; name it under packages: in envman.yaml to install it" in out.notes


@given(name=st.from_regex(r"[A-Za-z][A-Za-z0-9]{0,8}([-_.][A-Za-z0-9]{1,6}){0,2}", fullmatch=True),
       version=st.from_regex(r"[0-9]{1,3}(\.[0-9]{1,3}){0,3}", fullmatch=True), upper=st.booleans())
def test_the_pin_is_found_however_uv_and_the_file_spell_its_name(name, version, upper):
    from packaging.requirements import Requirement

    from envman.project.req import Req, pinned_in

    spelled = name.upper() if upper else name.replace("-", "_")
    line = Req(Requirement(f"{spelled}=={version}"), "requirements.txt:7")
    other = Req(Requirement("zzz-unrelated==1.0"), "requirements.txt:8")
    said = f"And because you require {name}=={version}, we can conclude that your requirements are unsatisfiable."
    assert pinned_in(said, [line, other]) == f"pinned in requirements.txt:7: {line.req}: relax or drop it"
    assert pinned_in("No solution found when resolving dependencies", [line]) is None


# seen in facebookresearch/audiocraft@896ec7c, OpenRLHF/OpenRLHF@3c3be62 and coqui-ai/TTS@dbf1a08: install_requires is
# a file setup.py reads when it runs; envman said "list these packages under packages:" of a file it had read
_READS = ("from pathlib import Path\nfrom setuptools import setup\nHERE = Path(__file__).parent\n"
          "setup(name='s', install_requires=[ln.strip() for ln in open(HERE / '{f}') if not ln.startswith('#')])\n")


def test_the_file_setup_py_reads_for_install_requires_is_the_core(tmp_path):
    root = _tree(tmp_path / "s", {"setup.py": _READS.format(f="deps/base.txt"), "deps/base.txt": "torch==2.5.1\nfire\n"})
    out, spec = _init(root)
    assert str(out.resolution.version) == "2.5.1" and spec["requirements"] == ["deps/base.txt"]
    assert "found dependencies in: setup.py, deps/base.txt read by setup.py" in out.notes
    assert ("setup.py install_requires: kept \"HERE / 'deps/base.txt'\" (setup.py reads deps/base.txt when it runs: "
            "read as the core)") in out.notes


def test_a_file_setup_py_reads_and_envman_read_already_is_read_once(tmp_path):
    root = _tree(tmp_path / "s", {"setup.py": _READS.format(f="requirements.txt"), "requirements.txt": "torch\n"})
    out, spec = _init(root)
    assert spec["requirements"] == ["requirements.txt"]
    assert not any("list these packages under packages:" in n for n in out.notes)
