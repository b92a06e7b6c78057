"""envman ci: loading the locks, validating every value that reaches a CI file, ownership, `ci check`, CLI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from envman.ci import (
    BAKE_FILE,
    GITHUB_FILE,
    GITLAB_FILE,
    CiOptions,
    backend,
    check_ci_files,
    load_ci_project,
    parse_registry,
    parse_runners,
    pipeline_files,
    shared_stacks,
    write_ci_files,
)
from envman.ci.github import github_workflow
from envman.ci.install import envman_install
from envman.cli.main import main
from envman.errors import UsageError
from envman.files import dump_yaml, ownership

PROJECTS = Path(__file__).resolve().parent.parent / "fixtures" / "ci" / "projects"
# where the pipelines install envman in these tests: a git commit (envman/ci/install.py decides it)
GIT_SPEC = "envman @ git+https://git.example.com/acme/envman@" + "5" * 40
INSTALL = envman_install(Path("."), GIT_SPEC, None, None)


@pytest.fixture
def project_dir(tmp_path):
    def make(name: str) -> Path:
        d = tmp_path / name
        shutil.copytree(PROJECTS / name, d)
        return d

    return make


# --- loading the locks ------------------------------------------------------------------------------


def test_single_lock_project(project_dir):
    p = load_ci_project(project_dir("single"))
    assert p.name == "demo" and not p.profiled and len(p.images) == 1
    img = p.images[0]
    assert (img.profile, img.dockerfile, img.platform, len(img.tag)) == (None, "Dockerfile", "linux/amd64", 12)


def test_profiles_come_from_envman_yaml(project_dir):
    p = load_ci_project(project_dir("profiles"))
    assert p.profiled and [i.profile for i in p.images] == ["blackwell", "hopper", "legacy"]
    assert [i.dockerfile for i in p.images] == ["Dockerfile.blackwell", "Dockerfile.hopper", "Dockerfile.legacy"]
    assert len({i.lock_hash for i in p.images}) == 3


def test_profiles_found_from_lock_files_without_envman_yaml(project_dir):
    d = project_dir("profiles")
    (d / "envman.yaml").unlink()
    assert [i.profile for i in load_ci_project(d).images] == ["blackwell", "hopper", "legacy"]


def test_no_lock_is_a_clear_error(tmp_path):
    with pytest.raises(UsageError) as exc:
        load_ci_project(tmp_path)
    assert exc.value.message == f"no envman.lock in {tmp_path}"
    assert "run `envman lock`" in exc.value.hint


def test_missing_profile_lock_is_named(project_dir):
    d = project_dir("profiles")
    (d / "envman.legacy.lock").unlink()
    with pytest.raises(UsageError) as exc:
        load_ci_project(d)
    assert exc.value.message == f"no envman.legacy.lock in {d}"


def test_missing_dockerfile_is_named(project_dir):
    d = project_dir("profiles")
    (d / "Dockerfile.hopper").unlink()
    with pytest.raises(UsageError, match=r"^Dockerfile.hopper: not found \(the image of envman.hopper.lock\)$"):
        load_ci_project(d)


@pytest.mark.parametrize("field, value, message", [
    ("name", "demo\n  run: curl evil | sh", "envman.lock: name 'demo\\n  run: curl evil | sh' is not a Docker repository name"),
    ("name", "Demo", "envman.lock: name 'Demo' is not a Docker repository name"),
    ("lock_hash", "abc; rm -rf /", "envman.lock: lock_hash is not a sha256 hex digest"),
    ("profile", "hopper", "envman.lock: profile is 'hopper', expected None"),
    ("dockerfile", "../../etc/passwd", "envman.lock: dockerfile '../../etc/passwd' is not a file name in the project"),
])
def test_lock_values_are_validated(project_dir, field, value, message):
    d = project_dir("single")
    data = json.loads((d / "envman.lock").read_text())
    data[field] = value
    (d / "envman.lock").write_text(json.dumps(data))
    with pytest.raises(UsageError) as exc:
        load_ci_project(d)
    assert exc.value.message == message


def test_shared_stacks_of_the_fixture_fleet(project_dir):
    groups = shared_stacks(load_ci_project(project_dir("profiles")))
    assert groups == [
        (["blackwell", "hopper"], "torch 2.14.1 cu130, CUDA 13.0, Python 3.11, base python:3.11-slim-bookworm"),
        (["legacy"], "torch 2.14.1 cu126, CUDA 12.6, Python 3.11, base python:3.11-slim-bookworm"),
    ]


# --- values that reach the files --------------------------------------------------------------------


@pytest.mark.parametrize("text, ref, host", [
    ("ghcr.io/acme", "ghcr.io/acme", "ghcr.io"),
    ("ghcr.io/acme/", "ghcr.io/acme", "ghcr.io"),
    ("registry.example.com:5000/team/ml", "registry.example.com:5000/team/ml", "registry.example.com:5000"),
    ("localhost:5000", "localhost:5000", "localhost:5000"),
    ("acme", "acme", None),  # Docker Hub
    ("docker.io/acme", "docker.io/acme", "docker.io"),
])
def test_registry_accepted(text, ref, host):
    r = parse_registry(text)
    assert (r.ref, r.host) == (ref, host)


@pytest.mark.parametrize("text", [
    "ghcr.io/acme\nrun: evil", "ghcr.io/acme'; rm -rf / #", "ghcr.io/${{ secrets.TOKEN }}", "GHCR.io/acme",
    "ghcr.io/Acme", "ghcr.io//acme", "ghcr.io/acme name", "$(id)", "ghcr.io/acme`id`", "/acme", "ghcr.io/acme:tag",
])
def test_registry_rejected(text):
    with pytest.raises(UsageError) as exc:
        parse_registry(text)
    assert exc.value.message == f"--registry: {text!r} is not a registry path"


def test_runners_default_and_per_profile(project_dir):
    p = load_ci_project(project_dir("profiles"))
    opts = CiOptions(runners=parse_runners(["gpu", "legacy=v100,linux"], p), install=INSTALL)
    assert [opts.runner(i) for i in p.images] == [("gpu",), ("gpu",), ("v100", "linux")]
    assert CiOptions(install=INSTALL).runner(p.images[0]) == ()


@pytest.mark.parametrize("value, message", [
    ("gpu;id", "--gpu-runner: 'gpu;id' is not a runner label"),
    ("gpu\nx", "--gpu-runner: 'gpu\\nx' is not a runner label"),
    ("${{ github.token }}", "--gpu-runner: '${{ github.token }}' is not a runner label"),
    ("self-hosted", "--gpu-runner: 'self-hosted' is not a runner label"),
    ("gpu,", "--gpu-runner: 'gpu,' is not a runner label"),
    ("ampere=a100", "--gpu-runner: 'ampere' is not a profile of fleet"),
])
def test_runner_labels_rejected(project_dir, value, message):
    with pytest.raises(UsageError) as exc:
        parse_runners([value], load_ci_project(project_dir("profiles")))
    assert exc.value.message == message


def test_runner_given_twice_and_profile_runner_without_profiles(project_dir):
    with pytest.raises(UsageError, match="the default runner is given twice"):
        parse_runners(["a", "b"], load_ci_project(project_dir("profiles")))
    with pytest.raises(UsageError) as exc:
        parse_runners(["hopper=gpu"], load_ci_project(project_dir("single")))
    assert exc.value.hint == "this project has no profiles: write --gpu-runner LABEL"


def test_yaml_is_serialized_data_that_round_trips(project_dir):
    p = load_ci_project(project_dir("profiles"))
    opts = CiOptions(parse_registry("ghcr.io/acme"), parse_runners(["hopper=gpu,h100"], p), install=INSTALL)
    data = github_workflow(p, opts)
    assert yaml.safe_load(dump_yaml(data)) == data


# --- ownership and idempotence ----------------------------------------------------------------------


def test_second_run_writes_nothing(project_dir):
    d = project_dir("profiles")
    p = load_ci_project(d)
    files = pipeline_files(backend("github"), p, CiOptions(install=INSTALL))
    assert [f.relative_to(d).as_posix() for f in write_ci_files(d, files, force=False)] == [GITHUB_FILE, BAKE_FILE]
    assert write_ci_files(d, files, force=False) == []
    assert ownership(d / GITHUB_FILE).ours


def test_a_fifo_where_a_ci_file_goes_is_refused_without_blocking(project_dir):
    """A FIFO in the workflow's place was read whole to compare it with the new text: `envman ci` hung."""
    import os
    import signal

    d = project_dir("single")
    os.mkfifo(d / GITLAB_FILE)
    files = pipeline_files(backend("gitlab"), load_ci_project(d), CiOptions(install=INSTALL))
    signal.signal(signal.SIGALRM, lambda *_: pytest.fail("write_ci_files blocked on a FIFO"))
    signal.alarm(10)
    try:
        with pytest.raises(UsageError) as exc:
            write_ci_files(d, files, force=False)
    finally:
        signal.alarm(0)
    assert exc.value.message == "would overwrite .gitlab-ci.yml (not generated by envman)"


def test_user_file_is_not_overwritten_without_force(project_dir):
    d = project_dir("single")
    (d / GITLAB_FILE).write_text("build:\n  script: [make]\n")
    files = pipeline_files(backend("gitlab"), load_ci_project(d), CiOptions(install=INSTALL))
    with pytest.raises(UsageError) as exc:
        write_ci_files(d, files, force=False)
    assert exc.value.message == "would overwrite .gitlab-ci.yml (not generated by envman)"
    assert exc.value.hint == "keep your version, or re-run with --force to regenerate it"
    write_ci_files(d, files, force=True)
    assert ownership(d / GITLAB_FILE).ours


def test_hand_edited_workflow_is_kept(project_dir):
    d = project_dir("single")
    files = pipeline_files(backend("github"), load_ci_project(d), CiOptions(install=INSTALL))
    write_ci_files(d, files, force=False)
    wf = d / GITHUB_FILE
    wf.write_text(wf.read_text().replace("runs-on: ubuntu-latest", "runs-on: ubuntu-24.04", 1))
    with pytest.raises(UsageError, match=r"^would overwrite \.github/workflows/envman\.yml \(edited by hand\)$"):
        write_ci_files(d, pipeline_files(backend("github"), load_ci_project(d), CiOptions(parse_registry("ghcr.io/acme"), install=INSTALL)), force=False)


def test_bake_file_provenance_survives_reformatting_but_not_edits(project_dir):
    from envman.ci import bake_ownership

    d = project_dir("profiles")
    p = load_ci_project(d)
    write_ci_files(d, pipeline_files(backend("github"), p, CiOptions(install=INSTALL)), force=False)
    bake = d / BAKE_FILE
    doc = json.loads(bake.read_text())
    bake.write_text(json.dumps(doc, indent=4, sort_keys=True))  # reformatted: still envman's
    o = bake_ownership(bake)
    assert o.ours and not o.edited and o.inputs_hash == p.inputs_hash
    assert write_ci_files(d, pipeline_files(backend("github"), p, CiOptions(install=INSTALL)), force=False) == [bake]
    doc["target"]["legacy"]["tags"].append("fleet:mine")
    bake.write_text(json.dumps(doc))
    assert bake_ownership(bake).edited
    with pytest.raises(UsageError, match=r"^would overwrite docker-bake\.json \(edited by hand\)$"):
        write_ci_files(d, pipeline_files(backend("github"), p, CiOptions(install=INSTALL)), force=False)
    bake.write_text('{"target": {"x": {"dockerfile": "Dockerfile"}}}')
    assert not bake_ownership(bake).ours
    with pytest.raises(UsageError, match=r"\(not generated by envman\)"):
        write_ci_files(d, pipeline_files(backend("github"), p, CiOptions(install=INSTALL)), force=False)


# --- envman ci check --------------------------------------------------------------------------------


def test_check_finds_ci_files_made_from_other_locks(project_dir):
    d = project_dir("profiles")
    write_ci_files(d, pipeline_files(backend("gitlab"), load_ci_project(d), CiOptions(install=INSTALL)), force=False)
    assert check_ci_files(load_ci_project(d)) == ([], [".gitlab-ci.yml: matches the locks", "docker-bake.json: matches the locks"])
    lock = json.loads((d / "envman.legacy.lock").read_text())
    lock["lock_hash"] = "f" * 64  # as after `envman lock` with a new driver floor
    (d / "envman.legacy.lock").write_text(json.dumps(lock))
    stale, _ = check_ci_files(load_ci_project(d))
    assert stale == [
        ".gitlab-ci.yml was generated from other locks: re-run `envman ci gitlab` with the options you used",
        "docker-bake.json was generated from other locks: re-run `envman ci bake` with the options you used",
    ]
    (d / BAKE_FILE).unlink()
    assert "docker-bake.json is missing (the pipeline builds the profiles with it): run `envman ci bake`" in check_ci_files(load_ci_project(d))[0]


# --- the command line -------------------------------------------------------------------------------


def test_cli_github_reports_images_stacks_and_the_skipped_gpu_smoke(project_dir, capsys):
    d = project_dir("profiles")
    assert main(["ci", "github", str(d), "--registry", "ghcr.io/acme", "--gpu-runner", "hopper=gpu,h100", "--envman-spec", GIT_SPEC]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "wrote: .github/workflows/envman.yml, docker-bake.json"
    assert "  legacy: torch 2.14.1 cu126, CUDA 12.6, Python 3.11, base python:3.11-slim-bookworm" in out
    assert "smoke: profile hopper on the GPU runner gpu, h100" in out
    assert "smoke: profile legacy without a GPU (no GPU runner: envman ci github --gpu-runner LABEL)" in out
    assert main(["ci", "check", str(d)]) == 0
    assert capsys.readouterr().out == ".github/workflows/envman.yml: matches the locks\ndocker-bake.json: matches the locks\n"
    assert main(["ci", "github", str(d), "--registry", "ghcr.io/acme", "--gpu-runner", "hopper=gpu,h100", "--envman-spec", GIT_SPEC]) == 0
    assert capsys.readouterr().out.startswith("up to date: nothing changed\n")


def test_cli_errors_are_one_line_with_a_hint(tmp_path, project_dir, capsys):
    assert main(["ci", "gitlab", str(tmp_path)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [f"error: no envman.lock in {tmp_path}",
                   "hint: run `envman lock` first (with profiles it writes envman.PROFILE.lock for each) and commit the locks"]
    assert main(["ci", "github", str(project_dir("single")), "--registry", "ghcr.io/x y", "--envman-spec", GIT_SPEC]) == 1
    assert capsys.readouterr().err.startswith("error: --registry: 'ghcr.io/x y' is not a registry path\nhint: ")


def test_cli_check_fails_on_stale_files(project_dir, capsys):
    d = project_dir("single")
    assert main(["ci", "check", str(d)]) == 0
    assert capsys.readouterr().out == "no CI files generated by envman here\n"
    assert main(["ci", "github", str(d), "--envman-spec", GIT_SPEC]) == 0
    lock = json.loads((d / "envman.lock").read_text())
    lock["lock_hash"] = "e" * 64
    (d / "envman.lock").write_text(json.dumps(lock))
    capsys.readouterr()
    assert main(["ci", "check", str(d)]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "stale: .github/workflows/envman.yml was generated from other locks: re-run `envman ci github` with the options you used",
        "hint: regenerate the CI files and commit them with the locks",
    ]


def test_cli_bake(project_dir, capsys):
    d = project_dir("profiles")
    assert main(["ci", "bake", str(d), "--registry", "registry.example.com:5000/ml"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("wrote: docker-bake.json\n")
    assert "  blackwell, hopper: torch 2.14.1 cu130" in out and "smoke:" not in out
    assert json.loads((d / BAKE_FILE).read_text())["target"]["hopper"]["tags"][0].startswith("registry.example.com:5000/ml/fleet:")
