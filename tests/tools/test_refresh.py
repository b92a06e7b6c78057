"""The torch wheel readers (matrix/wheel.py) on the REAL torch 2.14.1 wheel of these machines' local index,
and on a wheel written here (the same members, so the reader is checked wherever the real one is absent)."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import pytest

from envman.errors import UsageError
from tools.matrix.wheel import facts_from_text, read_torch_wheel

REAL = Path("/opt/pypi-more/files/torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl")


@pytest.mark.skipif(not REAL.is_file(), reason=f"{REAL} is not on this machine (ENVIRONMENT.md: the local index)")
def test_reads_metadata_and_version_py_without_importing():
    facts = read_torch_wheel(REAL)
    assert facts.version == "2.14.1" and facts.cuda == "13.0" and facts.variant == "cu130"
    assert facts.cudnn == "9.24.0.43" and facts.nccl == "2.30.7"
    assert facts.cuda_runtime == "13.0.3"  # Requires-Dist: cuda-toolkit[...]==13.0.3
    assert "torch" not in sys.modules


def test_a_written_wheel_gives_its_pins_and_variant(tmp_path):
    whl = tmp_path / "torch-2.15.0-cp311-cp311-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(whl, "w") as zf:
        zf.writestr("torch/version.py", "__version__ = '2.15.0+cu132'\ncuda: Optional[str] = '13.2'\n")
        zf.writestr("torch-2.15.0.dist-info/METADATA",
                    "Metadata-Version: 2.1\nName: torch\nVersion: 2.15.0\n"
                    'Requires-Dist: cuda-toolkit[cublas,cudart]==13.2.2; platform_system == "Linux"\n'
                    'Requires-Dist: nvidia-cudnn-cu13==9.26.0.51; platform_system == "Linux"\n'
                    "Requires-Dist: nvidia-nccl-cu13==2.30.7\nRequires-Dist: opt-einsum>=3.3; extra == \"opt-einsum\"\n\n")
    f = read_torch_wheel(whl)
    assert (f.version, f.cuda, f.variant, f.cudnn, f.nccl, f.cuda_runtime) == ("2.15.0", "13.2", "cu132", "9.26.0.51", "2.30.7", "13.2.2")
    assert "opt-einsum" not in f.pins  # an extra's requirement is not the build's


def test_without_version_py_the_cuda_comes_from_the_runtime_pin():
    meta = "Metadata-Version: 2.1\nName: torch\nVersion: 2.6.0\nRequires-Dist: nvidia-cuda-runtime-cu12==12.4.127\n\n"
    assert facts_from_text(meta, None, "x.whl").variant == "cu124"


def test_not_a_wheel_is_a_usage_error(tmp_path):
    bad = tmp_path / "torch.whl"
    bad.write_text("no zip")
    with pytest.raises(UsageError, match="not a readable wheel"):
        read_torch_wheel(bad)
