"""A framework envman does not ship, added from outside its modules: a toy ``Framework`` (names, matrix file,
schema loader, pin format) and a toy smoke plug-in, registered for the test only. It loads from its own
matrix file, resolves, renders a Dockerfile and a smoke expectation, is found in requirements, and the smoke
program evaluates recorded observations of it — the path docs/frameworks.md describes for JAX."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from envman import frameworks
from envman._validate import dupes, items, opt_str, pythons
from envman.errors import MatrixError
from envman.frameworks import Framework
from envman.model import FrameworkRelease, Variant
from envman.portable import frameworks as smoke_frameworks
from envman.portable import smoke
from envman.portable.frameworks.base import Installed, Plugin, check, error, split_local

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


# ---------------------------------------------------------------------------- host side: the Framework
def load_toy_releases(doc, ctx):
    """toyfw.yaml: releases → builds, one CUDA wheel each (plus the CPU build every release has)."""
    out = []
    for p, e in items(ctx, doc, "releases"):
        ver = ctx.version(e, "version", p)
        py = pythons(ctx, e, p)
        prov = ctx.prov(e, p)
        variants = []
        for j, b in enumerate(ctx.req(e, "builds", p, list) or []):
            bp = f"{p}.builds[{j}]"
            cuda = ctx.version(b, "cuda", bp)
            cudnn = opt_str(ctx, b, "cudnn", bp)
            archs = ctx.archs(b, "archs", bp)
            bprov = ctx.prov(b, bp)
            if cuda is not None:
                variants.append(Variant(f"cu{cuda.major}{cuda.minor}", cuda, cudnn, None, archs, (), None, True, bprov))
        variants.append(Variant("cpu", None, None, None, (), (), None, True, prov))
        if ver is not None:
            out.append(FrameworkRelease("toyfw", ver, py, variants[0].name, (), None, tuple(variants), prov, "toyfw"))
    dupes(ctx, "releases", [r.version for r in out], "toyfw version")
    return tuple(sorted(out, key=lambda r: r.version, reverse=True))


def toy_pins(res, companions):
    """One wheel for every CUDA build, chosen by an extra: ``toyfw[cuda12]==1.2.0`` (JAX's ``jax[cuda12]``)."""
    extra = "" if res.variant == "cpu" or res.cuda is None else f"[cuda{str(res.cuda).split('.')[0]}]"
    return [f"{res.package}{extra}=={res.version}"]


TOY = Framework(
    name="toyfw", matrix_file="toyfw.yaml", load_releases=load_toy_releases,
    distributions=("toyfw",), aliases=("toy",), pins=toy_pins,
)


# ---------------------------------------------------------------------------- image side: the smoke plug-in
def observe_toy(gpu_visible, gpu_evidence):
    obs = {"gpu_visible": gpu_visible, "gpu_evidence": gpu_evidence}
    try:
        import toyfw  # noqa: F401 - not installed anywhere: the observer records the error
    except ImportError as exc:
        obs["import_error"] = error(exc)
    return obs


def evaluate_toy(expect, obs):
    fw = expect["framework"]
    if obs.get("import_error"):
        return [check("framework", False, "toyfw " + fw["version"], None, "toyfw does not import: " + obs["import_error"])]
    return [check("framework version", split_local(obs.get("version"))[0] == fw["version"], fw["version"], obs.get("version"))]


def evaluate_toy_gpu(expect, obs):
    devices = obs.get("devices") or []
    return [check("toyfw devices", bool(devices), ">= 1 GPU", len(devices), " ".join(devices), gpu=True)]


def installed_toy(facts):
    """The doctor's reading of the toy's record: facts["toyfw"] = {"version", "cuda"} (None: a CPU build)."""
    t = facts.get("toyfw")
    if not isinstance(t, dict) or not t.get("version"):
        return None
    cuda = t.get("cuda")
    return Installed("toyfw", t["version"], f"cu{cuda.replace('.', '')}" if cuda else "cpu", cuda,
                     gpu=cuda is not None, cpu_only=cuda is None)


def probe_toy(dists, read):
    """Its record from the dist-info alone (the toy's wheels are named by their CUDA extra)."""
    if "toyfw" not in dists:
        return None
    loc, ver, meta = dists["toyfw"]
    extra = re.search(r"^Provides-Extra: cuda(\d+)", read(os.path.join(loc, meta, "METADATA"), 1 << 16) or "", re.M)
    return {"version": ver, "cuda": f"{extra.group(1)}.8" if extra else None}


TOY_PLUGIN = Plugin("toyfw", observe_toy, evaluate_toy, evaluate_toy_gpu, installed_toy, probe_toy, ("toyfw",))


# ---------------------------------------------------------------------------- fixtures
@pytest.fixture
def toy_dir(tmp_path, monkeypatch) -> Path:
    """The fixture matrix plus toyfw.yaml; the pickled-matrix cache kept inside the test's folder."""
    monkeypatch.setenv("ENVMAN_CACHE_DIR", str(tmp_path / "cache"))
    d = tmp_path / "matrices"
    shutil.copytree(FIXTURES / "matrix", d)
    shutil.copy(FIXTURES / "toyfw" / "toyfw.yaml", d / "toyfw.yaml")
    return d


@pytest.fixture
def toy_matrix(toy_dir):
    from envman.matrix.load import load_matrix

    with frameworks.using(TOY):
        yield load_matrix(toy_dir)


# ---------------------------------------------------------------------------- tests
def test_the_registry_holds_the_toy_only_while_registered(toy_dir):
    from envman.matrix.load import load_matrix

    assert "toyfw" not in load_matrix(toy_dir).frameworks  # its file is ignored while nobody registers it
    with frameworks.using(TOY):
        assert frameworks.get("toyfw") is TOY and frameworks.by_alias("TOY") is TOY
        assert frameworks.by_distribution()["toyfw"] == "toyfw"
        m = load_matrix(toy_dir)
        with pytest.raises(ValueError, match="already registered"):
            frameworks.register(TOY)
    assert [f.name for f in frameworks.registered()] == ["torch", "tensorflow", "jax"]
    assert list(m.frameworks) == ["torch", "tensorflow", "jax", "toyfw"]
    assert [str(r.version) for r in m.frameworks["toyfw"]] == ["1.2.0", "1.1.0"]
    assert [v.name for v in m.frameworks["toyfw"][0].variants] == ["cu128", "cpu"]


def test_the_generic_cross_checks_cover_the_toy_file(toy_dir):
    from envman.matrix.load import load_matrix

    text = (toy_dir / "toyfw.yaml").read_text()
    (toy_dir / "toyfw.yaml").write_text(text.replace('cuda: "12.8"', 'cuda: "10.2"').replace("sm_70, ", "sm70, "))
    with frameworks.using(TOY), pytest.raises(MatrixError) as exc:
        load_matrix(toy_dir)
    assert exc.value.problems == [
        "toyfw.yaml: releases[1].builds[0].archs[0]: not an architecture like sm_86: 'sm70'",
        "toyfw.yaml: 1.2.0 cu102: cuda: 10.2 is not a CUDA release in cuda.yaml",
    ]


def test_a_toy_stack_resolves_by_alias(toy_matrix):
    from envman.lock.pins import framework_pins
    from envman.resolve.request import build_request
    from envman.resolve.resolver import resolve_stack

    res = resolve_stack(toy_matrix, build_request(toy_matrix, framework="toy>=1.1", targets=["h100"], python="3.11"))
    assert (res.framework, str(res.version), res.variant, str(res.cuda), res.package) == ("toyfw", "1.2.0", "cu128", "12.8", "toyfw")
    old = resolve_stack(toy_matrix, build_request(toy_matrix, framework="toyfw==1.1.*", targets=["h100"]))
    assert (str(old.version), old.variant) == ("1.1.0", "cu118")
    assert framework_pins(res, ()) == ["toyfw[cuda12]==1.2.0"]  # the toy's own pin format


def test_a_toy_project_renders_with_the_toy_pins(toy_matrix, toy_dir, tmp_path, monkeypatch):
    from envman.app.generate import generate
    from envman.project.spec import parse_spec

    # generate() bakes the doctor's knowledge from envman's own matrix folder, not from the matrix it is given
    monkeypatch.setattr("envman.image.kit.matrix_dir", lambda: toy_dir)
    root = tmp_path / "project"
    root.mkdir()
    spec = parse_spec({"name": "toy-trainer", "framework": "toyfw", "python": "3.11", "targets": ["h100"],
                       "packages": ["numpy"]})
    generate(root, spec, no_lock=True, matrix=toy_matrix)
    dockerfile = (root / "Dockerfile").read_text()
    assert "# toyfw 1.2.0 (cu128) and what it needs: its own layer" in dockerfile
    assert "dev.envman.stack" in dockerfile and "toyfw 1.2.0 cu128, CUDA 12.8" in dockerfile
    stack = json.loads((root / ".envman" / "stack.json").read_text())
    assert stack["framework"] == {"name": "toyfw", "version": "1.2.0", "variant": "cu128"}
    assert ["toyfw", None] in stack["imports"]  # from the toy pin, extra stripped


def test_requirements_name_the_toy_framework(toy_matrix, tmp_path):
    """Through the discoverer `envman init` runs (project/discover.py), with the matrix's releases as init passes them."""
    from envman.project.discover import discover_repo

    (tmp_path / "requirements.txt").write_text("toyfw>=1.1\nnumpy\n")
    found = discover_repo(tmp_path, {k: list(v) for k, v in toy_matrix.frameworks.items()})  # toy_matrix registers it
    assert found.inference.framework == "toyfw>=1.1" and found.read == ["requirements.txt"]


EXPECT = smoke.load_expect({"schema": 1, "framework": {"name": "toyfw", "version": "1.2.0", "variant": "cu128"},
                            "cuda": "12.8", "cudnn": None, "nccl": None, "python": "3.11", "imports": []})
GPU_ENV = {"python": "3.11.7", "gpu_visible": True, "gpu_evidence": "device nodes /dev/nvidia0"}


def test_the_smoke_program_dispatches_to_the_toy_plugin():
    with smoke_frameworks.using(TOY_PLUGIN):
        good = smoke.evaluate(EXPECT, GPU_ENV, {"version": "1.2.0", "devices": ["gpu:0"]}, {})
        silent_cpu = smoke.evaluate(EXPECT, GPU_ENV, {"version": "1.2.0", "devices": []}, {})
        missing = smoke.evaluate(EXPECT, GPU_ENV, TOY_PLUGIN.observe(True, "device nodes /dev/nvidia0"), {})
    assert good["exit_code"] == 0 and [c["name"] for c in good["checks"]] == ["python", "framework version", "toyfw devices"]
    assert silent_cpu["exit_code"] == 1 and silent_cpu["checks"][-1]["status"] == "fail"
    assert missing["exit_code"] == 1 and "toyfw does not import: ModuleNotFoundError" in missing["checks"][1]["detail"]
    unknown = smoke.evaluate(EXPECT, GPU_ENV, {}, {})  # unregistered again
    assert unknown["exit_code"] == 1
    assert unknown["checks"][1]["detail"] == "the smoke test knows torch, tensorflow, jax"


def test_the_doctor_judges_an_installed_toy(toy_matrix, tmp_path):
    """No edit in envman/portable/doctor: the checks iterate the installed frameworks the plug-ins read."""
    from envman.matrix.knowledge import knowledge_from_matrix
    from envman.portable.doctor.checks import run_checks
    from envman.portable.facts.host import read_framework_pins
    from envman.portable.facts.packages import probe_packages

    k = knowledge_from_matrix(toy_matrix)
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    meta = site / "toyfw-1.2.0.dist-info"
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: toyfw\nVersion: 1.2.0\nProvides-Extra: cuda12\n")
    (tmp_path / "venv" / "pyvenv.cfg").write_text("home = /usr/bin\nversion = 3.11.9\n")
    (tmp_path / "venv" / "bin").mkdir()
    (tmp_path / "venv" / "bin" / "python").write_text("")
    (tmp_path / "requirements.txt").write_text("toyfw==1.1.0\n")
    gpu = {"index": 0, "name": "NVIDIA GeForce RTX 5090", "cc": "12.0", "mem_total_mib": 32607}
    with smoke_frameworks.using(TOY_PLUGIN):
        probed = probe_packages(str(tmp_path / "venv" / "bin" / "python"))
        assert probed["toyfw"] == {"version": "1.2.0", "cuda": "12.8"}
        assert read_framework_pins(str(tmp_path)) == {"toyfw": {"version": "1.1.0", "file": "requirements.txt"}}
        facts = {"driver": "570.124.06", "gpus": [gpu], "python": {"version": "3.11.9"}, "toyfw": probed["toyfw"]}
        (arch,) = run_checks(facts, k)
        cpu = run_checks(dict(facts, gpus=[dict(gpu, cc="9.0", name="NVIDIA H100")], toyfw={"version": "1.2.0"}), k)
        old_python = run_checks(dict(facts, gpus=[], python={"version": "3.13.1"}), k)
    assert (arch.check, arch.severity) == ("arch-not-covered", "error")
    assert arch.verdict.startswith("GPU 0 NVIDIA GeForce RTX 5090 is 12.0 (sm_120), not in toyfw 1.2.0+cu128's arch "
                                   "list (sm_80 sm_86 sm_89 sm_90, from envman's matrix)")
    assert [(f.check, f.verdict.split(":")[0]) for f in cpu] == [
        ("cpu-only-build", "toyfw 1.2.0+cpu is a CPU-only build, but this machine has 1× NVIDIA H100 (driver 570.124.06)")]
    assert cpu[0].remedy == ("pip install toyfw==1.2.0 and CUDA 12.8 with cuDNN 9.7.1.26 (toyfw 1.2.0+cu128 covers sm_90 "
                             "and runs on driver 570.124.06)")
    assert [f.check for f in old_python] == ["python-unsupported", "no-gpu"]
    # unregistered again: the toy's record is ignored
    assert run_checks(facts, k) == []
