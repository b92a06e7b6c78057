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
    from tools.matrix.wheel import read_torch_wheel

    whl = tmp_path / "torch-2.99.0-cp311-cp311-manylinux_2_28_x86_64.whl"
    bomb_wheel(whl)
    with pytest.raises(UsageError) as exc:
        read_torch_wheel(whl)
    assert "zip bomb" in (exc.value.hint or "") and exc.value.message.startswith("torch-2.99.0.dist-info/METADATA: ")


def test_a_zip_bomb_library_is_not_extracted(tmp_path):
    from tools.matrix.discover import measure_wheel_archs

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

    from tools.matrix.pypi import IndexFile, read_remote_wheel

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
    from envman.lock.remote import read_body

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
    from envman.lock.remote import read_body

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


def _fake_uv(tmp_path, body: str) -> str:
    import sys

    exe = tmp_path / "fake-uv"
    exe.write_text(f"#!{sys.executable}\nimport os, sys, time\n{body}")
    exe.chmod(0o755)
    return str(exe)


def test_a_flood_of_uv_stderr_costs_no_memory(tmp_path):
    """A uv (or a proxy in front of an index) that floods stderr: the first and last lines are kept, each cut
    at 4 KiB, the rest counted; the failure still names what uv said."""
    import os
    import tracemalloc

    from envman.lock.uvproc import UvRun

    exe = _fake_uv(tmp_path, "sys.stderr.write('error: the first thing uv said\\n')\n"
                             "chunk = 'x' * (1 << 20)\n"
                             "for _ in range(100): sys.stderr.write(chunk)\n"  # 100 MB on one line
                             "sys.stderr.write('\\n')\n"
                             "for i in range(1_000_000): sys.stderr.write(f'warning: line {i} of many\\n')\n"
                             "sys.stderr.write('error: the last thing uv said\\n')\nsys.exit(2)\n")
    tracemalloc.start()
    run = UvRun([exe], dict(os.environ), str(tmp_path), timeout=120)
    with pytest.raises(ToolError) as exc:
        run.wait()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 32 << 20, peak  # well under the 100 MB line, let alone all of it
    assert exc.value.message == "uv could not resolve the requirements: error: the first thing uv said"
    assert exc.value.hint.endswith("error: the last thing uv said")
    assert len(run.said) == 401 and run.dropped > 999_000 and all(len(ln) <= 4096 for ln in run.said)


def test_a_lock_without_timeout_still_ends(tmp_path, monkeypatch):
    """No --timeout: the wall-clock default ends a uv that waits on a trickling index for ever."""
    import os

    import envman.lock.uvproc as uvproc

    monkeypatch.setattr(uvproc, "DEFAULT_TIMEOUT", 1.0)
    exe = _fake_uv(tmp_path, "time.sleep(60)\n")
    t = time.monotonic()
    with pytest.raises(ToolError) as exc:
        uvproc.UvRun([exe], dict(os.environ), str(tmp_path), timeout=None).wait()
    assert time.monotonic() - t < 20 and exc.value.message.startswith("uv did not finish within 1 s")


@pytest.fixture
def full_tmpdir(tmp_path):
    """A TMPDIR with no space left: a 16 KiB tmpfs, filled (root may mount one here; elsewhere this skips, and
    test_a_missing_tmpdir covers the same boundary without a mount)."""
    import subprocess

    d = tmp_path / "full"
    d.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(d)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (not root): a full disk is simulated by test_a_missing_tmpdir only")
    try:
        subprocess.run(["dd", "if=/dev/zero", f"of={d}/fill", "bs=1k", "count=64"], capture_output=True)
        yield d
    finally:
        subprocess.run(["umount", str(d)], capture_output=True)


def _locked_spec(tmp_path):
    proj = tmp_path / "p"
    proj.mkdir()
    (proj / "envman.yaml").write_text("name: demo\ncpu: true\npython: '3.11'\nframework: none\npackages: [six]\n")
    return proj


def test_a_full_tmpdir_is_one_error_line_exit_1(tmp_path, full_tmpdir, monkeypatch, capsys):
    import tempfile

    from envman.cli.main import main

    monkeypatch.setattr(tempfile, "tempdir", str(full_tmpdir))
    monkeypatch.setattr("envman.lock.registry.resolve_digest", lambda ref, timeout=3.0: None)
    assert main(["lock", str(_locked_spec(tmp_path))]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"error: cannot write uv's request into {full_tmpdir}: No space left on device", err
    assert err[1].startswith("hint: free space there, or point TMPDIR at a folder with room")


def test_a_missing_tmpdir_is_one_error_line_exit_1(tmp_path, monkeypatch, capsys):
    import tempfile

    from envman.cli.main import main

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "gone"))
    monkeypatch.setattr("envman.lock.registry.resolve_digest", lambda ref, timeout=3.0: None)
    assert main(["lock", str(_locked_spec(tmp_path))]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"error: cannot write uv's request into {tmp_path / 'gone'}: No such file or directory", err


def test_an_os_error_no_step_expected_is_one_line_exit_1_not_a_bug(monkeypatch, capsys, tmp_path):
    import errno
    import os

    from envman.cli.main import main

    def full(*a, **k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/var/lib/somewhere")

    monkeypatch.setattr("envman.app.resolve.resolve_project", full, raising=False)
    monkeypatch.setattr("envman.resolve.resolver.resolve_stack", full)
    assert main(["resolve", "--cpu"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "error: No space left on device: /var/lib/somewhere",
        "hint: free space on that disk (or point TMPDIR at one with room), then re-run"]


def test_a_huge_gitignore_is_not_merged_whole(tmp_path, capsys):
    """The generated .dockerignore merges the repository's .gitignore; a 20 MB one (a generated list of every
    data file) was read and merged whole, line by line, into a 20 MB .dockerignore. Over 1 MB it is not merged."""
    from envman.cli.main import main

    (tmp_path / "requirements.txt").write_text("six\n")
    (tmp_path / ".gitignore").write_text("".join(f"data/shard-{i:08d}.bin\n" for i in range(800_000)))
    t = time.monotonic()
    assert main(["init", str(tmp_path), "--cpu", "--python", "3.11", "--no-lock"]) == 0
    assert time.monotonic() - t < 30
    assert (tmp_path / ".dockerignore").stat().st_size < 64 << 10
    capsys.readouterr()
