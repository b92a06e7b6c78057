"""The CUDA wheels envman holds for jax beside a project's own lines on them, locked for real against PyPI (marked
`network`; issue 38). Two tiny projects reproduce what two repositories showed: a cuda12 requirements file with
`nvidia-*-cu12>=12.9` floors (AI-Hypercomputer/maxtext@e591f30) and torch 2.3.0, which pins NCCL 2.20.5, beside
jax (young-geng/EasyLM@fe5b2c3). Before, uv refused both."""

from __future__ import annotations

import re

import pytest
from packaging.version import Version

from envman.app.init import InitOptions, init_project
from envman.errors import UsageError

pytestmark = pytest.mark.network

FLOORS = ("jax[cuda12]>=0.8.0\nnvidia-cuda-runtime-cu12>=12.9.79 ; sys_platform == 'linux'\n"
          "nvidia-cudnn-cu12>=9.14.0.64 ; sys_platform == 'linux'\nnvidia-nccl-cu12>=2.28.3 ; sys_platform == 'linux'\n")


def locked(d, name):
    return re.search(rf"^{name}==(\S+) ", (d / "requirements.lock.txt").read_text(), re.M)[1]


def test_the_projects_cuda_floors_lift_the_jax_build_to_cuda_12_9(tmp_path):
    (tmp_path / "requirements.txt").write_text(FLOORS)
    init_project(tmp_path, InitOptions(targets=("h100",)))
    assert "cuda: '>=12.9,<13'" in (tmp_path / "envman.yaml").read_text()
    assert locked(tmp_path, "nvidia-cuda-runtime-cu12").startswith("12.9.")
    assert Version(locked(tmp_path, "nvidia-nccl-cu12")) >= Version("2.28.3")


def test_a_cuda_the_floors_exclude_is_one_refusal_before_uv(tmp_path):
    (tmp_path / "requirements.txt").write_text(FLOORS)
    with pytest.raises(UsageError) as e:
        init_project(tmp_path, InitOptions(targets=("h100",), cuda="12.8"))
    assert str(e.value).startswith("requirements.txt:2: asks for nvidia-cuda-runtime-cu12>=12.9.79; sys_platform == "
                                   "\"linux\", but the stack holds nvidia-cuda-runtime-cu12==12.8.*: CUDA 12.8 of jax ")
    assert e.value.hint.startswith("re-run `envman init` with --cuda 12.9")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["requirements.txt"]  # nothing half-written


def test_torch_beside_jax_gets_the_nccl_it_pins(tmp_path):
    # EasyLM's pair on the fixture matrix's jax: 0.4.30 cuda12 (CUDA 12.1, floors cuDNN 9.0, NCCL 2.18) beside
    # torch 2.4.0, which pins nvidia-nccl-cu12==2.20.5 and nvidia-cudnn-cu12==9.1.0.70
    (tmp_path / "requirements.txt").write_text("jax[cuda12]==0.4.30\ntorch==2.4.0\n")
    init_project(tmp_path, InitOptions(targets=("h100",), python="3.10"))
    assert locked(tmp_path, "nvidia-nccl-cu12") == "2.20.5" and locked(tmp_path, "torch") == "2.4.0"
    assert locked(tmp_path, "nvidia-cuda-runtime-cu12").startswith("12.1.")
