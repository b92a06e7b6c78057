"""`--json` on init, lock and build, and errors as JSON on stdout when `--json` is given (docs/commands.md):
one document on stdout, everything else on stderr, the exit code the command has without --json."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

import envman.lock.registry
from envman.cli.main import main

SPEC = "name: demo\ncpu: true\npython: '3.11'\nframework: none\n"


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.setattr(envman.lock.registry, "resolve_digest", lambda ref, timeout=3.0: None)
    (tmp_path / "envman.yaml").write_text(SPEC)
    return tmp_path


def run(capsys, *argv) -> tuple[int, dict, list[str]]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, json.loads(out), err.splitlines()


def test_resolve_json_with_an_unknown_gpu_prints_the_error_on_stdout(capsys):
    code, doc, err = run(capsys, "resolve", "--target", "foo", "--json")
    hint = "`envman matrix show gpus` lists every known GPU; a compute capability like sm_89 also works"
    assert (code, doc) == (1, {"error": "unknown GPU 'foo'", "hint": hint, "exit_code": 1})
    assert err == ["error: unknown GPU 'foo'", f"hint: {hint}"]


def test_resolve_json_refusal_has_the_hint_and_exit_code(capsys):
    code, doc, _ = run(capsys, "resolve", "--target", "h100", "--framework", "torch==1.0", "--json")
    assert code == 3 and doc["exit_code"] == 3 and doc["hint"].startswith("nearest working alternative: torch==")
    assert doc["error"] == "no torch stack satisfies 'torch==1.0' for 9.0 (sm_90, NVIDIA H100 SXM5 80GB)"
    assert list(doc) == ["error", "conflicts", "alternatives", "hint", "exit_code"]


def test_lock_json(project, capsys):
    code, doc, _ = run(capsys, "lock", str(project), "--json")
    assert code == 0
    assert list(doc) == ["name", "lock_hash", "image", "written", "up_to_date", "notes", "base_image", "stack", "ci_stale"]
    lock = json.loads((project / "envman.lock").read_text())
    assert (doc["name"], doc["lock_hash"], doc["image"]) == ("demo", lock["lock_hash"], f"demo:{lock['lock_hash'][:12]}")
    assert "envman.lock" in doc["written"] and "Dockerfile" in doc["written"] and not doc["up_to_date"]
    assert doc["stack"]["python"] == "3.11" and doc["stack"]["framework"] is None and doc["ci_stale"] == []
    code, again, _ = run(capsys, "lock", str(project), "--json")
    assert (code, again["written"], again["up_to_date"], again["lock_hash"]) == (0, [], True, doc["lock_hash"])


def test_lock_check_json(project, capsys):
    assert main(["lock", str(project)]) == 0
    capsys.readouterr()
    code, doc, err = run(capsys, "lock", str(project), "--check", "--json")
    assert (code, doc, err) == (0, {"current": True, "stale": []}, ["envman.lock is current"])
    (project / "envman.yaml").write_text(SPEC + "system_packages: [curl]\n")
    code, doc, err = run(capsys, "lock", str(project), "--check", "--json")
    assert (code, doc) == (1, {"current": False, "stale": ["envman.yaml changed since the lock"]})
    assert err == ["stale: envman.yaml changed since the lock", "hint: run `envman lock` and commit the result"]


def test_lock_json_error_is_a_document_on_stdout(tmp_path, capsys):
    code, doc, err = run(capsys, "lock", str(tmp_path), "--json")
    assert code == 1 and doc["exit_code"] == 1 and set(doc) == {"error", "hint", "exit_code"}
    assert err == [f"error: {doc['error']}", f"hint: {doc['hint']}"]


def test_init_json(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(envman.lock.registry, "resolve_digest", lambda ref, timeout=3.0: None)
    (tmp_path / "requirements.txt").write_text("six\n")
    code, doc, _ = run(capsys, "init", str(tmp_path), "--cpu", "--python", "3.11", "--no-lock", "--json")
    assert code == 0 and doc["stack"]["python"] == "3.11"
    assert "envman.yaml" in doc["written"] and doc["image"] == f"{doc['name']}:{doc['lock_hash'][:12]}"


def test_init_json_refusal(tmp_path, capsys):
    code, doc, err = run(capsys, "init", str(tmp_path), "--target", "h100", "--framework", "torch==1.0", "--json")
    assert code == 3 and doc["exit_code"] == 3 and doc["conflicts"] and doc["error"].startswith("no torch stack satisfies")
    assert err[0] == f"error: {doc['error']}"
    assert not (tmp_path / "envman.yaml").exists()


def test_build_json_keeps_stdout_for_the_document(tmp_path, monkeypatch, capsys):
    import envman.app.build as app_build

    smoke = SimpleNamespace(failed=False, no_gpu=True)

    def fake_build(root, opts, echo, progress=None):
        echo("engine: fake")
        return [app_build.BuildOutcome(None, "demo:0123456789ab", True, smoke=smoke)]

    monkeypatch.setattr(app_build, "build_project", fake_build)
    code, doc, err = run(capsys, "build", str(tmp_path), "--json")
    assert (code, err) == (0, ["engine: fake"])
    assert doc == {"images": [{"profile": None, "image": "demo:0123456789ab", "built": True, "smoke": "passed-without-gpu",
                               "pushed": None, "notes": []}], "exit_code": 0}


def test_build_json_error(tmp_path, capsys):
    code, doc, err = run(capsys, "build", str(tmp_path), "--json", "--progress", "fancy")
    hint = "write --progress plain for a CI log, --progress tty for a terminal, or leave it out"
    assert (code, doc) == (1, {"error": "--progress 'fancy': expected tty or plain", "hint": hint, "exit_code": 1})
    assert err[0] == "error: --progress 'fancy': expected tty or plain"


def test_without_json_the_files_written_under_envman_are_named(project, capsys):
    """The one-file kit made the fixed "expected stack, smoke script, doctor kit" wrong: the files are named."""
    assert main(["init", str(project), "--no-lock"]) == 0
    wrote = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("wrote: ")]
    assert wrote == ["wrote: Dockerfile, .dockerignore, compose.yaml, .devcontainer/devcontainer.json, "
                     "envman.lock, .envman/ (stack.json, sbom.cdx.json, kit.py)"]
