"""One error root, one class per kind of failure, one exit code per kind (docs/commands.md, "Exit codes")."""

from __future__ import annotations

import pytest

from envman.app.init import InitOptions, init_project
from envman.cli.main import main, report_error
from envman.engine.errors import BuildError, EngineError
from envman.errors import (
    DataError,
    EnvmanError,
    InternalError,
    LockError,
    MatrixError,
    ResolutionError,
    SpecError,
    ToolError,
    UsageError,
)
from envman.lock.uv import parse_uv_output


@pytest.mark.parametrize("err,code", [
    (UsageError("bad value"), 1),
    (SpecError("envman.yaml: name: missing"), 1),
    (LockError("envman.lock: not found"), 1),
    (ToolError("uv is not installed"), 1),
    (ResolutionError("no stack", [], []), 3),
    (EngineError("no Docker engine answers"), 4),
    (BuildError("the build failed"), 4),
    (DataError("matrices/cuda.yaml: corrupt"), 7),
    (MatrixError(["matrices/cuda.yaml: releases[0]: missing"]), 7),
    (InternalError("uv output: unexpected line 'x'"), 70),
], ids=lambda v: type(v).__name__ if isinstance(v, EnvmanError) else str(v))
def test_each_kind_exits_with_its_code_and_one_error_line(err, code, capsys):
    assert report_error(err) == code
    assert capsys.readouterr().err.splitlines()[0] == f"error: {err.message}"


def test_kinds_under_usage_error_stay_catchable_as_one():
    assert issubclass(SpecError, UsageError) and issubclass(LockError, UsageError)
    assert not issubclass(ToolError, UsageError)  # a network outage is not a bad spec
    assert issubclass(MatrixError, DataError) and not issubclass(InternalError, UsageError)


def test_a_bad_spec_through_the_cli(tmp_path, capsys):
    (tmp_path / "envman.yaml").write_text("name: demo\nnme: x\n")
    assert main(["build", str(tmp_path)]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "error: envman.yaml: nme: unknown key",
        "hint: did you mean 'name'?",
    ]


@pytest.fixture
def project(tmp_path):
    d = tmp_path / "demo"
    d.mkdir()
    # no dependency file: init refuses to guess an empty image, so the project says what it is in envman.yaml
    (d / "envman.yaml").write_text("name: proj\npython: '3.11'\ncpu: true\n")
    init_project(d, InitOptions(no_lock=True))
    return d


def test_a_missing_lock_through_the_cli(project, capsys):
    (project / "envman.lock").unlink()
    assert main(["build", str(project)]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "error: envman.lock: not found",
        "hint: run `envman lock` (or `envman init`) first",
    ]


def test_a_missing_tool_through_the_cli(project, monkeypatch, capsys):
    import shutil

    import uv

    def gone():
        raise FileNotFoundError("uv")

    monkeypatch.setattr(uv, "find_uv_bin", gone)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setattr("envman.lock.registry.resolve_digest", lambda ref, *a, **k: None)
    (project / "envman.yaml").write_text((project / "envman.yaml").read_text() + "packages: [numpy==2.1.3]\n")
    assert main(["lock", str(project)]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "error: uv is not installed",
        "hint: pip install envman installs it; or put uv on PATH",
    ]


def test_unexpected_uv_output_is_a_tool_failure_exit_1():
    """Issue 24: garbage from uv is uv's failure (exit 1, with what to do), not a bug of envman's (70)."""
    with pytest.raises(ToolError) as ei:
        parse_uv_output("numpy==2.1.3 \\\n    --hash=sha256:00\n!!! not a requirement\n")
    assert ei.value.exit_code == 1 and ei.value.hint
    assert ei.value.message == "uv output: unexpected line '!!! not a requirement'"


def test_a_bug_prints_one_error_line_and_exits_70(project, monkeypatch, capsys):
    def broken(root):
        raise RuntimeError("boom")

    monkeypatch.delenv("ENVMAN_DEBUG", raising=False)
    monkeypatch.setattr("envman.app.build.load_spec", broken)
    assert main(["build", str(project)]) == 70
    assert capsys.readouterr().err.splitlines() == [
        "error: internal error: RuntimeError: boom",
        "hint: this is a bug in envman; re-run with ENVMAN_DEBUG=1 for the traceback and report it",
    ]
