"""The loader: exact messages and every problem at once, on a broken copy of the frozen fixture matrix."""

from __future__ import annotations

import pytest

from envman.errors import MatrixError
from envman.matrix.load import _load_cached, load_matrix


def _problems(d) -> list[str]:
    _load_cached.cache_clear()
    with pytest.raises(MatrixError) as exc:
        load_matrix(d)
    return exc.value.problems


def _edit(path, old: str, new: str, after: str = "") -> None:
    """Replace the first ``old`` after ``after`` in one file of the (frozen) fixture copy."""
    text = path.read_text()
    at = text.index(after)
    at = text.index(old, at)
    path.write_text(text[:at] + new + text[at + len(old):])


def test_fixture_matrix_loads(matrix_copy):
    _load_cached.cache_clear()
    m = load_matrix(matrix_copy)
    versions = [str(r.version) for r in m.frameworks["torch"]]
    assert versions[0] == "2.14.1" and versions[-1] == "1.13.0" and "2.7.1" in versions  # newest first
    assert str(m.cuda[0].min_driver) == "615.00"  # driver versions keep their zero padding


def test_reports_every_problem_at_once_with_file_and_path(matrix_copy):
    torch, gpus = matrix_copy / "torch.yaml", matrix_copy / "gpus.yaml"
    _edit(torch, 'cuda: "12.8"', "cuda: 12.8", after='line: "2.7"')
    _edit(torch, 'source: "https://pypi.org/project/torch/2.7.0/"', "x: 1", after='line: "2.7"')
    _edit(gpus, 'cc: "8.9"', 'cc: "eight"', after="id: rtx-4090")
    assert _problems(matrix_copy) == [
        "gpus.yaml: gpus[57].cc: expected a compute capability like '8.9', got 'eight'",
        "torch.yaml: releases[8].variants[2].cuda: write versions as quoted strings, got 12.8",
        "torch.yaml: releases[8].patches[0].source: missing: every entry cites a primary source URL or 'measured: <how>'",
    ]


def test_cross_check_cuda_and_arch_range(matrix_copy):
    torch = matrix_copy / "torch.yaml"
    _edit(torch, "archs: [sm_37, sm_50, sm_60, sm_70, sm_75, sm_80, sm_86, sm_90]", "archs: [sm_50, sm_90, sm_120]",
          after='line: "2.7"')
    _edit(torch, 'name: cu128\n        cuda: "12.8"', 'name: cu127\n        cuda: "12.7"', after='line: "2.7"')
    assert _problems(matrix_copy) == [
        "torch.yaml: 2.7.1 cu118: archs: sm_120 cannot be compiled by CUDA 11.8",
        "torch.yaml: 2.7.1 cu127: cuda: 12.7 is not a CUDA release in cuda.yaml",
        "torch.yaml: 2.7.0 cu118: archs: sm_120 cannot be compiled by CUDA 11.8",
        "torch.yaml: 2.7.0 cu127: cuda: 12.7 is not a CUDA release in cuda.yaml",
    ]


def test_variant_name_must_match_cuda_and_pypi_default_must_exist(matrix_copy):
    torch = matrix_copy / "torch.yaml"
    _edit(torch, "name: cu118", "name: cu117", after='line: "2.7"')
    _edit(torch, "pypi_default: cu126", "pypi_default: cu130", after='line: "2.7"')
    assert _problems(matrix_copy) == [
        "torch.yaml: releases[8].variants[0].name: 'cu117' does not match cuda '11.8' (expected cu118)",
        "torch.yaml: releases[8].pypi_default: 'cu130' is not one of this release's variants (cpu, cu117, cu126, cu128)",
    ]


def test_gpu_alias_collisions_after_normalisation(matrix_copy):
    _edit(matrix_copy / "gpus.yaml", '"4090"]', '"4090", "H-100"]', after="id: rtx-4090")
    assert _problems(matrix_copy) == [
        "gpus.yaml: gpus[57].aliases: 'H-100' also names h100-sxm (normalised: 'h100')",
    ]


def test_yaml_syntax_error_names_line(matrix_copy):
    (matrix_copy / "cudnn.yaml").write_text("schema: 1\nreleases: [\n")
    probs = _problems(matrix_copy)
    assert len(probs) == 1 and probs[0].startswith("cudnn.yaml: line 3, column 1: invalid YAML")


def test_schema_version_and_missing_file(matrix_copy):
    (matrix_copy / "cudnn.yaml").write_text("schema: 2\nreleases: []\n")
    (matrix_copy / "gpus.yaml").unlink()
    assert _problems(matrix_copy) == [
        "gpus.yaml: (file): cannot read: No such file or directory",
        "cudnn.yaml: schema: expected 1, got 2",
    ]


def test_uncertain_entries_need_a_note(matrix_copy):
    _edit(matrix_copy / "cudnn.yaml", 'min_cc: "3.5"', 'min_cc: "3.5"\n    uncertain: true', after='version: "8.0"')
    assert _problems(matrix_copy) == ["cudnn.yaml: releases[0].note: missing: an uncertain entry says what is unsure"]


def test_toolkit_wheels_are_data_with_a_source(matrix_copy):
    _load_cached.cache_clear()
    tw = load_matrix(matrix_copy).toolkit_wheels
    assert "nvidia-cublas" in tw.names and tw.suffix_dropped_from == 13 and tw.prov.source.startswith("https://")
    assert tw.for_major("nvidia-cublas", 12) == ["nvidia-cublas-cu12"]
    assert tw.for_major("nvidia-cublas", 13) == ["nvidia-cublas-cu13", "nvidia-cublas"]
    assert "nvidia-cublas" in tw.minor_numbered(12) and "nvidia-cublas" not in tw.minor_numbered(11)
    cuda = matrix_copy / "cuda.yaml"
    _edit(cuda, "nvidia-cuda-nvrtc,", "NVIDIA_Cuda_NVRTC,", after="toolkit_wheels:")
    _edit(cuda, 'source: "https://pypi.org/simple/cuda-toolkit/', 'x: "', after="toolkit_wheels:")
    _edit(cuda, "nvidia-cublas: [11, 13]", "nvidia-cufft: [11]\n    nvidia-cublas: [eleven]", after="own_minor:")
    assert _problems(matrix_copy) == [
        "cuda.yaml: toolkit_wheels.names: expected normalized distribution names (PEP 503), got ['NVIDIA_Cuda_NVRTC']",
        "cuda.yaml: toolkit_wheels.own_minor.nvidia-cublas: expected a list of CUDA majors (integers), got ['eleven']",
        "cuda.yaml: toolkit_wheels.own_minor.nvidia-cufft: 'nvidia-cufft' is not in toolkit_wheels.names",
        "cuda.yaml: toolkit_wheels.source: missing: every entry cites a primary source URL or 'measured: <how>'",
    ]
