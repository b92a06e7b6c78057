"""Starting uv: light on purpose (os, json, zlib; no subprocess, pathlib, dataclasses, hashlib or tempfile).

`envman lock` starts uv on the request the project's last lock made from the console script itself
(cli/entry.py), before typer and the rest of envman are imported: ~15 ms after exec instead of ~60. There
the process has one thread, so uv is started with a plain fork and exec (``fork_exec``) rather than
subprocess (whose import alone is ~3 ms), and util-linux's ``setpriv --pdeathsig KILL`` sets uv's death
signal instead of importing ctypes in the child (~2.5 ms before uv could exec). What runs uv afterwards
(progress, timeout, errors) is lock/uvproc.py, which adopts the process started here.
"""

from __future__ import annotations

import json
import os
import sys
import time
import zlib

from envman.hostenv import ca_bundle, cache_root

TYPE_CHECKING = False  # typing itself costs this module's start ~3 ms
if TYPE_CHECKING:
    import subprocess
    from typing import IO

TEMP_PREFIX = "envman-lock-"


# util-linux's setpriv: sets the child's death signal, then execs uv (PR_SET_PDEATHSIG survives the exec)
SETPRIV = ("/usr/bin/setpriv", "/bin/setpriv")


class Child:
    """A process ``fork_exec`` started: the part of subprocess.Popen that uvproc.UvRun uses."""

    def __init__(self, pid: int, args: list[str], stderr: IO[str]) -> None:
        self.pid, self.args, self.stderr = pid, args, stderr
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                self.returncode = -1  # reaped by someone else: it is gone, its status unknown
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if timeout is None:
            while self.returncode is None:
                try:
                    _, status = os.waitpid(self.pid, 0)
                    self.returncode = os.waitstatus_to_exitcode(status)
                except ChildProcessError:
                    self.returncode = -1
            return self.returncode
        end = time.monotonic() + timeout
        while (code := self.poll()) is None:
            if time.monotonic() >= end:
                import subprocess

                raise subprocess.TimeoutExpired(self.args, timeout)
            time.sleep(0.002)
        return code


def fork_exec(args: list[str], env: dict[str, str], cwd: str) -> Child:
    """uv in its own session (a timeout or Ctrl-C kills its whole group), in ``cwd``, stdout to /dev/null,
    stderr piped to the caller, and dead when envman dies (kill -9 included). Only for a process that has one
    thread: forking beside other threads can deadlock the child."""
    setpriv = next((p for p in SETPRIV if os.access(p, os.X_OK)), None)
    argv = [setpriv, "--pdeathsig", "KILL", "--", *args] if setpriv else list(args)
    r, w = os.pipe()
    null = os.open(os.devnull, os.O_RDWR)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child: become uv, or say on stderr why not
        try:
            os.setsid()
            os.chdir(cwd)
            os.dup2(null, 1)
            os.dup2(w, 2)
            if setpriv is None:
                _preexec()
            os.execve(argv[0], argv, env)
        except BaseException as exc:  # noqa: BLE001 - nothing may run on in a forked copy of envman
            try:
                os.write(2, f"error: cannot run uv: {exc}\n".encode())
            finally:
                os._exit(127)
    os.close(w)
    os.close(null)
    return Child(pid, list(args), open(r, encoding="utf-8", errors="replace"))


def _one_thread() -> bool:
    threading = sys.modules.get("threading")
    return threading is None or threading.active_count() == 1


class Started:
    """A uv process started here: its temporary folder (``cwd``, removed by whoever adopts it), the request
    it was started on (as the JSON ``uvproc.UvRequest`` reads) and when it started (a timeout counts from it)."""

    def __init__(self, proc: subprocess.Popen | Child, args: list[str], cwd: str, request_json: str, started: float,
                 logged: bool) -> None:
        self.proc, self.args, self.cwd, self.request_json = proc, args, cwd, request_json
        self.started, self.logged = started, logged

    def kill(self) -> None:
        if self.proc.poll() is None:
            kill_group(self.proc.pid)
            self.proc.wait()
        _rmtree(self.cwd)


def kill_group(pid: int) -> None:
    """SIGKILL to uv's process group (uv and whatever it started), and to uv itself: killed right after the
    fork, uv may not have made its own group yet."""
    import signal  # here: its import costs the early start ~0.4 ms

    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _rmtree(path: str) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def uv_binary() -> str | None:
    """The uv envman pins (a dependency: its version is part of what makes a lock reproducible), else the one
    on PATH; None when there is none."""
    try:
        from uv import find_uv_bin

        return str(find_uv_bin())
    except (ImportError, FileNotFoundError):
        import shutil

        return shutil.which("uv")


def uv_env(log_requests: bool = True) -> dict[str, str]:
    env = dict(os.environ)
    # TLS-intercepting proxies: uv reads SSL_CERT_FILE; reuse the bundle pip is told to use.
    cert = ca_bundle()
    if cert:
        env["SSL_CERT_FILE"] = cert
    if log_requests:
        # uv's HTTP client says which URL it asks (and nothing else): live progress, and the index to name
        # on a stall. It costs uv ~10% (measured: 537 vs 491 ms), so only when a timeout or a terminal wants it.
        env["RUST_LOG"] = "uv_client::cached_client=debug"
    return env


def _preexec() -> None:  # pragma: no cover - runs in the child
    # Linux: uv gets SIGKILL when envman dies, however it dies (kill -9 included)
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def spawn(args: list[str], env: dict[str, str], cwd: str | None) -> subprocess.Popen:
    """uv in its own process group (a timeout or Ctrl-C kills it and its children), stderr piped."""
    import subprocess

    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd,
                            start_new_session=True, preexec_fn=_preexec if os.name == "posix" else None)


def temp_root() -> str:
    """The temporary folder (TMPDIR …), as tempfile decides it; tempfile itself once it is imported (its
    ``tempdir`` may have been set) or when none of the variables names a folder."""
    if "tempfile" in sys.modules:
        return sys.modules["tempfile"].gettempdir()
    for d in (os.environ.get("TMPDIR"), os.environ.get("TEMP"), os.environ.get("TMP"), "/tmp", "/var/tmp", "/usr/tmp"):
        if d and os.path.isdir(d) and os.access(d, os.W_OK | os.X_OK):
            return os.path.abspath(d)
    import tempfile

    return tempfile.gettempdir()


def make_dir(files, base: str | None = None) -> str:
    """A fresh ``envman-lock-<pid>-…`` folder (mode 0700, a random name, like tempfile.mkdtemp) holding
    ``files`` (name, text): uv's inputs."""
    base = base or temp_root()
    for _ in range(100):
        td = os.path.join(base, f"{TEMP_PREFIX}{os.getpid()}-{os.urandom(6).hex()}")
        try:
            os.mkdir(td, 0o700)
            break
        except FileExistsError:
            continue
    else:  # pragma: no cover - 100 collisions of 48 random bits
        raise FileExistsError(f"no free temporary folder name under {base}")
    for name, text in files:
        with open(os.path.join(td, name), "w", encoding="utf-8") as f:
            f.write(text)
    return td


def request_file(root: str) -> str:
    """Where the request of the project at ``root`` is remembered (outside the project: it is a cache)."""
    base = cache_root()
    # by the project's real path: its last component for whoever looks, a checksum for uniqueness (a
    # collision costs only time: a remembered request is used only when it equals the lock's real one)
    real = os.path.realpath(root)
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in os.path.basename(real))[:40]
    return os.path.join(base, "requests-v2", f"{name}-{zlib.crc32(real.encode()):08x}.json")


def start_remembered(root: str, seed_name: str, log_requests: bool) -> Started | None:
    """Start uv on the request the project's last lock made, seeded with the lock it wrote (``seed_name``,
    without envman's header line: uv keeps the pins that still fit), or None when there is nothing to go on."""
    try:
        with open(request_file(root), encoding="utf-8") as f:
            d = json.load(f)
        files = {str(n): str(t) for n, t in d["files"]}
        try:
            with open(os.path.join(root, seed_name), encoding="utf-8") as f:
                files[seed_name] = f.read().partition("\n")[2]
        except FileNotFoundError:
            files.pop(seed_name, None)
        uv_args = [str(a) for a in d["args"]]
        request = {"files": sorted([n, t] for n, t in files.items()), "args": uv_args, "output": str(d["output"])}
        # the uv the last lock ran, when envman still runs from the same installation; else find it
        known = d.get("uv") if d.get("prefix") == sys.prefix else None
        binary = known if isinstance(known, str) and os.access(known, os.X_OK) else uv_binary()
        if binary is None:
            return None
        td = make_dir(files.items())
    except (OSError, ValueError, KeyError, TypeError):
        return None
    args = [binary, *uv_args]
    try:
        proc = fork_exec(args, uv_env(log_requests), td) if _one_thread() else spawn(args, uv_env(log_requests), td)
    except OSError:
        _rmtree(td)
        return None
    return Started(proc, args, td, json.dumps(request), time.monotonic(), log_requests)
