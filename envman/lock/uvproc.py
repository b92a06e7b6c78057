"""uv as a child process: one run of ``uv pip compile`` in a private temporary folder.

- uv runs in its own process group and gets SIGKILL when envman dies: Ctrl-C, a timeout or a kill never
  leaves a resolver running.
- ``progress`` hears which package uv is fetching from which index (uv's HTTP client logs, nothing else);
  ``timeout`` bounds the wall clock and the error names the index uv was waiting on.
- ``UvRequest`` is the run as a value: its ``key()`` is what envman.lock records, so a lock whose request
  did not change needs no uv run at all (app/generate.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from envman.errors import ToolError
from envman.hostenv import ca_bundle
from envman.process import pid_alive
from envman.redact import redact, redact_userinfo

_REQUEST = re.compile(r"(?:Sending (?:fresh GET|revalidation) request for|No cache entry for):? (\S+)")
TEMP_PREFIX = "envman-lock-"
_MAX_LINE = 4096  # characters of one stderr line kept
_KEEP_LINES = 200  # of uv's stderr: the first and the last this many lines
# A lock's uv run with no --timeout still ends: an index that trickles bytes (slow loris) beats uv's per-read
# timeout (UV_HTTP_TIMEOUT, 30 s) for ever. No real lock takes this long (torch + 100 packages: seconds).
DEFAULT_TIMEOUT = 1200.0
# what says which interpreter of this machine uv uses: never part of what a request means (lock/uv.py
# interpreter_args), so a lock made elsewhere is still current here
_LOCAL_ARGS = {"--python": 1, "--no-python-downloads": 0}


def index_of(url: str) -> str:
    """``https://pypi.org/simple/numpy/`` → ``https://pypi.org/simple``; a file URL → its host."""
    m = re.match(r"^(\w+://[^/]+)(/.*?/simple|/simple|/whl/[^/]+)?/", url)
    if not m:
        return url
    return m.group(1) + (m.group(2) or "")


def uv_binary() -> str:
    """The uv envman pins (a dependency: its version is part of what makes a lock reproducible), else the one
    on PATH."""
    try:
        from uv import find_uv_bin

        return str(find_uv_bin())
    except (ImportError, FileNotFoundError):
        exe = shutil.which("uv")
    if exe is None:
        raise ToolError("uv is not installed", hint="pip install envman installs it; or put uv on PATH")
    return exe


def uv_env(log_requests: bool = True) -> dict[str, str]:
    env = dict(os.environ)
    # TLS-intercepting proxies: uv reads SSL_CERT_FILE; reuse the bundle pip is told to use.
    cert = ca_bundle()
    if cert:
        env["SSL_CERT_FILE"] = cert
    if log_requests:
        # uv's HTTP client says which URL it asks (and nothing else): live progress, and the index to name
        # on a stall. It slows uv down, so only when a timeout or a terminal wants it.
        env["RUST_LOG"] = "uv_client::cached_client=debug"
    return env


@dataclass(frozen=True)
class UvRequest:
    """Everything one uv run depends on: the files written into its (temporary) directory and its
    arguments after the uv binary. Equal requests, same answer."""

    files: tuple[tuple[str, str], ...]
    args: tuple[str, ...]
    output: str = "pylock.toml"
    # environment uv needs beyond envman's own: index URLs with credentials (lock/uv.py index_options). Never
    # in a repr or a file: ``key()`` reads them without their credentials.
    env: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # no token in a repr or traceback

    @property
    def seed(self) -> str | None:
        """The previous pylock.toml uv starts from (its preferences), if any."""
        return next((t for n, t in self.files if n == self.output), None)

    def key(self) -> str:
        """What the request asks, as a digest: its inputs, arguments, index set and platform; not the seed
        (the previous answer), the interpreter of this machine, nor the credentials of an index."""
        args, skip = [], 0
        for a in self.args:
            if skip:
                skip -= 1
            elif a in _LOCAL_ARGS:
                skip = _LOCAL_ARGS[a]
            else:
                args.append(a)
        doc = {"files": [list(f) for f in self.files if f[0] != self.output], "args": args, "output": self.output,
               "env": [[k, redact_userinfo(v)] for k, v in self.env]}
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode("utf-8")).hexdigest()


def spawn(args: list[str], env: dict[str, str], cwd: str | None) -> subprocess.Popen:
    """uv in its own process group (a timeout or Ctrl-C kills it and its children), stderr piped."""
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd,
                            start_new_session=True, preexec_fn=_preexec if os.name == "posix" else None)


def _preexec() -> None:  # pragma: no cover - runs in the child
    # Linux: uv gets SIGKILL when envman dies, however it dies (kill -9 included)
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def kill_group(pid: int) -> None:
    """SIGKILL to uv's process group (uv and whatever it started), and to uv itself."""
    import signal

    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


class UvRun:
    """One running uv: ``wait()`` for it (raises ToolError), ``cancel()`` to end it and its group."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: str | None, timeout: float | None = None,
                 progress=None, request: UvRequest | None = None, owned_dir: str | None = None) -> None:
        self.request, self.cwd, self.owned_dir = request, cwd, owned_dir
        self.timeout, self.progress = (DEFAULT_TIMEOUT if timeout is None else timeout), progress
        self.started = time.monotonic()
        self.errors: list[str] = []  # the first _KEEP_LINES lines uv said
        self.tail: deque[str] = deque(maxlen=_KEEP_LINES)  # and its last ones
        self.dropped = 0
        self.last: str | None = None
        self.indexes = _indexes(args, env)
        try:
            self.proc = spawn(args, env, cwd)
        except OSError as exc:
            self.close()
            raise ToolError(f"cannot run uv: {exc}", hint="reinstall envman (it depends on uv)") from None
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        """uv's stderr, line by line, each cut at 4 KiB and only the first and last lines kept: 200 MB of it
        costs no memory (a line read whole could be all of it)."""
        assert self.proc.stderr is not None
        while line := self.proc.stderr.readline(_MAX_LINE):
            if len(line) == _MAX_LINE and not line.endswith("\n"):
                while (rest := self.proc.stderr.readline(_MAX_LINE)) and not rest.endswith("\n"):
                    pass  # the rest of an endless line, dropped
            m = _REQUEST.search(line)
            if m:
                url = m.group(1).rstrip("/")
                self.last = url
                if self.progress is not None:
                    self.progress(redact(f"uv: fetching {url.rsplit('/', 1)[-1]} from {index_of(url + '/')}"))
            elif not line.startswith("DEBUG") and line.strip():
                self._keep(line.rstrip("\n"))

    def _keep(self, line: str) -> None:
        if len(self.errors) < _KEEP_LINES:
            self.errors.append(line)
        else:
            self.dropped += len(self.tail) == self.tail.maxlen  # the oldest of the tail goes
            self.tail.append(line)

    @property
    def said(self) -> list[str]:
        """What uv said: its first lines and its last, with how many in between were dropped."""
        gap = [f"… ({self.dropped} more lines)"] if self.dropped else []
        return [*self.errors, *gap, *self.tail]

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
            lines = [_BAD_VALUE.sub(_unshown, ln) for ln in self.said if ln.strip()]
            message, hint = uv_failure(self.proc.returncode, lines, self.last, self.indexes)
            said = "uv says:\n" + "\n".join(lines[-15:]) if lines else ""
            raise ToolError(redact(message), hint=redact("\n".join(h for h in (hint, said) if h)))

    def _wait_ticking(self) -> None:
        """Wait for uv; every few seconds tell ``progress`` it still runs (a stalled network is then visible).

        It waits on the stderr reader, which ends when uv exits (its stderr closes): a thread join wakes at
        once, where ``Popen.wait(timeout)`` polls with growing sleeps."""
        while True:
            left = None if self.timeout is None else self.timeout - (time.monotonic() - self.started)
            # a uv that already answered is not timed out by a caller that came late to wait for it (a lock
            # may wait for the registry before it waits for uv)
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
        """uv's answer: a bounded regular file of UTF-8 text, else a ToolError (a uv that exits 0 with garbage
        or nothing is a tool's failure, not envman's bug)."""
        from envman.inputs import read_regular_text

        assert self.request is not None and self.cwd is not None
        hint = "run `envman lock --upgrade`; if it persists, run uv by hand to see what it writes (or reinstall envman)"
        try:
            return read_regular_text(Path(self.cwd) / self.request.output)
        except FileNotFoundError:
            raise ToolError("uv exited without writing its answer", hint=hint) from None
        except UnicodeDecodeError as exc:
            raise ToolError(f"uv's answer is not UTF-8 text (byte {exc.start})", hint=hint) from None
        except OSError as exc:
            raise ToolError(f"uv's answer cannot be read: {exc.strerror or exc}", hint=hint) from None

    def cancel(self) -> None:
        if getattr(self, "proc", None) is not None and self.proc.poll() is None:
            kill_group(self.proc.pid)
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


# an HTTP status uv got from an index (reqwest's words, and uv's own hint for a 401/403 it turned into "not found")
_STATUS = (re.compile(r"HTTP status (?:client|server) error \((?P<code>\d{3})(?P<reason>[^)]*)\) "
                      r"for url \((?P<url>\S+?)\)"),
           re.compile(r"index URL \((?P<url>\S+?)\) could not be queried due to a lack of valid authentication "
                      r"credentials \((?P<code>\d{3})(?P<reason>[^)]*)\)"))
_NO_SPACE = re.compile(r"No space left on device|os error 28\b|Disk quota exceeded|os error 122\b")
_NO_SPACE_PATH = re.compile(r"(?:write to|create|persist|rename|copy)[^`]*`(/[^`]+)`", re.I)
# clap's refusal of a URL uv cannot parse: a password with an unencoded / # ? @ reads as a port or a path
_BAD_VALUE = re.compile(r"invalid value '(.*?)' for '(--[\w-]+)[^']*': (.+)")


def _plain(line: str) -> str:
    """One line of uv's for an error line: no terminal escapes or control characters, at most 300 characters."""
    return re.sub(r"\x1b\[[0-9;]*[A-Za-z]|[\x00-\x1f\x7f]", "", line).strip()[:300]


def _unshown(m: re.Match) -> str:
    """clap echoes a value it cannot parse: a URL whose token could not be told from its host (no redaction
    finds its userinfo), so it is never shown."""
    return f"invalid value '…' for '{m.group(2)}': {m.group(3)}"


def uv_failure(code: int, lines: list[str], last: str | None, indexes: list[str]) -> tuple[str, str]:
    """(error, hint) for a uv that failed with exit ``code`` (negative: killed by that signal) after saying
    ``lines``: the cause by name — a signal, a URL uv cannot parse, an HTTP status, the network — before uv's
    first error line. Unredacted: the caller redacts both."""
    if code < 0:
        return _killed(-code, lines)
    bad = next((m for ln in lines if (m := _BAD_VALUE.search(ln))), None)
    if bad is not None:
        return (f"uv refuses the {bad.group(2)} it was given: {bad.group(3)}",
                "a user name or token in a URL must be percent-encoded: / # ? @ : as %2F %23 %3F %40 %3A")
    full = next((ln for ln in lines if _NO_SPACE.search(ln)), None)
    if full is not None:  # uv's cache or its temp folder: uv names the file it could not write
        where = _NO_SPACE_PATH.search(full)
        return (f"no space left on {os.path.dirname(where.group(1)) if where else 'the disk uv writes to'} (uv)",
                "free space in uv's cache (UV_CACHE_DIR; `uv cache clean`) and in TMPDIR, or point them at a disk with "
                "room, then re-run")
    status = http_status(lines)
    if status is not None:
        return status
    unreachable = network_failure(lines, last, indexes)
    if unreachable is not None:
        return unreachable
    first = next((ln for ln in lines if "No solution" in ln or "error" in ln.lower()), None)
    if first is not None:
        return f"uv could not resolve the requirements: {first.strip()}", ""
    if lines:  # no error line: what uv said last is the nearest thing to a cause
        return (f"uv failed (exit {code}): {_plain(lines[-1])}",
                "run the same `uv pip compile` by hand to see all it says; reinstall envman if uv itself is broken")
    return f"uv failed (exit {code}) without a word", "reinstall envman (it depends on uv), then re-run"


def _killed(sig: int, lines: list[str]) -> tuple[str, str]:
    import signal

    try:
        name = signal.Signals(sig).name
    except ValueError:
        name = f"signal {sig}"
    why = ("out of memory? (the kernel's OOM killer sends SIGKILL: see `dmesg`) " if sig == signal.SIGKILL else "")
    last_said = f"; the last thing it said: {_plain(lines[-1])}" if lines else ""
    return f"uv was killed by {name}{last_said}", f"{why}nothing was written; re-run envman lock"


def http_status(lines: list[str]) -> tuple[str, str] | None:
    """("the index pypi.internal answered HTTP 500 (Internal Server Error)", hint), or None."""
    m = next((m for ln in lines if (m := _STATUS[0].search(ln) or _STATUS[1].search(ln))), None)
    if m is None:
        return None
    code, reason, url = m["code"], m["reason"].strip(), m["url"]
    said = f"HTTP {code}" + (f" ({reason})" if reason else "")
    if code in ("401", "403"):
        return (f"the index {index_of(url + '/')} refused the credentials: {said}",
                "check the user name and token of that index (in UV_INDEX_URL / PIP_INDEX_URL, netrc or a keyring); "
                "a token must be percent-encoded in a URL")
    if code.startswith("5"):
        return (f"the index {index_of(url + '/')} failed: {said}",
                "the index server had an error: retry later, or ask whoever runs it")
    return (f"the index {index_of(url + '/')} answered {said}", "check the index URL (and that it serves that package)")


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
        if not e.name.startswith(TEMP_PREFIX):
            continue
        try:
            st = e.stat(follow_symlinks=False)
        except OSError:
            continue
        if not e.is_dir(follow_symlinks=False) or st.st_uid != os.getuid() or now - st.st_mtime < _ORPHAN_AGE:
            continue
        m = re.match(re.escape(TEMP_PREFIX) + r"(\d+)-", e.name)
        if m and pid_alive(int(m.group(1))):
            continue
        shutil.rmtree(e.path, ignore_errors=True)
        removed.append(e.name)
    return removed


def uv_answer(binary: str, request: UvRequest, timeout: float | None = None, progress=None,
              while_waiting=None) -> str:
    """uv's answer to ``request`` (its output file's text); ToolError when uv fails. ``while_waiting``: work to do
    while uv waits on the network."""
    run = start_request(binary, request, timeout, progress)
    try:
        if while_waiting is not None:
            while_waiting()
        run.wait()
        return run.output()
    finally:
        run.cancel()


def start_request(binary: str, request: UvRequest, timeout: float | None = None, progress=None) -> UvRun:
    """uv on ``request``, in a fresh private folder (``envman-lock-<pid>-…``, mode 0700) holding its files."""
    clean_orphans()
    td = None
    try:
        td = tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{os.getpid()}-")
        for name, text in request.files:
            Path(td, name).write_text(text, encoding="utf-8")
    except OSError as exc:  # a full or missing TMPDIR is the machine's, not a bug: one line that says where
        if td is not None:
            shutil.rmtree(td, ignore_errors=True)
        where = td or tempfile.gettempdir()
        raise ToolError(f"cannot write uv's request into {os.path.dirname(where) if td else where}: "
                        f"{exc.strerror or exc}",
                        hint="free space there, or point TMPDIR at a folder with room (a lock needs a few KB)") from None
    log = timeout is not None or bool(getattr(progress, "live", False))
    return UvRun([binary, *request.args], {**uv_env(log), **dict(request.env)}, td, timeout, progress, request, td)
