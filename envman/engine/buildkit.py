"""A docker client that can build with BuildKit, and running it.

docker-py cannot drive BuildKit. ``docker buildx build --load`` can where the buildx plugin works; clients
20.10-22.x have BuildKit built in (``DOCKER_BUILDKIT=1 docker build``). The ``docker`` first on PATH may be
neither (a client 23+ without the plugin), so every candidate is asked.
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envman.engine.errors import CLIENT_HINT, BuildError, EngineError
from envman.process import run_teed

# Clients 23+ hand DOCKER_BUILDKIT=1 builds to buildx and fail without it; before 20.10 the built-in
# Dockerfile frontend only knew RUN --mount behind a `# syntax=` line, which needs a registry.
NATIVE_BUILDKIT = ((20, 10), (23, 0))
# BuildKit sets the config's and history's dates from the SOURCE_DATE_EPOCH build arg since v0.11, and the
# layers' file times too with the exporter option rewrite-timestamp=true since v0.13 (moby/buildkit
# docs/build-repro.md). Only buildx can pass exporter options; a native client's BuildKit is the daemon's.
REWRITE_TIMESTAMP = (0, 13)


@dataclass(frozen=True)
class BuildClient:
    kind: str  # "buildx" | "native" | "podman" | "buildah" (the daemonless engines build themselves)
    path: str  # the client executable
    version: str  # buildx's version for "buildx", the client's for the others

    def describe(self) -> str:
        if self.kind in ("podman", "buildah"):
            return f"{self.kind} {self.version} ({self.path} build)"
        if self.kind == "buildx":
            return f"docker buildx {self.version} ({self.path} buildx build --load)"
        return f"docker {self.version} with built-in BuildKit ({self.path}, DOCKER_BUILDKIT=1)"

    @property
    def supports_named_contexts(self) -> bool:
        """``--build-context`` (named contexts for ``RUN --mount=from=NAME``): buildx 0.8+, podman, buildah."""
        return self.kind in ("podman", "buildah") or (self.kind == "buildx" and _version_tuple(self.version) >= (0, 8))


def _version_tuple(text: str) -> tuple[int, ...]:
    m = re.search(r"v?(\d+)\.(\d+)(?:\.(\d+))?", text)
    return tuple(int(g) for g in m.groups() if g is not None) if m else ()


def buildkit_version(client: BuildClient) -> str | None:
    """The version of the BuildKit a buildx client builds with (``docker buildx inspect``: "Buildkit: v0.13.2"
    or "BuildKit version: v0.13.2"); None for a native client or when buildx does not say."""
    if client.kind != "buildx":
        return None
    rc, out = _probe([client.path, "buildx", "inspect"], timeout=30)
    m = re.search(r"^\s*Build[Kk]it(?: version)?:\s*(v?\d+\.\d+[\w.+-]*)", out, re.M) if rc == 0 else None
    return m.group(1) if m else None


def can_rewrite_timestamps(client: BuildClient, version: str | None) -> bool:
    return client.kind == "buildx" and version is not None and _version_tuple(version)[:2] >= REWRITE_TIMESTAMP


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


def build_tail(context_dir: Path | str, labels: Mapping[str, str] | None, target: str | None, platform: str | None,
               no_cache: bool, iidfile: Path | str | None) -> list[str]:
    """What every build client (buildx, docker, podman, buildah) takes alike, ending with the context."""
    return ([a for k, v in sorted((labels or {}).items()) for a in ("--label", f"{k}={v}")]
            + (["--target", target] if target else []) + (["--platform", platform] if platform else [])
            + (["--no-cache"] if no_cache else []) + (["--iidfile", str(iidfile)] if iidfile is not None else [])
            + [str(context_dir)])


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
    platform: str | None = None,
    rewrite_timestamp: bool = False,
) -> tuple[list[str], dict[str, str]]:
    """argv and the extra environment for one build. Build-arg values travel in the environment
    (``--build-arg NAME`` reads NAME from it), so a proxy URL with credentials is not in ``ps`` output.
    ``rewrite_timestamp`` (buildx, BuildKit 0.13+): layer file times clamped to SOURCE_DATE_EPOCH."""
    if progress not in ("tty", "plain", "auto", "quiet"):
        raise ValueError(f"progress must be tty or plain, not {progress!r}")
    env: dict[str, str] = {}
    if client.kind == "buildx":
        # `--load` is `--output type=docker`; the explicit form takes the exporter option
        load = ["--output", "type=docker,rewrite-timestamp=true"] if rewrite_timestamp else ["--load"]
        argv = [client.path, "buildx", "build", *load]
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
    return argv + build_tail(context_dir, labels, target, platform, no_cache, iidfile), env


@dataclass(frozen=True)
class BuildResult:
    image_id: str
    tags: tuple[str, ...]
    client: BuildClient
    seconds: float


def run_build(client: BuildClient, command: Callable[[str], tuple[list[str], dict[str, str]]], tags: Sequence[str],
              progress: str, on_output: Callable[[str], None] | None) -> BuildResult:
    """Run the build ``command(iidfile)`` gives; the image it wrote, or BuildError with the output's last lines."""
    fd, iid = tempfile.mkstemp(prefix="envman-iid-")
    os.close(fd)
    started = time.monotonic()
    try:
        argv, env = command(iid)  # in tty mode the client owns the terminal, else each line goes to on_output
        rc, tail = run_teed(argv, env, on_output=on_output, tty=progress == "tty")
        if rc != 0:
            shown = "\n  ".join(tail[-15:])
            raise BuildError(f"the build failed (exit {rc}) using {client.describe()}", tail,
                             hint=("last lines of its output:\n  " + shown) if shown else "see the build output above")
        image_id = Path(iid).read_text().strip()
    finally:
        Path(iid).unlink(missing_ok=True)
    if not image_id:
        raise BuildError(f"the build using {client.describe()} reported no image id")
    image_id = image_id if image_id.startswith("sha256:") else f"sha256:{image_id}"
    return BuildResult(image_id, tuple(tags), client, time.monotonic() - started)
