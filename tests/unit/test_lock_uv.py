"""The lock's uv run, offline: a fake uv stands in for the real one (tests/network/ runs the real one)."""

from __future__ import annotations

import os
import stat
import sys
import time
from pathlib import Path

import pytest

from envman.errors import ToolError, UsageError
from envman.lock import uv as uvmod
from envman.lock.pylock import parse_pylock

PYLOCK = '''lock-version = "1.0"
created-by = "uv"
requires-python = ">=3.11"

[[packages]]
name = "numpy"
version = "2.1.0"
wheels = [{ url = "https://files.example/numpy-2.1.0-cp311-cp311-manylinux_2_28_x86_64.whl", hashes = { sha256 = "bb" } }]

[[packages]]
name = "oldpkg"
version = "1.0"
sdist = { url = "https://files.example/oldpkg-1.0.tar.gz", hashes = { sha256 = "cc" } }

[[packages]]
name = "torch"
version = "2.14.1"
wheels = [{ url = "https://files.example/torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl", hashes = { sha256 = "aa" } }]
'''


class R:
    cuda = "13.0"
    cudnn = None
    nccl = None
    index_url = None
    arch = "x86_64"  # a Resolution's, for uv's --python-platform


def fake_uv(tmp_path: Path, body: str) -> str:
    """A uv that counts its runs in calls.log and does ``body`` (Python)."""
    exe = tmp_path / "fake-uv"
    exe.write_text(f"#!{sys.executable}\nimport os, sys, time\n"
                   f"open({str(tmp_path / 'calls.log')!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n" + body)
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return str(exe)


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def no_metadata(monkeypatch):
    deps = {"torch": ["numpy>=1"], "numpy": [], "oldpkg": None}
    monkeypatch.setattr("envman.lock.graph.requires_dist", lambda p, timeout, ctx=None: deps[p.name])


def test_one_uv_run_writes_both_files_and_they_agree(tmp_path, monkeypatch, no_metadata):
    write = f"out = sys.argv[sys.argv.index('-o') + 1]\nopen(out, 'w').write({PYLOCK!r})\n"
    monkeypatch.setattr(uvmod, "uv_binary", lambda: fake_uv(tmp_path, write))
    lr = uvmod.python_lock_job(["torch==2.14.1", "oldpkg"], "3.11", [], ["torch"], R()).compile()
    calls = (tmp_path / "calls.log").read_text().splitlines()
    assert len(calls) == 1 and "--format pylock.toml" in calls[0]
    assert lr.pylock_text == PYLOCK
    assert lr.req_text == (
        "--index-url https://pypi.org/simple\n"
        "numpy==2.1.0 \\\n    --hash=sha256:bb\n    # via torch\n"
        "oldpkg==1.0 \\\n    --hash=sha256:cc\n    # via -r requirements.in\n"
        "torch==2.14.1 \\\n    --hash=sha256:aa\n    # via -r requirements.in\n"
    )
    assert {p.name: p.version for p in parse_pylock(PYLOCK)} == {p.name: p.version for p in lr.python_lock.packages}
    assert "oldpkg" not in lr.fw_text and "numpy==2.1.0" in lr.fw_text  # the framework's closure
    assert lr.sdist_only == {"oldpkg"}


def test_timeout_kills_uv_and_names_the_index(tmp_path, monkeypatch):
    stall = ("sys.stderr.write('DEBUG Sending fresh GET request for: https://mirror.example/simple/numpy/\\n')\n"
             "sys.stderr.flush()\nopen(sys.argv[0] + '.pid', 'w').write(str(os.getpid()))\ntime.sleep(60)\n")
    monkeypatch.setattr(uvmod, "uv_binary", lambda: fake_uv(tmp_path, stall))
    seen: list[str] = []
    t = time.monotonic()
    with pytest.raises(ToolError) as exc:
        uvmod.python_lock_job(["numpy"], "3.11", [], [], R(), timeout=1).compile(seen.append)
    assert time.monotonic() - t < 10
    assert exc.value.message == "uv did not finish within 1 s: no answer from https://mirror.example/simple"
    assert exc.value.hint == "check the network or proxy to that index, or raise --timeout"
    assert seen == ["uv: fetching numpy from https://mirror.example/simple"]
    pid = int((tmp_path / "fake-uv.pid").read_text())
    time.sleep(0.2)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # the whole process group is gone


def test_framework_index_serves_only_the_framework(tmp_path):
    text = uvmod.input_pyproject(["torch==2.6.0+cu126", "torchvision==0.21.0+cu126", "numpy<3", "triton"],
                                 "https://download.pytorch.org/whl/cu126")
    from envman._compat import tomllib

    doc = tomllib.loads(text)
    assert doc["project"]["dependencies"] == ["torch==2.6.0+cu126", "torchvision==0.21.0+cu126", "numpy<3", "triton"]
    assert doc["tool"]["uv"]["index"] == [{"name": "framework", "url": "https://download.pytorch.org/whl/cu126",
                                           "explicit": True}]
    assert doc["tool"]["uv"]["sources"] == {"torch": {"index": "framework"}, "torchvision": {"index": "framework"},
                                            "triton": {"index": "framework"}}


def test_framework_index_is_not_an_extra_index_in_the_uv_command(tmp_path, monkeypatch, no_metadata):
    write = f"out = sys.argv[sys.argv.index('-o') + 1]\nopen(out, 'w').write({PYLOCK!r})\n"
    monkeypatch.setattr(uvmod, "uv_binary", lambda: fake_uv(tmp_path, write))

    class V(R):
        index_url = "https://download.pytorch.org/whl/cu126"

    lr = uvmod.python_lock_job(["torch==2.14.1"], "3.11", [V.index_url, "https://corp.example/simple"],
                                   ["torch"], V()).compile()
    call = (tmp_path / "calls.log").read_text()
    assert call.startswith("pip compile pyproject.toml ")
    assert "corp.example" not in call and "download.pytorch.org" not in call  # corp: a private index, in uv's env
    assert dict(lr.request.env) == {"UV_EXTRA_INDEX_URL": "https://corp.example/simple"}
    # pip installs the lock with hashes: it needs both indexes to find the files (the private one by its name)
    assert lr.req_text.startswith("--index-url https://pypi.org/simple\n"
                                  "--extra-index-url ${ENVMAN_INDEX_CORP_EXAMPLE}/simple\n"
                                  "--extra-index-url https://download.pytorch.org/whl/cu126\n")


def test_locked_cuda_libraries_that_differ_from_the_stack_are_named():
    from envman.app.pythonlocks import stack_mismatches

    class TF:
        cudnn = "9.3"
        nccl = None
        cuda = "12.5"

    # cuDNN and NCCL are held to floors (issue 38): a newer one in the major is no mismatch, an older one is
    got = stack_mismatches(TF(), {"nvidia-cudnn-cu12": "9.2.0.1", "nvidia-cuda-runtime-cu12": "12.9.79", "numpy": "2"})
    assert stack_mismatches(TF(), {"nvidia-cudnn-cu12": "9.28.0.1"}) == []
    assert got == [
        "warning: the lock pins nvidia-cudnn-cu12==9.2.0.1 but the stack expects cuDNN 9.3 (smoke test and driver "
        "floor follow the stack); pin it with a constraint or choose another stack",
        "warning: the lock pins nvidia-cuda-runtime-cu12==12.9.79 but the stack expects CUDA 12.5 (smoke test and "
        "driver floor follow the stack); pin it with a constraint or choose another stack",
    ]
    assert stack_mismatches(TF(), {"nvidia-cudnn-cu12": "9.3.0.75", "nvidia-cuda-runtime-cu12": "12.5.82"}) == []


def test_constraints_go_to_uv_as_a_file(tmp_path, monkeypatch, no_metadata):
    write = (f"out = sys.argv[sys.argv.index('-o') + 1]\nopen(out, 'w').write({PYLOCK!r})\n"
             "c = sys.argv[sys.argv.index('--constraint') + 1]\nsys.stderr.write('')\n"
             f"open({str(tmp_path / 'cons.txt')!r}, 'w').write(open(c).read())\n")
    monkeypatch.setattr(uvmod, "uv_binary", lambda: fake_uv(tmp_path, write))
    uvmod.python_lock_job(["torch==2.14.1"], "3.11", [], ["torch"], R(), constraints=["nvidia-cudnn-cu12==9.3.0.75"]).compile()
    assert (tmp_path / "cons.txt").read_text() == "nvidia-cudnn-cu12==9.3.0.75\n"


def test_a_silent_stall_names_the_indexes_of_the_command(tmp_path, monkeypatch):
    monkeypatch.setattr(uvmod, "uv_binary", lambda: fake_uv(tmp_path, "time.sleep(60)\n"))
    ticks: list[str] = []
    with pytest.raises(ToolError) as exc:
        uvmod.python_lock_job(["numpy"], "3.11", ["https://corp.example/simple"], [], R(), timeout=2.5).compile(ticks.append)
    assert exc.value.message == ("uv did not finish within 2.5 s: no answer from https://pypi.org/simple or "
                                 "https://corp.example/simple")
    assert set(ticks) == {"uv: resolving"}  # while uv says nothing, progress still hears it runs


def test_a_uv_that_answered_in_time_is_not_timed_out_by_a_late_wait(tmp_path, monkeypatch):
    """--timeout bounds uv, not the caller: a re-lock waits for the registry before it waits for uv."""
    import time

    from envman.lock.uvproc import UvRequest, start_request

    exe = fake_uv(tmp_path, "open(sys.argv[sys.argv.index('-o') + 1], 'w').write('answer')\n")
    run = start_request(exe, UvRequest((("requirements.in", "numpy\n"),), ("pip", "compile", "-o", "pylock.toml")),
                        timeout=0.5)
    time.sleep(1.0)  # the caller was busy past the timeout; uv had long answered
    try:
        run.wait()
        assert run.output() == "answer"
    finally:
        run.cancel()


def test_tensorflow_cuda_wheels_are_held_to_the_tested_configuration(matrix):
    from envman.lock.pins import cuda_constraints
    from envman.resolve.request import build_request
    from envman.resolve.resolver import resolve_stack

    res = resolve_stack(matrix, build_request(matrix, framework="tensorflow", targets=["h100"], python="3.11"))
    cons = cuda_constraints(res, matrix.toolkit_wheels)
    assert f"nvidia-cudnn-cu12>={res.cudnn},<{int(res.cudnn.split('.')[0]) + 1}" in cons and f"nvidia-cuda-runtime-cu12=={res.cuda}.*" in cons
    assert f"nvidia-cublas-cu12=={res.cuda}.*" in cons and not any(c.startswith("nvidia-cufft") for c in cons)
    torch = resolve_stack(matrix, build_request(matrix, framework="torch", targets=["h100"], python="3.11"))
    assert cuda_constraints(torch, matrix.toolkit_wheels) == []  # torch's wheels pin their CUDA libraries exactly


def test_cublas_cu11_is_not_held_to_the_toolkits_minor(matrix):
    # ageron/handson-ml3 (issue 20): tensorflow 2.14's [and-cuda] pins nvidia-cublas-cu11==11.11.3.6 — cuBLAS numbers
    # its cu11 wheels itself (11.10, 11.11) — and a constraint nvidia-cublas-cu11==11.8.* made the lock unsatisfiable
    from envman.lock.pins import cuda_constraints
    from envman.resolve.request import build_request
    from envman.resolve.resolver import resolve_stack

    res = resolve_stack(matrix, build_request(matrix, framework="tensorflow==2.14.*", targets=["h100"], python="3.11"))
    assert (str(res.version), res.variant, res.cuda) == ("2.14.1", "cu118", "11.8")
    cons = cuda_constraints(res, matrix.toolkit_wheels)
    assert not any(c.startswith("nvidia-cublas") for c in cons), cons
    assert {"nvidia-cuda-runtime-cu11==11.8.*", "nvidia-cuda-nvcc-cu11==11.8.*", "nvidia-cuda-cupti-cu11==11.8.*",
            "nvidia-cudnn-cu11>=8.7,<9"} <= set(cons)  # the toolkit-numbered ones stay held; cuDNN to its floor


def test_cli_lock_timeout_is_one_error_line_and_exit_1(tmp_path, monkeypatch, capsys):
    from envman.cli.main import main
    from envman.lock import uvproc

    monkeypatch.setattr(uvmod, "uv_binary", lambda: fake_uv(tmp_path, "time.sleep(60)\n"))
    monkeypatch.setattr(uvproc, "uv_binary", uvmod.uv_binary)
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "envman.yaml").write_text("name: slow\ncpu: true\npython: '3.11'\npackages: [numpy]\n")
    assert main(["lock", str(proj), "--timeout", "1"]) == 1
    err = capsys.readouterr().err
    assert "error: uv did not finish within 1 s: no answer from https://pypi.org/simple\n" in err
    assert "hint: check the network or proxy to that index, or raise --timeout" in err and "Traceback" not in err
    assert sorted(p.name for p in proj.iterdir()) == ["envman.yaml"]  # nothing written


def _serve_index(root: Path, packages: dict[str, str], auth: str | None = None):
    """A PEP 503 simple index on 127.0.0.1 with one tiny wheel (and its PEP 658 metadata) per package; with
    ``auth`` ("user:password"), it answers 401 to any request without those basic-auth credentials."""
    import functools
    import hashlib
    import http.server
    import threading
    import zipfile

    for name, version in packages.items():
        dist = name.replace("-", "_")
        whl = f"{dist}-{version}-py3-none-any.whl"
        meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        d = root / "simple" / name
        d.mkdir(parents=True)
        with zipfile.ZipFile(d / whl, "w") as zf:
            zf.writestr(f"{dist}-{version}.dist-info/METADATA", meta)
            zf.writestr(f"{dist}-{version}.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
            zf.writestr(f"{dist}-{version}.dist-info/RECORD", "")
        (d / (whl + ".metadata")).write_text(meta)
        sha = hashlib.sha256((d / whl).read_bytes()).hexdigest()
        (d / "index.html").write_text(f'<html><body><a href="{whl}#sha256={sha}">{whl}</a></body></html>')
    import base64

    want = "Basic " + base64.b64encode(auth.encode()).decode() if auth else None

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *a, **k):
            pass

        def do_GET(self):
            if want and self.headers.get("Authorization") != want:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="index"')
                self.end_headers()
                return
            super().do_GET()

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_address[1]}/simple"


def test_a_name_on_both_indexes_never_comes_from_the_framework_index(tmp_path):
    # the framework's index also offers `demo-pkg` (a higher version: what a dependency-confusion attack
    # uploads); with --extra-index-url uv would take it from there. Only torch may come from it.
    main_srv, main = _serve_index(tmp_path / "main", {"demo-pkg": "1.0"})
    fw_srv, fw = _serve_index(tmp_path / "fw", {"demo-pkg": "9.9", "torch": "2.0.0"})
    try:
        class V(R):
            index_url = fw

        lr = uvmod.python_lock_job(["torch==2.0.0", "demo-pkg"], "3.11", [fw], ["torch"], V(), index_url=main,
                                       timeout=120).compile()
    finally:
        main_srv.shutdown()
        fw_srv.shutdown()
    assert {p.name: p.version for p in lr.python_lock.packages} == {"demo-pkg": "1.0", "torch": "2.0.0"}
    # the main index is private (not PyPI): named in pylock.toml, its URL never written
    main_name = "ENVMAN_INDEX_" + main.split("//")[1].split("/")[0].replace(".", "_").replace(":", "_")
    assert f"{fw}/torch/torch-2.0.0" in lr.pylock_text and "${" + main_name + "}/simple/demo-pkg/demo_pkg-1.0" \
        in lr.pylock_text and main not in lr.pylock_text
    assert f"{fw}/demo-pkg" not in lr.pylock_text


@pytest.mark.parametrize("cause, said, first, hint", [
    ("dns", "dns error: failed to lookup address information: Name or service not known",
     "cannot reach pypi.internal: the name does not resolve (DNS)", "DNS"),
    ("git-dns", "fatal: unable to access 'https://pypi.internal/o/r.git/': Could not resolve host: pypi.internal",
     "cannot reach pypi.internal: the name does not resolve (DNS)", "DNS"),  # a VCS requirement: git's words
    ("refused", "tcp connect error: Connection refused (os error 111)",
     "cannot reach pypi.internal: the connection was refused", "port"),
    ("tls", "invalid peer certificate: UnknownIssuer",
     "cannot reach pypi.internal: its TLS certificate is not trusted", "SSL_CERT_FILE"),
    ("openssl", "error:0A000086:SSL routines::certificate verify failed",
     "cannot reach pypi.internal: its TLS certificate is not trusted", "SSL_CERT_FILE"),
    ("timeout", "operation timed out",
     "cannot reach pypi.internal: the connection timed out", "--timeout"),
])
def test_an_unreachable_index_names_the_host_and_the_cause(tmp_path, cause, said, first, hint):
    from envman.lock.uvproc import UvRun

    say = ("error: Failed to fetch: `https://user:secret@pypi.internal/simple/numpy/`\n"
           "  Caused by: Request failed after 3 retries\n"
           "  Caused by: error sending request for url (https://pypi.internal/simple/numpy/)\n"
           f"  Caused by: {said}\n")
    exe = fake_uv(tmp_path, f"sys.stderr.write({say!r})\nsys.exit(2)\n")
    with pytest.raises(ToolError) as exc:
        UvRun([exe], dict(os.environ), str(tmp_path)).wait()
    assert exc.value.message == first
    assert hint in exc.value.hint and said in exc.value.hint  # uv's own words stay, in the hint
    assert "secret" not in exc.value.hint


def test_a_failure_that_is_not_the_network_keeps_uvs_first_error(tmp_path):
    from envman.lock.uvproc import UvRun

    exe = fake_uv(tmp_path, "sys.stderr.write('  x No solution found when resolving dependencies:\\n"
                            "  Because pyopenssl==99 was not found, we can conclude ...\\n')\nsys.exit(1)\n")
    with pytest.raises(ToolError) as exc:
        UvRun([exe], dict(os.environ), str(tmp_path)).wait()
    assert exc.value.message.startswith("uv could not resolve the requirements: x No solution found")


def test_orphan_lock_folders_of_a_killed_run_are_cleaned(tmp_path):
    import subprocess

    from envman.lock.uvproc import clean_orphans

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    hour_ago = time.time() - 3700
    folders = {"killed": f"envman-lock-{dead.pid}-x1", "running": f"envman-lock-{os.getpid()}-x2",
               "legacy": "envman-lock-abc123", "recent": f"envman-lock-{dead.pid}-x3", "other": "pip-build-x"}
    for key, name in folders.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "requirements.in").write_text("numpy\n")
        if key != "recent":
            os.utime(tmp_path / name, (hour_ago, hour_ago))
    assert sorted(clean_orphans(str(tmp_path))) == sorted([folders["killed"], folders["legacy"]])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [folders["running"], folders["recent"], folders["other"]])


def test_a_lock_run_cleans_orphans_first(tmp_path, monkeypatch):
    from envman.lock import uvproc

    monkeypatch.setattr(uvproc.tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setattr(uvproc.tempfile, "tempdir", str(tmp_path))
    old = tmp_path / "envman-lock-abc"
    old.mkdir()
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    run = uvproc.start_request(fake_uv(tmp_path, "pass\n"), uvproc.UvRequest((("a.txt", "x"),), ()))
    assert Path(run.cwd).name.startswith(f"envman-lock-{os.getpid()}-")
    run.wait()
    run.cancel()
    assert not old.exists()


def test_a_uv_that_exits_0_without_writing_never_passes_off_the_previous_lock(tmp_path, monkeypatch, no_metadata):
    """uv's output file is seeded with the previous lock (its preferences): a uv that exits 0 without writing
    would leave that lock in place for new inputs. What uv returns must cover every requirement asked for."""
    monkeypatch.setattr(uvmod, "uv_binary", lambda: fake_uv(tmp_path, "pass\n"))  # exits 0, writes nothing
    with pytest.raises(ToolError) as e:
        uvmod.python_lock_job(["torch==2.14.1", "oldpkg", "newpkg"], "3.11", [], ["torch"], R(),
                                  previous=(None, PYLOCK)).compile()
    assert e.value.message == "uv's output does not contain newpkg, which the inputs ask for"
    # the same seed with inputs it covers is a legitimate re-lock that changed nothing
    lr = uvmod.python_lock_job(["torch==2.14.1", "oldpkg"], "3.11", [], ["torch"], R(), previous=(None, PYLOCK)).compile()
    assert lr.pylock_text == PYLOCK


def test_the_request_key_is_what_uv_is_asked_without_the_seed_the_interpreter_or_a_token(monkeypatch):
    """envman.lock records it (python_lock.request); an unchanged key keeps the lock without running uv."""
    monkeypatch.delenv("UV_PYTHON", raising=False)
    monkeypatch.delenv("UV_PYTHON_DOWNLOADS", raising=False)
    plain = uvmod.uv_request(["numpy"], "3.11", ["https://pypi.example/simple"], None)
    assert "--python" in plain.args  # this machine's interpreter: not part of what the request means
    assert plain.key() == uvmod.uv_request(["numpy"], "3.11", ["https://pypi.example/simple"], None,
                                           seed="the last answer").key()
    monkeypatch.setattr(sys, "executable", "/elsewhere/bin/python3")
    assert plain.key() == uvmod.uv_request(["numpy"], "3.11", ["https://pypi.example/simple"], None).key()
    for other in (uvmod.uv_request(["numpy<3"], "3.11", ["https://pypi.example/simple"], None),
                  uvmod.uv_request(["numpy"], "3.12", ["https://pypi.example/simple"], None),
                  uvmod.uv_request(["numpy"], "3.11", ["https://other.example/simple"], None),
                  uvmod.uv_request(["numpy"], "3.11", ["https://pypi.example/simple"], None, constraints=["numpy<3"]),
                  uvmod.uv_request(["numpy"], "3.11", ["https://pypi.example/simple"], None,
                                   platform="aarch64-manylinux_2_28")):
        assert other.key() != plain.key()
    secret = uvmod.uv_request(["numpy"], "3.11", ["https://bob:TOKEN@pypi.example/simple"], None)
    rotated = uvmod.uv_request(["numpy"], "3.11", ["https://bob:OTHER@pypi.example/simple"], None)
    # the index, not its credentials; and every index but PyPI reaches uv through its environment (issue 24: a
    # private index's token may be in its path), so the plain one is the same request
    assert secret.env and plain.env and secret.key() == rotated.key() == plain.key()


def test_uv_is_given_envmans_interpreter_only_when_it_is_the_targets_version(monkeypatch):
    """Without --python, uv searches PATH for an interpreter of the target's version on every run (pyenv's
    shims make that a shell script per candidate); one of another version would build sdists' metadata wrong."""
    monkeypatch.delenv("UV_PYTHON", raising=False)
    monkeypatch.delenv("UV_PYTHON_DOWNLOADS", raising=False)
    mine = f"{sys.version_info[0]}.{sys.version_info[1]}"
    cmd = uvmod.uv_compile_command(Path("in.txt"), Path("out.txt"), mine, [])
    assert cmd.args[cmd.args.index("--python") + 1] == sys.executable
    other = "3.8" if mine != "3.8" else "3.9"
    args = uvmod.uv_compile_command(Path("in.txt"), Path("out.txt"), other, []).args
    assert "--python" not in args and "--no-python-downloads" in args  # never a CPython download to compile a lock
    monkeypatch.setenv("UV_PYTHON_DOWNLOADS", "automatic")  # the user's choice stands
    assert "--no-python-downloads" not in uvmod.uv_compile_command(Path("in.txt"), Path("out.txt"), other, []).args
    monkeypatch.setenv("UV_PYTHON", "/opt/python3/bin/python")  # the user's choice stands
    assert "--python" not in uvmod.uv_compile_command(Path("in.txt"), Path("out.txt"), mine, []).args


def test_index_credentials_reach_uv_through_its_environment_never_its_command_line(tmp_path, monkeypatch):
    """Any user can read a process's arguments (ps); its environment only its owner can. A token in an index
    URL of envman.yaml must reach uv, and only that way; and never a lock file."""
    main_srv, main = _serve_index(tmp_path / "main", {"demo-pkg": "1.0"})
    priv_srv, priv = _serve_index(tmp_path / "priv", {"private-pkg": "2.0"}, auth="bob:s3cret")
    argv_log = tmp_path / "argv.log"
    real = uvmod.uv_binary()
    spy = tmp_path / "uv-spy"
    spy.write_text(f"#!{sys.executable}\nimport os, sys\nopen({str(argv_log)!r}, 'a').write(repr(sys.argv) + '\\n')\n"
                   f"os.execv({real!r}, [{real!r}, *sys.argv[1:]])\n")
    spy.chmod(spy.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(uvmod, "uv_binary", lambda: str(spy))
    secret_url = priv.replace("http://", "http://bob:s3cret@")
    try:
        lr = uvmod.python_lock_job(["demo-pkg", "private-pkg"], "3.11", [secret_url], [], R(), index_url=main,
                                       timeout=120).compile()
    finally:
        main_srv.shutdown()
        priv_srv.shutdown()
    assert {p.name: p.version for p in lr.python_lock.packages} == {"demo-pkg": "1.0", "private-pkg": "2.0"}
    argv = argv_log.read_text()
    assert "s3cret" not in argv and "--extra-index-url" not in argv and "127.0.0.1" not in argv
    assert "s3cret" not in lr.req_text + (lr.pylock_text or "") + lr.fw_text
    assert dict(lr.request.env) == {"UV_INDEX_URL": main, "UV_EXTRA_INDEX_URL": secret_url}
    assert "s3cret" not in repr(lr.request)


def test_index_options_go_to_the_environment_unless_they_are_pypi():
    """A private index's token may be in its path (https://host/TOKEN/simple): only PyPI's URL goes on uv's
    command line, and find-links only when none of its values carries credentials."""
    args, env = uvmod.index_options("https://pypi.org/simple", [], ["/wheels"])
    assert args == ["--index-url", "https://pypi.org/simple", "--find-links", "/wheels"] and env == {}
    args, env = uvmod.index_options(None, ["https://pypi.fury.io/TOKEN/me/"], [])
    assert args == [] and env == {"UV_EXTRA_INDEX_URL": "https://pypi.fury.io/TOKEN/me/"}
    args, env = uvmod.index_options("https://u:t@pypi.example/simple", ["https://a.example/simple",
                                                                          "https://u:t@b.example/simple"],
                                    ["https://u:t@files.example/wheels", "/wheels"])
    assert args == [] and env == {
        "UV_INDEX_URL": "https://u:t@pypi.example/simple",
        "UV_EXTRA_INDEX_URL": "https://a.example/simple https://u:t@b.example/simple",  # all of them: an argument
        "UV_FIND_LINKS": "https://u:t@files.example/wheels,/wheels",                     # would replace the variable
    }


CU12_LOCK = '''lock-version = "1.0"
created-by = "uv"

[[packages]]
name = "nvidia-cublas-cu12"
version = "12.8.4.1"
wheels = [{ url = "https://files.example/nvidia_cublas_cu12-12.8.4.1-py3-none-manylinux_2_27_x86_64.whl", hashes = { sha256 = "aa" } }]

[[packages]]
name = "torch"
version = "2.14.1"
wheels = [{ url = "https://files.example/torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl", hashes = { sha256 = "bb" } }]
'''


def test_init_resolves_for_the_cuda_major_a_locked_package_needs(tmp_path, monkeypatch):
    """mamba-ssm's cutlass wheels are CUDA 12 only: an init that first lands on a CUDA 13 stack resolves again
    for CUDA 12, says so, and writes cuda: "12" into envman.yaml; a user's own envman.yaml is not overridden."""
    from envman.app.init import InitOptions, init_project
    from envman.app.lock import lock_project
    from envman.resolve.request import build_request
    from envman.resolve.resolver import resolve_stack
    from tests.fakes import install_fake_uv

    install_fake_uv(monkeypatch, tmp_path, CU12_LOCK)
    monkeypatch.setattr("envman.lock.registry.resolve_digest", lambda ref, timeout=3.0: None)
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "requirements.txt").write_text("torch\nnvidia-cublas-cu12\n")  # as a CUDA-12-only package pulls it
    first = resolve_stack(load_fixture_matrix(), build_request(load_fixture_matrix(), framework="torch", targets=["h100"],
                                                                 python="3.11"))
    assert first.cuda.startswith("13.")  # the newest stack is CUDA 13: the conflict is real
    out = init_project(proj, InitOptions(targets=("h100",), python="3.11"))
    assert out.resolution.cuda.startswith("12.")
    assert "\ncuda: '12'\n" in (proj / "envman.yaml").read_text()
    assert any(n.startswith("nvidia-cublas-cu12==12.8.4.1 needs CUDA 12: the stack is resolved for CUDA 12") for n in out.notes)
    # envman.yaml now chooses: a lock against a CUDA 13 choice refuses and says what to change
    (proj / "envman.yaml").write_text((proj / "envman.yaml").read_text().replace("cuda: '12'", "cuda: '13'"))
    with pytest.raises(UsageError) as e:
        lock_project(proj)
    assert 'cuda: "12" in envman.yaml' in e.value.hint


def load_fixture_matrix():
    from envman.matrix.load import load_matrix

    return load_matrix()
