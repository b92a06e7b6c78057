"""On the real engine: the smoke test imports what the entry point imports (issue 38, class 9). A tiny project on the
debootstrap test base (no torch): its train.py reaches, through its own package, a module no requirement names —
the build's smoke test fails naming it, file:line and distribution, and the image gets no good tag; with the
requirement added, the same project passes. Every image made is removed."""

from __future__ import annotations

import json

import pytest

from .engine_helpers import envman, good_tag

pytestmark = [pytest.mark.integration, pytest.mark.network]


@pytest.fixture
def entry_project(tmp_path, base_image, token, engine):
    d = tmp_path / f"entry-{token}"
    (d / "helpers").mkdir(parents=True)
    (d / "requirements.txt").write_text("pyyaml==6.0.2\n")
    (d / "train.py").write_text("import yaml\nfrom helpers import cfg\n\nif __name__ == '__main__':\n    print('ok')\n")
    (d / "helpers" / "__init__.py").write_text("")
    (d / "helpers" / "cfg.py").write_text("import os\nimport idna\n")  # the config code's undeclared library
    tags: list[str] = []
    yield d, tags
    for tag in tags:
        for suffix in ("", "-unverified"):
            engine.remove_image(tag + suffix, force=True)
    engine.client.images.prune(filters={"dangling": True, "label": f"org.opencontainers.image.title={d.name}"})


def _lock_and_build(d, tags, verb="lock", *options):
    envman(verb, str(d), *options)
    tags.append(good_tag(d))
    return envman("build", str(d), check=False)


def test_an_undeclared_import_of_the_entry_point_fails_the_build_and_declaring_it_passes(entry_project, base_image,
                                                                                         engine):
    d, tags = entry_project
    out = _lock_and_build(d, tags, "init", "--cpu", "--python", "3.11", "--base-image", base_image)
    assert out.returncode == 5, out.stdout[-3000:] + out.stderr[-2000:]
    report = json.loads((d / "envman.smoke.json").read_text())
    bad = {c["name"]: c for c in report["checks"] if c["status"] == "fail"}
    assert set(bad) == {"entry point train.py", "import idna"}, bad
    assert bad["import idna"]["detail"] == ("helpers/cfg.py:2 imports it; distribution idna provides it, and the image "
                                            "does not hold it: add idna to the project's requirements (or packages: "
                                            "in envman.yaml) and lock again")
    assert "FAIL  import idna" in out.stdout + out.stderr
    assert not engine.image_exists(tags[0])

    (d / "requirements.txt").write_text("pyyaml==6.0.2\nidna==3.10\n")
    out = _lock_and_build(d, tags)  # as the hint says: lock again
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    report = json.loads((d / "envman.smoke.json").read_text())
    entry = next(c for c in report["checks"] if c["name"] == "entry point train.py")
    assert (entry["status"], entry["observed"]) == ("pass", "3 of 3 modules import")
    assert engine.image_exists(tags[1])
