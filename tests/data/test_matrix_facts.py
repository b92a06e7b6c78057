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
    assert cu132.ptx == () and not cu132.prov.uncertain  # measured in libtorch_cuda.so
    assert dict(newest.companions) == {"torchvision": "0.29.2", "torchaudio": "2.11.1"}


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


def test_torchaudio_pairings(matrix):
    """torchaudio's line ends at 2.11: 2.11.0 serves torch 2.11 and 2.12, and 2.11.1 (released beside torch 2.15.0,
    +cu132) declares torch>=2.11, so it is the companion of every torch from 2.13 on that no torchaudio names:
    a companion pairs with the releases its own declared requirement holds (issue 40: 2.13/2.14 were null)."""
    comps = {str(r.version): dict(r.companions) for r in matrix.frameworks["torch"]}
    assert comps["2.11.0"]["torchaudio"] == "2.11.0"
    assert comps["2.12.0"]["torchaudio"] == comps["2.12.1"]["torchaudio"] == "2.11.0"
    for v in ("2.13.0", "2.14.0", "2.14.1", "2.15.0"):
        assert comps[v]["torchaudio"] == "2.11.1", v  # Requires-Dist torch>=2.11 holds it


# --- GPU generations: driver floors, Jetson, Grace, same-major SASS ------------------------------------

import pytest  # noqa: E402

from envman.errors import MatrixError, ResolutionError  # noqa: E402
from envman.resolve.request import build_request  # noqa: E402
from envman.resolve.resolver import resolve_stack  # noqa: E402


def _resolve(matrix, **kw):
    return resolve_stack(matrix, build_request(matrix, **kw))


def _refuse(matrix, **kw) -> ResolutionError:
    with pytest.raises(ResolutionError) as exc:
        _resolve(matrix, **kw)
    return exc.value


# NVIDIA/open-gpu-kernel-modules README.md "Compatible GPUs" (matrices/sources/nvidia-gpus.tsv): the first
# release tag whose table names each PCI device ID
LISTED = {"h100-pcie": ("2331", "520.56.06"), "h100-sxm": ("2330", "525.47.07"), "rtx-4090": ("2684", "525.47.06"),
          "l40s": ("26B9", "535.43.09"), "h100-nvl": ("2321", "535.43.09"), "h200": ("2335", "550.40.65"),
          "h200-nvl": ("233B", "565.57.01"), "b200": ("2901", "570.86.15"), "gb200": ("2941", "570.123.01"),
          "rtx-5090": ("2B85", "570.86.16"), "b300": ("3182", "580.82.07"), "gb300": ("31C2", "580.82.07"),
          "gb10": ("2E12", "580.94.13")}


@pytest.mark.parametrize("gid", sorted(LISTED))
def test_gpus_of_the_open_module_era_take_their_first_listing_as_floor(matrix, gid):
    g = {x.id: x for x in matrix.gpus}[gid]
    dev, first = LISTED[gid]
    assert dict((d, str(v)) for d, v in g.pci)[dev] == first
    assert str(g.min_driver) == str(g.listed) == first and not g.min_driver_prov.uncertain
    assert g.min_driver_prov.source == f"https://github.com/NVIDIA/open-gpu-kernel-modules/blob/{first}/README.md"


def test_older_generations_keep_their_generation_floor_and_record_the_listing(matrix):
    by_id = {g.id: g for g in matrix.gpus}
    # the list begins at 515.48.07; T4 (Turing) enters it only in 575.51.02, A100 in the first table: both ran
    # on older drivers with the proprietary modules
    assert (str(by_id["t4"].listed), by_id["t4"].min_driver) == ("575.51.02", None)
    a100 = by_id["a100-sxm4-80gb"]
    assert (str(a100.listed), str(a100.min_driver), a100.family) == ("515.48.07", "450", "Ampere")
    assert all(g.min_driver is None for g in matrix.gpus if g.segment == "embedded")  # JetPack's driver
    assert by_id["v100-sxm2-16gb"].listed is None and by_id["v100-sxm2-16gb"].pci == ()  # proprietary only


def test_h200_on_r535_is_refused_naming_its_first_listing(matrix):
    err = _refuse(matrix, framework="torch", targets=["h200"], driver="535.104.05")
    assert err.message == ("H200 SXM 141GB needs NVIDIA driver ≥ 550.40.65 (Hopper; NVIDIA lists it from R550); "
                           "driver 535.104.05 cannot run it")
    assert err.conflicts == ["9.0 (sm_90, NVIDIA H200 SXM 141GB): NVIDIA's supported-GPU list names it from driver "
                             "550.40.65 (R550) on",
                             "source: https://github.com/NVIDIA/open-gpu-kernel-modules/blob/550.40.65/README.md"]
    assert err.hint.startswith("upgrade the NVIDIA driver to ≥ 550.40.65 (R550 or a later branch)")
    assert err.exit_code == 3


def test_h100_on_driver_470_is_refused_naming_the_floor(matrix):
    err = _refuse(matrix, framework="torch", targets=["h100"], driver="470.57.02")
    assert err.message == "H100 SXM5 80GB needs NVIDIA driver ≥ 525.47.07 (Hopper; NVIDIA lists it from R525); driver 470.57.02 cannot run it"


def test_rtx_5090_on_driver_535_is_refused(matrix):
    err = _refuse(matrix, framework="torch", targets=["rtx-5090"], driver="535.104.05")
    assert err.message.startswith("RTX 5090 needs NVIDIA driver ≥ 570.86.16 (Blackwell RTX; NVIDIA lists it from R570)")


def test_a_mixed_fleet_is_refused_on_its_highest_floor(matrix):
    err = _refuse(matrix, framework="torch", targets=["a100", "h100", "rtx-5090"], driver="515.65.01")
    assert err.message.startswith("RTX 5090 needs NVIDIA driver ≥ 570.86.16")
    assert len([c for c in err.conflicts if "supported-GPU list names it" in c]) == 2  # H100 and RTX 5090, not A100


def test_the_floor_does_not_block_a_driver_that_meets_it(matrix):
    res = _resolve(matrix, framework="torch", targets=["h100"], driver="525.85.12")
    assert res.version is not None
    _refuse(matrix, framework="torch", targets=["h100"], driver="520.61.05")  # not yet in NVIDIA's list


JETSONS = ["Jetson Nano", "jetson-orin-nano", "Jetson Orin NX", "jetson-agx-orin", "jetson-thor"]


@pytest.mark.parametrize("name", JETSONS)
def test_jetson_is_recognised_and_refused_naming_jetpack(matrix, name):
    err = _refuse(matrix, framework="torch", targets=[name])
    assert "is a Jetson" in err.message and "JetPack" in err.message
    assert "nvcr.io/nvidia/l4t-" in err.hint and "Jetson AI Lab" in err.hint


def test_jetson_is_refused_without_a_framework_too(matrix):
    assert "is a Jetson (compute capability 5.3 (sm_53))" in _refuse(matrix, targets=["jetson-nano"]).message


def test_titan_v_is_known(matrix):
    res = _resolve(matrix, framework="torch", targets=["TITAN V"])
    (t,) = res.targets
    assert t.gpu.id == "titan-v" and str(t.cc) == "7.0" and t.gpu.memory_gib == 12
    assert res.variant == "cu126"  # the cu13x builds start at sm_75


def test_b300_on_sm_100_code_is_warned(matrix):
    res = _resolve(matrix, framework="torch", targets=["b300"])
    assert any("relies on sm_100 code on a 10.3 device" in w for w in res.warnings)


def test_exact_sass_gives_no_same_major_warning(matrix):
    res = _resolve(matrix, framework="torch", targets=["h100"])
    assert not [w for w in res.warnings if "relies on" in w]


@pytest.mark.parametrize("gpu", ["gh200", "gb200", "gb300", "gb10"])
def test_grace_hosts_get_aarch64_stacks(matrix, gpu):
    # PyPI's torch-2.15.0-cp311-cp311-manylinux_2_28_aarch64.whl: '2.15.0+cu132', the same cuDNN/NCCL pins as x86_64;
    # its libtorch_cuda.so CUDA_ARCH_FLAGS: sm_80 sm_90 sm_100 sm_110 sm_120 (issue #13, Platforms)
    res = _resolve(matrix, framework="torch", targets=[gpu], driver=">=595.71.05")
    assert res.platform == "linux/arm64" and (str(res.version), res.variant, res.index_url) == ("2.15.0", "cu132", None)
    assert res.arch_list == ("sm_80", "sm_90", "sm_100", "sm_110", "sm_120")
    assert not [w for w in res.warnings if "no CPU-architecture axis" in w]


def test_gh200_on_an_older_torch_gets_the_aarch64_pypi_build(matrix):
    res = _resolve(matrix, framework="torch==2.14.*", targets=["gh200"])
    assert (str(res.version), res.variant, res.cudnn, res.nccl) == ("2.14.1", "cu130", "9.24.0.43", "2.30.7")
    assert res.platform == "linux/arm64" and res.index_url is None


def test_gh200_on_a_torch_without_aarch64_cuda_wheels_is_refused(matrix):
    # pytorch/test-infra release/2.4 generate_binary_build_matrix.py names no linux-aarch64 CUDA build
    err = _refuse(matrix, framework="torch==2.4.*", targets=["gh200"])
    assert "no build of 'torch==2.4.*' has Linux aarch64 wheels in the matrix" in " ".join(err.conflicts)


def test_a_grace_machine_on_r570_gets_a_cuda_12_aarch64_torch(matrix):
    # test-infra release/2.14 CUDA_AARCH64_ARCHES: 12.6-aarch64, 13.0-aarch64, 13.2-aarch64 (download.pytorch.org);
    # R570 runs CUDA 12.x only, so the cu126 aarch64 build of the newest line is the answer
    res = _resolve(matrix, framework="torch", targets=["gh200"], driver="570.124.06")
    assert (str(res.version), res.variant, res.platform) == ("2.14.1", "cu126", "linux/arm64")
    assert res.index_url == "https://download.pytorch.org/whl/cu126"
    cu126 = _variant(matrix, "2.14", "cu126")
    assert cu126.platforms == ("x86_64", "aarch64") and cu126.aarch64_prov.uncertain  # arch list not measured


def test_loader_validates_driver_floors(matrix_copy):
    from envman.matrix.load import load_matrix

    gpus = matrix_copy / "gpus.yaml"
    text = gpus.read_text()
    bad = 'driver_floors:\n  - {cc: "9", family: Hopper, min_driver: "x", source: "https://example.test/f"}\ngpus:'
    gpus.write_text(text.replace("gpus:", bad, 1))
    with pytest.raises(MatrixError) as exc:
        load_matrix(matrix_copy)
    text_all = "\n".join(exc.value.problems) if hasattr(exc.value, "problems") else str(exc.value)
    assert "driver_floors[0].cc" in text_all and "driver_floors[0].min_driver" in text_all


def test_a_gpu_may_override_its_generations_floor(matrix_copy):
    from envman.matrix.load import load_matrix

    gpus = matrix_copy / "gpus.yaml"
    floors = 'driver_floors:\n  - {cc: "9.0", family: Hopper, min_driver: "520", source: "https://example.test/f"}\ngpus:'
    text = gpus.read_text().replace("gpus:", floors, 1)
    gpus.write_text(text + '  - {id: gh-x, name: "Test GH", cc: "9.0", segment: datacenter, host_arch: aarch64, '
                    'source: "https://example.test/gh", driver: {listed: "535.43.19", floor: true, '
                    'pci: {"2342": "535.43.19"}, names: ["NVIDIA Test GH"], source: "https://example.test/list"}}\n')
    m = load_matrix(matrix_copy)
    by_id = {g.id: g for g in m.gpus}
    assert str(by_id["gh-x"].min_driver) == "535.43.19" and by_id["gh-x"].min_driver_prov.source == "https://example.test/list"
    assert [(d, str(v)) for d, v in by_id["gh-x"].pci] == [("2342", "535.43.19")]
    assert by_id["gh-x"].family == "Hopper" and by_id["gh-x"].host_arch == "aarch64"
    assert [str(g.min_driver) for g in m.gpus if g.cc == by_id["gh-x"].cc and g.id != "gh-x"] == ["520"] * (
        sum(1 for g in m.gpus if g.cc == by_id["gh-x"].cc) - 1
    )


def test_a_bare_capability_takes_the_lowest_floor_of_its_gpus(matrix):
    err = _refuse(matrix, framework="torch", targets=["sm_90"], driver="470.57.02")
    # the H100 PCIe (2331) is the first Hopper in NVIDIA's list: 520.56.06
    assert err.message == "9.0 (sm_90) needs NVIDIA driver ≥ 520.56.06 (Hopper; NVIDIA lists it from R520); driver 470.57.02 cannot run it"


@pytest.mark.parametrize("line, variant", [("2.11", "cu130"), ("2.12", "cu130"), ("2.13", "cu130"), ("2.14", "cu130"),
                                           ("2.15", "cu132")])
def test_pypis_aarch64_torch_wheels_are_cuda_builds_with_their_own_arch_list(matrix, line, variant):
    # PyPI torch-<line>.x-cp311-cp311-manylinux_2_28_aarch64.whl: torch/version.py '+cu130' (2.11-2.14) / '+cu132' (2.15),
    # METADATA pins the x86_64 wheel's cuDNN/NCCL; libtorch_cuda.so CUDA_ARCH_FLAGS 80;90;100;110;120 (measured 2026-11-30)
    rel = _release(matrix, "torch", line + ".0")
    var = rel.variant(variant)
    assert rel.pypi_default_aarch64 == variant and var.platforms == ("x86_64", "aarch64")
    assert [a.sm for a in var.on("aarch64").archs] == ["sm_80", "sm_90", "sm_100", "sm_110", "sm_120"]
    assert not var.on("aarch64").prov.uncertain and "manylinux_2_28_aarch64.whl" in var.aarch64_prov.source


def test_the_doctor_holds_a_gpu_to_its_first_listing(matrix):
    from envman.matrix.knowledge import knowledge_from_matrix
    from envman.portable.doctor.checks import run_checks
    from envman.portable.doctor.knowledge import Knowledge

    k = Knowledge.from_dict(knowledge_from_matrix(matrix).to_dict())  # as the image's smoke test carries it
    facts = {"driver": "535.104.05", "gpus": [{"index": 0, "name": "NVIDIA H200", "cc": "9.0"},
                                              {"index": 1, "name": "NVIDIA A100-SXM4-80GB", "cc": "8.0"}]}
    got = [f for f in run_checks(facts, k) if f.check == "driver-below-gpu-floor"]
    assert [(f.verdict, f.remedy) for f in got] == [(
        "driver 535.104.05 cannot run GPU 0 NVIDIA H200: NVIDIA's supported-GPU list names it from driver 550.40.65 "
        "(R550) on (https://github.com/NVIDIA/open-gpu-kernel-modules/blob/550.40.65/README.md)",
        "install NVIDIA driver ≥ 550.40.65")]  # the A100 ran R450 before the list began: no per-GPU floor
    facts["driver"] = "550.40.65"
    assert not [f for f in run_checks(facts, k) if f.check == "driver-below-gpu-floor"]


# --- issue 40: the GPUs NVIDIA's supported-GPU list names that people rent, by what nvidia-smi prints ---------

@pytest.mark.parametrize("typed, cc, listed", [
    ("h20", "9.0", "535.43.25"), ("NVIDIA H20-3e", "9.0", "535.43.25"), ("h800", "9.0", "525.47.22"),
    ("NVIDIA H800 PCIe", "9.0", "525.47.22"), ("a800", "8.0", "515.86.01"), ("NVIDIA A800 80GB PCIe", "8.0", "515.86.01"),
    ("l20", "8.9", "535.43.23"), ("NVIDIA RTX 4000 Ada Generation", "8.9", "535.43.08"), ("a2", "8.6", "515.48.07"),
    ("a16", "8.6", "515.48.07"), ("NVIDIA GeForce RTX 5060", "12.0", "570.158.01"),
    ("NVIDIA GH200 144G HBM3e", "9.0", "565.57.01"), ("NVIDIA GH200 120GB", "9.0", "535.43.19"),
])
def test_the_catalog_knows_the_gpus_nvidias_list_names(matrix, typed, cc, listed):
    from envman.resolve.targets import parse_target

    g = parse_target(matrix, typed).gpu
    assert g is not None and str(g.cc) == cc and str(g.listed) == listed, typed
    assert g.prov.source, typed


def test_no_memory_is_given_that_the_product_name_does_not_state(matrix):
    by_id = {g.id: g for g in matrix.gpus}
    for gid in ("h20", "h800", "l20", "rtx-4000-ada", "a2", "a16", "rtx-5060", "rtx-5060-ti"):
        assert by_id[gid].memory_gib is None, gid
    assert by_id["gh200-144g"].memory_gib == 144 and by_id["a800-sxm"].memory_gib == 80


@pytest.mark.parametrize("name", ["mi300x", "mi325x", "mi250", "mi210", "gaudi", "gaudi2", "tpu-v5e", "trainium2", "m2-ultra"])
def test_other_vendors_accelerators_are_refused_by_the_shipped_data(matrix, name):
    from envman.errors import UnknownGpuError
    from envman.resolve.targets import parse_target

    with pytest.raises(UnknownGpuError) as e:
        parse_target(matrix, name)
    assert e.value.exit_code == 2 and "outside its scope" in str(e.value)
