"""Issue 24: inputs people really write are read as pip, YAML and Docker read them (a UTF-8 BOM, YAML merge keys,
an unquoted python: 3.10), and the ones that cannot work are refused with a hint (an absolute file:// path of
this machine, a name Docker refuses, -r loops) — through the real CLI, one error line, never exit 70."""

from __future__ import annotations

import pytest

from envman.app.lockinputs import ProjectInputs
from envman.cli.main import main
from envman.matrix.load import load_matrix
from envman.project.spec import load_spec


def one_error(capsys) -> list[str]:
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert "Traceback" not in err and len(lines) == 2 and lines[0].startswith("error: ") \
        and lines[1].startswith("hint: "), err
    return lines


def test_yaml_merge_keys_in_envman_yaml(tmp_path, capsys):
    (tmp_path / "envman.yaml").write_text(
        "name: fleet\npython: '3.11'\nframework: none\npackages: [six]\nprofiles:\n"
        "  hopper: &base {targets: [h100], driver: '>=580'}\n"
        "  blackwell:\n    <<: *base\n    targets: [rtx-5090]\n")
    assert main(["init", str(tmp_path), "--no-lock"]) == 0, capsys.readouterr().err
    spec = load_spec(tmp_path)
    prof = {p.name: p for p in spec.profiles}
    assert prof["blackwell"].targets == ("rtx-5090",) and prof["blackwell"].driver == prof["hopper"].driver


def test_a_utf8_bom_in_requirements_txt_is_read_as_pip_reads_it(tmp_path, capsys):
    (tmp_path / "requirements.txt").write_bytes(b"\xef\xbb\xbfsix==1.17.0\nnumpy\n")
    assert main(["init", str(tmp_path), "--cpu", "--python", "3.11", "--no-lock"]) == 0, capsys.readouterr().err
    spec = load_spec(tmp_path)
    lines = [r.line for r in ProjectInputs.read(tmp_path, spec, load_matrix()).requirements()[0]]
    assert lines == ["six==1.17.0", "numpy"]


def test_unquoted_python_3_10_is_refused_with_the_fix(tmp_path, capsys):
    (tmp_path / "envman.yaml").write_text("name: x\ncpu: true\npython: 3.10\n")
    assert main(["lock", str(tmp_path), "--check"]) == 1
    assert one_error(capsys) == ["error: envman.yaml: python: 3.1 is a number: YAML reads an unquoted 3.10 as 3.1",
                                 'hint: quote the version: python: "3.10"']


@pytest.mark.parametrize("line", ["numpy @ file:///home/me/wheels/numpy-2.1.0-cp311-cp311-manylinux_2_28_x86_64.whl",
                                  "file:///opt/wheels/six-1.17.0-py2.py3-none-any.whl"])
def test_an_absolute_file_url_of_this_machine_is_refused(tmp_path, capsys, line):
    """A lock made from it names a path only this machine has (and the build context never holds it)."""
    (tmp_path / "requirements.txt").write_text(line + "\n")
    assert main(["init", str(tmp_path), "--cpu", "--python", "3.11", "--no-lock"]) == 1
    err = one_error(capsys)
    assert err[0].startswith("error: requirements.txt:1: ") and "an absolute path of this machine" in err[0]
    assert "wheels/" in err[1] and "relative" in err[1]


def test_a_relative_file_url_inside_the_project_is_kept(tmp_path, capsys):
    (tmp_path / "wheels").mkdir()
    (tmp_path / "requirements.txt").write_text("six @ file:./wheels/six-1.17.0-py2.py3-none-any.whl\n")
    assert main(["init", str(tmp_path), "--cpu", "--python", "3.11", "--no-lock"]) == 0, capsys.readouterr().err


@pytest.mark.parametrize("setup", ["loop", "self", "dirloop"])
def test_requirement_include_loops_are_one_error_line(tmp_path, capsys, setup):
    if setup == "loop":
        (tmp_path / "requirements.txt").write_text("-r a.txt\nsix\n")
        (tmp_path / "a.txt").write_text("-r requirements.txt\nnumpy\n")
    elif setup == "self":
        (tmp_path / "requirements.txt").write_text("six\n-r loop1\n")
        (tmp_path / "loop1").symlink_to("loop2")
        (tmp_path / "loop2").symlink_to("loop1")
    else:
        (tmp_path / "requirements.txt").write_text("six\n")
        (tmp_path / "d").mkdir()
        (tmp_path / "d" / "up").symlink_to("..")
    rc = main(["init", str(tmp_path), "--cpu", "--python", "3.11", "--no-lock"])
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err and rc in (0, 1), err
    if setup == "loop":  # a loop of includes is read once each, as pip does not (pip recurses for ever)
        assert rc == 0
        lines = [r.line for r in ProjectInputs.read(tmp_path, load_spec(tmp_path), load_matrix()).requirements()[0]]
        assert sorted(lines) == ["numpy", "six"]
    elif setup == "self":
        assert rc == 1 and err.startswith("error: loop1: a symbolic link loop\nhint: "), err
    else:
        assert rc == 0
