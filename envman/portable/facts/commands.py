"""Running a program or reading a file for a probe: bounded in time and size, never raising."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass


@dataclass(frozen=True)
class Ran:
    rc: int | None  # None: it did not run to completion
    out: str
    err: str
    error: str | None = None  # why it did not run (not found, timed out, …)

    @property
    def ok(self) -> bool:
        return self.rc == 0

    @property
    def text(self) -> str:
        return (self.out + ("\n" if self.out and self.err else "") + self.err).strip()


def run_command(argv: list[str], timeout: float = 5.0, env: dict[str, str] | None = None) -> Ran:
    try:
        p = subprocess.run(
            argv, capture_output=True, text=True, errors="replace", timeout=timeout, check=False, env=env,
            stdin=subprocess.DEVNULL,
        )
    except FileNotFoundError:
        return Ran(None, "", "", f"{argv[0]}: not found")
    except subprocess.TimeoutExpired:
        return Ran(None, "", "", f"{argv[0]}: timed out after {timeout:g} s")
    except OSError as exc:
        return Ran(None, "", "", f"{argv[0]}: {exc.strerror or exc}")
    return Ran(p.returncode, p.stdout, p.stderr)


def read_text(path: str, limit: int = 1 << 20) -> str | None:
    """The file's text (at most ``limit`` bytes), or None when it cannot be read or is not a regular file (a
    FIFO in a project file's place would block the probe for ever: opened without blocking, then checked)."""
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read(limit).decode("utf-8", "replace")
    except OSError:
        return None
    finally:
        os.close(fd)
