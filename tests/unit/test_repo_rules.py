"""Issue 38's rules, each on a few lines written here that reproduce a pattern seen in real repositories (the
comment names where); `envman init --no-lock` runs offline on them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from envman.app.init import InitOptions, init_project
from envman.errors import ResolutionError, UsageError
from envman.project.codeimports import module_names


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def _init(root: Path, **opts):
    opts.setdefault("targets", ("h100",))
    out = init_project(root, InitOptions(no_lock=True, **opts))
    return out, yaml.safe_load((root / "envman.yaml").read_text())


# class 1 — seen in SysCV/sam-hq@fb181f8 and KwaiVGI/LivePortrait@1986663: the requirements name no framework, the
# code does `import torch` (a CUDA extension built against it)
def test_the_code_imports_decide_the_framework_when_no_file_names_one(tmp_path):
    root = _tree(tmp_path / "det", {"requirements.txt": "opencv-python\npycocotools\n",
                                    "det/model.py": "import torch\nimport torch.nn as nn\n",
                                    "det/train.py": "from torch.utils.data import DataLoader\n"})
    out, spec = _init(root)
    assert spec["framework"] == "torch" and out.resolution.framework == "torch"
    assert ("framework torch: the code imports it (2 .py files) and no dependency file names it "
            "(pass --framework to choose a release)") in out.notes
    assert not any(n.startswith("no framework (torch, tensorflow, jax) named") for n in out.notes)


# seen in deepchem/deepchem@fbe3b91 and lululxvi/deepxde@99b6620 (multi-backend libraries): no file names a framework
def test_code_importing_several_frameworks_alike_is_refused_naming_each(tmp_path):
    root = _tree(tmp_path / "mb", {"requirements.txt": "numpy\n",
                                   **{f"mb/t{i}.py": "import torch\n" for i in range(3)},
                                   **{f"mb/k{i}.py": "import tensorflow as tf\n" for i in range(2)}})
    with pytest.raises(UsageError) as ei:
        _init(root)
    assert ei.value.message == ("mb: the code imports torch (3 .py files) and tensorflow (2 .py files), and no "
                                "dependency file names a framework")
    assert ei.value.hint == "pass --framework torch or pass --framework tensorflow (the one the training code runs on)"
    assert not (root / "envman.yaml").exists()
    out, spec = _init(root, framework="tensorflow")  # the hint, followed
    assert out.resolution.framework == "tensorflow"


# seen in vwxyzjn/cleanrl@fe8d8a0 (flax imported, only jax declared) and THU-MIG/yolov10@453c6e3 (a stray tensorflow import)
def test_a_framework_module_nothing_provides_is_named_in_a_warning(tmp_path):
    root = _tree(tmp_path / "rl", {"requirements.txt": "jax[cuda12]==0.4.30\n",
                                   "rl/ppo.py": "import jax\nimport flax.linen as nn\n",
                                   "rl/export.py": "import numpy, tensorflow\n"})
    out, _ = _init(root)
    assert ("warning: the code imports flax (1 .py file), which no dependency file names and the stack does not "
            "hold: add flax under packages: in envman.yaml if that code runs in the image") in out.notes
    assert any(n.startswith("warning: the code imports tensorflow (1 .py file)") for n in out.notes)
    assert not any("imports jax" in n for n in out.notes)


def test_the_import_reader_takes_top_level_names_of_every_import_form():
    text = "import os, torch.nn as nn\nfrom jax import numpy\n  import flax  # x\nfrom .local import y\nx = 'import keras'\n"
    assert module_names(text) == {"os", "torch", "jax", "flax"}


# optional/dev files are not merged — seen in open-mmlab/mmpose@759b39c and NVlabs/SegFormer@65fa8cf (requirements.txt
# `-r requirements/tests.txt`, `-r requirements/optional.txt`) and speechbrain/speechbrain@9c826ef (`-r lint-requirements.txt`)
def test_a_core_files_include_of_a_test_or_optional_file_is_not_read(tmp_path):
    root = _tree(tmp_path / "mm", {"requirements.txt": "-r requirements/runtime.txt\n-r requirements/tests.txt\n"
                                                       "-r requirements/optional.txt\n",
                                   "requirements/runtime.txt": "torch>=2.1\n",
                                   "requirements/tests.txt": "pytest\n",
                                   "requirements/optional.txt": "onnx\n"})
    out, spec = _init(root)
    assert ("requirements.txt:2: dropped '-r requirements/tests.txt' (requirements/tests.txt is named for tests, not "
            "the core: not read (name it under requirements: in envman.yaml to use it))") in out.notes
    assert any(n.startswith("requirements.txt:3: dropped '-r requirements/optional.txt'") for n in out.notes)


def test_a_dev_file_may_include_the_test_file():
    from envman.project.sources.requirements_txt import _not_core

    assert _not_core("requirements-dev.txt", "requirements-test.txt") is None
    assert _not_core("requirements.txt", "requirements/base.txt") is None


# a pinned build with no SASS for the target and no one-step alternative — seen in gcorso/DiffDock@b4704d9 and
# isl-org/MiDaS@4545977 (torch==1.13.1+cu117 on an H100): the refusal had no hint line
def test_a_pin_no_build_serves_names_the_way_out(tmp_path):
    root = _tree(tmp_path / "old", {"requirements.txt": "torch==1.13.1+cu117\n"})
    with pytest.raises(ResolutionError) as ei:
        _init(root)
    assert ei.value.hint == ("loosen the pin 'torch==1.13.1+cu117' to 'torch' (`--framework torch`) for the newest torch "
                             "that serves 9.0 (sm_90, NVIDIA H100 SXM5 80GB)")
    out, _ = _init(root, framework="torch")
    assert out.resolution.framework == "torch"


# class 2 — the pattern of huggingface/transformers' setup.py (issue 38 saw it give a 3-package lock): a table of
# pins built by a comprehension over a literal list, looked up by name
_COMPUTED_SETUP = '''import re
from setuptools import setup
_deps = ["accelerate>=0.26.0", "filelock", "numpy>=1.17", "torch>=2.1"]
deps = {b: a for a, b in (re.findall(r"^(([^!=<>~ ]+)(?:[!=<>~ ].*)?$)", x)[0] for x in _deps)}
install_requires = [deps["filelock"], deps["numpy"]] + [deps[k] for k in ("torch", "accelerate")]
setup(name="t", install_requires=list(install_requires), python_requires=">=3.9")
'''


def test_install_requires_computed_from_the_files_own_literals_is_read(tmp_path):
    from envman.project.sources.setup_py import read_setup_py

    root = _tree(tmp_path / "t", {"setup.py": _COMPUTED_SETUP})
    found = read_setup_py(root)
    assert [str(r.req) for r in found.reqs] == ["filelock", "numpy>=1.17", "torch>=2.1", "accelerate>=0.26.0"]
    assert found.warnings == []


def test_what_only_running_setup_py_gives_is_said_not_guessed(tmp_path):
    from envman.project.sources.setup_py import read_setup_py

    root = _tree(tmp_path / "t", {"setup.py": "from setuptools import setup\n"
                                              "setup(install_requires=open('requirements.txt').read().splitlines())\n"})
    found = read_setup_py(root)
    assert found.reqs == [] and [f.describe() for f in found.fates] == [
        "setup.py install_requires: dropped \"open('requirements.txt').read()\" (computed when setup.py "
        "runs; envman never runs it — list these packages under packages: in envman.yaml)"]


# class 3 — one framework pin per Python, seen in a repository issue 38 tried: intersected under the image's Python
def test_framework_pins_behind_python_markers_are_one_per_python_not_a_contradiction(tmp_path):
    root = _tree(tmp_path / "m", {"requirements.txt": 'torch==2.6.0; python_version < "3.14"\n'
                                                      'torch>=2.8.0; python_version >= "3.14"\n'})
    out, spec = _init(root)
    assert spec["framework"] == "torch==2.6.0" and str(out.resolution.version) == "2.6.0"
    assert out.resolution.python == "3.12"
    assert ("requirements.txt:2: torch>=2.8.0; python_version >= \"3.14\" is not for Python 3.12, the image's: "
            "not applied") in out.notes


def test_the_marker_python_follows_the_python_the_user_asks_for(tmp_path):
    root = _tree(tmp_path / "m", {"requirements.txt": 'torch==2.6.0; python_version < "3.13"\n'
                                                      'torch>=2.8.0; python_version >= "3.13"\n'})
    out, spec = _init(root, python="3.13")
    assert spec["framework"] == "torch>=2.8.0"


# class 4 — conda files: a CUDA range, a Python range written with spaces, files in sub-folders only (the patterns
# of conda_env.yml / scripts/gpu_environment.yml repositories issue 38 tried)
_GPU_ENV = "name: x\ndependencies:\n  - python >=3.8, <3.10\n  - cudatoolkit>=10\n  - pytorch>=1.12\n  - pip\n"


def test_a_conda_file_in_a_sub_folder_is_found_and_its_ranges_are_kept(tmp_path):
    root = _tree(tmp_path / "c", {"scripts/gpu_environment.yml": _GPU_ENV,
                                  "scripts/cpu_environment.yml": _GPU_ENV.replace("cudatoolkit>=10", "cpuonly")})
    out, spec = _init(root)
    assert "found dependencies in: scripts/gpu_environment.yml" in out.notes
    assert spec["python"] == "<3.10,>=3.8" and out.resolution.python == "3.9"
    assert ("scripts/gpu_environment.yml dependencies[1]: dropped 'cudatoolkit>=10' (a CUDA range, not a pin: the CUDA "
            "is chosen for the targets (pass --cuda to choose one))") in out.notes
    assert "cuda" not in spec


def test_a_nested_conda_file_is_not_read_beside_a_top_level_dependency_file(tmp_path):
    root = _tree(tmp_path / "c", {"requirements.txt": "torch>=2.1\n", "envs/environment.yml": _GPU_ENV})
    out, _ = _init(root)
    assert "found dependencies in: requirements.txt" in out.notes


# class 8 — variant preference: PyPI's default build when it fits the GPUs, before a newer CUDA from the PyTorch
# index (issue 38: cu129 and cu124 had been chosen over PyPI's cu128 and cu121); a file named for a CUDA decides
def test_pypis_default_build_is_preferred_when_it_fits(tmp_path):
    root = _tree(tmp_path / "v", {"requirements.txt": "torch==2.0.1\n"})
    out, _ = _init(root, targets=("4090",), driver="525.60.13")
    assert out.resolution.variant == "cu117" and out.resolution.index_url is None


def test_a_requirements_file_named_for_a_cuda_decides_the_variant(tmp_path):
    root = _tree(tmp_path / "v", {"requirements_cu118.txt": "torch==2.0.1\n"})
    out, spec = _init(root, targets=("4090",), driver="525.60.13")
    assert out.resolution.variant == "cu118" and "CUDA variant cu118 from requirements_cu118.txt (its name)" in out.notes


# class 5 — extras that choose the framework: seen in AI-Hypercomputer/maxdiffusion@7cfb880 (a JAX codebase whose
# dev extra names jax and torch): the code's imports decide; without them, a refusal names the option for each
_EXTRAS = ('[project]\nname = "x"\nversion = "0"\ndependencies = ["numpy"]\n'
           '[project.optional-dependencies]\ntorch = ["torch>=2.1"]\nflax = ["flax", "jax>=0.4.30"]\n')


def test_extras_naming_two_frameworks_are_decided_by_the_code(tmp_path):
    root = _tree(tmp_path / "e", {"pyproject.toml": _EXTRAS, "x/model.py": "import jax\nimport flax\n"})
    out, spec = _init(root)
    assert out.resolution.framework == "jax"
    assert any(n.startswith("pyproject.toml project.optional-dependencies.torch[0]: torch>=2.1: the stack is jax's "
                            "(the framework the code imports)") for n in out.notes)


def test_extras_naming_two_frameworks_without_code_are_refused_naming_each_option(tmp_path):
    root = _tree(tmp_path / "e", {"pyproject.toml": _EXTRAS})
    with pytest.raises(UsageError) as ei:
        _init(root)
    assert "the repository names two frameworks" in ei.value.message
    assert ei.value.hint.startswith("pass --framework jax or --framework torch")


# two frameworks named directly, one for a side job (openvla/openvla@c8f03f4 reads RLDS data with tensorflow beside torch)
def test_two_frameworks_named_directly_the_code_decides(tmp_path):
    root = _tree(tmp_path / "o", {"requirements.txt": "torch==2.2.0\ntensorflow==2.15.0\n",
                                  **{f"o/m{i}.py": "import torch\n" for i in range(4)}, "o/data.py": "import tensorflow\n"})
    out, _ = _init(root)
    assert out.resolution.framework == "torch"
    assert ("requirements.txt:2: tensorflow==2.15.0: the stack is torch's (the framework the code imports); this line "
            "is installed from PyPI as written, without envman's CUDA pins") in out.notes


def test_a_setup_cfg_requirement_with_a_trailing_comment_is_read(tmp_path):
    from envman.project.sources.setup_py import read_setup_cfg

    root = _tree(tmp_path / "c", {"setup.cfg": "[options]\ninstall_requires =\n    numpy\n    scipy  # remove when x\n"
                                               "    # a whole-line comment\n"})
    assert [str(r.req) for r in read_setup_cfg(root).reqs] == ["numpy", "scipy"]


# class 7 — a hint is followed as typed from where the user stands (yuqinie98/PatchTST@204c21e printed its own folder's
# name to a user standing in it)
@pytest.mark.parametrize("stand,typed", [("inside", "sub"), ("parent", "mono/sub")])
def test_a_collection_hint_names_the_folder_as_typed_from_where_the_user_stands(tmp_path, monkeypatch, stand, typed):
    root = _tree(tmp_path / "mono", {"sub/requirements.txt": "torch\n"})
    monkeypatch.chdir(root if stand == "inside" else tmp_path)
    with pytest.raises(UsageError) as ei:
        _init(root)
    assert ei.value.hint == f"run `envman init {typed}` for one of them"


def test_no_dependency_file_but_code_the_hint_names_the_framework_it_imports(tmp_path):
    root = _tree(tmp_path / "bare", {"main.py": "import torch\n", "models/vit.py": "import torch.nn as nn\n"})
    with pytest.raises(UsageError) as ei:
        _init(root)
    assert ei.value.hint == "its code imports torch: pass --framework torch, or write envman.yaml with packages:"


# issue 37.5 — a dependency-file format is one module and one registry line; pixi.toml is the worked example
# (the pattern of matthewfeickert/pytorch-gpu-pixi-example@c53e084 and kornia/kornia's pixi.toml)
_PIXI = ('[workspace]\nname = "p"\nchannels = ["conda-forge"]\nplatforms = ["linux-64"]\n'
         '[system-requirements]\ncuda = "12"\n[dependencies]\npython = "3.11.*"\npytorch = ">=2.4,<3"\n'
         '[pypi-dependencies]\neinops = ">=0.7"\n[feature.docs.dependencies]\nsphinx = "*"\n')


def test_pixi_toml_is_read(tmp_path):
    root = _tree(tmp_path / "p", {"pixi.toml": _PIXI})
    out, spec = _init(root)
    assert "found dependencies in: pixi.toml" in out.notes
    assert spec["framework"] == "torch<3,>=2.4" and spec["packages"] == ["einops>=0.7"] and spec["python"] == "3.11"
    assert ("pixi.toml feature.docs: dropped '1 packages' (a pixi feature (an optional environment): not installed; "
            "name its packages under packages: in envman.yaml to install them)") in out.notes


def test_a_new_format_is_one_reader_and_one_registry_line(tmp_path, monkeypatch):
    from envman.project import discover
    from envman.project.sources import Found
    from envman.project.sources.pyproject import add_requirement
    from envman.project.sources.registry import READERS, FileReader

    def read_deps(root: Path, wanted) -> Found | None:
        if not (root / "deps.lst").is_file():
            return None
        found = Found("deps.lst")
        for i, line in enumerate((root / "deps.lst").read_text().split()):
            add_requirement(found, line, f"deps.lst[{i}]")
        return found

    monkeypatch.setattr(discover, "READERS", (*READERS, FileReader("deps.lst", read_deps)))
    root = _tree(tmp_path / "d", {"deps.lst": "torch>=2.3 einops\n"})
    out, spec = _init(root)
    assert "found dependencies in: deps.lst" in out.notes and spec["framework"] == "torch>=2.3"


# class 6 — age-blind choices, from the dates the versions named came out (matrices/release_dates.yaml, PyPI's upload
# times). coqui-ai/TTS@dbf1a08's pattern: `torch>=2.1` beside 2023 pins got torch 2.14 (2.6 breaks its checkpoints);
# the release of the pins' time is proposed. (TTS's own file pins, under Python 3.11, only distributions the table
# does not hold — mutagen==1.47.0, gruut==2.2.3 —, so TTS itself is not warned: docs/repos.md)
def test_a_range_beside_pins_years_older_than_its_newest_release_names_the_release_of_their_time(tmp_path):
    root = _tree(tmp_path / "tts", {"requirements.txt": "numpy>=1.24.3\ntorch>=2.1\nnumba==0.58.1\nmutagen==1.47.0\n"})
    out, _ = _init(root)
    assert ("warning: the newest release these files name is requirements.txt:2: torch>=2.1 (2023-10); the torch "
            "releases up to 2.14.1 (2026-09) that the range admits came 3 years later: the code predates them. Pass "
            "--framework 'torch==2.4.*' for the release of its time (2024-07), or pin the one it was tested with") in out.notes


# issue 38's TF1-era codebase (google-research/bert@eedf571 floors `tensorflow >= 1.11` alone): nothing envman knows
# is of its time, the oldest is named
def test_an_older_majors_floor_beside_an_old_pin_names_the_oldest_release_envman_knows(tmp_path):
    root = _tree(tmp_path / "tf1", {"requirements.txt": "tensorflow>=1.15\ntensorflow-probability==0.7.0\n"})
    out, _ = _init(root)
    said = [n for n in out.notes if "the code predates them" in n]
    assert said == ["warning: the newest release these files name is requirements.txt:1: tensorflow>=1.15 (2019-10); "
                    "the tensorflow releases up to 2.21.0 (2026-03) that the range admits came 6 years later: the code "
                    "predates them. Pass --framework 'tensorflow==2.10.*' for the oldest envman knows (2022-09), or pin "
                    "the one it was tested with"]


# google-research/bert@eedf571: `tensorflow >= 1.11.0` alone, TF1 code; TF 2.0 broke its API (release_dates.yaml
# api_breaks), torch 2.0 did not (the floors of Megvii-BaseDetection/YOLOX@6ddff48, `torch>=1.7`, say nothing)
def test_a_lone_floor_below_an_api_break_says_the_code_predates_it(tmp_path):
    out, _ = _init(_tree(tmp_path / "bert", {"requirements.txt": "tensorflow >= 1.11.0\n"}))
    assert [n for n in out.notes if "the code predates" in n] == [
        "warning: the newest release these files name is requirements.txt:1: tensorflow>=1.11.0 (2018-09); the "
        "tensorflow releases up to 2.21.0 (2026-03) that the range admits came 7 years later: the code predates them. "
        "Pass --framework 'tensorflow==2.10.*' for the oldest envman knows (2022-09), or pin the one it was tested with"]


# ultralytics/yolov5@5081342 (committed 2026-08): an old floor `torch>=1.8.0` beside floors of this year's releases;
# lucidrains/DALLE-pytorch@58c1e1a: `torch>=1.6` beside a newer floor (`einops>=0.3.2`) and no pin; a floor alone
# (detectron2-style `pillow>=7.1`, no pin) is no date; chaidiscovery/chai-lab@66c38d1 pins `einops~=0.8`, a series
# still current (a pin is old once a newer series is out): none is warned about
@pytest.mark.parametrize("text", ["numpy>=1.23.5\ntorch>=1.8.0\nultralytics>=8.4.118\n",
                                  "pillow>=8.0\ntorch>=1.6\ntorchvision\n", "torch>=1.7\nopencv-python\n",
                                  "torch>=2.1\neinops~=0.8\nnumpy==1.24.0\n",
                                  "pillow>=7.1\ntorch\n", "torch>=2.1\n", "torch>=2.1\nnumpy==2.3.0\n"])
def test_new_pins_or_old_floors_alone_say_nothing_of_age(tmp_path, text):
    out, _ = _init(_tree(tmp_path / "y", {"requirements.txt": text}))
    assert not any("the code predates" in n for n in out.notes)


# experiencor/keras-yolo3@768c524: `--framework` moved a TF 1 project to TF 2 and the lock refused its 1.x
# tensorboard / tensorflow-estimator / keras pins one at a time: each TF release requires its own series of them
# (matrices/lockstep.yaml), so every stale line is named at init, at once
def test_pins_the_chosen_tensorflow_rules_out_are_named_together(tmp_path):
    root = _tree(tmp_path / "ky", {"requirements.txt": "tensorflow==1.15.0\nkeras==2.3.1\ntensorboard==1.15.0\n"
                                                        "tensorflow-estimator==1.15.1\nnumpy==1.18.1\n"})
    with pytest.raises(UsageError) as e:
        _init(root, framework="tensorflow==2.10.*")
    assert e.value.message == ("requirements.txt:2: keras==2.3.1; requirements.txt:3: tensorboard==1.15.0; "
                               "requirements.txt:4: tensorflow-estimator==1.15.1: tensorflow==2.10.* requires other "
                               "releases of these (each tensorflow release pins its own series)")
    assert e.value.hint == ("drop these lines and let tensorflow bring the matching ones, or choose a tensorflow of "
                            "their series with --framework")
    assert sorted(p.name for p in root.iterdir()) == ["requirements.txt"]


@pytest.mark.parametrize("text", ["tensorflow>=2.10\ntensorboard==2.12.0\nkeras==2.12.0\n",
                                  "tensorflow==2.21.0\ntensorboard==1.15.0\ntensorflow-estimator==1.15.1\n",
                                  "tensorflow>=2.16\nkeras>=3.5\n"])
def test_pins_some_admitted_tensorflow_takes_are_kept(tmp_path, text):
    _, spec = _init(_tree(tmp_path / "tf2", {"requirements.txt": text}))
    assert spec["framework"].startswith("tensorflow")


# young-geng/EasyLM@fe5b2c3: scripts/gpu_environment.yml pins `pytorch-cuda=12.1` (torch's CUDA build) beside
# `jax[cuda12]==0.4.28`, and the code imports jax: cu121 is no JAX build, so it is the CUDA the jax stack runs on, not
# a local label (`jax==0.4.28+cu121` was refused, its hint "allow CUDA 12.1" naming no option); its torch lines, said
# to be "installed from PyPI as written", were dropped from envman.yaml (the lock then missed the code's torch)
def test_another_frameworks_cuda_pin_is_the_cuda_not_the_build_label(tmp_path):
    root = _tree(tmp_path / "lm", {"envs/gpu_environment.yml": "dependencies:\n  - python=3.10\n  - pytorch=2.3.0\n"
                                   "  - pytorch-cuda=12.1\n  - pip:\n    - jax[cuda12]==0.4.30\n    - torch==2.3.0\n",
                                   "lm/train.py": "import jax\n", "lm/model.py": "import flax\nimport jax\n"})
    out, spec = _init(root)
    assert spec["framework"] == "jax==0.4.30" and spec["cuda"] == "12.1"
    assert [p for p in spec["packages"] if p.startswith("torch")] == ["torch==2.3.0.*", "torch==2.3.0"]  # as said
    assert (out.resolution.framework, str(out.resolution.version), out.resolution.variant) == ("jax", "0.4.30", "cuda12")


def test_a_refusal_that_a_cuda_would_lift_names_the_option(tmp_path):
    root = _tree(tmp_path / "v", {"requirements.txt": "torch==2.14.1+cu130\n"})
    with pytest.raises(ResolutionError) as e:
        _init(root, targets=("v100",))
    assert e.value.hint == "nearest working alternative: allow CUDA 12.6 (torch 2.14.1 cu126): pass --cuda 12.6"


# a project's own name in its requirements (seen on earlier rounds' repositories, issue 38 "also"): not locked from PyPI
def test_the_projects_own_name_in_its_requirements_is_not_locked(tmp_path):
    from envman.app.lockinputs import ProjectInputs
    from envman.matrix.load import load_matrix
    from envman.project.spec import load_spec

    root = _tree(tmp_path / "own", {"requirements.txt": "torch>=2.1\nMy_Proj\nmy-proj[train]\n",
                                    "pyproject.toml": '[project]\nname = "my-proj"\nversion = "0.1"\n',
                                    "my_proj/__init__.py": ""})
    _init(root)
    inputs = ProjectInputs.read(root, load_spec(root), load_matrix())
    assert [r.name for r in inputs.reqs] == ["torch", "my-proj"]  # the extras line names more than the project
    assert ("requirements.txt:2: My_Proj is this project (my-proj, its own name): not locked from PyPI; the image has "
            "its source") in inputs.warnings


# class 9, the other way round: the smoke test failed a good image over `mlx; sys_platform == 'darwin'` (seen in a
# repository issue 38 built): a requirement whose marker is false in the image is not one of the image's
def test_a_requirement_false_in_the_image_is_not_imported_by_the_smoke_test(tmp_path):
    import json

    root = _tree(tmp_path / "mx", {"requirements.txt": "torch>=2.1\nnumpy\nmlx; sys_platform == 'darwin'\n"
                                                       "pywin32; platform_system == 'Windows'\n"})
    _init(root)
    names = [d for d, _ in json.loads((root / ".envman" / "stack.json").read_text())["imports"]]
    assert "numpy" in names and "mlx" not in names and "pywin32" not in names
