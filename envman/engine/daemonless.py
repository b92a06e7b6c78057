"""podman and buildah: engines without a daemon, for machines that have no Docker (HPC login nodes, rootless
workstations, locked-down CI).

Both build the same Dockerfile as BuildKit does (``RUN --mount=type=secret|bind|cache``, named build contexts)
with the buildah library, store images in containers/storage (shared by the two), and take the OCI runtime and
resource limits this machine needs (runtime.py). What differs from the Docker engine, and how it is bridged:

- Builds run ``--layers`` (podman's default, not buildah's), so podman and buildah make the same image.
- ``--timestamp`` sets the config's and history's dates *and* every layer file's time: with SOURCE_DATE_EPOCH
  from the lock, two builds of one lock give one image ID (reproducibility, app/repro.py).
- The offline wheelhouse is not imported as an image: ``import_dir`` names the directory, and builds get it
  as a named build context (``--build-context REF=DIR``) — no copy of gigabytes of wheels into the storage.
- A base image missing from the storage is copied from the Docker engine (``docker-daemon:REF``) when one
  holds it: no registry is needed for it.
- buildah has no ``run`` of an image: a working container is made, run in and removed.
- ``<Dockerfile>.dockerignore``, which BuildKit prefers to the context's .dockerignore, is passed as
  ``--ignorefile`` (buildah reads only the context's otherwise).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any

from envman.engine.buildkit import BuildClient, BuildResult, build_tail, default_progress, run_build
from envman.engine.errors import NOT_FOUND_HINT, EngineError, RunTimeout
from envman.engine.protocol import OWNER_LABEL, RUN_LABEL, ReproSupport, volume_specs
from envman.engine.runtime import RuntimeChoice, machine_runtime, machine_ulimits
from envman.process import Owner, signals_deferred, sigterm_raises

TOOLS = ("podman", "buildah")
RUN_PREFIX = "envman-run-"
INSTALL_HINT = "install it (`apt-get install -y podman buildah`, or run .ci/podman-up.sh), or choose another --engine"
_NOT_FOUND = ("image not known", "not known", "no such image", "image not found", "unknown image")
_CDI_SPECS = ("/etc/cdi", "/var/run/cdi")


def _loopback(ref: str) -> bool:
    """A registry on this machine (127.x, localhost): plain HTTP, as the Docker engine allows by default."""
    host = ref.split("/", 1)[0] if "/" in ref else ""
    return host.split(":")[0] in ("localhost", "::1") or host.startswith("127.")


def _file_args(context_dir: Path | str, dockerfile: Path | str | None) -> list[str]:
    """``--file``, and ``--ignorefile`` for ``<Dockerfile>.dockerignore``: BuildKit reads it before the context's
    .dockerignore, buildah only when told."""
    if dockerfile is None:
        return []
    own = Path(dockerfile) if Path(dockerfile).is_absolute() else Path(context_dir) / dockerfile
    ignore = own.with_name(own.name + ".dockerignore")
    return ["--file", str(dockerfile)] + (["--ignorefile", str(ignore)] if ignore.is_file() else [])


class DaemonlessEngine:
    """podman or buildah (``tool``), through its CLI. ``global_args`` go before every subcommand (``--root``
    and ``--runroot`` for a private storage, as the integration tests use)."""

    def __init__(self, tool: str = "podman", *, exe: str | None = None, global_args: Sequence[str] = (),
                 runtime: RuntimeChoice | None = None, timeout: float = 120):
        if tool not in TOOLS:
            raise ValueError(f"tool must be one of {TOOLS}, not {tool!r}")
        self.tool = tool
        self.exe = exe or shutil.which(tool)
        self._global = list(global_args)
        self._runtime = runtime
        self._timeout = timeout
        self._version: str | None = None
        self._build_help: str | None = None
        self._contexts: dict[str, Path] = {}  # import_dir: a name that builds resolve to a directory

    # -- identity
    @property
    def name(self) -> str:
        return self.tool

    @property
    def runtime(self) -> RuntimeChoice:
        if self._runtime is None:
            self._runtime = machine_runtime()
        return self._runtime

    def _argv(self, *args: str) -> list[str]:
        if not self.exe:
            raise EngineError(f"{self.tool} is not installed (not on PATH)", hint=INSTALL_HINT)
        return [self.exe, *self._global, *args]

    def _call(self, *args: str, timeout: float | None = None) -> subprocess.CompletedProcess[str]:
        argv = self._argv(*args)
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=timeout or self._timeout, check=False,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise EngineError(f"`{self.tool} {args[0]}` did not answer within {timeout or self._timeout:g} s") from None
        except OSError as exc:
            raise EngineError(f"cannot run {argv[0]}: {exc}", hint=INSTALL_HINT) from None

    @staticmethod
    def _why(p: subprocess.CompletedProcess[str]) -> str:
        lines = [ln for ln in (p.stderr or p.stdout or "").strip().splitlines() if ln.strip()]
        return (lines[-1] if lines else f"exit {p.returncode}")[:400]

    def ping(self) -> str:
        if self._version is None:
            p = self._call("--version", timeout=30)
            m = re.search(r"version\s+v?(\d+\.\d+[\w.+~-]*)", p.stdout)
            if p.returncode != 0 or not m:
                raise EngineError(f"`{self.exe} --version` failed: {self._why(p)}", hint=INSTALL_HINT)
            self._version = m.group(1)
        return self._version

    @property
    def build_client(self) -> BuildClient:
        return BuildClient(self.tool, str(self.exe), self.ping())

    def describe(self) -> str:
        rt = self.runtime
        return (f"{self.tool} {self.ping()} (no daemon; OCI runtime {rt.runtime or 'default'}: {rt.why})")

    def repro_support(self) -> ReproSupport:
        if self._build_help is None:
            p = self._call("build", "--help", timeout=30)
            self._build_help = p.stdout
        if "--timestamp" in self._build_help:
            return ReproSupport(True, f"{self.tool} {self.ping()} build --timestamp: the config's and history's "
                                      "dates and every layer file's time are set from SOURCE_DATE_EPOCH")
        return ReproSupport(False, f"{self.tool} {self.ping()} has no `build --timestamp` (buildah 1.20 / podman 3.0 "
                                   "have it): layer file times are the build's clock")

    # -- images
    def inspect_image(self, ref: str) -> dict[str, Any] | None:
        args = ("image", "inspect", ref) if self.tool == "podman" else ("inspect", "--type", "image", ref)
        p = self._call(*args)
        if p.returncode != 0:
            return None
        data = json.loads(p.stdout)
        return data[0] if isinstance(data, list) and data else data if isinstance(data, dict) else None

    def image_exists(self, ref: str) -> bool:
        return ref in self._contexts or self.inspect_image(ref) is not None

    def image_id(self, ref: str) -> str | None:
        info = self.inspect_image(ref)
        if not info:
            return None
        raw = info.get("Id") or info.get("FromImageID") or ""
        return raw if raw.startswith("sha256:") else f"sha256:{raw}"

    def diff_ids(self, ref: str) -> list[str] | None:
        info = self.inspect_image(ref)
        if not info:
            return None
        if "RootFS" in info:  # podman
            return list(info["RootFS"].get("Layers") or [])
        return list(((info.get("OCIv1") or {}).get("rootfs") or {}).get("diff_ids") or [])  # buildah

    def provide_base(self, ref: str) -> str | None:
        if "@" in ref or self.image_exists(ref):
            return None  # present; or pinned by a registry digest, which a copy from the Docker engine would not keep
        p = self._call("pull", "--quiet", f"docker-daemon:{ref}", timeout=1800)
        if p.returncode != 0:
            return None  # no Docker engine, or it lacks the image: the build pulls it from the registry
        return f"copied the base image {ref} from the Docker engine into {self.tool}'s storage (docker-daemon:{ref})"

    def tags_of(self, repository: str) -> list[str]:
        """The tags ``repository`` has in the storage (podman and buildah name local images localhost/NAME)."""
        p = self._call("images", *(["--format", "json"] if self.tool == "podman" else ["--json"]))
        if p.returncode != 0:
            raise EngineError(f"cannot list {self.tool}'s images: {self._why(p)}")
        names = [n for img in json.loads(p.stdout or "[]") for n in (img.get("Names") or img.get("names") or [])]
        wanted = {repository, f"localhost/{repository}", f"docker.io/library/{repository}"}
        return sorted({n.rsplit(":", 1)[1] for n in names if ":" in n and n.rsplit(":", 1)[0] in wanted})

    def run_containers(self) -> list[tuple[str, str]]:
        """(name, owner label) of every container ``run`` started that is still there (its name carries the
        owner: buildah's working containers take no labels)."""
        args = ("ps", "--all", "--format", "json") if self.tool == "podman" else ("containers", "--json")
        p = self._call(*args)
        if p.returncode != 0:
            raise EngineError(f"cannot list {self.tool}'s containers: {self._why(p)}")
        out = []
        for c in json.loads(p.stdout or "[]") or []:
            names = c.get("Names") or c.get("containername") or []
            for name in [names] if isinstance(names, str) else names:
                if name.startswith(RUN_PREFIX):
                    out.append((name, name[len(RUN_PREFIX):].rsplit("-", 1)[0]))
        return out

    def remove_container(self, name: str) -> None:
        self._call("rm", *(["--force"] if self.tool == "podman" else []), name)

    def tag(self, src: str, dst: str) -> None:
        p = self._call("tag", src, dst)
        if p.returncode != 0:
            raise EngineError(f"cannot tag {src} as {dst}: {self._why(p)}")

    def remove_image(self, ref: str, force: bool = False) -> bool:
        if self._contexts.pop(ref, None) is not None:
            return True
        p = self._call("rmi", *(["--force"] if force else []), ref)
        if p.returncode == 0:
            return True
        if any(s in self._why(p).lower() for s in _NOT_FOUND):
            return False
        raise EngineError(f"cannot remove image {ref}: {self._why(p)}")

    def push(self, ref: str, progress: Callable[[str], None] | None = None) -> str:
        if progress is not None:  # podman/buildah report no byte counts a caller can read while they run
            progress(f"pushing {ref} with {self.tool} (no progress until it ends)")
        with tempfile.TemporaryDirectory(prefix="envman-push-") as tmp:
            digest_file = Path(tmp) / "digest"
            tls = ["--tls-verify=false"] if _loopback(ref) else []
            p = self._call("push", *tls, "--digestfile", str(digest_file), ref, timeout=3600)
            if p.returncode != 0:
                raise EngineError(f"push of {ref} failed: {self._why(p)}",
                                  hint=f"log in with `{self.tool} login REGISTRY` if the registry needs credentials")
            digest = digest_file.read_text().strip() if digest_file.is_file() else ""
        if not digest:
            raise EngineError(f"push of {ref} reported no digest",
                              hint="the registry took the push without naming its manifest: check the tag there "
                                   "(`docker buildx imagetools inspect REF`) and push again")
        return digest

    def registry_digest(self, ref: str) -> str | None:
        skopeo = shutil.which("skopeo")
        if not skopeo:
            return None
        tls = ["--tls-verify=false"] if _loopback(ref) else []
        try:
            p = subprocess.run([skopeo, "inspect", *tls, "--format", "{{.Digest}}", f"docker://{ref}"],
                               capture_output=True, text=True, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return p.stdout.strip() or None if p.returncode == 0 else None

    def import_dir(self, directory: Path | str, ref: str) -> str:
        path = Path(directory).resolve()
        if not path.is_dir():
            raise EngineError(f"cannot use {directory} as {ref}: not a directory")
        self._contexts[ref] = path
        return f"dir:{path}"

    @contextmanager
    def export_image(self, ref: str) -> Iterator[IO[bytes]]:
        if self.tool == "podman":
            argv = self._argv("save", "--format", "docker-archive", ref)
        else:
            argv = self._argv("push", "--quiet", ref, "docker-archive:/dev/stdout")
        with sigterm_raises():
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
            assert proc.stdout is not None and proc.stderr is not None
            try:
                yield proc.stdout
                proc.stdout.read()  # what the reader left (tar padding): the tool must not block on a full pipe
                err = proc.stderr.read().decode(errors="replace")
                if proc.wait() != 0:
                    raise EngineError(f"cannot export {ref} from {self.tool}: {err.strip()[-400:] or proc.returncode}")
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                proc.stdout.close()
                proc.stderr.close()

    # -- builds
    def build(self, context_dir: Path | str, *, tags: Sequence[str] = (), progress: str | None = None,
              on_output: Callable[[str], None] | None = None, **options: Any) -> BuildResult:
        """The protocol's build: ``build --layers`` with the engine's own Dockerfile support."""
        return run_build(self.build_client, lambda iid: self.build_command(context_dir, tags=tags, iidfile=iid, **options),
                         tags, progress or default_progress(), on_output)

    def build_command(
        self, context_dir: Path | str, *, dockerfile: Path | str | None = None, tags: Sequence[str] = (),
        build_args: Mapping[str, str] | None = None, secrets: Mapping[str, Path | str] | None = None,
        extra_contexts: Mapping[str, Path | str] | None = None, labels: Mapping[str, str] | None = None,
        target: str | None = None, platform: str | None = None, no_cache: bool = False,
        source_date_epoch: int | None = None, iidfile: Path | str | None = None,
    ) -> tuple[list[str], dict[str, str]]:
        """Build-arg values travel in the environment (``--build-arg NAME``), so a proxy URL with credentials is
        not in ``ps`` output; secrets are files the RUN steps see under /run/secrets and no layer keeps; a
        directory ``import_dir`` named is a named build context."""
        rt = self.runtime.args()
        argv = self._argv(*rt, "build") if self.tool == "podman" else self._argv("build", *rt)
        argv += ["--layers", *_file_args(context_dir, dockerfile)]
        for t in tags:
            argv += ["--tag", t]
        args = dict(build_args or {})
        if source_date_epoch is not None:
            args["SOURCE_DATE_EPOCH"] = str(source_date_epoch)
            argv += ["--timestamp", str(source_date_epoch)]
        env = {name: value for name, value in sorted(args.items())}
        argv += [a for name in env for a in ("--build-arg", name)]
        argv += self._secret_args(secrets or {})
        argv += [a for name, where in sorted({**self._contexts, **(extra_contexts or {})}.items())
                 for a in ("--build-context", f"{name}={Path(where).resolve()}")]
        return argv + build_tail(context_dir, labels, target, platform, no_cache, iidfile), env

    def _secret_args(self, secrets: Mapping[str, Path | str]) -> list[str]:
        out = []
        for sid, src in sorted(secrets.items()):
            path = Path(src).resolve()
            if not path.is_file():
                raise EngineError(f"build secret {sid!r}: {src} is not a file")
            if "," in str(path):
                raise EngineError(f"build secret {sid!r}: {self.tool} cannot take a path with a comma ({path})",
                                  hint="copy the file to a path without commas and pass that")
            out += ["--secret", f"id={sid},src={path}"]
        return out

    # -- GPUs
    def has_nvidia_runtime(self) -> bool:
        """podman hands out GPUs through CDI (``--device nvidia.com/gpu=all``), once `nvidia-ctk cdi generate`
        wrote a spec; buildah's working containers get none."""
        if self.tool != "podman":
            return False
        for d in _CDI_SPECS:
            for spec in Path(d).glob("*.*") if Path(d).is_dir() else ():
                with suppress(OSError):
                    if "nvidia.com/gpu" in spec.read_text(errors="replace"):
                        return True
        return False

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
        owner = Owner.me().label
        name = f"{RUN_PREFIX}{owner}-{uuid.uuid4().hex[:8]}"
        volumes = [a for spec in volume_specs(binds) for a in ("--volume", spec)]
        if self.tool == "podman":
            argv = self._argv(*self.runtime.args(), "run", "--rm", "--name", name, "--pull", "never",
                              *machine_ulimits(), *volumes)
            argv += [a for k in sorted(env or {}) for a in ("--env", k)]  # values from the environment, not argv
            argv += [a for k, v in sorted({RUN_LABEL: "1", OWNER_LABEL: owner, **(labels or {})}.items())
                     for a in ("--label", f"{k}={v}")]
            argv += (["--network", "none"] if not network else []) + (["--user", user] if user else [])
            argv += (["--device", "nvidia.com/gpu=all"] if gpus else []) + [image, *command]
            return self._run_container(argv, image, timeout, env or {}, lambda: self._call("rm", "--force", name))
        if gpus:
            raise EngineError("buildah cannot give a container GPUs", hint="run the smoke test with --engine podman")
        p = self._call("from", "--pull=never", "--name", name, image)
        if p.returncode != 0:
            why = self._why(p)
            missing = "not known" in why.lower() or "does not resolve" in why.lower()
            raise EngineError(f"image {image} not found in buildah's storage" if missing else f"cannot run {image}: {why}",
                              hint=NOT_FOUND_HINT if missing else None)
        argv = self._argv("run", *self.runtime.args(), *volumes, *(["--network", "none"] if not network else []),
                          *(["--user", user] if user else []))
        argv += [a for k, v in sorted((env or {}).items()) for a in ("--env", f"{k}={v}")]
        return self._run_container([*argv, name, "--", *command], image, timeout, {},
                                   lambda: self._call("rm", name))

    @staticmethod
    def _run_container(argv: list[str], image: str, timeout: float | None, env: Mapping[str, str],
                       remove: Callable[[], object]) -> tuple[int, str, str]:
        with sigterm_raises():
            try:
                p = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=timeout,
                                   check=False, env={**os.environ, **env}, stdin=subprocess.DEVNULL)
                if p.returncode == 125 and "image not known" in p.stderr:
                    raise EngineError(f"image {image} not found on the engine", hint=NOT_FOUND_HINT)
                return p.returncode, p.stdout, p.stderr
            except subprocess.TimeoutExpired as exc:
                out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout or ""
                err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr or ""
                raise RunTimeout(f"container of {image} ran past {timeout:g} s and was removed", out, err) from None
            finally:
                with signals_deferred():
                    remove()
