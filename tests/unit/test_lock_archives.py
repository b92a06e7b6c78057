"""A package locked by URL to a source archive (``name @ https://…/x.tar.gz``, e.g. a GitHub archive of a
commit, which envman proposes instead of a VCS line) is built in the builder stage like an index sdist:
hash-checked archive in, wheel out, build requirements locked. The image's last install then reads the lock
without it (.envman/requirements.rest.lock.txt): pip would fetch and build a `name @ url` line again however
installed its wheel is. An offline build, which cannot fetch by URL, is refused naming the package."""

from __future__ import annotations

import pytest

import envman.app.sourcebuilds as gen
from envman.app.generate import offline_dockerfile
from envman.app.lock import check_lock, lock_project
from envman.errors import UsageError
from envman.lock.artifacts import by_url, source_only
from envman.lock.build_deps import sdist_urls
from envman.lock.pylock import LockedFile
from tests.fakes import install_fake_uv, numpy_pylock

ARCHIVE = "https://github.com/o/peft/archive/0123456789abcdef0123456789abcdef01234567.tar.gz"
PYLOCK = numpy_pylock() + f'''
[[packages]]
name = "peft"
version = "0.14.0"
archive = {{ url = "{ARCHIVE}", hashes = {{ sha256 = "dd" }} }}

[[packages]]
name = "tool"
version = "1.0"
archive = {{ url = "https://example.org/tool-1.0-py3-none-any.whl", hashes = {{ sha256 = "ee" }} }}

[[packages]]
name = "local"
version = "1.0"
archive = {{ path = "/home/me/local-1.0.tar.gz", hashes = {{ sha256 = "ff" }} }}
'''


@pytest.mark.parametrize("file, wheel, source", [
    (LockedFile("https://files.example/x-1.0-py3-none-any.whl", "a", "wheel"), True, False),
    (LockedFile("https://files.example/x-1.0.tar.gz", "a", "sdist"), False, True),
    (LockedFile(ARCHIVE, "a", "archive"), False, True),
    (LockedFile("https://example.org/x-1.0-py3-none-any.whl", "a", "archive"), True, False),  # a wheel by URL
    (LockedFile("/home/me/x-1.0.tar.gz", "a", "archive"), False, False),  # not reachable from a build
])
def test_what_counts_as_a_wheel_and_as_a_buildable_source(file, wheel, source):
    assert (file.is_wheel, file.is_source) == (wheel, source)


def test_an_archive_by_url_is_source_only_and_its_url_is_where_the_sdist_is():
    assert source_only(PYLOCK) == [("peft", "0.14.0")]
    assert sdist_urls(PYLOCK) == {"peft": (ARCHIVE, "dd")}
    assert by_url(PYLOCK, {"peft", "numpy"}) == {"peft"}


def _project(tmp_path, monkeypatch, pylock: str = PYLOCK):
    install_fake_uv(monkeypatch, tmp_path, pylock)
    built: list[str] = []
    monkeypatch.setattr(gen, "_lock_build_deps", lambda sb, py_text, locked, res: built.append(py_text) or
                        "setuptools==80.0 \\\n    --hash=sha256:" + "a" * 64 + "\n")
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "envman.yaml").write_text("name: a\ncpu: true\npython: '3.11'\npackages: [numpy]\n")
    return proj


def test_the_builder_builds_it_and_the_last_install_leaves_it_out(tmp_path, monkeypatch):
    proj = _project(tmp_path, monkeypatch)
    lock_project(proj)
    source = (proj / "requirements.source.lock.txt").read_text()
    assert f"peft @ {ARCHIVE}" in source and "--hash=sha256:dd" in source
    rest = (proj / ".envman" / "requirements.rest.lock.txt").read_text()
    assert "numpy==2.1.0" in rest and "peft" not in rest and "--index-url https://pypi.org/simple" in rest
    assert f"peft @ {ARCHIVE}" in (proj / "requirements.lock.txt").read_text()  # the whole lock still says it
    docker = (proj / "Dockerfile").read_text()
    assert "AS envman-wheels" in docker
    assert "-r /tmp/envman/.envman/requirements.rest.lock.txt" in docker
    assert "-r /tmp/envman/requirements.lock.txt" not in docker
    assert check_lock(proj) == []  # the rest file is one of the files the lock records
    (proj / ".envman" / "requirements.rest.lock.txt").write_text(rest + "peft\n")
    assert check_lock(proj) == [".envman/requirements.rest.lock.txt differs from the one envman.lock records"]


def test_index_sdists_alone_keep_the_whole_lock_as_the_last_install(tmp_path, monkeypatch):
    proj = _project(tmp_path, monkeypatch, numpy_pylock(sdist_only="promise"))
    lock_project(proj)
    assert not (proj / ".envman" / "requirements.rest.lock.txt").exists()
    assert "-r /tmp/envman/requirements.lock.txt" in (proj / "Dockerfile").read_text()  # pip skips installed ones


def test_an_offline_build_is_refused_naming_the_package(tmp_path, monkeypatch):
    proj = _project(tmp_path, monkeypatch)
    lock_project(proj)
    offline_dockerfile(proj, None, None)  # online: fine
    with pytest.raises(UsageError) as exc:
        offline_dockerfile(proj, None, "envman-wheelhouse:abc")
    assert exc.value.message == ("peft: locked by URL (see requirements.source.lock.txt), which an offline build "
                                 "cannot fetch")
