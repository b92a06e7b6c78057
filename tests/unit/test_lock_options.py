"""Options that change the lock are kept in envman.yaml, and said (issue 36): `lock --base-image X` used to be
forgotten by the next `envman lock`."""

from __future__ import annotations

import json

import pytest

import envman.lock.registry
from envman.cli.main import main

SPEC = "# my project\nname: demo\ncpu: true\npython: '3.11'\nframework: none\n"
MIRROR = "registry.example.com/mirror/python:3.11-slim-bookworm"


@pytest.fixture(autouse=True)
def no_registry(monkeypatch):
    monkeypatch.setattr(envman.lock.registry, "resolve_digest", lambda ref, timeout=3.0: None)


def base_of(project) -> str:
    return json.loads((project / "envman.lock").read_text())["base_image"]["ref"]


def test_lock_base_image_is_written_to_envman_yaml_and_kept_by_the_next_lock(tmp_path, capsys):
    (tmp_path / "envman.yaml").write_text(SPEC)
    assert main(["lock", str(tmp_path), "--base-image", MIRROR]) == 0
    out = capsys.readouterr().out
    assert f"  - envman.yaml: base_image set to {MIRROR}" in out.splitlines()
    assert (tmp_path / "envman.yaml").read_text() == SPEC + f'base_image: "{MIRROR}"\n'
    first = json.loads((tmp_path / "envman.lock").read_text())["lock_hash"]
    assert main(["lock", str(tmp_path)]) == 0
    assert "base_image set" not in capsys.readouterr().out
    assert base_of(tmp_path) == MIRROR
    assert json.loads((tmp_path / "envman.lock").read_text())["lock_hash"] == first
    assert main(["lock", str(tmp_path), "--check"]) == 0


def test_an_existing_base_image_line_is_replaced_in_place(tmp_path, capsys):
    (tmp_path / "envman.yaml").write_text("name: demo  # the image\nbase_image: python:3.11-slim  # old mirror\n"
                                          "cpu: true\npython: '3.11'\nframework: none\n")
    assert main(["lock", str(tmp_path), "--base-image", MIRROR]) == 0
    assert (tmp_path / "envman.yaml").read_text() == (f'name: demo  # the image\nbase_image: "{MIRROR}"\n'
                                                      "cpu: true\npython: '3.11'\nframework: none\n")
    assert base_of(tmp_path) == MIRROR


def test_a_block_value_is_left_alone_and_the_note_says_what_to_write(tmp_path, capsys):
    text = "name: demo\nbase_image: >-\n  python:3.11-slim\ncpu: true\npython: '3.11'\nframework: none\n"
    (tmp_path / "envman.yaml").write_text(text)
    assert main(["lock", str(tmp_path), "--base-image", MIRROR]) == 0
    assert (f'  - envman.yaml: could not set base_image in place: write base_image: "{MIRROR}" there to keep this base'
            in capsys.readouterr().out.splitlines())
    assert (tmp_path / "envman.yaml").read_text() == text and base_of(tmp_path) == MIRROR


def test_pyproject_tool_envman_is_not_rewritten(tmp_path, capsys):
    pyproject = "[project]\nname = 'demo'\nversion = '1'\n\n[tool.envman]\nname = 'demo'\ncpu = true\npython = '3.11'\nframework = 'none'\n"
    (tmp_path / "pyproject.toml").write_text(pyproject)
    assert main(["lock", str(tmp_path), "--base-image", MIRROR]) == 0
    assert (f'  - pyproject.toml [tool.envman]: set base_image = "{MIRROR}" there to keep this base for the next '
            "`envman lock`" in capsys.readouterr().out.splitlines())
    assert (tmp_path / "pyproject.toml").read_text() == pyproject and base_of(tmp_path) == MIRROR
