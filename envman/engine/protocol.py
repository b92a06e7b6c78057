"""The engine seam: what envman's use cases (app/build.py, app/smoke.py) ask of a container engine.

``envman.engine.docker.Engine`` is the real one (docker-py + a BuildKit client); ``tests/fakes.py`` holds a
fake for offline tests of the build orchestration. Only the methods the use cases call are here: anything
else the real engine offers (inspect_image, save_image …) stays an implementation detail of docker.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from envman.engine.buildkit import BuildClient, BuildResult


class ContainerEngine(Protocol):
    """A Docker-compatible engine. Failures raise ``envman.engine.errors.EngineError`` (exit 4);
    ``run`` raises ``RunTimeout`` when the container outlives ``timeout``."""

    @property
    def build_client(self) -> BuildClient: ...

    def ping(self) -> str:
        """The engine's version; EngineError when none answers."""
        ...

    def image_exists(self, ref: str) -> bool: ...

    def tags_of(self, repository: str) -> list[str]:
        """The tags ``repository`` has on the engine (a killed build's candidate tag is found this way)."""
        ...

    def run_containers(self) -> list[tuple[str, str]]:
        """(name, owner label ``<host>-<pid>-<start>``) of every container ``run`` started that is still there."""
        ...

    def remove_container(self, name: str) -> None: ...

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
    ) -> BuildResult: ...

    def tag(self, src: str, dst: str) -> None: ...

    def remove_image(self, ref: str, force: bool = False) -> bool:
        """True if removed, False if there was no such image."""
        ...

    def push(self, ref: str) -> str:
        """Push ``ref``; the manifest digest the registry reported."""
        ...

    def registry_digest(self, ref: str) -> str | None:
        """The digest a registry holds for ``ref``; None when it has no such tag or does not answer."""
        ...

    def import_dir(self, directory: Path | str, ref: str) -> str:
        """A directory's files as a one-layer image ``ref`` (the offline build's wheelhouse)."""
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
    ) -> tuple[int, str, str]:
        """(exit code, stdout, stderr) of ``command`` in a new container, removed afterwards."""
        ...
