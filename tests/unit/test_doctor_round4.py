"""Issue 40's missed classes, each a check with fixtures written from a public report (tests/fixtures/facts/round4:
``_source`` names the thread, ``_report`` what it says, ``_expect`` the right answer; ``near_*`` are healthy
near-misses that must stay quiet), and the probes that record what those checks need (an extension's C++ ABI and
build record, torch's ABI, the driver's CUDA as CUDA prints it).

Scored with the doctor before this round: 1 of 13 right (the one near-miss that nothing flagged), 1 false
positive (FlashInfer's torch-2.4 wheel on torch 2.5.1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envman.matrix.knowledge import knowledge_from_matrix, with_extensions
from envman.matrix.load import load_matrix
from envman.portable.doctor.checks import run_checks
from envman.portable.doctor.knowledge import Knowledge
from envman.portable.doctor.report import verdict_line
from envman.portable.doctor.view import FactsView, driver_cuda_text
from envman.portable.facts.extensions import LoaderView, probe_extensions
from envman.portable.fatbin import cxx11_abi
from envman.portable.frameworks.torch import probe_torch
from tests.unit.test_doctor_extensions import write_so

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "facts"
K = with_extensions(knowledge_from_matrix(load_matrix(FIX.parent / "matrix")), FIX.parent / "matrix")
ROUND4 = sorted((FIX / "round4").glob("*.json"))


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def serious(facts: dict) -> list[tuple[str, str]]:
    return [(f.severity, f.check) for f in run_checks(facts, K) if f.severity in ("error", "warn")]


def test_every_fixture_names_its_report():
    cited = {load(p)["_source"] for d in ("reports", "heldout2") for p in (FIX / d).glob("*.json")}
    sources = [load(p)["_source"] for p in ROUND4]
    assert len(ROUND4) >= 13 and len(set(sources)) == len(sources)
    for p, src in zip(ROUND4, sources):
        facts = load(p)
        assert src.startswith("https://github.com/") and src not in cited, p.name
        assert facts["_report"] and isinstance(facts["_expect"], list) and facts["schema"] == 1, p.name
        assert (facts["_expect"] == []) == p.stem.startswith("near_"), p.name


@pytest.mark.parametrize("path", ROUND4, ids=lambda p: p.stem)
def test_round4_report(path):
    facts = load(path)
    assert serious(facts) == [tuple(x) for x in facts["_expect"]]


def one(facts: dict, check: str):
    (f,) = [f for f in run_checks(facts, K) if f.check == check]
    return f


# --- 1. extensions judged by what their loader checks ----------------------------------------------------


def ext(**e):
    return {"schema": 1, "os": "Linux", "python": {"version": "3.11"}, "pip": {"torch": "2.6.0+cu126"},
            "torch": {"version": "2.6.0+cu126", "cuda": "12.6", "cxx11_abi": True}, "extensions": {"xformers": e}}


def test_xformers_built_for_another_cuda_build_of_the_same_torch():
    f = one(ext(version="0.0.29.post3", requires_torch="==2.6.0",
                built_for={"torch": "2.6.0+cu124", "cuda": "12.4"}), "ext-torch-cuda-build")
    assert f.verdict == ("xformers 0.0.29.post3 was built for torch 2.6.0+cu124 with CUDA 12.4, but torch 2.6.0+cu126 "
                         "is the CUDA 12.6 build: xformers compares both and refuses to load its ops")
    assert f.remedy.startswith("install the xformers 0.0.29.post3 built for torch 2.6.0+cu126 (from torch's own index: "
                               "pip install --force-reinstall --no-deps xformers==0.0.29.post3 --index-url "
                               "https://download.pytorch.org/whl/cu126)")


def test_the_same_cuda_build_is_quiet_and_a_package_that_does_not_compare_it_too():
    assert serious(ext(version="0.0.29.post3", requires_torch="==2.6.0",
                       built_for={"torch": "2.6.0+cu126", "cuda": "12.6"})) == []
    plain = ext(version="0.0.29.post3", requires_torch="==2.6.0", built_for={"torch": "2.6.0+cu126", "cuda": "12.6"})
    plain["torch"]["version"] = "2.6.0"  # a record without the label (dist-info only): the CUDA still tells
    assert serious(plain) == []
    facts = ext(version="2.7.4", requires_torch="any")
    facts["extensions"] = {"flash-attn": {"version": "2.7.4.post1+cu12torch2.6cxx11abitrue", "requires_torch": "any"}}
    assert serious(facts) == []  # flash-attn's loader does not compare the CUDA minor; same release, same ABI


def test_cxx11_abi_from_the_label_against_torchs():
    facts = ext()
    facts["extensions"] = {"flash-attn": {"version": "2.7.4.post1+cu12torch2.6cxx11abifalse", "requires_torch": "any"}}
    f = one(facts, "ext-cxx11-abi")
    assert f.verdict == ("flash-attn 2.7.4.post1+cu12torch2.6cxx11abifalse was built with _GLIBCXX_USE_CXX11_ABI=0, "
                         "torch 2.6.0+cu126 with _GLIBCXX_USE_CXX11_ABI=1: importing it fails with 'undefined symbol: "
                         "_ZN3c10…Ss…'")
    facts["torch"].pop("cxx11_abi")
    assert serious(facts) == []  # torch's ABI unknown: not a problem


def test_same_abi_torch_releases_come_from_the_data():
    facts = ext()
    facts["torch"] = {"version": "2.5.1+cu124", "cuda": "12.4"}
    facts["extensions"] = {"flashinfer-python": {"version": "0.2.0.post1+cu124torch2.4", "requires_torch": "any"}}
    assert serious(facts) == []
    facts["torch"] = {"version": "2.6.0+cu124", "cuda": "12.4"}  # 2.6 is not ABI-compatible (flashinfer#771)
    assert serious(facts) == [("error", "ext-torch-mismatch")]
    k = Knowledge.from_dict({**K.to_dict(), "loaders": []})
    facts["torch"] = {"version": "2.5.1+cu124", "cuda": "12.4"}
    assert [f.check for f in run_checks(facts, k) if f.severity == "error"] == ["ext-torch-mismatch"]


def test_a_cuda_extension_told_by_its_soname_beside_a_cpu_torch():
    facts = ext()
    facts["torch"] = {"version": "2.6.0+cpu", "cuda": None}
    facts["extensions"] = {"mamba-ssm": {"version": "2.2.4", "requires_torch": "any",
                                         "files": [{"file": "selective_scan_cuda.so",
                                                    "needed": ["libcudart.so.12", "libc10_cuda.so", "libc10.so"]}]}}
    f = one(facts, "ext-torch-cpu")
    assert f.verdict.startswith("mamba-ssm 2.2.4 is a CUDA 12 build, but torch 2.6.0+cpu is a CPU-only build")
    # near-miss: a package with its own CUDA that uses torch only from Python (onnxruntime-gpu) loads beside it
    facts["extensions"] = {"onnxruntime-gpu": {"version": "1.20.1", "requires_torch": None, "files": [
        {"file": "onnxruntime/capi/libonnxruntime_providers_cuda.so", "needed": ["libcudart.so.12"]}]}}
    assert [f for f in run_checks(facts, K) if f.check == "ext-torch-cpu"] == []


def test_the_knowledge_carries_the_rules_through_json():
    d = K.to_dict()
    assert Knowledge.from_dict(json.loads(json.dumps(d))).to_dict() == d
    assert K.loader("xformers") == (("cuda",), ())
    assert K.built_cudnn("jax-cuda12-plugin", "0.4.30") == "9.1.1"


def test_a_loader_rule_with_an_unknown_comparison_is_refused(tmp_path):
    from envman.errors import DataError

    text = (FIX.parent / "matrix" / "extensions.yaml").read_text(encoding="utf-8")
    (tmp_path / "extensions.yaml").write_text(text.replace("compares: [cuda]", "compares: [cuda, moon]"), encoding="utf-8")
    with pytest.raises(DataError) as e:
        with_extensions(Knowledge(), tmp_path)
    assert "extensions.yaml: loaders[0].compares: 'moon' is not one of cuda" in str(e.value)


# --- the probes behind them ----------------------------------------------------------------------------


def test_cxx11_abi_is_read_from_the_dynamic_string_table(tmp_path):
    new = write_so(tmp_path, "new.so", needed=("libc10.so", "_ZN3c105ErrorC2ENS_14SourceLocationENSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"))
    old = write_so(tmp_path, "old.so", needed=("libc10.so", "_ZN3c105ErrorC2ENS_14SourceLocationESs"))
    neither = write_so(tmp_path, "plain.so", needed=("libc10.so",))
    assert (cxx11_abi(str(new)), cxx11_abi(str(old)), cxx11_abi(str(neither))) == (True, False, None)


def test_probe_records_xformers_build_and_the_abi(tmp_path):
    site = tmp_path / "site"
    write_so(site, "xformers/_C.so", needed=("libc10.so", "libcudart.so.12", "_ZN3c10St7__cxx11x"))
    (site / "xformers" / "cpp_lib.json").write_text(json.dumps({"version": {"torch": "2.6.0+cu124", "cuda": 1204,
                                                                             "python": "3.11.9"}}))
    meta = site / "xformers-0.0.29.post3.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Name: xformers\nRequires-Dist: torch==2.6.0\n")
    (meta / "RECORD").write_text("xformers/_C.so,sha256=x,1\nxformers/cpp_lib.json,sha256=y,2\n")
    got = probe_extensions({"xformers": (str(site), "0.0.29.post3", meta.name)},
                           where=LoaderView([str(site)], environ={}, cache=[], defaults=(), unsearched=[]))
    assert got["xformers"]["built_for"] == {"torch": "2.6.0+cu124", "cuda": "12.4"}
    assert got["xformers"]["cxx11_abi"] is True


def test_probe_reads_torchs_abi_from_its_cmake_config(tmp_path):
    (tmp_path / "torch" / "share" / "cmake" / "Torch").mkdir(parents=True)
    (tmp_path / "torch" / "share" / "cmake" / "Torch" / "TorchConfig.cmake").write_text(
        'set(TORCH_CXX_FLAGS "-D_GLIBCXX_USE_CXX11_ABI=0")\n')
    files = {str(tmp_path / "torch" / "version.py"): "__version__ = '2.5.1+cu124'\ncuda = '12.4'\n",
             str(tmp_path / "torch" / "share" / "cmake" / "Torch" / "TorchConfig.cmake"):
                 'set(TORCH_CXX_FLAGS "-D_GLIBCXX_USE_CXX11_ABI=0")\n'}
    t = probe_torch({"torch": (str(tmp_path), "2.5.1+cu124", "torch-2.5.1.dist-info")},
                    lambda p, n: files.get(p))
    assert t is not None and t["cxx11_abi"] is False and t["version"] == "2.5.1+cu124"
    # torch from 2.7 on writes no flag there: the names its libc10.so exports tell (torch 2.13.0's: __cxx11, True)
    files.pop(str(tmp_path / "torch" / "share" / "cmake" / "Torch" / "TorchConfig.cmake"))
    write_so(tmp_path / "torch" / "lib", "libc10.so", needed=("_ZN3c105ErrorC2ENS_14SourceLocationESs",))
    t = probe_torch({"torch": (str(tmp_path), "2.5.1+cu124", "torch-2.5.1.dist-info")}, lambda p, n: files.get(p))
    assert t is not None and t["cxx11_abi"] is False
    (tmp_path / "torch" / "lib" / "libc10.so").unlink()
    t = probe_torch({"torch": (str(tmp_path), "2.5.1+cu124", "torch-2.5.1.dist-info")}, lambda p, n: files.get(p))
    assert t is not None and "cxx11_abi" not in t  # unknown, not a guess


# --- 2. JAX's cuDNN ------------------------------------------------------------------------------------


def jax(jaxlib, plugins=None, **pip):
    return {"schema": 1, "os": "Linux", "python": {"version": "3.11"}, "driver": "550.54.14", "driver_cuda": "12.4",
            "gpus": [{"index": 0, "name": "NVIDIA A100-SXM4-80GB", "cc": "8.0"}],
            "pip": {"jax": "0.4.25", "jaxlib": jaxlib, **pip},
            "jax": {"version": "0.4.25", "jaxlib": jaxlib, "plugins": plugins or {}}}


def test_a_labelled_jaxlib_is_a_cuda_build_judged_by_its_cudnn_not_a_cpu_build():
    facts = jax("0.4.25+cuda12.cudnn89", **{"nvidia-cudnn-cu12": "9.1.0.70"})
    assert serious(facts) == [("error", "cudnn-mismatch")]
    f = one(facts, "cudnn-mismatch")
    assert f.verdict == ("cuDNN 9.1.0.70 (nvidia-cudnn-cu12) is not the cuDNN 8.9 jax 0.4.25 was compiled with (jaxlib "
                         "0.4.25+cuda12.cudnn89's label): 'Loaded runtime CuDNN library: 9.1.0.70 but source was "
                         "compiled with: 8.9', and JAX falls back to the CPU")
    assert f.remedy.startswith("pip install 'nvidia-cudnn-cu12==8.9.*' (or a JAX built for cuDNN 9")
    assert serious(jax("0.4.25+cuda12.cudnn89", **{"nvidia-cudnn-cu12": "8.9.7.29"})) == []  # near-miss


# --- 4. the driver against CUDA libraries without a framework ----------------------------------------


@pytest.mark.parametrize("raw, want", [("12080", "12.8"), (12080, "12.8"), ("13000", "13.0"), ("12.4", "12.4"),
                                       (None, None), ("", None), (True, None)])
def test_driver_cuda_as_cuda_prints_it(raw, want):
    assert driver_cuda_text(raw) == want


def test_cu13_wheels_on_a_580_driver_are_fine_and_on_a_570_are_not():
    base = {"schema": 1, "os": "Linux", "pip": {"nvidia-cublas": "13.0.2.14", "nvidia-cuda-runtime": "13.0.96"}}
    assert serious({**base, "driver": "580.95.05", "driver_cuda": "13.0"}) == []
    f = one({**base, "driver": "570.172.08", "driver_cuda": "12.8"}, "driver-too-old")
    assert f.verdict.startswith("driver 570.172.08 is too old for the CUDA 13 libraries installed here "
                                "(nvidia-cublas 13.0.2.14, nvidia-cuda-runtime 13.0.96)")
    assert f.remedy == "install NVIDIA driver ≥ 580.65.06, or the CUDA 12 builds of these packages"


# --- 5, 8. severity and the verdict -------------------------------------------------------------------


def test_one_gpu_in_mig_mode_stays_a_note():
    facts = {"schema": 1, "gpus": [{"index": 0, "name": "NVIDIA A100-SXM4-80GB", "cc": "8.0", "mig": True}],
             "driver": "550.54.15"}
    assert [(f.severity, f.check) for f in run_checks(facts, K)] == [("info", "gpu-mig")]


def test_a_machine_without_gpu_leads_with_cpu_only_and_what_was_examined():
    facts = {"schema": 1, "os": "Linux", "gpus": [], "pci_nvidia_gpus": 0, "python": {"version": "3.11.7",
             "prefix": "/home/u/.venv"}, "pip": {"numpy": "2.1.0"}, "docker": {"reachable": False}}
    assert verdict_line(run_checks(facts, K), facts) == (
        "CPU only: no NVIDIA GPU or driver found (no framework installed); examined the PCI bus, the NVIDIA driver "
        "(NVML, nvidia-smi), the Python 3.11 environment at /home/u/.venv (1 package), Docker")
    facts["pip"]["torch"] = "2.7.1+cu128"
    facts["torch"] = {"version": "2.7.1+cu128", "cuda": "12.8"}
    assert verdict_line(run_checks(facts, K), facts).startswith("CPU only: no NVIDIA GPU or driver found (torch "
                                                                "2.7.1+cu128); examined")
    assert not FactsView({"schema": 1}).gpus_known  # nothing probed: no verdict about a CPU
