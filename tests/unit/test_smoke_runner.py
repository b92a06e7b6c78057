"""envman.smoke_runner and `envman smoke`: the script run on this host for real, in an image through a fake engine."""

from __future__ import annotations

import json
import sys

import pytest
from fakes import FakeEngine

from envman.app import smoke as sr
from envman.cli.main import main
from envman.engine.docker import RunTimeout
from envman.errors import EXIT_SMOKE, UsageError

PY = "%d.%d" % sys.version_info[:2]
STACK = {"schema": 1, "framework": None, "cuda": None, "cudnn": None, "nccl": None, "python": PY,
         "arch_list": [], "imports": [["pyyaml", "yaml"]], "lock_hash": "f" * 64}


@pytest.fixture
def stack_file(tmp_path):
    p = tmp_path / "stack.json"
    p.write_text(json.dumps(STACK))
    return p


def test_host_run_relays_exit_6_and_the_report(stack_file):
    r = sr.run_smoke_host(stack_file)
    assert (r.exit_code, r.where, r.no_gpu, r.cli_exit_code()) == (6, "host", True, 6)
    assert r.report["notes"] == ["GPU checks skipped: no GPU visible"]
    assert r.summary().splitlines()[-1] == "smoke test passed without GPU checks (exit 6)"


def test_host_run_from_a_lock_that_embeds_the_stack(tmp_path):
    lock = tmp_path / "envman.lock"
    lock.write_text(json.dumps({"lock_hash": "abc", "stack": {k: v for k, v in STACK.items() if k != "lock_hash"}}))
    r = sr.run_smoke_host(lock, require_gpu=True)
    assert r.exit_code == 1 and r.failed and r.report["lock_hash"] == "abc"
    assert [c["name"] for c in r.report["checks"] if c["status"] == "fail"] == ["gpu required"]


# The shape `envman lock` writes (tests/golden/tensorflow/envman.lock): no imports, a framework index_url.
LOCK = {"lock_hash": "b0" * 32, "stack": {
    "arch_list": ["sm_75"], "ptx": ["sm_80"], "companions": {}, "cuda": "11.8", "cudnn": "8.6",
    "framework": {"index_url": None, "name": "tensorflow", "variant": "cu118", "version": "2.13.1"},
    "min_driver": "520.61.05", "nccl": None, "python": "3.10", "targets": []}}


def test_expected_stack_from_an_envman_lock():
    assert sr.expected_stack(LOCK) == {
        "schema": 1, "lock_hash": "b0" * 32,
        "framework": {"name": "tensorflow", "version": "2.13.1", "variant": "cu118"},
        "cuda": "11.8", "cudnn": "8.6", "nccl": None, "python": "3.10", "arch_list": ["sm_75"], "imports": []}
    cpu = {"stack": dict(LOCK["stack"], framework={"name": "torch", "version": "2.13.0", "variant": "cpu"})}
    assert sr.expected_stack(cpu)["cuda"] is None


def test_the_stack_file_beside_a_lock_is_preferred_when_it_belongs_to_it(tmp_path):
    lock = tmp_path / "envman.gpu.lock"
    lock.write_text(json.dumps(LOCK))
    baked = tmp_path / ".envman" / "stack.gpu.json"
    assert sr.baked_stack_for(lock) == baked
    baked.parent.mkdir()
    baked.write_text(json.dumps(dict(STACK, lock_hash="b0" * 32)))
    assert sr.write_expect_file(lock, tmp_path) == baked
    baked.write_text(json.dumps(dict(STACK, lock_hash="stale")))
    derived = sr.write_expect_file(lock, tmp_path / "out")
    assert derived != baked and json.loads(derived.read_text())["python"] == "3.10"


def test_expected_stack_refuses_unrelated_json():
    with pytest.raises(UsageError, match="no expected stack in this file"):
        sr.expected_stack({"name": "x"})


def test_parse_report_skips_stray_lines():
    assert sr.parse_report('warning: x\n{"checks": [], "exit_code": 0}\n') == {"checks": [], "exit_code": 0}
    assert sr.parse_report("Segmentation fault\n") is None


def test_in_image_run_binds_script_and_expect_read_only(stack_file):
    report = {"checks": [], "exit_code": 0, "status": "passed", "notes": []}
    e = FakeEngine((0, json.dumps(report), ""))
    r = sr.run_smoke_in_image(e, "img:1", gpus=True, expect=stack_file, mount_kit=True)
    assert r.passed and r.gpus and r.cli_exit_code() == 0
    _image, cmd, kw = e.runs[0]
    assert cmd == ["python3", "-c", sr.KIT_FIRST, "--json", "--expect", "/opt/envman/stack.json"]
    assert kw["gpus"] is True and kw["network"] is False
    assert kw["env"] == {"NVIDIA_DRIVER_CAPABILITIES": "compute,utility"}  # the image's PYTHONPATH is its own
    assert sorted(kw["binds"].values()) == ["/opt/envman/kit", "/opt/envman/stack.json"]


def as_the_container_runs(cmd, env, binds, image_env):
    """What the engine does with ``run``: the image's env overlaid by run's ``env``, each bind at its target (here
    the target's text replaced by the host folder: the command names only /opt/envman/...)."""
    import os
    import subprocess

    def here(word: str) -> str:
        for host, target in binds.items():
            word = word.replace(target, str(host))
        return word

    return subprocess.run([sys.executable, *map(here, cmd[1:])], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **image_env, **env}, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("where", ["image", "host"])
def test_project_code_on_the_images_pythonpath_is_found_not_reported_missing(tmp_path, where, monkeypatch):
    """The kit's PYTHONPATH replaced the image's (`ENV PYTHONPATH=/app/src`), so a module reachable only through it
    was reported missing. On the real engine: tests/integration/test_smoke_entry.py."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "projmod.py").write_text("VALUE = 1\n")
    stack = tmp_path / "stack.json"
    stack.write_text(json.dumps({**STACK, "imports": [["projmod", "projmod"]]}))
    monkeypatch.setenv("PYTHONPATH", str(src))  # the image's own, or the host's
    if where == "host":
        r = sr.run_smoke_host(stack)
    else:
        e = FakeEngine((0, "", ""))
        sr.run_smoke_in_image(e, "img:1", gpus=False, expect=stack, mount_kit=True)
        _image, cmd, kw = e.runs[0]
        kit = tmp_path / "kit"
        sr.write_kit(kit)
        binds = {kit: "/opt/envman/kit", stack: "/opt/envman/stack.json"}
        p = as_the_container_runs(cmd, kw["env"], binds, {"PYTHONPATH": str(src)})
        r = sr.run_smoke_in_image(FakeEngine((p.returncode, p.stdout, p.stderr)), "img:1", gpus=False)
    assert (r.exit_code, r.report["status"]) == (6, "no-gpu"), r.report


def test_gpus_only_when_the_host_has_gpus_and_the_runtime(monkeypatch):
    monkeypatch.setattr(sr, "host_has_nvidia_gpu", lambda: True)
    assert sr.gpu_access(FakeEngine(nvidia=True)) and not sr.gpu_access(FakeEngine(nvidia=False))
    monkeypatch.setattr(sr, "host_has_nvidia_gpu", lambda: False)
    assert not sr.gpu_access(FakeEngine(nvidia=True))


def test_no_report_is_a_failure_exit_5():
    r = sr.run_smoke_in_image(FakeEngine((139, "", "Segmentation fault (core dumped)")), "img:1", gpus=False)
    assert r.failed and r.cli_exit_code() == EXIT_SMOKE
    assert "Segmentation fault" in r.report["checks"][0]["detail"]


def test_timeout_is_a_failure():
    e = FakeEngine(exc=RunTimeout("container of img:1 ran past 900 s and was removed", "", "half"))
    r = sr.run_smoke_in_image(e, "img:1", gpus=False)
    assert r.failed and "ran past 900 s" in r.report["checks"][0]["detail"]


def test_save_report_writes_json_atomically(tmp_path, stack_file):
    r = sr.run_smoke_host(stack_file)
    out = sr.save_report(r, tmp_path / sr.REPORT_NAME)
    data = json.loads(out.read_text())
    assert (data["where"], data["exit_code"], data["gpus_requested"]) == ("host", 6, False)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_cli_smoke_host(stack_file, tmp_path, capsys):
    assert main(["smoke", "--host", "--expect", str(stack_file), "--save", str(tmp_path / "r.json")]) == 6
    out = capsys.readouterr().out
    assert out.startswith("smoke test on this host:\n")
    assert "GPU checks skipped: no GPU visible" in out
    assert json.loads((tmp_path / "r.json").read_text())["status"] == "no-gpu"


def test_cli_smoke_host_json(stack_file, capsys):
    assert main(["smoke", "--host", "--expect", str(stack_file), "--json"]) == 6
    assert json.loads(capsys.readouterr().out)["status"] == "no-gpu"


def test_cli_smoke_needs_a_place(capsys):
    assert main(["smoke"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "error: say where to run the smoke test: --host (this machine) or --image REF",
        "hint: envman smoke --host --expect envman.lock",
    ]


@pytest.mark.parametrize("script_code, image_code", [(0, 0), (1, EXIT_SMOKE), (6, 6)])
def test_cli_maps_the_verdict_to_its_exit_codes(script_code, image_code):
    from envman.app.build import BuildOutcome
    from envman.cli import build as cli_build
    from envman.cli import smoke as cli_smoke

    r = sr.SmokeResult(script_code, {}, "img:1", False)
    assert cli_smoke.exit_code(r, host=True) == script_code  # --host relays the script's own code
    assert cli_smoke.exit_code(r, host=False) == image_code == r.cli_exit_code()
    built = BuildOutcome(None, "img:1", True, smoke=r)
    assert cli_build.exit_code(built) == (EXIT_SMOKE if script_code == 1 else 0)
    assert cli_build.exit_code(BuildOutcome(None, "img:1", False)) == 0  # reused, or --no-smoke
