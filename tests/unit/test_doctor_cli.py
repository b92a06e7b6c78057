"""``envman doctor`` on the command line: --facts, --json, --strict, --dump-facts, exit codes, error lines."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from envman.cli.main import main

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "facts"
HEALTHY = str(FIX / "h200_driver580_torch211_cu130.json")
BROKEN = str(FIX / "container_no_gpu.json")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_CACHE_DIR", str(tmp_path / "cache"))


def doctor(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["doctor", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_errors_exit_1_and_report_starts_with_the_verdict(capsys):
    code, out, err = doctor(capsys, "--facts", BROKEN)
    assert code == 1 and err == ""
    assert out.startswith("verdict: training will NOT work here: 1 error, 1 warning")
    assert "[container-no-gpu]" in out


def test_healthy_machine_exits_0(capsys):
    code, out, _ = doctor(capsys, "--facts", HEALTHY)
    assert code == 0 and out.startswith("verdict: ready")


def test_json_report(capsys):
    code, out, _ = doctor(capsys, "--facts", BROKEN, "--json")
    d = json.loads(out)
    assert code == 1
    assert d["status"] == "error" and d["counts"]["error"] == 1
    assert d["verdict"].startswith("training will NOT work here: 1 error, 1 warning (torch 2.7.1+cu128")
    assert {f["check"] for f in d["findings"]} >= {"container-no-gpu", "shm-small"}
    assert all(set(f) == {"severity", "check", "verdict", "remedy"} for f in d["findings"])


def test_warnings_fail_only_with_strict(capsys, tmp_path):
    facts = tmp_path / "warn.json"
    facts.write_text(json.dumps({"schema": 1, "in_container": True, "shm_mib": 64, "gpus": []}))
    assert doctor(capsys, "--facts", str(facts))[0] == 0
    assert doctor(capsys, "--facts", str(facts), "--strict")[0] == 1


def test_missing_facts_file_is_one_error_line(capsys, tmp_path):
    missing = tmp_path / "nope.json"
    code, out, err = doctor(capsys, "--facts", str(missing))
    assert code == 1 and out == ""
    assert err == (f"error: facts file {missing}: not found\n"
                   "hint: create it on the machine to diagnose with `envman doctor --dump-facts facts.json`\n")


@pytest.mark.parametrize("content, message", [
    ("{not json", "not valid JSON (line 1, column 2: Expecting property name enclosed in double quotes)"),
    ("[1, 2]", "expected a JSON object at the top, got list"),
    ('{"schema": 99}', "schema 99 is newer than this envman reads (1)"),
])
def test_corrupt_facts_file(capsys, tmp_path, content, message):
    bad = tmp_path / "facts.json"
    bad.write_text(content)
    code, out, err = doctor(capsys, "--facts", str(bad))
    assert code == 1 and out == ""
    assert err.splitlines()[0] == f"error: facts file {bad}: {message}"
    assert err.splitlines()[1].startswith("hint: ") and "Traceback" not in err


def test_facts_and_deep_do_not_mix(capsys):
    code, _, err = doctor(capsys, "--facts", HEALTHY, "--deep")
    assert code == 1 and err.startswith("error: --facts judges a recorded file; --deep probes this machine")


def test_missing_python(capsys, tmp_path):
    code, _, err = doctor(capsys, "--python", str(tmp_path / "python"))
    assert code == 1 and err.startswith(f"error: --python {tmp_path / 'python'}: not found\nhint: ")


def test_missing_project_directory(capsys, tmp_path):
    code, _, err = doctor(capsys, str(tmp_path / "absent"))
    assert code == 1 and err.startswith(f"error: project directory {tmp_path / 'absent'}: not found")


def test_broken_matrix_is_a_warning_and_the_rest_still_judges(capsys, monkeypatch):
    import envman.app.doctor as app_doctor

    monkeypatch.setattr(app_doctor, "_load_knowledge", lambda out: out.update(error="torch.yaml: (file): cannot read"))
    code, out, _ = doctor(capsys, "--facts", BROKEN)
    assert code == 1 and "[container-no-gpu]" in out
    assert ("[matrix-unavailable] envman's compatibility data cannot be loaded (torch.yaml: (file): cannot read): "
            "checks that need it are skipped") in out


def test_dump_facts_round_trips_and_writes_atomically(capsys, tmp_path):
    out_file = tmp_path / "out" / "facts.json"
    code, _, _ = doctor(capsys, "--facts", BROKEN, "--dump-facts", str(out_file))
    assert code == 1
    assert json.loads(out_file.read_text()) == json.loads(Path(BROKEN).read_text())
    assert [p.name for p in out_file.parent.iterdir()] == ["facts.json"]  # no temp file left behind


def test_dump_facts_of_this_machine(capsys, tmp_path):
    out_file = tmp_path / "facts.json"
    doctor(capsys, str(tmp_path), "--dump-facts", str(out_file))
    facts = json.loads(out_file.read_text())
    for key in ("schema", "os", "kernel", "in_container", "python", "pip", "env", "disks", "docker"):
        assert key in facts, key
    assert facts["project"] == str(tmp_path) and facts["lock"] is None


def test_dump_facts_to_stdout(capsys):
    code, out, _ = doctor(capsys, "--facts", HEALTHY, "--dump-facts", "-")
    assert code == 0 and json.loads(out)["driver"] == "580.95.05"


def test_whole_process(tmp_path):
    """The console script's path: a fresh interpreter, the real error boundary and exit status."""
    env = {"ENVMAN_CACHE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    run = subprocess.run([sys.executable, "-c", "from envman.cli.main import run; run()", "doctor", "--facts", BROKEN,
                          "--json"], capture_output=True, text=True, env=env, timeout=60)
    assert run.returncode == 1, run.stderr
    assert json.loads(run.stdout)["status"] == "error"


# --- --dockerfile: a Dockerfile judged before it is built ----------------------------------------------------


def test_a_dockerfile_is_judged_for_the_target_gpus(capsys, tmp_path):
    df = tmp_path / "Dockerfile"
    df.write_text("FROM nvidia/cuda:11.8.0-devel-ubuntu22.04\nRUN apt-get install -y python3-pip\nRUN pip install torch\n")
    code, out, err = doctor(capsys, "--dockerfile", str(df), "--target", "h100")
    assert (code, err) == (0, "")  # two CUDAs is a warning: the image works, at a cost
    assert out.startswith(f"== {df} (judged for h100 (--target))\nverdict: ready, with 1 warning (torch 2.")
    assert "[dockerfile-two-cudas]" in out
    code, out, _ = doctor(capsys, "--dockerfile", str(df), "--target", "h100", "--json", "--strict")
    d = json.loads(out)
    assert code == 1 and d["dockerfiles"][0]["path"] == str(df)
    assert [f["check"] for f in d["dockerfiles"][0]["findings"]] == ["dockerfile-two-cudas"]


def test_a_project_directory_means_its_own_dockerfiles(capsys, tmp_path):
    (tmp_path / "Dockerfile").write_text("# generated by envman — inputs sha256:00\nFROM python:3.12-slim\n")
    (tmp_path / "docker").mkdir()
    (tmp_path / "docker" / "Dockerfile.gpu").write_text("FROM python:3.15-slim\nRUN pip install torch\n")
    (tmp_path / "envman.yaml").write_text("name: p\nframework: torch\ntargets: [a100]\n")
    code, out, _ = doctor(capsys, str(tmp_path), "--dockerfile", str(tmp_path))
    assert code == 1 and out.count("== ") == 1  # the one envman generated is left alone
    assert "judged for a100 (envman.yaml targets)" in out and "[dockerfile-no-wheel]" in out


def test_dockerfile_errors_are_one_line(capsys, tmp_path):
    code, out, err = doctor(capsys, "--dockerfile", str(tmp_path / "nope"), "--target", "h100")
    assert code == 1 and err.splitlines()[0] == f"error: Dockerfile {tmp_path / 'nope'}: not found"
    code, _, err = doctor(capsys, "--dockerfile", str(tmp_path / "nope"), "--target", "h99")
    assert code != 0 and err.startswith("error: unknown GPU 'h99'")
    code, _, err = doctor(capsys, "--target", "h100")
    assert code == 1 and err.startswith("error: --target names the GPUs a Dockerfile is judged for")
