"""app.build.build_project offline, through tests/fakes.FakeEngine: what gets built, tagged, smoke-tested,
pushed and recorded. The docker-py side of each step is tests/integration's business."""

from __future__ import annotations

import json

import pytest
from fakes import FakeEngine

from envman.app import smoke as smoke_runner
from envman.app.build import BuildOptions, build_project
from envman.app.init import InitOptions, init_project
from envman.app.lock import check_lock
from envman.cli.main import main
from envman.errors import EXIT_SMOKE

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
    lock = json.loads((d / "envman.lock").read_text())
    short = lock["lock_hash"][:12]
    return f"{lock['name']}:{short}", f"{lock['name']}:{short}-unverified"


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
    assert out.built and engine.log[0] == ("build", (candidate,))


class WatchingEngine(FakeEngine):
    """Remembers which images existed while the smoke test ran."""

    def run(self, image, command, **kw):
        self.during_smoke = set(self.images)
        return super().run(image, command, **kw)


def test_the_image_is_unverified_until_the_smoke_test_passes(project):
    good, candidate = tags_of(project)
    engine = WatchingEngine(PASS)
    out, lines = build(project, engine)
    assert engine.runs[0][0] == candidate
    assert engine.during_smoke == {candidate}
    assert engine.log == [("build", (candidate,)), ("tag", candidate, good), ("remove", candidate)]
    assert engine.images == {good}
    assert (out.built, out.exit_code, out.smoke.passed) == (True, 0, True)
    assert lines[-1] == f"tagged {good}"
    assert json.loads((project / "envman.smoke.json").read_text())["where"] == candidate


def test_no_smoke_tags_at_once_and_says_so(project):
    good, candidate = tags_of(project)
    engine = FakeEngine()
    out, _ = build(project, engine, smoke=False, tags=("me/app:latest",))
    assert engine.runs == []
    assert engine.log[1:] == [("tag", candidate, good), ("remove", candidate), ("tag", good, "me/app:latest")]
    assert out.notes == ["not smoke-tested (--no-smoke)"]


def test_a_failed_smoke_test_is_exit_5_and_no_good_tag(project):
    _, candidate = tags_of(project)
    engine = FakeEngine(FAIL, push_digest=DIGEST)
    out, lines = build(project, engine, push="localhost:5000")
    assert out.exit_code == EXIT_SMOKE
    assert engine.images == {candidate}
    assert [entry[0] for entry in engine.log] == ["build"]  # neither tagged nor pushed
    note = f"smoke test failed: {candidate} keeps its -unverified tag for inspection; no good tag"
    assert out.notes == [note] and lines[-1] == note
    assert "pushed" not in json.loads((project / "envman.lock").read_text())


def test_a_failed_smoke_test_exits_5_through_the_cli(project, monkeypatch, capsys):
    _, candidate = tags_of(project)
    engine = FakeEngine(FAIL)
    monkeypatch.setattr("envman.engine.docker.Engine", lambda: engine)
    assert main(["build", str(project)]) == EXIT_SMOKE
    assert "FAIL  python" in capsys.readouterr().out
    assert engine.images == {candidate}


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
    assert engine.log[-2:] == [("tag", good, remote), ("push", remote)]
    lock = json.loads((project / "envman.lock").read_text())
    repo = remote.rsplit(":", 1)[0]
    assert lock["pushed"] == out.pushed == {"ref": remote, "digest": DIGEST, "pinned": f"{repo}@{DIGEST}"}
    assert lock["lock_hash"] == before["lock_hash"]
    assert check_lock(project) == []  # the pin does not make the lock stale
    assert lines[-1] == f"pushed {remote} → {repo}@{DIGEST} (recorded in envman.lock)"
