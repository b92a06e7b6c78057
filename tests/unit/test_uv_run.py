"""uv as a child process (lock/uvproc.py) and the console script (cli/entry.py): uv dies with envman, even by
kill -9; a uv that cannot start says why; waiting on uv neither polls nor hangs on a stray child; and the
console script's fast exit keeps the output and the exit code."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from envman.errors import ToolError
from envman.lock import uvproc


def _sleeping_uv(tmp_path: Path, body: str = "time.sleep(60)\n") -> str:
    exe = tmp_path / "slow-uv"
    exe.write_text(f"#!{sys.executable}\nimport os, subprocess, sys, time\n{body}")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return str(exe)


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


def test_lock_folders_are_private_hold_the_inputs_and_go_with_the_run(tmp_path):
    request = uvproc.UvRequest((("requirements.in", "numpy\n"),), (), output="out.txt")
    run = uvproc.start_request(_sleeping_uv(tmp_path), request)
    d = Path(run.cwd)
    try:
        assert d.name.startswith(f"envman-lock-{os.getpid()}-")
        assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
        assert (d / "requirements.in").read_text() == "numpy\n"
    finally:
        run.cancel()
    assert run.proc.poll() is not None and not d.exists()


def test_a_uv_that_cannot_start_says_why(tmp_path):
    missing = str(tmp_path / "no-such-uv")
    with pytest.raises(ToolError) as exc:
        uvproc.UvRun([missing, "pip", "compile"], dict(os.environ), str(tmp_path))
    assert exc.value.message.startswith("cannot run uv: ") and missing in exc.value.message
    assert exc.value.hint == "reinstall envman (it depends on uv)"


ENVMAN = """
import json, sys, time
from envman.lock import uvproc
run = uvproc.start_request(sys.argv[1], uvproc.UvRequest((("requirements.in", "numpy\\n"),), ()))
print(json.dumps({"pid": run.proc.pid, "cwd": run.cwd}), flush=True)
time.sleep(60)
"""


def test_uv_runs_in_its_folder_and_dies_with_envman_even_by_kill_9(tmp_path):
    """uv's death signal (prctl PR_SET_PDEATHSIG) is set before it execs: kill -9 of envman takes uv with it."""
    marker = tmp_path / "uv-ran-in"
    slow = _sleeping_uv(tmp_path, f"open({str(marker)!r}, 'w').write(os.getcwd())\ntime.sleep(60)\n")
    envman = subprocess.Popen([sys.executable, "-c", ENVMAN, slow], stdout=subprocess.PIPE, text=True)
    try:
        info = json.loads(envman.stdout.readline())
        for _ in range(200):
            if marker.exists():
                break
            time.sleep(0.05)
        assert marker.read_text() == info["cwd"]  # uv runs in its own folder, with the request's files
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


def _console(*args: str, cwd: Path | None = None):
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
