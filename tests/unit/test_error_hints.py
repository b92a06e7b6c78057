"""Every error has a `hint:` that leads somewhere (issue 39, cause 10): the engine's failures that no call site
explains get one that says where to look; the ones envman can name get their own."""

from __future__ import annotations

import pytest

from envman.cli.main import main
from envman.engine.errors import ENGINE_HINT, BuildError, EngineError, RunTimeout


def test_an_engine_failure_without_its_own_hint_says_where_to_look():
    assert EngineError("cannot tag a as b: no such image").hint == ENGINE_HINT
    assert BuildError("the build using docker reported no image id").hint == ENGINE_HINT
    assert EngineError("x", hint="mine").hint == "mine"
    assert RunTimeout("container of img ran past 60 s and was removed").hint == (
        "run the image by hand (`docker run --rm -it IMAGE bash`) to see where it stops; a slow first GPU "
        "initialisation can take minutes")


def test_build_profile_without_profiles(tmp_path, capsys):
    (tmp_path / "envman.yaml").write_text("name: demo\ncpu: true\n")
    assert main(["build", str(tmp_path), "--profile", "hopper"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "error: --profile hopper: envman.yaml declares no profiles",
        "hint: drop --profile (the project has one image), or add profiles: to envman.yaml"]


@pytest.mark.parametrize("argv", [["build", "--progress", "fancy"], ["lock", "--base-image", "UPPER/x"],
                                  ["ci", "github", "--envman-spec", "numpy"]])
def test_errors_of_these_commands_end_with_a_hint(tmp_path, capsys, argv):
    (tmp_path / "envman.yaml").write_text("name: demo\ncpu: true\n")
    assert main([argv[0], *argv[1:2], str(tmp_path), *argv[2:]] if argv[0] == "ci" else [argv[0], str(tmp_path), *argv[1:]]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and err[0].startswith("error: ") and err[1].startswith("hint: ") and len(err[1]) > 12
