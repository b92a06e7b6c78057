"""A re-lock works on the answer uv usually gives (its seed, the last pylock.toml) while uv runs
(app/pythonlock.py): the guess stands only when uv's answer is the seed, byte for byte; anything else —
another answer, an error met on the guess, a step that needs the network — is done again on uv's answer."""

from __future__ import annotations

import pytest

from envman.app.generate import lock_project
from envman.app.pythonlock import Guessing, PythonLocker
from envman.errors import LockError, UsageError
from envman.lock import uv as uvmod
from tests.fakes import install_fake_uv
from tests.fakes import numpy_pylock as _pylock


@pytest.fixture
def events(monkeypatch):
    """In order: ("finish", text) each time a lock makes its files from an answer, ("answered",) each time
    uv's own answer arrives."""
    seen: list[tuple[str, ...]] = []
    finish, answer = uvmod.PythonLockJob.finish, uvmod.PythonLockJob.answer

    def finishing(self, py_text):
        seen.append(("finish", py_text))
        return finish(self, py_text)

    def answering(self, run):
        text = answer(self, run)
        seen.append(("answered",))
        return text

    monkeypatch.setattr(uvmod.PythonLockJob, "finish", finishing)
    monkeypatch.setattr(uvmod.PythonLockJob, "answer", answering)
    return seen


def _locked_project(tmp_path, monkeypatch, packages: str = "[numpy]"):
    install_fake_uv(monkeypatch, tmp_path, _pylock("2.1.0"))
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "envman.yaml").write_text(f"name: guess\ncpu: true\npython: '3.11'\npackages: {packages}\n")
    lock_project(proj)  # the first lock: no seed, nothing to guess
    return proj


def test_a_relock_answered_with_its_seed_makes_its_files_once_and_writes_nothing(tmp_path, monkeypatch, events):
    proj = _locked_project(tmp_path, monkeypatch)
    assert events == [("answered",), ("finish", _pylock("2.1.0"))]  # the first lock: no seed, no guess
    seed = (proj / "pylock.toml").read_text().partition("\n")[2]
    events.clear()
    out = lock_project(proj)
    assert events == [("finish", seed), ("answered",)]  # made while uv ran; it stood: nothing made after
    assert out.written == []


def test_another_answer_replaces_the_guess(tmp_path, monkeypatch, events):
    proj = _locked_project(tmp_path, monkeypatch)
    seed = (proj / "pylock.toml").read_text().partition("\n")[2]
    install_fake_uv(monkeypatch, tmp_path, _pylock("2.1.1"))  # same request, a new answer (the pin was yanked)
    events.clear()
    out = lock_project(proj)
    assert events == [("finish", seed), ("answered",), ("finish", _pylock("2.1.1"))]
    assert "numpy==2.1.1" in (proj / "requirements.lock.txt").read_text()
    assert proj / "envman.lock" in out.written


def test_an_error_met_on_the_guess_only_is_never_reported(tmp_path, monkeypatch, events):
    proj = _locked_project(tmp_path, monkeypatch)
    install_fake_uv(monkeypatch, tmp_path, _pylock("2.1.1"))
    real = uvmod.check_cuda_majors

    def refuse_the_old_pin(lock, res):
        if any(p.version == "2.1.0" for p in lock.packages):
            raise LockError("numpy==2.1.0 is refused now")
        real(lock, res)

    monkeypatch.setattr(uvmod, "check_cuda_majors", refuse_the_old_pin)
    lock_project(proj)  # the guess met the refusal; uv's own answer does not
    assert "numpy==2.1.1" in (proj / "requirements.lock.txt").read_text()
    assert [e[0] for e in events] == ["answered", "finish", "finish", "answered", "finish"]  # lock 1; guess; answer


def test_an_error_on_the_answer_itself_is_reported_once_uv_has_answered(tmp_path, monkeypatch):
    proj = _locked_project(tmp_path, monkeypatch)
    before = {p.name: p.read_bytes() for p in proj.iterdir() if p.is_file()}

    def refuse(lock, res):
        raise LockError("numpy is refused now")

    monkeypatch.setattr(uvmod, "check_cuda_majors", refuse)
    with pytest.raises(LockError, match="numpy is refused now"):
        lock_project(proj)
    assert {p.name: p.read_bytes() for p in proj.iterdir() if p.is_file()} == before  # nothing written


def test_a_guess_never_starts_the_build_requirements_uv_run(tmp_path, monkeypatch, events):
    """A source-only package's build requirements are locked by a second uv run (downloading its sdist): on a
    guess that step is not taken; the use case runs again on uv's answer and takes it once."""
    import envman.app.generate as gen

    install_fake_uv(monkeypatch, tmp_path, _pylock("2.1.0", sdist_only="promise"))
    build_runs: list[str] = []
    monkeypatch.setattr(gen, "_lock_build_deps", lambda sb, py_text, locked, res: build_runs.append(py_text) or "")
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "envman.yaml").write_text("name: guess\ncpu: true\npython: '3.11'\npackages: [numpy, promise]\n")
    lock_project(proj)
    events.clear()
    lock_project(proj)
    # the guess stopped short of the step; the same answer, once uv gave it, went all the way
    assert [e[0] for e in events] == ["finish", "answered", "finish"] and events[0] == events[2]
    assert len(build_runs) == 2  # one per lock, none for the guess


def test_a_file_edited_while_uv_runs_is_still_protected(tmp_path, monkeypatch):
    """The guess checks the files before uv answers; when it has something to write, the check is made again
    after uv answered, so a hand edit made meanwhile is never overwritten."""
    proj = _locked_project(tmp_path, monkeypatch)
    (proj / "compose.yaml").unlink()  # the guess stands (uv answers the seed) and has a file to write
    seen = []
    real_settle = PythonLocker.settle

    def settle(self):
        seen.append(self.guessing)
        (proj / "Dockerfile").write_text("# mine\n")  # edited while uv ran, after the guess was checked
        return real_settle(self)

    monkeypatch.setattr(PythonLocker, "settle", settle)
    with pytest.raises(UsageError, match="would overwrite Dockerfile"):
        lock_project(proj)
    assert seen == [True] and (proj / "Dockerfile").read_text() == "# mine\n"


def test_the_locker_refuses_a_network_step_only_while_guessing():
    locker = PythonLocker()
    locker.needs_real_answer()  # nothing guessed: fine
    locker.guessing = True
    with pytest.raises(Guessing):
        locker.needs_real_answer()
