"""Compiled extensions and capability floors: the fat-binary reader on synthetic ELF files (and on a real
nvcc build when nvcc is here), the extensions probe, and each check with its near-miss."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from envman.matrix.knowledge import knowledge_from_matrix, with_extensions
from envman.matrix.load import load_matrix
from envman.portable.doctor.checks import run_checks
from envman.portable.facts.extensions import LoaderView, probe_extensions
from envman.portable.fatbin import dynamic_entries, read_fatbin

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "facts"
K = with_extensions(knowledge_from_matrix(load_matrix(FIX.parent / "matrix")), FIX.parent / "matrix")


# --- a synthetic ELF with a .nv_fatbin section ---------------------------------------------------


def fat_entry(kind: int, arch: int, payload: bytes, isa: tuple[int, int] = (8, 4), flags: int = 0x11) -> bytes:
    head = struct.pack("<HHIQIIHHIIIQQQ", kind, 0x101, 64, len(payload), 0, 0, isa[1], isa[0], arch, 0, 0, flags, 0, 0)
    assert len(head) == 64
    return head + payload


def fat_container(*entries: bytes) -> bytes:
    body = b"".join(entries)
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body


def elf(sections: dict[str, bytes], needed: tuple[str, ...] = (), runpath: str | None = None,
        rpath: str | None = None, pad: int = 0) -> bytes:
    """A minimal little-endian ELF64 shared object: the given sections, .dynstr/.dynamic for ``needed`` and a
    DT_RUNPATH / DT_RPATH (``pad`` bytes of other strings first, as a large C++ library has)."""
    names = [""] + list(sections)
    data = dict(sections)
    if needed or runpath or rpath:
        dynstr = b"\0" + b"x" * pad + b"\0"
        tags = []
        for tag, n in [(1, n) for n in needed] + [(29, runpath), (15, rpath)]:
            if n:
                tags.append((tag, len(dynstr)))
                dynstr += n.encode() + b"\0"
        data[".dynstr"] = dynstr
        data[".dynamic"] = b"".join(struct.pack("<qQ", t, o) for t, o in tags) + struct.pack("<qQ", 0, 0)
        names += [".dynstr", ".dynamic"]
    names.append(".shstrtab")
    shstr = b"\0"
    name_off = {}
    for n in names[1:]:
        name_off[n] = len(shstr)
        shstr += n.encode() + b"\0"
    data[".shstrtab"] = shstr
    blob, offsets = b"", {}
    base = 64
    for n in names[1:]:
        offsets[n] = base + len(blob)
        blob += data[n] + b"\0" * (-len(data[n]) % 8)
    shoff = base + len(blob)
    sh = b"\0" * 64
    for n in names[1:]:
        typ = 6 if n == ".dynamic" else 3 if n in (".dynstr", ".shstrtab") else 1
        link = names.index(".dynstr") if n == ".dynamic" else 0
        sh += struct.pack("<IIQQQQIIQQ", name_off[n], typ, 0, 0, offsets[n], len(data[n]), link, 0, 8, 16 if typ == 6 else 0)
    ident = b"\x7fELF" + bytes([2, 1, 1]) + b"\0" * 9
    ehdr = ident + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64, len(names), len(names) - 1)
    return ehdr + blob + sh


def write_so(tmp_path: Path, name: str, sass=(), ptx=(), needed=(), isa=(8, 4), runpath=None, rpath=None,
             pad=0) -> Path:
    entries = [fat_entry(2, a, b"\x7fELF" + b"c" * 20) for a in sass] + [fat_entry(1, a, b".version 8.4\0", isa) for a in ptx]
    secs = {".text": b"\x90" * 16}
    if entries:
        # two containers with padding between them, as nvcc writes one per translation unit
        half = len(entries) // 2
        c1 = fat_container(*entries[:half]) if half else b""
        secs[".nv_fatbin"] = c1 + b"\0" * (-len(c1) % 8) + b"\0" * 8 + fat_container(*entries[half:])
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(elf(secs, tuple(needed), runpath, rpath, pad))
    return p


def test_fatbin_lists_sass_and_ptx_per_arch(tmp_path):
    p = write_so(tmp_path, "flash_attn_2_cuda.so", sass=(80, 90), ptx=(90,), needed=("libcudart.so.12", "libc10.so"))
    assert read_fatbin(str(p)) == {"sass": ["sm_80", "sm_90"], "ptx": ["compute_90"], "ptx_isa": "8.4"}
    assert dynamic_entries(str(p))["needed"] == ["libcudart.so.12", "libc10.so"]


def test_fatbin_of_a_host_only_library_is_empty_and_garbage_raises(tmp_path):
    p = write_so(tmp_path, "libhost.so")
    assert read_fatbin(str(p)) == {"sass": [], "ptx": []}
    bad = tmp_path / "bad.so"
    bad.write_bytes(b"not an elf at all")
    with pytest.raises(ValueError):
        read_fatbin(str(bad))


NVCC = shutil.which("nvcc") or next((str(p) for p in Path("/usr/local").glob("cuda*/bin/nvcc")), None)


@pytest.mark.skipif(NVCC is None or shutil.which("g++") is None, reason="no nvcc/g++ on this machine")
def test_fatbin_reads_what_nvcc_writes(tmp_path):
    src = tmp_path / "k.cu"
    src.write_text("__global__ void k(float *x){ x[threadIdx.x] *= 2; }\n"
                   "extern \"C\" void launch(float *x){ k<<<1,32>>>(x); }\n")
    out = tmp_path / "k.so"
    ran = subprocess.run([NVCC, "-shared", "-Xcompiler", "-fPIC", "-cudart", "shared",
                          "-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=sm_90",
                          "-gencode", "arch=compute_90,code=compute_90", str(src), "-o", str(out)],
                         capture_output=True, text=True, timeout=120)
    if ran.returncode != 0:
        pytest.skip(f"nvcc could not build here: {ran.stderr[-200:]}")
    got = read_fatbin(str(out))
    assert got["sass"] == ["sm_80", "sm_90"] and got["ptx"] == ["compute_90"]
    assert any(n.startswith("libcudart.so.") for n in dynamic_entries(str(out))["needed"])


# The entry headers nvcc 13.0.88 (PyPI's nvidia-cuda-nvcc 13.0.88) wrote into .nv_fatbin for this file's kernel,
# `nvcc -c -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 -gencode
# arch=compute_90,code=compute_90 --compress-mode=MODE k.cu`: the payloads are zeroed, the headers are verbatim.
# `size` compresses every entry with zstd (flags 0x8011; compressed size at byte 16, the original's at byte 56),
# `default` only the PTX, `speed` the PTX with LZ4 (0x2011), `none` nothing.
NVCC13_HEADERS = {
    "size": ["020001014000000020030000000000001e030000000000000800010050000000000000000000000011800000000000000000000000"
             "000000280c000000000000",
             "0100010150000000f800000000000000f200000040000000000009005a00000000000000000000001180000000000000000000000"
             "0000000890100000000000048000000000000000000000000000000",
             "020001014000000078030000000000007303000000000000080001005a000000000000000000000011800000000000000000000000"
             "000000700e000000000000"],
    "default": ["0200010140000000280c000000000000000000000000000008000100500000000000000000000000110000000000000000000"
                "000000000000000000000000000",
                "01000101500000000001000000000000fb00000040000000000009005a0000000000000000000000118000000000000000000"
                "00000000000890100000000000048000000000000000000000000000000"],
    "speed": ["010001015000000038010000000000003801000040000000000009005a00000000000000000000001120000000000000000000000"
              "0000000890100000000000048000000000000000000000000000000"],
    "none": ["0200010140000000280c000000000000000000000000000008000100500000000000000000000000110000000000000000000000"
             "000000000000000000000000"],
}


@pytest.mark.parametrize("mode, compressed", [("size", True), ("default", True), ("speed", True), ("none", False)])
def test_fatbin_marks_cuda13s_zstd_and_lz4_compression_as_nvcc_writes_it(tmp_path, mode, compressed):
    entries = []
    for h in NVCC13_HEADERS[mode]:
        head = bytes.fromhex(h)
        entries.append(head + bytes(struct.unpack_from("<Q", head, 8)[0]))  # the payload, zeroed
    p = tmp_path / f"k_{mode}.so"
    p.write_bytes(elf({".nv_fatbin": fat_container(*entries)}))
    got = read_fatbin(str(p))
    assert got.get("compressed", False) is compressed
    assert got["ptx"] == (["compute_90"] if mode != "none" else []) and got.get("ptx_isa") == ("9.0" if mode != "none" else None)
    assert got["sass"] == {"size": ["sm_80", "sm_90"], "default": ["sm_80"], "speed": [], "none": ["sm_80"]}[mode]


def test_probe_reads_record_metadata_and_the_libraries(tmp_path):
    site = tmp_path / "site"
    write_so(site, "flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so", sass=(80, 90), needed=("libcudart.so.12",))
    meta = site / "flash_attn-2.6.3+cu123torch2.4cxx11abiFALSE.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Name: flash_attn\nRequires-Dist: torch\nRequires-Dist: einops\n")
    (meta / "RECORD").write_text("flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so,sha256=x,1\n"
                                 "flash_attn/__init__.py,sha256=y,2\n")
    dists = {"flash-attn": (str(site), "2.6.3+cu123torch2.4cxx11abiFALSE", meta.name)}
    got = probe_extensions(dists, where=LoaderView([str(site)], environ={}, cache=[], defaults=(), unsearched=[]))
    assert got == {"flash-attn": {
        "version": "2.6.3+cu123torch2.4cxx11abiFALSE", "requires_torch": "any",
        "files": [{"file": "flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so", "sass": ["sm_80", "sm_90"],
                   "ptx": [], "needed": ["libcudart.so.12"], "resolved": {"libcudart.so.12": None}}],
    }}


# --- the checks ------------------------------------------------------------------------------------


def box(cc="8.6", name="NVIDIA GeForce RTX 3090", **kw):
    f = {"driver": "550.54.15", "driver_cuda": "12.4", "gpus": [{"index": 0, "name": name, "cc": cc}],
         "python": {"version": "3.11.9", "bits": 64, "executable": "/venv/bin/python"}, "pip": {}, "env": {},
         "torch": {"version": "2.4.1+cu124", "cuda": "12.4"}}
    f.update(kw)
    return f


def ext(dist="flash-attn", version="2.6.3", files=None, **kw):
    return {dist: {"version": version, "files": files or [], **kw}}


FA = "flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so"


def found(facts, prefix):
    return [f for f in run_checks(facts, K) if f.check.startswith(prefix)]


def test_extension_without_a_kernel_for_the_gpu():
    facts = box(cc="12.0", name="NVIDIA GeForce RTX 5090",
                extensions=ext(files=[{"file": FA, "sass": ["sm_80", "sm_90"], "ptx": []}]))
    (f,) = found(facts, "ext-arch")
    assert f.severity == "error"
    assert f.verdict == ("flash_attn_2_cuda.so (flash-attn 2.6.3) carries sm_80 sm_90; the GPU 0 NVIDIA GeForce RTX 5090 "
                         "is 12.0 (sm_120): no kernel of it runs there ('no kernel image is available for execution "
                         "on the device')")
    assert f.remedy.startswith('rebuild it for this GPU: TORCH_CUDA_ARCH_LIST="12.0" pip install')
    # sm_90 alone on an RTX 3090: SASS never runs on a lower minor
    (g,) = found(box(extensions=ext(files=[{"file": FA, "sass": ["sm_90"], "ptx": []}])), "ext-arch")
    assert "carries sm_90; the GPU 0 NVIDIA GeForce RTX 3090 is 8.6 (sm_86)" in g.verdict


@pytest.mark.parametrize("sass, ptx", [
    (["sm_80", "sm_90"], []),  # sm_80 SASS runs on 8.6 (same major, lower minor)
    (["sm_90"], ["compute_80"]),  # PTX JIT reaches it, ISA within the driver's
    ([], []),  # a host-only library
])
def test_extension_arch_near_misses(sass, ptx):
    facts = box(extensions=ext(files=[{"file": FA, "sass": sass, "ptx": ptx, "ptx_isa": "8.4"}]))
    assert found(facts, "ext-") == []


def test_ptx_newer_than_the_driver_can_jit():
    facts = box(extensions=ext(files=[{"file": FA, "sass": ["sm_90"], "ptx": ["compute_80"], "ptx_isa": "8.7"}]))
    (f,) = found(facts, "ext-ptx")
    assert "PTX ISA 8.7, newer than driver 550.54.15 (CUDA 12.4) can JIT (≤ 8.4)" in f.verdict


def test_extension_built_for_another_torch():
    facts = box(extensions=ext(version="2.6.3+cu123torch2.3cxx11abiFALSE"))
    (f,) = found(facts, "ext-torch")
    assert f.verdict.startswith("flash-attn 2.6.3+cu123torch2.3cxx11abiFALSE was built for torch 2.3, but torch "
                                "2.4.1+cu124 is installed: importing it fails with 'undefined symbol")
    pinned = box(extensions=ext("xformers", "0.0.28", requires_torch="==2.5.1"))
    assert [f.check for f in found(pinned, "ext-torch")] == ["ext-torch-mismatch"]


@pytest.mark.parametrize("extensions", [
    ext(version="2.6.3+cu123torch2.4cxx11abiFALSE"),
    ext("xformers", "0.0.28", requires_torch="==2.4.0"),  # another patch of the same minor: same ABI
    ext("xformers", "0.0.28", requires_torch=">=2.4"),  # a range, not a build pin
])
def test_extension_torch_near_misses(extensions):
    assert found(box(extensions=extensions), "ext-torch") == []


ORT = "onnxruntime/capi/libonnxruntime_providers_cuda.so"


def test_onnxruntime_built_for_cuda_11_next_to_a_cuda_12_torch():
    facts = box(pip={"nvidia-cudnn-cu12": "9.1.0.70"},
                extensions=ext("onnxruntime-gpu", "1.18.0",
                               [{"file": ORT, "sass": [], "ptx": [], "needed": ["libcudart.so.11.0", "libcudnn.so.8"]}]))
    (f,) = found(facts, "ext-cuda")
    assert f.verdict == ("libonnxruntime_providers_cuda.so (onnxruntime-gpu 1.18.0) needs libcudart.so.11.0, "
                         "libcudnn.so.8; this environment has CUDA 12 (torch 2.4.1+cu124): the "
                         "CUDAExecutionProvider fails to load and onnxruntime silently falls back to the CPU")
    assert f.remedy == "pip install 'onnxruntime-gpu>=1.19.0' (built for CUDA 12 and cuDNN 9)"


def test_onnxruntime_near_miss_matching_cuda():
    facts = box(pip={"nvidia-cudnn-cu12": "9.1.0.70"},
                extensions=ext("onnxruntime-gpu", "1.20.1",
                               [{"file": ORT, "needed": ["libcudart.so.12", "libcudnn.so.9"]}]))
    assert found(facts, "ext-cuda") == []


def bnb(*cudas):
    return ext("bitsandbytes", "0.42.0", [{"file": f"bitsandbytes/libbitsandbytes_cuda{c}.so"} for c in cudas])


def test_bitsandbytes_without_a_binary_for_torchs_cuda_or_bnb_cuda_version():
    (f,) = found(box(extensions=bnb("118", "121")), "bnb-")
    assert f.verdict.startswith("bitsandbytes 0.42.0 looks for libbitsandbytes_cuda124.so because of torch 2.4.1+cu124")
    (g,) = found(box(extensions=bnb("118", "124"), env={"BNB_CUDA_VERSION": "122"}), "bnb-")
    assert "BNB_CUDA_VERSION=122" in g.verdict and g.remedy == "unset BNB_CUDA_VERSION"
    assert found(box(extensions=bnb("118", "124")), "bnb-") == []


# --- capability floors ---------------------------------------------------------------------------


def test_flash_attn_2_on_a_t4():
    facts = box(cc="7.5", name="Tesla T4", pip={"flash-attn": "2.6.3"})
    (f,) = found(facts, "gpu-too-old-")
    assert f.check == "gpu-too-old-flash-attn-2"
    assert f.verdict.startswith("FlashAttention-2 (flash-attn 2.x) needs compute capability ≥ 8.0; the GPU 0 Tesla T4 "
                                "is 7.5 (sm_75) and flash-attn 2.6.3 is installed:")
    assert "sdpa" in f.remedy


def test_bf16_asked_by_the_project_on_a_v100():
    facts = box(cc="7.0", name="Tesla V100-SXM2-32GB", workload={"precision": "bf16"})
    assert [f.check for f in found(facts, "gpu-too-old-")] == ["gpu-too-old-bf16"]


@pytest.mark.parametrize("facts", [
    box(cc="8.0", name="NVIDIA A100", pip={"flash-attn": "2.6.3"}, workload={"precision": "bf16"}),  # at the floor
    box(cc="7.5", name="Tesla T4", pip={"flash-attn": "1.0.9"}),  # FlashAttention 1 supports Turing
    box(cc="7.5", name="Tesla T4", workload={"precision": "fp16"}),  # asks for nothing it lacks
    box(cc="7.0", name="Tesla V100", pip={"triton": "3.1.0"}),  # Triton's floor is 7.0
])
def test_capability_near_misses(facts):
    assert found(facts, "gpu-too-old-") == []


def test_triton_on_pascal_and_fp8_on_ampere():
    assert [f.check for f in found(box(cc="6.1", name="GTX 1080 Ti", pip={"triton": "3.1.0"}), "gpu-too-old-")] == \
        ["gpu-too-old-triton"]
    fp8 = box(cc="8.0", name="A100", pip={"transformer-engine": "1.11.0"})
    assert [f.check for f in found(fp8, "gpu-too-old-")] == ["gpu-too-old-fp8"]


# --- the interpreter and Windows -----------------------------------------------------------------


def test_32bit_python_and_its_near_miss():
    facts = box(python={"version": "3.11.9", "bits": 32, "executable": "C:/Python311-32/python.exe"})
    (f,) = found(facts, "python-32bit")
    assert f.verdict.startswith("C:/Python311-32/python.exe is a 32-bit Python 3.11")
    assert found(box(), "python-32bit") == []


def test_tensorflow_on_native_windows():
    facts = box(os="Windows", tensorflow={"version": "2.15.1"})
    facts.pop("torch")
    (f,) = found(facts, "tf-windows")
    assert "no GPU support (the last release with it is 2.10)" in f.verdict and "tensorflow<2.11" in f.remedy
    old = dict(facts, tensorflow={"version": "2.10.1"})
    linux = dict(facts, os="Linux")
    assert found(old, "tf-windows") == [] and found(linux, "tf-windows") == []


def test_probe_on_this_machine_stays_bounded():
    """Whatever is installed here, the probe answers quickly and never raises."""
    import sys
    import time

    from envman.portable.facts.packages import scan_dists

    t = time.monotonic()
    probe_extensions(scan_dists([p for p in sys.path if p and os.path.isdir(p)]))
    assert time.monotonic() - t < 5


# --- the machine under the driver ----------------------------------------------------------------


def hgx(**kw):
    f = box(cc="9.0", name="NVIDIA H100 80GB HBM3", driver="550.54.15", nvswitch_count=4)
    f.update(kw)
    return f


def test_nvswitch_without_fabric_manager_and_its_near_miss():
    (f,) = found(hgx(fabricmanager={"active": "inactive"}), "fabricmanager")
    assert "error 802 'system not yet initialized'" in f.verdict and "nvidia-fabricmanager is inactive" in f.verdict
    (g,) = found(hgx(fabricmanager={"active": "active", "version": "550.90.07"}), "fabricmanager")
    assert "nvidia-fabricmanager 550.90.07 runs, but the driver is 550.54.15" in g.verdict
    assert found(hgx(fabricmanager={"active": "active", "version": "550.54.15"}), "fabricmanager") == []
    assert found(box(), "fabricmanager") == []


COMPAT = {"path": "/usr/local/cuda-12.8/compat/libcuda.so.570.124.06", "version": "570.124.06"}


def test_cuda_compat_on_geforce_and_under_a_newer_driver():
    on_path = {"LD_LIBRARY_PATH": "/usr/local/cuda-12.8/compat"}
    (f,) = found(box(cuda_compat=[COMPAT], env=on_path), "cuda-compat")
    assert f.severity == "error" and f.check == "cuda-compat-unsupported-gpu" and "error 804" in f.verdict
    newer = box(cc="9.0", name="NVIDIA H100 80GB HBM3", driver="575.51.03", cuda_compat=[COMPAT], env=on_path)
    (g,) = found(newer, "cuda-compat")
    assert g.check == "cuda-compat-older" and "error 803" in g.verdict and "driver 575.51.03 is newer" in g.verdict
    older = box(cc="9.0", name="NVIDIA H100 80GB HBM3", driver="535.104.05", cuda_compat=[COMPAT], env=on_path)
    assert found(older, "cuda-compat") == []  # the intended use: an older data-center driver


def test_kernel_module_missing_for_the_running_kernel():
    facts = box(gpus=[], driver=None, kernel="6.8.0-51-generic", nvml_lib="550.120", nvidia_ko=[])
    (f,) = found(facts, "kernel-module")
    assert f.verdict.startswith("the NVIDIA driver 550.120 is installed but no nvidia.ko exists for the running kernel "
                                "6.8.0-51-generic")
    built = dict(facts, nvidia_ko=["/lib/modules/6.8.0-51-generic/updates/dkms/nvidia.ko.zst"])
    assert found(built, "kernel-module") == [] and found(built, "secure-boot") == []
    unsigned = dict(facts, nvidia_ko=["/lib/modules/6.8.0-51-generic/updates/dkms/nvidia.ko"], secure_boot=True,
                    nvidia_ko_signed=False)
    assert [f.check for f in found(unsigned, "secure-boot")] == ["secure-boot-unsigned"]


def test_container_with_libcuda_but_no_gpu_list_is_not_missing_libraries():
    base = {"in_container": True, "container": "docker", "device_nodes": ["nvidia0", "nvidiactl"],
            "nvml_error": "NVML Shared Library Not Found", "env": {}}
    assert [f.check for f in found(base, "container-")] == ["container-no-gpu"]
    seen = dict(base, libcuda={"path": "/usr/lib/x86_64-linux-gnu/libcuda.so.1", "version": "570.124.06"})
    (f,) = found(seen, "container-")
    assert f.check == "container-gpu-unlisted" and f.severity == "info"
    assert "libcuda.so.1 570.124.06" in f.verdict


def test_workload_precision_is_read_without_yaml(tmp_path):
    from envman.portable.facts.host import read_workload

    (tmp_path / "envman.yaml").write_text("framework: torch\nworkload:\n  model: llama-8b\n  precision: bf16\nx: 1\n")
    assert read_workload(str(tmp_path)) == {"precision": "bf16"}
    (tmp_path / "envman.yaml").write_text("framework: torch\nprecision: bf16\n")
    assert read_workload(str(tmp_path)) is None


def test_project_pin_without_wheels_for_this_python(tmp_path):
    from envman.portable.facts.host import read_framework_pins

    (tmp_path / "requirements.txt").write_text("numpy<2\ntorch==2.2.2\n")
    pins = read_framework_pins(str(tmp_path))
    assert pins == {"torch": {"version": "2.2.2", "file": "requirements.txt"}}
    facts = box(python={"version": "3.13.1", "bits": 64, "executable": "/venv/bin/python"}, pins=pins)
    (f,) = found(facts, "pin-no-wheels")
    assert f.verdict.startswith("requirements.txt pins torch==2.2.2, which has no wheels for Python 3.13")
    assert found(dict(facts, python={"version": "3.11.9", "bits": 64}), "pin-no-wheels") == []


# --- packages that ship one build per CUDA release or GPU generation (portable/doctor/variants.py) ----------


@pytest.mark.parametrize("path, token", [
    ("bitsandbytes/libbitsandbytes_cuda118.so", ("bitsandbytes/libbitsandbytes_*.so", "11.8")),
    ("bitsandbytes/libbitsandbytes_cuda121_nocublaslt.so", ("bitsandbytes/libbitsandbytes_*_nocublaslt.so", "12.1")),
    ("pkg/lib/cuda12/libkernels.so", ("pkg/lib/*/libkernels.so", "12")),
    ("mypkg/_ops_cu11x.so", ("mypkg/_ops_*.so", "11")),
    ("nvidia/cuda_runtime/lib/libcudart.so.12", None),
    ("flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so", None),
    ("onnxruntime/capi/libonnxruntime_providers_cuda.so", None),
])
def test_a_cuda_build_tag_in_a_file_name(path, token):
    from envman.portable.doctor.variants import cuda_token

    assert cuda_token(path) == token


def test_the_build_a_package_loads_for_its_cuda():
    from envman.portable.doctor.variants import pick

    group = [{"file": f"libbitsandbytes_cuda{x}.so"} for x in ("117", "118", "120", "121", "124")]
    assert pick(group, "12.4")["file"] == "libbitsandbytes_cuda124.so"
    assert pick(group, "12.6")["file"] == "libbitsandbytes_cuda124.so"  # the newest of its major below it
    assert pick(group, "11.8")["file"] == "libbitsandbytes_cuda118.so"
    assert pick(group, "13.0")["file"] == "libbitsandbytes_cuda117.so"  # none of that major: the first


def test_a_malformed_extensions_file_names_every_problem_at_once(tmp_path):
    """extensions.yaml is data like the matrix: each bad entry is named by file and dotted path, all in one
    DataError (an uncited row, a missing field, a row that is not a mapping); a good file loads."""
    from envman.errors import DataError

    (tmp_path / "extensions.yaml").write_text(
        "features:\n  - {id: bf16, min_cc: '8.0'}\n"
        "ptx_isa:\n  - {cuda: '12.4', source: s}\n"
        "builds:\n  - {package: flash-attn, from: '2.6', cuda: '12.4', source: s}\n"
        "cuda_sonames:\n  - {cuda: '12.4', libs: {cudart: 12}, measured: m}\n  - not-a-mapping\n"
        "wheel_glibc:\n  - {package: torch, from: '2.6', glibc: '2.28'}\n"
        "triton_links_libcuda_so: {before: '3.0'}\n", encoding="utf-8")
    with pytest.raises(DataError) as err:
        with_extensions(K, tmp_path)
    assert err.value.message.split("; ") == [
        "extensions.yaml: features[0]: no source",
        "extensions.yaml: ptx_isa[0].isa: missing or not a quoted string",
        "extensions.yaml: cuda_sonames[1]: expected a mapping",
        'extensions.yaml: cuda_sonames[0].libs: expected stem: "soname version" strings',
        "extensions.yaml: wheel_glibc[0]: no source or measured",
        "extensions.yaml: triton_links_libcuda_so: expected a mapping with source or measured",
    ]
    (tmp_path / "extensions.yaml").write_text(
        "features:\n  - {id: bf16, name: bfloat16, min_cc: '8.0', asked_by: {precision: [bf16]}, source: s}\n"
        "builds:\n  - {package: flash-attn, from: '2.6', cuda: '12.4', source: s}\n"
        "windows_native:\n  - {package: torch, from: '2.0', measured: m}\n", encoding="utf-8")
    k = with_extensions(K, tmp_path)
    assert [(f.id, f.min_cc) for f in k.features] == [("bf16", (8, 0))]
    assert [(b.package, b.cuda) for b in k.ext_builds] == [("flash-attn", "12.4")]
    assert k.windows_native == (("torch", "2.0"),)
