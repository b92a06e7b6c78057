"""envman.engine without a Docker engine: fake clients (shell scripts) and a fake SDK."""

from __future__ import annotations

import os
import signal
import stat
import time
from pathlib import Path

import pytest

from envman.engine import buildkit
from envman.engine import docker as eng
from envman.engine.buildkit import BuildClient
from envman.engine.docker import Engine
from envman.engine.errors import BuildError, EngineError
from envman.errors import EXIT_ENGINE
from envman.process import Terminated, run_teed, sigterm_raises


def script(path: Path, body: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


BUILDX = ('if [ "$1" = buildx ] && [ "$2" = version ]; then\n'
          '  echo "github.com/docker/buildx v0.12.1 30feaa1"; exit 0\nfi\n')
NO_BUILDX = 'if [ "$1" = buildx ]; then echo "docker: unknown command: docker buildx" >&2; exit 1; fi\n'


def fake_docker(tmp_path: Path, name: str, version: str, buildx: bool) -> str:
    return script(tmp_path / name / "docker", (BUILDX if buildx else NO_BUILDX)
                  + f'if [ "$1" = --version ]; then echo "Docker version {version}, build abc"; exit 0; fi\nexit 3\n')


@pytest.fixture(autouse=True)
def _fresh_cache():
    buildkit._client_cache.clear()
    yield
    buildkit._client_cache.clear()


# ------------------------------------------------------------------------------------------ client discovery
def test_classify_native_20_10(tmp_path):
    client, why = buildkit.classify_client(fake_docker(tmp_path, "a", "20.10.24+dfsg1", buildx=False))
    assert client == BuildClient("native", str(tmp_path / "a" / "docker"), "20.10.24+dfsg1")
    assert why == "BuildKit built in"


def test_classify_new_client_without_buildx_cannot_build(tmp_path):
    client, why = buildkit.classify_client(fake_docker(tmp_path, "a", "28.2.2", buildx=False))
    assert client is None
    assert why == "docker 28.2.2 has no buildx plugin and no built-in BuildKit"


def test_classify_19_03_cannot_mount_without_syntax_line(tmp_path):
    assert buildkit.classify_client(fake_docker(tmp_path, "a", "19.03.15", buildx=False))[0] is None


def test_classify_buildx(tmp_path):
    client, _ = buildkit.classify_client(fake_docker(tmp_path, "a", "28.2.2", buildx=True))
    assert (client.kind, client.version) == ("buildx", "v0.12.1")
    assert client.supports_named_contexts
    assert "buildx build --load" in client.describe()


def test_buildx_preferred_over_an_earlier_native_client(tmp_path):
    native = fake_docker(tmp_path, "first", "20.10.24", buildx=False)
    bx = fake_docker(tmp_path, "second", "27.0.1", buildx=True)
    env = {"PATH": f"{Path(native).parent}{os.pathsep}{Path(bx).parent}"}
    assert buildkit.find_build_client(env).path == bx


def test_native_found_behind_a_newer_client_without_buildx(tmp_path, monkeypatch):
    # This machine's case: /usr/local/bin/docker 28 (no buildx) shadows the docker.io package's 20.10 client.
    new = fake_docker(tmp_path, "local", "28.2.2", buildx=False)
    old = fake_docker(tmp_path, "pkg", "20.10.24+dfsg1", buildx=False)
    monkeypatch.setattr(buildkit, "_dpkg_clients", lambda: [old])
    client = buildkit.find_build_client({"PATH": str(Path(new).parent)})
    assert (client.kind, client.path) == ("native", old)


def test_envman_docker_overrides_discovery(tmp_path):
    only = fake_docker(tmp_path, "x", "20.10.5", buildx=False)
    assert buildkit.candidate_clients({"ENVMAN_DOCKER": only, "PATH": "/usr/bin"}) == [only]


def test_no_buildkit_client_is_exit_4_with_a_hint(tmp_path, monkeypatch):
    new = fake_docker(tmp_path, "local", "28.2.2", buildx=False)
    with pytest.raises(EngineError) as ei:
        buildkit.find_build_client({"ENVMAN_DOCKER": new})
    assert ei.value.exit_code == EXIT_ENGINE
    assert ei.value.message == (
        f"no docker client can build with BuildKit ({new}: docker 28.2.2 has no buildx plugin and no built-in BuildKit)"
    )
    assert "docker.io" in ei.value.hint and "buildx" in ei.value.hint


# ------------------------------------------------------------------------------------------ build argv
NATIVE = BuildClient("native", "/usr/bin/docker", "20.10.24")
BX = BuildClient("buildx", "/usr/bin/docker", "v0.12.1")


def test_native_build_command(tmp_path):
    secret = tmp_path / "ca, bundle.pem"
    secret.write_text("x")
    argv, env = buildkit.build_command(
        NATIVE, tmp_path, dockerfile=tmp_path / "Dockerfile", tags=["a:1", "a:good"],
        build_args={"HTTPS_PROXY": "http://user:pw@proxy:3128", "DOCKER_X": "1"}, secrets={"ca": secret},
        progress="plain", iidfile="/tmp/iid", labels={"org.envman.lock": "abc"},
    )
    assert argv == [
        "/usr/bin/docker", "build", "--progress", "plain", "--file", str(tmp_path / "Dockerfile"),
        "--tag", "a:1", "--tag", "a:good", "--build-arg", "DOCKER_X=1", "--build-arg", "HTTPS_PROXY",
        "--secret", f'id=ca,"src={secret.resolve()}"', "--label", "org.envman.lock=abc",
        "--iidfile", "/tmp/iid", str(tmp_path),
    ]
    # the proxy's credentials travel in the environment, not in argv (visible in ps)
    assert env == {"DOCKER_BUILDKIT": "1", "HTTPS_PROXY": "http://user:pw@proxy:3128"}
    assert not any("pw@" in a for a in argv)


def test_buildx_build_command_loads_and_takes_named_contexts(tmp_path):
    argv, env = buildkit.build_command(BX, tmp_path, extra_contexts={"wheels": tmp_path}, progress="tty")
    assert argv[:6] == ["/usr/bin/docker", "buildx", "build", "--load", "--progress", "tty"]
    assert ["--build-context", f"wheels={tmp_path.resolve()}"] == argv[6:8]
    assert env == {}


def test_named_contexts_refused_on_native_client(tmp_path):
    with pytest.raises(EngineError) as ei:
        buildkit.build_command(NATIVE, tmp_path, extra_contexts={"wheels": tmp_path})
    assert ei.value.message.startswith("named build contexts (wheels) need buildx 0.8+")
    assert "RUN --mount=type=bind" in ei.value.hint


def test_missing_secret_file(tmp_path):
    with pytest.raises(EngineError, match=r"build secret 'ca': .* is not a file"):
        buildkit.build_command(NATIVE, tmp_path, secrets={"ca": tmp_path / "nope"})


@pytest.mark.parametrize("env,tty,want", [({"CI": "true"}, True, "plain"), ({}, True, "tty"), ({}, False, "plain")])
def test_default_progress(env, tty, want):
    class S:
        def isatty(self):
            return tty

    assert buildkit.default_progress(S(), env) == want


# ------------------------------------------------------------------------------------------ build process
def test_build_streams_lines_and_returns_the_image_id(tmp_path):
    cli = script(tmp_path / "docker", 'echo "#1 step one"\necho "#2 step two" >&2\n'
                 'while [ $# -gt 0 ]; do if [ "$1" = --iidfile ]; then echo sha256:abc > "$2"; fi; shift; done\n')
    lines = []
    r = Engine(FakeSDK(), build_client=BuildClient("native", cli, "20.10")).build(
        tmp_path, tags=["x:1"], progress="plain", on_output=lines.append)
    assert r.image_id == "sha256:abc" and r.tags == ("x:1",)
    assert lines == ["#1 step one", "#2 step two"]


def test_failed_build_is_exit_4_with_its_last_lines(tmp_path):
    cli = script(tmp_path / "docker", 'echo "#5 ERROR: process did not complete"; exit 1\n')
    with pytest.raises(BuildError) as ei:
        Engine(FakeSDK(), build_client=BuildClient("native", cli, "20.10")).build(tmp_path, progress="plain")
    assert ei.value.exit_code == EXIT_ENGINE
    assert ei.value.message == (
        f"the build failed (exit 1) using docker 20.10 with built-in BuildKit ({cli}, DOCKER_BUILDKIT=1)")
    assert ei.value.output_tail == ["#5 ERROR: process did not complete"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie of ours counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def test_interrupted_build_kills_the_client_process_group(tmp_path):
    pidfile = tmp_path / "child.pid"
    cli = script(tmp_path / "docker", f'sleep 60 &\necho $! > {pidfile}\necho started\nwait\n')

    def interrupt(line):
        raise KeyboardInterrupt

    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run_teed([cli], {}, on_output=interrupt)
    assert time.monotonic() - t0 < 10
    child = int(pidfile.read_text())
    for _ in range(50):
        if not _alive(child):
            break
        time.sleep(0.1)
    assert not _alive(child), "the build client's child survived"


def test_sigterm_raises_terminated_and_restores_the_handler():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Terminated):
        with sigterm_raises():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)
    assert signal.getsignal(signal.SIGTERM) is before
    assert issubclass(Terminated, KeyboardInterrupt)  # the CLI's Ctrl-C path handles it


# ------------------------------------------------------------------------------------------ SDK side
# Only what envman decides on its own; how runs, tags, pushes and image lookups behave on a real engine
# (binds, no network, timeouts, signals) is tests/integration/test_engine.py's business.
class FakeContainer:
    def __init__(self, sdk, wait_effect=None):
        self.sdk, self.wait_effect = sdk, wait_effect

    def start(self):
        self.sdk.calls.append("start")

    def wait(self, timeout=None):
        self.sdk.wait_timeouts.append(timeout)
        if self.wait_effect:
            raise self.wait_effect
        return {"StatusCode": 3}

    def logs(self, stdout, stderr):
        return b"out\n" if stdout else b"err\n"


class FakeAPI:
    def __init__(self, sdk):
        self.sdk = sdk

    def remove_container(self, name, force, v):
        self.sdk.removed.append(name)

    def push(self, repo, tag, stream, decode):
        return iter(self.sdk.push_stream)


class FakeContainers:
    def __init__(self, sdk):
        self.sdk = sdk

    def create(self, image, **kw):
        self.sdk.created.append((image, kw))
        return FakeContainer(self.sdk, self.sdk.wait_effect)


class FakeSDK:
    def __init__(self, wait_effect=None, runtimes=None):
        self.calls, self.created, self.removed, self.wait_timeouts = [], [], [], []
        self.wait_effect = wait_effect
        self.api, self.containers = FakeAPI(self), FakeContainers(self)
        self.runtimes = runtimes or {"runc": {}}
        self.push_stream = []

    def ping(self):
        return True

    def version(self):
        return {"Version": "20.10.24"}

    def info(self):
        return {"Runtimes": self.runtimes}


def test_run_without_timeout_waits_past_the_sdk_default():
    sdk = FakeSDK()
    Engine(sdk, timeout=120).run("img", ["true"], timeout=None)
    assert sdk.wait_timeouts == [10**7]


def test_run_with_gpus_asks_for_all_gpus():
    sdk = FakeSDK()
    Engine(sdk).run("img", ["true"], gpus=True)
    (req,) = sdk.created[0][1]["device_requests"]
    assert req["Count"] == -1 and req["Capabilities"] == [["gpu"]]


def test_no_daemon_is_exit_4_with_how_to_start_one(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(EngineError) as ei:
        Engine().ping()
    assert ei.value.exit_code == EXIT_ENGINE
    assert ei.value.message.startswith("no Docker engine answers at unix:///nonexistent/docker.sock (")
    assert "sudo systemctl start docker" in ei.value.hint and "dockerd" in ei.value.hint


def test_has_nvidia_runtime(monkeypatch):
    assert Engine(FakeSDK(runtimes={"nvidia": {}, "runc": {}})).has_nvidia_runtime()
    monkeypatch.setattr(eng.shutil, "which", lambda name: None)
    assert not Engine(FakeSDK()).has_nvidia_runtime()


def test_push_returns_the_digest_and_reports_errors():
    sdk = FakeSDK()
    sdk.push_stream = [{"status": "Pushing"}, {"aux": {"Tag": "1", "Digest": "sha256:d1", "Size": 5}}]
    assert Engine(sdk).push("localhost:5000/x:1") == "sha256:d1"
    sdk.push_stream = [{"error": "denied: requested access to the resource is denied"}]
    with pytest.raises(EngineError, match="push of localhost:5000/x:1 failed: denied"):
        Engine(sdk).push("localhost:5000/x:1")
