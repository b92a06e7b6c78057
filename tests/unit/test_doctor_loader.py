"""Round three (issue #28): the classes the held-out reports revealed, each with its near-miss that stays quiet.

The dynamic loader (DT_NEEDED with DT_RPATH/DT_RUNPATH on synthetic ELF files; where ld.so would find each CUDA
soname; libraries installed off its path; LD_LIBRARY_PATH before a RUNPATH), a torch arch list read from its own
fat binary, Triton's -lcuda, a CUDA image one minor ahead of the driver on GeForce, CUDA 10's lack of minor-version
compatibility, WSL2 without /dev/dxg, the kernel module missing while only nvidia-smi says a driver is installed, and
the nvcc/torch differences nothing builds against."""

from __future__ import annotations

from pathlib import Path

from test_doctor_checks import K, box, found, gpu, one, serious, torch
from test_doctor_extensions import elf, fat_container, fat_entry, write_so

from envman.portable.facts import loader
from envman.portable.facts.extensions import LoaderView, library_record, probe_framework_libs
from envman.portable.fatbin import dynamic_entries, read_fatbin

# --- the ELF dynamic section -------------------------------------------------------------------------


def test_dynamic_entries_read_needed_rpath_and_runpath(tmp_path):
    p = write_so(tmp_path, "libx.so", needed=("libcudnn.so.9", "libc10.so"), runpath="$ORIGIN:/opt/cuda/lib")
    assert dynamic_entries(str(p)) == {"needed": ["libcudnn.so.9", "libc10.so"], "rpath": [],
                                       "runpath": ["$ORIGIN", "/opt/cuda/lib"]}
    q = write_so(tmp_path, "liby.so", needed=("libcudart.so.12",), rpath="$ORIGIN/../../nvidia/cu13/lib")
    assert dynamic_entries(str(q))["rpath"] == ["$ORIGIN/../../nvidia/cu13/lib"]


def test_names_far_into_a_large_string_table_are_read(tmp_path):
    """libtorch_cuda.so's .dynstr is 4.5 MB and names its DT_NEEDED near the end: reading the table into a 4 MB buffer
    lost them all (needed_libs returned [] for torch)."""
    p = write_so(tmp_path, "libbig.so", needed=("libcudart.so.13", "libcudnn.so.9"), rpath="$ORIGIN", pad=5 << 20)
    assert dynamic_entries(str(p))["needed"] == ["libcudart.so.13", "libcudnn.so.9"]


def test_rare_sass_is_told_apart_from_the_library_arch_list(tmp_path):
    """A few kernels built for more GPUs than the library (libtorch_cuda.so 2.14.1: sm_103 in 59 of 475 containers,
    sm_89 and sm_121 in one) are not its arch list."""
    blob = b""
    for i in range(10):
        archs = (80, 90, 120) + ((103,) if i == 0 else ())
        c = fat_container(*[fat_entry(2, a, b"\x7fELF" + b"c" * 8) for a in archs])
        blob += c + b"\0" * (-len(c) % 8)
    p = tmp_path / "libtorch_cuda.so"
    p.write_bytes(elf({".text": b"\x90" * 8, ".nv_fatbin": blob}))
    assert read_fatbin(str(p)) == {"sass": ["sm_80", "sm_90", "sm_103", "sm_120"], "ptx": [], "sass_rare": ["sm_103"]}


# --- where ld.so finds a soname ------------------------------------------------------------------------


def _lib(d: Path, name: str) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(b"x")
    return d / name


def test_runpath_comes_after_ld_library_path_and_rpath_before_it(tmp_path):
    own = _lib(tmp_path / "torch" / "lib", "libcudnn.so.8")
    other = _lib(tmp_path / "cluster" / "cudnn-8.0.3", "libcudnn.so.8")
    env = {"LD_LIBRARY_PATH": str(other.parent)}
    hit = loader.resolve("libcudnn.so.8", env, [], (), runpath=["$ORIGIN"], origin=str(own.parent))
    assert hit is not None and hit["path"] == str(other) and hit["from"] == "LD_LIBRARY_PATH"
    assert hit["own"] == str(own)
    hit = loader.resolve("libcudnn.so.8", env, [], (), rpath=["$ORIGIN"], origin=str(own.parent))
    assert hit is not None and hit["path"] == str(own) and hit["from"] == "RPATH" and "own" not in hit


def test_library_record_says_where_an_unfound_soname_lies(tmp_path):
    site = tmp_path / "site"
    so = write_so(site / "onnxruntime" / "capi", "libonnxruntime_providers_cuda.so",
                  needed=("libcudnn.so.9", "libcudart.so.12", "libcuda.so.1"))
    wheel = _lib(site / "nvidia" / "cudnn" / "lib", "libcudnn.so.9")
    where = LoaderView([str(site)], environ={}, cache=[], defaults=())
    rec = library_record(str(so), where)
    assert rec["resolved"] == {"libcudnn.so.9": None, "libcudart.so.12": None}  # (the driver's libcuda: not judged here)
    assert rec["elsewhere"] == {"libcudnn.so.9": [str(wheel)]}
    rec = library_record(str(so), LoaderView([str(site)], environ={"LD_LIBRARY_PATH": str(wheel.parent)}, cache=[],
                                             defaults=()))
    assert rec["resolved"]["libcudnn.so.9"] == {"path": str(wheel), "from": "LD_LIBRARY_PATH"}
    assert "elsewhere" not in rec or "libcudnn.so.9" not in rec["elsewhere"]


def test_torch_libraries_record_their_arch_list_and_resolution(tmp_path):
    site = tmp_path / "site"
    write_so(site / "torch" / "lib", "libtorch_cuda.so", sass=(80, 90), needed=("libcudnn.so.9",),
             rpath="$ORIGIN/../../nvidia/cudnn/lib")
    wheel = _lib(site / "nvidia" / "cudnn" / "lib", "libcudnn.so.9")
    got = probe_framework_libs({"torch": (str(site), "2.14.1", "torch-2.14.1.dist-info")},
                               LoaderView([str(site)], environ={}, cache=[], defaults=()))
    (f,) = got["torch"]
    assert f["file"] == "torch/lib/libtorch_cuda.so" and f["sass"] == ["sm_80", "sm_90"]
    assert f["resolved"] == {"libcudnn.so.9": {"path": str(wheel), "from": "RPATH"}}


# --- the loader checks ---------------------------------------------------------------------------------

SITE = "/venv/lib/python3.11/site-packages"


def _ort(resolved, elsewhere=None, needed=("libcudnn.so.9", "libcudnn_adv.so.9")):
    f = {"file": "onnxruntime/capi/libonnxruntime_providers_cuda.so", "needed": list(needed), "resolved": resolved}
    if elsewhere:
        f["elsewhere"] = elsewhere
    return {"onnxruntime-gpu": {"version": "1.20.1", "files": [f]}}


def _torch_libs(resolved):
    return {"torch": [{"file": "torch/lib/libtorch_cuda.so", "needed": list(resolved), "rpath": ["$ORIGIN"],
                       "resolved": resolved}]}


AWAY = {so: [f"{SITE}/nvidia/cudnn/lib/{so}"] for so in ("libcudnn.so.9", "libcudnn_adv.so.9")}


def test_a_library_installed_off_the_loader_path_is_an_error_naming_what_fails():
    f = one(box(extensions=_ort({"libcudnn.so.9": None, "libcudnn_adv.so.9": None}, AWAY)), "ext-cuda-libs")
    assert f.severity == "error" and "'libcudnn.so.9: cannot open shared object file'" in f.verdict
    assert f.remedy.startswith(f"export LD_LIBRARY_PATH={SITE}/nvidia/cudnn/lib${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}")
    assert "onnxruntime.preload_dlls()" in f.remedy


def test_what_torch_loads_first_is_there_the_rest_is_not():
    libs = _torch_libs({"libcudnn.so.9": {"path": f"{SITE}/nvidia/cudnn/lib/libcudnn.so.9", "from": "RPATH"}})
    f = one(box(extensions=_ort({"libcudnn.so.9": None, "libcudnn_adv.so.9": None}, AWAY), framework_libs=libs,
                **torch("2.6.0+cu124", "12.4")), "ext-cuda-libs")
    assert f.severity == "error" and "not libcudnn_adv.so.9" in f.verdict and "'libcudnn_adv.so.9: cannot" in f.verdict
    only = {"libcudnn.so.9": AWAY["libcudnn.so.9"]}
    w = one(box(extensions=_ort({"libcudnn.so.9": None}, only, needed=("libcudnn.so.9",)), framework_libs=libs,
                **torch("2.6.0+cu124", "12.4")), "ext-cuda-libs")
    assert w.severity == "warn" and "only when torch was imported first" in w.verdict


def test_near_miss_the_wheels_on_ld_library_path_resolve():
    hit = {"path": AWAY["libcudnn.so.9"][0], "from": "LD_LIBRARY_PATH"}
    assert serious(box(extensions=_ort({"libcudnn.so.9": hit, "libcudnn_adv.so.9": hit}))) == []


def _shadow(version, own_version=None):
    hit = {"path": "/apps/cudnn/lib64/libcudnn.so.8", "from": "LD_LIBRARY_PATH", "version": version,
           "own": f"{SITE}/torch/lib/libcudnn.so.8"}
    if own_version:
        hit["own_version"] = own_version
    return box(framework_libs=_torch_libs({"libcudnn.so.8": hit}), env={"LD_LIBRARY_PATH": "/apps/cudnn/lib64:/x"},
               **torch("1.12.0+cu113", "11.3"))


def test_ld_library_path_before_a_runpath_copy():
    f = one(_shadow("8.0.3", "8.3.2"), "ld-library-path")
    assert f.severity == "error" and "/apps/cudnn/lib64/libcudnn.so.8 (8.0.3) before torch" in f.verdict
    assert f.remedy.startswith("export LD_LIBRARY_PATH=/x (drop /apps/cudnn/lib64")
    assert one(_shadow("8.0.3"), "ld-library-path").severity == "warn"  # the bundled copy's version unknown


def test_near_miss_a_newer_copy_of_the_same_soname():
    assert found(_shadow("8.9.7", "8.3.2"), "ld-library-path") == []


def test_near_miss_rpath_torch_ignores_ld_library_path():
    """torch ≥ 1.13 links with DT_RPATH: its own nvidia wheels come before LD_LIBRARY_PATH's older cuDNN 9, which the
    LD_LIBRARY_PATH heuristic used to call a shadow."""
    own = {"libcudnn.so.9": {"path": f"{SITE}/nvidia/cudnn/lib/libcudnn.so.9", "from": "RPATH"}}
    facts = box(**torch("2.5.1+cu124", "12.4"), pip={"nvidia-cudnn-cu12": "9.1.0.70"},
                env={"LD_LIBRARY_PATH": "/usr/local/cuda/lib64"},
                cuda_libs=[{"dir": "/usr/local/cuda/lib64", "from": "LD_LIBRARY_PATH", "libs": {"libcudnn": "9.0.0"}}])
    assert found(facts, "ld-library-path")  # without what the loader resolves: the heuristic speaks
    assert found(dict(facts, framework_libs=_torch_libs(own)), "ld-library-path") == []


# --- a torch arch list from its own fat binary -----------------------------------------------------------


def _fat(sass, rare=()):
    return {"torch": [{"file": "torch/lib/libtorch_cuda.so", "sass": list(sass), "ptx": [], "sass_rare": list(rare)}]}


def test_a_release_the_matrix_lacks_is_judged_by_its_fat_binary():
    rtx = [gpu(0, "NVIDIA GeForce RTX 5090", "12.0")]
    f = one(box(gpus=rtx, **torch("2.7.0.dev20250310+cu124", "12.4"),
                framework_libs=_fat(["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"])), "arch-not-covered")
    assert "the fat binary of torch/lib/libtorch_cuda.so" in f.verdict
    assert found(box(gpus=rtx, **torch("2.7.0.dev20250310+cu128", "12.8"),
                     framework_libs=_fat(["sm_80", "sm_90", "sm_100", "sm_120"])), "arch-not-covered") == []


def test_rare_sass_does_not_count():
    gb10 = [gpu(0, "NVIDIA GB10", "12.1")]
    assert found(box(gpus=gb10, **torch("2.14.1", "13.0"), framework_libs=_fat(["sm_90", "sm_120"])), "arch-not-covered") == []
    assert found(box(gpus=[gpu(0, "NVIDIA B300", "10.3")], **torch("2.14.1", "13.0"),
                     framework_libs=_fat(["sm_90", "sm_103", "sm_120"], rare=["sm_103"])), "arch-not-covered")


# --- Triton's -lcuda -------------------------------------------------------------------------------------


def _triton(version, dev_path=None, **kw):
    loaded = [{"name": "libcuda.so.1", "path": "/usr/lib/x86_64-linux-gnu/libcuda.so.1", "from": "ld.so.cache",
               "stub": False}, {"name": "libcuda.so", "path": dev_path}]
    return box(os="Linux", pip={"triton": version}, libcuda_loaded=loaded, **torch("2.5.1", "12.4"), **kw)


def test_triton_before_36_needs_an_unversioned_libcuda():
    f = one(_triton("3.1.0"), "libcuda-unversioned-missing")
    assert f.severity == "warn" and "'/usr/bin/ld: cannot find -lcuda'" in f.verdict
    assert f.remedy.startswith("sudo ln -s libcuda.so.1 /usr/lib/x86_64-linux-gnu/libcuda.so && sudo ldconfig")


def test_near_misses_of_the_unversioned_libcuda():
    assert found(_triton("3.6.0"), "libcuda-unversioned-missing") == []  # links libcuda.so.1
    assert found(_triton("3.1.0", "/usr/lib/x86_64-linux-gnu/libcuda.so"), "libcuda-unversioned-missing") == []
    assert found(_triton("3.1.0", env={"TRITON_LIBCUDA_PATH": "/usr/local/cuda/lib64/stubs"}),
                 "libcuda-unversioned-missing") == []
    old = _triton("3.1.0")
    old["libcuda_loaded"] = old["libcuda_loaded"][:1]  # a facts file that did not say whether libcuda.so exists
    assert found(old, "libcuda-unversioned-missing") == []


# --- a container one minor ahead of the driver ----------------------------------------------------------


def _container(name, cc, **kw):
    return box(in_container=True, container="docker", driver="580.159.03", driver_cuda="13.0",
               gpus=[gpu(0, name, cc)], container_cuda={"cuda": "13.2"}, **kw)


def test_geforce_gets_no_minor_version_compatibility_in_a_container():
    f = one(_container("NVIDIA GeForce RTX 3090", "8.6"), "container-cuda-newer")
    assert f.severity == "error" and "unsatisfied condition: cuda>=13.2" in f.verdict and "error 804" in f.verdict


def test_near_misses_data_center_gpu_and_a_compat_library():
    assert found(_container("NVIDIA H100 80GB HBM3", "9.0"), "container-cuda-newer") == []
    compat = [{"path": "/usr/local/cuda-13.2/compat/libcuda.so.595.45.04", "version": "595.45.04"}]
    assert found(_container("NVIDIA GeForce RTX 3090", "8.6", cuda_compat=compat), "container-cuda-newer") == []


def test_without_data_on_the_images_cuda_only_a_readable_driver_cuda_judges_it():
    """The rule check_driver follows too: an unparsable driver CUDA ('N/A' in a hand-edited facts file) says nothing."""
    def image(driver_cuda):
        return box(in_container=True, container="docker", driver="418.87.00", driver_cuda=driver_cuda,
                   gpus=[gpu(0, "Tesla V100-SXM2-32GB", "7.0")], container_cuda={"cuda": "99.9"})

    assert one(image("10.1"), "container-cuda-newer").verdict == (
        "this container was started from a CUDA 99.9 image, but the host driver 418.87.00 supports CUDA ≤ 10.1: CUDA "
        "calls fail with 'CUDA driver version is insufficient for CUDA runtime version' (error 35)")
    assert found(image("N/A"), "container-cuda-newer") == []


# --- CUDA 10 has no minor-version compatibility -------------------------------------------------------


def test_cuda10_needs_a_driver_of_its_own_minor():
    f = one(box(driver="418.67", driver_cuda="10.1", **torch("1.6.0", "10.2")), "driver-too-old")
    assert "this driver supports CUDA ≤ 10.1" in f.verdict


def test_near_misses_of_the_cuda10_rule():
    assert found(box(driver="440.33.01", driver_cuda="10.2", **torch("1.6.0", "10.2")), "driver-too-old") == []
    # CUDA 11 and later: a driver of the same major runs a newer minor (minor-version compatibility)
    assert found(box(driver="450.80.02", driver_cuda="11.0", **torch("1.13.1+cu117", "11.7")), "driver-too-old") == []


# --- WSL2 without /dev/dxg; a driver whose kernel module is missing ------------------------------------


def test_wsl2_without_dxg_has_no_gpu():
    f = one(box(wsl=2, gpus=[], device_nodes=[], **torch("1.7.1", "10.2")), "wsl2-no-gpu")
    assert f.severity == "error" and "/dev/dxg" in f.verdict and "wsl --update" in f.remedy
    assert found(box(wsl=2, device_nodes=["dxg"], **torch("1.7.1", "10.2")), "wsl2-no-gpu") == []


def test_nvidia_smi_alone_says_a_driver_is_installed():
    smi = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
           "NVIDIA driver is installed and running.")
    f = one(box(gpus=None, driver=None, kernel="3.13.0-116-generic", nvidia_ko=[], nvidia_smi_error=smi),
            "kernel-module-missing")
    assert "/lib/modules/3.13.0-116-generic" in f.verdict
    other = box(gpus=None, driver=None, nvidia_ko=[], nvidia_smi_error="NVIDIA-SMI has failed: Insufficient Permissions")
    assert found(other, "kernel-module-missing") == [] and found(other, "nvidia-smi-failed")


# --- one cause, one finding; what nothing builds against ------------------------------------------------


def test_native_windows_tensorflow_is_one_finding():
    facts = box(os="Windows", driver="555.99", gpus=[gpu(0, "NVIDIA GeForce RTX 4050 Laptop GPU", "8.9")],
                pip={"tensorflow": "2.17.0", "tensorflow-intel": "2.17.0"},
                tensorflow={"version": "2.17.0", "package": "tensorflow", "is_cuda_build": False})
    assert [f.split(":")[0] for f in serious(facts)] == ["tf-windows-native"]


def test_a_toolkit_nothing_builds_with_is_a_note():
    nightly = box(**torch("2.13.0.dev20260516+cu130", "13.0"), nvcc={"version": "12.8", "full": "12.8.93"})
    assert [f.severity for f in found(nightly, "ext-nvcc-mismatch")] == ["info"]
    minor = box(**torch("2.0.0+cu117", "11.7"), pip={"deepspeed": "0.8.3"}, nvcc=None,
                cuda_home={"path": "/usr/local/cuda", "source": "/usr/local/cuda", "nvcc_version": "11.1"})
    assert [f.severity for f in found(minor, "ext-nvcc-mismatch")] == ["info"]
    assert K.triton_lcuda_before == "3.6.0"
