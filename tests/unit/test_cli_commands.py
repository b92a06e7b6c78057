"""Every command has its own module in envman/cli/, registered statically by envman/cli/main.py."""

from __future__ import annotations

from pathlib import Path

import typer

from envman.cli.main import app

CLI = Path(__file__).resolve().parents[2] / "envman" / "cli"
NOT_COMMANDS = {"__init__", "main", "output", "jsonout", "entry", "mcpserver", "mcpwire"}  # the server `envman mcp` runs, its stdio wire


def test_one_module_per_command_and_each_is_registered():
    modules = {p.stem for p in CLI.glob("*.py")} - NOT_COMMANDS
    commands = typer.main.get_command(app).commands
    assert set(commands) == modules
    # typer lists plain commands first, then the groups (matrix, ci, uv, variants, cluster), each in registration order
    assert list(commands) == ["resolve", "init", "lock", "build", "verify", "smoke", "fetch", "doctor", "fit", "mcp", "matrix", "ci",
                             "uv", "cluster"]


def test_main_registers_without_a_fallback():
    """A renamed command module must fail at start-up, not make its command silently disappear."""
    src = (CLI / "main.py").read_text(encoding="utf-8")
    assert "__import__" not in src and "ModuleNotFoundError" not in src


def test_a_run_builds_only_the_command_it_names():
    """typer inspects every registered function on each run: `envman lock …` registers lock alone; --help, a
    typo or no command get the whole app (its help and its `Did you mean` list every command)."""
    from envman.cli.main import _app_for

    assert list(typer.main.get_command(_app_for(["lock", "."])).commands) == ["lock"]
    assert list(typer.main.get_command(_app_for(["matrix", "check"])).commands) == ["matrix"]
    for argv in ([], ["--help"], ["lcok"], ["--version"]):
        assert _app_for(argv) is app
