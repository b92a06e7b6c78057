"""The engine seam: what envman's use cases (app/build.py, app/smoke.py, app/repro.py) ask of a container engine.

``envman.engine.docker.Engine`` (docker-py + a BuildKit client) and ``envman.engine.daemonless.DaemonlessEngine``
(podman or buildah, no daemon) are the real ones, ``envman.engine.select`` picks one; ``tests/fakes.py`` holds a
fake for offline tests of the build orchestration. Only the methods the use cases call are here: anything
else the real engines offer stays an implementation detail of theirs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

from envman.engine.buildkit import BuildResult

RUN_LABEL = "org.envman.run"  # on every container `run` starts: `docker ps -a --filter label=…` finds leftovers
OWNER_LABEL = "org.envman.run.owner"  # <host>-<pid>-<start> of the run that started it (envman/process.py Owner)


def volume_specs(binds: Mapping[str | Path, str] | None) -> list[str]:
    """``run``'s binds as ``HOST:TARGET:MODE``: read-only unless the container path ends in ``:rw``."""
    return [f"{Path(host).resolve()}:{target.removesuffix(':rw').removesuffix(':ro')}:"
            f"{'rw' if target.endswith(':rw') else 'ro'}" for host, target in (binds or {}).items()]


@dataclass(frozen=True)
class ReproSupport:
    """Whether two builds of the same inputs can give the same image on this engine: ``clamps`` when the
    image's dates (config, history) and its layers' file times are all set from SOURCE_DATE_EPOCH; ``how``
    says by what means, or why not (naming the version that would)."""

    clamps: bool
    how: str


class ContainerEngine(Protocol):
    """A Docker-compatible engine. Failures raise ``envman.engine.errors.EngineError`` (exit 4);
    ``run`` raises ``RunTimeout`` when the container outlives ``timeout``."""

    @property
    def name(self) -> str:
        """"docker", "podman" or "buildah"."""
        ...

    def ping(self) -> str:
        """The engine's version; EngineError when none answers."""
        ...

    def describe(self) -> str:
        """One line for the user: the engine, its version and how it builds."""
        ...

    def repro_support(self) -> ReproSupport: ...

    def image_exists(self, ref: str) -> bool: ...

    def tags_of(self, repository: str) -> list[str]:
        """The tags ``repository`` has on the engine (a killed build's candidate tag is found this way)."""
        ...

    def run_containers(self) -> list[tuple[str, str]]:
        """(name, owner label ``<host>-<pid>-<start>``) of every container ``run`` started that is still there."""
        ...

    def remove_container(self, name: str) -> None: ...

    def image_id(self, ref: str) -> str | None:
        """The image's ID (``sha256:`` + the digest of its config, which names every layer's content)."""
        ...

    def diff_ids(self, ref: str) -> list[str] | None:
        """The digests of the image's uncompressed layers, base first; None without such an image."""
        ...

    def provide_base(self, ref: str) -> str | None:
        """Make a base image a build needs available where the engine can without a registry; a line saying
        what was done, or None when nothing was needed or possible (the build then pulls it)."""
        ...

    def build(
        self,
        context_dir: Path | str,
        *,
        dockerfile: Path | str | None = None,
        tags: Sequence[str] = (),
        build_args: Mapping[str, str] | None = None,
        secrets: Mapping[str, Path | str] | None = None,
        progress: str | None = None,
        on_output: Callable[[str], None] | None = None,
        platform: str | None = None,  # "linux/arm64": build for that platform (None: the engine's own)
        no_cache: bool = False,
        source_date_epoch: int | None = None,  # the dates in the image, where the engine can clamp them
    ) -> BuildResult: ...

    def tag(self, src: str, dst: str) -> None: ...

    def remove_image(self, ref: str, force: bool = False) -> bool:
        """True if removed, False if there was no such image."""
        ...

    def push(self, ref: str, progress: Callable[[str], None] | None = None) -> str:
        """Push ``ref``; the manifest digest the registry reported. ``progress`` gets a line now and then."""
        ...

    def registry_digest(self, ref: str) -> str | None:
        """The digest a registry holds for ``ref``; None when it has no such tag or does not answer."""
        ...

    def import_dir(self, directory: Path | str, ref: str) -> str:
        """Make ``ref`` name a directory's files in later builds (``RUN --mount=type=bind,from=REF``, the
        offline build's wheelhouse): a one-layer image (docker), or a named build context (podman, buildah)."""
        ...

    def export_image(self, ref: str) -> AbstractContextManager[IO[bytes]]:
        """The image as a ``docker save`` stream (uncompressed layer tars and the config), to read once."""
        ...

    def has_nvidia_runtime(self) -> bool: ...

    def run(
        self,
        image: str,
        command: Sequence[str],
        *,
        gpus: bool = False,
        env: Mapping[str, str] | None = None,
        binds: Mapping[str | Path, str] | None = None,
        timeout: float | None = 600,
        network: bool = True,
        labels: Mapping[str, str] | None = None,
        user: str | None = None,
    ) -> tuple[int, str, str]:
        """(exit code, stdout, stderr) of ``command`` in a new container, removed in every case (exit, timeout,
        Ctrl-C, SIGTERM); ``binds``: host path → container path, read-only unless it ends in ``:rw``; ``labels``
        on the container (its owner: docs/security.md "Builds at once"), ``user`` to run as."""
        ...
