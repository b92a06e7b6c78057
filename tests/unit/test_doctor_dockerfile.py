"""`envman doctor --dockerfile`: a Dockerfile read statically into the facts its image would have and judged by
the doctor's checks for target GPUs. Knowledge from the frozen fixture matrix; tests/fixtures/dockerfiles holds
envman's own short Dockerfiles, each reproducing the pattern of one real repository's Dockerfile (its first line names
the repository, commit and path), judged without requirements files."""

from __future__ import annotations

from pathlib import Path

import pytest

from envman.matrix.knowledge import knowledge_from_matrix, with_extensions
from envman.matrix.load import load_matrix
from envman.portable.dockerfile import parse_dockerfile
from envman.portable.doctor.checks import run_checks
from envman.portable.doctor.dockerfile_facts import dockerfile_facts, read_base, satisfies
from envman.portable.doctor.report import verdict_line

FIX = Path(__file__).resolve().parent.parent / "fixtures"
K = with_extensions(knowledge_from_matrix(load_matrix(FIX / "matrix")), FIX / "matrix")
H100 = [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "cc": "9.0"}]
RTX5090 = [{"index": 0, "name": "NVIDIA GeForce RTX 5090", "cc": "12.0"}]


def judge(text, gpus=H100, files=None, machine=None):
    facts = dockerfile_facts(parse_dockerfile(text), K, gpus, read=lambda p: (files or {}).get(Path(p).name),
                             machine=machine)
    return facts, run_checks(facts, K)


def ids(findings, severities=("error", "warn")):
    return [(f.severity, f.check) for f in findings if f.severity in severities]


def test_cuda_11_8_devel_then_pip_install_torch_pulls_a_second_cuda():
    facts, found = judge("FROM nvidia/cuda:11.8.0-devel-ubuntu22.04\nRUN apt-get update && apt-get install -y python3-pip\n"
                         "RUN pip install torch\nRUN pip install flash-attn --no-build-isolation\n")
    assert facts["python"]["version"] == "3.10"  # Ubuntu 22.04's python3, from matrices/base_images.yaml
    assert facts["torch"]["version"] == "2.14.1" and facts["torch"]["cuda"] == "13.0"  # PyPI's default build
    assert ids(found) == [("error", "ext-nvcc-mismatch"), ("warn", "dockerfile-two-cudas")]
    two = next(f for f in found if f.check == "dockerfile-two-cudas")
    assert two.verdict.startswith("Dockerfile:3: torch 2.14.1+cu130 brings the CUDA 13.0 libraries in its nvidia-* "
                                  "wheels, but the image is FROM nvidia/cuda:11.8.0-devel-ubuntu22.04 (CUDA 11.8)")
    assert two.remedy.endswith("or run `envman init` in the project to generate a Dockerfile that is right for its GPUs")
    assert verdict_line(found, facts).startswith("training will NOT work in this Dockerfile's image: 1 error")


def test_the_matching_build_from_its_index_is_one_cuda():
    _, found = judge("FROM nvidia/cuda:12.6.3-cudnn-runtime-ubuntu24.04\nRUN apt-get install -y python3-pip\n"
                     "RUN pip install torch==2.7.1 --index-url https://download.pytorch.org/whl/cu126\n")
    assert ids(found) == []


def test_a_requirements_file_that_replaces_the_base_images_torch():
    text = ("FROM pytorch/pytorch:2.1.0-cuda12.1-cudnn8-runtime\nCOPY requirements.txt /tmp/\n"
            "RUN pip install -r /tmp/requirements.txt\n")
    facts, found = judge(text, files={"requirements.txt": "transformers\ntorch==2.5.1\n"})
    assert facts["torch"]["version"] == "2.5.1"
    (f,) = [f for f in found if f.check == "dockerfile-framework-replaced"]
    assert f.verdict.startswith("Dockerfile:3: installs torch 2.5.1 (CUDA 12.4) over the torch 2.1.0 (CUDA 12.1) that "
                                "FROM pytorch/pytorch:2.1.0-cuda12.1-cudnn8-runtime ships")
    # near-miss: the same pin as the base's
    _, same = judge(text, files={"requirements.txt": "transformers\ntorch==2.1.0\n"})
    assert [f for f in same if f.check == "dockerfile-framework-replaced"] == []
    # the file is not there: said, not guessed
    _, unread = judge(text)
    assert ids(unread, ("info",)) == [("info", "dockerfile-requirements-unread")]


def test_no_nvidia_environment_in_a_python_base():
    _, found = judge("FROM python:3.11-slim\nRUN pip install torch==2.7.1 --index-url https://download.pytorch.org/whl/cu128\n")
    # a note: `docker run --gpus all` (the install pages' way) needs no NVIDIA_* variables; the bare runtime does
    assert ids(found, ("error", "warn", "info")) == [("info", "dockerfile-no-nvidia-env")]
    _, fixed = judge("FROM python:3.11-slim\nENV NVIDIA_VISIBLE_DEVICES=all NVIDIA_DRIVER_CAPABILITIES=compute,utility\n"
                     "RUN pip install torch==2.7.1 --index-url https://download.pytorch.org/whl/cu128\n")
    assert ids(fixed) == []


def test_python_3_13_with_a_tensorflow_that_has_no_3_13_wheel():
    _, pinned = judge("FROM python:3.13-slim\nRUN pip install 'tensorflow[and-cuda]==2.15.1'\n")
    (f,) = [f for f in pinned if f.severity == "error"]
    assert f.check == "pin-no-wheels-for-python" and f.verdict.startswith(
        "Dockerfile:2 pins tensorflow==2.15.1, which has no wheels for Python 3.13")
    _, unpinned = judge("FROM python:3.15-slim\nRUN pip install tensorflow\n")
    assert ids(unpinned) == [("error", "dockerfile-no-wheel")]


def test_an_old_torch_for_a_new_gpu():
    _, found = judge("FROM python:3.11-slim\nENV NVIDIA_VISIBLE_DEVICES=all\nRUN pip install torch==2.5.1\n", RTX5090)
    assert ids(found) == [("error", "arch-not-covered")]


def test_a_base_image_newer_than_this_machines_driver():
    _, found = judge("FROM nvidia/cuda:12.8.1-runtime-ubuntu24.04\n", machine={"driver": "470.256.02",
                                                                               "driver_cuda": "11.4"})
    assert ids(found) == [("error", "dockerfile-base-cuda-newer")]


@pytest.mark.parametrize("version, spec, ok", [
    ("2.5.1", ">=2.0,<2.6", True), ("2.6.0", ">=2.0,<2.6", False), ("2.1.2", "==2.1.*", True),
    ("2.2.0", "~=2.1", True), ("3.0.0", "~=2.1", False), ("2.1.0", "!=2.1.0", False), ("2.1.0", "", True)])
def test_specifiers(version, spec, ok):
    assert satisfies(version, spec) is ok


def test_base_image_tags():
    assert read_base("nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04", K) == {
        "image": "nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04", "kind": "cuda", "cuda": "12.4", "cudnn": "9",
        "flavor": "devel", "python": "3.10", "distro": "ubuntu22.04"}
    assert read_base("pytorch/pytorch:2.1.0-cuda12.1-cudnn8-devel", K)["framework"] == {
        "name": "torch", "version": "2.1.0", "cuda": "12.1"}
    assert read_base("python:3.13-slim-bookworm", K) == {"image": "python:3.13-slim-bookworm", "kind": "python",
                                                         "python": "3.13"}
    assert read_base("hiyouga/pytorch:th2.6.0-cu124-flashattn2.7.4-cxx11abi0-devel", K)["framework"] == {
        "name": "torch", "version": "2.6.0", "cuda": "12.4"}
    assert read_base("registry.example.com/team/trainer:v3", K)["kind"] == "unknown"


# What envman doctor --dockerfile says on the patterns of real repositories' Dockerfiles, for an H100 (errors and
# warnings; info lines name what was not read). Reviewed one by one: each line is a true statement about that file;
# each fixture gives the same facts and findings as the repository's file did (compared when they were written).
REAL = {
    "alpaca-lora": [],  # CUDA 11.8 base + a cu118 torch from the index: one CUDA
    "alphafold": [],  # JAX, which the doctor does not judge yet
    "coqui-tts": [],  # NGC base: not in the matrix (info)
    # (the repository builds DeepSpeed from install.sh, which the reader does not follow, so the fixture leaves it
    # out: the nvcc 12.2 against torch's 11.7 is said by dockerfile-two-cudas, not as a build that will fail)
    "deepspeed": [("error", "arch-not-covered"), ("warn", "dockerfile-two-cudas")],
    "detectron2": [],  # torch 1.10: not in the matrix (info)
    "faceswap-gpu": [],  # its requirements file is not kept (info)
    "fooocus": [],
    "llama-cpp-full-cuda": [],
    "llama-factory": [],
    "mmdetection": [],  # torch 1.6.0 from the base: not in the matrix (info)
    "text-generation-webui": [],
    "transformers-pytorch-gpu": [],  # its torch requirement is a shell variable the reader leaves alone
    "ultralytics": [],  # pytorch/pytorch:latest: unknown (info)
}


@pytest.mark.parametrize("name", sorted(REAL))
def test_real_dockerfiles(name):
    path = FIX / "dockerfiles" / f"{name}.Dockerfile"
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# envman's own fixture reproducing the pattern of ")
    _, found = judge(text)
    assert ids(found) == REAL[name]


def test_every_real_dockerfile_is_covered():
    assert sorted(p.stem.removesuffix(".Dockerfile") for p in (FIX / "dockerfiles").glob("*.Dockerfile")) == sorted(REAL)
    assert len(REAL) >= 10


def test_a_project_directory_names_its_own_dockerfiles_not_those_envman_wrote(tmp_path):
    from envman.app.dockerfile_doctor import dockerfile_paths
    from envman.files import with_header

    (tmp_path / "Dockerfile").write_text(with_header("FROM python:3.11-slim\n", "0" * 64), encoding="utf-8")
    (tmp_path / "Dockerfile.dev").write_text("FROM python:3.11-slim\n", encoding="utf-8")
    assert dockerfile_paths([str(tmp_path)]) == [tmp_path / "Dockerfile.dev"]
    (tmp_path / "Dockerfile").write_text("# edited by hand, no longer envman's\nFROM python:3.11\n", encoding="utf-8")
    assert sorted(dockerfile_paths([str(tmp_path)])) == [tmp_path / "Dockerfile", tmp_path / "Dockerfile.dev"]


def test_a_shell_comment_after_an_install_is_not_packages():
    """detectron2's Dockerfile pattern (`pip install --user tensorboard cmake   # cmake from apt-get is too old`): sh
    ends the command at a word that begins with #, so `from`, `apt-get`, `is` … are no packages; a # inside a word
    (a wheel URL's #sha256=) stays part of it."""
    from envman.portable.dockerfile import parse_conda, parse_pip

    assert parse_pip("pip install --user tensorboard cmake   # cmake from apt-get is too old")["packages"] == \
        ["tensorboard", "cmake"]
    assert parse_pip("pip install https://h/p-1-py3-none-any.whl#sha256=ab torch#x")["packages"] == \
        ["https://h/p-1-py3-none-any.whl#sha256=ab", "torch#x"]
    assert parse_conda("conda install -c pytorch pytorch  # the GPU build")["packages"] == ["pytorch"]
