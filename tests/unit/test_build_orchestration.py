"""app.build.build_project offline, through tests/fakes.FakeEngine: what gets built, tagged, smoke-tested,
pushed and recorded. The docker-py side of each step is tests/integration's business."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest
from fakes import FakeEngine

from envman.app import smoke as smoke_runner
from envman.app.build import BuildOptions, build_project
from envman.app.init import InitOptions, init_project
from envman.app.lock import check_lock
from envman.cli.main import main
from envman.errors import EXIT_SMOKE
from envman.process import host_id

DIGEST = "sha256:" + "a" * 64


def report(ok: bool) -> tuple[int, str, str]:
    check = {"name": "python", "status": "pass" if ok else "fail", "expected": "3.11", "observed": "3.11.9",
             "detail": None if ok else "wrong Python", "gpu": False}
    rep = {"schema": 1, "tool": "envman-smoke", "status": "passed" if ok else "failed", "exit_code": 0 if ok else 1,
           "notes": [], "checks": [check]}
    return (0 if ok else 1), json.dumps(rep), ""


PASS, FAIL = report(True), report(False)


@pytest.fixture(autouse=True)
def _no_host_gpu(monkeypatch):
    monkeypatch.setattr(smoke_runner, "host_has_nvidia_gpu", lambda: False)


@pytest.fixture
def project(tmp_path):
    """A CPU project without a framework or requirements: nothing for uv to lock, so no network."""
    d = tmp_path / "proj"
    d.mkdir()
    # no dependency file: init refuses to guess an empty image, so the project says what it is in envman.yaml
    (d / "envman.yaml").write_text("name: proj\npython: '3.11'\ncpu: true\n")
    init_project(d, InitOptions(no_lock=True))
    return d


def tags_of(d):
    """(the good tag, this process's candidate tag as a run of it would name it, without its start time)."""
    lock = json.loads((d / "envman.lock").read_text())
    short = lock["lock_hash"][:12]
    return f"{lock['name']}:{short}", f"{lock['name']}:{short}-unverified-{host_id()}-{os.getpid()}-"


def built_tag(engine) -> str:
    (tag,) = next(e for e in engine.log if e[0] == "build")[1]
    return tag


IMAGE = "sha256:" + "b" * 64


def build(d, engine, **opts):
    lines: list[str] = []
    (out,) = build_project(d, BuildOptions(**opts), lines.append, engine=engine)
    return out, lines


def test_an_existing_good_tag_is_reused_without_a_build(project):
    good, _ = tags_of(project)
    engine = FakeEngine(PASS, images=[good])
    out, lines = build(project, engine)
    assert (out.built, out.exit_code, out.image) == (False, 0, good)
    assert engine.log == [] and engine.runs == []
    assert f"{good} exists for this lock hash: skipping the build (--rebuild forces it)" in lines


def test_rebuild_builds_even_when_the_good_tag_exists(project):
    good, candidate = tags_of(project)
    engine = FakeEngine(PASS, images=[good])
    out, _ = build(project, engine, rebuild=True)
    assert out.built and built_tag(engine).startswith(candidate)


class WatchingEngine(FakeEngine):
    """Remembers which images existed while the smoke test ran."""

    def run(self, image, command, **kw):
        self.during_smoke = set(self.images)
        return super().run(image, command, **kw)


def test_the_image_is_unverified_until_the_smoke_test_passes(project):
    """Issue 24: the candidate tag is this run's own; the good tag goes on the image ID it tested."""
    good, _ = tags_of(project)
    engine = WatchingEngine(PASS)
    out, lines = build(project, engine)
    candidate = built_tag(engine)
    assert engine.runs[0][0] == candidate
    assert engine.during_smoke == {candidate, IMAGE}
    assert engine.log == [("build", (candidate,)), ("tag", IMAGE, good), ("remove", candidate)]
    assert engine.images == {good, IMAGE}
    assert (out.built, out.exit_code, out.smoke.passed) == (True, 0, True)
    assert lines[-1] == f"tagged {good}"
    assert json.loads((project / "envman.smoke.json").read_text())["where"] == candidate


def test_no_smoke_tags_at_once_and_says_so(project):
    good, _ = tags_of(project)
    engine = FakeEngine()
    out, _ = build(project, engine, smoke=False, tags=("me/app:latest",))
    assert engine.runs == []
    assert engine.log[1:] == [("tag", IMAGE, good), ("remove", built_tag(engine)), ("tag", IMAGE, "me/app:latest")]
    assert out.notes == ["not smoke-tested (--no-smoke)"]


def test_a_failed_smoke_test_is_exit_5_and_no_good_tag(project):
    good, _ = tags_of(project)
    failed = good + "-unverified"
    engine = FakeEngine(FAIL, push_digest=DIGEST)
    out, lines = build(project, engine, push="localhost:5000")
    assert out.exit_code == EXIT_SMOKE
    assert engine.images == {failed, IMAGE}
    assert [entry[0] for entry in engine.log] == ["build", "tag", "remove"]  # neither tagged good nor pushed
    assert engine.log[1] == ("tag", IMAGE, failed)
    note = f"smoke test failed: {failed} keeps the image for inspection; no good tag"
    assert out.notes == [note] and lines[-1] == note
    assert "pushed" not in json.loads((project / "envman.lock").read_text())


def test_a_failed_smoke_test_exits_5_through_the_cli(project, monkeypatch, capsys):
    good, _ = tags_of(project)
    engine = FakeEngine(FAIL)
    monkeypatch.setattr("envman.engine.docker.Engine", lambda: engine)
    assert main(["build", str(project)]) == EXIT_SMOKE
    assert "FAIL  python" in capsys.readouterr().out
    assert engine.images == {good + "-unverified", IMAGE}


def test_push_is_skipped_when_the_registry_has_the_digest(project):
    good, _ = tags_of(project)
    remote = f"localhost:5000/{good}"
    engine = FakeEngine(PASS, registry={remote: DIGEST})
    out, lines = build(project, engine, push="localhost:5000/")
    assert engine.log == [] and engine.runs == []
    assert lines[-1] == f"{remote} is already in the registry ({DIGEST}): skipping build and push"
    assert out.pushed == {"ref": remote, "digest": DIGEST, "pinned": f"localhost:5000/{good.split(':')[0]}@{DIGEST}"}
    assert json.loads((project / "envman.lock").read_text())["pushed"] == out.pushed


def test_the_pushed_digest_is_recorded_in_the_lock(project):
    good, _ = tags_of(project)
    before = json.loads((project / "envman.lock").read_text())
    remote = f"localhost:5000/{good}"
    engine = FakeEngine(PASS, push_digest=DIGEST)
    out, lines = build(project, engine, push="localhost:5000")
    assert engine.log[-2:] == [("tag", IMAGE, remote), ("push", remote)]
    lock = json.loads((project / "envman.lock").read_text())
    repo = remote.rsplit(":", 1)[0]
    assert lock["pushed"] == out.pushed == {"ref": remote, "digest": DIGEST, "pinned": f"{repo}@{DIGEST}"}
    assert lock["lock_hash"] == before["lock_hash"]
    assert check_lock(project) == []  # the pin does not make the lock stale
    assert lines[-1] == f"pushed {remote} → {repo}@{DIGEST} (recorded in envman.lock)"


# --- issue 24: builds at once, and what a killed one leaves ------------------------------------------------------


class SlowEngine(FakeEngine):
    """A build that waits until told to finish, so that a second build can start meanwhile."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.started, self.finish = threading.Event(), threading.Event()

    def build(self, *a, **k):
        self.started.set()
        assert self.finish.wait(20)
        return super().build(*a, **k)


def test_a_second_build_of_the_same_lock_hash_waits_and_reuses_the_first(project, tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_CACHE_DIR", str(tmp_path / "cache"))
    good, _ = tags_of(project)
    engine = SlowEngine(PASS)
    first: list = []
    t = threading.Thread(target=lambda: first.append(build(project, engine)))
    t.start()
    assert engine.started.wait(20)
    second_lines: list[str] = []
    second = threading.Thread(target=lambda: build_project(project, BuildOptions(), second_lines.append, engine=engine))
    second.start()
    deadline = time.monotonic() + 20
    while not any("waiting for it" in ln for ln in second_lines) and time.monotonic() < deadline:
        time.sleep(0.05)
    engine.finish.set()
    t.join(20)
    second.join(20)
    assert any(ln.startswith(f"another envman build of {good} is running on this machine (pid {os.getpid()})")
               for ln in second_lines), second_lines
    assert f"{good} exists for this lock hash: skipping the build (--rebuild forces it)" in second_lines
    assert [e[0] for e in engine.log].count("build") == 1 and first[0][0].built


def test_two_builds_never_share_a_candidate_tag_and_the_good_tag_is_on_the_tested_image(project, tmp_path,
                                                                                         monkeypatch):
    """--rebuild of one lock hash twice at once (no waiting in between: another machine on the same engine):
    each run builds, tests and tags its own image ID; neither removes the other's candidate."""
    monkeypatch.setattr("envman.app.buildruns.build_lock", _no_lock)
    good, _ = tags_of(project)
    engine = FakeEngine(PASS)
    out_a, _ = build(project, engine, rebuild=True)
    engine.built_id = "sha256:" + "c" * 64
    out_b, _ = build(project, engine, rebuild=True)
    builds = [e[1][0] for e in engine.log if e[0] == "build"]
    assert len(set(builds)) == 2
    assert ("tag", "sha256:" + "b" * 64, good) in engine.log and ("tag", "sha256:" + "c" * 64, good) in engine.log
    removed = [e[1] for e in engine.log if e[0] == "remove"]
    assert removed == builds  # each run removed its own candidate tag, and nothing else


def _no_lock(*a, **k):
    import contextlib

    return contextlib.nullcontext()


def test_what_killed_runs_left_is_swept_only_when_provably_stale(project):
    import subprocess

    good, _ = tags_of(project)
    repo, short = good.split(":")
    dead = subprocess.Popen(["true"])
    dead.wait()
    now = int(time.time())
    me, other = host_id(), "0" * 8 if host_id() != "0" * 8 else "1" * 8
    tags = {
        "dead": f"{repo}:{short}-unverified-{me}-{dead.pid}-{now}-abcdef",
        "alive": f"{repo}:{short}-unverified-{me}-{os.getppid()}-{now}-abcdef",
        "other-host-recent": f"{repo}:{short}-unverified-{other}-{dead.pid}-{now}-abcdef",
        "other-host-old": f"{repo}:{'0' * 12}-unverified-{other}-1-{now - 2 * 86400}-abcdef",
        "failed": f"{repo}:{short}-unverified",
    }
    engine = FakeEngine(PASS, images=list(tags.values()))
    engine.containers = {"envman-run-dead": f"{me}-{dead.pid}-{now}", "envman-run-alive": f"{me}-{os.getppid()}-{now}",
                         "envman-run-other": f"{other}-1-{now}"}
    out, lines = build(project, engine)
    assert tags["dead"] not in engine.images and tags["other-host-old"] not in engine.images
    assert {tags["alive"], tags["other-host-recent"], tags["failed"]} <= engine.images
    assert sorted(engine.containers) == ["envman-run-alive", "envman-run-other"]
    assert any(ln.startswith("removed what a killed build left: ") for ln in lines)
