"""`envman init` on the layouts real training repositories use (issue #10). Every fixture under
tests/fixtures/repos/ was written for these tests; discovery and resolution run offline (--no-lock)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from envman.app.init import InitOptions, init_project
from envman.app.lockinputs import ProjectInputs
from envman.errors import UsageError
from envman.matrix.load import load_matrix
from envman.project.infer import load_dependents
from envman.project.sources.conda import conda_spec
from envman.project.sources.poetry import poetry_constraint
from envman.project.sources.requirements_txt import url_name
from envman.project.spec import load_spec

REPOS = Path(__file__).resolve().parent.parent / "fixtures" / "repos"


@pytest.fixture
def init(tmp_path):
    def run(name: str, **opts):
        d = tmp_path / name
        shutil.copytree(REPOS / name, d)
        opts.setdefault("targets", ("h100",))
        out = init_project(d, InitOptions(no_lock=True, **opts), detect_gpus=lambda: pytest.fail("no GPU probe"))
        return d, out, yaml.safe_load((d / "envman.yaml").read_text())

    return run


def refusal(tmp_path, name: str, **opts) -> UsageError:
    d = tmp_path / name
    shutil.copytree(REPOS / name, d)
    with pytest.raises(UsageError) as ei:
        init_project(d, InitOptions(targets=("h100",), no_lock=True, **opts))
    assert not (d / "envman.yaml").exists() and not (d / "Dockerfile").exists()
    return ei.value


def test_conda_env_with_pytorch_cuda_maps_to_the_matrix_terms(init):
    d, out, spec = init("conda-cuda")
    r = out.resolution
    assert (r.framework, str(r.version), r.variant, r.python) == ("torch", "2.1.2", "cu118", "3.10")
    assert spec["framework"] == "torch==2.1.*" and spec["cuda"] == "11.8" and spec["python"] == "3.10"
    # `-e .` asks for the project, but this repository is not a package: it is said, not installed
    assert spec["packages"] == ["einops>=0.7"] and "install_project" not in spec
    assert "environment.yml dependencies[2]: rewrote 'pytorch-cuda=11.8' (the framework's CUDA variant cu118)" in out.notes
    assert ("environment.yml dependencies[4]: dropped 'ffmpeg' (a conda package; add its PyPI name under packages: "
            "or its Debian name under system_packages: if needed)") in out.notes


def test_setup_py_is_read_with_ast_and_a_computed_value_is_said(init):
    d, out, spec = init("setup-py")
    assert spec["framework"] == "torch<2.3,>=2.1" and str(out.resolution.version) == "2.2.2"
    assert spec["packages"] == ["numpy>=1.24", "tqdm"] and spec["python"] == ">=3.9"
    assert out.resolution.python == "3.12"
    assert any(n.startswith("setup.py extras_require: dropped ") and "envman never runs it" in n for n in out.notes)


def test_poetry_constraints_become_pep440(init):
    d, out, spec = init("poetry-repo")
    assert spec["framework"] == "torch<2.5,>=2.4" and str(out.resolution.version).startswith("2.4.")
    assert spec["python"] == "<4,>=3.10" and out.resolution.python == "3.12"
    assert spec["packages"] == ["transformers<5,>=4.40", "numpy==1.26.*"]
    assert ("pyproject.toml tool.poetry.group.dev.dependencies: not installed, 1 line (pytest>=8,<9): an optional "
            "extra or group; name it under packages: in envman.yaml to install it") in out.notes


@pytest.mark.parametrize("text,pep440", [
    ("^1.2.3", ">=1.2.3,<2"), ("^0.2.3", ">=0.2.3,<0.3"), ("^0.0.3", ">=0.0.3,<0.0.4"), ("~1.2", ">=1.2,<1.3"),
    ("~1.2.3", ">=1.2.3,<1.3"), ("1.2.3", "==1.2.3"), ("*", ""), (">=1,<2", ">=1,<2"), ("~=1.4", "~=1.4"),
])
def test_poetry_constraint(text, pep440):
    assert poetry_constraint(text) == pep440


@pytest.mark.parametrize("text,pep440", [("=2.1", "==2.1.*"), ("2.1.0", "==2.1.0"), ("==2.1.0", "==2.1.0"),
                                         (">=2.0", ">=2.0"), ("2.1.0=py3.10_cuda11.8_0", "==2.1.0")])
def test_conda_spec(text, pep440):
    assert conda_spec(text) == pep440


def test_transitive_only_peft_means_torch(init):
    d, out, spec = init("transitive-peft")
    assert spec["framework"] == "torch" and out.resolution.framework == "torch"
    assert any(n.startswith("framework torch inferred from requirements.txt:1: peft>=0.10 (it requires torch") for n in out.notes)


def test_dependents_table_has_a_source_per_row():
    rows = load_dependents()
    assert {"peft", "accelerate", "deepspeed", "tf-keras", "tensorflow-hub"} <= {r.package for r in rows}
    assert all(r.source.startswith("https://pypi.org/pypi/") for r in rows)


def test_vcs_editable_and_index_lines_are_kept(init):
    d, out, spec = init("vcs-index")
    assert "install_project" not in spec  # `-e .`, but no pyproject [build-system] or setup.py: said, not installed
    # the file stays under requirements: and is read again at lock time, its index options with it (credentials
    # and all, for uv only): nothing is copied into envman.yaml (issue 24)
    assert "index_urls" not in spec
    assert ProjectInputs.read(d, load_spec(d), load_matrix()).index_urls == ("https://pypi.example.com/simple",)
    assert spec["find_links"] == ["https://wheels.example.com/links.html"]
    assert ("requirements.txt:1: dropped '--extra-index-url https://download.pytorch.org/whl/cu121' "
            "(replaced by envman's framework index for the chosen variant)") in out.notes
    assert "skipped docs/requirements.txt: docs/ is not the training environment; name it under requirements: to use it" in out.notes
    lines = [r.line for r in ProjectInputs.read(d, load_spec(d), load_matrix()).requirements()[0]]
    assert lines == ["torch==2.1.2", "git+https://github.com/example/clip.git",
                     "mylib @ git+https://github.com/example/mono.git@v1#subdirectory=python",
                     "git+https://github.com/example/bee.git#egg=bee"]


def test_url_names():
    assert url_name("git+https://github.com/openai/CLIP.git") == "CLIP"
    assert url_name("git+https://github.com/x/mono.git@v1#subdirectory=python/pkg") == "pkg"
    assert url_name("git+https://github.com/x/y.git#egg=bee") == "bee"


def test_dev_tpu_docs_variants_are_skipped_and_said(init):
    d, out, spec = init("skip-variants")
    assert spec["requirements"] == ["requirements.txt"] and spec["framework"] == "torch>=2.3"
    assert "found dependencies in: requirements.txt (with requirements/base.txt)" in out.notes
    for f in ("requirements-dev.txt", "requirements-tpu.txt"):
        why = "a dev/test/docs/hardware variant" if f.endswith("dev.txt") else "a variant for other hardware (tpu)"
        assert f"skipped {f}: {why}; name it under requirements: in envman.yaml to use it" in out.notes


def test_python_floor_does_not_lift_the_default_cap(init):
    d, out, spec = init("python-floor")
    assert spec["python"] == ">=3.8" and out.resolution.python == "3.12"


def test_empty_repo_is_refused_with_what_was_looked_at(tmp_path):
    e = refusal(tmp_path, "empty-repo")
    assert e.message == ("empty-repo: no dependency file found (looked for requirements*.txt, requirements/*.txt, "
                         "pyproject.toml, setup.py, setup.cfg, Pipfile, pixi.toml, environment.yml)")
    assert e.hint == "pass --framework (e.g. --framework torch), or write envman.yaml with packages:"
    assert e.exit_code == 1


def test_empty_repo_with_framework_given_resolves(init):
    d, out, spec = init("empty-repo", framework="torch==2.5.*")
    assert str(out.resolution.version) == "2.5.1"


def test_collection_of_projects_lists_them(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the hint's folder is typed from where the user stands (here: beside it)
    e = refusal(tmp_path, "collection")
    assert e.message == "collection: no dependency file at the top; it is a collection of 2 projects: serving, trainer"
    assert e.hint == "run `envman init collection/serving` for one of them"


def test_contradiction_names_both_files_and_lines(tmp_path):
    e = refusal(tmp_path, "contradiction")
    assert e.message == "requirements.txt:1: torch==2.0.1 contradicts setup.py install_requires[0]: torch>=2.3"


def test_companion_pin_steers_the_framework(init):
    d, out, spec = init("companion-steer")
    assert spec["framework"] == "torch==2.5.1" and str(out.resolution.version) == "2.5.1"
    assert "requirements.txt:1: torchvision==0.20.1 exists beside torch 2.5.1" in out.notes


def test_local_version_label_constrains_the_variant(init):
    d, out, spec = init("local-label")
    r = out.resolution
    assert (str(r.version), r.variant) == ("2.0.1", "cu118") and spec["framework"] == "torch==2.0.1+cu118"


def test_tensorflow_cpu_means_a_cpu_stack(init):
    d, out, spec = init("tf-cpu", targets=())
    assert spec["cpu"] is True and out.resolution.variant == "cpu"
    assert "a CPU stack: the repository asks for a CPU build of its framework" in out.notes


def test_torchaudio_without_a_release_narrows_the_range(tmp_path):
    from envman.matrix.load import load_matrix
    from envman.project.discover import discover_repo

    (tmp_path / "requirements.txt").write_text("torchaudio\ntorch\n")
    m = load_matrix()
    d = discover_repo(tmp_path, {k: list(v) for k, v in m.frameworks.items()})
    with_audio = [r.version for r in m.frameworks["torch"] if dict(r.companions).get("torchaudio")]
    assert d.inference.framework == f"torch<={max(with_audio)},>={min(with_audio)}"


def test_lock_check_covers_included_requirement_files(init):
    from envman.app.lock import check_lock

    d, out, spec = init("skip-variants")
    assert "file:requirements/base.txt" in out.lock["inputs"]
    (d / "requirements" / "base.txt").write_text("torch>=2.3\nnumpy\nscipy\n")
    assert check_lock(d) == ["requirements/base.txt changed since the lock"]


def test_the_repositorys_own_docker_files_are_kept_and_envman_writes_beside_them(init):
    from envman.app.generate import offline_dockerfile

    src = REPOS / "own-docker"
    theirs = {f: (src / f).read_bytes() for f in ("Dockerfile", ".dockerignore", "docker-compose.yml",
                                                    ".devcontainer/devcontainer.json")}
    d, out, spec = init("own-docker")
    for f, body in theirs.items():
        assert (d / f).read_bytes() == body, f
    for f in ("Dockerfile.envman", "Dockerfile.envman.dockerignore", "compose.envman.yaml",
              ".devcontainer/envman/devcontainer.json"):
        assert (d / f).is_file(), f
    assert out.lock["dockerfile"] == "Dockerfile.envman"
    assert '"dockerfile": "../../Dockerfile.envman"' in (d / ".devcontainer/envman/devcontainer.json").read_text()
    assert "Dockerfile.envman" in (d / "compose.envman.yaml").read_text()
    kept = [n for n in out.notes if n.startswith("the repository's own")]
    assert kept == [
        "the repository's own Dockerfile is kept; envman writes Dockerfile.envman beside it",
        "the repository's own .dockerignore is kept; envman writes Dockerfile.envman.dockerignore (BuildKit reads it for that Dockerfile)",
        "the repository's own docker-compose.yml is kept; envman writes compose.envman.yaml (docker compose -f compose.envman.yaml …)",
        "the repository's own .devcontainer/devcontainer.json is kept; envman writes .devcontainer/envman/devcontainer.json "
        "(a second configuration editors offer to choose)",
    ]
    assert offline_dockerfile(d, None, None) == (d / "Dockerfile.envman").read_text()
    again = init_project(d, InitOptions(no_lock=True))
    assert again.written == []


def test_lock_check_notices_an_edit_to_a_file_init_copied_packages_from(tmp_path):
    """pyproject.toml, setup.py, setup.cfg and environment.yml are read once, at init (their packages are
    copied into envman.yaml): they are lock inputs all the same, and `lock --check` names the one that moved."""
    from envman.app.init import InitOptions, init_project
    from envman.app.lock import check_lock

    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\nversion = "0"\ndependencies = ["numpy"]\n')
    (tmp_path / "environment.yml").write_text("dependencies:\n  - python=3.11\n  - pip:\n    - pyyaml\n")
    init_project(tmp_path, InitOptions(cpu=True, no_lock=True))
    assert "sources:" in (tmp_path / "envman.yaml").read_text()
    assert check_lock(tmp_path) == []
    (tmp_path / "environment.yml").write_text("dependencies:\n  - python=3.11\n  - pip:\n    - pyyaml\n    - rich\n")
    assert check_lock(tmp_path) == ["environment.yml changed since the lock (init copied its packages into "
                                    "envman.yaml: `envman init --force` reads it again)"]


def test_uv_sources_cuda_index_is_the_starting_variant(init):
    d, out, spec = init("uv-cuda-index")
    r = out.resolution
    assert (r.framework, r.variant, spec["framework"], spec["cuda"]) == ("torch", "cu128", "torch>=2.7", "12.8")
    assert "CUDA variant cu128 from pyproject.toml tool.uv.sources.torch[1] (extra gpu)" in out.notes
    assert ("pyproject.toml tool.uv.sources.torch[0] (extra cpu): dropped 'https://download.pytorch.org/whl/cpu' "
            "(another variant's index; cu128 is the starting point (pass --framework 'torch==X.Y.*+cpu' to take this one))"
            ) in out.notes


def test_uv_index_urls_map_to_variants():
    from envman.project.sources.uv import index_variant, read_uv_sources

    assert index_variant("https://download.pytorch.org/whl/cu121/") == "cu121"
    assert index_variant("https://download.pytorch.org/whl/nightly/cu130") == "cu130"
    assert index_variant("https://pypi.org/simple") is None
    # a default (non-explicit) PyTorch index serves torch without a [tool.uv.sources] entry
    doc = {"tool": {"uv": {"index": [{"name": "pt", "url": "https://download.pytorch.org/whl/cu126"}]}}}
    assert read_uv_sources(doc).variants == [("pyproject.toml tool.uv.index pt", "cu126")]
    assert read_uv_sources({"tool": {"uv": {"index": [dict(doc["tool"]["uv"]["index"][0], explicit=True)]}}}).variants == []


def test_uv_lock_narrows_the_framework_to_the_locked_version(init):
    d, out, spec = init("uv-lock")
    assert spec["framework"] == "torch==2.6.0" and str(out.resolution.version) == "2.6.0"
    assert ("uv.lock package torch: torch 2.6.0 locked: the torch range is narrowed to it (pass --framework, or edit "
            "framework: in envman.yaml, to choose another)") in out.notes
    assert "found dependencies in: pyproject.toml [project], uv.lock" in out.notes


def test_uv_lock_with_cuda_local_labels_gives_the_variant():
    from envman.project.sources.uv import lock_constraints

    reqs, variants, notes = lock_constraints({"torch": ["2.9.1", "2.9.1+cpu", "2.9.1+cu128"]}, "torch")
    assert [str(r.req) for r in reqs] == ["torch==2.9.1"] and variants == [("uv.lock package torch", "cu128")]
    reqs, variants, _ = lock_constraints({"torch": ["2.8.0", "2.9.1"]}, "torch")
    assert [str(r.req) for r in reqs] == ["torch<=2.9.1,>=2.8.0"] and variants == []


def test_stale_uv_lock_contradicting_pyproject_is_refused(tmp_path):
    shutil.copytree(REPOS / "uv-lock", tmp_path / "stale")
    pp = tmp_path / "stale" / "pyproject.toml"
    pp.write_text(pp.read_text().replace("torch>=2.4", "torch>=2.8"))
    with pytest.raises(UsageError) as ei:
        init_project(tmp_path / "stale", InitOptions(targets=("h100",), no_lock=True))
    assert "uv.lock package torch: torch==2.6.0" in ei.value.message and "pyproject.toml" in ei.value.message


def test_setuptools_dynamic_dependencies_files_are_read(init):
    d, out, spec = init("dynamic-deps")
    assert spec["requirements"] == ["requirements/runtime-core.txt"] and spec["framework"] == "torch<2.5,>=2.2"
    assert "found dependencies in: requirements/runtime-core.txt named by pyproject.toml as its dependencies" in out.notes
    assert not any("dynamic (computed by the build backend)" in n for n in out.notes)
    assert ("skipped requirements/logging.txt: an optional feature set beside the core (requirements/runtime-core.txt); "
            "name it under requirements: in envman.yaml to use it") in out.notes


def test_requirements_folder_of_feature_sets_beside_pyproject_is_not_installed(init):
    d, out, spec = init("feature-sets")
    assert "requirements" not in spec or spec["requirements"] == []
    assert ("skipped requirements/deepspeed.txt, requirements/vllm.txt: an optional feature set beside the core "
            "(pyproject.toml); name it under requirements: in envman.yaml to use it") in out.notes


def test_a_jax_repository_gets_a_jax_stack(init):  # the mixed JAX + TensorFlow cases: tests/unit/test_jax_stack.py
    d, out, spec = init("jax-repo")
    assert spec["framework"] == "jax>=0.4.20" and out.resolution.framework == "jax"


# --- issue #11's repositories as patterns (the slow builds: tests/integration/test_build_repos.py) -----------


def test_whisper_like_package_with_a_console_script_is_installed(init):
    d, out, spec = init("whisper-like")
    assert spec["framework"] == "torch==2.14.1" and spec["packages"] == ["numpy", "tqdm"]
    assert "found dependencies in: pyproject.toml [project]" in out.notes
    assert any(n.startswith("the project is a package (pyproject): installed into the image after its source")
               for n in out.notes)
    assert out.resolution.variant == "cu130"


def test_yolov5_like_keeps_its_docker_files_and_gets_opencvs_system_libraries(init):
    theirs = {f: (REPOS / "yolov5-like" / f).read_bytes() for f in ("Dockerfile", ".dockerignore", "docker-compose.yml")}
    d, out, spec = init("yolov5-like")
    assert {f: (d / f).read_bytes() for f in theirs} == theirs
    assert out.lock["dockerfile"] == "Dockerfile.envman"
    ours = (d / "Dockerfile.envman").read_text()
    assert "libgl1 libglib2.0-0" in ours
    assert (d / "Dockerfile.envman.dockerignore").is_file() and (d / "compose.envman.yaml").is_file()


def test_deepspeed_chat_like_installs_its_subfolder_package_from_dash_e_dot(init):
    d, out, spec = init("deepspeed-chat-like")
    assert spec["install_project"] is True and spec["requirements"] == ["requirements.txt"]
    assert "requirements.txt:3: project '-e .' (installs this repository (install_project: true))" in out.notes
    assert any(n.startswith("the project is a package (setup.py)") for n in out.notes)
