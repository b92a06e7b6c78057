"""TensorFlow's [and-cuda] locked for real against PyPI (marked `network`): the uv constraints envman adds to hold
the NVIDIA wheels to the variant's CUDA must leave TensorFlow's own pins satisfiable."""

from __future__ import annotations

import pytest

from envman.app.init import InitOptions, init_project
from tests import corpus

pytestmark = pytest.mark.network


def test_handson_ml3_locks_tensorflow_2_14_with_its_cublas_11_11(tmp_path):
    # issue 20: nvidia-cublas-cu11==11.8.* beside tensorflow 2.14.1's ==11.11.3.6 made uv answer "No solution found"
    d = tmp_path / "handson-ml3"
    corpus.copy_repo("ageron__handson-ml3", d)
    init_project(d, InitOptions(targets=("h100",)))
    fw = (d / "requirements.framework.lock.txt").read_text()
    assert "tensorflow==2.14.1 \\" in fw and "nvidia-cublas-cu11==11.11.3.6 \\" in fw
    # the toolkit-numbered wheels are still held to CUDA 11.8, cuDNN to 8.7
    for pin in ("nvidia-cuda-runtime-cu11==11.8.89", "nvidia-cuda-nvcc-cu11==11.8.89", "nvidia-cudnn-cu11==8.7.0.84"):
        assert pin + " \\" in fw, pin
