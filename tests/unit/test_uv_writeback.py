"""`envman uv write` offline: the pyproject.toml edit (whole files compared), its refusals, and the command's
confirmation, --check and exit codes. Real uv picking the written index: tests/network/test_uv_writeback_uv.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envman.errors import UsageError
from envman.project.uvwrite import UvTarget, edit_pyproject

CU130 = UvTarget("torch", "2.14.1", "cu130", "https://download.pytorch.org/whl/cu130", (("torchvision", "0.29.1"),),
                 "3.10", "3.12")
PYPI = UvTarget("torch", "2.14.1", "cu130", None, (("torchvision", "0.29.1"),), "3.10", "3.12")

# karpathy/nanochat's layout: one index per extra, a conflict between them, comments the user wrote
NANOCHAT = '''[project]
name = "nanochat"
version = "0.1.0"
requires-python = ">=3.9"  # keep in sync with CI
dependencies = [
    "torch>=2.8.0",
    "torchvision",
    'numpy',
]

[project.optional-dependencies]
cpu = ["torch>=2.8.0"]
gpu = ["torch>=2.8.0"]

[tool.uv]
conflicts = [[{ extra = "cpu" }, { extra = "gpu" }]]

# PyTorch wheels per extra
[tool.uv.sources]
torch = [
    { index = "pytorch-cpu", extra = "cpu" },
    { index = "pytorch-cu128", extra = "gpu" },
]

[[tool.uv.index]]
name = "pytorch-cpu"
url = "https://download.pytorch.org/whl/cpu"
explicit = true

[[tool.uv.index]]
name = "pytorch-cu128"
url = "https://download.pytorch.org/whl/cu128"
explicit = true
'''

NANOCHAT_CU130 = '''[project]
name = "nanochat"
version = "0.1.0"
requires-python = ">=3.10"  # keep in sync with CI
dependencies = [
    "torch>=2.8.0",
    "torchvision",
    'numpy',
]

[project.optional-dependencies]
cpu = ["torch>=2.8.0"]
gpu = ["torch>=2.8.0"]

[tool.uv]
conflicts = [[{ extra = "cpu" }, { extra = "gpu" }]]
constraint-dependencies = ["torch==2.14.1", "torchvision==0.29.1"]

# PyTorch wheels per extra
[tool.uv.sources]
torch = [
    { index = "pytorch-cpu", extra = "cpu" },
    { index = "pytorch-cu130", extra = "gpu" },
]
torchvision = { index = "pytorch-cu130", marker = "sys_platform == 'linux'" }

[[tool.uv.index]]
name = "pytorch-cpu"
url = "https://download.pytorch.org/whl/cpu"
explicit = true

[[tool.uv.index]]
name = "pytorch-cu130"
url = "https://download.pytorch.org/whl/cu130"
explicit = true
'''


def test_the_gpu_extra_moves_to_the_chosen_index_and_everything_else_stays_as_written():
    edit = edit_pyproject(NANOCHAT, CU130)
    assert edit.text == NANOCHAT_CU130
    assert edit.changes == (
        "tool.uv.index pytorch-cu130: https://download.pytorch.org/whl/cu130 (explicit: only the packages sourced from it)",
        'tool.uv.sources.torch: index = "pytorch-cu130"',
        "tool.uv.sources.torchvision: { index = \"pytorch-cu130\", marker = \"sys_platform == 'linux'\" }",
        "tool.uv.index pytorch-cu128: removed (https://download.pytorch.org/whl/cu128: no source names it any more)",
        "tool.uv.constraint-dependencies: torch==2.14.1, torchvision==0.29.1",
        "project.requires-python: >=3.10 (was '>=3.9'; torch 2.14.1 has no wheels below Python 3.10)",
    )


def test_a_second_write_changes_nothing():
    once = edit_pyproject(NANOCHAT, CU130).text
    again = edit_pyproject(once, CU130)
    assert again.text == once and again.changes == ()


def test_the_plain_pypi_build_takes_the_framework_off_the_cuda_index():
    edit = edit_pyproject(NANOCHAT_CU130, PYPI)
    assert "pytorch-cu130" not in edit.text and "torchvision = " not in edit.text
    assert 'torch = { index = "pytorch-cpu", extra = "cpu" }' in edit.text  # the CPU alternative stays
    assert 'constraint-dependencies = ["torch==2.14.1", "torchvision==0.29.1"]' in edit.text
    assert edit_pyproject(edit.text, PYPI).changes == ()


def test_a_project_without_uv_tables_gets_all_of_them():
    text = '[project]\nname = "t"\nversion = "0"\ndependencies = ["torch"]\n'
    edit = edit_pyproject(text, CU130)
    assert edit.text == (
        '[project]\nname = "t"\nversion = "0"\ndependencies = ["torch"]\nrequires-python = ">=3.10"\n\n'
        '[tool.uv]\nconstraint-dependencies = ["torch==2.14.1"]\n\n'
        '[tool.uv.sources]\ntorch = { index = "pytorch-cu130", marker = "sys_platform == \'linux\'" }\n\n'
        '[[tool.uv.index]]\nname = "pytorch-cu130"\nurl = "https://download.pytorch.org/whl/cu130"\nexplicit = true\n'
    )  # torchvision is not a dependency here: no source and no pin for it


def test_an_index_with_the_variants_url_is_reused_and_made_explicit():
    text = ('[project]\nname = "t"\nversion = "0"\nrequires-python = ">=3.11"\ndependencies = ["torch"]\n\n'
            '[[tool.uv.index]]\nname = "torch-gpu"\nurl = "https://download.pytorch.org/whl/cu130/"\n')
    edit = edit_pyproject(text, CU130)
    assert 'torch = { index = "torch-gpu", marker = "sys_platform == \'linux\'" }' in edit.text
    assert edit.text.count("[[tool.uv.index]]") == 1 and "explicit = true" in edit.text
    assert 'requires-python = ">=3.11"' in edit.text  # already above the release's floor


def test_requires_python_keeps_its_other_clauses():
    text = '[project]\nname = "t"\nversion = "0"\nrequires-python = ">=3.8, <4"\ndependencies = ["torch"]\n'
    assert 'requires-python = ">=3.10,<4"' in edit_pyproject(text, CU130).text


@pytest.mark.parametrize("text, message", [
    ('[project]\nname = "t"\ndependencies = ["torch"]\n[tool.uv.sources]\ntorch = { path = "../pytorch" }\n',
     "pyproject.toml: tool.uv.sources.torch is a path source; envman writes index sources only"),
    ('[project]\nname = "t"\ndependencies = ["torch"]\n[tool.uv.sources]\ntorch = { index = "cpu", extra = "cpu" }\n'
     '[[tool.uv.index]]\nname = "cpu"\nurl = "https://download.pytorch.org/whl/cpu"\n',
     "pyproject.toml: tool.uv.sources.torch: every entry is conditional and none is a CUDA index, so envman "
     "cannot tell which one the GPU build replaces"),
    ('[project]\nname = "t"\nrequires-python = "<3.12"\n',
     "pyproject.toml: project.requires-python '<3.12' excludes Python 3.12, the stack's"),
    ('[tool.poetry]\nname = "t"\n', "pyproject.toml: no [project] table, so this is not a uv project"),
    ('[project\nname = "t"\n', "pyproject.toml: not valid TOML"),
])
def test_what_it_refuses(text, message):
    with pytest.raises(UsageError) as err:
        edit_pyproject(text, CU130)
    assert err.value.message.startswith(message) and err.value.hint


# --- the command -------------------------------------------------------------------------------------


def _lock(root: Path, **stack) -> None:
    from envman.lock.lockfile import Lock, write_lock

    body = {"lock_version": 1, "stack": {
        "framework": {"name": "torch", "version": "2.14.1", "variant": "cu126",
                      "index_url": "https://download.pytorch.org/whl/cu126"},
        "companions": {"torchvision": "0.29.1", "torchaudio": None}, "python": "3.11", **stack}}
    write_lock(root / "envman.lock", Lock.create(body))


@pytest.fixture
def project(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "t"\nversion = "0"\nrequires-python = ">=3.9"\n'
                                             'dependencies = ["torch", "torchvision"]\n')
    _lock(tmp_path)
    return tmp_path


def test_check_exits_1_and_writes_nothing_then_yes_writes_then_check_passes(project, capsys):
    from envman.cli.main import main

    before = (project / "pyproject.toml").read_text()
    assert main(["uv", "write", str(project), "--check"]) == 1
    out = capsys.readouterr()
    assert "stale: pyproject.toml does not install envman's stack" in out.err
    assert "+url = \"https://download.pytorch.org/whl/cu126\"" in out.out and "stack: envman.lock " in out.out
    assert (project / "pyproject.toml").read_text() == before
    assert main(["uv", "write", str(project), "--yes"]) == 0
    assert "wrote pyproject.toml" in capsys.readouterr().out
    text = (project / "pyproject.toml").read_text()
    assert 'constraint-dependencies = ["torch==2.14.1", "torchvision==0.29.1"]' in text
    assert main(["uv", "write", str(project), "--check"]) == 0
    assert "pyproject.toml already installs envman's stack (envman.lock " in capsys.readouterr().out


def test_without_yes_and_without_a_terminal_nothing_is_written(project, capsys, monkeypatch):
    from envman.cli.main import main

    monkeypatch.setattr("sys.stdin.isatty", lambda: False, raising=False)
    before = (project / "pyproject.toml").read_text()
    assert main(["uv", "write", str(project)]) == 1
    err = capsys.readouterr().err
    assert "error: pyproject.toml not written: no terminal to confirm on\nhint: pass --yes" in err
    assert (project / "pyproject.toml").read_text() == before


def test_a_file_edited_between_the_diff_and_the_write_is_not_overwritten(project):
    from envman.app.uvproject import plan_uv_write, write_uv_plan

    plan = plan_uv_write(project)
    (project / "pyproject.toml").write_text(plan.before + "# edited meanwhile\n")
    with pytest.raises(UsageError, match="changed while envman was planning"):
        write_uv_plan(plan)
    assert (project / "pyproject.toml").read_text().endswith("# edited meanwhile\n")


def test_a_hand_edited_lock_is_refused(project, capsys):
    from envman.cli.main import main

    data = json.loads((project / "envman.lock").read_text())
    data["stack"]["framework"]["variant"] = "cu130"
    (project / "envman.lock").write_text(json.dumps(data))
    assert main(["uv", "write", str(project), "--check"]) == 1
    assert "error: envman.lock was edited by hand (its lock_hash does not match)\nhint: run `envman lock` first" \
        in capsys.readouterr().err


def test_without_a_lock_the_resolver_answers_for_envman_yaml(tmp_path):
    from envman.app.uvproject import plan_uv_write

    (tmp_path / "pyproject.toml").write_text('[project]\nname = "t"\nversion = "0"\ndependencies = ["torch"]\n')
    (tmp_path / "envman.yaml").write_text("name: t\nframework: torch==2.14.*\ntargets: [v100]\npython: '3.11'\n")
    plan = plan_uv_write(tmp_path)
    assert plan.source == "the resolver (envman.yaml): torch 2.14.1 cu126"  # V100 (sm_70) is not in cu130's list
    assert any("no envman.lock yet" in n for n in plan.notes)
    assert 'url = "https://download.pytorch.org/whl/cu126"' in plan.after


def test_a_token_in_the_project_file_is_kept_there_and_never_printed(tmp_path, capsys):
    from envman.cli.main import main

    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "t"\nversion = "0"\nrequires-python = ">=3.11"\ndependencies = ["torch"]\n\n'
        '[[tool.uv.index]]\nname = "internal"\nurl = "https://bob:TOKEN@pypi.internal/simple"\n')
    _lock(tmp_path)
    assert main(["uv", "write", str(tmp_path), "--yes"]) == 0
    out = capsys.readouterr()
    assert "TOKEN" not in out.out + out.err and "https://pypi.internal/simple" in out.out  # a context line
    assert 'url = "https://bob:TOKEN@pypi.internal/simple"' in (tmp_path / "pyproject.toml").read_text()


# --- issue 39 cause 3: the file stays where and what it was ------------------------------------------------


def test_a_symlinked_pyproject_is_written_through_the_link_keeping_its_mode(project, capsys):
    from envman.cli.main import main

    real = project / "config" / "pyproject.toml"
    real.parent.mkdir()
    (project / "pyproject.toml").rename(real)
    real.chmod(0o640)
    (project / "pyproject.toml").symlink_to("config/pyproject.toml")
    assert main(["uv", "write", str(project), "--yes"]) == 0
    assert (project / "pyproject.toml").is_symlink()
    assert 'constraint-dependencies = ["torch==2.14.1", "torchvision==0.29.1"]' in real.read_text()
    assert real.stat().st_mode & 0o7777 == 0o640


def test_a_pyproject_linked_from_outside_the_project_is_refused(project, tmp_path_factory, capsys):
    from envman.cli.main import main

    outside = tmp_path_factory.mktemp("elsewhere") / "pyproject.toml"
    (project / "pyproject.toml").rename(outside)
    (project / "pyproject.toml").symlink_to(outside)
    before = outside.read_text()
    assert main(["uv", "write", str(project), "--yes"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"error: pyproject.toml is a symbolic link to {outside.resolve()}, outside the project"
    assert err[1].startswith("hint: envman writes only inside the project")
    assert outside.read_text() == before and (project / "pyproject.toml").is_symlink()


def test_a_crlf_pyproject_comes_back_with_crlf_line_ends_only(project):
    from envman.cli.main import main

    path = project / "pyproject.toml"
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n") + b"# the end\r\n")
    assert main(["uv", "write", str(project), "--yes"]) == 0
    data = path.read_bytes()
    assert b"constraint-dependencies" in data and b"\n" not in data.replace(b"\r\n", b"")
    assert main(["uv", "write", str(project), "--check"]) == 0


# --- issue 39 cause 2 / issue 36: tables in any order, and shapes uv does not give a key ---------------------


def test_sources_after_another_table_are_edited_in_place(project, capsys):
    from envman.cli.main import main

    (project / "pyproject.toml").write_text(
        '[project]\nname = "t"\nversion = "0"\nrequires-python = ">=3.11"\ndependencies = ["torch", "torchvision"]\n\n'
        '[tool.uv]\npackage = false\n\n[project.optional-dependencies]\ndev = ["pytest"]\n\n'
        '# the GPU wheels\n[tool.uv.sources]\ntorch = { index = "pytorch-cu126" }\n')
    assert main(["uv", "write", str(project), "--yes"]) == 0
    assert (project / "pyproject.toml").read_text() == (
        '[project]\nname = "t"\nversion = "0"\nrequires-python = ">=3.11"\ndependencies = ["torch", "torchvision"]\n\n'
        '[tool.uv]\npackage = false\nconstraint-dependencies = ["torch==2.14.1", "torchvision==0.29.1"]\n\n'
        '[[tool.uv.index]]\nname = "pytorch-cu126"\nurl = "https://download.pytorch.org/whl/cu126"\nexplicit = true\n\n'
        '[project.optional-dependencies]\ndev = ["pytest"]\n\n'
        '# the GPU wheels\n[tool.uv.sources]\ntorch = { index = "pytorch-cu126" }\n'
        'torchvision = { index = "pytorch-cu126", marker = "sys_platform == \'linux\'" }\n')
    # the new index goes with the first [tool.uv] part (tomlkit's choice); the comment stays with its table
    assert main(["uv", "write", str(project), "--check"]) == 0


def test_a_shape_uv_does_not_give_is_one_error_and_a_hint_and_nothing_is_written(project, capsys):
    from envman.cli.main import main

    text = '[project]\nname = "t"\ndependencies = ["torch"]\n\n[tool.uv]\nsources = [1, 2]\n'
    (project / "pyproject.toml").write_text(text)
    assert main(["uv", "write", str(project), "--yes"]) == 1
    assert capsys.readouterr().err == ("error: pyproject.toml: tool.uv.sources = [1, 2] is not a table\n"
                                       "hint: fix the file: uv reads the same keys "
                                       "(https://docs.astral.sh/uv/reference/settings/)\n")
    assert (project / "pyproject.toml").read_text() == text
