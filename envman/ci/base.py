"""CI systems as backends: each knows its pipeline file, how it builds the pipeline from the locks, what
it calls a runner selector, and what the user must set up by hand. To add a CI system: a module with its
pipeline function and one ``CiBackend`` line in ``BACKENDS`` (envman/ci/__init__.py); `envman ci NAME`,
`envman ci check` and the re-lock reminder pick it up from there."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from envman.ci.project import CiOptions, CiProject


@dataclass(frozen=True)
class CiBackend:
    name: str  # the `envman ci NAME` subcommand
    file: str  # where its pipeline lives in the repository
    runner_word: str  # what the system calls the runner selector in help and hints: LABEL, TAG
    pipeline: Callable[[CiProject, CiOptions], dict]
    setup_notes: Callable[[CiOptions, bool], list[str]]  # (options, any GPU runner) -> what to set up by hand

    @property
    def command(self) -> str:
        return f"envman ci {self.name}"
