"""`envman fetch` against PyPI, and an offline install from the wheelhouse bind-mounted into a BuildKit build."""

from __future__ import annotations

import subprocess
import sys
import urllib.request

import pytest

from .engine_helpers import ROOT, image_members_containing

pytestmark = pytest.mark.network

SIX = "six-1.17.0-py2.py3-none-any.whl"
MARKUPSAFE = "MarkupSafe-3.0.2-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
# Two tiny wheels with their PyPI sha256: a pure one and a CPython 3.11 manylinux one (the markupsafe hash list
# also has its cp312 build, as a real multi-Python lock would).
LOCK = """\
# generated for envman's integration tests
--index-url https://pypi.org/simple
markupsafe==3.0.2 \\
    --hash=sha256:a123e330ef0853c6e822384873bef7507557d8e4a082961e1defa947aa59ba84 \\
    --hash=sha256:e17c96c14e19278594aa4841ec148115f9c7615a47382ecb6b82bd8fea3ab0c8
    # via jinja2
six==1.17.0 \\
    --hash=sha256:4721f391ed90541fddacab5acf947aa0d3dc7d27b2e1e8eda2be8970586c3274
colorama==0.4.6 ; sys_platform == "win32" \\
    --hash=sha256:4f1d9991f5acc0ca119f9d443620b77f9d6b33703e51011c16baf57afb285fc6
"""


@pytest.fixture(scope="module")
def pypi():
    try:
        urllib.request.urlopen("https://pypi.org/simple/six/", timeout=10).close()
    except OSError as exc:
        pytest.skip(f"PyPI is not reachable: {exc}")


def envman(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "envman.cli.main", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=300, check=False)


@pytest.fixture
def project(tmp_path):
    p = tmp_path / "proj"
    p.mkdir()
    (p / "requirements.lock.txt").write_text(LOCK)
    (p / "envman.lock").write_text(
        '{"lock_version": 1, "stack": {"python": "3.11"}, "python_lock": {"platform": "x86_64-manylinux_2_28"}}')
    return p


def test_fetch_keep_and_repair(pypi, project):
    p = envman("fetch", str(project))
    assert p.returncode == 0, p.stderr
    house = project / ".envman" / "wheelhouse"
    assert sorted(f.name for f in house.iterdir()) == [MARKUPSAFE, SIX]  # no colorama: it is Windows-only
    assert p.stdout.startswith(f"wheelhouse {house}: 2 downloaded, 0 already there, all 2 hash-checked")

    p = envman("fetch", str(project))
    assert p.stdout.startswith(f"wheelhouse {house}: 0 downloaded, 2 already there"), p.stderr

    (house / SIX).write_bytes(b"corrupted")  # a file with a wrong hash is fetched again
    p = envman("fetch", str(project))
    assert p.stdout.startswith(f"wheelhouse {house}: 1 downloaded, 1 already there"), p.stderr


def test_fetch_for_another_python(pypi, project):
    p = envman("fetch", str(project), "--python", "3.12", "--wheelhouse", str(project / "w312"))
    assert p.returncode == 0, p.stderr
    assert sorted(f.name for f in (project / "w312").iterdir()) == [
        "MarkupSafe-3.0.2-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", SIX]


DOCKERFILE = """\
FROM {base}
# The wheelhouse is bind-mounted from the build context: installed from, never copied into a layer.
RUN --mount=type=bind,target=/ctx \\
    python3 -m venv /venv \\
 && /venv/bin/pip install --no-cache-dir --no-index --find-links /ctx/.envman/wheelhouse --require-hashes \\
        -r /ctx/requirements.lock.txt
"""


@pytest.mark.integration
def test_offline_install_from_the_bind_mounted_wheelhouse(pypi, engine, build_client, base_image, built_images,
                                                          project, token, tmp_path):
    assert envman("fetch", str(project)).returncode == 0
    (project / "Dockerfile").write_text(DOCKERFILE.format(base=base_image))
    tag = f"envman-it-offline:{token}"
    built_images.append(tag)
    engine.build(project, tags=[tag], progress="plain")
    rc, out, err = engine.run(tag, ["/venv/bin/python", "-c", "import markupsafe, six; print(six.__version__)"],
                              network=False, timeout=60)
    assert (rc, out) == (0, "1.17.0\n"), err
    chunk = (project / ".envman" / "wheelhouse" / MARKUPSAFE).read_bytes()[2000:2064]  # compressed bytes of the wheel
    assert image_members_containing(engine, tag, chunk, tmp_path) == []
