"""ENVMAN_MATRIX_DIR naming no folder (issue 39, cause 14) is the user's setting, said as such: one error line that
names the variable and its value, one hint, exit 1 — not seven "cannot read" lines about matrix files."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envman.errors import UsageError
from envman.resources import matrix_dir

HINT = ("point ENVMAN_MATRIX_DIR at a folder of matrix files (a copy of envman's matrices/), or unset it to use the "
        "matrix envman ships")


def test_a_missing_folder_and_a_file_are_said_naming_the_variable(tmp_path, monkeypatch, capsys):
    from envman.cli.main import main

    missing = tmp_path / "no-such-matrices"
    monkeypatch.setenv("ENVMAN_MATRIX_DIR", str(missing))
    assert main(["matrix", "show", "gpus"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"error: ENVMAN_MATRIX_DIR={missing} is not a folder (nothing is there)", f"hint: {HINT}"]
    (tmp_path / "a-file").write_text("x")
    monkeypatch.setenv("ENVMAN_MATRIX_DIR", str(tmp_path / "a-file"))
    assert main(["resolve", "--target", "h100"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"error: ENVMAN_MATRIX_DIR={tmp_path / 'a-file'} is not a folder", f"hint: {HINT}"]


def test_a_folder_or_no_variable_is_read_as_before(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_MATRIX_DIR", str(tmp_path))
    assert matrix_dir() == tmp_path
    monkeypatch.setenv("ENVMAN_MATRIX_DIR", "")
    assert (matrix_dir() / "cuda.yaml").is_file()  # the shipped matrix


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(min_size=1, max_size=40).filter(lambda t: "\0" not in t))
def test_any_value_that_names_no_folder_is_one_error_naming_it(tmp_path, monkeypatch, name):
    value = f"{tmp_path}/m/{name}"  # m/ is never made: nothing under it is a folder (joined as text: "/" must not reset it)
    monkeypatch.setenv("ENVMAN_MATRIX_DIR", value)
    with pytest.raises(UsageError) as exc:
        matrix_dir()
    assert exc.value.message in (f"ENVMAN_MATRIX_DIR={value} is not a folder (nothing is there)",
                                 f"ENVMAN_MATRIX_DIR={value} is not a folder")
    assert exc.value.hint == HINT
