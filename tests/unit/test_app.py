"""The use cases in envman.app called as a library: plain arguments in, values out, no Typer, nothing printed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from envman.app import ci as app_ci
from envman.app import doctor as app_doctor
from envman.app import smoke as app_smoke
from envman.app.fetch import fetch_wheelhouse
from envman.app.matrix import SUBJECTS, show_matrix
from envman.app.resolve import detected_targets, refusal_json, resolution_json, resolve_request
from envman.errors import ResolutionError, UsageError
from envman.matrix.load import load_matrix
from envman.portable.facts import nvidia

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
FACTS = FIXTURES / "facts"
HEALTHY = str(FACTS / "h200_driver580_torch211_cu130.json")
BROKEN = str(FACTS / "container_no_gpu.json")


@pytest.fixture(scope="module")
def fixture_matrix():
    return load_matrix(FIXTURES / "matrix")


@pytest.fixture
def one_4090(monkeypatch):
    scan = nvidia.GpuScan(driver="570.133.07", gpus=[nvidia.LocalGpu(0, "NVIDIA GeForce RTX 4090", "8.9", 24564)],
                          source="nvml")
    monkeypatch.setattr(nvidia, "scan_gpus", lambda: scan)


@pytest.fixture
def no_gpu(monkeypatch):
    scan = nvidia.GpuScan(error="NVML: Driver Not Loaded; nvidia-smi not found")
    monkeypatch.setattr(nvidia, "scan_gpus", lambda: scan)


# --- resolve ----------------------------------------------------------------------------------------


def test_resolve_request_for_explicit_targets(fixture_matrix):
    res = resolve_request("torch", targets=["h100"], matrix=fixture_matrix)
    assert resolution_json(res)["framework"] == {"name": "torch", "version": "2.14.1", "variant": "cu130",
                                                 "index_url": None}
    assert [t.label for t in res.targets] == ["NVIDIA H100 SXM5 80GB"]
    assert not any(n.startswith("targets: detected") for n in res.notes)


def test_resolve_request_without_targets_uses_this_machines_gpus_and_driver(fixture_matrix, one_4090):
    res = resolve_request("torch", matrix=fixture_matrix)
    assert res.notes[:2] == ("targets: detected via nvml: NVIDIA GeForce RTX 4090 (8.9)",
                             "driver: 570.133.07 detected on this machine")
    assert res.driver == "570.133.07" and not res.driver_assumed
    assert [t.cc.sm for t in res.targets] == ["sm_89"]


def test_resolve_request_refusal_is_an_exception_with_data(fixture_matrix):
    with pytest.raises(ResolutionError) as ei:
        resolve_request("torch==2.5.*", targets=["rtx-5090"], matrix=fixture_matrix)  # sm_120 needs torch >= 2.7
    assert set(refusal_json(ei.value)) == {"error", "conflicts", "alternatives"}


def test_cpu_stack_detects_nothing(fixture_matrix, no_gpu):
    res = resolve_request("torch", cpu=True, matrix=fixture_matrix)
    assert res.cuda is None and not res.targets


def test_detected_targets_names_known_gpus_by_id_and_others_by_sm(fixture_matrix, monkeypatch):
    scan = nvidia.GpuScan(driver="580.95.05", source="nvidia-smi", gpus=[
        nvidia.LocalGpu(0, "NVIDIA GeForce RTX 4090", "8.9", 24564),
        nvidia.LocalGpu(1, "NVIDIA GeForce RTX 4090", "8.9", 24564),
        nvidia.LocalGpu(2, "NVIDIA Prototype X1", "8.9", 23034),  # not in the matrix
    ])
    monkeypatch.setattr(nvidia, "scan_gpus", lambda: scan)
    targets, driver, note = detected_targets(fixture_matrix)
    assert (targets, driver) == (["rtx-4090", "sm_89"], "580.95.05")
    assert note.startswith("targets: detected via nvidia-smi: NVIDIA GeForce RTX 4090 (8.9)")


def test_no_gpu_detected_is_a_usage_error(fixture_matrix, no_gpu):
    with pytest.raises(UsageError) as ei:
        detected_targets(fixture_matrix)
    assert ei.value.message == "no NVIDIA GPU detected on this machine (NVML: Driver Not Loaded; nvidia-smi not found)"
    assert ei.value.hint.startswith("pass --target GPU") and "--cpu" in ei.value.hint


def test_init_detects_the_gpus_itself(tmp_path, no_gpu):
    from envman.app.init import InitOptions, init_project

    (tmp_path / "requirements.txt").write_text("numpy\n")
    with pytest.raises(UsageError, match="no NVIDIA GPU detected on this machine"):
        init_project(tmp_path, InitOptions(no_lock=True))
    assert [p.name for p in tmp_path.iterdir()] == ["requirements.txt"]


# --- matrix -----------------------------------------------------------------------------------------


def test_show_matrix_rows(fixture_matrix):
    header, rows = show_matrix("gpus", fixture_matrix)
    assert header == ["id", "name", "cc", "memory_gib", "segment", "aliases"]
    ids = [r[0] for r in rows]
    assert sorted(ids) == sorted(g.id for g in fixture_matrix.gpus)
    by_id = {g.id: g for g in fixture_matrix.gpus}
    keys = [(by_id[i].segment, by_id[i].cc, i) for i in ids]
    assert keys == sorted(keys)  # by segment, then capability
    for subject in SUBJECTS:
        header, rows = show_matrix(subject, fixture_matrix)
        assert rows and all(len(r) == len(header) for r in rows), subject


def test_show_matrix_unknown_subject():
    with pytest.raises(UsageError) as ei:
        show_matrix("gpu")
    assert (ei.value.message, ei.value.hint) == ("unknown matrix subject 'gpu'", "did you mean gpus?")


# --- doctor -----------------------------------------------------------------------------------------


@pytest.fixture
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.usefixtures("_private_cache")
def test_run_doctor_returns_a_report():
    healthy = app_doctor.run_doctor(facts_file=HEALTHY)
    assert not healthy.has_errors and healthy.text().startswith("verdict: ready")
    broken = app_doctor.run_doctor(facts_file=BROKEN)
    assert broken.has_errors and broken.has_warnings
    assert broken.to_json()["verdict"].startswith("training will NOT work here: 1 error, 1 warning")


@pytest.mark.usefixtures("_private_cache")
def test_run_doctor_writes_the_facts_it_judged(tmp_path):
    out = tmp_path / "facts.json"
    rep = app_doctor.run_doctor(facts_file=BROKEN, dump_facts=str(out))
    assert json.loads(out.read_text()) == rep.facts == json.loads(Path(BROKEN).read_text())


def test_judge_without_knowledge_warns_and_still_judges():
    facts = json.loads(Path(BROKEN).read_text())
    rep = app_doctor.judge_facts(facts, None, "torch.yaml: (file): cannot read")
    checks = [f.check for f in rep.findings]
    assert "matrix-unavailable" in checks and "container-no-gpu" in checks


def test_doctor_arguments_are_checked_before_anything_runs(tmp_path):
    with pytest.raises(UsageError, match=r"^--facts judges a recorded file; --deep probes this machine$"):
        app_doctor.collect_facts(facts_file=HEALTHY, deep=True)
    with pytest.raises(UsageError, match=r"^project directory .*absent: not found$"):
        app_doctor.run_doctor(str(tmp_path / "absent"))


# --- smoke ------------------------------------------------------------------------------------------


class FakeEngine:
    def __init__(self, images=(), result=(0, "", "")):
        self.images, self.result, self.calls = set(images), result, []

    def image_exists(self, ref):
        return ref in self.images

    def has_nvidia_runtime(self):
        return False

    def run(self, image, command, **kw):
        self.calls.append((image, command, kw))
        return self.result


def test_smoke_host_needs_a_lock_here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match="^no envman.lock here to take the expected stack from$"):
        app_smoke.smoke_host()


def test_smoke_image_needs_the_image_on_the_engine():
    with pytest.raises(UsageError) as ei:
        app_smoke.smoke_image("img:1", engine=FakeEngine())
    assert (ei.value.message, ei.value.hint) == ("no image img:1 on the engine", "build it first: envman build")


def test_smoke_image_runs_the_baked_program(monkeypatch):
    monkeypatch.setattr(app_smoke, "host_has_nvidia_gpu", lambda: False)
    report = {"checks": [], "exit_code": 0, "status": "passed", "notes": []}
    engine = FakeEngine({"img:1"}, (0, json.dumps(report), ""))
    r = app_smoke.smoke_image("img:1", engine=engine)
    assert r.passed and r.where == "img:1" and not r.gpus
    assert engine.calls[0][2]["binds"] == {}  # the image's own program and stack: nothing mounted


# --- fetch ------------------------------------------------------------------------------------------


def test_fetch_needs_a_python_version(tmp_path):
    with pytest.raises(UsageError) as ei:
        fetch_wheelhouse(tmp_path)
    assert ei.value.message == f"no Python version for the target: {tmp_path / 'envman.lock'} has no stack.python"


# --- ci ---------------------------------------------------------------------------------------------


def test_ci_pipeline_outcome_and_the_lock_reminder(tmp_path):
    d = tmp_path / "profiles"
    shutil.copytree(FIXTURES / "ci" / "projects" / "profiles", d)
    assert app_ci.stale_ci_files(d) == [] and app_ci.check_ci(d) == ([], [])
    out = app_ci.write_pipeline("github", d, registry="ghcr.io/acme", gpu_runners=["hopper=gpu,h100"], envman_spec="envman @ git+https://git.example.com/acme/envman@" + "5" * 40)
    assert [p.relative_to(d).as_posix() for p in out.written] == [".github/workflows/envman.yml", "docker-bake.json"]
    assert out.profiled and out.has_registry and out.registry_host == "ghcr.io"
    runners = {i.profile: i.runner for i in out.images}
    assert runners["hopper"] == ("gpu", "h100") and runners["legacy"] == ()
    assert all(i.tag.startswith("ghcr.io/acme/") for i in out.images)
    assert app_ci.write_pipeline("github", d, registry="ghcr.io/acme", gpu_runners=["hopper=gpu,h100"], envman_spec="envman @ git+https://git.example.com/acme/envman@" + "5" * 40).written == ()
    lock = json.loads((d / "envman.legacy.lock").read_text())
    lock["lock_hash"] = "f" * 64
    (d / "envman.legacy.lock").write_text(json.dumps(lock))
    assert app_ci.stale_ci_files(d) == [
        ".github/workflows/envman.yml was generated from other locks: "
        "re-run `envman ci github` with the options you used",
        "docker-bake.json was generated from other locks: re-run `envman ci bake` with the options you used",
    ]
