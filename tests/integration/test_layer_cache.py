"""The layer cache follows content, on the real engine (issue 36.3): an edit of envman.yaml's `command:` re-locks
to new inputs, yet every layer before the project's source — the framework's install above all — is reused;
an edit that changes the framework's locked lines re-installs it.

A small stack stands in for torch's 6 GB layer: JAX on the CPU (jax, jaxlib, numpy, scipy, ml_dtypes,
opt_einsum: ~150 MB of wheels) plus one requirement outside its closure, on the debootstrap test base.

The builds run envman's Dockerfile with `docker build` and one build argument of this run's own,
SOURCE_DATE_EPOCH (every RUN's cache key holds it): the first build starts cold whatever earlier runs left in
BuildKit's cache, and the later ones can only reuse what this run built.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from .engine_helpers import envman

pytestmark = [pytest.mark.integration, pytest.mark.network]

FRAMEWORK = "requirements.framework.lock.txt"


def steps(progress: str) -> list[tuple[str, int, str, bool]]:
    """BuildKit's plain progress as (stage, step number, instruction, cached), in the Dockerfile's order."""
    named: dict[str, tuple[str, int, str]] = {}
    cached: set[str] = set()
    for line in progress.splitlines():
        m = re.match(r"^(#\d+) \[([\w.-]+) +(\d+)/\d+\] (.*)$", line)
        if m:
            named[m.group(1)] = (m.group(2), int(m.group(3)), m.group(4))
        elif re.match(r"^#\d+ CACHED$", line):
            cached.add(line.split()[0])
    return sorted((stage, n, text, vid in cached) for vid, (stage, n, text) in named.items())


def before_source(progress: str) -> list[tuple[str, bool]]:
    """The image stage's steps before the project's source is copied in: (instruction, cached)."""
    all_steps = steps(progress)
    source = next((s for s in all_steps if s[2].startswith("COPY --from=envman-source")), None)
    assert source is not None, "no COPY of the project's source in the build's progress:\n" + progress[-6000:]
    return [(text, cached) for stage, n, text, cached in all_steps if stage == source[0] and n < source[1]]


def framework_step(progress: str) -> tuple[str, bool]:
    return next(s for s in before_source(progress) if f"source={FRAMEWORK}" in s[0])


@pytest.fixture
def jax_project(tmp_path, base_image, token, engine, build_client):
    d = tmp_path / f"cache-{token}"
    d.mkdir()
    (d / "requirements.txt").write_text("jax\nsix\n")
    (d / "train.py").write_text("import jax\nprint(jax.__version__)\n")
    envman("init", str(d), "--cpu", "--python", "3.11", "--base-image", base_image)
    tags: list[str] = []
    yield d, lambda: build(d, tags, build_client)
    for tag in tags:
        engine.remove_image(tag, force=True)


def build(d: Path, tags: list[str], client) -> str:
    """The project's Dockerfile built with plain progress, through the client `envman build` uses: its output."""
    from envman.app.build import default_ca_bundle
    from envman.engine.buildkit import build_command

    tag = f"{d.name}:build{len(tags)}"
    tags.append(tag)
    ca = default_ca_bundle()
    argv, env = build_command(client, d, tags=[tag], build_args={"SOURCE_DATE_EPOCH": str(int(d.name[-8:], 16))},
                              secrets={"envman_ca": ca} if ca else None)
    out = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, **env})
    assert out.returncode == 0, out.stderr[-4000:]
    return out.stdout + out.stderr  # BuildKit's progress goes to stderr


def test_editing_command_reuses_every_layer_before_the_source_and_a_framework_edit_does_not(jax_project):
    d, build = jax_project
    first = build()
    assert not framework_step(first)[1], "the first build found the framework's layer cached: not a cold start"
    framework_lines = (d / FRAMEWORK).read_bytes()

    spec = (d / "envman.yaml").read_text()
    (d / "envman.yaml").write_text(spec + "command: [python, train.py, --edited]\n")
    envman("lock", str(d))
    assert (d / FRAMEWORK).read_bytes() == framework_lines  # new inputs, the same framework lock file, byte for byte
    edited = build()
    layers = before_source(edited)
    assert any(f"source={FRAMEWORK}" in text for text, _ in layers) and any(
        "source=requirements.lock.txt" in text for text, _ in layers), layers
    assert [text for text, cached in layers if not cached] == [], "an edit of command: rebuilt a layer before the source"

    # a requirement that moves a package of the framework's closure (numpy) re-installs the framework
    numpy = re.search(r"^numpy==([\w.]+)", framework_lines.decode(), re.M)
    assert numpy is not None, framework_lines.decode()[:2000]
    (d / "requirements.txt").write_text(f"jax\nsix\nnumpy<{numpy.group(1)}\n")
    envman("lock", str(d))
    assert (d / FRAMEWORK).read_bytes() != framework_lines
    moved = build()
    text, cached = framework_step(moved)
    assert not cached, "a change of the framework's locked lines reused its layer"
