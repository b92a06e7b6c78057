"""`python -m tools.matrix sync PROJECT|outdated`, `envman matrix check|show --json` against a local PEP 691 index served from the test.

The index (http.server on 127.0.0.1, one thread, stopped by the fixture) serves torch 2.15.0 — newer
than the frozen fixture matrix — as a tiny fake wheel, with or without a PEP 658 ``.metadata`` file, and
answers HTTP range requests, so both ways of reading METADATA without downloading the wheel are exercised.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from envman.matrix.load import _load_cached
from tests.conftest import FIXTURE_MATRIX, ROOT
from tests.unit.test_doctor_extensions import write_so
from tools.matrix.pypi import RangeReader, fetch_project, read_remote_wheel

WHEEL = "torch-2.15.0-cp311-cp311-manylinux_2_28_x86_64.whl"


def metadata(cudnn: str = "9.26.0.51") -> str:
    return (
        "Metadata-Version: 2.1\nName: torch\nVersion: 2.15.0\nRequires-Python: >=3.11\n"
        'Requires-Dist: cuda-toolkit[cublas,cudart]==13.2.2; platform_system == "Linux"\n'
        f'Requires-Dist: nvidia-cudnn-cu13=={cudnn}; platform_system == "Linux"\n'
        'Requires-Dist: nvidia-nccl-cu13==2.30.7; platform_system == "Linux"\n'
        "Requires-Dist: triton~=3.9.0\nRequires-Dist: opt-einsum>=3.3; extra == \"opt-einsum\"\n\n"
    )


def fake_wheel(path: Path, cudnn: str = "9.26.0.51", so: Path | None = None) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("torch/__init__.py", "")
        zf.writestr("torch/version.py", "__version__ = '2.15.0+cu132'\ncuda: Optional[str] = '13.2'\n")
        for i in range(300):  # a central directory bigger than one range block's worth of small reads
            zf.writestr(f"torch/include/h{i:04d}.h", b"x" * 2000)
        if so is not None:
            zf.write(so, "torch/lib/libtorch_cuda.so")
        zf.writestr("torch-2.15.0.dist-info/METADATA", metadata(cudnn))
        zf.writestr("torch-2.15.0.dist-info/WHEEL", "Wheel-Version: 1.0\nTag: cp311-cp311-manylinux_2_28_x86_64\n")
    return path


class Index:
    """What the handler serves: {path: bytes}, the simple pages built from the wheels given."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.log: list[tuple[str, str | None]] = []

    def project(self, name: str, wheels: dict[str, bytes], pep658: bool, extra_versions=()) -> None:
        entries = []
        for fn, data in wheels.items():
            e = {"filename": fn, "url": f"/files/{fn}", "hashes": {}, "size": len(data)}
            if pep658:
                e["core-metadata"] = True
                with zipfile.ZipFile(io.BytesIO(data)) as zf:
                    meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
                    self.files[f"/files/{fn}.metadata"] = zf.read(meta)
            self.files[f"/files/{fn}"] = data
            entries.append(e)
        for fn in extra_versions:  # files whose content is never read (other versions, an sdist)
            entries.append({"filename": fn, "url": f"/files/{fn}", "hashes": {}})
        self.files[f"/simple/{name}/"] = json.dumps({"meta": {"api-version": "1.1"}, "name": name, "files": entries}).encode()


def _handler(index: Index):
    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):  # quiet
            pass

        def do_GET(self):
            body = index.files.get(self.path)
            rng = self.headers.get("Range")
            index.log.append((self.path, rng))
            if body is None:
                self.send_error(404)
                return
            if rng:
                m = re.fullmatch(r"bytes=(\d*)-(\d*)", rng)
                total = len(body)
                if m.group(1) == "":
                    lo, hi = max(0, total - int(m.group(2))), total - 1
                else:
                    lo, hi = int(m.group(1)), min(total - 1, int(m.group(2) or total - 1))
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {lo}-{hi}/{total}")
                body = body[lo:hi + 1]
            else:
                self.send_response(200)
            ctype = "application/vnd.pypi.simple.v1+json" if self.path.startswith("/simple/") else "application/octet-stream"
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return H


@pytest.fixture
def index():
    idx = Index()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(idx))
    server.timeout = 5
    t = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    idx.url = f"http://127.0.0.1:{server.server_address[1]}/simple"
    try:
        yield idx
    finally:
        server.shutdown()
        server.server_close()
        t.join(timeout=5)


@pytest.fixture
def matrix_dir(tmp_path, monkeypatch):
    d = tmp_path / "matrices"
    shutil.copytree(FIXTURE_MATRIX, d)
    monkeypatch.setenv("ENVMAN_MATRIX_DIR", str(d))
    _load_cached.cache_clear()
    yield d
    _load_cached.cache_clear()


def serve_torch(index: Index, tmp_path: Path, pep658: bool, **kw) -> Path:
    whl = fake_wheel(tmp_path / WHEEL, **kw)
    index.project("torch", {WHEEL: whl.read_bytes()}, pep658,
                  extra_versions=["torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl",
                                  "torch-2.16.0rc1-cp311-cp311-manylinux_2_28_x86_64.whl", "torch-2.15.0.tar.gz"])
    return whl


def envman(*args: str, env_dir: Path) -> subprocess.CompletedProcess:
    """``envman matrix show|check`` run as a user would; ``matrix sync|outdated`` as a maintainer does, from
    the repository's workshop (python -m tools.matrix, run at the repository root)."""
    import os

    env = dict(os.environ, ENVMAN_MATRIX_DIR=str(env_dir))
    cmd = ["-m", "envman.cli.main", *args]
    if args[:2] in (("matrix", "sync"), ("matrix", "outdated")):
        cmd = ["-m", "tools.matrix", *args[1:]]
    return subprocess.run([sys.executable, *cmd], capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)


# --- the index client ------------------------------------------------------------------------------


def test_index_lists_wheels_and_final_versions(index, tmp_path):
    serve_torch(index, tmp_path, pep658=False)
    p = fetch_project("torch", index.url)
    assert [str(v) for v in p.versions()] == ["2.14.1", "2.15.0"]  # the rc is a pre-release, the sdist no wheel
    assert [str(v) for v in p.versions(final_only=False)] == ["2.14.1", "2.15.0", "2.16.0rc1"]


def test_metadata_by_range_reads_only_part_of_the_wheel(index, tmp_path):
    serve_torch(index, tmp_path, pep658=False)
    f = next(f for f in fetch_project("torch", index.url).files if f.filename == WHEEL)
    assert f.metadata_url is None
    rw = read_remote_wheel(f, ("torch/version.py",))
    assert "nvidia-cudnn-cu13==9.26.0.51" in rw.metadata and "cuda: Optional[str] = '13.2'" in rw.members["torch/version.py"]
    assert rw.how.startswith("HTTP range requests")
    ranged = [r for p, r in index.log if p.endswith(WHEEL)]
    assert ranged and all(r for r in ranged)  # never a whole-file GET


def test_range_reader_is_a_seekable_file(index, tmp_path):
    data = bytes(range(256)) * 4000  # 1 MB, 4 blocks
    index.files["/files/blob"] = data
    r = RangeReader(index.url.replace("/simple", "/files/blob"))
    assert r.size == len(data)
    r.seek(300_000)
    assert r.read(10) == data[300_000:300_010]
    r.seek(-5, 2)
    assert r.read() == data[-5:]


def test_metadata_from_pep658_file_without_touching_the_wheel(index, tmp_path):
    serve_torch(index, tmp_path, pep658=True)
    f = next(f for f in fetch_project("torch", index.url).files if f.filename == WHEEL)
    rw = read_remote_wheel(f)
    assert rw.how == "PEP 658 .metadata" and "nvidia-nccl-cu13==2.30.7" in rw.metadata
    assert not any(p == f"/files/{WHEEL}" for p, _ in index.log)


# --- refresh ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("pep658", [False, True], ids=["range", "pep658"])
def test_refresh_proposes_the_new_line_as_a_diff_and_writes_it_validated(index, tmp_path, matrix_dir, pep658):
    serve_torch(index, tmp_path, pep658)
    before = (matrix_dir / "torch.yaml").read_text()
    out = envman("matrix", "sync", "torch", "--index-url", index.url, env_dir=matrix_dir)
    assert out.returncode == 0, out.stderr
    assert "+ torch 2.15: new line: 2.15.0 cu132" in out.stdout
    assert "  ~ torch 2.15.0 cu132: archs copied from torch 2.14.1 cu132 (uncertain; --wheel PATH measures them)" in out.stdout
    assert "+++ b/matrices/torch.yaml" in out.stdout and '+  - line: "2.15"' in out.stdout
    assert '+        cudnn: "9.26.0.51"' in out.stdout and '+        cuda: "13.2"' in out.stdout
    assert ("PEP 658 .metadata" if pep658 else "METADATA + torch/version.py by HTTP range requests") in out.stdout
    assert "(dry run: pass --write to apply)" in out.stdout
    assert (matrix_dir / "torch.yaml").read_text() == before
    out = envman("matrix", "sync", "torch", "--index-url", index.url, "--write", env_dir=matrix_dir)
    assert out.returncode == 0, out.stderr
    assert f"wrote {matrix_dir / 'torch.yaml'}" in out.stdout
    _load_cached.cache_clear()
    from envman.matrix.load import load_matrix

    rel = next(r for r in load_matrix(matrix_dir).frameworks["torch"] if str(r.version) == "2.15.0")
    v = rel.variant("cu132")
    assert rel.pypi_default == "cu132" and rel.python == ("3.11",) and v.nccl == "2.30.7"
    assert v.prov.uncertain and "copied from torch 2.14.1 cu132" in v.prov.note
    assert [a.sm for a in v.archs] == ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]
    again = envman("matrix", "sync", "torch", "--index-url", index.url, env_dir=matrix_dir)
    assert "= torch: the matrix has every release and variant on" in again.stdout


def test_write_is_refused_when_the_loader_rejects_the_proposal(index, tmp_path, matrix_dir):
    serve_torch(index, tmp_path, pep658=True, cudnn="9.99.0.1")  # no cuDNN 9.99 in cudnn.yaml
    before = (matrix_dir / "torch.yaml").read_bytes()
    out = envman("matrix", "sync", "torch", "--index-url", index.url, "--write", env_dir=matrix_dir)
    assert out.returncode == 7
    assert "! the loader rejects the proposal: torch.yaml: 2.15.0 cu132: cudnn: 9.99.0.1 has no entry in cudnn.yaml" in out.stdout
    assert (matrix_dir / "torch.yaml").read_bytes() == before


def test_wheel_at_hand_measures_archs_and_ptx(index, tmp_path, matrix_dir):
    so = write_so(tmp_path / "so", "libtorch_cuda.so", sass=(80, 90, 120), ptx=(120,))
    whl = serve_torch(index, tmp_path, pep658=False, so=so)
    out = envman("matrix", "sync", "torch", "--index-url", index.url, "--wheel", str(whl), "--write", env_dir=matrix_dir)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "archs copied from" not in out.stdout and "archs and ptx copied" not in out.stdout
    _load_cached.cache_clear()
    from envman.matrix.load import load_matrix

    v = next(r for r in load_matrix(matrix_dir).frameworks["torch"] if str(r.version) == "2.15.0").variant("cu132")
    assert [a.sm for a in v.archs] == ["sm_80", "sm_90", "sm_120"] and [a.sm for a in v.ptx] == ["sm_120"]
    assert not v.prov.uncertain and f"{WHEEL} at hand" in v.prov.source
    assert not any(p == f"/files/{WHEEL}" for p, _ in index.log)  # the wheel at hand is not fetched


def test_new_patch_of_a_known_line_goes_into_its_patches(index, tmp_path, matrix_dir):
    text = (matrix_dir / "torch.yaml").read_text()
    # a matrix from before 2.14.1: drop that patch, then serve 2.14.1 as the index's newest
    text = re.sub(r'\n      - version: "2\.14\.1"\n(?:        .*\n)+', "\n", text, count=1)
    (matrix_dir / "torch.yaml").write_text(text)
    data = fake_wheel(tmp_path / "w.whl").read_bytes()
    meta = metadata("9.24.0.43").replace("2.15.0", "2.14.1").replace("13.2.2", "13.0.3")
    buf = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(buf, "w") as dst:
        for n in src.namelist():
            body = meta.encode() if n.endswith("METADATA") else src.read(n).replace(b"13.2", b"13.0")
            dst.writestr(n.replace("2.15.0", "2.14.1"), body)
    index.project("torch", {"torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl": buf.getvalue()}, pep658=True)
    out = envman("matrix", "sync", "torch", "--index-url", index.url, "--write", env_dir=matrix_dir)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "+ torch 2.14.1: new patch of line 2.14 (" in out.stdout
    assert '+      - version: "2.14.1"' in out.stdout and "! " not in out.stdout


# --- outdated, check, show --json ------------------------------------------------------------------


def test_outdated_exits_1_naming_each_newer_final_release(index, tmp_path, matrix_dir):
    serve_torch(index, tmp_path, pep658=True)
    index.project("torchvision", {}, False, ["torchvision-0.29.1-py3-none-manylinux_2_28_x86_64.whl"])
    index.project("torchaudio", {}, False, ["torchaudio-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl"])
    index.project("tensorflow", {}, False, ["tensorflow-2.21.0-cp311-cp311-manylinux_2_27_x86_64.whl",
                                            "tensorflow-2.22.0rc0-cp311-cp311-manylinux_2_27_x86_64.whl"])
    index.project("jax", {}, False, ["jax-0.12.0-py3-none-any.whl"])
    out = envman("matrix", "outdated", "--index-url", index.url, env_dir=matrix_dir)
    assert out.returncode == 1, out.stderr
    assert out.stdout.splitlines() == [
        "torch: 2.15.0 on the index; the matrix knows 2.14.1",
        "torchvision: up to date (0.29.1)",
        "torchaudio: up to date (2.11.0)",
        "tensorflow: up to date (2.21.0)",
        "jax: up to date (0.12.0)",
    ]
    index.project("torch", {}, False, ["torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl"])
    out = envman("matrix", "outdated", "--index-url", index.url, "--json", env_dir=matrix_dir)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)[0] == {"project": "torch", "known": "2.14.1", "newer": [], "notes": []}


def test_check_says_ok_or_every_problem(matrix_dir):
    out = envman("matrix", "check", env_dir=matrix_dir)
    assert (out.returncode, out.stdout) == (0, "ok\n")
    text = (matrix_dir / "torch.yaml").read_text().replace('cudnn: "9.24.0.43"', 'cudnn: "9.99.0.1"')
    (matrix_dir / "torch.yaml").write_text(text)
    out = envman("matrix", "check", env_dir=matrix_dir)
    assert out.returncode == 7
    assert "torch.yaml: 2.14.1 cu130: cudnn: 9.99.0.1 has no entry in cudnn.yaml" in out.stdout.splitlines()


def test_show_json_is_typed_data(matrix_dir):
    rows = json.loads(envman("matrix", "show", "torch", "--json", env_dir=matrix_dir).stdout)
    r = next(x for x in rows if x["version"] == "2.14.1" and x["variant"] == "cu130")
    assert r["pypi_default"] is True and r["cuda"] == "13.0" and r["archs"][0] == "sm_75" and r["ptx"] == []
    assert r["companions"] == {"torchvision": "0.29.1", "torchaudio": None} and isinstance(r["uncertain"], bool)
    assert "3.11" in r["python"] and r["source"]
    cpu = next(x for x in rows if x["version"] == "2.14.1" and x["variant"] == "cpu")
    assert cpu["pypi_default"] is False and cpu["cuda"] is None and cpu["archs"] == []
    gpus = json.loads(envman("matrix", "show", "gpus", "--json", env_dir=matrix_dir).stdout)
    h = next(g for g in gpus if g["id"] == "h100-sxm")
    assert h["cc"] == "9.0" and h["memory_gib"] == 80 and isinstance(h["aliases"], list) and "min_driver" in h
    cuda = json.loads(envman("matrix", "show", "cuda", "--json", env_dir=matrix_dir).stdout)
    assert {"version", "min_driver", "minor_compat_floor", "archs", "source", "uncertain"} <= set(cuda[0])
    for subject in ("tensorflow", "cudnn", "base-images"):
        assert json.loads(envman("matrix", "show", subject, "--json", env_dir=matrix_dir).stdout)


def tf_wheel(version: str, cudnn_floor: str = "9.3.0.75") -> bytes:
    meta = (
        f"Metadata-Version: 2.1\nName: tensorflow\nVersion: {version}\nProvides-Extra: and-cuda\n"
        "Requires-Dist: numpy>=1.26.0\n"
        "Requires-Dist: nvidia-cuda-runtime-cu12<13.0,>=12.5.82; extra == \"and-cuda\"\n"
        f"Requires-Dist: nvidia-cudnn-cu12<10.0,>={cudnn_floor}; extra == \"and-cuda\"\n\n"
    )
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("tensorflow/__init__.py", "")
        zf.writestr(f"tensorflow-{version}.dist-info/METADATA", meta)
    return buf.getvalue()


def test_refresh_tensorflow_adds_a_patch_and_a_new_line(index, matrix_dir):
    index.project("tensorflow", {
        "tensorflow-2.21.1-cp312-cp312-manylinux_2_27_x86_64.whl": tf_wheel("2.21.1"),
        "tensorflow-2.22.0-cp312-cp312-manylinux_2_27_x86_64.whl": tf_wheel("2.22.0", "9.5.1.17"),
        "tensorflow-2.22.0-cp314-cp314-manylinux_2_27_x86_64.whl": tf_wheel("2.22.0", "9.5.1.17"),
    }, pep658=True, extra_versions=["tensorflow-2.21.0-cp312-cp312-manylinux_2_27_x86_64.whl"])
    out = envman("matrix", "sync", "tensorflow", "--index-url", index.url, "--write", env_dir=matrix_dir)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "+ tensorflow 2.21.1: new patch of line 2.21 (" in out.stdout and "! " not in out.stdout
    assert '+    patches: ["2.21.0", "2.21.1"]' in out.stdout
    assert "+ tensorflow 2.22: new line: 2.22.0" in out.stdout
    assert "  ~ tensorflow 2.22: archs copied from line 2.21 (uncertain)" in out.stdout
    _load_cached.cache_clear()
    from envman.matrix.load import load_matrix

    rels = {str(r.version): r for r in load_matrix(matrix_dir).frameworks["tensorflow"]}
    assert "2.21.1" in rels
    new = rels["2.22.0"]
    gpu = new.variant("cu125")
    assert new.python == ("3.12", "3.14") and gpu.cudnn == "9.5" and new.prov.uncertain
    assert new.extras == ("and-cuda",)


def test_refresh_torchaudio_lists_what_is_unpaired(index, matrix_dir):
    index.project("torchaudio", {}, False, ["torchaudio-2.11.0-py3-none-manylinux_2_28_x86_64.whl",
                                            "torchaudio-2.11.1-py3-none-manylinux_2_28_x86_64.whl"])
    out = envman("matrix", "sync", "torchaudio", "--index-url", index.url, env_dir=matrix_dir)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "+ torchaudio 2.11.1: on the index, not a companion of any torch patch in the matrix (pair it by hand)\n"


def test_refresh_version_checks_a_known_release_against_its_wheel(index, tmp_path, matrix_dir):
    data = fake_wheel(tmp_path / "w.whl").read_bytes()
    buf = io.BytesIO()
    meta = metadata("9.24.0.43").replace("2.15.0", "2.14.1").replace("13.2.2", "13.0.3")
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(buf, "w") as dst:
        for n in src.namelist():
            body = meta.encode() if n.endswith("METADATA") else src.read(n).replace(b"13.2", b"13.0")
            dst.writestr(n.replace("2.15.0", "2.14.1"), body)
    index.project("torch", {"torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl": buf.getvalue()}, pep658=False)
    out = envman("matrix", "sync", "torch", "--index-url", index.url, "--version", "2.14.1", env_dir=matrix_dir)
    assert (out.returncode, out.stdout.splitlines()[0].split(" (")[0]) == (0, "= torch 2.14.1 cu130: matches the wheel"), out.stdout + out.stderr
    text = (matrix_dir / "torch.yaml").read_text().replace('nccl: "2.30.7"', 'nccl: "2.30.1"')
    (matrix_dir / "torch.yaml").write_text(text)
    out = envman("matrix", "sync", "torch", "--index-url", index.url, "--version", "2.14.1", env_dir=matrix_dir)
    assert out.returncode == 1
    assert "  ! cu130.nccl: the matrix says 2.30.1, the wheel pins 2.30.7" in out.stdout.splitlines()


def test_a_server_that_ignores_range_is_refused_without_reading_the_wheel(tmp_path):
    class Whole(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", "100000000")
            self.end_headers()
            self.wfile.write(b"x" * 1000)  # would be 100 MB; the client must hang up first

    server = ThreadingHTTPServer(("127.0.0.1", 0), Whole)
    t = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    try:
        from envman.errors import ToolError

        with pytest.raises(ToolError, match="ignores HTTP range requests"):
            RangeReader(f"http://127.0.0.1:{server.server_address[1]}/x.whl")
    finally:
        server.shutdown()
        server.server_close()
        t.join(timeout=5)


def test_a_labelled_build_the_line_lacks_becomes_a_new_variant(index, tmp_path, matrix_dir):
    # a download.pytorch.org-style index: torch-2.14.1+cu128 (the fixture's 2.14 line has cu126/cu130/cu132/cpu)
    meta = metadata("9.10.2.21").replace("Version: 2.15.0", "Version: 2.14.1+cu128").replace("cu13", "cu12") \
        .replace("cuda-toolkit[cublas,cudart]==13.2.2", "nvidia-cuda-runtime-cu12==12.8.90")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("torch/version.py", "__version__ = '2.14.1+cu128'\ncuda: Optional[str] = '12.8'\n")
        zf.writestr("torch-2.14.1+cu128.dist-info/METADATA", meta)
    index.project("torch", {"torch-2.14.1+cu128-cp312-cp312-manylinux_2_28_x86_64.whl": buf.getvalue(),
                            "torch-2.14.1+cpu-cp312-cp312-manylinux_2_28_x86_64.whl": b""}, pep658=False)
    out = envman("matrix", "sync", "torch", "--index-url", index.url, "--write", env_dir=matrix_dir)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "+ torch 2.14 cu128: new variant (" in out.stdout and "cpu" not in out.stdout.split("---")[0]
    _load_cached.cache_clear()
    from envman.matrix.load import load_matrix

    v = next(r for r in load_matrix(matrix_dir).frameworks["torch"] if str(r.version) == "2.14.1").variant("cu128")
    assert (str(v.cuda), v.cudnn) == ("12.8", "9.10.2.21") and v.prov.uncertain
    assert "archs and ptx copied from torch 2.11.0 cu128 (the previous release)" in v.prov.note
