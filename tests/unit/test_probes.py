"""Probes: parsers on recorded outputs, fake environments on disk, and failures that become facts."""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

from envman.portable.facts import deep, docker, nvidia, packages, project, system, toolchain
from envman.portable.facts import gather as facts
from envman.portable.frameworks.tensorflow import parse_build_info


def script(path: Path, body: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return str(path)


# --- nvidia --------------------------------------------------------------------------------------

RICH = ("index,name,uuid,compute_cap,driver_version,memory.total,memory.used,temperature.gpu,power.draw,power.limit,"
        "power.default_limit,clocks_event_reasons.active,ecc.errors.uncorrected.volatile.total,mig.mode.current").split(",")


def test_parse_smi_query():
    text = ("0, NVIDIA H200, GPU-5d1c0e8a-1111, 9.0, 580.95.05, 143771, 71680, 87, 690.12, 700.00, 700.00, "
            "0x0000000000000044, 0, Disabled\n"
            "1, NVIDIA GeForce RTX 4090, GPU-77, 8.9, 580.95.05, 24564, 300, 40, 30.5, 450.00, 450.00, 0x1, [N/A], [N/A]\n")
    g0, g1 = nvidia.parse_smi_query(text, RICH)
    assert g0 == {"index": 0, "name": "NVIDIA H200", "uuid": "GPU-5d1c0e8a-1111", "cc": "9.0", "driver_version": "580.95.05",
                  "mem_total_mib": 143771, "mem_used_mib": 71680, "temp_c": 87, "power_draw_w": 690.12,
                  "power_limit_w": 700.0, "default_power_limit_w": 700.0,
                  "clocks_event_reasons": ["sw_power_cap", "hw_thermal_slowdown"], "ecc_uncorrected": 0, "mig": False}
    assert "ecc_uncorrected" not in g1 and "mig" not in g1 and g1["clocks_event_reasons"] == ["gpu_idle"]


def test_parse_smi_apps_maps_uuids_to_indices():
    procs = nvidia.parse_smi_apps("GPU-77, 4242, /usr/bin/python3, 71680\nGPU-aa, 17, Xorg, [N/A]\n", {"GPU-77": 1})
    assert procs == [{"gpu": 1, "pid": 4242, "used_mib": 71680, "name": "python3"},
                     {"gpu": 0, "pid": 17, "used_mib": None, "name": "Xorg"}]


def test_old_scanner_still_parses():
    scan = nvidia.parse_nvidia_smi_csv("0, NVIDIA A100-SXM4-80GB, 8.0, 550.54.15, 81920\n")
    assert scan.driver == "550.54.15" and scan.gpus[0].cc == "8.0" and scan.gpus[0].mem_total_mib == 81920


@pytest.mark.parametrize("text, version", [
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\nGCC version: gcc 12", "550.54.15"),
    ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  (dvs-builder@U16)", "580.95.05"),
])
def test_kernel_module_version(monkeypatch, text, version):
    monkeypatch.setattr(nvidia, "read_text", lambda p, *limit: text if p == "/proc/driver/nvidia/version" else None)
    assert nvidia.kernel_module_version() == version


def test_no_driver_at_all_means_no_gpus(monkeypatch):
    monkeypatch.setattr(nvidia, "_dev_nodes", lambda: [])
    monkeypatch.setattr(nvidia, "kernel_module_version", lambda: None)
    monkeypatch.setattr(nvidia.shutil, "which", lambda name: None)
    monkeypatch.setattr(nvidia.os.path, "exists", lambda p: False)
    f = nvidia.probe_nvidia()
    assert f["gpus"] == [] and "device nodes" in f["nvml_error"]


def test_mismatch_records_nvidia_smi_error_text(monkeypatch, tmp_path):
    smi = script(tmp_path / "nvidia-smi", 'echo "Failed to initialize NVML: Driver/library version mismatch"\n'
                                          'echo "NVML library version: 550.90"\nexit 18')
    monkeypatch.setattr(nvidia, "_dev_nodes", lambda: ["nvidia0", "nvidiactl"])
    monkeypatch.setattr(nvidia, "_nvml_facts", lambda: (None, "NVML: RM has detected an NVML/RM version mismatch.", False))
    monkeypatch.setattr(nvidia, "kernel_module_version", lambda: "550.54.15")
    monkeypatch.setattr(nvidia.shutil, "which", lambda name: smi if name == "nvidia-smi" else None)
    f = nvidia.probe_nvidia()
    assert f["nvidia_smi_error"] == "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 550.90"
    assert f["driver"] == "550.54.15" and f["driver_source"] == "kernel-module" and "gpus" not in f  # unknown, not none


def test_smi_fallback_reads_rich_fields(monkeypatch, tmp_path):
    smi = script(tmp_path / "nvidia-smi", '''case "$1" in
  --query-gpu=*) echo "0, NVIDIA H200, GPU-1, 9.0, 580.95.05, 143771, 1, 30, 70.0, 700.00, 700.00, 0x1, 0, Disabled";;
  --query-compute-apps=*) echo "GPU-1, 99, python, 2048";;
esac''')
    monkeypatch.setattr(nvidia, "_dev_nodes", lambda: ["nvidia0"])
    monkeypatch.setattr(nvidia, "_nvml_facts", lambda: (None, "NVML: Unknown Error", False))
    monkeypatch.setattr(nvidia.shutil, "which", lambda name: smi if name == "nvidia-smi" else None)
    f = nvidia.probe_nvidia()
    assert f["driver"] == "580.95.05" and f["driver_source"] == "nvidia-smi"
    assert f["gpus"][0]["cc"] == "9.0" and "driver_version" not in f["gpus"][0]
    assert f["gpu_processes"] == [{"gpu": 0, "pid": 99, "used_mib": 2048, "name": "python"}]


# --- packages: versions without importing anything -----------------------------------------------


def fake_venv(root: Path) -> Path:
    sp = root / "lib" / "python3.12" / "site-packages"
    (root / "bin").mkdir(parents=True)
    os.symlink(sys.executable, root / "bin" / "python")
    (root / "pyvenv.cfg").write_text("home = /usr/bin\ninclude-system-site-packages = false\nversion = 3.12.3\n")
    for d in ("torch-2.7.1+cu128.dist-info", "torchvision-0.22.1+cu128.dist-info", "numpy-2.2.6.dist-info",
              "nvidia_cudnn_cu12-9.7.1.26.dist-info", "nvidia_nccl_cu12-2.26.2.dist-info", "tensorflow-2.15.1.dist-info",
              "torch", "tensorflow/python/platform"):
        (sp / d).mkdir(parents=True)
    (sp / "torch-2.7.1+cu128.dist-info" / "WHEEL").write_text(
        "Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: cp312-cp312-manylinux_2_28_x86_64\n")
    (sp / "torch" / "version.py").write_text(
        "from typing import Optional\n\n__all__ = ['__version__']\n__version__ = '2.7.1+cu128'\ndebug = False\n"
        "cuda: Optional[str] = '12.8'\ngit_version = 'e2d141dbde55c2a4370fac5165b0561b6af4798b'\nhip: Optional[str] = None\n"
        "raise RuntimeError('importing this file is a bug: the probe must only read it')\n")
    (sp / "tensorflow" / "python" / "platform" / "build_info.py").write_text(
        "import collections\n\nbuild_info = collections.OrderedDict([('cuda_compute_capabilities', ['sm_50', 'sm_60', "
        "'sm_70', 'sm_75', 'compute_80']), ('cuda_version', '12.2'), ('cudnn_version', '8'), ('is_cuda_build', True)])\n")
    return root


def test_packages_read_from_files_only(tmp_path):
    venv = fake_venv(tmp_path / "venv")
    f = packages.probe_packages(str(venv / "bin" / "python"))
    assert f["python"] == {"version": "3.12.3", "bits": 64, "executable": str(venv / "bin" / "python"),
                           "prefix": os.path.realpath(venv)}
    t = f["torch"]
    assert (t["version"], t["cuda"], t["cudnn"], t["cudnn_source"], t["nccl"]) == (
        "2.7.1+cu128", "12.8", "9.7.1.26", "wheel", "2.26.2")
    assert f["pip"]["torchvision"] == "0.22.1+cu128" and f["pip"]["nvidia-cudnn-cu12"] == "9.7.1.26"
    assert f["numpy"] == "2.2.6"
    assert f["wheel_tags"] == {"torch": ["cp312-cp312-manylinux_2_28_x86_64"]}
    assert f["tensorflow"] == {"version": "2.15.1", "package": "tensorflow", "cuda": "12.2", "cudnn": "8",
                               "is_cuda_build": True, "arch_list": ["sm_50", "sm_60", "sm_70", "sm_75", "compute_80"]}


def test_active_virtualenv_is_the_default_target(tmp_path, monkeypatch):
    venv = fake_venv(tmp_path / "venv")
    monkeypatch.setenv("VIRTUAL_ENV", str(venv))
    assert packages.probe_packages()["torch"]["version"] == "2.7.1+cu128"


def test_an_interpreter_that_does_not_run_is_a_recorded_error(tmp_path):
    f = packages.probe_packages(str(tmp_path / "no" / "python"))
    assert "not found" in f["_error"]


@pytest.mark.parametrize("text", [
    "build_info = {'cuda_version': '12.3', 'cudnn_version': '8', 'is_cuda_build': True}\n",
    "import collections\nbuild_info = collections.OrderedDict([('cuda_version', '12.3'), ('cudnn_version', '8'),"
    " ('is_cuda_build', True)])\n",
])
def test_tf_build_info_both_layouts(text):
    assert parse_build_info(text) == {"cuda_version": "12.3", "cudnn_version": "8", "is_cuda_build": True}


def test_conda_cpuonly(tmp_path):
    meta = tmp_path / "conda-meta"
    meta.mkdir()
    (meta / "cpuonly-2.0-0.json").write_text("{}")
    (meta / "pytorch-2.5.1-py3.11_cpu_0.json").write_text("{}")
    assert packages._conda(str(tmp_path)) == {"prefix": str(tmp_path), "cpuonly": True, "pytorch": "2.5.1 py3.11_cpu_0"}


# --- system --------------------------------------------------------------------------------------


@pytest.mark.parametrize("release, wsl", [("5.15.153.1-microsoft-standard-WSL2", 2), ("4.4.0-19041-Microsoft", 1),
                                          ("6.8.0-49-generic", 0)])
def test_wsl_version(release, wsl):
    assert system.wsl_version(release) == wsl


def test_system_facts(tmp_path, monkeypatch):
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    f = system.probe_system(str(tmp_path))
    assert f["in_container"] is True and f["container"] == "kubernetes"
    assert f["os"] == "Linux" and f["wsl"] in (0, 1, 2) and f["cpu_count"] >= 1
    assert f["disks"][0]["path"] == str(tmp_path) and f["disks"][0]["free_gib"] >= 0


# --- toolchain -----------------------------------------------------------------------------------


def fake_toolkit(root: Path, version: str, max_gcc: int) -> Path:
    mj, mn = version.split(".")
    script(root / "bin" / "nvcc", f'echo "Cuda compilation tools, release {version}, V{version}.93"')
    (root / "include" / "crt").mkdir(parents=True)
    (root / "include" / "crt" / "host_config.h").write_text(
        f"#if defined(__GNUC__)\n\n#if __GNUC__ > {max_gcc}\n\n#error -- unsupported GNU version! gcc versions later than "
        f"{max_gcc} are not supported!\n#endif\n")
    (root / "version.json").write_text(json.dumps({"cuda": {"name": "CUDA SDK", "version": f"{mj}.{mn}.1"}}))
    return root


def test_nvcc_behind_a_wrapper_script_and_cuda_home(tmp_path):
    tk = fake_toolkit(tmp_path / "cuda-12.8", "12.8", 14)
    wrapper = script(tmp_path / "bin" / "nvcc", f'exec {tk}/bin/nvcc "$@"')
    other = fake_toolkit(tmp_path / "cuda-12.4", "12.4", 13)
    env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "CUDA_HOME": str(other), "LD_LIBRARY_PATH": ""}
    f = toolchain.probe_toolchain(env)
    assert f["nvcc"]["path"] == wrapper and f["nvcc"]["toolkit"] == str(tk)
    assert (f["nvcc"]["version"], f["nvcc"]["full"], f["nvcc"]["max_gcc"]) == ("12.8", "12.8.93", 14)
    assert f["cuda_home"] == {"path": str(other), "source": "CUDA_HOME", "nvcc_version": "12.4", "max_gcc": 13}
    assert f["env"] == {"CUDA_HOME": str(other), "LD_LIBRARY_PATH": ""}


def test_no_toolkit_is_recorded_as_none(tmp_path, monkeypatch):
    monkeypatch.setattr(toolchain.os.path, "isdir", lambda p: False if p == "/usr/local/cuda" else os.path.isdir(p))
    f = toolchain.probe_toolchain({"PATH": str(tmp_path)})
    assert f["nvcc"] is None and f["cuda_home"] is None


def test_cuda_libraries_on_the_library_path(tmp_path):
    lib = tmp_path / "lib64"
    lib.mkdir()
    for n in ("libnvJitLink.so.12", "libnvJitLink.so.12.2.140", "libcudnn.so.8", "libcudnn.so.8.9.7", "libfoo.so.1"):
        (lib / n).write_text("")
    got = [d for d in toolchain.cuda_libs(str(lib)) if d["from"] == "LD_LIBRARY_PATH"]
    assert got == [{"dir": str(lib), "from": "LD_LIBRARY_PATH", "libs": {"libcudnn": "8.9.7", "libnvJitLink": "12.2.140"}}]


# --- docker: the engine API over a socket --------------------------------------------------------


def serve_once(path: str, reply: bytes | None) -> threading.Thread:
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)

    def run():
        conn, _ = srv.accept()
        conn.recv(4096)
        if reply is None:
            time.sleep(1.0)  # an engine that hangs
        else:
            conn.sendall(reply)
        conn.close()
        srv.close()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_docker_engine_with_nvidia_runtime(tmp_path):
    sock = str(tmp_path / "d.sock")
    body = json.dumps({"ServerVersion": "27.3.1", "Runtimes": {"nvidia": {}, "runc": {}}, "DefaultRuntime": "runc"})
    serve_once(sock, b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + body.encode())
    d = docker.probe_docker(environ={"DOCKER_HOST": f"unix://{sock}"})
    assert d["reachable"] is True and d["version"] == "27.3.1" and d["nvidia_runtime"] is True


def test_docker_absent_or_hanging_is_a_fact(tmp_path):
    d = docker.probe_docker(environ={"DOCKER_HOST": f"unix://{tmp_path}/none.sock"})
    assert d["reachable"] is False and d["error"] == f"no Docker socket at {tmp_path}/none.sock"
    sock = str(tmp_path / "slow.sock")
    serve_once(sock, None)
    t0 = time.monotonic()
    d = docker.probe_docker(timeout=0.2, environ={"DOCKER_HOST": f"unix://{sock}"})
    assert d["reachable"] is False and "timed out" in d["error"] and time.monotonic() - t0 < 0.9


# --- project lock --------------------------------------------------------------------------------


def test_lock_read_defensively(tmp_path):
    assert project.probe_lock(str(tmp_path)) is None
    (tmp_path / "envman.lock").write_text("{oops")
    assert project.probe_lock(str(tmp_path))["error"].startswith("not JSON")
    (tmp_path / "envman.lock").write_text(json.dumps({
        "lock_version": 1, "base_image": {"kind": "cuda-devel"}, "python_lock": {"requirements": "requirements.lock.txt"},
        "stack": {"framework": {"name": "torch", "version": "2.7.1", "variant": "cu128"}, "cuda": "12.8", "python": "3.11",
                  "arch_list": ["sm_80", "sm_90"], "companions": {"torchvision": "0.22.1", "torchaudio": None},
                  "future_field": {"x": 1}}}))
    (tmp_path / "requirements.lock.txt").write_text(
        "--index-url https://pypi.org/simple\nnumpy==2.2.6 \\\n    --hash=sha256:abc\nTorch==2.7.1+cu128 \\\n    # via -r in\n")
    lock = project.probe_lock(str(tmp_path))
    assert lock == {"path": str(tmp_path / "envman.lock"), "lock_version": 1,
                    "framework": {"name": "torch", "version": "2.7.1", "variant": "cu128"}, "cuda": "12.8", "python": "3.11",
                    "arch_list": ["sm_80", "sm_90"], "companions": {"torchvision": "0.22.1"}, "base_kind": "cuda-devel",
                    "requirements": "requirements.lock.txt", "packages": {"numpy": "2.2.6", "torch": "2.7.1+cu128"}}


# --- deep: a child process with a timeout --------------------------------------------------------


def test_deep_without_torch_reports_the_import_error():
    d = deep.probe_deep(sys.executable, timeout=60)
    assert "ModuleNotFoundError" in d["torch"]["error"]


def test_deep_that_hangs_is_cut_off(tmp_path):
    d = deep.probe_deep(script(tmp_path / "python", "sleep 5"), timeout=0.3)
    assert d == {"error": f"{tmp_path / 'python'} -c 'import torch' died: {tmp_path / 'python'}: timed out after 0.3 s"}


def test_merge_deep_prefers_what_torch_says():
    f = {"torch": {"version": "2.7.1+cu128", "cuda": "12.8", "cudnn": "9.1.0.70", "cudnn_source": "wheel"}}
    deep.merge_deep(f, {"torch": {"arch_list": ["sm_80", "sm_90", "compute_90"], "cudnn": "9.7.1", "cuda_available": True}})
    assert f["torch"]["arch_list"] == ["sm_80", "sm_90", "compute_90"] and f["torch"]["cudnn_source"] == "loaded"


# --- gather_facts --------------------------------------------------------------------------------


def test_failing_and_hanging_probes_become_facts():
    def boom():
        raise OSError("disk on fire")

    def hang():
        time.sleep(2)
        return {}

    results, errors = facts.run_probes({"ok": lambda: {"a": 1}, "boom": boom, "hang": hang}, deadline=0.3)
    assert results == {"ok": {"a": 1}}
    assert errors == {"boom": "OSError: disk on fire", "hang": "timed out after 0.3 s"}


def test_gather_facts_of_this_machine(tmp_path):
    f = facts.gather_facts(str(tmp_path), python=str(tmp_path / "missing-python"))
    assert f["schema"] == 1 and f["project"] == str(tmp_path)
    assert "not found" in f["probe_errors"]["packages"]
    for key in ("os", "kernel", "in_container", "env", "docker", "disks", "lock"):
        assert key in f
    json.dumps(f)  # a facts dict is JSON as it stands


# --- issue #28: the facts the new checks judge, read from a machine's files ---------------------------------


def test_torch_records_the_wheels_its_metadata_pins_and_those_installed_elsewhere(tmp_path):
    """A --no-deps install lacks them; a lib/lib64 split (RHEL-family Pythons) puts them out of torch's RPATH."""
    venv = fake_venv(tmp_path / "venv")
    sp = venv / "lib" / "python3.12" / "site-packages"
    (sp / "torch-2.7.1+cu128.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: torch\nVersion: 2.7.1+cu128\nRequires-Dist: filelock\n"
        'Requires-Dist: nvidia-cudnn-cu12==9.7.1.26; platform_system == "Linux" and platform_machine == "x86_64"\n'
        'Requires-Dist: nvidia-cublas-cu12==12.8.3.14; platform_system == "Linux" and platform_machine == "x86_64"\n'
        'Requires-Dist: triton==3.3.1; platform_system == "Linux" and platform_machine == "x86_64"\n'
        'Requires-Dist: opt-einsum>=3.3; extra == "opt-einsum"\n')
    lib64 = venv / "lib64" / "python3.12" / "site-packages"
    (lib64 / "nvidia_cublas_cu12-12.8.3.14.dist-info").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\nversion = 3.12.3\n")
    found = packages.scan_dists([str(sp), str(lib64)])
    from envman.portable.frameworks.torch import probe_torch

    t = probe_torch(found, lambda p, n: packages.read_text(p, n))
    assert t["requires"] == {"nvidia-cudnn-cu12": "==9.7.1.26", "nvidia-cublas-cu12": "==12.8.3.14",
                             "triton": "==3.3.1"}
    assert t["apart"] == ["nvidia-cublas-cu12"]


def test_build_intent_and_dockerfiles_come_from_the_project_files(tmp_path):
    (tmp_path / "requirements.txt").write_text("torch==2.5.1\nflash_attn>=2.5  # fast attention\n# apex\nmy-apex-tools\n")
    (tmp_path / "pyproject.toml").write_text('[project]\ndependencies = ["mamba-ssm", "xformers>=0.0.28"]\n')
    (tmp_path / "docker").mkdir()
    (tmp_path / "docker" / "Dockerfile.gpu").write_text(
        "ARG CUDA=12.1.0\nFROM nvidia/cuda:${CUDA}-devel-ubuntu22.04 AS build\nFROM build AS final\n")
    (tmp_path / "Dockerfile").write_text("FROM python:3.11-slim\n")
    assert project.read_build_intent(str(tmp_path)) == [
        {"package": "flash-attn", "file": "requirements.txt", "line": "flash_attn>=2.5"},
        {"package": "mamba-ssm", "file": "pyproject.toml", "line": 'dependencies = ["mamba-ssm", "xformers>=0.0.28"]'}]
    assert project.read_dockerfiles(str(tmp_path)) == [
        {"path": "Dockerfile", "from": ["python:3.11-slim"]},
        {"path": "docker/Dockerfile.gpu", "from": ["nvidia/cuda:12.1.0-devel-ubuntu22.04"]}]
    assert project.read_build_intent(str(tmp_path / "docker")) == []  # probed: none named


def _ld_cache(entries):
    """An /etc/ld.so.cache in glibc's new format: header, 24-byte entries, then the strings."""
    import struct

    strings, offsets = b"", []
    head = 48 + 24 * len(entries)
    for key, value in entries:
        offsets.append((head + len(strings), head + len(strings) + len(key) + 1))
        strings += key.encode() + b"\0" + value.encode() + b"\0"
    out = b"glibc-ld.so.cache1.1" + struct.pack("<II", len(entries), len(strings)) + b"\0" * 20
    for k, v in offsets:
        out += struct.pack("<iIIIQ", 0x0303, k, v, 0, 0)
    return out + strings


def test_the_loader_is_followed_like_ld_so(tmp_path):
    from envman.portable.facts import loader

    stubs = tmp_path / "cuda" / "lib64" / "stubs"
    drv = tmp_path / "drv"
    stubs.mkdir(parents=True)
    drv.mkdir()
    (drv / "libcuda.so.550.127.05").write_bytes(b"\x7fELF")
    os.symlink(drv / "libcuda.so.550.127.05", drv / "libcuda.so.1")
    (stubs / "libcuda.so").write_bytes(b"\x7fELF")
    cache = loader.cache_entries(_ld_cache([("libcuda.so.1", str(drv / "libcuda.so.1")),
                                            ("libcuda.so", str(stubs / "libcuda.so"))]))
    assert cache == [("libcuda.so.1", str(drv / "libcuda.so.1")), ("libcuda.so", str(stubs / "libcuda.so"))]
    assert loader.resolve("libcuda.so.1", {}, cache, ()) == {
        "name": "libcuda.so.1", "path": str(drv / "libcuda.so.1"), "version": "550.127.05", "from": "ld.so.cache",
        "stub": False}
    assert loader.resolve("libcuda.so", {}, cache, ())["stub"] is True
    env = {"LD_LIBRARY_PATH": f"{stubs}:/nowhere"}
    (stubs / "libcuda.so.1").symlink_to(stubs / "libcuda.so")
    assert loader.resolve("libcuda.so.1", env, cache, ())["from"] == "LD_LIBRARY_PATH"
    assert loader.resolve("libnothing.so.1", env, cache, ()) is None


def test_the_cuda_image_a_container_was_started_from():
    env = {"CUDA_VERSION": "12.1.1", "NVIDIA_REQUIRE_CUDA": "cuda>=12.1 brand=tesla,driver>=470,driver<471",
           "NV_CUDNN_VERSION": "8.9.0.131", "PATH": "/usr/bin"}
    assert system.container_cuda(env) == {"cuda": "12.1.1", "require": "cuda>=12.1 brand=tesla,driver>=470,driver<471",
                                          "cudnn": "8.9.0.131"}
    assert system.container_cuda({"PATH": "/usr/bin"}) is None


def test_extensions_outside_torch_and_windows_libraries_are_recorded(tmp_path):
    from envman.portable.facts.extensions import probe_extensions

    sp = tmp_path / "sp"
    for dist, files in (("llama_cpp_python-0.3.2.dist-info", ["llama_cpp/lib/libggml-cuda.so"]),
                        ("bitsandbytes-0.45.5.dist-info", ["bitsandbytes/libbitsandbytes_cuda124.dll"]),
                        ("onnxruntime_genai_cuda-0.5.2.dist-info", ["onnxruntime_genai/onnxruntime-genai.so"])):
        (sp / dist).mkdir(parents=True)
        (sp / dist / "RECORD").write_text("".join(f"{f},sha256=x,1\n" for f in files))
        for f in files:
            (sp / f).parent.mkdir(parents=True, exist_ok=True)
            (sp / f).write_bytes(b"not an elf")
    e = probe_extensions(packages.scan_dists([str(sp)]))
    assert sorted(e) == ["bitsandbytes", "llama-cpp-python", "onnxruntime-genai-cuda"]
    assert e["bitsandbytes"]["files"] == [{"file": "bitsandbytes/libbitsandbytes_cuda124.dll"}]
    assert e["llama-cpp-python"]["files"][0]["file"] == "llama_cpp/lib/libggml-cuda.so"


def test_a_package_with_compiled_code_that_requires_torch_is_read_whatever_its_name(tmp_path):
    """lmdeploy, sgl-kernel, gsplat: not on any list, found by their own Requires-Dist: torch and shared libraries."""
    from envman.portable.facts.extensions import probe_extensions

    sp = tmp_path / "sp"
    for dist, req, files in (("sgl_kernel-0.1.7.dist-info", "torch==2.7.1", ["sgl_kernel/common_ops.abi3.so"]),
                             ("transformers-4.52.0.dist-info", "torch>=2.1", []),
                             ("torchvision_addon-1.0.dist-info", "torchvision", ["addon/_C.so"])):
        (sp / dist).mkdir(parents=True)
        (sp / dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: x\nRequires-Dist: {req}\n\nbody\n")
        (sp / dist / "RECORD").write_text("".join(f"{f},sha256=x,1\n" for f in files))
        for f in files:
            (sp / f).parent.mkdir(parents=True, exist_ok=True)
            (sp / f).write_bytes(b"not an elf")
    e = probe_extensions(packages.scan_dists([str(sp)]))
    assert sorted(e) == ["sgl-kernel"] and e["sgl-kernel"]["requires_torch"] == "==2.7.1"


def test_dockerfiles_in_the_subdirectories_of_docker_directories(tmp_path):
    """dockerfiles/XAgentGen/Dockerfile (OpenBMB/XAgent), docker/docker-cuda/Dockerfile (LlamaFactory): a GPU image
    two levels down; a virtualenv's and a hidden directory's are not the project's."""
    for rel, text in (("dockerfiles/XAgentGen/Dockerfile", "FROM pytorch/pytorch:2.1.0-cuda11.8-cudnn8-devel\n"),
                      ("docker/docker-cuda/Dockerfile", "FROM nvcr.io/nvidia/pytorch:24.02-py3\n"),
                      ("venv/Dockerfile", "FROM python:3.11\n"), (".git/Dockerfile", "FROM scratch\n"),
                      ("src/deep/Dockerfile", "FROM python:3.12\n")):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert project.read_dockerfiles(str(tmp_path)) == [
        {"path": "docker/docker-cuda/Dockerfile", "from": ["nvcr.io/nvidia/pytorch:24.02-py3"]},
        {"path": "dockerfiles/XAgentGen/Dockerfile", "from": ["pytorch/pytorch:2.1.0-cuda11.8-cudnn8-devel"]}]


def test_a_libcuda_name_the_loader_cannot_find_is_recorded_absent(monkeypatch):
    from envman.portable.facts import host, loader

    monkeypatch.setattr(loader, "resolve", lambda name, *a, **k: (
        {"name": name, "path": f"/usr/lib/x86_64-linux-gnu/{name}", "from": "ld.so.cache", "stub": False}
        if name == "libcuda.so.1" else None))
    got = host.probe_host()["libcuda_loaded"]
    assert got[1] == {"name": "libcuda.so", "path": None} and got[0]["path"].endswith("libcuda.so.1")
