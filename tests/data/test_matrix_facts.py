"""Facts of the shipped matrices that issue #13 corrected, one test each, with where they come from.

These assert the shipped data on purpose (tests/unit runs on data of its own where it can): when a
fact changes upstream, the data and this file change together, with the new source.
"""

from __future__ import annotations

from packaging.version import Version


def _release(matrix, framework: str, version: str):
    v = Version(version)
    for rel in matrix.frameworks[framework]:
        if (rel.version.major, rel.version.minor) == (v.major, v.minor):
            return rel
    raise AssertionError(f"{framework} {version} not in the matrix")


def _variant(matrix, version: str, name: str):
    var = _release(matrix, "torch", version).variant(name)
    assert var is not None, f"torch {version} has no {name} variant"
    return var


def test_torch_2_15_is_the_newest_with_its_pypi_pins(matrix):
    # torch-2.15.0 wheel METADATA (PyPI): cuda-toolkit==13.2.2, nvidia-cudnn-cu13==9.26.0.51,
    # nvidia-nccl-cu13==2.30.7; torch/version.py '2.15.0+cu132'
    newest = matrix.frameworks["torch"][0]
    assert str(newest.version) == "2.15.0"
    assert newest.pypi_default == "cu132"
    cu132 = newest.variant("cu132")
    assert (str(cu132.cuda), cu132.cudnn, cu132.nccl) == ("13.2", "9.26.0.51", "2.30.7")
    assert [a.sm for a in cu132.archs] == ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]
    assert cu132.ptx == () and cu132.prov.uncertain  # arch list not measured in libtorch_cuda.so
    assert dict(newest.companions) == {"torchvision": "0.29.2", "torchaudio": None}


def test_torch_2_15_requires_python_3_11_and_adds_3_15(matrix):
    # PyPI: Requires-Python >=3.11; cp311..cp315 wheels, no cp310
    assert _release(matrix, "torch", "2.15").python == ("3.11", "3.12", "3.13", "3.14", "3.15")


def test_cuda_13_2_and_cudnn_9_26_exist_for_the_2_15_default(matrix):
    cr = matrix.cuda_release(Version("13.2"))
    assert cr is not None and cr.latest_update == "13.2.2" and str(cr.min_driver) == "595.71.05"
    assert matrix.cudnn_release("9.26.0.51") is not None
    assert str(matrix.cuda_major(13).minor_compat_floor) == "580.65.06"
    assert any(i.cuda == Version("13.2") for i in matrix.base_images.cuda)


def test_torch_2_11_cu128_bundles_cudnn_9_19(matrix):
    assert _variant(matrix, "2.11", "cu128").cudnn == "9.19.0.56"
    assert _variant(matrix, "2.11", "cu130").cudnn == "9.19.0.56"


def test_torch_2_12_to_2_14_cu126_bundle_nccl_2_29_3(matrix):
    for line in ("2.12", "2.13", "2.14"):
        var = _variant(matrix, line, "cu126")
        assert var.nccl == "2.29.3", line
        assert var.prov.uncertain  # the cu126 METADATA is on download.pytorch.org, not read


def test_cuda_13_0_latest_update_is_13_0_3_everywhere(matrix):
    assert matrix.cuda_release(Version("13.0")).latest_update == "13.0.3"
    imgs = [i for i in matrix.base_images.cuda if i.cuda == Version("13.0")]
    assert imgs and all(i.update == "13.0.3" for i in imgs)


def test_no_ptx_in_release_wheels_before_2_13(matrix):
    # pytorch/pytorch#188914: release builds before 2.13 carried no PTX; 2.13.0 and 2.14.1 measured: none
    for rel in matrix.frameworks["torch"]:
        if rel.version < Version("2.15"):
            for var in rel.variants:
                assert var.ptx == (), f"torch {rel.version} {var.name} lists PTX {var.ptx}"


def test_torchaudio_ends_at_2_11(matrix):
    comps = {str(r.version): dict(r.companions) for r in matrix.frameworks["torch"]}
    assert comps["2.11.0"]["torchaudio"] == "2.11.0"
    assert comps["2.12.0"]["torchaudio"] == comps["2.12.1"]["torchaudio"] == "2.11.0"
    for v in ("2.13.0", "2.14.0", "2.14.1", "2.15.0"):
        assert comps[v]["torchaudio"] is None, v  # null: no torchaudio exists for this torch
