"""One error root for everything a user can get wrong, one subclass per kind of failure.

The CLI is the only place that catches these, prints ``error:`` and ``hint:`` lines and exits with
``exit_code``. Exit codes are documented in docs/commands.md and are part of the CLI contract. SpecError and
LockError are UsageErrors, so ``except UsageError`` catches them; the engine's EngineError is in engine/errors.py.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_USER = 1  # bad input, bad config, a check that failed (lock --check, doctor errors)
EXIT_USAGE = 2  # the command line itself does not parse (unknown option …): click's convention
EXIT_UNRESOLVABLE = 3  # no stack satisfies every constraint
EXIT_ENGINE = 4  # no Docker engine / BuildKit client, a build that failed
EXIT_SMOKE = 5  # the smoke test failed on the built image
EXIT_SMOKE_NO_GPU = 6  # smoke passed its non-GPU checks but no GPU was visible: neither pass nor fail
EXIT_DATA = 7  # envman's own matrices are corrupt (a bug or a bad local edit)
EXIT_DOES_NOT_FIT = 8  # envman fit: the run does not fit a --target GPU (distinct from bad input, exit 2)
EXIT_INTERNAL = 70  # a bug in envman (EX_SOFTWARE)


class EnvmanError(Exception):
    """A failure to show the user as one ``error:`` line plus an optional ``hint:`` line."""

    exit_code = EXIT_USER

    def __init__(self, message: str, hint: str | None = None, exit_code: int | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        if exit_code is not None:
            self.exit_code = exit_code


class UsageError(EnvmanError):
    """A command-line value or configuration value that cannot be used."""


class SpecError(UsageError):
    """envman.yaml (or [tool.envman]) or another project input that cannot be used."""


class LockError(UsageError):
    """An envman.lock or requirements lock that is missing, unreadable, malformed or stale."""


class ToolError(EnvmanError):
    """A tool envman runs, or a service it asks, failed: uv, pip, the network, a registry.

    Exit 1 like a user error: no exit code of docs/commands.md fits, and a new one would have to mean both
    "retry later" (a network outage) and "fix your requirements" (uv finds no solution)."""


class ReproError(EnvmanError):
    """Two builds of one lock gave two images, or an image is not the one its lock builds (exit 1: a check that
    failed, like `lock --check`); the message names both digests, the hint what differs."""


class InternalError(EnvmanError):
    """A bug in envman that envman noticed itself (output of a tool it did not expect, say): exit 70."""

    exit_code = EXIT_INTERNAL


class DataError(EnvmanError):
    """envman's own shipped data (the compatibility matrices) is corrupt: a bug or a bad local edit."""

    exit_code = EXIT_DATA


class MatrixError(DataError):
    """The compatibility data under matrices/ is malformed; ``problems`` lists every one."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        first = problems[0] if problems else "invalid matrix"
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        super().__init__(first + more, hint="fix the matrix file; every problem:\n  " + "\n  ".join(problems))


class UnknownGpuError(UsageError):
    """A target GPU name that no entry or alias of gpus.yaml matches."""


class ResolutionError(EnvmanError):
    """No stack satisfies every constraint. Carries the conflicts and the nearest alternatives."""

    exit_code = EXIT_UNRESOLVABLE

    def __init__(self, message: str, conflicts: list[str], alternatives: list[dict], hint: str | None = None):
        super().__init__(message, hint=hint)
        self.conflicts = list(conflicts)
        self.alternatives = list(alternatives)
