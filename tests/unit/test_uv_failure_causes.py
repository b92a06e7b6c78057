"""Issue 39: a failed uv is reported by its cause — the HTTP status an index answered (a 500, a 401 for a
user:token URL), the signal that killed uv, the URL uv could not parse, the last thing it said — and a uv that
exits 0 with garbage or nothing is a ToolError (exit 1), never exit 70. A fake uv (a small script, as in
test_lock_uv.py) says what the real one says (uv 0.13's words, seen against a local server answering 500/401)."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from envman.errors import ToolError
from envman.lock.uvproc import UvRequest, UvRun, start_request

TOKEN = "s3cr3t-t0ken"


def fake_uv(tmp_path: Path, body: str) -> str:
    exe = tmp_path / "fake-uv"
    exe.write_text(f"#!{sys.executable}\nimport os, signal, sys\n{body}")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return str(exe)


def failure(tmp_path: Path, said: str, code: int = 2) -> ToolError:
    exe = fake_uv(tmp_path, f"sys.stderr.write({said!r})\nsys.stderr.flush()\nsys.exit({code})\n")
    with pytest.raises(ToolError) as e:
        UvRun([exe], dict(os.environ), str(tmp_path)).wait()
    assert TOKEN not in e.value.message + (e.value.hint or "")
    return e.value


def test_an_index_answering_500_is_named_with_its_status(tmp_path):
    e = failure(tmp_path, f"error: Failed to fetch: http://bob:{TOKEN}@127.0.0.1:18500/simple/numpy/\n"
                          "  cause: HTTP status server error (500 Internal Server Error) for url "
                          f"(http://bob:{TOKEN}@127.0.0.1:18500/simple/numpy/)\n")
    assert e.message == "the index http://127.0.0.1:18500/simple failed: HTTP 500 (Internal Server Error)"
    assert e.hint.startswith("the index server had an error: retry later, or ask whoever runs it\nuv says:\n")


def test_credentials_an_index_refuses_are_named_not_read_as_no_solution_or_dns(tmp_path):
    e = failure(tmp_path, "error: No solution found when resolving dependencies\n"
                          "  cause: Because numpy was not found in the package registry and you require numpy, we can "
                          "conclude that your requirements are unsatisfiable.\n\n"
                          "hint: An index URL (http://127.0.0.1:18401/simple) could not be queried due to a lack of "
                          "valid authentication credentials (401 Unauthorized)\n", code=1)
    assert e.message == "the index http://127.0.0.1:18401/simple refused the credentials: HTTP 401 (Unauthorized)"
    assert e.hint.startswith("check the user name and token of that index (in UV_INDEX_URL / PIP_INDEX_URL, netrc "
                             "or a keyring); a token must be percent-encoded in a URL\n")


def test_a_token_uv_cannot_parse_as_a_url_is_named_as_such(tmp_path):
    e = failure(tmp_path, f"error: invalid value 'https://bob:{TOKEN}/x@pypi.internal/simple' for "
                          "'--index-url <INDEX_URL>': invalid port number\n\nFor more information, try '--help'.\n")
    assert e.message == "uv refuses the --index-url it was given: invalid port number"
    assert e.hint.startswith("a user name or token in a URL must be percent-encoded: / # ? @ : as %2F %23 %3F %40 %3A")


def test_a_uv_killed_by_a_signal_says_so_and_what_it_said_last(tmp_path):
    exe = fake_uv(tmp_path, "sys.stderr.write('Resolved 3 packages\\n')\nsys.stderr.flush()\n"
                            "os.kill(os.getpid(), signal.SIGKILL)\n")
    with pytest.raises(ToolError) as e:
        UvRun([exe], dict(os.environ), str(tmp_path)).wait()
    assert e.value.message == "uv was killed by SIGKILL; the last thing it said: Resolved 3 packages"
    assert e.value.hint.startswith("out of memory? (the kernel's OOM killer sends SIGKILL: see `dmesg`) nothing was "
                                   "written; re-run envman lock\nuv says:\nResolved 3 packages")


def test_a_uv_that_fails_with_garbage_names_its_last_line_and_one_that_says_nothing_says_so(tmp_path):
    e = failure(tmp_path, "\x1b[1m???\x1b[0m\nthread 'main' overflowed its stack\n", code=134)
    assert e.message == "uv failed (exit 134): thread 'main' overflowed its stack"
    e = failure(tmp_path, "", code=3)
    assert (e.message, e.hint) == ("uv failed (exit 3) without a word", "reinstall envman (it depends on uv), then re-run")


@pytest.mark.parametrize("answer, message", [
    (b"\xff\xfe\x00garbage", "uv's answer is not UTF-8 text (byte 0)"),
    (None, "uv exited without writing its answer"),
])
def test_a_uv_that_exits_0_with_garbage_or_nothing_is_a_tool_error(tmp_path, answer, message):
    write = f"open('out.toml', 'wb').write({answer!r})\n" if answer is not None else ""
    run = start_request(fake_uv(tmp_path, write), UvRequest((("in.txt", "six\n"),), (), output="out.toml"))
    try:
        run.wait()
        with pytest.raises(ToolError) as e:
            run.output()
    finally:
        run.cancel()
    assert e.value.message == message
    assert e.value.hint.startswith("run `envman lock --upgrade`")


def test_a_uv_that_ran_out_of_disk_says_so_and_where(tmp_path):
    e = failure(tmp_path, "error: Failed to download `numpy==2.1.0`\n"
                          "  Caused by: failed to write to file `/var/cache/uv/archive-v0/.tmpAbC/numpy.whl`: No space "
                          "left on device (os error 28)\n")
    assert e.message == "no space left on /var/cache/uv/archive-v0/.tmpAbC (uv)"
    assert e.hint.startswith("free space in uv's cache (UV_CACHE_DIR; `uv cache clean`) and in TMPDIR, or point them "
                             "at a disk with room, then re-run\nuv says:\n")
    e = failure(tmp_path, "error: No space left on device (os error 28)\n")
    assert e.message == "no space left on the disk uv writes to (uv)"
