"""The resolver on the frozen fixture matrix (a copy of matrices/ at 4364329): Kepler to Blackwell, R450 to
R580, torch 1.13 to 2.14, TensorFlow. What the shipped data hands out today: tests/data/test_shipped_matrix.py."""

from __future__ import annotations

import pytest

from envman.errors import ResolutionError, UnknownGpuError, UsageError
from envman.resolve.request import build_request
from envman.resolve.resolver import resolve_stack


def resolve(matrix, **kw):
    return resolve_stack(matrix, build_request(matrix, **kw))


def refuse(matrix, **kw) -> ResolutionError:
    with pytest.raises(ResolutionError) as exc:
        resolve(matrix, **kw)
    return exc.value


# (request, expected framework version, variant, python) — every row a stack that must come out exactly.
CASES = [
    # Hopper / Blackwell on a current driver: the newest release and the plain PyPI build
    (dict(framework="torch", targets=["h100"]), "2.14.1", "cu130", "3.12"),
    (dict(framework="torch", targets=["NVIDIA H100 PCIe"]), "2.14.1", "cu130", "3.12"),
    (dict(framework="torch", targets=["b200"]), "2.14.1", "cu130", "3.12"),
    (dict(framework="torch", targets=["gb300"]), "2.14.1", "cu130", "3.12"),  # 10.3 runs sm_100 SASS
    (dict(framework="torch", targets=["rtx-5090"]), "2.14.1", "cu130", "3.12"),
    (dict(framework="torch", targets=["t4"], python="3.11"), "2.14.1", "cu130", "3.11"),
    (dict(framework="torch==2.7.*", targets=["GeForce RTX 5090"]), "2.7.1", "cu128", "3.12"),
    # old frameworks on new GPUs: the variant that carries the architecture
    (dict(framework="torch==2.0.*", targets=["h100"]), "2.0.1", "cu118", "3.11"),  # cu117 has no sm_90
    (dict(framework="torch==2.0.*", targets=["4090"], driver="525.60.13"), "2.0.1", "cu117", "3.11"),  # sm_86 runs on 8.9; PyPI's default build (cu117) before the index's cu118
    (dict(framework="torch==1.13.*", targets=["rtx-3090"], python="3.10"), "1.13.1", "cu117", "3.10"),
    (dict(framework="torch==2.4.*", targets=["h100"], cuda=">=12.4"), "2.4.1", "cu124", "3.12"),
    (dict(framework="torch==2.6.0+cu124", targets=["a100"]), "2.6.0", "cu124", "3.12"),
    # old GPUs: the newest release whose builds still carry them
    (dict(framework="torch", targets=["k80"]), "2.3.1", "cu118", "3.12"),  # cuDNN 9 dropped Kepler
    (dict(framework="torch", targets=["v100"]), "2.14.1", "cu126", "3.12"),  # cu13x builds start at sm_75
    (dict(framework="torch", targets=["gtx-1080"]), "2.14.1", "cu126", "3.12"),  # sm_60 SASS runs on 6.1
    (dict(framework="torch", targets=["v100", "rtx-5090"]), "2.10.0", "cu128", "3.12"),  # one build serves both
    # drivers: minor-version compatibility, inclusive floors
    (dict(framework="torch==2.4.*", targets=["h100"], driver="470.57.02"), "2.4.1", "cu118", "3.12"),  # R470: not cu121
    (dict(framework="torch", targets=["a100"], driver="450.80.02"), "2.7.1", "cu118", "3.12"),  # R450 at the 11.x floor
    (dict(framework="torch==2.14.*", targets=["h100"], driver="525.60.13"), "2.14.1", "cu126", "3.12"),
    (dict(framework="torch", targets=["rtx-5090"], driver="565.57.01"), "2.11.0", "cu128", "3.12"),  # 13.x needs R580
    (dict(framework="torch", targets=["h100"], driver="535.104.05"), "2.14.1", "cu126", "3.12"),  # R535: 12.x full up to 12.2
    # TensorFlow
    (dict(framework="tensorflow", targets=["h100"]), "2.21.0", "cu125", "3.12"),
    (dict(framework="tensorflow==2.15.*", targets=["a100"]), "2.15.1", "cu122", "3.11"),
    (dict(framework="tensorflow==2.13.*", targets=["a100"]), "2.13.1", "cu118", "3.10"),  # system CUDA → image Python
    # CPU
    (dict(framework="torch", cpu=True), "2.14.1", "cpu", "3.12"),
    (dict(framework="torch==2.13.0", cpu=True, python="3.11"), "2.13.0", "cpu", "3.11"),
]


@pytest.mark.parametrize("req,version,variant,python", CASES, ids=[str(c[0]) for c in CASES])
def test_stack(matrix, req, version, variant, python):
    res = resolve(matrix, **req)
    assert (str(res.version), res.variant, res.python) == (version, variant, python)


def test_pypi_default_has_no_index_but_other_variants_do(matrix):
    assert resolve(matrix, framework="torch", targets=["h100"]).index_url is None
    assert resolve(matrix, framework="torch==2.6.*", targets=["a100"], cuda="12.6").index_url == "https://download.pytorch.org/whl/cu126"
    assert resolve(matrix, framework="torch", cpu=True).index_url == "https://download.pytorch.org/whl/cpu"


def test_new_torch_on_h100_full_stack(matrix):
    res = resolve(matrix, framework="torch", targets=["h100"], python="3.11")
    assert res.cuda == "13.0" and res.cudnn == "9.24.0.43" and res.nccl == "2.30.7"
    assert res.arch_list == ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")
    assert res.base_image == "python:3.11-slim-bookworm" and res.base_kind == "slim"
    assert res.driver_mode == "full" and res.driver_assumed
    assert any(n.startswith("driver: none given; assuming a current driver 580.95.05") for n in res.notes)
    assert dict(res.companions)["torchvision"] == "0.29.1"


def test_minor_version_compat_is_a_warning_with_the_ptx_caveat(matrix):
    res = resolve(matrix, framework="torch==2.4.*", targets=["h100"], driver="470.57.02")
    assert res.driver_mode == "minor-compat"
    assert any("minor-version compatibility" in w and "torch.compile" in w and "520.61.05" in w for w in res.warnings)
    assert any("not cu121 (driver 470.57.02 is below cu121's requirement ≥ 530.30.02" in n for n in res.notes)


def test_newer_driver_is_full_compat_without_warning(matrix):
    res = resolve(matrix, framework="torch==2.7.*", targets=["rtx-5090"], driver="580.95.05")
    assert res.driver_mode == "full"
    assert not [w for w in res.warnings if "minor-version" in w]


def test_ptx_only_coverage_is_a_warning_not_silent(matrix):
    res = resolve(matrix, framework="tensorflow==2.13.*", targets=["a100"])
    assert res.base_kind == "cuda-runtime" and res.base_image.startswith("nvidia/cuda:11.8.0-cudnn8-runtime")
    assert any("covered only by PTX" in w for w in res.warnings)


def test_sass_coverage_preferred_over_newer_ptx_only(matrix):
    # TF 2.16+ carries sm_80 SASS; 2.13's A100 support is PTX only. Unconstrained, SASS wins.
    res = resolve(matrix, framework="tensorflow", targets=["a100"])
    assert not [w for w in res.warnings if "PTX" in w]


def test_tensorflow_and_cuda_uses_slim_base_and_extra(matrix):
    res = resolve(matrix, framework="tensorflow==2.15.*", targets=["a100"])
    assert res.base_kind == "slim" and res.extras == ("and-cuda",)


def test_cuda_devel_needs_devel_image(matrix):
    res = resolve_stack(matrix, build_request(matrix, framework="torch", targets=["h100"], cuda_devel=True))
    assert res.base_kind == "cuda-devel" and "devel" in res.base_image and res.cuda in res.base_image


def test_no_framework_picks_newest_toolkit_for_the_driver(matrix):
    res = resolve(matrix, targets=["h100"], driver="550.54.15")
    assert res.framework is None and res.cuda == "12.4"


def test_jetson_is_refused_naming_jetpack(matrix):
    err = refuse(matrix, framework="torch", targets=["jetson-agx-orin"])
    assert "Jetson" in err.message and "JetPack" in err.message and "l4t" in err.hint


# --- refusals -------------------------------------------------------------------------------


def test_rtx5090_on_torch_2_5_refused_with_torch_2_7_cu128(matrix):
    err = refuse(matrix, framework="torch==2.5.*", targets=["rtx-5090"])
    assert err.conflicts == [
        "no build of 'torch==2.5.*' carries SASS for 12.0 (sm_120, NVIDIA GeForce RTX 5090) (those builds carry sm_37 … sm_90)"
    ]
    first = err.alternatives[0]
    assert first["kind"] == "framework" and first["framework"] == {"name": "torch", "version": "2.7.0", "variant": "cu128"}
    assert first["change"] == "torch>=2.7 (2.7.0 cu128)"
    assert err.exit_code == 3


def test_driver_too_old_for_everything_suggests_upgrade(matrix):
    err = refuse(matrix, framework="torch==2.14.*", targets=["h100"], driver="525.60.12")
    assert any("driver 525.60.12 is too old for every CUDA variant" in c for c in err.conflicts)
    drv = [a for a in err.alternatives if a["kind"] == "driver"]
    assert drv and drv[0]["change"].startswith("upgrade the NVIDIA driver to ≥ 560.35.05 for torch 2.14.1 cu126")


def test_tensorflow_2_15_has_no_python_3_12(matrix):
    err = refuse(matrix, framework="tensorflow==2.15.*", python="3.12", targets=["a100"])
    assert err.conflicts == ["'tensorflow==2.15.*' has no wheels for Python 3.12 (it has 3.9–3.11)"]
    py = [a for a in err.alternatives if a["kind"] == "python"]
    fw = [a for a in err.alternatives if a["kind"] == "framework"]
    assert py[0]["change"] == "use Python 3.11 (tensorflow 2.15.1 cu122)"
    assert fw[0]["framework"]["version"] == "2.16.1"


def test_cuda_requirement_no_variant(matrix):
    err = refuse(matrix, framework="torch==2.5.*", targets=["h100"], cuda=">=12.8")
    assert err.conflicts == ["no variant of 'torch==2.5.*' has CUDA >=12.8 (they have 11.8, 12.1, 12.4)"]


def test_kepler_and_blackwell_in_one_fleet_cannot_share_a_build(matrix):
    err = refuse(matrix, framework="torch", targets=["k80", "rtx-5090"])
    assert any("no single build" in c or "carries SASS" in c for c in err.conflicts)


def test_unknown_framework_version(matrix):
    err = refuse(matrix, framework="torch==9.*", targets=["h100"])
    assert err.conflicts[0].startswith("no torch release in the matrix matches 'torch==9.*' (known: 1.13.0 … 2.14.1)")


# --- bad input: one line, a hint, exit 1 --------------------------------------------------------


def test_unknown_gpu_names_the_closest(matrix):
    with pytest.raises(UnknownGpuError) as exc:
        build_request(matrix, framework="torch", targets=["h1000"])
    assert exc.value.message == "unknown GPU 'h1000'"
    assert "h100" in exc.value.hint and exc.value.exit_code == 1


@pytest.mark.parametrize("kw,message", [
    (dict(framework="pytorh", targets=["h100"]), "--framework: unknown framework 'pytorh'"),
    (dict(framework="torch>>2", targets=["h100"]), "--framework: 'torch>>2' is not a valid requirement"),
    (dict(framework="torch", python="three", targets=["h100"]), "--python: 'three' is not a Python version or specifier"),
    (dict(framework="torch", driver="latest", targets=["h100"]), "--driver: 'latest' is not a driver version"),
    (dict(framework="torch", targets=["h100"], cpu=True), "--cpu and --target exclude each other"),
])
def test_bad_input_messages(matrix, kw, message):
    with pytest.raises(UsageError) as exc:
        build_request(matrix, **kw)
    assert exc.value.message.startswith(message)
    assert exc.value.hint


def test_python_no_release_supports(matrix):
    with pytest.raises(UsageError) as exc:
        resolve(matrix, framework="torch", python="2.7", targets=["h100"])
    assert exc.value.message == "no torch release has wheels for Python 2.7"
    assert exc.value.hint == "torch publishes wheels for Python 3.7–3.14"


def test_target_forms_are_equivalent(matrix):
    a = resolve(matrix, framework="torch", targets=["sm_89"])
    b = resolve(matrix, framework="torch", targets=["8.9"])
    c = resolve(matrix, framework="torch", targets=["rtx-4090"])
    assert a.variant == b.variant == c.variant and a.version == b.version == c.version


def test_deterministic(matrix):
    from envman.resolve.summary import resolution_dict

    kw = dict(framework="torch", targets=["v100", "rtx-5090"], driver="570.124.06")
    assert resolution_dict(resolve(matrix, **kw)) == resolution_dict(resolve(matrix, **kw))


def test_kepler_assumes_its_last_driver_branch_not_a_current_one(matrix):
    res = resolve(matrix, framework="torch", targets=["k80"])
    assert str(res.version) == "2.3.1" and res.variant == "cu118" and res.driver == "470.256.02"
    assert res.driver_mode == "minor-compat"
    assert any("the last R470 driver" in n for n in res.notes)
    assert any("no upgrade is possible" in w for w in res.warnings)


def test_a_driver_past_the_last_branch_of_a_target_is_flagged(matrix):
    res = resolve(matrix, framework="torch==2.3.*", targets=["k80"], driver="535.104.05")
    assert any("cannot drive 3.7 (sm_37, NVIDIA Tesla K80): its support ends with R470" in w for w in res.warnings)


def test_notes_are_values_with_a_topic(matrix):
    """Each decision leaves one reason, addressable by topic; a later decision (a CUDA image's own Python)
    replaces the Python reason instead of editing strings."""
    res = resolve(matrix, framework="torch", targets=["h100"])
    topics = [n.topic for n in res.notes]
    assert topics[:1] == ["driver"] and {"framework", "variant", "python", "base-image"} <= set(topics)
    assert all(isinstance(n, str) for n in res.notes)  # and text wherever text is wanted (JSON, the CLI)
    sys = resolve(matrix, framework="torch==2.4.*", targets=["h100"], cuda_devel=True, python=">=3.10")
    pythons = [n for n in sys.notes if n.topic == "python"]
    assert len(pythons) == 1 and "the Python of nvidia/cuda" in pythons[0], sys.notes
