"""The doctor judges the CUDA source builds a project is about to run from what will be installed (issue 20,
pattern 7): lm-sys/FastChat's image failed its smoke test on ``ext-no-cuda-home`` for flash-attn, which only
its optional extra ``train`` names and the image (built from a lock without it) does not install.

Facts come from the real probes (facts/project.py) on the corpus fixture's pyproject.toml and a lock written
here; checks from the real run_checks with the frozen test matrix.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from envman.matrix.knowledge import knowledge_from_matrix, with_extensions
from envman.matrix.load import load_matrix
from envman.portable import smoke
from envman.portable.doctor.checks import run_checks
from envman.portable.facts.project import probe_lock, read_build_intent
from tests import corpus

FIX = Path(__file__).resolve().parent.parent / "fixtures"
K = with_extensions(knowledge_from_matrix(load_matrix(FIX / "matrix")), FIX / "matrix")


def facts(project: Path, **kw) -> dict:
    """The image FastChat's smoke test ran the doctor in: torch 2.7.1+cu128 on an H100, no CUDA toolkit."""
    return {"in_container": True, "wsl": 0, "driver": "570.124.06", "python": {"version": "3.11.9", "bits": 64},
            "gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "cc": "9.0", "mem_total_mib": 81559}],
            "gpu_processes": [], "env": {}, "gcc": None, "nvcc": None, "cuda_home": None,
            "torch": {"version": "2.7.1+cu128", "cuda": "12.8"}, "pip": {"torch": "2.7.1+cu128", "fschat": "0.2.36"},
            "build_intent": read_build_intent(str(project)), "lock": probe_lock(str(project)), **kw}


def project(tmp_path: Path, pins: list[str] | None, pyproject: str | None = None) -> Path:
    if pyproject is None:
        shutil.copy(corpus.repo("lm-sys__FastChat") / "pyproject.toml", tmp_path / "pyproject.toml")
    else:
        (tmp_path / "pyproject.toml").write_text(pyproject)
    if pins is not None:
        (tmp_path / "envman.lock").write_text(json.dumps({
            "lock_version": 1, "stack": {"framework": {"name": "torch", "version": "2.7.1", "variant": "cu128"}},
            "python_lock": {"requirements": "requirements.lock.txt"}}))
        (tmp_path / "requirements.lock.txt").write_text("".join(f"{p} \\\n    --hash=sha256:{'0' * 64}\n" for p in pins))
    return tmp_path


def toolkit(f: dict) -> list[tuple[str, str]]:
    return [(x.severity, x.verdict) for x in run_checks(f, K) if x.check == "ext-no-cuda-home"]


def test_an_optional_extra_is_a_warning_that_does_not_fail_the_image(tmp_path):
    """The image as FastChat's was: its source without envman.lock (the Dockerfile prunes the lock files), so only
    the project's files say what an install takes; the extra is named in a warning, and the smoke test passes."""
    f = facts(project(tmp_path, None))
    assert f["build_intent"] == [{"package": "flash-attn", "file": "pyproject.toml", "extra": "train",
                                  "line": 'train = ["einops", "flash-attn>=2.0", "wandb"]'}]
    [(severity, verdict)] = toolkit(f)
    assert severity == "warn"
    assert "(flash-attn in pyproject.toml's extra train, not installed yet)" in verdict
    [doctor] = smoke.evaluate_doctor([x.to_dict() for x in run_checks(f, K)])
    assert doctor["status"] == "pass", doctor["detail"]


def test_a_lock_that_does_not_hold_the_build_silences_it(tmp_path):
    """Beside a lock (the host's project directory), the lock says what is installed: flash-attn is not in it."""
    f = facts(project(tmp_path, ["fschat==0.2.36", "torch==2.7.1+cu128", "shortuuid==1.0.13"]))
    assert f["lock"]["packages"]["fschat"] == "0.2.36"
    assert toolkit(f) == []


def test_a_locked_build_that_is_not_installed_stays_an_error(tmp_path):
    """The near miss: the lock holds flash-attn (its extra was asked for) and the image has not got it."""
    [(severity, _)] = toolkit(facts(project(tmp_path, ["fschat==0.2.36", "flash-attn==2.8.3", "torch==2.7.1+cu128"])))
    assert severity == "error"


def test_a_required_build_stays_an_error_and_wins_over_its_extra(tmp_path):
    text = ('[project]\nname = "x"\ndependencies = ["flash-attn>=2.0"]\n\n'
            '[project.optional-dependencies]\ntrain = ["flash-attn==2.8.3"]\n')
    f = facts(project(tmp_path, None, text))
    assert [e.get("extra") for e in f["build_intent"]] == [None]
    assert [s for s, _ in toolkit(f)] == ["error"]


def test_only_requirement_tables_name_builds(tmp_path):
    """uv's settings name packages that are no requirement (NeMo-RL's no-build-isolation-package list); Poetry's
    groups and optional packages, dependency groups are extras; a `==` pin is no table key."""
    (tmp_path / "pyproject.toml").write_text(
        '[tool.poetry.dependencies]\npython = "^3.10"\nxformers = {version = "^0.0.28", optional = true}\n'
        '[tool.poetry.group.gpu.dependencies]\ndeepspeed = "^0.16"\n'
        '[dependency-groups]\ncuda = [\n  "mamba-ssm==2.2.4",\n  "causal-conv1d==1.5.0",\n]\n'
        '[tool.uv]\nno-build-isolation-package = ["flash-attn"]\n'
        '[tool.uv.sources]\napex = { git = "https://github.com/NVIDIA/apex" }\n')
    got = {e["package"]: e.get("extra") for e in read_build_intent(str(tmp_path))}
    assert got == {"xformers": "optional", "deepspeed": "gpu", "mamba-ssm": "cuda", "causal-conv1d": "cuda"}
