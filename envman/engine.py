"""The only module that talks to Docker.

The docker SDK (docker-py) does ping, inspect, run, tag and push. It cannot drive BuildKit, so builds go
through a docker *client* that can: ``docker buildx build --load`` where the buildx plugin works, else a
client whose BuildKit is built in (``DOCKER_BUILDKIT=1 docker build``, clients 20.10–22.x).
``find_build_client`` finds one and says which; nothing here assumes the ``docker`` first on PATH can.

Interruptions: ``run`` always removes its container and ``build`` kills its client's whole process group,
on Ctrl-C and on SIGTERM alike (a SIGTERM handler that raises ``Terminated`` is installed around both).
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import EXIT_ENGINE, EnvmanError

START_HINT = (
    "start one: `sudo systemctl start docker` (systemd) or `sudo dockerd >/tmp/dockerd.log 2>&1 &`; "
    "without Docker installed: `sudo apt-get install -y docker.io`; or set DOCKER_HOST to an engine that runs"
)
CLIENT_HINT = (
    "install the buildx plugin (`apt-get install docker-buildx` or docker-buildx-plugin), or Debian's docker.io "
    "package, whose 20.10 client has BuildKit built in; or set ENVMAN_DOCKER to a client that can"
)
# Clients 23+ hand DOCKER_BUILDKIT=1 builds to buildx and fail without it; before 20.10 the built-in
# Dockerfile frontend only knew RUN --mount behind a `# syntax=` line, which needs a registry.
NATIVE_BUILDKIT = ((20, 10), (23, 0))
RUN_LABEL = "org.envman.run"


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


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived while envman held a container or a build client; handled like Ctrl-C."""


@contextmanager
def sigterm_raises() -> Iterator[None]:
    """Turn SIGTERM into ``Terminated`` so ``finally`` blocks run (signals only work in the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum, frame):  # noqa: ARG001
        raise Terminated(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def _signals_deferred() -> Iterator[None]:
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


# --------------------------------------------------------------------------------------------- build client
@dataclass(frozen=True)
class BuildClient:
    kind: str  # "buildx" | "native"
    path: str  # the docker client executable
    version: str  # buildx's version for "buildx", the client's for "native"

    def describe(self) -> str:
        if self.kind == "buildx":
            return f"docker buildx {self.version} ({self.path} buildx build --load)"
        return f"docker {self.version} with built-in BuildKit ({self.path}, DOCKER_BUILDKIT=1)"

    @property
    def supports_named_contexts(self) -> bool:
        """``--build-context`` (named contexts for ``RUN --mount=from=NAME``): buildx 0.8+ only."""
        return self.kind == "buildx" and _version_tuple(self.version) >= (0, 8)


def _version_tuple(text: str) -> tuple[int, ...]:
    m = re.search(r"v?(\d+)\.(\d+)(?:\.(\d+))?", text)
    return tuple(int(g) for g in m.groups() if g is not None) if m else ()


def _probe(argv: list[str], timeout: float = 10.0) -> tuple[int, str]:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False,
                           env={**os.environ, "DOCKER_CLI_HINTS": "false"})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return -1, str(exc)
    return p.returncode, (p.stdout + p.stderr).strip()


def candidate_clients(env: Mapping[str, str] | None = None) -> list[str]:
    """Docker clients worth asking, in order: $ENVMAN_DOCKER alone if set; else every `docker` on PATH,
    then the docker.io package's own client (it may be shadowed by a newer one without buildx)."""
    env = os.environ if env is None else env
    if env.get("ENVMAN_DOCKER"):
        return [env["ENVMAN_DOCKER"]]
    found: list[str] = []
    for d in env.get("PATH", os.defpath).split(os.pathsep):
        exe = os.path.join(d or ".", "docker")
        if os.path.isfile(exe) and os.access(exe, os.X_OK):
            found.append(exe)
    found += [p for p in _dpkg_clients() if os.access(p, os.X_OK)]
    found.append("/usr/bin/docker")
    out, seen = [], set()
    for exe in found:
        real = os.path.realpath(exe)
        if real not in seen and os.path.isfile(real):
            seen.add(real)
            out.append(exe)
    return out


def _dpkg_clients() -> list[str]:
    if not shutil.which("dpkg-query"):
        return []
    rc, text = _probe(["dpkg-query", "-L", "docker.io"], timeout=5)
    return [line for line in text.splitlines() if line.endswith("/bin/docker")] if rc == 0 else []


def classify_client(path: str) -> tuple[BuildClient | None, str]:
    """(the client if it can build with BuildKit, else None; why, for the error message)."""
    rc, out = _probe([path, "buildx", "version"])
    if rc == 0 and _version_tuple(out):
        ver = re.search(r"v?\d+\.\d+[\w.+-]*", out)
        return BuildClient("buildx", path, ver.group(0) if ver else out), "buildx works"
    rc, out = _probe([path, "--version"])
    ver = re.search(r"(\d+\.\d+[\w.+-]*)", out) if rc == 0 else None
    if not ver:
        return None, f"`{path} --version` failed: {out[:200]}"
    lo, hi = NATIVE_BUILDKIT
    if lo <= _version_tuple(ver.group(1))[:2] < hi:
        return BuildClient("native", path, ver.group(1).rstrip(",")), "BuildKit built in"
    return None, f"docker {ver.group(1).rstrip(',')} has no buildx plugin and no built-in BuildKit"


_client_cache: dict[tuple[str, ...], BuildClient] = {}


def find_build_client(env: Mapping[str, str] | None = None) -> BuildClient:
    """The first candidate with buildx, else the first with native BuildKit; EngineError if none."""
    cands = candidate_clients(env)
    key = tuple(cands)
    if key in _client_cache:
        return _client_cache[key]
    results = [(c, *classify_client(c)) for c in cands]
    for kind in ("buildx", "native"):
        for _path, client, _why in results:
            if client and client.kind == kind:
                _client_cache[key] = client
                return client
    tried = "; ".join(f"{p}: {why}" for p, _, why in results) or "no docker client found on PATH or at /usr/bin/docker"
    raise EngineError(f"no docker client can build with BuildKit ({tried})", hint=CLIENT_HINT)


def default_progress(stream: Any = None, env: Mapping[str, str] | None = None) -> str:
    """A live display in a terminal, plain lines in CI and pipes."""
    import sys

    env = os.environ if env is None else env
    stream = sys.stderr if stream is None else stream
    if env.get("CI", "").lower() in ("1", "true", "yes"):
        return "plain"
    isatty = getattr(stream, "isatty", None)
    return "tty" if isatty and isatty() else "plain"


def _csv_field(text: str) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow([text])
    return buf.getvalue()


def build_command(
    client: BuildClient,
    context_dir: Path | str,
    *,
    dockerfile: Path | str | None = None,
    tags: Sequence[str] = (),
    build_args: Mapping[str, str] | None = None,
    secrets: Mapping[str, Path | str] | None = None,
    extra_contexts: Mapping[str, Path | str] | None = None,
    progress: str = "plain",
    iidfile: Path | str | None = None,
    labels: Mapping[str, str] | None = None,
    target: str | None = None,
    no_cache: bool = False,
) -> tuple[list[str], dict[str, str]]:
    """argv and the extra environment for one build. Build-arg values travel in the environment
    (``--build-arg NAME`` reads NAME from it), so a proxy URL with credentials is not in ``ps`` output."""
    if progress not in ("tty", "plain", "auto", "quiet"):
        raise ValueError(f"progress must be tty or plain, not {progress!r}")
    env: dict[str, str] = {}
    if client.kind == "buildx":
        argv = [client.path, "buildx", "build", "--load"]
    else:
        argv = [client.path, "build"]
        env["DOCKER_BUILDKIT"] = "1"
    argv += ["--progress", progress]
    if dockerfile is not None:
        argv += ["--file", str(dockerfile)]
    for t in tags:
        argv += ["--tag", t]
    for name, value in sorted((build_args or {}).items()):
        if name.startswith("DOCKER_") or name in ("PATH", "HOME"):
            argv += ["--build-arg", f"{name}={value}"]
        else:
            argv += ["--build-arg", name]
            env[name] = value
    for sid, src in sorted((secrets or {}).items()):
        if not Path(src).is_file():
            raise EngineError(f"build secret {sid!r}: {src} is not a file")
        argv += ["--secret", f"id={sid}," + _csv_field(f"src={Path(src).resolve()}")]
    if extra_contexts:
        if not client.supports_named_contexts:
            raise EngineError(
                f"named build contexts ({', '.join(sorted(extra_contexts))}) need buildx 0.8+; "
                f"this build uses {client.describe()}",
                hint="put the directory inside the build context and bind-mount it from there "
                "(RUN --mount=type=bind,source=DIR,...): that works with every BuildKit client",
            )
        for name, path in sorted(extra_contexts.items()):
            argv += ["--build-context", f"{name}={Path(path).resolve()}"]
    for k, v in sorted((labels or {}).items()):
        argv += ["--label", f"{k}={v}"]
    if target:
        argv += ["--target", target]
    if no_cache:
        argv.append("--no-cache")
    if iidfile is not None:
        argv += ["--iidfile", str(iidfile)]
    argv.append(str(context_dir))
    return argv, env


@dataclass(frozen=True)
class BuildResult:
    image_id: str
    tags: tuple[str, ...]
    client: BuildClient
    seconds: float


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


def run_build_client(
    argv: Sequence[str], env: Mapping[str, str], *, progress: str, on_output: Callable[[str], None] | None,
    tail_lines: int = 40,
) -> tuple[int, list[str]]:
    """Run a build client in its own process group; in tty mode it owns the terminal, else each output
    line goes to ``on_output``. Any exception here (Ctrl-C, Terminated) kills the whole group first."""
    tail: deque[str] = deque(maxlen=tail_lines)
    tty = progress == "tty"
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
                    line = line.rstrip("\n")
                    tail.append(line)
                    if on_output:
                        on_output(line)
            rc = proc.wait()
        except BaseException:
            with _signals_deferred():
                _kill_group(proc)
            raise
        finally:
            if proc.stdout:
                proc.stdout.close()
    return rc, list(tail)


# ------------------------------------------------------------------------------------------------- engine
class Engine:
    """A Docker engine: the SDK for everything but builds, a BuildKit-capable CLI client for builds."""

    def __init__(self, client: Any = None, *, build_client: BuildClient | None = None, timeout: int = 120):
        self._client = client
        self._build_client = build_client
        self._timeout = timeout

    # -- connection
    @property
    def client(self) -> Any:
        if self._client is None:
            import docker

            try:
                self._client = docker.from_env(version="auto", timeout=self._timeout)
            except docker.errors.DockerException as exc:
                raise self._no_engine(exc) from None
        return self._client

    @staticmethod
    def _no_engine(exc: BaseException) -> EngineError:
        where = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
        reason = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
        return EngineError(f"no Docker engine answers at {where} ({reason})", hint=START_HINT)

    def ping(self) -> str:
        """The engine's version; EngineError (exit 4, with how to start one) when none answers."""
        import docker
        import requests

        try:
            self.client.ping()
            return str(self.client.version().get("Version", "?"))
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise self._no_engine(exc) from None

    @property
    def build_client(self) -> BuildClient:
        if self._build_client is None:
            self._build_client = find_build_client()
        return self._build_client

    # -- images
    def inspect_image(self, ref: str) -> dict | None:
        import docker

        try:
            return self.client.api.inspect_image(ref)
        except docker.errors.ImageNotFound:
            return None
        except docker.errors.APIError as exc:
            if exc.status_code == 404:
                return None
            raise EngineError(f"cannot inspect image {ref}: {exc.explanation or exc}") from None

    def image_exists(self, ref: str) -> bool:
        return self.inspect_image(ref) is not None

    def image_id(self, ref: str) -> str | None:
        info = self.inspect_image(ref)
        return info["Id"] if info else None

    def tag(self, src: str, dst: str) -> None:
        from docker.utils import parse_repository_tag

        repo, tag = parse_repository_tag(dst)
        if not self.image_exists(src):
            raise EngineError(f"cannot tag {src} as {dst}: no such image")
        if not self.client.api.tag(src, repo, tag or "latest", force=True):
            raise EngineError(f"the engine refused to tag {src} as {dst}")

    def push(self, ref: str) -> str:
        """Push ``ref``; returns the manifest digest the registry reported."""
        from docker.utils import parse_repository_tag

        import docker

        repo, tag = parse_repository_tag(ref)
        digest = None
        try:
            for chunk in self.client.api.push(repo, tag=tag or "latest", stream=True, decode=True):
                if chunk.get("error"):
                    raise EngineError(f"push of {ref} failed: {chunk['error']}",
                                      hint="log in with `docker login REGISTRY` if the registry needs credentials")
                digest = (chunk.get("aux") or {}).get("Digest") or digest
        except docker.errors.APIError as exc:
            raise EngineError(f"push of {ref} failed: {exc.explanation or exc}") from None
        if not digest:
            raise EngineError(f"push of {ref} reported no digest")
        return digest

    def remove_image(self, ref: str, force: bool = False) -> bool:
        """True if removed, False if there was no such image."""
        import docker

        try:
            self.client.api.remove_image(ref, force=force)
            return True
        except docker.errors.ImageNotFound:
            return False
        except docker.errors.APIError as exc:
            if exc.status_code == 404:
                return False
            raise EngineError(f"cannot remove image {ref}: {exc.explanation or exc}") from None

    def save_image(self, ref: str, dest: Path | str) -> Path:
        """``docker save`` into ``dest`` (written under a temporary name, then renamed)."""
        dest = Path(dest)
        fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", dir=dest.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                for chunk in self.client.api.get_image(ref):
                    fh.write(chunk)
            os.replace(tmp, dest)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return dest

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
        """Run ``command`` in a new container of ``image`` and return (exit code, stdout, stderr).

        ``binds`` maps host paths to container paths, read-only unless the container path ends in ``:rw``.
        The container is removed in every case: exit, timeout (RunTimeout), Ctrl-C and SIGTERM.
        """
        import docker
        import requests

        name = f"envman-run-{uuid.uuid4().hex[:12]}"
        volumes = []
        for host, target in (binds or {}).items():
            mode = "rw" if target.endswith(":rw") else "ro"
            target = target.removesuffix(":rw").removesuffix(":ro")
            volumes.append(f"{Path(host).resolve()}:{target}:{mode}")
        kwargs: dict[str, Any] = dict(
            command=list(command), name=name, environment=dict(env or {}), volumes=volumes, detach=True,
            labels={RUN_LABEL: "1", **(labels or {})}, user=user,
        )
        if gpus:
            kwargs["device_requests"] = [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])]
        if not network:
            kwargs["network_mode"] = "none"
        with sigterm_raises():
            try:
                container = self.client.containers.create(image, **kwargs)
                container.start()
                try:
                    rc = int(container.wait(timeout=timeout)["StatusCode"])
                except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
                    out, err = self._logs(container)
                    raise RunTimeout(f"container of {image} ran past {timeout:g} s and was removed", out, err) from None
                out, err = self._logs(container)
                return rc, out, err
            except docker.errors.ImageNotFound:
                raise EngineError(f"image {image} not found on the engine") from None
            except docker.errors.APIError as exc:
                raise EngineError(f"cannot run {image}: {exc.explanation or exc}") from None
            finally:
                with _signals_deferred():
                    self._remove_container(name)

    @staticmethod
    def _logs(container: Any) -> tuple[str, str]:
        out = container.logs(stdout=True, stderr=False) or b""
        err = container.logs(stdout=False, stderr=True) or b""
        return out.decode("utf-8", "replace"), err.decode("utf-8", "replace")

    def _remove_container(self, name: str) -> None:
        import docker

        try:
            self.client.api.remove_container(name, force=True, v=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            if exc.status_code not in (404, 409):  # 409: removal already in progress
                raise

    # -- builds
    def build(
        self,
        context_dir: Path | str,
        *,
        dockerfile: Path | str | None = None,
        tags: Sequence[str] = (),
        build_args: Mapping[str, str] | None = None,
        secrets: Mapping[str, Path | str] | None = None,
        extra_contexts: Mapping[str, Path | str] | None = None,
        labels: Mapping[str, str] | None = None,
        target: str | None = None,
        no_cache: bool = False,
        progress: str | None = None,
        on_output: Callable[[str], None] | None = None,
    ) -> BuildResult:
        """Build with BuildKit through ``self.build_client``. ``secrets`` maps secret ids to files
        (``RUN --mount=type=secret,id=ID``): they reach the build and never a layer. ``progress`` None picks
        tty in a terminal, plain in CI/pipes; in plain mode every line goes to ``on_output``."""
        self.ping()
        client = self.build_client
        progress = progress or default_progress()
        fd, iid = tempfile.mkstemp(prefix="envman-iid-")
        os.close(fd)
        started = time.monotonic()
        try:
            argv, env = build_command(
                client, context_dir, dockerfile=dockerfile, tags=tags, build_args=build_args, secrets=secrets,
                extra_contexts=extra_contexts, progress=progress, iidfile=iid, labels=labels, target=target,
                no_cache=no_cache,
            )
            rc, tail = run_build_client(argv, env, progress=progress, on_output=on_output)
            if rc != 0:
                shown = "\n  ".join(tail[-15:])
                raise BuildError(
                    f"the build failed (exit {rc}) using {client.describe()}", tail,
                    hint=("last lines of its output:\n  " + shown) if shown else "see the build output above",
                )
            image_id = Path(iid).read_text().strip()
        finally:
            Path(iid).unlink(missing_ok=True)
        if not image_id:
            raise BuildError(f"the build using {client.describe()} reported no image id")
        return BuildResult(image_id, tuple(tags), client, time.monotonic() - started)
