"""CI systems are backends in one registry: the CLI, `envman ci check` and the re-lock reminder read it."""

from __future__ import annotations

from typer.testing import CliRunner

from envman.ci import BACKENDS, BAKE_FILE, backend, pipeline_commands
from envman.cli.main import app


def test_every_backend_has_its_command_and_file():
    out = CliRunner().invoke(app, ["ci", "--help"])
    assert out.exit_code == 0
    for b in BACKENDS:
        assert f" {b.name} " in out.output or f"  {b.name}" in out.output, b.name
        assert backend(b.name) is b and b.command == f"envman ci {b.name}"
    assert pipeline_commands() == {b.file: b.command for b in BACKENDS}
    assert BAKE_FILE not in pipeline_commands()  # the bake file is shared by every backend, checked on its own


def test_setup_notes_come_from_the_backend():
    from envman.ci import CiOptions, parse_registry

    plain = CiOptions(None)
    assert backend("github").setup_notes(plain, False) == []
    assert backend("gitlab").setup_notes(plain, True) == []
    ghcr = CiOptions(parse_registry("ghcr.io/acme"))
    other = CiOptions(parse_registry("registry.example.com/team"))
    assert backend("github").setup_notes(ghcr, False) == []  # GITHUB_TOKEN logs in to ghcr.io
    assert backend("github").setup_notes(other, True) == [
        "secrets: set ENVMAN_REGISTRY_USERNAME and ENVMAN_REGISTRY_TOKEN in the repository's Actions secrets",
        "actionlint: list your runner labels under self-hosted-runner.labels in .github/actionlint.yaml",
    ]
    assert backend("gitlab").setup_notes(other, False)[0].startswith("variables: set ENVMAN_REGISTRY_USERNAME")


def test_the_lock_looks_for_every_file_a_backend_writes(tmp_path):
    """`envman lock` names the CI files without importing the backends (app/ci.py CI_FILES): the same list."""
    from envman.app.ci import CI_FILES, has_ci_files

    assert set(CI_FILES) == {b.file for b in BACKENDS} | {BAKE_FILE}
    assert not has_ci_files(tmp_path)
    (tmp_path / BAKE_FILE).write_text("{}")
    assert has_ci_files(tmp_path)
