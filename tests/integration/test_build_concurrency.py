"""Issue 24 on the real engine: builds of one project at once, the engine going away mid-run, and what a
SIGKILLed build leaves (swept by the next). A numpy-only project on the debootstrap test base (seconds).

Run under the shared engine lock: ``flock /work/docker.lock .venv/bin/python -m pytest tests/integration/...``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from .engine_helpers import envman, good_tag

pytestmark = [pytest.mark.integration, pytest.mark.network]


def start(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "envman.cli.main", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})


def candidates(engine, project: Path) -> list[str]:
    repo = good_tag(project).split(":")[0]
    return [t for t in engine.tags_of(repo) if "-unverified-" in t]


@pytest.fixture
def project(tmp_path, base_image, token, engine):
    d = tmp_path / f"cc-{token}"
    d.mkdir()
    (d / "requirements.txt").write_text("six==1.17.0\n")
    envman("init", str(d), "--cpu", "--python", "3.11", "--base-image", base_image)
    yield d
    repo = good_tag(d).split(":")[0]
    for tag in engine.tags_of(repo):
        engine.remove_image(f"{repo}:{tag}", force=True)
    engine.client.images.prune(filters={"dangling": True, "label": f"org.opencontainers.image.title={d.name}"})


def test_two_builds_at_once_wait_then_reuse_and_leave_no_candidate(project, engine, tmp_path):
    cache = {"ENVMAN_CACHE_DIR": str(tmp_path / "cache")}
    a = start("build", str(project), "--progress", "plain", env=cache)
    time.sleep(1.0)
    b = start("build", str(project), "--progress", "plain", env=cache)
    out_a, err_a = a.communicate(timeout=600)
    out_b, err_b = b.communicate(timeout=600)
    assert (a.returncode, b.returncode) == (0, 0), err_a[-2000:] + err_b[-2000:]
    good = good_tag(project)
    assert engine.image_exists(good) and candidates(engine, project) == []
    waited = [o for o in (out_a, out_b) if "is running on this machine" in o and "waiting for it" in o]
    assert len(waited) == 1, out_a[-1500:] + out_b[-1500:]
    assert f"{good} exists for this lock hash: skipping the build" in waited[0]


def test_two_rebuilds_on_engines_that_share_no_lock_each_tag_what_they_tested(project, engine, tmp_path):
    """No lock between them (two machines on one engine): each run builds and tests its own candidate, tags
    its own image ID good, and removes only its own candidate — the 'no such image' of issue 24 cannot happen."""
    runs = [start("build", str(project), "--rebuild", "--progress", "plain",
                  env={"ENVMAN_CACHE_DIR": str(tmp_path / f"cache{i}")}) for i in range(2)]
    outs = [r.communicate(timeout=600) for r in runs]
    assert [r.returncode for r in runs] == [0, 0], "\n".join(e[-2000:] for _, e in outs)
    tags = [next(ln.split()[1] for ln in o.splitlines() if ln.startswith("building ")) for o, _ in outs]
    assert len(set(tags)) == 2 and candidates(engine, project) == []
    assert engine.image_exists(good_tag(project))


class SocketProxy:
    """A unix socket that forwards to the engine's; ``cut`` drops it and every connection: the engine, as
    envman and its docker client see it, goes away (dockerd itself keeps running)."""

    def __init__(self, path: Path, target: str = "/var/run/docker.sock"):
        self.path, self.target = str(path), target
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.path)
        self.listener.listen(64)
        self.conns: list[socket.socket] = []
        self.alive = True
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while self.alive:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            upstream.connect(self.target)
            self.conns += [client, upstream]
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(src, dst), daemon=True).start()

    @staticmethod
    def _pipe(src, dst):
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def cut(self):
        self.alive = False
        self.listener.close()
        for c in self.conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
                c.close()
            except OSError:
                pass
        os.unlink(self.path)


@pytest.mark.parametrize("when", ["building ", "built "])
def test_the_engine_going_away_mid_run_is_one_error_line_exit_4(project, engine, tmp_path, when):
    """Cut during the build (the docker client loses its engine) and during the smoke test (docker-py does)."""
    proxy = SocketProxy(tmp_path / "docker.sock")
    run = start("build", str(project), "--rebuild", "--progress", "plain",
                env={"DOCKER_HOST": f"unix://{tmp_path / 'docker.sock'}", "ENVMAN_CACHE_DIR": str(tmp_path / "c")})
    lines: list[str] = []
    assert run.stdout is not None
    for line in run.stdout:
        lines.append(line)
        if line.startswith(when):
            proxy.cut()
            break
    else:
        pytest.fail("the build ended before the cut: " + "".join(lines[-20:]))
    try:
        out, err = run.communicate(timeout=120)  # never a hang
    except subprocess.TimeoutExpired:
        run.kill()
        pytest.fail("envman hung after the engine went away")
    errors = [ln for ln in err.splitlines() if ln.startswith(("error:", "hint:"))]
    assert run.returncode == 4, err[-2000:]
    assert "Traceback" not in err and "internal error" not in err and errors[0].startswith("error: ") \
        and errors[-1].startswith("hint: "), err[-2000:]


def test_what_a_killed_build_left_is_swept_by_the_next(project, engine, tmp_path):
    cache = {"ENVMAN_CACHE_DIR": str(tmp_path / "cache")}
    run = start("build", str(project), "--rebuild", "--progress", "plain", env=cache)
    assert run.stdout is not None
    from envman.engine.docker import OWNER_LABEL, RUN_LABEL

    def its_containers():
        return [c for c in engine.client.api.containers(all=True, filters={"label": RUN_LABEL})
                if f"-{run.pid}-" in (c.get("Labels") or {}).get(OWNER_LABEL, "")]

    for line in run.stdout:
        if line.startswith("built "):
            deadline = time.monotonic() + 20
            while not its_containers() and time.monotonic() < deadline:  # kill it while its smoke test runs
                time.sleep(0.02)
            run.send_signal(signal.SIGKILL)
            break
    run.wait(30)
    left = candidates(engine, project)
    assert left and its_containers(), "the killed run left nothing to sweep (it finished first?)"
    out = envman("build", str(project), "--rebuild", "--progress", "plain")
    assert "removed what a killed build left: " in out.stdout
    assert candidates(engine, project) == [] and its_containers() == []


def test_app_holds_the_source_and_none_of_envmans_lock_files(project, engine):
    """Issue 24: the README says no layer holds a lock file, but `COPY . /app` shipped them all (with the
    private indexes they name). /app now comes from a stage that drops them: the source is there, they are not,
    and no layer of the image holds their bytes."""
    (project / "train.py").write_text("print('hi')\n")
    envman("build", str(project), "--progress", "plain")
    tag = good_tag(project)
    rc, out, err = engine.run(tag, ["sh", "-c", "ls -A /app"], timeout=60)
    listed = set(out.split())
    assert rc == 0 and {"train.py", "requirements.txt", "envman.yaml"} <= listed, out + err
    assert not listed & {"envman.lock", "requirements.lock.txt", "pylock.toml", ".envman"}, listed
    from .engine_helpers import image_members_containing

    lock_bytes = (project / "requirements.lock.txt").read_bytes().partition(b"\n")[2][:200]
    assert image_members_containing(engine, tag, lock_bytes, project.parent) == []
