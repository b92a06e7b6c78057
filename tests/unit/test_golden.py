"""Golden files: the WHOLE rendered Dockerfile, envman.lock, compose and devcontainer for six stacks.

Rendered from the frozen tests/fixtures/matrix (tests/conftest.py sets ENVMAN_MATRIX_DIR), so a change
to matrices/ never touches them. `pytest --update-golden` rewrites them; review the diff before committing.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from envman.app.generate import generate
from envman.project.spec import parse_spec

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
COMMON = {"packages": ["numpy"], "command": ["python", "train.py"], "env": {"WANDB_MODE": "offline"}}
CASES = {
    "new-torch": {"framework": "torch", "python": "3.11", "targets": ["h100"], "driver": ">=580.95.05"},
    "old-torch-old-driver": {"framework": "torch==2.4.*", "targets": ["v100"], "driver": "470.57.02"},
    "tensorflow": {"framework": "tensorflow==2.13.*", "targets": ["a100"], "system_packages": ["libgomp1"]},
    "cuda-devel": {"framework": "torch", "targets": ["h100"], "cuda_devel": True, "system_packages": ["build-essential"]},
    "two-gpu-fleet": {"framework": "torch", "companions": ["torchvision"], "targets": ["v100", "rtx-5090"]},
    "cpu-only": {"framework": "torch", "cpu": True},
}
FILES = ("Dockerfile", "envman.lock", "compose.yaml", ".devcontainer/devcontainer.json", ".envman/stack.json")


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden(case, tmp_path, update_golden):
    spec = parse_spec({"name": case, **COMMON, **CASES[case]})
    (tmp_path / "envman.yaml").write_text(yaml.safe_dump(spec.to_data()))
    generate(tmp_path, spec, no_lock=True)
    for name in FILES:
        got = (tmp_path / name).read_text()
        gold = GOLDEN / case / name.replace("/", "__")
        if update_golden:
            gold.parent.mkdir(parents=True, exist_ok=True)
            gold.write_text(got)
            continue
        assert gold.exists(), f"missing golden file {gold}; run pytest --update-golden"
        assert got == gold.read_text(), f"{case}/{name} differs from the golden file (pytest --update-golden after review)"


def test_require_cuda_does_not_refuse_the_fleet_the_stack_was_resolved_for(matrix):
    from envman.image.plan import require_cuda
    from envman.resolve.request import build_request
    from envman.resolve.resolver import resolve_stack

    full = resolve_stack(matrix, build_request(matrix, framework="torch", targets=["h100"]))
    assert require_cuda(full) == "cuda>=13.0"
    minor = resolve_stack(matrix, build_request(matrix, framework="torch==2.4.*", targets=["v100"], driver="470.57.02"))
    assert minor.driver_mode == "minor-compat" and require_cuda(minor) == "cuda>=11.0 driver>=450.80.02"


def test_a_dockerfile_kept_on_disk_is_the_one_jinja2_renders(tmp_path, monkeypatch):
    """render_dockerfile keeps its text under the digest of the plan and the templates: a hit gives the same
    bytes without jinja2; another template is another key; and a kept text is used only when it is the body
    the last lock recorded (issue 24: a cached Dockerfile is built, so the cache alone never decides it)."""
    import hashlib
    import shutil

    import envman.image.render as render

    monkeypatch.setenv("ENVMAN_CACHE_DIR", str(tmp_path / "cache"))
    plans = []
    real = render.render_dockerfile
    monkeypatch.setattr(render, "render_dockerfile",
                        lambda plan, known=None: plans.append(plan) or real(plan, known))
    spec = parse_spec({"name": "cached", **COMMON, **CASES["new-torch"]})
    (tmp_path / "p").mkdir()
    generate(tmp_path / "p", spec, no_lock=True)
    fresh = render._env().get_template("Dockerfile.j2").render(plan=plans[0])
    known = hashlib.sha256(fresh.lstrip("\n").encode()).hexdigest()
    assert real(plans[0], known) == fresh  # rendered, and kept: it is the recorded body
    monkeypatch.setattr(render, "_env", lambda: pytest.fail("a kept Dockerfile needs no jinja2"))
    assert real(plans[0], known) == fresh
    with pytest.raises(pytest.fail.Exception, match="needs no jinja2"):
        real(plans[0], "0" * 64)  # the last lock recorded another body: the kept text is not trusted
    edited = tmp_path / "templates"
    shutil.copytree(render.templates_dir(), edited)
    (edited / "Dockerfile.j2").write_text((edited / "Dockerfile.j2").read_text() + "# edited\n")
    monkeypatch.setattr(render, "templates_dir", lambda: edited)
    with pytest.raises(pytest.fail.Exception, match="needs no jinja2"):
        real(plans[0], known)  # another template: not the kept text, rendered again
