"""Conventions users of uv, pixi and docker expect (issue 36): `envman` alone prints the help and exits 0, and so
does a group alone (`envman cluster`), `-h` is `--help`, `-V` is `--version`, and shell completion works for bash,
zsh and fish."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envman import __version__
from envman.cli.main import main

ENVMAN = Path(sys.executable).parent / "envman"  # the console script, as a shell runs it


def test_envman_alone_prints_the_help_and_exits_0(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Usage: envman [OPTIONS] COMMAND [ARGS]...\n")
    assert re.search(r"^  lock +Resolve and hash-lock the whole stack \(uv for the Python set\)\.$", out, re.M)


def _groups() -> list[str]:
    import typer
    from typer.core import TyperGroup

    from envman.cli.main import app

    return sorted(n for n, c in typer.main.get_command(app).commands.items() if isinstance(c, TyperGroup))


def test_every_group_alone_prints_its_help_and_exits_0_as_envman_alone_does(capsys):
    assert _groups() == ["ci", "cluster", "matrix", "uv"]
    for group in _groups():
        assert main([group]) == 0
        alone = capsys.readouterr()
        assert main([group, "--help"]) == 0
        assert alone.err == "" and alone.out == capsys.readouterr().out
        assert alone.out.startswith(f"Usage: envman {group} [OPTIONS] COMMAND [ARGS]...\n")
    assert subprocess.run([str(ENVMAN), "cluster"], capture_output=True, timeout=60).returncode == 0  # the console script


@pytest.mark.parametrize("argv", [["-h"], ["lock", "-h"], ["ci", "github", "-h"], ["cluster", "slurm", "-h"]])
def test_dash_h_is_help(argv, capsys):
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"Usage: envman {' '.join(argv[:-1])}".rstrip() + " [OPTIONS]")
    assert "  -h, --help" in out


@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_dash_v_prints_the_version(flag, capsys):
    assert main([flag]) == 0
    assert capsys.readouterr().out == f"envman {__version__}\n"


def complete(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([str(ENVMAN)], env={**os.environ, **env}, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(("shell", "first"), [
    ("bash", "complete -o default -F _envman_completion envman"),
    ("zsh", "#compdef envman"),
    ("fish", "complete --command envman --no-files"),
])
def test_every_shell_gets_a_script(shell, first):
    """`eval "$(_ENVMAN_COMPLETE=source_SHELL envman)"`: it used to answer "Shell bash not supported"."""
    out = complete({"_ENVMAN_COMPLETE": f"source_{shell}"})
    assert (out.returncode, out.stderr) == (0, "")
    assert first in out.stdout


@pytest.mark.parametrize(("shell", "env", "want"), [
    ("bash", {"COMP_WORDS": "envman lo", "COMP_CWORD": "1"}, "lock"),
    ("bash", {"COMP_WORDS": "envman ci gi", "COMP_CWORD": "2"}, "github\ngitlab"),
    ("zsh", {"_TYPER_COMPLETE_ARGS": "envman lo"},
     "_arguments '*: :((\"lock\":\"Resolve and hash-lock the whole stack (uv...\"))'"),
    ("fish", {"_TYPER_COMPLETE_ARGS": "envman lo", "_TYPER_COMPLETE_FISH_ACTION": "get-args"},
     "lock\tResolve and hash-lock the whole stack (uv..."),
])
def test_the_env_var_protocol_completes_a_subcommand(shell, env, want):
    out = complete({"_ENVMAN_COMPLETE": f"complete_{shell}", **env})
    assert (out.returncode, out.stdout.strip(), out.stderr) == (0, want, "")


@pytest.mark.skipif(not shutil.which("bash"), reason="bash is not installed")
def test_the_bash_script_from_show_completion_completes_in_bash():
    """`envman --show-completion` (the shell detected: bash runs it here), sourced into bash, completes `envman lo`."""
    script = (f'source <("{ENVMAN}" --show-completion)\n'
              f'COMP_WORDS=("{ENVMAN}" lo); COMP_CWORD=1; _envman_completion "{ENVMAN}"\n'
              'printf "%s\\n" "${COMPREPLY[@]}"\n')
    out = subprocess.run(["bash", "--norc", "--noprofile", "-c", script], capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stdout, out.stderr) == (0, "lock\n", "")
