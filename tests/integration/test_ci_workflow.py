"""The generated GitHub workflow's check job, run: its shell steps in a container of the test base image, as
GitHub runs them (`bash --noprofile --norc -eo pipefail`), up to `envman lock --check` and `envman ci check`.
A broken install line (a package no index serves, a wheel path that is not there, a hash that does not match)
fails here, not in the user's first pipeline.

The container has no network: envman's own dependencies come from a wheelhouse built beforehand (PIP_NO_INDEX,
PIP_FIND_LINKS: the environment, not the install line), so the line under test is exactly the generated one.
The job's two `uses:` steps are played by the harness: checkout (the project is mounted) and setup-python (a venv).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from .engine_helpers import ROOT, envman

pytestmark = pytest.mark.integration

DOCKER = shutil.which("docker") or "/usr/bin/docker"


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory) -> Path:
    """This checkout as a wheel, and every dependency of it as a wheel (from the index pip is configured with)."""
    out = tmp_path_factory.mktemp("wheelhouse")
    for args in (["--no-deps", str(ROOT)], None):
        if args is None:
            args = [str(next(out.glob("envman-*.whl")))]
        run = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "-w", str(out), *args],
                             capture_output=True, text=True, timeout=600)
        if run.returncode != 0:
            pytest.skip(f"pip could not build the wheelhouse (no package index?): {run.stderr.strip()[-500:]}")
    return out


def check_job_steps(workflow: dict) -> list[str]:
    """The check job's `run:` steps, after asserting the two `uses:` steps the harness plays."""
    steps = workflow["jobs"]["check"]["steps"]
    assert [s["uses"].split("@")[0] for s in steps[:2]] == ["actions/checkout", "actions/setup-python"]
    return [s["run"] for s in steps[2:]]


def run_steps(project: Path, steps: list[str], wheelhouse: Path, base_image: str, token: str) -> subprocess.CompletedProcess:
    harness = project.parent / "steps"
    harness.mkdir()
    for n, body in enumerate(steps):
        (harness / f"{n:02d}.sh").write_text(body + "\n")
    driver = ("set -eu\npython3 -m venv /opt/py\nexport PATH=/opt/py/bin:$PATH\ncd /github/workspace\n"
              "for s in /steps/*.sh; do echo \"== $s\"; bash --noprofile --norc -eo pipefail \"$s\"; done\n")
    return subprocess.run(
        [DOCKER, "run", "--rm", "--name", f"envman-ci-{token}", "--network", "none",
         "-e", "PIP_NO_INDEX=1", "-e", "PIP_FIND_LINKS=/wheelhouse", "-e", "PIP_DISABLE_PIP_VERSION_CHECK=1",
         "-v", f"{project}:/github/workspace", "-v", f"{harness}:/steps:ro", "-v", f"{wheelhouse}:/wheelhouse:ro",
         base_image, "bash", "-c", driver],
        capture_output=True, text=True, timeout=600)


def test_the_check_job_installs_envman_and_the_locks_pass(tmp_path, engine, base_image, wheelhouse, token):
    project = tmp_path / "project"
    project.mkdir()
    (project / "envman.yaml").write_text('name: cidemo\ncpu: true\nframework: none\npython: "3.11"\n')
    envman("lock", str(project), env={**_env(), "UV_OFFLINE": "1"})
    wheel = next(wheelhouse.glob("envman-*.whl"))
    (project / "vendor").mkdir()
    shutil.copy(wheel, project / "vendor" / wheel.name)
    # where CI gets envman: written after the lock, and the lock stays current (ci: is no input of the image)
    with (project / "envman.yaml").open("a") as fh:
        fh.write(f"ci:\n  envman: vendor/{wheel.name}\n")
    envman("ci", "github", str(project), env=_env())
    steps = check_job_steps(yaml.safe_load((project / ".github/workflows/envman.yml").read_text()))
    assert steps[1:] == ["envman lock --check", "envman ci check"]

    ran = run_steps(project, steps, wheelhouse, base_image, token)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert "envman.lock is current" in ran.stdout
    assert ".github/workflows/envman.yml: matches the locks" in ran.stdout

    # a wheel that is not the one the workflow was generated for: the hash check stops the job before pip runs
    (project / "vendor" / wheel.name).write_bytes(wheel.read_bytes() + b"\0")
    shutil.rmtree(tmp_path / "steps")
    ran = run_steps(project, steps, wheelhouse, base_image, token)
    assert ran.returncode == 1 and "FAILED" in ran.stdout + ran.stderr
    assert "envman.lock is current" not in ran.stdout


def test_the_gitlab_check_job_script_passes_too(tmp_path, engine, base_image, wheelhouse, token):
    """.gitlab-ci.yml's envman-check script, line by line as GitLab runs it (each line fails the job)."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "envman.yaml").write_text('name: cidemo\ncpu: true\nframework: none\npython: "3.11"\n')
    envman("lock", str(project), env={**_env(), "UV_OFFLINE": "1"})
    wheel = next(wheelhouse.glob("envman-*.whl"))
    (project / "vendor").mkdir()
    shutil.copy(wheel, project / "vendor" / wheel.name)
    envman("ci", "gitlab", str(project), "--envman-spec", f"vendor/{wheel.name}", env=_env())
    script = yaml.safe_load((project / ".gitlab-ci.yml").read_text())["envman-check"]["script"]
    assert script[-2:] == ["envman lock --check", "envman ci check"]
    ran = run_steps(project, script, wheelhouse, base_image, token)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert "envman.lock is current" in ran.stdout and ".gitlab-ci.yml: matches the locks" in ran.stdout


def test_the_old_install_line_fails_in_the_same_harness(tmp_path, engine, base_image, wheelhouse, token):
    """The harness catches what issue 36 found: `pip install envman==0.2.0` from an index that has no envman."""
    project = tmp_path / "project"
    project.mkdir()
    empty = tmp_path / "empty-index"
    empty.mkdir()
    ran = run_steps(project, ["python -m pip install envman==0.2.0"], empty, base_image, token)
    assert ran.returncode == 1 and "No matching distribution found for envman==0.2.0" in ran.stderr


def _env() -> dict[str, str]:
    """The lock as a user makes it: from the shipped matrices the wheel carries too, not the suite's frozen
    fixture (tests/conftest.py sets ENVMAN_MATRIX_DIR)."""
    import os

    return {k: v for k, v in os.environ.items() if k != "ENVMAN_MATRIX_DIR"}
