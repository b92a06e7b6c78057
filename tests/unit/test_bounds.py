"""Issue 24: what envman reads from the network, a wheel or a tool is bounded — a zip bomb's METADATA, an index
that trickles a byte at a time (slow loris), an endless body, 200 MB of uv stderr, a huge setup.py or
.gitignore — and each is one error (or a stated fallback), never gigabytes of memory or an endless wait."""

from __future__ import annotations

import http.server
import io
import threading
import time
import zipfile

import pytest

from envman.errors import ToolError, UsageError


def bomb_wheel(path, member: str = "torch-2.99.0.dist-info/METADATA", size: int = 64 << 20) -> None:
    """A wheel whose ``member`` inflates to ``size`` bytes of zeros from a few tens of KB."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("torch/version.py", "__version__ = '2.99.0'\ncuda = '13.0'\n")
        with zf.open(member, "w", force_zip64=True) as fh:
            chunk = b"\0" * (1 << 20)
            for _ in range(size >> 20):
                fh.write(chunk)


def test_a_zip_bomb_wheel_is_refused_before_it_is_inflated(tmp_path):
    from envman.matrix.wheel import read_torch_wheel

    whl = tmp_path / "torch-2.99.0-cp311-cp311-manylinux_2_28_x86_64.whl"
    bomb_wheel(whl)
    with pytest.raises(UsageError) as exc:
        read_torch_wheel(whl)
    assert "zip bomb" in (exc.value.hint or "") and exc.value.message.startswith("torch-2.99.0.dist-info/METADATA: ")


def test_a_zip_bomb_library_is_not_extracted(tmp_path):
    from envman.matrix.discover import measure_wheel_archs

    whl = tmp_path / "torch.whl"
    bomb_wheel(whl, "torch/lib/libtorch_cuda.so", 256 << 20)
    with pytest.raises(UsageError) as exc:
        measure_wheel_archs(whl)
    assert "zip bomb" in (exc.value.hint or "")


class _Handler(http.server.BaseHTTPRequestHandler):
    body = b""
    trickle = 0.0

    def do_GET(self):  # noqa: N802 - http.server's name
        data = self.body
        rng = self.headers.get("Range")
        if rng:
            lo, hi = rng.split("=")[1].split("-")
            if lo == "":
                lo, hi = str(len(data) - int(hi)), str(len(data) - 1)
            lo, hi = int(lo), min(int(hi), len(data) - 1)
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {lo}-{hi}/{len(data)}")
            data = data[lo:hi + 1]
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.trickle:
            for i in range(len(data)):
                self.wfile.write(data[i:i + 1])
                self.wfile.flush()
                time.sleep(self.trickle)
        else:
            self.wfile.write(data)

    def log_message(self, *a):
        pass


def serve(body: bytes, trickle: float = 0.0):
    handler = type("H", (_Handler,), {"body": body, "trickle": trickle})
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_address[1]}"


def test_a_zip_bomb_on_an_index_is_refused_by_range(tmp_path):
    from packaging.version import Version

    from envman.matrix.index import IndexFile, read_remote_wheel

    whl = tmp_path / "torch-2.99.0-cp311-cp311-manylinux_2_28_x86_64.whl"
    bomb_wheel(whl)
    srv, url = serve(whl.read_bytes())
    try:
        f = IndexFile(whl.name, f"{url}/{whl.name}", Version("2.99.0"), None, ("cp311",), ("manylinux_2_28_x86_64",),
                      None, False, whl.stat().st_size)
        with pytest.raises(ToolError) as exc:
            read_remote_wheel(f, ("torch/version.py",))
    finally:
        srv.shutdown()
    assert "zip bomb" in (exc.value.hint or "")


def test_a_slow_loris_index_is_cut_at_its_deadline():
    """Every read gets a byte within its timeout, so only a deadline on the whole answer ends it."""
    from envman.matrix.index import read_body

    srv, url = serve(b"x" * 400, trickle=0.05)
    try:
        import urllib.request

        t = time.monotonic()
        with urllib.request.urlopen(url, timeout=5) as resp, pytest.raises(ToolError) as exc:
            read_body(resp, url, within=1.0)
    finally:
        srv.shutdown()
    assert time.monotonic() - t < 5 and exc.value.message == f"{url}: the answer took over 1 s"


def test_an_endless_body_is_cut_at_its_bound():
    from envman.matrix.index import read_body

    with pytest.raises(ToolError) as exc:
        read_body(io.BytesIO(b"x" * (2 << 20)), "https://idx.example/simple/x/", limit=1 << 20)
    assert exc.value.message == "https://idx.example/simple/x/: the answer is over 1 MB"


def test_a_killed_fetchs_staging_folder_is_swept_and_a_live_ones_kept(tmp_path):
    """Issue 24: kill -9 during `envman fetch` left .partial-* folders in the wheelhouse for ever."""
    import os
    import subprocess

    from envman.lock.wheelhouse import sweep_partials
    from envman.process import host_id

    dead = subprocess.Popen(["true"])
    dead.wait()
    now = int(time.time())
    gone = tmp_path / f".partial-{host_id()}-{dead.pid}-{now}-x1"
    live = tmp_path / f".partial-{host_id()}-{os.getppid()}-{now}-x2"
    old = tmp_path / ".partial-abc123"  # an older envman's name
    for d in (gone, live, old):
        (d / "wheels").mkdir(parents=True)
    os.utime(old, (now - 2 * 86400, now - 2 * 86400))
    assert sorted(sweep_partials(tmp_path)) == sorted([gone.name, old.name])
    assert live.is_dir() and not gone.exists() and not old.exists()
