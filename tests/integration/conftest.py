"""Fixtures for tests against a real Docker engine.

Every fixture that needs something this machine may lack skips with the reason and the command that
provides it (.ci/docker-up.sh, .ci/test-base-image.sh). What a test builds it registers with
``built_images`` and it is removed afterwards, so repeated runs do not fill the disk.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import uuid

import pytest

# Ryuk (testcontainers' reaper) is an image pulled from Docker Hub: no registry is reachable here, and our
# fixtures remove what they start anyway.
os.environ["TESTCONTAINERS_RYUK_DISABLED"] = "true"

from .engine_helpers import BASE_IMAGE, wait_for


@pytest.fixture(scope="session")
def engine():
    from envman.engine.docker import Engine, EngineError

    e = Engine()
    try:
        e.ping()
    except EngineError as err:
        pytest.skip(f"{err.message}; start one with .ci/docker-up.sh")
    return e


@pytest.fixture(scope="session")
def build_client(engine):
    from envman.engine.docker import EngineError

    try:
        return engine.build_client
    except EngineError as err:
        pytest.skip(f"no BuildKit-capable docker client: {err.message}")


@pytest.fixture(scope="session")
def base_image(engine):
    if not engine.image_exists(BASE_IMAGE):
        pytest.skip(f"the test base image {BASE_IMAGE} is missing; build it with .ci/test-base-image.sh")
    return BASE_IMAGE


@pytest.fixture
def token() -> str:
    """Unique per test: image names, labels, secret contents."""
    return uuid.uuid4().hex[:12]


@pytest.fixture
def built_images(engine):
    """Append every image reference or id a test creates; all are removed (forced) afterwards."""
    refs: list[str] = []
    yield refs
    for ref in reversed(refs):
        engine.remove_image(ref, force=True)


@pytest.fixture
def registry(tmp_path):
    """A registry on loopback (Debian's docker-registry, distribution 2.8) for push tests; the engine treats
    127.0.0.1 registries as insecure (plain HTTP) without configuration."""
    exe = shutil.which("docker-registry") or shutil.which("docker-registry", path="/usr/bin:/usr/sbin")
    if not exe:
        pytest.skip("docker-registry is not installed (apt-get install -y docker-registry)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = tmp_path / "registry.yml"
    cfg.write_text(f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {tmp_path / 'data'}\n"
                   f"http:\n  addr: 127.0.0.1:{port}\nlog:\n  level: warn\n")
    proc = subprocess.Popen([exe, "serve", str(cfg)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def up():
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            return False

    try:
        if not wait_for(up, 15):
            pytest.fail("docker-registry did not start listening")
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


# Below this much free space on the engine's disk the build cache is given back; above it, the next module's build
# reuses the torch layers the previous one made (a torch 2.14.1 framework layer is ~6 GB and ~2 minutes to build).
PRUNE_BELOW_FREE_GB = 45


def _engine_free_gb() -> float:
    root = "/var/lib/docker" if os.path.isdir("/var/lib/docker") else "/"
    return shutil.disk_usage(root).free / 2**30


@pytest.fixture(autouse=True, scope="module")
def give_back_build_cache():
    """CI's disk is shared and finite: the slow builds leave tens of GB of BuildKit cache behind (a run
    reached 42 GB). With ENVMAN_TEST_PRUNE_CACHE=1 (.ci/run sets it) the cache no build is using is given
    back after a test module once the engine's disk has less than PRUNE_BELOW_FREE_GB free; pruning after every
    module made each module rebuild the same torch layers. On a developer's machine their own cache is left alone."""
    yield
    if os.environ.get("ENVMAN_TEST_PRUNE_CACHE") != "1" or _engine_free_gb() >= PRUNE_BELOW_FREE_GB:
        return
    for client in ("/usr/bin/docker", "docker"):
        if shutil.which(client):
            subprocess.run([client, "builder", "prune", "-af"], capture_output=True, timeout=300, check=False)
            break
