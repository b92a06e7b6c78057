"""Each doctor check: a positive case and the near-misses that must stay quiet.

Knowledge comes from tests/fixtures/matrix (frozen) through the real loader and adapter, so the versions
the remedies name are that test data's, whatever the shipped matrices say.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from envman.matrix.knowledge import knowledge_from_matrix, with_extensions
from envman.matrix.load import load_matrix
from envman.portable.doctor.checks import run_checks
from envman.portable.doctor.knowledge import Knowledge

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "facts"
K = with_extensions(knowledge_from_matrix(load_matrix(FIX.parent / "matrix")), FIX.parent / "matrix")
IDX = "https://download.pytorch.org/whl"


def gpu(i=0, name="NVIDIA H100 80GB HBM3", cc="9.0", mem=81559, **kw):
    return {"index": i, "name": name, "cc": cc, "mem_total_mib": mem, "mem_used_mib": 1, **kw}


def box(**kw):
    """A bare host with one H100, driver 570 and Python 3.11; keyword arguments override."""
    f = {"in_container": False, "wsl": 0, "driver": "570.124.06", "gpus": [gpu()], "gpu_processes": [],
         "python": {"version": "3.11.9", "bits": 64, "executable": "/venv/bin/python"}, "pip": {}, "env": {}}
    f.update(kw)
    return f


def torch(version, cuda, **kw):
    return {"torch": {"version": version, "cuda": cuda, **kw}}


def found(facts, check, k=K):
    return [f for f in run_checks(facts, k) if f.check == check]


def one(facts, check, k=K):
    got = found(facts, check, k)
    assert len(got) == 1, [f"{f.check}: {f.verdict}" for f in run_checks(facts, k)]
    return got[0]


def serious(facts, k=K):
    return [f"{f.check}: {f.verdict}" for f in run_checks(facts, k) if f.severity in ("error", "warn")]


# --- 1. driver too old ---------------------------------------------------------------------------


def test_driver_too_old_names_the_driver_and_the_variant_that_runs():
    f = one(box(driver="535.104.05", **torch("2.11.0+cu130", "13.0")), "driver-too-old")
    assert f.severity == "error"
    assert f.verdict == ("driver 535.104.05 is too old for torch 2.11.0+cu130: CUDA 13.0 needs driver ≥ 580.95.05 "
                         "(≥ 580.65.06 with minor-version compatibility)")
    assert f.remedy == (f"install NVIDIA driver ≥ 580.95.05, or the build that runs on driver 535.104.05: "
                        f"pip install torch==2.11.0 --index-url {IDX}/cu128")


@pytest.mark.parametrize("driver, version, cuda", [
    ("580.65.06", "2.11.0+cu130", "13.0"),  # exactly the 13.x minor-compat floor: inclusive
    ("525.60.13", "2.7.1+cu128", "12.8"),  # exactly the 12.x floor
    ("580.95.05", "2.5.1+cu121", "12.1"),  # a driver newer than the runtime
    ("550.54.15", "2.7.1+cu126", "12.6"),  # minor-version compatibility above the floor
])
def test_driver_near_misses_stay_quiet(driver, version, cuda):
    assert found(box(driver=driver, **torch(version, cuda)), "driver-too-old") == []


def test_driver_too_old_for_tensorflow():
    f = one(box(driver="470.256.02", tensorflow={"version": "2.15.1"}), "driver-too-old")
    assert f.verdict.startswith("driver 470.256.02 is too old for tensorflow 2.15.1: CUDA 12.2 needs driver ≥ 535.104.05")


def test_driver_judged_by_driver_cuda_without_matrix_data():
    f = one(box(driver="535.104.05", driver_cuda="12.2", **torch("2.11.0+cu130", "13.0")), "driver-too-old", Knowledge())
    assert "this driver supports CUDA ≤ 12.2" in f.verdict


# --- 2. architecture -----------------------------------------------------------------------------


def test_rtx5090_on_cu124_build():
    f = one(box(gpus=[gpu(name="NVIDIA GeForce RTX 5090", cc="12.0", mem=32607)], **torch("2.5.1+cu124", "12.4")),
            "arch-not-covered")
    assert f.severity == "error"
    assert f.verdict == (
        "GPU 0 NVIDIA GeForce RTX 5090 is 12.0 (sm_120), not in torch 2.5.1+cu124's arch list (sm_50 sm_60 sm_70 sm_75 "
        "sm_80 sm_86 sm_90, from envman's matrix): CUDA kernels fail with 'no kernel image is available for "
        "execution on the device'"
    )
    assert f.remedy == (f"pip install torch==2.11.0 --index-url {IDX}/cu128 (torch 2.11.0+cu128 covers sm_120 and "
                        f"runs on driver 570.124.06)")


def test_old_gpu_on_new_build_gets_a_variant_of_the_same_release():
    f = one(box(driver="550.54.15", gpus=[gpu(name="Tesla P100-PCIE-16GB", cc="6.0", mem=16280)],
                **torch("2.11.0+cu128", "12.8")), "arch-not-covered")
    assert "is 6.0 (sm_60)" in f.verdict
    assert f.remedy.startswith(f"pip install torch==2.11.0 --index-url {IDX}/cu126 ")


def test_kepler_gets_the_newest_build_that_still_carries_sm37():
    f = one(box(driver="470.256.02", gpus=[gpu(name="Tesla K80", cc="3.7", mem=11441)], **torch("2.7.1+cu126", "12.6")),
            "arch-not-covered")
    # 2.4+ cu118 builds list sm_37 but ship cuDNN 9, which needs 5.0: the newest usable one is older
    assert f.remedy == (f"pip install torch==2.3.1 --index-url {IDX}/cu118 (torch 2.3.1+cu118 covers sm_37 and runs on "
                        f"driver 470.256.02)")


def test_companions_move_with_the_remedy():
    facts = box(gpus=[gpu(name="NVIDIA GeForce RTX 5090", cc="12.0")], **torch("2.5.1+cu124", "12.4"),
                pip={"torch": "2.5.1+cu124", "torchvision": "0.20.1+cu124", "torchaudio": "2.5.1+cu124"})
    assert one(facts, "arch-not-covered").remedy.startswith(
        f"pip install torch==2.11.0 torchvision==0.26.0 torchaudio==2.11.0 --index-url {IDX}/cu128")


def test_sm89_device_on_sm86_sass_is_covered():  # near-miss: same major, lower minor
    facts = box(gpus=[gpu(name="NVIDIA GeForce RTX 4090", cc="8.9")],
                **torch("2.5.1+cu118", "11.8", arch_list=["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86"]))
    assert found(facts, "arch-not-covered") == found(facts, "arch-ptx-only") == []


def test_sass_never_crosses_a_major():
    facts = box(**torch("2.5.1+cu118", "11.8", arch_list=["sm_80", "sm_86"]))  # an H100 (9.0) is above 8.6, other major
    assert "from torch.cuda.get_arch_list()" in one(facts, "arch-not-covered").verdict


def test_ptx_only_is_a_warning():
    facts = box(gpus=[gpu(cc="12.0", name="NVIDIA RTX PRO 6000")], **torch("2.5.1+cu124", "12.4",
                                                                         arch_list=["sm_80", "sm_90", "compute_90"]))
    assert one(facts, "arch-ptx-only").severity == "warn"


def test_unknown_build_without_arch_list_is_said_not_guessed():
    f = one(box(**torch("2.7.1+cu127", "12.7")), "arch-unknown")
    assert f.severity == "info" and f.verdict.startswith("envman's matrix has no cu127 build of torch 2.7:")
    unknown = run_checks(box(**torch("2.99.0+cu128", "12.8")), K)
    assert [(f.severity, f.check) for f in unknown] == [("info", "not-in-matrix")]


# --- 3. CPU-only build ---------------------------------------------------------------------------


def test_cpu_build_on_gpu_machine():
    f = one(box(**torch("2.7.1+cpu", None)), "cpu-only-build")
    assert f.verdict == ("torch 2.7.1+cpu is a CPU-only build, but this machine has 1× NVIDIA H100 80GB HBM3 "
                         "(driver 570.124.06): training will not use the GPU")
    assert f.remedy == (f"pip install torch==2.7.1 --index-url {IDX}/cu128 (torch 2.7.1+cu128 covers sm_90 and runs on "
                        f"driver 570.124.06)")


def test_conda_cpuonly():
    f = one(box(**torch("2.5.1", None), conda={"prefix": "/opt/conda", "cpuonly": True}), "cpu-only-build")
    assert "conda's cpuonly package" in f.verdict and f.remedy.startswith("conda remove cpuonly, then pip install")


def test_tensorflow_cpu_package_on_gpu_machine():
    f = one(box(tensorflow={"version": "2.15.1"}, pip={"tensorflow-cpu": "2.15.1"}), "cpu-only-build")
    assert f.remedy == "pip uninstall -y tensorflow-cpu && pip install 'tensorflow[and-cuda]==2.15.1'"


def test_cpu_build_without_gpu_is_fine():
    assert serious(box(gpus=[], **torch("2.7.1+cpu", None))) == []


# --- 4. NVML mismatch and other nvidia-smi failures ----------------------------------------------


def test_nvidia_smi_cannot_talk_to_driver():
    f = one(box(gpus=None, nvidia_smi_error="NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
                "driver. Make sure that the latest NVIDIA driver is installed and running."), "nvidia-smi-failed")
    assert f.severity == "error" and "modprobe" not in f.remedy and "DKMS" in f.remedy


def test_gpu_on_the_pci_bus_without_a_driver():
    facts = box(gpus=[], pci_nvidia_gpus=2, nvml_error="NVML: no NVIDIA device nodes (/dev/nvidia*)",
                **torch("2.7.1+cu128", "12.8"))
    f = one(facts, "no-driver")
    assert f.verdict == "2 NVIDIA GPUs on the PCI bus, but no NVIDIA driver answers (NVML: no NVIDIA device nodes (/dev/nvidia*))"
    assert f.remedy.startswith("install the NVIDIA driver ≥ 570.124.06 and reboot")
    assert found(box(gpus=[], pci_nvidia_gpus=0, **torch("2.7.1+cu128", "12.8")), "no-driver") == []
    assert one(box(gpus=[], pci_nvidia_gpus=0, **torch("2.7.1+cu128", "12.8")), "no-gpu").severity == "info"


# --- 5. containers and Docker --------------------------------------------------------------------


def test_container_without_gpu_but_cpu_image_is_fine():
    assert found(box(in_container=True, gpus=[], **torch("2.7.1+cpu", None)), "container-no-gpu") == []
    # a dev container that locks and builds images for GPUs elsewhere: the lock alone wants no GPU here
    assert found(box(in_container=True, gpus=[], lock={"cuda": "13.0", "python": "3.11"}), "container-no-gpu") == []


def test_container_with_nvidia_visible_devices_void():
    f = one(box(in_container=True, container="kubernetes", gpus=[], env={"NVIDIA_VISIBLE_DEVICES": "void"},
                **torch("2.7.1+cu128", "12.8")), "container-no-gpu")
    assert f.verdict == ("inside a Kubernetes pod with no GPU visible (NVIDIA_VISIBLE_DEVICES=void): torch 2.7.1+cu128 "
                         "will run on the CPU")


def test_container_with_device_nodes_but_no_driver_libraries():
    facts = box(in_container=True, gpus=None, device_nodes=["nvidia0", "nvidiactl"], driver_source="kernel-module",
                nvml_error="NVML: NVML Shared Library Not Found", env={"NVIDIA_DRIVER_CAPABILITIES": "video"})
    facts.pop("gpus")
    assert "NVIDIA_DRIVER_CAPABILITIES=video" in one(facts, "container-no-gpu").verdict
    # near-miss: a healthy container whose GPU list was not recorded (an older facts file, the NVIDIA probe timed
    # out): no libcuda fact, no NVML error, a driver that answered — unknown, not missing
    unrecorded = {k: v for k, v in facts.items() if k not in ("nvml_error", "driver_source")}
    assert found(unrecorded, "container-") == []


def test_docker_without_nvidia_toolkit():
    facts = box(docker={"reachable": True, "version": "27.3.1", "nvidia_runtime": False, "toolkit": False, "cdi": False})
    f = one(facts, "docker-no-nvidia")
    assert f.severity == "warn" and "nvidia-ctk runtime configure --runtime=docker" in f.remedy


@pytest.mark.parametrize("docker", [
    {"reachable": True, "nvidia_runtime": False, "toolkit": True, "cdi": False},
    {"reachable": True, "nvidia_runtime": False, "toolkit": False, "cdi": True},
    {"reachable": True, "nvidia_runtime": True, "toolkit": False, "cdi": False},
    {"reachable": False, "error": "no Docker socket at /var/run/docker.sock"},
])
def test_docker_that_can_hand_out_gpus_or_is_absent_is_fine(docker):
    assert found(box(docker=docker), "docker-no-nvidia") == []


# --- 6. CUDA_VISIBLE_DEVICES ---------------------------------------------------------------------

TWO = [gpu(0, uuid="GPU-aaaa1111"), gpu(1, uuid="GPU-bbbb2222")]


@pytest.mark.parametrize("value", ["", "-1", "2", "GPU-ffff"])
def test_visible_devices_hiding_every_gpu(value):
    f = one(box(gpus=TWO, env={"CUDA_VISIBLE_DEVICES": value}), "cuda-visible-devices")
    assert f.severity == "error" and f.remedy == "unset CUDA_VISIBLE_DEVICES, or export CUDA_VISIBLE_DEVICES=0,1"


def test_visible_devices_naming_a_missing_index():
    f = one(box(gpus=TWO, env={"CUDA_VISIBLE_DEVICES": "0,2,1"}), "cuda-visible-devices")
    assert f.verdict == ("CUDA_VISIBLE_DEVICES='0,2,1' names GPU '2', which does not exist (GPUs here: 0,1): CUDA stops "
                         "at that entry, so only 0 is visible")
    assert f.remedy == "export CUDA_VISIBLE_DEVICES=0,1"


@pytest.mark.parametrize("value", ["1,0", "1", "GPU-bbbb", "MIG-0c2d1f0e-aaaa"])
def test_visible_devices_that_work(value):
    assert found(box(gpus=TWO, env={"CUDA_VISIBLE_DEVICES": value}), "cuda-visible-devices") == []


# --- 7. LD_LIBRARY_PATH shadowing ----------------------------------------------------------------


def _ld(libs, env="/usr/local/cuda-12.2/lib64:/opt/other/lib", pip=None):
    return box(**torch("2.7.1+cu128", "12.8"), env={"LD_LIBRARY_PATH": env},
               pip=pip or {"torch": "2.7.1+cu128", "nvidia-nvjitlink-cu12": "12.8.93", "nvidia-cudnn-cu12": "9.7.1.26",
                           "nvidia-cuda-runtime-cu12": "12.8.90"},
               cuda_libs=[{"dir": "/usr/local/cuda-12.2/lib64", "from": "LD_LIBRARY_PATH", "libs": libs}])


def test_older_system_nvjitlink_shadows_the_wheel():
    f = one(_ld({"libnvJitLink": "12.2.140", "libcudart": "12.2.140"}), "ld-library-path")
    assert f.severity == "error"
    assert "libnvJitLink.so.12.2.140 < nvidia-nvjitlink-cu12 12.8.93" in f.verdict
    assert f.remedy == ("export LD_LIBRARY_PATH=/opt/other/lib (drop /usr/local/cuda-12.2/lib64; the pip wheels bring "
                        "their own libraries)")


@pytest.mark.parametrize("libs", [
    {"libcudnn": "8.9.7"},  # another soname major: another library, no shadowing
    {"libnvJitLink": "12.9.41"},  # newer
    {"libcudnn": "9.7.1"},  # the wheel's own version, written shorter
])
def test_library_path_near_misses(libs):
    assert found(_ld(libs), "ld-library-path") == []


def test_unversioned_library_on_the_path_is_a_warning():
    assert one(_ld({"libcudart": "12"}, env="/usr/local/cuda-12.2/lib64"), "ld-library-path").remedy.startswith(
        "unset LD_LIBRARY_PATH")


# --- 8. mixed CUDA wheels, two NCCLs -------------------------------------------------------------


def test_two_cuda_majors_of_nvidia_wheels():
    facts = box(**torch("2.7.1+cu128", "12.8"), pip={"nvidia-cudnn-cu11": "8.7.0.84", "nvidia-cublas-cu11": "11.11.3.6",
                                                      "nvidia-cudnn-cu12": "9.7.1.26", "nvidia-cublas-cu12": "12.8.4.1"})
    f = one(facts, "cuda-wheels-mixed")
    assert f.remedy == "pip uninstall -y nvidia-cublas-cu11 nvidia-cudnn-cu11"


def test_cuda13_unsuffixed_wheels_count_by_version():
    facts = box(**torch("2.11.0+cu130", "13.0"), pip={"nvidia-cublas": "13.0.2.14", "nvidia-cublas-cu12": "12.8.4.1"})
    assert one(facts, "cuda-wheels-mixed").remedy == "pip uninstall -y nvidia-cublas-cu12"


def test_libraries_with_their_own_numbering_do_not_count():
    facts = box(**torch("2.11.0+cu130", "13.0"), pip={"nvidia-cublas": "13.0.2.14", "nvidia-cusparse": "12.6.3.3",
                                                       "nvidia-cufft": "12.0.0.61", "nvidia-cudnn-cu13": "9.19.0.56"})
    assert found(facts, "cuda-wheels-mixed") == []


def test_two_nccls():
    facts = box(**torch("2.7.1+cu128", "12.8"), pip={"nvidia-nccl-cu11": "2.16.5", "nvidia-nccl-cu12": "2.26.2"})
    f = one(facts, "nccl-duplicate")
    assert f.severity == "error" and f.remedy == (
        "pip uninstall -y nvidia-nccl-cu11 && pip install --force-reinstall --no-deps nvidia-nccl-cu12==2.26.2 "
        "(uninstalling one removes the file both wrote)")
    assert found(facts, "cuda-wheels-mixed") == []  # one cause, one finding


# --- 9. torchvision / torchaudio -----------------------------------------------------------------


def test_companion_of_another_torch_release():
    f = one(box(**torch("2.7.1+cu128", "12.8"), pip={"torchvision": "0.20.1+cu124"}), "companion-mismatch")
    assert f.verdict == ("torchvision 0.20.1+cu124 does not pair with torch 2.7.1+cu128: torch 2.7.1 pairs with "
                         "torchvision 0.22.1")
    assert f.remedy == f"pip install torchvision==0.22.1 --index-url {IDX}/cu128"


@pytest.mark.parametrize("tv, severity", [("0.22.1+cu126", "warn"), ("0.22.1+cpu", "error")])
def test_companion_of_another_variant(tv, severity):
    assert one(box(**torch("2.7.1+cu128", "12.8"), pip={"torchvision": tv}), "companion-mismatch").severity == severity


def test_plain_pypi_companion_takes_the_release_default_variant():
    assert found(box(**torch("2.7.1", "12.6"), pip={"torchvision": "0.22.1"}), "companion-mismatch") == []
    f = one(box(**torch("2.7.1+cu118", "11.8"), pip={"torchvision": "0.22.1"}), "companion-mismatch")
    assert f.severity == "error" and "the cu126 build" in f.verdict


# --- 10. building extensions ---------------------------------------------------------------------


def _ext(**kw):
    return box(**{**torch("2.7.1+cu128", "12.8"), "gcc": "12.3.0", **kw})


@pytest.mark.parametrize("nvcc, pip, severity", [("11.8", {"deepspeed": "0.16.4"}, "error"), ("11.8", {}, "info"),
                                                 ("12.4", {"deepspeed": "0.16.4"}, "info")])
def test_nvcc_differs_from_torch_cuda(nvcc, pip, severity):
    f = one(_ext(nvcc={"path": "/usr/local/cuda/bin/nvcc", "version": nvcc}, cuda_home=None, pip=pip),
            "ext-nvcc-mismatch")
    assert f.severity == severity


def test_nvcc_matching_torch_is_fine():
    assert serious(_ext(nvcc={"path": "/usr/local/cuda/bin/nvcc", "version": "12.8", "max_gcc": 14},
                        cuda_home={"path": "/usr/local/cuda", "source": "/usr/local/cuda", "nvcc_version": "12.8"})) == []


def test_missing_toolkit_matters_only_where_extensions_get_built():
    assert found(_ext(nvcc=None, cuda_home=None), "ext-no-cuda-home") == []
    f = one(_ext(nvcc=None, cuda_home=None, pip={"flash-attn": "2.8.3"}), "ext-no-cuda-home")
    assert f.remedy == "apt-get install cuda-toolkit-12-8 (NVIDIA's repository), then export CUDA_HOME=/usr/local/cuda-12.8"


def _flash(sass):
    return {"flash-attn": {"version": "2.8.3", "files": [{"file": "flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so",
                                                           "sass": sass, "ptx": []}]}}


def test_a_prebuilt_extension_that_covers_the_gpu_needs_no_toolkit():
    """flash-attn installed from a wheel with sm_90 kernels on an H100: nothing will be compiled here."""
    assert found(_ext(nvcc=None, cuda_home=None, pip={"flash-attn": "2.8.3"}, extensions=_flash(["sm_80", "sm_90"])),
                 "ext-no-cuda-home") == []
    # the same package without kernels for this GPU: the remedy is a rebuild, which needs the toolkit
    assert len(found(_ext(nvcc=None, cuda_home=None, pip={"flash-attn": "2.8.3"}, extensions=_flash(["sm_80"])),
                     "ext-no-cuda-home")) == 1


def test_packages_that_compile_when_they_run_need_the_toolkit_wherever_installed():
    f = one(_ext(nvcc=None, cuda_home=None, pip={"deepspeed": "0.17.1"}, extensions={}), "ext-no-cuda-home")
    assert "deepspeed installed" in f.verdict


def test_distro_nvcc_shadows_cuda_home():
    f = one(_ext(nvcc={"path": "/usr/bin/nvcc", "version": "11.5", "distro": True, "toolkit": "/usr/lib/nvidia-cuda-toolkit"},
                 cuda_home={"path": "/usr/local/cuda-12.8", "source": "CUDA_HOME", "nvcc_version": "12.8"}),
            "ext-nvcc-shadowed")
    assert f.remedy == ("export PATH=/usr/local/cuda-12.8/bin:$PATH, or remove the distro toolkit: "
                        "sudo apt-get remove nvidia-cuda-toolkit")


def test_gcc_newer_than_nvcc_accepts():
    f = one(_ext(gcc="14.2.0", nvcc={"path": "/usr/local/cuda/bin/nvcc", "version": "12.8", "max_gcc": 13},
                 cuda_home=None), "ext-gcc-too-new")
    # the words of nvcc's own error and the binary a user runs: what they search for
    assert f.verdict == ("gcc 14.2.0 is newer than nvcc 12.8 (/usr/local/cuda/bin/nvcc) accepts (gcc ≤ 13): nvcc stops "
                         "with '#error -- unsupported GNU version! gcc versions later than 13 are not supported!'")


# --- 11. TensorFlow libraries, cuDNN -------------------------------------------------------------


TF_CU12 = {"nvidia-cuda-runtime-cu12": "12.2.140", "nvidia-cublas-cu12": "12.2.5.6", "nvidia-cufft-cu12": "11.0.8.103",
           "nvidia-curand-cu12": "10.3.3.141", "nvidia-cusolver-cu12": "11.5.2.141", "nvidia-cusparse-cu12": "12.1.2.141"}


def test_tensorflow_without_cuda_libraries():
    f = one(box(tensorflow={"version": "2.15.1", "is_cuda_build": True}, cuda_libs=[]), "tf-cuda-libs")
    assert f.remedy == "pip install 'tensorflow[and-cuda]==2.15.1'"
    # every soname TensorFlow's dso_loader opens, as its log names them (CUDA 12's cuFFT is libcufft.so.11)
    assert ("not found: libcudart.so.12, libcublas.so.12, libcublasLt.so.12, libcufft.so.11, libcurand.so.10, "
            "libcusolver.so.11, libcusparse.so.12, libcudnn.so.8: 'Could not load dynamic library 'libcudart.so.12''"
            in f.verdict)
    # library directories not probed and no wheel of a library: unknown, not missing
    assert found(box(tensorflow={"version": "2.15.1", "is_cuda_build": True}), "tf-cuda-libs") == []


def test_tensorflow_with_wrong_cudnn_wheel():
    facts = box(tensorflow={"version": "2.15.1"}, pip={"nvidia-cudnn-cu12": "9.3.0.75", **TF_CU12})
    assert found(facts, "tf-cuda-libs")[0].verdict == (
        "tensorflow 2.15.1 needs CUDA 12.2 and cuDNN 8.9; not found: libcudnn.so.8 (here: libcudnn.so.9 "
        "(nvidia-cudnn-cu12 9.3.0.75)): 'Could not load dynamic library 'libcudnn.so.8'' — it will not see the GPU")


def test_tensorflow_with_its_own_libraries_is_fine():
    facts = box(tensorflow={"version": "2.15.1"}, pip={"nvidia-cudnn-cu12": "8.9.4.25", **TF_CU12})
    assert found(facts, "tf-cuda-libs") == []
    sys_libs = box(tensorflow={"version": "2.15.1"}, cuda_libs=[
        {"dir": "/usr/lib/x86_64-linux-gnu", "from": "system", "libs": {"libcudnn": "8.9.7", "libcudart": "12.2.140",
         "libcublas": "12.2.5.6", "libcublasLt": "12.2.5.6", "libcufft": "11.0.8.103", "libcurand": "10.3.3.141",
         "libcusolver": "11.5.2.141", "libcusparse": "12.1.2.141"}}])
    assert found(sys_libs, "tf-cuda-libs") == []
    older = box(tensorflow={"version": "2.15.1"}, cuda_libs=[dict(sys_libs["cuda_libs"][0], libs=dict(
        sys_libs["cuda_libs"][0]["libs"], libcudnn="8.6.0"))])
    assert found(older, "tf-cuda-libs")[0].verdict == (
        "/usr/lib/x86_64-linux-gnu/libcudnn.so.8.6.0 is installed, but tensorflow 2.15.1 was built with cuDNN 8.9: "
        "'Loaded runtime CuDNN library: 8.6.0 but source was compiled with: 8.9.0'")


def test_cudnn_older_than_torch_was_built_with():
    f = one(box(**torch("2.7.1+cu128", "12.8"), pip={"nvidia-cudnn-cu12": "9.1.0.70"}), "cudnn-too-old")
    assert f.verdict == "cuDNN 9.1.0.70 (nvidia-cudnn-cu12) is older than the cuDNN 9.7.1.26 torch 2.7.1+cu128 was built with"
    assert f.remedy == "pip install nvidia-cudnn-cu12==9.7.1.26"


def test_loaded_cudnn_newer_than_built_is_fine():
    facts = box(**torch("2.7.1+cu128", "12.8", cudnn="9.8.0", cudnn_source="loaded"), pip={"nvidia-cudnn-cu12": "9.1.0.70"})
    assert found(facts, "cudnn-too-old") == []


# --- 12. NumPy, Python, glibc --------------------------------------------------------------------


def test_numpy2_with_a_numpy1_build():
    f = one(box(**torch("2.2.2+cu121", "12.1"), numpy="2.1.3"), "numpy-abi")
    assert f.remedy == "pip install 'numpy<2', or upgrade to torch 2.3.0 (built against NumPy 2)"


def test_numpy1_with_numpy2_build_is_fine():
    assert found(box(**torch("2.5.1+cu124", "12.4"), numpy="1.26.4"), "numpy-abi") == []


def test_python_outside_the_wheels():
    f = one(box(python={"version": "3.13.1"}, **torch("2.2.2+cu121", "12.1")), "python-unsupported")
    assert f.remedy == "use Python 3.12 (uv venv -p 3.12), or torch 2.5.0, the first with Python 3.13 wheels"


@pytest.mark.parametrize("tags, glibc, bad", [
    (["cp311-cp311-manylinux_2_28_x86_64"], "2.17", True),
    (["cp311-cp311-manylinux_2_28_x86_64"], "2.28", False),
    (["cp311-cp311-manylinux2014_x86_64", "cp311-cp311-manylinux_2_17_x86_64"], "2.17", False),
])
def test_glibc_against_manylinux_tags(tags, glibc, bad):
    facts = box(glibc=glibc, **torch("2.7.1+cu128", "12.8"), wheel_tags={"torch": tags}, pip={"torch": "2.7.1+cu128"})
    got = found(facts, "glibc-too-old")
    assert bool(got) is bad
    if bad:
        assert got[0].verdict == "glibc 2.17 is older than torch 2.7.1+cu128's wheel needs (manylinux glibc ≥ 2.28)"


# --- 13. /dev/shm --------------------------------------------------------------------------------


@pytest.mark.parametrize("in_container, shm, expect", [(True, 64, True), (False, 64, False), (True, 16384, False)])
def test_shm(in_container, shm, expect):
    got = found(box(in_container=in_container, shm_mib=shm), "shm-small")
    assert bool(got) is expect
    if expect:
        assert got[0].remedy.startswith("restart the container with --shm-size=16g (or --ipc=host)")


# --- 14. GPU health ------------------------------------------------------------------------------


def test_thermal_power_ecc_remap_mig():
    g = gpu(name="NVIDIA H200", temp_c=91, clocks_event_reasons=["sw_power_cap", "hw_thermal_slowdown"], power_limit_w=500.0,
            default_power_limit_w=700.0, ecc_uncorrected=2, row_remap_pending=True, mig=True)
    got = {f.check: f for f in run_checks(box(gpus=[g]), K)}
    assert got["gpu-thermal"].verdict == "GPU 0 NVIDIA H200 is slowing its clocks (hw_thermal_slowdown) at 91 °C"
    assert got["gpu-power-limit"].remedy == "sudo nvidia-smi -i 0 -pl 700"
    assert got["gpu-ecc"].severity == "error"
    assert got["gpu-row-remap"].severity == "warn"
    assert got["gpu-mig"].severity == "info"


def test_healthy_gpu_under_load():
    g = gpu(temp_c=70, clocks_event_reasons=["sw_power_cap"], power_limit_w=699.5, default_power_limit_w=700.0,
            ecc_uncorrected=0, row_remap_pending=False, row_remap_failed=False, mig=False)
    assert serious(box(gpus=[g])) == []


# --- 15. GPU memory held by others ---------------------------------------------------------------


def test_memory_held_by_other_processes():
    facts = box(gpus=[gpu(0, mem=143771), gpu(1, mem=143771)],
                gpu_processes=[{"gpu": 0, "pid": 4242, "used_mib": 71680, "name": "python"}])
    f = one(facts, "gpu-memory-held")
    assert f.verdict == ("GPU 0 NVIDIA H100 80GB HBM3: 72091 MiB free of 143771 MiB; 71680 MiB held by 1 other "
                         "process (pid 4242 python: 71680 MiB)")
    assert f.remedy == "stop them (kill 4242), or use an idle GPU: export CUDA_VISIBLE_DEVICES=1"


def test_memory_used_by_invisible_processes_and_small_usage():
    assert one(box(gpus=[gpu(mem=81559, mem_used_mib=40000)]), "gpu-memory-held").verdict.endswith("(another container or user)")
    small = box(gpu_processes=[{"gpu": 0, "pid": 1, "used_mib": 500, "name": "Xorg"}])
    assert found(small, "gpu-memory-held") == []


# --- 16. RAM and disks ---------------------------------------------------------------------------


def test_ram_below_twice_vram():
    f = one(box(gpus=[gpu(i, name="NVIDIA H200", mem=143771) for i in range(8)], ram_mib=1048576), "ram-small")
    assert f.verdict.startswith("RAM 1024 GiB is less than twice the GPU memory (8 × 140 GiB = 1123 GiB)")
    assert found(box(ram_mib=262144), "ram-small") == []


def test_container_memory_limit_counts():
    assert one(box(ram_mib=515000, ram_limit_mib=65536), "ram-small").verdict.startswith("RAM 64 GiB (container limit)")


@pytest.mark.parametrize("disk, checks", [
    ({"path": "/data", "device": "sda", "rotational": True, "free_gib": 900.0, "total_gib": 4000.0}, ["disk-rotational"]),
    ({"path": "/data", "device": "vda", "rotational": True, "virtual": True, "free_gib": 900.0, "total_gib": 4000.0}, []),
    ({"path": "/data", "device": "nvme0n1", "rotational": False, "free_gib": 3.2, "total_gib": 500.0}, ["disk-full"]),
    ({"path": "/data", "device": "nvme0n1", "rotational": False, "free_gib": 120.0, "total_gib": 500.0}, []),
])
def test_disks(disk, checks):
    assert [f.check for f in run_checks(box(disks=[disk]), K) if f.check.startswith("disk-")] == checks


# --- 17. WSL -------------------------------------------------------------------------------------


def test_linux_driver_inside_wsl2():
    f = one(box(wsl=2, wsl_linux_driver=["/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15"]), "wsl2-linux-driver")
    assert f.severity == "error" and "apt-get purge 'nvidia-driver-*'" in f.remedy
    assert found(box(wsl=2, wsl_linux_driver=[]), "wsl2-linux-driver") == []


# --- 18. drift against envman.lock ---------------------------------------------------------------

LOCK = {"path": "/p/envman.lock", "lock_version": 1, "python": "3.11", "cuda": "12.8", "cudnn": "9.7.1.26",
        "min_driver": "570.124.06", "min_driver_minor_compat": "525.60.13", "arch_list": ["sm_80", "sm_90"],
        "framework": {"name": "torch", "version": "2.7.1", "variant": "cu128", "index_url": f"{IDX}/cu128"},
        "packages": {"torch": "2.7.1+cu128", "numpy": "2.2.6"}}


def _drifting(**kw):
    return box(**torch("2.7.1+cu128", "12.8"), lock=LOCK,
               pip={"torch": "2.7.1+cu128", "numpy": "2.2.6", "nvidia-cudnn-cu12": "9.7.1.26"}, **kw)


def test_no_drift_when_the_environment_matches_the_lock():
    assert found(_drifting(), "lock-drift") == [] and found(_drifting(), "lock-driver") == []


def test_drift_in_framework_python_packages_and_archs():
    facts = _drifting(python={"version": "3.12.3"}, gpus=[gpu(cc="12.0", name="NVIDIA GeForce RTX 5090")])
    facts.update(torch("2.7.0+cu126", "12.6"))
    facts["pip"].update({"torch": "2.7.0+cu126", "numpy": "1.26.4"})
    verdicts = [f.verdict for f in found(facts, "lock-drift")]
    assert verdicts[0] == "envman.lock pins torch 2.7.1+cu128, installed is torch 2.7.0+cu126"
    assert "envman.lock pins Python 3.11, this environment runs Python 3.12" in verdicts
    assert "1 package differs from envman.lock: numpy 1.26.4 (locked 2.2.6)" in verdicts
    assert any("is 12.0 (sm_120), not in envman.lock's arch list" in v for v in verdicts)


def test_driver_below_the_locked_stack():
    f = one(_drifting(driver="470.256.02"), "lock-driver")
    assert f.remedy == "install NVIDIA driver ≥ 570.124.06"


def test_unreadable_lock_is_info_and_no_lock_is_silence():
    f = one(box(lock={"path": "/p/envman.lock", "error": "not JSON (Expecting value: line 1 column 1 (char 0))"}),
            "lock-unreadable")
    assert f.severity == "info"
    assert [x for x in run_checks(box(lock=None), K) if x.check.startswith("lock")] == []


# --- robustness ----------------------------------------------------------------------------------

GARBAGE = [None, "x", 3, -1.5, True, [], {}, [None, 1, "a"], {"a": None}]


@pytest.mark.parametrize("junk", GARBAGE)
def test_malformed_facts_never_break_a_check(junk):
    base = box(**torch("2.7.1+cu128", "12.8"), lock=LOCK, docker={"reachable": True}, tensorflow={"version": "2.15.1"})
    for key in list(base) + ["disks", "cuda_libs", "nvcc", "cuda_home", "deep", "wheel_tags", "conda", "probe_errors"]:
        facts = dict(base, **{key: junk})
        bad = [f.verdict for f in run_checks(facts, K) if f.check == "check-failed"]
        assert bad == [], (key, junk)
    for key in ("torch", "gpus", "lock"):
        nested = dict(base)
        if key == "gpus":
            nested["gpus"] = [dict(gpu(), **{k: junk for k in gpu()})]
        else:
            nested[key] = {k: junk for k in (base[key] or {})}
        assert [f.verdict for f in run_checks(nested, K) if f.check == "check-failed"] == [], (key, junk)


def test_driver_too_old_on_kepler_does_not_ask_for_a_driver_the_gpu_cannot_run():
    real = knowledge_from_matrix(load_matrix())  # the fixture cuda.yaml's legacy_driver_branches
    facts = box(driver="470.256.02", gpus=[gpu(name="Tesla K80", cc="3.7", mem=11441)], **torch("2.7.1+cu126", "12.6"))
    f = one(facts, "driver-too-old", real)
    assert f.remedy.startswith("no driver that new runs a 3.7 GPU (support ends with R470, last 470.256.02): keep this driver")
    assert "torch==2.3.1" in f.remedy  # the newest build that runs on R470, carries sm_37 and has a cuDNN for it
    assert real.to_dict()["legacy"] == [[[3, 7], "R470", "470.256.02"]]
    assert Knowledge.from_dict(real.to_dict()).driver_ceiling((3, 7)) == ("R470", "470.256.02")


def test_torch_and_tensorflow_want_different_cudnn_majors_in_one_environment():
    facts = box(gpus=[], **torch("2.5.1+cu124", "12.4"), tensorflow={"version": "2.15.1", "is_cuda_build": True},
                pip={"torch": "2.5.1+cu124", "nvidia-cudnn-cu12": "9.1.0.70", **TF_CU12})
    facts.pop("gpus")  # NVML did not answer: the packages alone tell
    (f,) = found(facts, "tf-cuda-libs")
    assert f.verdict == ("nvidia-cudnn-cu12 9.1.0.70 is installed, but tensorflow 2.15.1 was built with cuDNN 8.9; "
                         "torch 2.5.1+cu124 needs cuDNN 9 (libcudnn.so.9) and tensorflow 2.15.1 cuDNN 8 (libcudnn.so.8): "
                         "in one environment only one of them can use the GPU")
    assert f.remedy.endswith("keep torch and tensorflow in separate environments")


def test_tensorflow_libraries_quiet_when_there_is_known_to_be_no_gpu():
    assert found(box(gpus=[], tensorflow={"version": "2.15.1", "is_cuda_build": True}), "tf-cuda-libs") == []


# --- a host that cannot run the project's image is not ready (issue #12, item 15) ------------------------------
_LOCKED = {"lock": {"path": "/p/envman.lock", "framework": {"name": "torch", "version": "2.14.1", "variant": "cu130"}}}


def test_docker_installed_but_its_daemon_down_is_an_error_for_a_locked_project():
    from envman.portable.doctor.report import render_text

    facts = {**_LOCKED, "docker": {"reachable": False, "installed": True,
                                   "error": "no Docker socket at /var/run/docker.sock"}}
    [f] = [f for f in run_checks(facts, K) if f.check == "docker-daemon-down"]
    assert f.severity == "error" and f.verdict == (
        "Docker is installed but its daemon does not answer (no Docker socket at /var/run/docker.sock): "
        "this project's image cannot be built or run here")
    assert "systemctl start docker" in f.remedy
    assert render_text(run_checks(facts, K), facts).splitlines()[0].startswith("verdict: training will NOT work here: 1 error")


@pytest.mark.parametrize("facts", [
    {**_LOCKED, "docker": {"reachable": True, "installed": True}},  # the daemon answers
    {**_LOCKED, "docker": {"reachable": False, "installed": False}},  # no Docker here at all: nothing to start
    {"docker": {"reachable": False, "installed": True}},  # no envman.lock: nothing needs an image
    {**_LOCKED, "in_container": True, "docker": {"reachable": False, "installed": True}},  # inside the image itself
])
def test_docker_daemon_check_stays_quiet_when_nothing_needs_it(facts):
    assert not [f for f in run_checks(facts, K) if f.check == "docker-daemon-down"]
