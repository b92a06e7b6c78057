"""How a lock gets its Python locks from uv, and works while uv runs.

A re-lock of unchanged inputs is the usual `envman lock`, and uv then answers with its seed (the last
pylock.toml) byte for byte. So a ``PythonLocker`` that may guess answers the first job that has a seed
with that seed while uv still runs: the use case (app/generate.py) builds and checks every file from
it, and once uv has answered (``settle``) the guess stands when the answer is the seed; otherwise the
use case runs once more on the real answer. A guess writes nothing, starts no second uv run
(``needs_real_answer``) and reports no error: whatever it meets is met again on the real answer.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from envman.lock.uv import LockResult, PythonLockJob
from envman.lock.uvproc import UvRun, remember


class Guessing(Exception):
    """A step that must not run on a guess was reached (a network step, a second uv run)."""


class PythonLocker:
    """Answers ``PythonLockJob``s with uv: adopting ``speculative`` (uv started on the last lock's request)
    when it runs the job's request, else starting uv; ``guess``: answer a seeded job with its seed first."""

    def __init__(self, speculative: UvRun | None = None, progress=None, *, guess: bool = False,
                 while_waiting: Callable[[], None] | None = None, remember_for: Path | None = None) -> None:
        """``remember_for``: the project whose next `envman lock` starts uv early on this locker's request."""
        self.speculative, self.progress, self.guess, self.while_waiting = speculative, progress, guess, while_waiting
        self.remember_for = remember_for
        self.job: PythonLockJob | None = None
        self.run: UvRun | None = None
        self.answer: str | None = None  # uv's pylock.toml for ``job``, once it has answered
        self.guessing = False  # the job was answered with its seed; uv's own answer is not yet known

    def __call__(self, job: PythonLockJob) -> LockResult:
        if self.job is None or job.request != self.job.request:
            self._start(job)
        seed = job.request.seed
        if self.answer is None and self.guess and seed is not None:
            self.guess, self.guessing = False, True  # one guess per locker
            return job.finish(seed)
        if self.answer is None:
            if self.while_waiting is not None:
                self.while_waiting()  # uv waits on the network: use the time (imports, template compile)
            assert self.run is not None
            self.answer = job.answer(self.run)
        return job.finish(self.answer)

    def _start(self, job: PythonLockJob) -> None:
        self.close()
        self.job, self.answer = job, None
        self.run = job.start(self.speculative, self.progress)
        self.speculative = None
        if self.remember_for is not None:
            remember(self.remember_for, job.request)  # while uv runs: the next lock starts uv with it at once

    def needs_real_answer(self) -> None:
        """Called before a step that must not run on a guess: raises ``Guessing`` while guessing."""
        if self.guessing:
            raise Guessing

    def settle(self) -> bool:
        """After a pass that may have guessed: wait for uv's answer. True when the pass stands (no guess was
        made, or uv answered the guess byte for byte); False: run the pass again, on the real answer."""
        if not self.guessing:
            return True
        self.guessing = False
        assert self.job is not None and self.run is not None
        self.answer = self.job.answer(self.run)
        return self.answer == self.job.request.seed

    def close(self) -> None:
        """End uv (when it still runs) and remove its folder."""
        if self.run is not None:
            self.run.cancel()
            self.run = None
