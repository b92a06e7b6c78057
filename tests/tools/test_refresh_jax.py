"""`python -m tools.matrix sync jax` against a local PEP 691 index (tests/tools/test_refresh_index.py's server): jax's
METADATA names the plugin per CUDA major, the plugin's METADATA its nvidia-* floors, and the SASS/PTX come from
the fat binaries of the plugin's kernel libraries, each range-read out of the wheel. The regenerated jax.yaml
is validated by the loader before anything is written."""

from __future__ import annotations

import io
import zipfile

from envman.matrix.load import load_matrix
from tests.tools import test_refresh_index as served
from tests.unit.test_doctor_extensions import write_so
from tools.matrix.discover_jax import extra_pins, with_cuda_floors

envman = served.envman
index, matrix_dir = served.index, served.matrix_dir  # the local index and the matrix copy, as fixtures

JAX_META = """Metadata-Version: 2.4
Name: jax
Version: 0.13.0
Requires-Python: >=3.12
Requires-Dist: jaxlib<=0.13.0,>=0.12.0
Requires-Dist: jaxlib<=0.13.0,>=0.13.0; extra == "cuda12"
Requires-Dist: jax-cuda12-plugin[with-cuda]<=0.13.0,>=0.13.0; extra == "cuda12"
Requires-Dist: jaxlib<=0.13.0,>=0.13.0; extra == "cuda13"
Requires-Dist: jax-cuda13-plugin[with-cuda]<=0.13.0,>=0.13.0; extra == "cuda13"
Requires-Dist: libtpu==0.0.51.*; extra == "tpu"

"""


def plugin_meta(major: int) -> str:
    n = "" if major == 13 else "-cu12"
    return (f"Metadata-Version: 2.4\nName: jax-cuda{major}-plugin\nVersion: 0.13.0\n"
            f"Requires-Dist: jax-cuda{major}-pjrt==0.13.0\nProvides-Extra: with-cuda\n"
            f'Requires-Dist: nvidia-cublas{n}>={major}.0.0.19; sys_platform == "linux" and extra == "with-cuda"\n'
            f'Requires-Dist: nvidia-cuda-runtime{n}>={major}.{6 if major == 12 else 0}.77; extra == "with-cuda"\n'
            f'Requires-Dist: nvidia-cudnn-cu{major}<10.0,>=9.14.0.64; extra == "with-cuda"\n'
            f'Requires-Dist: nvidia-nccl-cu{major}>=2.28.3; extra == "with-cuda"\n\n')


def wheel(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
        for i in range(200):  # a central directory bigger than one range block's worth of small reads
            zf.writestr(f"pad/f{i:04d}.txt", b"y" * 1500)
    return buf.getvalue()


def serve_jax(index, tmp_path) -> None:
    index.project("jax", {"jax-0.13.0-py3-none-any.whl": wheel({"jax-0.13.0.dist-info/METADATA": JAX_META.encode()})},
                  False, extra_versions=["jax-0.4.20-py3-none-any.whl", "jax-0.14.0rc1-py3-none-any.whl"])
    index.project("jaxlib", {}, False, [f"jaxlib-0.13.0-cp{v}-cp{v}-manylinux_2_27_x86_64.whl" for v in (312, 313, "314t")]
                  + ["jaxlib-0.13.0-cp311-cp311-macosx_11_0_arm64.whl"])
    archs = {12: ((50, 60, 70, 80, 90, 100, 120), (8, 8)), 13: ((75, 80, 90, 100, 110, 120), (9, 0))}
    for major, (sass, isa) in archs.items():
        prng = write_so(tmp_path / str(major), "_prng.so", sass=sass, ptx=(120,), isa=isa).read_bytes()
        linalg = write_so(tmp_path / str(major), "_linalg.so", sass=sass[:-1], ptx=(120,), isa=isa).read_bytes()
        host = write_so(tmp_path / str(major), "_triton.so").read_bytes()  # no GPU code: not read
        pkg = f"jax_cuda{major}_plugin"
        files = {f"{pkg}/_prng.so": prng, f"{pkg}/_linalg.so": linalg, f"{pkg}/_triton.so": host,
                 f"{pkg}-0.13.0.dist-info/METADATA": plugin_meta(major).encode()}
        index.project(f"jax-cuda{major}-plugin", {f"{pkg}-0.13.0-cp312-cp312-manylinux_2_27_x86_64.whl": wheel(files)},
                      False, extra_versions=[f"{pkg}-0.13.0-cp313-cp313-manylinux_2_27_x86_64.whl"])


def test_refresh_reads_every_build_from_the_wheels_and_writes_a_file_the_loader_accepts(index, tmp_path, matrix_dir):
    serve_jax(index, tmp_path)
    notes = "# --- cross-checks (kept by a refresh) ---\n# pjrt measured by hand\n# --- end of cross-checks ---\n"
    f = matrix_dir / "jax.yaml"
    f.write_text(f.read_text().replace("schema: 1\n", notes + "schema: 1\n"))
    out = envman("matrix", "sync", "jax", "--index-url", index.url, "--write", env_dir=matrix_dir)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "+ jax 0.13.0: new release (cuda12, cuda13)" in out.stdout
    assert "- jax 0.12.0: in the matrix, no CUDA build on the index any more" in out.stdout
    rel = load_matrix(matrix_dir).frameworks["jax"][0]
    assert (str(rel.version), rel.python, dict(rel.companions)["jaxlib"]) == ("0.13.0", ("3.12", "3.13"), "0.13.0")
    c13, c12 = rel.variant("cuda13"), rel.variant("cuda12")
    assert [a.sm for a in c13.archs] == ["sm_75", "sm_80", "sm_90", "sm_100", "sm_110", "sm_120"]
    assert [a.sm for a in c13.ptx] == ["sm_120"] and (str(c13.cuda), c13.cudnn, c13.nccl) == ("13.0", "9.14", "2.28")
    # the cuda12 floors name 12.6, but sm_100/sm_120 SASS needs 12.8's nvcc: the oldest toolkit that fits both
    assert str(c12.cuda) == "12.8" and [a.sm for a in c12.archs][-2:] == ["sm_100", "sm_120"]
    text = (matrix_dir / "jax.yaml").read_text()
    assert 'ptx_isa: "9.0"' in text and "_prng.so, _linalg.so" in text
    assert notes + "schema: 1\n" in text  # the hand-written notes survive the regeneration
    # only the plugin's kernel libraries were read by range: never _triton.so, never the whole wheel
    plugin_reads = [(p, r) for p, r in index.log if "jax_cuda13_plugin" in p]
    assert plugin_reads and all(r is not None for _, r in plugin_reads)


def test_refresh_of_one_version_only_reports(index, tmp_path, matrix_dir):
    serve_jax(index, tmp_path)
    before = (matrix_dir / "jax.yaml").read_text()
    out = envman("matrix", "sync", "jax", "--index-url", index.url, "--version", "0.13.0", env_dir=matrix_dir)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["= jax 0.13.0: cuda12 12.8, cuda13 13.0"]
    assert (matrix_dir / "jax.yaml").read_text() == before


def test_the_extra_names_the_plugin_and_old_releases_carry_floors_in_jax_itself():
    meta = ("Name: jax\nVersion: 0.4.26\nRequires-Dist: jaxlib ==0.4.26 ; extra == 'cuda12'\n"
            "Requires-Dist: jax-cuda12-plugin ==0.4.26 ; extra == 'cuda12'\n"
            "Requires-Dist: nvidia-cudnn-cu12 <9.0,>=8.9.2.26 ; extra == 'cuda12'\n"
            "Requires-Dist: nvidia-cudnn-cu12 <9.0,>=8.9.2.26 ; extra == 'cuda12_pip'\n\n")
    plugin, jaxlib, floors = extra_pins(meta, 12)
    assert (str(plugin), jaxlib, floors) == ("==0.4.26", "0.4.26", {"nvidia-cudnn-cu12": "8.9.2.26"})
    assert extra_pins(meta, 13) == (None, None, {})
    assert with_cuda_floors("Name: p\nRequires-Dist: nvidia-nccl-cu12>=2.18.1; extra == 'with_cuda'\n\n") == \
        {"nvidia-nccl-cu12": "2.18.1"}


def test_a_cuda_extra_naming_a_plugin_the_index_lacks_is_said(index, tmp_path):
    """jax 0.12.1's [cuda12] asked for a jax-cuda12-plugin release PyPI never had (issue 40): the release is newer
    than the matrix, yet `pip install 'jax[cuda12]'` at it fails; outdated names the extra, the pin and the gap."""
    from packaging.version import Version

    from tools.matrix.discover_jax import fetch_projects, missing_plugins

    serve_jax(index, tmp_path)
    assert missing_plugins(Version("0.13.0"), fetch_projects(index.url)) == []  # both plugins are served
    index.project("jax-cuda12-plugin", {}, False,  # the project exists, the release the extra pins does not
                  extra_versions=["jax_cuda12_plugin-0.12.0-cp312-cp312-manylinux_2_27_x86_64.whl"])
    assert missing_plugins(Version("0.13.0"), fetch_projects(index.url)) == [
        "jax 0.13.0's [cuda12] extra asks for jax-cuda12-plugin<=0.13.0,>=0.13.0, which the index does not have"]
