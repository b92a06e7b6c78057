"""Fakes of envman's seams for offline unit tests (``from fakes import FakeEngine``: tests/ is on sys.path
because tests/conftest.py is a rootdir conftest without an __init__.py beside it)."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from envman.engine.buildkit import BuildClient, BuildResult
from envman.engine.errors import EngineError
from envman.engine.protocol import ContainerEngine, ReproSupport

RunResult = tuple[int, str, str]


class FakeEngine:
    """An in-memory engine: a set of local image refs, a registry (ref → digest) and a log of what was asked.

    ``run`` answers ``result`` (or raises ``exc``); ``log`` records ("build", tags), ("tag", src, dst),
    ("remove", ref), ("push", ref), ("import", ref) in call order; ``runs`` holds (image, command, kwargs)."""

    build_client = BuildClient("buildx", "/usr/bin/docker", "v0.12.1")
    name = "docker"

    def __init__(self, result: RunResult | None = None, exc: BaseException | None = None, nvidia: bool = False, *,
                 images: Sequence[str] = (), registry: Mapping[str, str] | None = None,
                 push_digest: str = "sha256:" + "d" * 64, build_exc: BaseException | None = None,
                 image_id: str = "sha256:" + "b" * 64, image_ids: Sequence[str] = (), clamps: bool = True,
                 archives: Mapping[str, bytes] | None = None):
        self.result, self.exc, self.nvidia = result, exc, nvidia
        self.images = set(images)
        self.registry = dict(registry or {})
        self.push_digest = push_digest
        self.build_exc = build_exc
        self.built_id = image_id  # what a build answers (the method image_id looks a tag up)
        self.log: list[tuple] = []
        self.platforms: list[str | None] = []  # the platform of each build (None: the engine's own)
        self.runs: list[tuple[str, list[str], dict]] = []
        self.containers: dict[str, str] = {}  # what envman's `run` left: name → owner label
        self.secrets: list[dict[str, str]] = []  # each build's secrets: id → the file's text (read during the build)
        self.image_ids = list(image_ids)  # what successive builds answer (then built_id)
        self.ids: dict[str, str] = {}
        self.clamps = clamps
        self.archives = dict(archives or {})  # image id → its `docker save` bytes, for export_image
        self.builds: list[dict] = []  # each build's no_cache and source_date_epoch

    def ping(self) -> str:
        return "27.0.1"

    def describe(self) -> str:
        return "Docker 27.0.1; builds through " + self.build_client.describe()

    def repro_support(self) -> ReproSupport:
        return ReproSupport(self.clamps, "fake" if self.clamps else "fake BuildKit 0.12: no rewrite-timestamp")

    def image_id(self, ref: str) -> str | None:
        return self.ids.get(ref) if ref in self.images else None

    def provide_base(self, ref: str) -> str | None:
        return None

    def diff_ids(self, ref: str) -> list[str] | None:
        return [] if ref in self.images else None

    @contextmanager
    def export_image(self, ref: str) -> Iterator[IO[bytes]]:
        self.log.append(("export", ref))
        yield io.BytesIO(self.archives[self.ids[ref]])

    def image_exists(self, ref: str) -> bool:
        return ref in self.images

    def tags_of(self, repository: str) -> list[str]:
        return sorted(r.rsplit(":", 1)[1] for r in self.images if r.rsplit(":", 1)[0] == repository and ":" in r)

    def run_containers(self) -> list[tuple[str, str]]:
        return sorted(self.containers.items())

    def remove_container(self, name: str) -> None:
        self.log.append(("remove-container", name))
        self.containers.pop(name, None)

    def build(self, context_dir: Path | str, *, dockerfile: Path | str | None = None, tags: Sequence[str] = (),
              build_args: Mapping[str, str] | None = None, secrets: Mapping[str, Path | str] | None = None,
              progress: str | None = None, on_output: Callable[[str], None] | None = None,
              platform: str | None = None, no_cache: bool = False,
              source_date_epoch: int | None = None) -> BuildResult:
        self.log.append(("build", tuple(tags)))
        self.platforms.append(platform)
        self.secrets.append({k: Path(v).read_text() for k, v in (secrets or {}).items()})
        self.builds.append({"no_cache": no_cache, "source_date_epoch": source_date_epoch, "progress": progress})
        if self.build_exc is not None:
            raise self.build_exc
        image_id = self.image_ids.pop(0) if self.image_ids else self.built_id
        self.images.update(tags)
        self.images.add(image_id)
        self.ids.update({t: image_id for t in tags})
        self.ids[image_id] = image_id
        return BuildResult(image_id, tuple(tags), self.build_client, 1.0)

    def tag(self, src: str, dst: str) -> None:
        if src not in self.images:
            raise EngineError(f"cannot tag {src} as {dst}: no such image")
        self.log.append(("tag", src, dst))
        self.images.add(dst)
        if src in self.ids:
            self.ids[dst] = self.ids[src]

    def remove_image(self, ref: str, force: bool = False) -> bool:
        self.log.append(("remove", ref))
        if ref not in self.images:
            return False
        self.images.discard(ref)
        return True

    def push(self, ref: str, progress=None) -> str:
        if ref not in self.images:
            raise EngineError(f"push of {ref} failed: no such image")
        self.log.append(("push", ref))
        self.registry[ref] = self.push_digest
        return self.push_digest

    def registry_digest(self, ref: str) -> str | None:
        return self.registry.get(ref)

    def import_dir(self, directory: Path | str, ref: str) -> str:
        self.log.append(("import", ref))
        self.images.add(ref)
        return "sha256:" + "1" * 64

    def has_nvidia_runtime(self) -> bool:
        return self.nvidia

    def run(self, image: str, command: Sequence[str], *, gpus: bool = False, env: Mapping[str, str] | None = None,
            binds: Mapping[str | Path, str] | None = None, timeout: float | None = 600,
            network: bool = True) -> RunResult:
        self.runs.append((image, list(command), {"gpus": gpus, "env": dict(env or {}), "binds": dict(binds or {}),
                                                 "timeout": timeout, "network": network}))
        if self.exc is not None:
            raise self.exc
        if self.result is None:
            raise AssertionError(f"FakeEngine.run({image!r}) without a result to answer")
        return self.result


def _conforms(engine: FakeEngine) -> ContainerEngine:  # a type checker proves FakeEngine fits the protocol
    return engine


def install_fake_uv(monkeypatch, directory, pylock: str, env_var: str | None = None) -> "Path":
    """A uv that writes ``pylock`` as its answer (the one uv run of a lock), with no network: set as envman's
    uv binary; the packages' dependency metadata is empty. Returns a log file: one line per run holding the
    value of ``env_var`` uv was given (empty when not asked)."""
    import sys
    from pathlib import Path

    import envman.lock.uv

    d = Path(directory)
    log = d / "uv-runs.log"
    exe = d / "fake-uv"
    exe.write_text(f"#!{sys.executable}\nimport os, sys\n"
                   f"open({str(log)!r}, 'a').write(os.environ.get({env_var or ''!r}, '') + '\\n')\n"
                   f"open(sys.argv[sys.argv.index('-o') + 1], 'w').write({pylock!r})\n")
    exe.chmod(0o755)
    monkeypatch.setattr(envman.lock.uv, "uv_binary", lambda: str(exe))
    monkeypatch.setattr("envman.lock.uvproc.uv_binary", lambda: str(exe))
    monkeypatch.setattr("envman.lock.graph.requires_dist", lambda p, timeout, ctx=None: [])
    monkeypatch.setenv("ENVMAN_CACHE_DIR", str(d / "cache"))
    return log


def numpy_pylock(version: str = "2.1.0", sdist_only: str = "", sha256: str = "bb") -> str:
    """A pylock.toml as uv writes it: numpy ``version`` as a wheel (of digest ``sha256``), and ``sdist_only``
    (a package published as a source distribution only) when named."""
    text = f'''lock-version = "1.0"
created-by = "uv"
requires-python = ">=3.11"

[[packages]]
name = "numpy"
version = "{version}"
wheels = [{{ url = "https://files.example/numpy-{version}-cp311-cp311-manylinux_2_28_x86_64.whl", hashes = {{ sha256 = "{sha256}" }} }}]
'''
    if sdist_only:
        text += f'''
[[packages]]
name = "{sdist_only}"
version = "1.0"
sdist = {{ url = "https://files.example/{sdist_only}-1.0.tar.gz", hashes = {{ sha256 = "cc" }} }}
'''
    return text
