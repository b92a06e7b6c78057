"""An index's variants.json (PEP 825, draft) checked against the matrix (tools/matrix/pep825.py): the reference is
PyTorch's own variant wheels, the properties of torch 2.8.0's cu126/cu128/cu129 variant wheels
(tests/fixtures/variants/README.md says where they were read)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envman.matrix.variants import properties_for
from tools.matrix.pep825 import check_variants, parse_variants_json, variant_properties

PYTORCH_280 = Path(__file__).resolve().parent.parent / "fixtures" / "variants" / "torch-2.8.0-variants.json"


def release(matrix, version: str):
    return next(r for r in matrix.frameworks["torch"] if str(r.version) == version)


def test_properties_follow_the_nvidia_providers_names_and_sort_lexically(matrix):
    v = release(matrix, "2.14.1").variant("cu130")
    assert variant_properties(v) == {"nvidia": {
        "cuda_version_lower_bound": ["13.0"],
        "sm_arch": ["100_real", "120_real", "75_real", "80_real", "86_real", "90_real"]}}
    assert properties_for("12.9", ["sm_90", "sm_90a"], ["sm_120"]) == {"nvidia": {
        "cuda_version_lower_bound": ["12.9"], "sm_arch": ["120_virtual", "90_real"]}}  # sm_90a: no provider value
    assert variant_properties(release(matrix, "2.14.1").variant("cpu")) == {}  # the null variant


def doc(data: dict, source: str = "variants.json"):
    parsed, problems = parse_variants_json(data, source)
    assert problems == []
    return parsed


def test_the_matrix_agrees_with_pytorchs_own_variant_wheels_of_torch_2_8_0(matrix):
    published = json.loads(PYTORCH_280.read_text())
    findings = check_variants(release(matrix, "2.8.0"), doc(published))
    # SASS and PTX lists agree for every label; PyTorch's cu126 wheels ask only a CUDA 12 driver (minor-version
    # compatibility), which envman reports without calling it wrong
    assert [(f.severity, f.label) for f in findings] == [("info", "cu126")]
    assert "relies on CUDA minor-version compatibility" in findings[0].message
    for label in ("cu126", "cu128", "cu129"):
        ours = variant_properties(release(matrix, "2.8.0").variant(label))["nvidia"]["sm_arch"]
        assert ours == published["variants"][label]["nvidia"]["sm_arch"]


def test_an_index_that_claims_sass_the_wheel_lacks_is_an_error_and_one_that_omits_it_a_warning(matrix):
    data = {"default-priorities": {"namespace": ["nvidia"]}, "variants": {"cu130": {"nvidia": {
        "cuda_version_lower_bound": ["13.0"],
        "sm_arch": ["100_real", "120_real", "70_real", "80_real", "86_real", "90_real"]}}}}
    findings = check_variants(release(matrix, "2.14.1"), doc(data))
    assert [(f.severity, f.message) for f in findings] == [
        ("error", "torch 2.14.1 cu130: the index says SASS for sm_70, envman measured none in the wheel: an installer "
                  "would pick it for those GPUs and it would fail there"),
        ("warn", "torch 2.14.1 cu130: the index omits SASS for sm_75, which the wheel carries: an installer would pass "
                 "it over there"),
    ]


def test_an_uncertain_matrix_entry_makes_the_contradiction_a_warning(matrix):
    data = json.loads(PYTORCH_280.read_text())
    data["variants"]["cu126"]["nvidia"]["sm_arch"].append("37_real")  # cu126 of 2.8 is uncertain in the matrix
    (f,) = [f for f in check_variants(release(matrix, "2.8.0"), doc(data)) if f.severity != "info"]
    assert f.severity == "warn" and "SASS for sm_37; envman's matrix has none, but marks this variant uncertain" in f.message


@pytest.mark.parametrize("nvidia, severity, text", [
    ({"cuda_version_lower_bound": ["11.8"]}, "error", "admits drivers of CUDA 11.8, but a CUDA 13.0 build needs a CUDA 13 driver"),
    ({"cuda_version_upper_bound": ["13.0"]}, "error", "excludes every driver that runs a CUDA 13.0 build"),
    ({"cuda_version_upper_bound": ["14"]}, None, ""),
])
def test_cuda_bounds(matrix, nvidia, severity, text):
    sm = variant_properties(release(matrix, "2.14.1").variant("cu130"))["nvidia"]["sm_arch"]
    data = {"default-priorities": {"namespace": ["nvidia"]}, "variants": {"cu130": {"nvidia": {**nvidia, "sm_arch": sm}}}}
    findings = check_variants(release(matrix, "2.14.1"), doc(data))
    assert [(f.severity, text in f.message) for f in findings] == ([(severity, True)] if severity else [])


def test_what_the_pep_requires_of_the_file_is_checked():
    bad = {"default-priorities": {}, "variants": {"CU128!": {}, "cu126": {"nvidia": {"sm_arch": []}},
                                                  "cu130": {"x86_64": {"level": ["v3"]}}}}
    _, problems = parse_variants_json(bad, "i/torch-2.8.0-variants.json")
    assert problems == [
        "i/torch-2.8.0-variants.json: default-priorities.namespace: missing (REQUIRED: a list of namespaces)",
        "i/torch-2.8.0-variants.json: variants.CU128!: not a variant label (^[0-9a-z_.]{1,16}$)",
        "i/torch-2.8.0-variants.json: variants.cu126.nvidia.sm_arch: not a feature with a non-empty list of values",
        "i/torch-2.8.0-variants.json: default-priorities.namespace lacks x86_64 (it MUST list every namespace the "
        "variants use)",
    ]
