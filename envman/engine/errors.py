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


# an engine operation that failed for a reason envman cannot name better: where to look next
ENGINE_HINT = ("the engine's own words are above; check it answers (`docker info`, `podman info` or `buildah info`), "
               "then re-run (ENVMAN_DEBUG=1 shows the traceback)")
NOT_FOUND_HINT = "build it first (`envman build`) or pull it, then re-run; `docker images` lists what the engine has"


class EngineError(EnvmanError):
    """No engine, no BuildKit client, or an engine operation that failed. Never without a hint: a failure no
    call site explains gets ``ENGINE_HINT``."""

    exit_code = EXIT_ENGINE

    def __init__(self, message: str, hint: str | None = None, exit_code: int | None = None):
        super().__init__(message, hint=hint or ENGINE_HINT, exit_code=exit_code)


class BuildError(EngineError):
    """``docker build`` exited non-zero; ``output_tail`` holds its last lines (empty in tty mode)."""

    def __init__(self, message: str, output_tail: Sequence[str] = (), hint: str | None = None):
        super().__init__(message, hint=hint)
        self.output_tail = list(output_tail)


class RunTimeout(EngineError):
    """A container outlived ``run``'s timeout; it was removed. What it printed until then is kept."""

    def __init__(self, message: str, stdout: str = "", stderr: str = ""):
        super().__init__(message, hint="run the image by hand (`docker run --rm -it IMAGE bash`) to see where it stops; "
                                       "a slow first GPU initialisation can take minutes")
        self.stdout, self.stderr = stdout, stderr

