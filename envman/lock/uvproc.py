"""uv as a child process (standard library only, so it can start before the rest of envman is imported).

- uv runs in its own process group and gets SIGKILL when envman dies: Ctrl-C, a timeout or a kill never
  leaves a resolver running.
- ``progress`` hears which package uv is fetching from which index (uv's HTTP client logs, nothing else);
  ``timeout`` bounds the wall clock and the error names the index uv was waiting on.
- A re-lock starts uv speculatively with the request the previous lock made (``speculate``): on the
  usual re-lock the inputs are unchanged, so uv is already resolving while envman imports, reads the
  spec and resolves the stack. When the real request differs, the speculative run is killed unused.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from envman.errors import ToolError
from envman.lock import uvstart
from envman.redact import redact

_REQUEST = re.compile(r"(?:Sending (?:fresh GET|revalidation) request for|No cache entry for):? (\S+)")


def index_of(url: str) -> str:
    """``https://pypi.org/simple/numpy/`` → ``https://pypi.org/simple``; a file URL → its host."""
    m = re.match(r"^(\w+://[^/]+)(/.*?/simple|/simple|/whl/[^/]+)?/", url)
    if not m:
        return url
    return m.group(1) + (m.group(2) or "")


def uv_binary() -> str:
    """The uv envman pins (a dependency): its version is part of what makes a lock reproducible."""
    exe = uvstart.uv_binary()
    if exe is None:
        raise ToolError("uv is not installed", hint="pip install envman installs it; or put uv on PATH")
    return exe


@dataclass(frozen=True)
class UvRequest:
    """Everything one uv run depends on: the files written into its (temporary) directory and its
    arguments after the uv binary. Equal requests, same answer."""

    files: tuple[tuple[str, str], ...]
    args: tuple[str, ...]
    output: str = "pylock.toml"
    # environment uv needs beyond envman's own: index URLs with credentials (lock/uv.py index_options). Never
    # serialized: a request that has any is never remembered, so never started early.
    env: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # no token in a repr or traceback

    def to_json(self) -> str:
        return json.dumps({"files": [list(f) for f in self.files], "args": list(self.args), "output": self.output})

    @classmethod
    def from_json(cls, text: str) -> UvRequest:
        d = json.loads(text)
        return cls(tuple((str(n), str(t)) for n, t in d["files"]), tuple(str(a) for a in d["args"]), str(d["output"]))

    @property
    def seed(self) -> str | None:
        """The previous pylock.toml uv starts from (its preferences), if any."""
        return next((t for n, t in self.files if n == self.output), None)

    def with_file(self, name: str, text: str | None) -> UvRequest:
        files = tuple(f for f in self.files if f[0] != name) + (((name, text),) if text is not None else ())
        return UvRequest(tuple(sorted(files)), self.args, self.output, self.env)


class UvRun:
    """One running uv: ``wait()`` for it (raises ToolError), ``cancel()`` to end it and its group."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: str | None, timeout: float | None = None,
                 progress=None, request: UvRequest | None = None, owned_dir: str | None = None,
                 started: uvstart.Started | None = None) -> None:
        """Runs ``args``; or, given ``started``, adopts that process (its clock, its folder) instead."""
        self.request, self.cwd, self.owned_dir = request, cwd, owned_dir
        self.timeout, self.progress = timeout, progress
        self.started = started.started if started is not None else time.monotonic()
        self.errors: list[str] = []
        self.last: str | None = None
        self.indexes = _indexes(args, env)
        if started is not None:
            self.proc = started.proc
        else:
            try:
                self.proc = uvstart.spawn(args, env, cwd)
            except OSError as exc:
                self.close()
                raise ToolError(f"cannot run uv: {exc}", hint="reinstall envman (it depends on uv)") from None
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    @classmethod
    def adopt(cls, started: uvstart.Started, timeout: float | None = None, progress=None) -> UvRun:
        """The uv that lock/uvstart.py started before envman was imported, from here on run like any other."""
        request = UvRequest.from_json(started.request_json)
        return cls(started.args, {}, started.cwd, timeout, progress, request, started.cwd, started)

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            m = _REQUEST.search(line)
            if m:
                url = m.group(1).rstrip("/")
                self.last = url
                if self.progress is not None:
                    self.progress(redact(f"uv: fetching {url.rsplit('/', 1)[-1]} from {index_of(url + '/')}"))
            elif not line.startswith("DEBUG") and line.strip():
                self.errors.append(line.rstrip("\n"))

    def wait(self) -> None:
        try:
            try:
                self._wait_ticking()
            except subprocess.TimeoutExpired:
                self.cancel()
                where = index_of(self.last + "/") if self.last else " or ".join(self.indexes) or "the package index"
                raise ToolError(redact(f"uv did not finish within {self.timeout:g} s: no answer from {where}"),
                                hint="check the network or proxy to that index, or raise --timeout") from None
        except BaseException:
            self.cancel()  # Ctrl-C: uv must not outlive envman
            raise
        self.reader.join(timeout=2.0)  # a stray child of uv holding its stderr open must not hang envman
        if self.proc.returncode != 0:
            lines = [ln for ln in self.errors if ln.strip()]
            unreachable = network_failure(lines, self.last, self.indexes)
            if unreachable is not None:
                message, hint = unreachable
                raise ToolError(redact(message), hint=redact(hint + "\nuv says:\n" + "\n".join(lines[-15:])))
            first = next((ln for ln in lines if "No solution" in ln or "error" in ln.lower()),
                         lines[0] if lines else "failed")
            raise ToolError(redact(f"uv could not resolve the requirements: {first.strip()}"),
                            hint=redact("uv says:\n" + "\n".join(lines[-15:])))

    def _wait_ticking(self) -> None:
        """Wait for uv; every few seconds tell ``progress`` it still runs (a stalled network is then visible).

        It waits on the stderr reader, which ends when uv exits (its stderr closes): a thread join wakes at
        once, where ``Popen.wait(timeout)`` polls with sleeps of up to 50 ms (measured: ~45 ms of a 0.4 s lock)."""
        while True:
            left = None if self.timeout is None else self.timeout - (time.monotonic() - self.started)
            # a uv that already answered is not timed out by a caller that came late to wait for it (a re-lock
            # waits for the registry before it waits for uv)
            if left is not None and left <= 0 and self.proc.poll() is None:
                raise subprocess.TimeoutExpired(self.proc.args, self.timeout or 0)
            step = 2.0 if left is None else min(2.0, left)
            self.reader.join(timeout=step)
            # stderr closed: uv has exited or is about to. Or uv exited and a stray child still holds the pipe.
            if not self.reader.is_alive() or self.proc.poll() is not None:
                self.proc.wait(timeout=None if left is None else max(left, 0.001))
                return
            if self.progress is not None and self.last is None:
                self.progress("uv: resolving")

    def output(self) -> str:
        assert self.request is not None and self.cwd is not None
        return (Path(self.cwd) / self.request.output).read_text(encoding="utf-8")

    def cancel(self) -> None:
        if getattr(self, "proc", None) is not None and self.proc.poll() is None:
            uvstart.kill_group(self.proc.pid)
            self.proc.wait()
        self.close()

    def close(self) -> None:
        if self.owned_dir:
            shutil.rmtree(self.owned_dir, ignore_errors=True)
            self.owned_dir = None


# what uv (reqwest, rustls, the OS resolver) says when an index cannot be reached, by cause: the first line
# of the error names the host and the cause, the hint what to do about that cause
_NETWORK = (
    (re.compile(r"failed to lookup address|Name or service not known|nodename nor servname|No such host|"
                r"Temporary failure in name resolution|dns error|Could not resolve host", re.I),
     "the name does not resolve (DNS)",
     "check the host name in the index (or VCS) URL, and the DNS (or the proxy: HTTPS_PROXY) of this machine"),
    (re.compile(r"Connection refused|actively refused|Failed to connect to", re.I),
     "the connection was refused",
     "nothing listens at that address and port: check the index URL's port, or that the index server runs"),
    (re.compile(r"certificate verify failed|invalid peer certificate|UnknownIssuer|self[- ]signed certificate|"
                r"certificate has expired|CertificateExpired|NotValidForName|tls handshake|SSL routines|SSL error", re.I),
     "its TLS certificate is not trusted",
     "behind a TLS-intercepting proxy, point SSL_CERT_FILE (or PIP_CERT / REQUESTS_CA_BUNDLE) at its CA bundle; "
     "or UV_NATIVE_TLS=1 to use the system's certificate store"),
    (re.compile(r"operation timed out|connection timed out|network timeout|deadline has elapsed", re.I),
     "the connection timed out",
     "check the network, the proxy (HTTPS_PROXY) or a firewall towards that host; or raise --timeout / UV_HTTP_TIMEOUT"),
)
_URL_HOST = re.compile(r"\b\w+://(?:[^/@\s`'\")]*@)?([^/:\s`'\")]+)")


def network_failure(lines: list[str], last: str | None, indexes: list[str]) -> tuple[str, str] | None:
    """``("cannot reach pypi.internal: the name does not resolve (DNS)", hint)`` when uv's error says an index
    could not be reached, or None when it failed for another reason (no solution, a bad requirement)."""
    text = "\n".join(lines)
    found = next(((cause, hint) for pattern, cause, hint in _NETWORK if pattern.search(text)), None)
    if found is None:
        return None
    cause, hint = found
    hosts = [m.group(1) for ln in lines for m in _URL_HOST.finditer(ln)]
    if not hosts:
        hosts = [m.group(1) for u in ([last] if last else indexes) for m in _URL_HOST.finditer(u)]
    host = hosts[0] if hosts else "the package index"
    return f"cannot reach {host}: {cause}", hint


def _indexes(args: list[str], env: dict[str, str] | None = None) -> list[str]:
    """The indexes a uv command names (what a stall message can name when uv did not say): on its command
    line, else in the environment uv reads them from (where index URLs with credentials go: lock/uv.py)."""
    env = env or {}

    def named(flag: str, var: str) -> list[str]:
        return [a for f, a in zip(args, args[1:]) if f == flag] or env.get(var, "").split()

    return [*(named("--index-url", "UV_INDEX_URL") or ["https://pypi.org/simple"]),
            *named("--extra-index-url", "UV_EXTRA_INDEX_URL")]


_TEMP_PREFIX = uvstart.TEMP_PREFIX
_ORPHAN_AGE = 3600.0  # seconds: no lock runs that long, and a folder this old whose owner is gone is an orphan


def clean_orphans(temp_dir: str | None = None, now: float | None = None) -> list[str]:
    """Remove the temporary folders of lock runs that were killed (SIGKILL, a power cut): older than an hour,
    this user's, and their process (``envman-lock-<pid>-…``) gone. What it removed, by name."""
    base = temp_dir or tempfile.gettempdir()
    now = time.time() if now is None else now
    removed: list[str] = []
    try:
        entries = list(os.scandir(base))
    except OSError:
        return removed
    for e in entries:
        if not e.name.startswith(_TEMP_PREFIX):
            continue
        try:
            st = e.stat(follow_symlinks=False)
        except OSError:
            continue
        if not e.is_dir(follow_symlinks=False) or st.st_uid != os.getuid() or now - st.st_mtime < _ORPHAN_AGE:
            continue
        m = re.match(re.escape(_TEMP_PREFIX) + r"(\d+)-", e.name)
        if m and _alive(int(m.group(1))):
            continue
        shutil.rmtree(e.path, ignore_errors=True)
        removed.append(e.name)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # another user's process, or a number no process has: keep the folder
    return True


def start_request(binary: str, request: UvRequest, timeout: float | None = None, progress=None) -> UvRun:
    clean_orphans()
    td = uvstart.make_dir(request.files)
    log = timeout is not None or bool(getattr(progress, "live", False))
    return UvRun([binary, *request.args], {**uvstart.uv_env(log), **dict(request.env)}, td, timeout, progress, request, td)


# --- speculation on a re-lock -----------------------------------------------------------------------


def _request_file(root: Path) -> Path:
    return Path(uvstart.request_file(str(root)))


def remember(root: Path, request: UvRequest) -> None:
    """The request a lock made, for the next lock of the same project to start early, with the uv binary that
    ran it and the Python installation it belongs to (finding uv again costs the early start ~2 ms). A
    request that names an index with credentials in its URL is not kept: no token is ever written to a
    file, the cache included."""
    text = request.to_json()
    if request.env or redact(text) != text:
        return
    d = json.loads(text)
    try:
        d.update(uv=uv_binary(), prefix=sys.prefix)
    except ToolError:
        pass
    p = _request_file(root)
    text = json.dumps(d)
    try:
        if p.read_text(encoding="utf-8") == text:
            return  # the usual re-lock: the same request as last time
    except (OSError, UnicodeDecodeError):
        pass
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, p)
    except OSError:
        pass


def speculate(root: Path, seed_name: str, timeout: float | None = None, progress=None) -> UvRun | None:
    """Start uv on the request the project's last lock made, seeded with the lock it wrote (``seed_name``,
    without envman's header line), or None when there is nothing to go on."""
    log = timeout is not None or bool(getattr(progress, "live", False))
    started = uvstart.start_remembered(str(root), seed_name, log)
    if started is None:
        return None
    try:
        return UvRun.adopt(started, timeout, progress)
    except (ValueError, KeyError, TypeError):
        started.kill()
        return None
