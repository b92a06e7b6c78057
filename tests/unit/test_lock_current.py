"""uv lock's rule (app/generate.py): envman.lock records the digest of the uv request its Python locks answer;
when a re-lock's request is the same and --upgrade is not given, the lock is current and uv is not run. Any
change to what uv is asked, a hand-edited pylock.toml or envman.lock, or --upgrade runs uv once."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import envman.app.sourcebuilds as gen
from envman.app.lock import lock_project
from tests.fakes import install_fake_uv, numpy_pylock

KEPT = "Python lock kept: uv's request is the last lock's (`envman lock --upgrade` asks the index again)"


@pytest.fixture
def locked(tmp_path, monkeypatch):
    """A locked project and the log of its uv runs (one line per run)."""
    log = install_fake_uv(monkeypatch, tmp_path, numpy_pylock())
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "envman.yaml").write_text("name: current\ncpu: true\npython: '3.11'\npackages: [numpy]\n")
    first = lock_project(proj)
    assert KEPT not in first.notes and _runs(log) == 1
    return proj, log


def _runs(log) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_an_unchanged_relock_runs_no_uv_and_writes_nothing(locked):
    proj, log = locked
    request = json.loads((proj / "envman.lock").read_text())["python_lock"]["request"]
    assert isinstance(request, str) and len(request) == 64
    before = {p.name: p.read_bytes() for p in proj.iterdir() if p.is_file()}
    out = lock_project(proj)
    assert _runs(log) == 1 and KEPT in out.notes and out.written == []
    assert {p.name: p.read_bytes() for p in proj.iterdir() if p.is_file()} == before


def test_upgrade_asks_uv_again(locked):
    proj, log = locked
    out = lock_project(proj, upgrade=True)
    assert _runs(log) == 2 and KEPT not in out.notes


def test_a_changed_request_runs_uv_once_and_records_the_new_request(locked):
    proj, log = locked
    old = json.loads((proj / "envman.lock").read_text())["python_lock"]["request"]
    (proj / "envman.yaml").write_text("name: current\ncpu: true\npython: '3.11'\npackages: ['numpy<3']\n")
    lock_project(proj)
    assert _runs(log) == 2
    assert json.loads((proj / "envman.lock").read_text())["python_lock"]["request"] != old
    lock_project(proj)
    assert _runs(log) == 2  # and that one is current in its turn


def test_a_change_that_uv_is_not_asked_about_keeps_the_python_lock(locked):
    """The image's command is no part of uv's request: the Dockerfile changes, the Python lock stays."""
    proj, log = locked
    (proj / "envman.yaml").write_text("name: current\ncpu: true\npython: '3.11'\npackages: [numpy]\n"
                                      "command: [python, train.py]\n")
    out = lock_project(proj)
    assert _runs(log) == 1 and KEPT in out.notes and proj / "Dockerfile" in out.written


def test_a_hand_edited_pylock_is_not_kept(locked):
    proj, log = locked
    pylock = proj / "pylock.toml"
    pylock.write_text(pylock.read_text().replace('version = "2.1.0"', 'version = "2.0.0"'))
    out = lock_project(proj, force=True)
    assert _runs(log) == 2 and KEPT not in out.notes
    assert 'version = "2.1.0"' in pylock.read_text()


def test_a_hand_edited_lock_is_not_trusted(locked):
    proj, log = locked
    lock = proj / "envman.lock"
    lock.write_text(lock.read_text().replace('"name": "current"', '"name": "edited"'))
    lock_project(proj, force=True)
    assert _runs(log) == 2


def test_a_kept_lock_keeps_its_build_requirements_lock(tmp_path, monkeypatch):
    """A source-only package's build requirements take a second uv run (and its sdist): not on a current lock."""
    install_fake_uv(monkeypatch, tmp_path, numpy_pylock(sdist_only="promise"))
    build_runs: list[str] = []
    monkeypatch.setattr(gen, "_lock_build_deps", lambda sb, py_text, locked, res: build_runs.append(py_text) or "x\n")
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "envman.yaml").write_text("name: current\ncpu: true\npython: '3.11'\npackages: [numpy, promise]\n")
    lock_project(proj)
    out = lock_project(proj)
    assert len(build_runs) == 1 and KEPT in out.notes and out.written == []


def test_a_current_lock_imports_no_yaml_jinja2_network_or_ci_modules(locked):
    """What a current lock skips, in a fresh process once envman's disk cache is warm (the matrix is parsed once
    per data digest): the Dockerfile is kept by its plan (no jinja2; trusted only as the body the last lock
    recorded), the base digest by the last lock (no urllib/ssl), and the CI files are looked for by name (no CI
    backends). envman.yaml is parsed every run and compose.yaml dumped (PyYAML, ~10 ms): a cached parse or dump
    would be data the lock builds from, or text written into the project, on the cache's word (issue 24)."""
    import os
    import subprocess
    import sys

    proj, log = locked
    heavy = ("jinja2", "urllib.request", "ssl", "envman.ci",
             "importlib.metadata",  # no distribution's version is looked up for the SBOM or the files
             "envman.portable.doctor.knowledge")  # the kit's knowledge.json is kept by the matrix's key
    code = ("import sys\nfrom envman.cli.main import main\nrc = main(['lock', sys.argv[1]])\n"
            f"print(rc, sorted(m for m in {heavy!r} if m in sys.modules))")
    runs = [subprocess.run([sys.executable, "-c", code, str(proj)], capture_output=True, text=True,
                           env=dict(os.environ)) for _ in range(2)]
    assert runs[1].stdout.split("\n")[-2] == "0 []", runs[1].stdout + runs[1].stderr
    assert _runs(log) == 1


def test_a_lock_parses_its_pylock_once(locked, monkeypatch):
    """pylock.toml is parsed once per lock (lock/pylock.py): the derived requirement files, the lock's date
    (lock/epoch.py) and the source-build checks read the same parse; a second tomllib pass over 126 packages was
    a tenth of a current lock."""
    from envman._compat import tomllib
    from envman.lock import pylock

    proj, _ = locked
    body = (proj / "pylock.toml").read_text().partition("\n")[2]
    real, parsed = tomllib.loads, []
    monkeypatch.setattr(tomllib, "loads", lambda text, **kw: parsed.append(text) or real(text, **kw))
    pylock._parse.cache_clear()
    out = lock_project(proj)
    assert KEPT in out.notes and out.written == []
    assert parsed.count(body) == 1


def _before_source(dockerfile: str) -> str:
    return dockerfile.partition("\n")[2].partition("COPY --from=envman-source")[0]


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(command=st.lists(st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=12),
                        min_size=1, max_size=3),
       env=st.dictionaries(st.from_regex(r"[A-Z][A-Z0-9_]{0,8}", fullmatch=True),
                           st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=12), max_size=2))
def test_an_edit_of_command_or_env_leaves_every_layer_before_the_source_as_it_was(locked, command, env):
    """Issue 36.3: BuildKit keys a RUN by its text and the bytes of what it mounts. An edit of `command:` or `env:`
    changes the inputs' hash, yet the Dockerfile up to the project's source and every lock file it mounts keep
    their bytes (a lock file's header names its content only), so the image's dependency layers are reused."""
    import yaml

    proj, _ = locked
    mounted = ("requirements.lock.txt", "pylock.toml")
    before = {n: (proj / n).read_bytes() for n in mounted}
    layers = _before_source((proj / "Dockerfile").read_text())
    spec = {"name": "current", "cpu": True, "python": "3.11", "packages": ["numpy"], "command": command, "env": env}
    (proj / "envman.yaml").write_text(yaml.safe_dump(spec))
    lock_project(proj)
    assert {n: (proj / n).read_bytes() for n in mounted} == before
    assert _before_source((proj / "Dockerfile").read_text()) == layers
    assert (proj / "requirements.lock.txt").read_text().startswith("# generated by envman — content sha256:")


def test_no_lock_keeps_the_python_lock_its_envman_lock_was_made_from(locked):
    """The lock files' headers no longer name the inputs: envman.lock does, and --no-lock keeps the Python lock
    while those inputs are unchanged (and only then)."""
    from envman.app.generate import generate
    from envman.project.spec import load_spec

    proj, log = locked
    out = generate(proj, load_spec(proj), no_lock=True)
    assert "--no-lock: kept the existing Python lock (its inputs are unchanged)" in out.notes
    (proj / "envman.yaml").write_text("name: current\ncpu: true\npython: '3.11'\npackages: [numpy]\ncommand: [x]\n")
    out = generate(proj, load_spec(proj), no_lock=True, force=True)
    assert ("--no-lock: Python dependencies are NOT locked yet; run `envman lock` before `envman build`" in out.notes)
    assert _runs(log) == 1
