"""Issue #11 on a real engine: an sdist-only package (promise 2.3) is built into a wheel in the builder
stage and imports in the image, and the project's own console script runs (seconds, on the test base)."""

from __future__ import annotations

import subprocess

import pytest

from .engine_helpers import envman, good_tag

pytestmark = [pytest.mark.integration, pytest.mark.network]

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "hello-envman"
version = "0.1.0"

[project.scripts]
hello-envman = "hello_envman:main"
"""


def _remove_images(d, engine) -> None:
    """The images a test built from project ``d``, and their dangling layers."""
    if (d / "envman.lock").exists():
        for suffix in ("", "-unverified"):
            engine.remove_image(good_tag(d) + suffix, force=True)
    engine.client.images.prune(filters={"dangling": True, "label": f"org.opencontainers.image.title={d.name}"})


@pytest.fixture
def source_project(tmp_path, base_image, token, engine):
    d = tmp_path / f"src-{token}"
    d.mkdir()
    (d / "requirements.txt").write_text("promise==2.3\nnumpy==2.1.3\n")
    (d / "pyproject.toml").write_text(PYPROJECT)
    (d / "hello_envman.py").write_text("def main():\n    import promise\n    print('hello-envman ok', promise.__name__)\n")
    (d / ".gitignore").write_text("*.log\n")
    yield d
    _remove_images(d, engine)


def test_sdist_only_package_builds_in_the_builder_stage_and_the_project_is_installed(source_project, base_image):
    d = source_project
    init = envman("init", str(d), "--cpu", "--python", "3.11", "--base-image", base_image)
    assert "promise==2.3: no wheel for the target platform" in init.stdout
    assert "the project is a package (pyproject)" in init.stdout
    assert "promise==2.3" in (d / "requirements.source.lock.txt").read_text()
    assert "AS envman-wheels" in (d / "Dockerfile").read_text()
    # promise has no pyproject.toml: PEP 517's fallback backend, setuptools, is locked with hashes for the builder
    assert "setuptools==" in (d / "requirements.build.lock.txt").read_text()
    assert "**/*.log" in (d / ".dockerignore").read_text().splitlines()

    out = envman("build", str(d), "--progress", "plain")
    tag = good_tag(d)
    assert f"tagged {tag}" in out.stdout
    assert "Created wheel for promise: filename=promise-2.3-py3-none-any.whl" in out.stdout
    assert "PASS  import promise" in out.stdout
    assert "--no-build-isolation" in out.stdout  # nothing unpinned fetched while building
    run = subprocess.run(["docker", "run", "--rm", tag, "sh", "-c", "command -v hello-envman && hello-envman && ls -a /app"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "/opt/venv/bin/hello-envman" and lines[1] == "hello-envman ok promise"
    # the rw bind mount kept the build's leftovers out of the image
    assert "build" not in lines and not any(ln.endswith(".egg-info") for ln in lines)



# six's sdist on PyPI, by URL: the same shape as a GitHub archive of a commit (`name @ https://…/x.tar.gz`)
SIX_SDIST = ("https://files.pythonhosted.org/packages/71/39/171f1c67cd00715f190ba0b100d606d440a28c93c7714febeca8b79af85e/"
             "six-1.16.0.tar.gz")


@pytest.fixture
def url_project(tmp_path, base_image, token, engine):
    d = tmp_path / f"url-{token}"
    d.mkdir()
    (d / "requirements.txt").write_text(f"six @ {SIX_SDIST}\npromise==2.3\n")
    yield d
    _remove_images(d, engine)


def test_a_package_locked_by_url_to_an_sdist_is_built_once_in_the_builder(url_project, base_image):
    d = url_project
    init = envman("init", str(d), "--cpu", "--python", "3.11", "--base-image", base_image)
    assert "promise==2.3, six==1.16.0: no wheel for the target platform" in init.stdout
    assert f"six @ {SIX_SDIST}" in (d / "requirements.source.lock.txt").read_text()
    assert "six" not in (d / ".envman" / "requirements.rest.lock.txt").read_text()
    out = envman("build", str(d), "--progress", "plain")
    assert f"tagged {good_tag(d)}" in out.stdout
    # built in the builder, from the hash-checked archive; the final stage neither fetches nor builds it again
    assert out.stdout.count("Created wheel for six") == 1 and out.stdout.count("Created wheel for promise") == 1
    assert "PASS  import six" in out.stdout and "PASS  import promise" in out.stdout
