"""The Docker engine: the docker SDK (docker-py) pings, inspects, runs, tags and pushes; builds go through a
BuildKit-capable docker client (buildkit.py: the SDK cannot drive BuildKit).

Interruptions: ``run`` always removes its container and ``build`` kills its client's whole process group,
on Ctrl-C and on SIGTERM alike (a SIGTERM handler that raises ``Terminated`` is installed around both).
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any

from envman.engine.buildkit import (
    BuildClient,
    BuildResult,
    build_command,
    buildkit_version,
    can_rewrite_timestamps,
    default_progress,
    find_build_client,
    run_build,
)
from envman.engine.errors import NOT_FOUND_HINT, START_HINT, EngineError, RunTimeout
from envman.engine.protocol import OWNER_LABEL, RUN_LABEL, ReproSupport, volume_specs
from envman.process import Owner, signals_deferred, sigterm_raises


class Engine:
    """A Docker engine: the SDK for everything but builds, a BuildKit-capable CLI client for builds."""

    name = "docker"

    def __init__(self, client: Any = None, *, build_client: BuildClient | None = None, timeout: int = 120):
        self._client = client
        self._build_client = build_client
        self._timeout = timeout
        self._repro: ReproSupport | None = None

    # -- connection
    @property
    def client(self) -> Any:
        if self._client is None:
            import docker

            try:
                self._client = docker.from_env(version="auto", timeout=self._timeout)
            except docker.errors.DockerException as exc:
                raise self._gone(None, exc) from None
        return self._client

    def ping(self) -> str:
        import docker
        import requests

        try:
            self.client.ping()
            return str(self.client.version().get("Version", "?"))
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise self._gone(None, exc) from None

    @property
    def build_client(self) -> BuildClient:
        if self._build_client is None:
            self._build_client = find_build_client()
        return self._build_client

    @staticmethod
    def _gone(what: str | None, exc: BaseException) -> EngineError:
        """No engine answers (``what`` None), or it stopped answering in the middle of ``what`` (restarted,
        killed, its socket gone)."""
        reason = str(exc).splitlines()[0][:300 if what is None else 200] if str(exc) else type(exc).__name__
        if what is None:
            where = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
            return EngineError(f"no Docker engine answers at {where} ({reason})", hint=START_HINT)
        return EngineError(f"the Docker engine stopped answering while {what} ({reason})", hint=START_HINT)

    def _ask(self, what: str, call: Callable[[], Any], refused: str | None = None, missing: Any = None) -> Any:
        """``call()`` on the engine. With ``refused`` (what was asked), an object the engine lacks (404) gives
        ``missing`` and another refusal an EngineError; an engine that stops answering, one naming ``what``."""
        import docker
        import requests

        try:
            return call()
        except docker.errors.APIError as exc:
            if refused is None:
                raise self._gone(what, exc) from None
            if isinstance(exc, docker.errors.ImageNotFound) or exc.status_code == 404:
                return missing
            raise EngineError(f"cannot {refused}: {exc.explanation or exc}") from None
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise self._gone(what, exc) from None

    def describe(self) -> str:
        return f"Docker {self.ping()}; builds through {self.build_client.describe()}"

    def repro_support(self) -> ReproSupport:
        if self._repro is None:
            client = self.build_client
            version = buildkit_version(client)
            if can_rewrite_timestamps(client, version):
                self._repro = ReproSupport(True, f"BuildKit {version}: SOURCE_DATE_EPOCH and rewrite-timestamp=true")
            elif client.kind == "buildx":
                self._repro = ReproSupport(False, f"buildx builds with BuildKit {version or '(version not reported)'}, "
                                                  "which cannot set layer file times (rewrite-timestamp needs BuildKit 0.13+)")
            else:
                self._repro = ReproSupport(False, f"{client.describe()} builds with the daemon's own BuildKit, which "
                                                  "takes no exporter options: layer file times are the build's clock "
                                                  "(rewrite-timestamp needs buildx with BuildKit 0.13+)")
        return self._repro

    def provide_base(self, ref: str) -> str | None:
        return None  # the build pulls what the daemon lacks

    # -- images
    def tags_of(self, repository: str) -> list[str]:
        images = self._ask(f"listing the images of {repository}", lambda: self.client.api.images(name=repository))
        return sorted(t.rsplit(":", 1)[1] for img in images for t in (img.get("RepoTags") or [])
                      if t.rsplit(":", 1)[0] == repository)

    def run_containers(self) -> list[tuple[str, str]]:
        found = self._ask("listing envman's containers",
                          lambda: self.client.api.containers(all=True, filters={"label": RUN_LABEL}))
        return [((c.get("Names") or ["?"])[0].lstrip("/"), (c.get("Labels") or {}).get(OWNER_LABEL, "")) for c in found]

    def inspect_image(self, ref: str) -> dict | None:
        return self._ask(f"inspecting {ref}", lambda: self.client.api.inspect_image(ref), f"inspect image {ref}")

    def image_exists(self, ref: str) -> bool:
        return self.inspect_image(ref) is not None

    def image_id(self, ref: str) -> str | None:
        info = self.inspect_image(ref)
        return info["Id"] if info else None

    def diff_ids(self, ref: str) -> list[str] | None:
        info = self.inspect_image(ref)
        return list((info.get("RootFS") or {}).get("Layers") or []) if info else None

    def tag(self, src: str, dst: str) -> None:
        from docker.utils import parse_repository_tag

        repo, tag = parse_repository_tag(dst)
        if not self.image_exists(src):
            raise EngineError(f"cannot tag {src} as {dst}: no such image")
        done = self._ask(f"tagging {dst}", lambda: self.client.api.tag(src, repo, tag or "latest", force=True))
        if not done:
            raise EngineError(f"the engine refused to tag {src} as {dst}")

    def push(self, ref: str, progress: Callable[[str], None] | None = None) -> str:
        import docker
        import requests
        from docker.utils import parse_repository_tag

        from envman.engine.pushprogress import PushTally

        repo, tag = parse_repository_tag(ref)
        digest = None
        tally = PushTally(ref, progress) if progress is not None else None
        try:
            for chunk in self.client.api.push(repo, tag=tag or "latest", stream=True, decode=True):
                if tally is not None and isinstance(chunk, dict):
                    tally.feed(chunk)
                if chunk.get("error"):
                    raise EngineError(f"push of {ref} failed: {chunk['error']}",
                                      hint="log in with `docker login REGISTRY` if the registry needs credentials")
                digest = (chunk.get("aux") or {}).get("Digest") or digest
        except docker.errors.APIError as exc:
            raise EngineError(f"push of {ref} failed: {exc.explanation or exc}") from None
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise self._gone(f"pushing {ref}", exc) from None
        if not digest:
            raise EngineError(f"push of {ref} reported no digest",
                              hint="the registry took the push without naming its manifest: check the tag there "
                                   "(`docker buildx imagetools inspect REF`) and push again")
        return digest

    def remove_image(self, ref: str, force: bool = False) -> bool:
        def remove() -> bool:
            self.client.api.remove_image(ref, force=force)
            return True

        return self._ask(f"removing {ref}", remove, f"remove image {ref}", False)

    @contextmanager
    def export_image(self, ref: str) -> Iterator[IO[bytes]]:
        """``docker save`` as a stream (the SDK's chunks behind a file object)."""
        import io

        chunks = iter(self.client.api.get_image(ref))

        class _Raw(io.RawIOBase):
            rest = b""

            def readable(self) -> bool:
                return True

            def readinto(self, buf: Any) -> int:
                while not self.rest:
                    try:
                        self.rest = next(chunks)
                    except StopIteration:
                        return 0
                n = min(len(buf), len(self.rest))
                buf[:n], self.rest = self.rest[:n], self.rest[n:]
                return n

        with io.BufferedReader(_Raw(), buffer_size=1 << 20) as stream:
            yield stream

    def import_dir(self, directory: Path | str, ref: str) -> str:
        """A directory's files as a one-layer image (``docker import``), streamed as a tar in sorted order.

        envman uses it to bind-mount a wheelhouse into an offline build (``RUN --mount=type=bind,from=REF``)
        with clients that cannot take a second build context: the wheels never become a layer of the image
        being built."""
        import subprocess
        import tarfile
        directory = Path(directory)
        client = self.build_client
        proc = subprocess.Popen([client.path, "import", "-", ref], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None  # all three piped
        errors: list[BaseException] = []
        try:
            with sigterm_raises():
                try:  # docker import prints only the image id: no risk of filling its pipes meanwhile
                    with tarfile.open(fileobj=proc.stdin, mode="w|", format=tarfile.PAX_FORMAT) as tar:
                        for p in sorted(directory.rglob("*")):
                            if p.is_file() and not p.name.startswith("."):
                                info = tar.gettarinfo(str(p), arcname=str(p.relative_to(directory)))
                                info.uid = info.gid = 0
                                info.uname = info.gname = "root"
                                info.mtime = 0
                                info.mode = 0o644
                                with open(p, "rb") as fh:
                                    tar.addfile(info, fh)
                except BaseException as exc:  # noqa: BLE001 - reported below
                    errors.append(exc)
                finally:
                    with suppress(OSError):
                        proc.stdin.close()
                out, err = proc.stdout.read(), proc.stderr.read()
                proc.wait()
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        if proc.returncode != 0 or errors:
            why = err.decode(errors="replace").strip() or (str(errors[0]) if errors else f"exit {proc.returncode}")
            raise EngineError(f"cannot import {directory} as {ref}: {why}")
        return out.decode().strip()

    def registry_digest(self, ref: str) -> str | None:
        try:
            data = self.client.api.inspect_distribution(ref)
        except Exception:
            return None
        return (data.get("Descriptor") or {}).get("digest")

    # -- GPUs
    def has_nvidia_runtime(self) -> bool:
        """Can this engine give containers GPUs (``--gpus``)? The nvidia runtime registered, or, for a
        local engine, the NVIDIA container toolkit's hook that dockerd calls for device requests."""
        try:
            info = self.client.info()
        except Exception:
            return False
        if "nvidia" in (info.get("Runtimes") or {}):
            return True
        local = (os.environ.get("DOCKER_HOST") or "unix://").startswith("unix://")
        return local and any(shutil.which(b) for b in ("nvidia-container-runtime-hook", "nvidia-container-cli"))

    # -- containers
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
        import docker
        import requests

        name = f"envman-run-{uuid.uuid4().hex[:12]}"
        kwargs: dict[str, Any] = dict(
            command=list(command), name=name, environment=dict(env or {}), volumes=volume_specs(binds), detach=True,
            labels={RUN_LABEL: "1", OWNER_LABEL: Owner.me().label, **(labels or {})}, user=user,
        )
        if gpus:
            kwargs["device_requests"] = [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])]
        if not network:
            kwargs["network_mode"] = "none"
        with sigterm_raises():
            try:
                container = self.client.containers.create(image, **kwargs)
                container.start()
                started = time.monotonic()
                try:
                    # None would fall back to the SDK's 120 s HTTP timeout, not "no limit"
                    rc = int(container.wait(timeout=timeout if timeout is not None else 10**7)["StatusCode"])
                except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError) as exc:
                    if timeout is None or time.monotonic() - started < timeout * 0.9:  # not a timeout: it went away
                        raise self._gone(f"the container of {image} ran", exc) from None
                    out, err = self._logs(container)
                    raise RunTimeout(f"container of {image} ran past {timeout:g} s and was removed", out, err) from None
                out, err = self._logs(container)
                return rc, out, err
            except docker.errors.ImageNotFound:
                raise EngineError(f"image {image} not found on the engine", hint=NOT_FOUND_HINT) from None
            except docker.errors.APIError as exc:
                raise EngineError(f"cannot run {image}: {exc.explanation or exc}") from None
            except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
                raise self._gone(f"running {image}", exc) from None
            finally:
                with signals_deferred():
                    try:
                        self.remove_container(name)
                    except (docker.errors.DockerException, requests.exceptions.RequestException):
                        pass  # an engine that went away: its next run's sweep removes the container

    @staticmethod
    def _logs(container: Any) -> tuple[str, str]:
        out = container.logs(stdout=True, stderr=False) or b""
        err = container.logs(stdout=False, stderr=True) or b""
        return out.decode("utf-8", "replace"), err.decode("utf-8", "replace")

    def remove_container(self, name: str) -> None:
        import docker

        try:
            self.client.api.remove_container(name, force=True, v=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            if exc.status_code not in (404, 409):  # 409: removal already in progress
                raise EngineError(f"cannot remove container {name}: {exc.explanation or exc}") from None

    # -- builds
    def build(self, context_dir: Path | str, *, tags: Sequence[str] = (), build_args: Mapping[str, str] | None = None,
              progress: str | None = None, on_output: Callable[[str], None] | None = None,
              source_date_epoch: int | None = None, **options: Any) -> BuildResult:
        """The protocol's build, with BuildKit through ``self.build_client``; ``options`` are ``build_command``'s.
        ``source_date_epoch``: the SOURCE_DATE_EPOCH build arg, and clamped layer times where BuildKit can."""
        self.ping()
        client = self.build_client
        rewrite = False
        if source_date_epoch is not None:
            build_args = {**(build_args or {}), "SOURCE_DATE_EPOCH": str(source_date_epoch)}
            rewrite = self.repro_support().clamps
        shown = progress or default_progress()
        return run_build(client, lambda iid: build_command(
            client, context_dir, tags=tags, build_args=build_args, progress=shown, iidfile=iid,
            rewrite_timestamp=rewrite, **options), tags, shown, on_output)
