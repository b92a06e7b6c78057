"""A project's own lines on the CUDA wheels beside the holds envman adds for jax/tensorflow (issue 38): the CUDA
X.Y is held to the series the resolution chose, cuDNN and NCCL to the build's floors only; a project line no held
version meets is ONE refusal naming its file:line and the matrix fact; the project's floors on CUDA-numbered
wheels move the CUDA the resolver picks. Patterns seen in AI-Hypercomputer/maxtext@e591f30 (its cuda12 file asks
`nvidia-*-cu12>=12.9`) and young-geng/EasyLM@fe5b2c3 (torch 2.3.0, which pins NCCL 2.20.5, beside jax)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from envman.errors import UsageError
from envman.lock.pins import _meets, cuda_constraints
from envman.matrix.load import load_matrix
from envman.project.infer import infer_framework, load_dependents
from envman.project.req import Req
from envman.resolve.request import build_request
from envman.resolve.resolver import resolve_stack


@pytest.fixture(scope="module")
def m():
    return load_matrix()


def jax(m, **kw):
    return resolve_stack(m, build_request(m, framework="jax", targets=["a100"], driver="535.104.05", **kw))


def reqs(*lines):
    return [Req(Requirement(x), f"requirements/cuda12.txt:{i + 1}") for i, x in enumerate(lines)]


def test_cudnn_and_nccl_are_held_to_floors_the_cuda_to_its_series(m):
    cons = set(cuda_constraints(jax(m), m.toolkit_wheels))
    assert {"nvidia-cuda-runtime-cu12==12.8.*", "nvidia-cudnn-cu12>=9.10,<10", "nvidia-nccl-cu12>=2.18,<3"} <= cons


def test_a_second_frameworks_exact_nccl_meets_the_floor(m):
    # EasyLM: torch 2.3.0 pins nvidia-nccl-cu12==2.20.5; the jax stack held ==2.18.* and uv refused
    cons = cuda_constraints(jax(m), m.toolkit_wheels, reqs("nvidia-nccl-cu12==2.20.5", "nvidia-cudnn-cu12>=9.14.0.64"))
    assert "nvidia-nccl-cu12>=2.18,<3" in cons


def test_a_floor_above_the_held_cuda_is_one_refusal_naming_the_line_and_the_fact(m):
    lines = reqs("numpy", "nvidia-cuda-runtime-cu12>=12.9.79 ; sys_platform == 'linux'")
    with pytest.raises(UsageError) as e:
        cuda_constraints(jax(m), m.toolkit_wheels, lines)
    assert str(e.value) == (
        "requirements/cuda12.txt:2: asks for nvidia-cuda-runtime-cu12>=12.9.79; sys_platform == \"linux\", but the "
        "stack holds nvidia-cuda-runtime-cu12==12.8.*: CUDA 12.8 of jax 0.12.0 cuda12 (matrices/jax.yaml, from its "
        "wheels' floors on PyPI)")
    assert e.value.hint == ("re-run `envman init` with --cuda 12.9 (that build takes any CUDA 12.x its floors allow), "
                            "or relax the line")


def test_a_line_below_a_floor_is_refused_with_relax_and_a_false_marker_is_not(m):
    with pytest.raises(UsageError) as e:
        cuda_constraints(jax(m), m.toolkit_wheels, reqs("nvidia-nccl-cu12==2.16.5"))
    assert str(e.value).endswith("but the stack holds nvidia-nccl-cu12>=2.18,<3: NCCL >= 2.18 of jax 0.12.0 cuda12 "
                                 "(matrices/jax.yaml, from its wheels' floors on PyPI)")
    assert e.value.hint == "relax the line, or drop it (the stack brings that wheel)"
    assert cuda_constraints(jax(m), m.toolkit_wheels, reqs("nvidia-nccl-cu12==2.16.5; sys_platform == 'darwin'"))


def test_a_cuda_above_the_builds_moves_a_floor_build_within_its_major(m):
    res = jax(m, cuda=">=12.9,<13")
    assert (res.variant, res.cuda, res.min_driver) == ("cuda12", "12.9", str(m.cuda_release(Version("12.9")).min_driver))
    assert "nvidia-cuda-runtime-cu12==12.9.*" in cuda_constraints(res, m.toolkit_wheels)
    assert jax(m, cuda="12").cuda == "12.8"  # nothing asks more: the oldest the floors allow, as the matrix says


def test_the_projects_cuda_floors_bound_the_cuda_it_infers(m):
    rel = {k: list(v) for k, v in m.frameworks.items()}
    inf = infer_framework(reqs("jax[cuda12]>=0.8.0", "nvidia-cublas-cu12>=12.9.1.4",
                               "nvidia-cuda-runtime-cu12>=12.9.79 ; sys_platform == 'linux'",
                               "nvidia-cuda-nvcc-cu12>=12.6"), [], rel, load_dependents())
    assert inf.cuda == ">=12.9,<13"
    assert ("requirements/cuda12.txt:3: nvidia-cuda-runtime-cu12>=12.9.79; sys_platform == \"linux\": CUDA 12.9 or "
            "newer (cuda: '>=12.9,<13')") in inf.notes
    # another major's extra is not bent by a cu12 line; a line that sets no floor says nothing
    assert infer_framework(reqs("jax[cuda13]", "nvidia-cuda-runtime-cu12>=12.9"), [], rel, load_dependents()).cuda == "13"
    assert infer_framework(reqs("jax", "nvidia-cuda-runtime-cu12<13"), [], rel, load_dependents()).cuda is None
    exported = infer_framework(reqs("torch==2.4.1", "nvidia-cuda-cupti-cu12==12.1.105"), [], rel, load_dependents())
    assert exported.cuda == "==12.1.*" and ("requirements/cuda12.txt:2: nvidia-cuda-cupti-cu12==12.1.105: CUDA 12.1 "
                                           "(cuda: '==12.1.*')") in exported.notes


series = st.tuples(st.integers(0, 3), st.integers(0, 12)).map(lambda t: f"{t[0] + 10}.{t[1]}")
bound = st.tuples(st.sampled_from([">=", ">", "<", "<=", "==", "!="]), series, st.integers(0, 120)).map(
    lambda t: f"{t[0]}{t[1]}.{t[2]}" if t[0] != "==" or t[2] % 2 else f"=={t[1]}.*")


GRID = [f"{a}.{b}.{c}" for a in range(9, 15) for b in range(14) for c in (0, 1, 60, 119, 121)]


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hold=st.one_of(series.map(lambda s: f"=={s}.*"), series.map(lambda s: f">={s},<{int(s.split('.')[0]) + 1}")),
       line=st.lists(bound, min_size=1, max_size=2).map(",".join))
def test_meets_agrees_with_every_version_on_a_grid(hold, line):
    h, s = SpecifierSet(hold), SpecifierSet(line)
    # a version on the grid in both is never missed (and _meets says True only on a probe that is in both)
    assert _meets(h, s) or not any(h.contains(v) and s.contains(v) for v in GRID)
