"""JAX as a framework on the host side: jax.yaml's loader, the resolution (SASS against the targets, driver floors
of each CUDA major, Python), the pins and the lock's constraints on the plugin's nvidia-* floors, what `envman init`
infers from a JAX repository (the mixed JAX + TensorFlow one included) and what it refuses (jax[tpu]).
All on the frozen fixture matrix (tests/fixtures/matrix/jax.yaml: 0.12.0, 0.7.2, 0.4.35, 0.4.30)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

from envman.app.init import InitOptions, init_project
from envman.errors import MatrixError, ResolutionError, UsageError
from envman.lock.pins import check_user_requirements, cuda_constraints, framework_pins
from envman.matrix.load import load_matrix
from envman.project.req import Req
from envman.resolve.request import build_request
from envman.resolve.resolver import resolve_stack

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
REPOS = FIXTURES / "repos"


@pytest.fixture(scope="module")
def m():
    return load_matrix()


def resolve(m, framework="jax", targets=("h100",), **kw):
    return resolve_stack(m, build_request(m, framework=framework, targets=list(targets), **kw))


# ---------------------------------------------------------------------------- the matrix file
def test_the_loader_gives_a_variant_per_plugin_and_the_cpu_build(m):
    rels = {str(r.version): r for r in m.frameworks["jax"]}
    assert list(rels) == ["0.12.0", "0.7.2", "0.4.35", "0.4.30"]
    new = rels["0.12.0"]
    assert [v.name for v in new.variants] == ["cuda13", "cuda12", "cpu"] and new.pypi_default == "cpu"
    c13 = new.variant("cuda13")
    assert (str(c13.cuda), c13.cudnn, c13.nccl) == ("13.0", "9.12", "2.27")
    assert [a.sm for a in c13.archs] == ["sm_75", "sm_80", "sm_90", "sm_100", "sm_110", "sm_120"]
    assert dict(new.companions) == {"jaxlib": "0.12.0", "jax-cuda12-plugin": "0.12.0", "jax-cuda13-plugin": "0.12.0"}
    assert dict(rels["0.4.35"].companions) == {"jaxlib": "0.4.34", "jax-cuda12-plugin": "0.4.34"}  # a jax-only release


def test_a_build_whose_cuda_is_not_its_major_and_unknown_names_are_each_said(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_CACHE_DIR", str(tmp_path / "cache"))
    d = tmp_path / "matrices"
    shutil.copytree(FIXTURES / "matrix", d)
    text = (d / "jax.yaml").read_text()
    text = text.replace('cuda: "13.0"', 'cuda: "12.8"', 1).replace("name: cuda12", "name: cuda11", 1)
    (d / "jax.yaml").write_text(text)
    with pytest.raises(MatrixError) as exc:
        load_matrix(d)
    assert "jax.yaml: releases[0].builds[0].cuda: '12.8' is not a CUDA 13 release" in exc.value.problems
    assert "jax.yaml: releases[0].builds[1].name: expected one of cuda12, cuda13, got 'cuda11'" in exc.value.problems


# ---------------------------------------------------------------------------- resolution
def test_sass_decides_the_plugin_as_for_torch(m):
    assert resolve(m, targets=("h100",)).variant == "cuda13"
    v100 = resolve(m, targets=("v100",))  # the cuda13 plugin starts at sm_75
    assert (str(v100.version), v100.variant) == ("0.12.0", "cuda12")
    assert "jax 0.12.0 cuda13 carries no SASS for 7.0 (sm_70" in next(n for n in v100.notes if n.startswith("cuda12:"))


def test_the_driver_floor_of_each_major_is_cuda_yamls(m):
    old = resolve(m, driver="535.104.05")  # below 13.x's floor 580.65.06: cuda12 through minor-version compat
    assert (old.variant, old.driver_mode, old.min_driver_minor_compat) == ("cuda12", "minor-compat", "525.60.13")
    with pytest.raises(ResolutionError) as exc:
        resolve(m, driver="520.61.05")  # below 12.x's floor too
    assert "525.60.13" in " ".join(exc.value.conflicts) or "525.60.13" in str(exc.value)


def test_python_picks_the_release(m):
    r = resolve(m, python="3.11")
    assert (str(r.version), r.python) == ("0.7.2", "3.11")  # 0.12.0 has no 3.11 wheels
    assert resolve(m, python="3.12").python == "3.12"


def test_the_cuda_extra_in_the_framework_text_chooses_the_plugin(m):
    assert resolve(m, framework="jax[cuda12]").variant == "cuda12"
    assert resolve(m, framework="jax[cuda12]", cuda="13").variant == "cuda13"  # --cuda wins over the extra


def test_pins_hold_jax_jaxlib_and_the_plugin_to_one_release(m):
    assert framework_pins(resolve(m), ()) == ["jax[cuda13]==0.12.0", "jaxlib==0.12.0", "jax-cuda13-plugin==0.12.0"]
    only = resolve(m, framework="jax==0.4.35", targets=("a100",))
    assert framework_pins(only, ()) == ["jax[cuda12]==0.4.35", "jaxlib==0.4.34", "jax-cuda12-plugin==0.4.34"]
    cpu = resolve_stack(m, build_request(m, framework="jax", cpu=True))
    assert framework_pins(cpu, ()) == ["jax==0.12.0", "jaxlib==0.12.0"] and cuda_constraints(cpu, m.toolkit_wheels) == []


def test_the_plugins_nvidia_floors_are_held_to_the_builds_cuda_and_cudnn_nccl_floors(m):
    cons = cuda_constraints(resolve(m, targets=("a100",), driver="535.104.05"), m.toolkit_wheels)
    assert {"nvidia-cuda-runtime-cu12==12.8.*", "nvidia-cublas-cu12==12.8.*", "nvidia-cuda-nvcc-cu12==12.8.*",
            "nvidia-cudnn-cu12>=9.10,<10", "nvidia-nccl-cu12>=2.18,<3"} <= set(cons)


# ---------------------------------------------------------------------------- the lock's view of the user's lines
def reqs(*lines):
    return [Req(Requirement(x), f"requirements.txt:{i + 1}") for i, x in enumerate(lines)]


def test_tensorflow_beside_jax_is_locked_as_its_cpu_wheel(m):
    res = resolve(m)
    rest = check_user_requirements(res, reqs("jax>=0.4.30", "tensorflow>=2.15", "tensorflow-cpu==2.20.*", "optax"))
    assert [r.line for r in rest] == ["tensorflow-cpu>=2.15", "tensorflow-cpu==2.20.*", "optax"]
    assert rest[0].origin == "requirements.txt:2"


def test_a_jax_line_the_stack_cannot_honour_is_refused(m):
    res = resolve(m)
    with pytest.raises(UsageError) as exc:
        check_user_requirements(res, reqs("jax[tpu]"))
    assert str(exc.value).startswith("requirements.txt:1: jax[tpu]: a TPU stack (libtpu)")
    with pytest.raises(UsageError, match="asks for jaxlib==0.4.30, but the stack pins jaxlib 0.12.0"):
        check_user_requirements(res, reqs("jaxlib==0.4.30"))


def test_tensorflow_in_a_torch_stack_is_still_refused(m):
    res = resolve_stack(m, build_request(m, framework="torch", targets=["h100"]))
    with pytest.raises(UsageError, match="but the stack has no tensorflow"):
        check_user_requirements(res, reqs("tensorflow-cpu"))


# ---------------------------------------------------------------------------- envman init
@pytest.fixture
def init(tmp_path):
    def run(name: str, **opts):
        d = tmp_path / name
        shutil.copytree(REPOS / name, d)
        opts.setdefault("targets", ("h100",))
        out = init_project(d, InitOptions(no_lock=True, **opts), detect_gpus=lambda: pytest.fail("no GPU probe"))
        return d, out, yaml.safe_load((d / "envman.yaml").read_text())

    return run


def test_jax_with_tensorflow_for_its_input_pipeline_is_one_jax_image(init):
    d, out, spec = init("jax-repo")
    assert spec["framework"] == "jax>=0.4.20" and "cpu" not in spec and out.resolution.variant == "cuda13"
    assert ("requirements.txt:3: tensorflow>=2.15: beside jax, one image: jax on the GPU, tensorflow on the CPU "
            "(installed as tensorflow-cpu, for input pipelines)") in out.notes
    assert not any("manages torch and tensorflow only" in n for n in out.notes)


def test_a_vit_like_setup_py_infers_jax_through_flax_and_keeps_tensorflow_cpu(init):
    d, out, spec = init("jax-vit-like")
    assert spec["framework"] == "jax" and "cpu" not in spec
    assert spec["packages"] == ["absl-py", "clu", "flax", "optax", "tensorflow-datasets", "tensorflow-cpu"]
    assert any(n.startswith("framework jax inferred from setup.py install_requires[2]: flax") for n in out.notes)


def test_the_cuda12_extra_chooses_the_cuda12_plugin(init):
    d, out, spec = init("jax-cuda12-extra")
    assert spec["cuda"] == "12" and out.resolution.variant == "cuda12" and spec["packages"] == ["optax", "chex"]
    assert "pyproject.toml project.dependencies[0]: jax[cuda12]>=0.6: the CUDA 12 build (cuda: '12')" in out.notes


def test_a_jaxlib_pin_steers_jax_like_a_torchvision_pin_steers_torch(init):
    d, out, spec = init("jax-jaxlib-pin")
    assert spec["framework"] == "jax==0.7.2" and str(out.resolution.version) == "0.7.2"
    assert "requirements.txt:2: jaxlib==0.7.2 exists beside jax 0.7.2" in out.notes


def test_jax_tpu_is_refused_in_one_line(tmp_path):
    d = tmp_path / "jax-tpu"
    shutil.copytree(REPOS / "jax-tpu", d)
    with pytest.raises(UsageError) as exc:
        init_project(d, InitOptions(targets=("h100",), no_lock=True))
    assert str(exc.value) == ("requirements.txt:1: jax[tpu]>=0.4.30: a TPU stack (libtpu): envman builds images for "
                              "NVIDIA GPUs and the CPU, and neither runs it")
    assert exc.value.hint.startswith("name the GPU build instead (jax[cuda12], jax[cuda13] or plain jax for the CPU)")
    assert not (d / "envman.yaml").exists()


# ---------------------------------------------------------------------------- envman fit
def test_fit_budgets_a_jax_project_with_xlas_preallocated_share(tmp_path):
    from envman.app.fit import FitOptions, run_fit

    def fit(spec: dict | None):
        d = tmp_path / str(len(list(tmp_path.iterdir())))
        d.mkdir()
        if spec is not None:
            (d / "envman.yaml").write_text(yaml.safe_dump(spec))
        res = run_fit(FitOptions(path=str(d), model="gpt2", batch=8, targets=("h100",)))
        return res.targets[0], res.notes

    h100 = 80 * 2**30
    plain, notes = fit(None)
    assert plain.usable_bytes == int(h100 * 0.9) and not any("allocator" in n for n in notes)
    jax, notes = fit({"name": "t", "framework": "jax>=0.7", "targets": ["h100"]})
    assert jax.usable_bytes == int(h100 * 0.75)
    assert "jax project: its allocator uses 75% of each GPU (jax's default; XLA_PYTHON_CLIENT_MEM_FRACTION changes it)" in notes
    raised, notes = fit({"name": "t", "framework": "jax", "targets": ["h100"], "env": {"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.85"}})
    assert raised.usable_bytes == int(h100 * 0.85) and any("XLA_PYTHON_CLIENT_MEM_FRACTION=0.85 in envman.yaml env" in n for n in notes)
    torch, notes = fit({"name": "t", "framework": "torch", "targets": ["h100"]})
    assert torch.usable_bytes == plain.usable_bytes


def test_a_cuda_extra_pypi_never_had_is_said(m):
    """vision_transformer's vit_jax/requirements.txt: jax[cuda11_cudnn86] from Google's storage (--find-links)."""
    from envman.project.infer import infer_framework, load_dependents

    inf = infer_framework(reqs("jax[cuda11_cudnn86]>=0.4.2", "tensorflow-cpu>=2.4.0"), [],
                          {k: list(v) for k, v in m.frameworks.items()}, load_dependents())
    assert inf.framework == "jax>=0.4.2" and inf.cuda is None and not inf.cpu
    assert ("requirements.txt:1: jax[cuda11_cudnn86]>=0.4.2: 'cuda11_cudnn86' is not one of jax's CUDA builds on PyPI "
            "(cuda, cuda12, cuda13): the stack installs the one envman resolves") in inf.notes
