"""Issue 24: every fault ends in one ``error:`` line with a hint and a documented exit code — never exit 70,
never a hang. Each case goes through the real CLI; a watchdog turns a hang into a failure."""

from __future__ import annotations

import os

import pytest

import envman.lock.registry
from envman.cli.main import main
from envman.errors import ToolError

HASH = "a" * 64
PYLOCK = f"""lock-version = "1.0"
created-by = "uv"
requires-python = ">=3.11"

[[packages]]
name = "numpy"
version = "2.1.0"
index = "https://pypi.org/simple"
wheels = [{{ url = "https://files.example/numpy-2.1.0-cp311-cp311-manylinux_2_28_x86_64.whl", hashes = {{ sha256 = "{HASH}" }} }}]
"""
SPEC = "name: demo\ncpu: true\npython: '3.11'\nframework: none\npackages: [numpy]\n"



@pytest.fixture
def locked(tmp_path, monkeypatch):
    from fakes import install_fake_uv

    (tmp_path / "uv").mkdir()
    install_fake_uv(monkeypatch, tmp_path / "uv", PYLOCK)
    monkeypatch.setattr(envman.lock.registry, "resolve_digest", lambda ref, timeout=3.0: None)
    proj = tmp_path / "p"
    proj.mkdir()
    (proj / "envman.yaml").write_text(SPEC)
    assert main(["lock", str(proj)]) == 0
    return proj


def one_error(capsys) -> list[str]:
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith(("error:", "hint:", "stale:"))]
    assert "Traceback" not in err and "internal error" not in err, err
    assert lines and lines[0].startswith(("error: ", "stale: ")) and lines[-1].startswith("hint: "), err
    return lines


# --- FIFOs in place of the files envman reads -------------------------------------------------------------

FIFO_CASES = [(name, cmd) for name in ("envman.lock", "Dockerfile", "pylock.toml", "requirements.lock.txt",
                                       ".envman/stack.json", ".dockerignore")
              for cmd in ("lock --check", "lock", "build", "fetch", "doctor")]


@pytest.mark.parametrize("name, command", FIFO_CASES, ids=[f"{n}-{c.replace(' ', '')}" for n, c in FIFO_CASES])
def test_a_fifo_in_a_files_place_never_blocks(locked, capsys, watchdog, name, command, monkeypatch):
    import envman.lock.wheelhouse as wh

    def offline(*a, **k):
        raise ToolError("no network in this test", hint="fetch got past its checks: the FIFO is not its file")

    monkeypatch.setattr(wh, "fetch_wheels", offline)
    capsys.readouterr()
    (locked / name).unlink()
    os.mkfifo(locked / name)
    argv = command.split()
    rc = main([argv[0], str(locked), *argv[1:]])
    out = capsys.readouterr()
    assert "Traceback" not in out.err and "internal error" not in out.err and rc != 70, out.err
    if rc != 0:  # a command that needs the file says so; one that does not need it goes on (doctor, a lock)
        assert rc in (1, 4), out.err
        lines = [ln for ln in out.err.splitlines() if ln.startswith(("error:", "stale:", "hint:"))]
        assert lines and lines[-1].startswith("hint: "), out.err
    assert os.path.exists(locked / name) and not os.path.isfile(locked / name)  # nothing replaced it silently


def test_a_fifo_config_json_for_fit(tmp_path, capsys, watchdog):
    os.mkfifo(tmp_path / "config.json")
    assert main(["fit", "--model", str(tmp_path / "config.json"), "--target", "h100"]) == 2
    assert one_error(capsys)[0] == f"error: {tmp_path / 'config.json'}: not a regular file (a FIFO, socket or device)"


# --- malformed project files: a warning or one error line, never exit 70 -------------------------------------

MALFORMED = {
    "setup.cfg-binary": ({"setup.cfg": b"\xff\xfe\x00garbage"}, "setup.cfg: not UTF-8 text"),
    "setup.cfg-no-header": ({"setup.cfg": b"[metadata\nname = x\n"}, "setup.cfg: cannot be parsed"),
    "setup.py-syntax": ({"setup.py": b"from setuptools import setup\nsetup(name='x', install_requires=[\n"},
                        "setup.py: cannot be parsed (SyntaxError)"),
    "setup.py-nested": ({"setup.py": b"setup(install_requires=" + b"[" * 5000 + b"]" * 5000 + b")\n"},
                        "setup.py: cannot be parsed"),
    "setup.py-huge": ({"setup.py": b"x = 1\n" * 400_000}, "setup.py: 2.3 MB, over envman's limit of 1.0 MB"),
    "uv.lock-types": ({"uv.lock": b"version = 1\npackage = 5\n", "requirements.txt": b"six\n"}, None),
    "uv.lock-binary": ({"uv.lock": b"\xff\xfe", "requirements.txt": b"six\n"}, "error: uv.lock: not a readable uv lock"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_project_file_is_a_warning_or_one_error_line(tmp_path, capsys, watchdog, case):
    files, said = MALFORMED[case]
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    rc = main(["init", str(tmp_path), "--cpu", "--python", "3.11", "--no-lock"])
    out = capsys.readouterr()
    assert "Traceback" not in out.err and "internal error" not in out.err and rc in (0, 1), out.err
    if said is not None:
        assert said in out.out + out.err, out.out + out.err


# --- uv's answer truncated or garbage: uv's failure, exit 1, never 70 ------------------------------------------

GARBAGE = {
    "truncated": PYLOCK[: PYLOCK.index("wheels") + 12],
    "not-toml": "\x00\x01 this is not toml [[[",
    "packages-not-a-list": 'lock-version = "1.0"\npackages = 5\n',
    "package-without-name": 'lock-version = "1.0"\n[[packages]]\nversion = "1"\n',
    "wheels-not-tables": 'lock-version = "1.0"\n[[packages]]\nname = "numpy"\nversion = "2.1.0"\nwheels = [1, 2]\n',
    "empty": "",
}


@pytest.mark.parametrize("case", sorted(GARBAGE))
def test_a_truncated_or_garbage_uv_answer_is_one_error_line_exit_1(tmp_path, monkeypatch, capsys, watchdog, case):
    from fakes import install_fake_uv

    (tmp_path / "uv").mkdir()
    install_fake_uv(monkeypatch, tmp_path / "uv", GARBAGE[case])
    monkeypatch.setattr(envman.lock.registry, "resolve_digest", lambda ref, timeout=3.0: None)
    proj = tmp_path / "p"
    proj.mkdir()
    (proj / "envman.yaml").write_text(SPEC)
    assert main(["lock", str(proj)]) == 1
    lines = one_error(capsys)
    assert lines[0].startswith(("error: pylock.toml (uv's answer)", "error: uv's output does not contain numpy")), lines
    assert sorted(p.name for p in proj.iterdir()) == ["envman.yaml"]  # nothing written


@pytest.fixture
def read_only(locked, tmp_path):
    """The locked project seen through a read-only bind mount (root may make one; elsewhere this skips, saying
    so: a read-only checkout cannot be made without it when the tests run as root, who writes anywhere)."""
    import subprocess

    ro = tmp_path / "ro"
    ro.mkdir()
    if subprocess.run(["mount", "--bind", str(locked), str(ro)], capture_output=True).returncode:
        pytest.skip("cannot bind-mount here (not root): a read-only project needs one when tests run as root")
    try:
        if subprocess.run(["mount", "-o", "remount,bind,ro", str(ro)], capture_output=True).returncode:
            pytest.skip("cannot remount read-only here")
        yield ro
    finally:
        subprocess.run(["umount", str(ro)], capture_output=True)


def test_fetch_into_a_read_only_project_is_one_error_line(read_only, capsys, watchdog):
    assert main(["fetch", str(read_only)]) == 1
    lines = one_error(capsys)
    assert lines == [f"error: cannot create the wheelhouse {read_only / '.envman' / 'wheelhouse'}: Read-only file system",
                     "hint: pass --wheelhouse DIR, a folder envman may write (build --offline --wheelhouse DIR reads it)"]


def test_a_relock_of_a_read_only_project_changes_nothing_and_says_so(read_only, capsys, watchdog):
    before = {p.name: p.read_bytes() for p in read_only.iterdir() if p.is_file()}
    assert main(["lock", str(read_only), "--upgrade"]) == 1
    assert one_error(capsys)[0].startswith("error: cannot write ")
    assert {p.name: p.read_bytes() for p in read_only.iterdir() if p.is_file()} == before
