"""Interruptions while envman holds a container or a build client: cleanup must run, and finish. And who owns
what a run leaves (a tag, a container, a staging folder), so that the next run removes only what a killed run
provably abandoned."""

from __future__ import annotations

import hashlib
import os
import re
import signal
import socket
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived while envman held a container, a build client or uv; handled like Ctrl-C."""


@contextmanager
def sigterm_raises() -> Iterator[None]:
    """Turn SIGTERM into ``Terminated`` so ``finally`` blocks run (signals only work in the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum, frame):
        raise Terminated(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def signals_deferred() -> Iterator[None]:
    """Cleanup must finish: a second Ctrl-C/SIGTERM waits until it has (then acts as usual)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    sigs = {signal.SIGINT, signal.SIGTERM}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _kill_group(proc: subprocess.Popen, grace: float = 5.0) -> None:
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, grace)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def run_teed(argv: Sequence[str], env: Mapping[str, str], *, on_output: Callable[[str], None] | None,
             tty: bool = False, tail_lines: int = 40) -> tuple[int, list[str]]:
    """A tool (a build client, pip) in its own process group: on a tty it owns the terminal, else each output line
    goes to ``on_output`` redacted (pip prints its index URLs, a RUN step may echo a token); its exit code and last
    lines. Any exception here (Ctrl-C, Terminated) kills the whole group first."""
    from envman.redact import TOKEN, redact

    tail: deque[str] = deque(maxlen=tail_lines)
    with sigterm_raises():
        proc = subprocess.Popen(
            list(argv), env={**os.environ, **env}, start_new_session=True, stdin=subprocess.DEVNULL,
            stdout=None if tty else subprocess.PIPE, stderr=None if tty else subprocess.STDOUT,
            text=not tty, errors="replace" if not tty else None, bufsize=1 if not tty else -1,
        )
        try:
            if not tty:
                assert proc.stdout is not None
                for line in proc.stdout:
                    line = TOKEN.sub("***", redact(line.rstrip()))
                    tail.append(line)
                    if on_output:
                        on_output(line)
            rc = proc.wait()
        except BaseException:
            with signals_deferred():
                _kill_group(proc)
            raise
        finally:
            if proc.stdout:
                proc.stdout.close()
    return rc, list(tail)


STALE_AFTER = 24 * 3600.0  # seconds: no build or smoke test runs this long


def host_id() -> str:
    """This machine, in 8 hex digits (a tag may not hold a host name's characters)."""
    return hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # another user's live process, or a number no process has: treated as alive
    return True


@dataclass(frozen=True)
class Owner:
    """Who made a tag, a container or a folder: a machine, a process, when."""

    host: str
    pid: int
    started: int

    @classmethod
    def me(cls) -> Owner:
        return cls(host_id(), os.getpid(), int(time.time()))

    @property
    def label(self) -> str:
        return f"{self.host}-{self.pid}-{self.started}"

    @classmethod
    def parse(cls, text: str) -> Owner | None:
        m = re.fullmatch(r"([0-9a-f]{8})-(\d+)-(\d+)", text or "")
        return cls(m.group(1), int(m.group(2)), int(m.group(3))) if m else None

    def stale(self, now: float | None = None) -> bool:
        """Provably abandoned: this machine's and its process gone, or older than STALE_AFTER."""
        now = time.time() if now is None else now
        if now - self.started > STALE_AFTER:
            return True
        return self.host == host_id() and self.pid != os.getpid() and not pid_alive(self.pid)
