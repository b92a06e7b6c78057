"""Issue 20's patterns, each on the real repositories of the corpus (their dependency files only, read 2026-12-01,
assembled by tests/corpus.py; SOURCE in each folder of tests/fixtures/corpus/) where one shows it, and on small
files of our own under tests/fixtures/patterns/ where none of them does. Discovery and resolution run offline
(--no-lock); the tests that need uv are `network`."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from envman.app.init import InitOptions, init_project
from envman.app.lock import lock_project
from envman.cli.main import main
from envman.errors import ToolError, UsageError
from tests import corpus

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
PATTERNS = FIXTURES / "patterns"


def _copy(tmp_path: Path, name: str) -> Path:
    d = tmp_path / str(len(list(tmp_path.iterdir()))) / name  # a test may init the same repository twice
    if name in corpus.names():
        return corpus.copy_repo(name, d)
    shutil.copytree(PATTERNS / name, d)
    return d


@pytest.fixture
def init(tmp_path):
    def run(name: str, **opts):
        d = _copy(tmp_path, name)
        opts.setdefault("targets", ("h100",))
        out = init_project(d, InitOptions(no_lock=True, **opts), detect_gpus=lambda: pytest.fail("no GPU probe"))
        return d, out, yaml.safe_load((d / "envman.yaml").read_text())

    return run


def refused(tmp_path, name: str, **opts) -> UsageError:
    d = _copy(tmp_path, name)
    with pytest.raises(UsageError) as ei:
        init_project(d, InitOptions(targets=("h100",), no_lock=True, **opts))
    assert not (d / "envman.yaml").exists()
    return ei.value


# --- 1. the hint leads somewhere: --framework / --cuda / --python decide over the files --------------------------


def test_the_hinted_framework_gets_past_a_companion_pin_that_has_no_release(tmp_path, init):
    # facebookresearch/dinov2 requirements.txt: torch==2.0.0, torchvision==0.15.0 (no such torchvision release)
    e = refused(tmp_path, "facebookresearch__dinov2")
    assert e.message.startswith("requirements.txt:3: torchvision==0.15.0 has no release beside any torch")
    assert e.hint.startswith("pass --framework 'torch==2.0.0' to take the nearest release envman knows")
    d, out, spec = init("facebookresearch__dinov2", framework="torch==2.0.0")
    assert str(out.resolution.version) == "2.0.0" and spec["framework_wins"] is True
    assert "requirements.txt:3: torchvision==0.15.0 yields to the stack's torchvision 0.15.1 (framework_wins: true in " \
           "envman.yaml)" in out.notes


def test_framework_chooses_between_two_frameworks_and_the_other_is_a_package(init):
    # bmaltais/kohya_ss requirements_linux.txt: torch==2.7.0+cu128 and tensorflow==2.15.0.post1 (for TensorBoard);
    # the CUDA-marked one is the stack's, and the other is said
    d, out, spec = init("bmaltais__kohya_ss")
    assert (out.resolution.framework, str(out.resolution.version), out.resolution.variant) == ("torch", "2.7.0", "cu128")
    assert any(n.startswith("requirements_linux.txt:10: tensorflow==2.15.0.post1: the stack is torch's (a CUDA build)")
               for n in out.notes)


def test_a_cuda_extra_marks_the_gpu_framework_of_two(init):
    # torch unmarked beside jax[cuda12]: JAX's CUDA extra is a CUDA build as +cu128 is torch's
    d, out, spec = init("torch-and-jax")
    assert out.resolution.framework == "jax" and out.resolution.cuda.startswith("12")
    assert any(n.startswith("requirements.txt:2: torch>=2.4: the stack is jax's (a CUDA build)") for n in out.notes)


def test_cuda_chooses_among_per_cuda_files_and_over_the_repositorys_cuda_pins(init):
    # RVC-Project/Retrieval-based-Voice-Conversion-WebUI: requirments_cpu/cu118/cu128_py312.txt (sic)
    d, out, spec = init("RVC-Project__Retrieval-based-Voice-Conversion-WebUI")
    assert spec["requirements"] == ["requirments_cu128_py312.txt"] and spec["python"] == "3.12"
    d, out, spec = init("RVC-Project__Retrieval-based-Voice-Conversion-WebUI", cuda="11.8")
    assert spec["requirements"] == ["requirments_cu118_py312.txt"] and spec["cuda"] == "11.8"
    assert out.resolution.cuda == "11.8"


def test_python_decides_over_contradicting_repository_constraints(init):
    d, out, spec = init("two-problems", python="3.11", framework="torch")
    assert out.resolution.python == "3.11"
    assert any(n.startswith("--python 3.11 decides over the repository's Python constraints") for n in out.notes)


def test_independent_problems_are_reported_together(tmp_path):
    e = refused(tmp_path, "two-problems")
    assert e.message.endswith("the repository names two frameworks (and 1 more)")
    lines = e.hint.splitlines()
    assert lines[0] == "every problem:" and len(lines) == 3
    assert "Python >=3.12 contradicts environment.yml dependencies[0]: Python ==3.9.*" in lines[2]
    assert lines[2].endswith("→ no Python version satisfies both: fix one of them, or pass --python")


def test_init_prints_the_resolvers_blocked_by_and_alternatives(tmp_path, capsys):
    # lllyasviel/ControlNet: pytorch=1.12.1 / torchvision=0.13.1: the hint names 1.13.1, which an H100 rules out
    d = _copy(tmp_path, "lllyasviel__ControlNet")
    assert main(["init", str(d), "--no-lock", "--target", "h100"]) == 1
    err = capsys.readouterr().err
    assert "hint: pass --framework 'torch==1.13.1' to take the nearest release envman knows" in err
    assert main(["init", str(d), "--no-lock", "--target", "h100", "--framework", "torch==1.13.1"]) == 3
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("error: no torch stack satisfies 'torch==1.13.1' for 9.0 (sm_90")
    assert err[1] == "blocked by:" and err[2].startswith("  - no build of 'torch==1.13.1' carries SASS for 9.0")
    assert "nearest alternatives:" in err and any(ln.startswith("hint: ") for ln in err)
    assert not (d / "envman.yaml").exists()


# --- 2. a conda patch Python is its minor version ------------------------------------------------------------------


@pytest.mark.parametrize("spec,python", [("=3.9.18", "==3.9.*"), ("3.10.0=h12debd9_5", "==3.10.*"), ("=3.9", "==3.9.*"),
                                         ("==3.8.5", "==3.8.*"), (">=3.8", ">=3.8")])
def test_conda_python_pins_are_minor_versions(spec, python):
    from envman.project.sources.conda import conda_python

    assert conda_python(spec)[0] == python


def test_a_conda_patch_python_resolves(init):
    # yisol/IDM-VTON environment.yaml: python=3.10.0=h12debd9_5, pytorch=2.0.1 … pytorch-cuda=11.8
    d, out, spec = init("yisol__IDM-VTON")
    assert spec["python"] == "3.10" and out.resolution.python == "3.10"
    assert (str(out.resolution.version), out.resolution.variant) == ("2.0.1", "cu118")
    assert any("conda pins the patch release 3.10.0" in n for n in out.notes)


def test_a_patch_level_requires_python_admits_its_minor(init):
    from packaging.specifiers import SpecifierSet

    from envman.project.discover import Asked, Discovery, _python

    d = Discovery()
    # NVIDIA-NeMo/RL pyproject.toml: requires-python = ">=3.13.14,<3.14"
    assert _python(d, [("pyproject.toml project.requires-python", SpecifierSet(">=3.13.14,<3.14"))], Asked()) == "==3.13.*"
    assert d.warnings[0].startswith("Python <3.14,>=3.13.14 is a patch-level constraint; envman resolves minor versions")


# --- 9. the repository's resolution intent: [tool.uv] constraints/overrides, lock files -----------------------------


def test_uv_override_and_constraint_dependencies_are_kept_for_the_lock(init):
    # allenai/open-instruct [tool.uv] override-dependencies = ["transformers>=5.4.0"]; default-groups picks cuda12
    d, out, spec = init("allenai__open-instruct")
    assert spec["overrides"] == ["transformers>=5.4.0"] and spec["framework"] == "torch==2.10.0+cu128"
    d, out, spec = init("uv-resolution", cpu=True, targets=())
    assert spec["overrides"] == ["idna==2.0"] and spec["constraints"] == ["certifi<2024"]


@pytest.mark.parametrize("name,file,framework", [
    ("thu-ml__tianshou", "poetry.lock", "torch"), ("00sapo__CoordFill", "pdm.lock", "torch"),
    ("Yircas__CDEP-with-DeepLIFT", "Pipfile.lock", "torch"), ("vwxyzjn__cleanrl", "uv.lock", "torch")])
def test_every_lock_file_is_read_and_its_pins_are_said(init, name, file, framework):
    from envman.project.sources.locks import read_locks

    locked = {lk.file: lk for lk in read_locks(corpus.repo(name))}[file]
    version = sorted(locked.framework[framework])[0].split("+")[0]
    d, out, spec = init(name)
    assert f"framework: {framework}=={version}" in (d / "envman.yaml").read_text()
    assert any(n.startswith(f"{file}: {locked.count} locked packages; its {framework} version is the stack's starting "
                            "point; the other pins are not copied as pins") for n in out.notes)


def test_a_pipfile_is_read(init):
    d, out, spec = init("Yircas__CDEP-with-DeepLIFT")
    assert spec["python"] == "3.12" and {"scikit-learn", "tqdm"} <= set(spec["packages"])
    assert any(n.startswith("Pipfile dev-packages: not installed, 1 line (ipykernel)") for n in out.notes)


@pytest.mark.network
def test_overrides_and_constraints_reach_uv(tmp_path):
    """Real uv against PyPI: requests 2.31.0 asks idna>=2.5 — only an override puts idna 2.0 beside it."""
    d = _copy(tmp_path, "uv-resolution")
    init_project(d, InitOptions(cpu=True, framework="none"))
    locked = (d / "requirements.lock.txt").read_text()
    assert "idna==2.0 " in locked.replace("\\\n", " ") and "requests==2.31.0" in locked
    certifi = next(ln for ln in locked.splitlines() if ln.startswith("certifi=="))
    assert certifi.split("==")[1].split(" ")[0] < "2024"
    # the same line as a constraint has no solution: requests asks idna>=2.5, and only an override replaces that
    spec = (d / "envman.yaml").read_text().replace("overrides:\n- idna==2.0\n", "")
    (d / "envman.yaml").write_text(spec.replace("constraints:\n- certifi<2024\n", "constraints:\n- certifi<2024\n- idna==2.0\n"))
    with pytest.raises(ToolError) as e:
        lock_project(d)
    assert "idna" in e.value.message + str(e.value.hint)


# --- 10. optional and mutually exclusive requirement files are not merged into the core ----------------------------


def test_language_notebook_platform_and_stable_files_are_not_the_core(init):
    d, out, spec = init("optional-files")
    assert spec["requirements"] == ["requirements.txt"]
    assert {n for n in out.notes if n.startswith("skipped ")} == {
        "skipped requirements.ja.txt: a per-language extra (ja); name it under requirements: in envman.yaml to use it",
        "skipped requirements-notebook.txt: notebooks, demos or a UI (notebook), optional for training; name it under "
        "requirements: in envman.yaml to use it",
        "skipped requirements-host.txt: for another platform (every line's marker is false on Linux); name it under "
        "requirements: in envman.yaml to use it",
        "skipped requirements-stable.txt: an alternative pinned set beside requirements.txt; name it under "
        "requirements: in envman.yaml to use it instead"}


def test_per_backend_files_need_a_framework_and_it_chooses_one(tmp_path, init):
    # keras-team/keras-hub: requirements-{jax,tensorflow,torch}-cuda.txt beside a CPU requirements.txt
    e = refused(tmp_path, "keras-team__keras-hub")
    assert e.message == ("requirements-jax-cuda.txt, requirements-tensorflow-cuda.txt, requirements-torch-cuda.txt: one "
                         "requirements file per backend of a multi-backend project")
    assert e.hint == "pass --framework jax or --framework tensorflow or --framework torch to read the one for that framework"
    d, out, spec = init("keras-team__keras-hub", framework="torch")
    assert spec["requirements"] == ["requirements.txt", "requirements-torch-cuda.txt"]
    assert "skipped requirements-jax-cuda.txt, requirements-tensorflow-cuda.txt: per-backend alternatives to " \
           "requirements-torch-cuda.txt (--framework torch chose it); name it under requirements: in envman.yaml to use " \
           "it instead" in out.notes


def test_platform_variants_and_contradicting_alternatives(init):
    # bmaltais/kohya_ss: requirements_{linux,windows,macos_*,runpod,linux_rocm,ipex_xpu,…}.txt, each -r requirements.txt
    d, out, spec = init("bmaltais__kohya_ss")
    assert spec["requirements"] == ["requirements_linux.txt"]
    skipped = {n.split(":")[0] for n in out.notes if n.startswith("skipped ")}
    assert {"skipped requirements_windows.txt", "skipped requirements_macos_arm64.txt", "skipped requirements_linux_rocm.txt",
            "skipped requirements_runpod.txt"} <= skipped


def test_a_minimum_versions_file_is_a_test_variant(init):
    # Project-MONAI/MONAI requirements-min.txt ("Requirements for minimal tests", -r requirements.txt)
    d, out, spec = init("Project-MONAI__MONAI")
    assert spec["requirements"] == ["requirements.txt"] and spec["framework"] == "torch<2.7.0,>=2.4.1"


def test_a_windows_conda_export_beside_requirements_is_not_read_and_its_contradictions_are_said(init):
    # IDEA-Research/GroundingDINO environment.yaml: a win-64 export (prefix: C:\…, python=3.9.18, supervision==0.6.0)
    d, out, spec = init("IDEA-Research__GroundingDINO")
    assert "python" not in spec and spec["requirements"] == ["requirements.txt"]
    note = next(n for n in out.notes if n.startswith("skipped environment.yaml: an export of a windows conda environment"))
    assert "supervision==0.6.0 vs requirements.txt:9: supervision>=0.22.0" in note


# --- 11. install_project from what the build backend will do -------------------------------------------------------


def test_a_setuptools_flat_layout_with_several_packages_runs_from_source(init):
    d, out, spec = init("flat-layout")
    assert "install_project" not in spec
    assert ("the project is not installed as a package: setuptools refuses its flat layout: several top-level packages "
            "(cfg, data, models); the image runs it from its source tree (its work directory, on PYTHONPATH), as "
            "`python train.py` does") in out.notes
    assert not any(n.startswith("the project is a package") for n in out.notes)
    d, out, spec = init("flat-configured")
    assert any(n.startswith("the project is a package (pyproject)") for n in out.notes)


def test_hatchling_without_a_folder_named_after_the_project_runs_from_source(init):
    d, out, spec = init("hatch-no-package")
    assert any("hatchling finds no folder or module named after the project (my_trainer)" in n for n in out.notes)


@pytest.mark.parametrize("name", ["flat-layout", "flat-configured"])
def test_the_flat_layout_verdict_is_setuptools_own(tmp_path, name):
    """The verdict against setuptools itself (the one installed here), on the same tree."""
    from envman.project.package import backend_refusal

    d = _copy(tmp_path, name)
    run = subprocess.run([sys.executable, "-c", "import setuptools; setuptools.setup()", "egg_info", "--egg-base",
                          str(tmp_path)], cwd=d, capture_output=True, text=True)
    refused_by_setuptools = "Multiple top-level packages discovered in a flat-layout" in run.stderr
    assert refused_by_setuptools == (backend_refusal(d) is not None), run.stderr[-500:]
    assert refused_by_setuptools or run.returncode == 0


def test_every_corpus_project_that_is_a_package_builds_by_envmans_rules():
    """Each real repository of the corpus configures its packages (or is not a package): none is refused."""
    from envman.project.package import backend_refusal

    assert {n: backend_refusal(corpus.repo(n)) for n in corpus.names() if backend_refusal(corpus.repo(n))} == {}


# --- 12. a line pip accepts is never a parse error -----------------------------------------------------------------


def test_per_requirement_pip_options_are_dropped_and_said(init):
    d, out, spec = init("line-options", cpu=True, targets=())
    from envman.app.lockinputs import ProjectInputs
    from envman.matrix.load import load_matrix
    from envman.project.spec import load_spec

    assert [r.line for r in ProjectInputs.read(d, load_spec(d), load_matrix()).requirements()[0]] == ["numpy>=1.24", "scipy"]
    assert ("requirements.txt:1: dropped '--no-binary numpy,scipy' (a pip option of 'numpy>=1.24'; uv resolves and the "
            "lock pins)") in out.notes


# --- 13. the smaller ones ------------------------------------------------------------------------------------------


def test_a_conda_export_is_said_in_one_line(tmp_path):
    from envman.project.sources.conda import read_conda

    # advimman/lama conda_env.yml: 159 lines with build strings
    found = read_conda(corpus.repo("advimman__lama"), "conda_env.yml")
    dropped = [f for f in found.fates if f.fate == "dropped" and f.text.endswith("conda packages")]
    assert len(dropped) == 1 and len([f for f in found.fates if f.fate == "dropped"]) <= 2  # and "pip: the image has pip"
    assert "an export of a conda environment (_libgcc_mutex, _openmp_mutex, absl-py" in dropped[0].why


def test_doctor_is_not_ready_for_a_project_with_nothing_locked(tmp_path, capsys):
    d = _copy(tmp_path, "optional-files")
    main(["doctor", str(d), "--json"])
    out = capsys.readouterr().out
    assert '"lock-missing"' in out and "no envman.lock beside requirements.txt" in out
    init_project(d, InitOptions(targets=("h100",), no_lock=True))
    main(["doctor", str(d), "--json"])
    assert "envman.lock has no Python lock (written by `envman init --no-lock`)" in capsys.readouterr().out


def test_the_stack_table_shows_the_base_image_override(tmp_path, capsys):
    d = _copy(tmp_path, "optional-files")
    assert main(["init", str(d), "--no-lock", "--target", "h100", "--base-image", "registry.local/python:3.12-slim"]) == 0
    row = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("base image"))
    assert "registry.local/python:3.12-slim" in row and "override (the stack's default: python:3.12-slim-bookworm)" in row


def test_a_lock_that_fails_on_the_network_still_shows_the_stack(tmp_path, capsys, monkeypatch):
    """uv is real; its index is a closed port on loopback, so the lock fails as it would offline."""
    monkeypatch.setenv("UV_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("UV_DEFAULT_INDEX", "http://127.0.0.1:9/simple")
    d = _copy(tmp_path, "line-options")
    assert main(["init", str(d), "--cpu", "--timeout", "20"]) == 1
    out, err = capsys.readouterr()
    assert out.startswith("python ") and "base image" in out
    assert "nothing was written: the Python lock of this stack failed (below)" in err and "error: " in err
    assert not (d / "envman.yaml").exists()


def test_the_default_driver_assumption_needs_no_warning(matrix):
    """With no --driver, a stack the assumed driver runs only through minor-version compatibility is not the default:
    asked for CUDA 13.2 (whose floor is above the assumed R580 driver), the driver that build needs is assumed, said."""
    from envman.resolve.request import build_request
    from envman.resolve.resolver import resolve_stack

    res = resolve_stack(matrix, build_request(matrix, framework="torch", targets=["h100"]))
    assert res.driver_mode == "full" and not [w for w in res.warnings if "minor-version compatibility" in w]
    cu132 = [v for r in matrix.frameworks["torch"] for v in r.variants if v.cuda and str(v.cuda) == "13.2"]
    if cu132:
        res = resolve_stack(matrix, build_request(matrix, framework="torch", targets=["h100"], cuda="13.2"))
        assert res.driver_mode == "full" and res.driver == str(matrix.cuda_release(cu132[0].cuda).min_driver)
        assert any(n.startswith(f"driver: none given; assuming ≥ {res.driver}, the floor of CUDA 13.2") for n in res.notes)


def test_a_setup_py_requirement_with_a_computed_version_still_names_its_package(init):
    # OpenNMT/OpenNMT-tf setup.py: extras_require={"tensorflow": ["tensorflow" + tf_version_requirement, …], …}
    d, out, spec = init("OpenNMT__OpenNMT-tf", python="3.11")
    assert spec["framework"] == "tensorflow" and out.resolution.framework == "tensorflow"
    assert "framework tensorflow inferred from optional extras only" in out.notes
    assert any(n.startswith("setup.py extras_require: partly computed when setup.py runs") for n in out.notes)


# --- 6. the Python for which every pin has a wheel, before building from source --------------------------------------


def test_older_pythons_follow_the_repositorys_constraint():
    from envman.app.pythonchoice import older_pythons, open_choice
    from envman.project.spec import ProjectSpec

    assert older_pythons("3.12", ProjectSpec("p", python=">=3.10")) == ["3.11", "3.10"]
    assert older_pythons("3.12", ProjectSpec("p", python=">=3.11")) == ["3.11"]
    assert older_pythons("3.12", ProjectSpec("p")) == ["3.11", "3.10"]
    assert open_choice(ProjectSpec("p", python=">=3.8"), None, False)
    assert not open_choice(ProjectSpec("p", python="3.10"), None, False)  # the repository pinned one
    assert not open_choice(ProjectSpec("p"), "3.12", False) and not open_choice(ProjectSpec("p"), None, True)


@pytest.mark.network
def test_init_takes_the_newest_python_every_pin_has_a_wheel_for(tmp_path):
    """Real uv against PyPI: numpy 1.23.5 ships wheels up to cp311 (an sdist for 3.12)."""
    d = tmp_path / "old-pins"
    d.mkdir()
    (d / "requirements.txt").write_text("numpy==1.23.5\n")
    out = init_project(d, InitOptions(cpu=True, framework="none"))
    assert out.resolution.python == "3.11" and "python: '3.11'" in (d / "envman.yaml").read_text()
    assert any(n.startswith("Python 3.11: numpy has no wheel for Python 3.12, so its lock would build it from source; "
                            "for 3.11 every pin has a wheel") for n in out.notes)
    assert not (d / "requirements.source.lock.txt").exists()


# --- 4. a requirement whose marker is false on the target is not required of uv's output --------------------------


def test_a_line_whose_marker_is_false_on_the_target_is_not_required_of_uvs_output():
    from envman.errors import ToolError
    from envman.lock.uv import _check_output_covers_inputs, target_environment

    class P:
        def __init__(self, name):
            self.name = name

    x86 = target_environment("3.11", "x86_64-manylinux_2_28")
    lines = ["numpy==2.1.3", 'arm-only==1.0; platform_machine == "aarch64"', 'old-py==1.0; python_version < "3.9"']
    _check_output_covers_inputs([P("numpy")], lines, x86)  # uv rightly locked neither arm-only nor old-py
    with pytest.raises(ToolError, match="does not contain arm-only"):
        _check_output_covers_inputs([P("numpy")], lines, target_environment("3.11", "aarch64-manylinux_2_28"))


# --- 8. the smoke test imports the project itself and runs its console scripts' --help -----------------------------


def _stack_json(d: Path) -> dict:
    import json

    return json.loads((d / ".envman" / "stack.json").read_text())


def test_a_project_run_from_its_source_is_on_pythonpath_and_its_packages_are_imported(init):
    d, out, spec = init("WongKinYiu__yolov7", python="3.11")
    assert 'ENV PYTHONPATH="/app"' in (d / "Dockerfile").read_text()
    imports = _stack_json(d)["imports"]
    assert ["wongkinyiu-yolov7", "models"] in imports and ["wongkinyiu-yolov7", "utils"] in imports
    assert ("the project runs from its source tree: /app is on PYTHONPATH (its packages models, utils, which the "
            "smoke test imports)") in out.notes


def test_an_installed_project_is_imported_as_pip_installed_it_and_its_scripts_run(init):
    d, out, spec = init("openai__CLIP")
    assert ["clip", None] in _stack_json(d)["imports"] and "PYTHONPATH" not in (d / "Dockerfile").read_text()
    d, out, spec = init("Unbabel__COMET")  # Poetry: [tool.poetry.scripts]
    expect = _stack_json(d)
    assert ["unbabel-comet", None] in expect["imports"]
    assert expect["scripts"] == ["comet-compare", "comet-mbr", "comet-score", "comet-train"]


def test_a_package_named_by_two_files_is_imported_once(tmp_path, init):
    d, out, spec = init("line-options", cpu=True, targets=())
    (d / "envman.yaml").write_text((d / "envman.yaml").read_text() + "packages:\n- numpy\n")
    from envman.app.generate import generate
    from envman.project.spec import load_spec

    generate(d, load_spec(d), no_lock=True, force=True)
    imports = _stack_json(d)["imports"]
    assert imports.count(["numpy", None]) == 1


def test_the_smoke_verdict_holds_a_console_script_that_fails_its_help():
    from envman.portable.smoke import evaluate_scripts, load_expect

    expect = load_expect({"schema": 1, "python": "3.11", "framework": None, "scripts": ["good", "bad"]})
    checks = evaluate_scripts(expect, {"good": None, "bad": "exit 1: ModuleNotFoundError: No module named 'x'"})
    assert [(c["name"], c["status"]) for c in checks] == [("good --help", "pass"), ("bad --help", "fail")]
    with pytest.raises(ValueError, match="scripts: must be a list"):
        load_expect({"schema": 1, "python": "3.11", "scripts": "tune"})


# --- 3. the lock's platform is the base image's glibc ---------------------------------------------------------------


def test_the_lock_platform_follows_the_base_images_glibc(init, matrix):
    import json

    from envman.lock.uv import python_platform
    from envman.resolve.request import build_request
    from envman.resolve.resolver import resolve_stack

    res = resolve_stack(matrix, build_request(matrix, framework="torch", targets=["h100"]))
    assert res.base_image.endswith("-slim-bookworm") and res.glibc == "2.36"
    assert python_platform(res) == "x86_64-manylinux_2_36"
    tf = resolve_stack(matrix, build_request(matrix, framework="tensorflow==2.13.*", targets=["a100"]))
    assert "ubuntu22.04" in tf.base_image and python_platform(tf) == "x86_64-manylinux_2_35"
    # a base image of the user's own: its glibc is not known, the lock keeps manylinux 2.28
    d, out, spec = init("line-options", cpu=True, targets=(), base_image="registry.local/python:3.12-slim")
    assert json.loads((d / "envman.lock").read_text())["python_lock"]["platform"] == "x86_64-manylinux_2_28"


# --- 5. the project's own compiled code is built in the builder stage ----------------------------------------------


@pytest.mark.parametrize("name,kinds,cuda,framework,optional", [
    ("IDEA-Research__GroundingDINO", ("a C++ extension (torch)", "a CUDA extension"), True, True, False),
    ("facebookresearch__sam2", ("a CUDA extension",), True, True, True),
    ("facebookresearch__fairseq", ("a C/C++ extension", "a C++ extension (torch)", "Cython modules"), True, True, False),
    ("Megvii-BaseDetection__YOLOX", ("extensions its setup.py computes (ext_modules=…)",), False, True, False),
    ("openai__CLIP", None, None, None, None)])
def test_what_the_project_compiles_is_read_from_its_setup_py(name, kinds, cuda, framework, optional):
    from envman.project.package import find_package

    c = find_package(corpus.repo(name)).compiled
    assert (c.kinds, c.cuda, c.framework, c.optional) == (kinds, cuda, framework, optional) if kinds else c is None


def test_a_compiled_project_is_built_in_the_builder_and_the_image_gets_its_wheel(matrix):
    from envman.image.plan import plan_dockerfile
    from envman.image.render import render_dockerfile
    from envman.image.stages import BuildNeed, NvccWheel, plan_source_builds
    from envman.resolve.request import build_request
    from envman.resolve.resolver import resolve_stack

    res = resolve_stack(matrix, build_request(matrix, framework="torch", targets=["h100"]))
    nvcc = {"13": NvccWheel("nvidia-cuda-nvcc", "nvidia/cu13", ())}
    sb = plan_source_builds([], {}, res.cuda, False, nvcc,
                            project=BuildNeed("the project", framework=True, cuda=True, build_requires=("setuptools",)))
    assert sb is not None and sb.project and sb.nvcc and not sb.packages
    assert any("the project compiles CUDA code: the builder stage installs nvcc" in n for n in sb.notes)
    from envman.lockedstack import BaseImage, LockedStack, ProjectFacts

    plan = plan_dockerfile(LockedStack(name="p", res=res, base=BaseImage(res.base_image, res.base_kind),
                                       inputs_hash="1" * 64, fw_lock="fw.txt", req_lock="req.txt", builds=sb,
                                       source_lock="src.txt", project=ProjectFacts(installed=True),
                                       tools_lock="build.txt"), "0" * 64)
    text = render_dockerfile(plan)
    builder, image = text.split("\n# the image\n")
    assert "build-essential" in builder and "CUDA_HOME" in builder and "TORCH_CUDA_ARCH_LIST" in builder
    assert "pip wheel --no-deps --no-build-isolation --no-index --no-cache-dir --wheel-dir /wheels-project" in builder
    assert "-r /tmp/envman/src.txt" not in builder  # no source-only package: no sdist step
    assert "from=envman-wheels,source=/wheels-project" in image and "build-essential" not in image
    assert "/tmp/envman/project-wheel/*.whl" in image and "--editable" not in image


def test_an_sdists_setup_requires_are_build_requirements_of_the_builder():
    """wavedrom 2.0.3.post3's sdist (setup.py: setup_requires=["setuptools_scm"], no pyproject.toml) built without
    isolation says version 0.0.0 unless setuptools_scm is there (FastChat's lock; seen building it, 2026-12-01)."""
    import io
    import tarfile

    from envman.lock.build_deps import build_requires_of

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        body = b'from setuptools import setup\nsetup(name="w", setup_requires=["setuptools_scm"], use_scm_version=True)\n'
        info = tarfile.TarInfo("w-1.0/setup.py")
        info.size = len(body)
        t.addfile(info, io.BytesIO(body))
    assert build_requires_of(buf.getvalue(), "w-1.0.tar.gz") == ("setuptools>=40.8.0", "wheel", "setuptools_scm")


def test_the_base_image_a_refusal_hints_at_gets_past_it(tmp_path, init):
    """deezer/spleeter (TensorFlow 2.12, which loads CUDA 11.8 from the system) with --python 3.11: the CUDA image's
    Python is 3.10, and the hint's --base-image (an image that has CUDA 11.8 and Python 3.11) gets past it."""
    from envman.errors import ResolutionError

    d = _copy(tmp_path, "deezer__spleeter")
    with pytest.raises(ResolutionError) as e:
        init_project(d, InitOptions(targets=("h100",), no_lock=True, python="3.11"))
    assert "pass --base-image" in e.value.hint
    d, out, spec = init("deezer__spleeter", python="3.11", base_image="registry.local/cuda-11.8-py3.11:1")
    assert out.resolution.python == "3.11" and spec["base_image"] == "registry.local/cuda-11.8-py3.11:1"
    assert any(n.startswith("the base image is yours: it must carry CUDA 11.8's libraries") for n in out.resolution.notes)


def test_the_smoke_test_imports_modules_not_a_wheels_top_level_data_files(tmp_path, monkeypatch):
    """shortuuid's wheel installs a top-level COPYING file (seen in FastChat's image): not a module to import."""
    import sys

    from envman.portable.smoke import top_level_modules

    info = tmp_path / "demo_dist-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: demo-dist\nVersion: 1.0\n")
    (info / "RECORD").write_text("COPYING,,\ndemo/__init__.py,,\nsolo.py,,\ndemo_dist-1.0.dist-info/RECORD,,\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert str(tmp_path) in sys.path
    assert top_level_modules("demo-dist") == ["demo", "solo"]


@pytest.mark.parametrize("pyproject, damaged", [(b"[build-system\nrequires = [", False), (b"", True)])
def test_an_sdist_whose_build_requirements_cannot_be_read_is_one_error_naming_it(pyproject, damaged):
    """A malformed pyproject.toml in a downloaded sdist, or a damaged archive, was exit 70 (TOMLDecodeError)."""
    import io
    import tarfile

    from envman.errors import LockError
    from envman.lock.build_deps import build_requires_of

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        info = tarfile.TarInfo("w-1.0/pyproject.toml")
        info.size = len(pyproject)
        t.addfile(info, io.BytesIO(pyproject))
    data = buf.getvalue()[:40] if damaged else buf.getvalue()
    with pytest.raises(LockError) as err:
        build_requires_of(data, "w-1.0.tar.gz")
    assert err.value.message.startswith("w-1.0.tar.gz: cannot read its build requirements (")
    assert err.value.hint.startswith("the source distribution is damaged or its pyproject.toml is not TOML")
