"""A re-lock starts uv from the console script, before typer and envman load (cli/entry.py, app/relock.py,
lock/uvstart.py): which command lines do, that the lock takes that run instead of starting another, that a
run nobody takes dies with envman, and that waiting on uv neither polls nor hangs on a stray child."""

from __future__ import annotations

import os
import stat
import sys
import threading
from pathlib import Path

import pytest

from envman.app import relock
from envman.cli.entry import early_lock_target
from envman.cli.main import main
from envman.lock import uvproc, uvstart
from tests.fakes import install_fake_uv, numpy_pylock

NUMPY = numpy_pylock()


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_CACHE_DIR", str(tmp_path / "cache"))
    yield
    relock._kill_pending()


@pytest.mark.parametrize("argv, want", [
    (["lock"], (".", None)),
    (["lock", "proj"], ("proj", None)),
    (["lock", "proj", "--timeout", "3"], ("proj", 3.0)),
    (["lock", "--timeout=2.5", "--force", "proj"], ("proj", 2.5)),
    (["lock", "--base-image", "python:3.11-slim", "proj"], ("proj", None)),
    (["lock", "--check"], None),  # reads, never runs uv
    (["lock", "--upgrade"], None),  # wants newer pins than the last request's answer
    (["lock", "--help"], None),
    (["lock", "a", "b"], None),  # typer's to refuse
    (["lock", "--timeout", "soon"], None),
    (["lock", "--no-such-option"], None),
    (["init", "proj"], None),
    ([], None),
])
def test_only_a_plain_lock_starts_uv_before_envman_loads(argv, want):
    assert early_lock_target(argv) == want


def _project(root: Path) -> Path:
    root.mkdir()
    (root / "envman.yaml").write_text("name: early\ncpu: true\npython: '3.11'\npackages: [numpy]\n")
    return root


def test_the_lock_takes_the_run_the_console_script_started(tmp_path, monkeypatch, capsys):
    log = install_fake_uv(monkeypatch, tmp_path, NUMPY)
    proj = _project(tmp_path / "proj")
    assert main(["lock", str(proj)]) == 0  # the first lock remembers its uv request
    runs = len(log.read_text().splitlines())
    relock.start_before_import(str(proj), log_requests=False)
    early = relock._pending[os.path.realpath(proj)]
    assert main(["lock", str(proj)]) == 0
    assert relock._pending == {}  # taken
    assert early.proc.poll() == 0 and not Path(early.cwd).exists()  # it ran, and its folder is gone
    assert len(log.read_text().splitlines()) == runs + 1  # the early run was the re-lock's only uv run
    assert "up to date: nothing changed" in capsys.readouterr().out


def _sleeping_uv(tmp_path: Path, body: str = "time.sleep(60)\n") -> str:
    exe = tmp_path / "slow-uv"
    exe.write_text(f"#!{sys.executable}\nimport os, subprocess, sys, time\n{body}")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return str(exe)


def test_a_run_nobody_takes_dies_with_envman(tmp_path, monkeypatch):
    """`envman lock --bogus` after the early start: typer refuses, the run must not outlive envman."""
    monkeypatch.setattr(uvstart, "uv_binary", lambda: _sleeping_uv(tmp_path))
    proj = _project(tmp_path / "proj")
    uvproc.remember(proj, uvproc.UvRequest((("requirements.in", "numpy\n"),), ("pip", "compile")))
    relock.start_before_import(str(proj), log_requests=False)
    early = relock._pending[os.path.realpath(proj)]
    assert early.proc.poll() is None and Path(early.cwd).is_dir()
    relock._kill_pending()  # what atexit runs
    assert early.proc.poll() is not None and not Path(early.cwd).exists()


def test_nothing_remembered_means_no_early_run(tmp_path):
    relock.start_before_import(str(_project(tmp_path / "proj")), log_requests=False)
    assert relock._pending == {}


def test_a_stray_child_holding_uvs_stderr_does_not_hang_the_lock(tmp_path):
    """uv exited 0 but left a child with its stderr open: waiting on the stderr reader alone would hang."""
    body = ("subprocess.Popen(['sleep', '30'])\n"  # inherits uv's stderr
            "open('out.txt', 'w').write('done')\n")
    request = uvproc.UvRequest((("in.txt", "x"),), (), output="out.txt")
    run = uvproc.start_request(_sleeping_uv(tmp_path, body), request)
    waited = threading.Thread(target=run.wait, daemon=True)
    waited.start()
    waited.join(20)
    try:
        assert not waited.is_alive(), "UvRun.wait hung on a stray child's open pipe"
        assert run.proc.returncode == 0 and run.output() == "done"
    finally:
        run.cancel()  # its process group: the stray child too


def test_the_request_cache_key_is_the_projects_real_path(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "a")
    assert uvstart.request_file(str(tmp_path / "link")) == uvstart.request_file(str(tmp_path / "a"))
    assert uvstart.request_file(str(tmp_path / "a")) != uvstart.request_file(str(tmp_path / "b"))
    assert Path(uvstart.request_file(str(tmp_path / "a"))).name.startswith("a-")


def test_lock_folders_are_private_and_hold_the_inputs(tmp_path):
    d = uvstart.make_dir([("requirements.in", "numpy\n")], base=str(tmp_path))
    assert Path(d).name.startswith(f"envman-lock-{os.getpid()}-")
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    assert Path(d, "requirements.in").read_text() == "numpy\n"


def _console(*args: str, cwd: Path | None = None):
    import subprocess

    code = "import sys; sys.argv = ['envman', *sys.argv[1:]]; from envman.cli.entry import run; run()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=cwd, timeout=120)


def test_the_console_script_flushes_and_keeps_the_exit_code(tmp_path):
    """It ends with os._exit (no module teardown): output must still arrive whole, codes must survive."""
    out = _console("--version")
    assert out.returncode == 0 and out.stdout.startswith("envman ")
    bad = _console("lock", str(tmp_path / "missing"), "--timeout", "5")
    assert bad.returncode == 1 and bad.stderr.startswith("error: ") and "Traceback" not in bad.stderr
    usage = _console("lock", "--no-such-option")
    assert usage.returncode == 2


EARLY = """
import json, os, sys, time
from envman.lock import uvstart
if sys.argv[2] == "no-setpriv":
    uvstart.SETPRIV = ()  # the ctypes fallback
started = uvstart.start_remembered(sys.argv[1], "pylock.toml", False)
print(json.dumps({"pid": started.proc.pid, "kind": type(started.proc).__name__, "cwd": started.cwd}), flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("how", ["setpriv", "no-setpriv"])
def test_the_early_uv_runs_in_its_folder_and_dies_with_envman_even_by_kill_9(tmp_path, monkeypatch, how):
    """In the console script (one thread) uv is forked and exec'd directly; its death signal is set by
    setpriv, or by prctl through ctypes where there is no setpriv. kill -9 of envman must take uv with it."""
    import json
    import signal
    import subprocess
    import time

    if how == "setpriv" and not any(os.access(p, os.X_OK) for p in uvstart.SETPRIV):
        pytest.skip("util-linux's setpriv is not installed here")
    proj = _project(tmp_path / "proj")
    marker = tmp_path / "uv-ran-in"
    slow = _sleeping_uv(tmp_path, f"open({str(marker)!r}, 'w').write(os.getcwd())\ntime.sleep(60)\n")
    uvproc.remember(proj, uvproc.UvRequest((("requirements.in", "numpy\n"),), ("pip", "compile")))
    monkeypatch.setenv("ENVMAN_CACHE_DIR", os.environ["ENVMAN_CACHE_DIR"])
    req = Path(uvstart.request_file(str(proj)))
    data = json.loads(req.read_text())
    req.write_text(json.dumps({**data, "uv": slow, "prefix": sys.prefix}))  # the remembered uv: our sleeper
    envman = subprocess.Popen([sys.executable, "-c", EARLY, str(proj), how], stdout=subprocess.PIPE, text=True)
    try:
        info = json.loads(envman.stdout.readline())
        assert info["kind"] == "Child"  # one thread: fork and exec, no subprocess
        for _ in range(200):
            if marker.exists():
                break
            time.sleep(0.05)
        assert marker.read_text() == info["cwd"]  # uv runs in its own folder, with the request's files
        assert Path(info["cwd"], "requirements.in").read_text() == "numpy\n"
        envman.send_signal(signal.SIGKILL)
        envman.wait()
        for _ in range(100):
            if not _alive(info["pid"]):
                break
            time.sleep(0.05)
        else:
            os.killpg(info["pid"], signal.SIGKILL)
            pytest.fail("uv outlived envman's kill -9")
    finally:
        envman.kill()


def _alive(pid: int) -> bool:
    """Running, that is: gone, or a zombie no one has reaped yet (a killed process whose parent died), is not."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return not any(line.startswith("State:") and "Z" in line.split()[1] for line in f)
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("how", ["setpriv", "no-setpriv"])
def test_a_forked_uv_that_cannot_start_says_why(tmp_path, monkeypatch, how):
    """Exit 127 and the missing program named on stderr (by setpriv, or by envman's child where there is none)."""
    if how == "setpriv" and not any(os.access(p, os.X_OK) for p in uvstart.SETPRIV):
        pytest.skip("util-linux's setpriv is not installed here")
    if how == "no-setpriv":
        monkeypatch.setattr(uvstart, "SETPRIV", ())
    missing = str(tmp_path / "no-such-uv")
    child = uvstart.fork_exec([missing, "pip", "compile"], dict(os.environ), str(tmp_path))
    assert child.wait() == 127
    said = child.stderr.read()
    assert missing in said and ("cannot run uv" in said if how == "no-setpriv" else "failed to execute" in said)
