"""What can go wrong with the engine; all exit 4 (EXIT_ENGINE) but an interruption."""

from __future__ import annotations

from collections.abc import Sequence

from envman.errors import EXIT_ENGINE, EnvmanError

START_HINT = (
    "start one: `sudo systemctl start docker` (systemd) or `sudo dockerd >/tmp/dockerd.log 2>&1 &`; "
    "without Docker installed: `sudo apt-get install -y docker.io`; or set DOCKER_HOST to an engine that runs"
)
CLIENT_HINT = (
    "install the buildx plugin (`apt-get install docker-buildx` or docker-buildx-plugin), or Debian's docker.io "
    "package, whose 20.10 client has BuildKit built in; or set ENVMAN_DOCKER to a client that can"
)


class EngineError(EnvmanError):
    """No engine, no BuildKit client, or an engine operation that failed."""

    exit_code = EXIT_ENGINE


class BuildError(EngineError):
    """``docker build`` exited non-zero; ``output_tail`` holds its last lines (empty in tty mode)."""

    def __init__(self, message: str, output_tail: Sequence[str] = (), hint: str | None = None):
        super().__init__(message, hint=hint)
        self.output_tail = list(output_tail)


class RunTimeout(EngineError):
    """A container outlived ``run``'s timeout; it was removed. What it printed until then is kept."""

    def __init__(self, message: str, stdout: str = "", stderr: str = ""):
        super().__init__(message)
        self.stdout, self.stderr = stdout, stderr

