"""What a requirements file says beyond its packages reaches the lock: ``-c`` constraints go to uv (and their
file is an input of the lock), a line's own ``--hash`` options are held against the files the lock pins."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import envman.lock.registry
import envman.lock.uv
from envman.app.lock import check_lock, lock_project
from envman.cli.main import main
from envman.errors import LockError
from tests.fakes import numpy_pylock

WHL = "https://files.example/numpy-2.1.0-cp311-cp311-manylinux_2_28_x86_64.whl"
PYLOCK = numpy_pylock(sha256="b" * 64)
SPEC = "name: demo\ncpu: true\npython: '3.11'\nframework: none\nrequirements: [requirements.txt]\n"


@pytest.fixture
def fake_uv(tmp_path_factory, monkeypatch):
    """A uv that answers numpy 2.1.0 (one wheel, sha256 bbbb…) and copies the constraints file it was given."""
    d = tmp_path_factory.mktemp("uv")
    seen = d / "constraints.seen"
    exe = d / "fake-uv"
    exe.write_text(f"#!{sys.executable}\nimport sys\n"
                   "if '--constraint' in sys.argv:\n"
                   f"    open({str(seen)!r}, 'w').write(open(sys.argv[sys.argv.index('--constraint') + 1]).read())\n"
                   f"open(sys.argv[sys.argv.index('-o') + 1], 'w').write({PYLOCK!r})\n")
    exe.chmod(0o755)
    monkeypatch.setattr(envman.lock.uv, "uv_binary", lambda: str(exe))
    monkeypatch.setattr("envman.lock.graph.requires_dist", lambda p, timeout, ctx=None: [])
    monkeypatch.setattr(envman.lock.registry, "resolve_digest", lambda ref, timeout=3.0: None)
    monkeypatch.setenv("ENVMAN_CACHE_DIR", str(d / "cache"))
    return seen


def _project(root: Path, requirements: str, **files: str) -> Path:
    (root / "envman.yaml").write_text(SPEC)
    (root / "requirements.txt").write_text(requirements)
    for name, text in files.items():
        (root / name.replace("_", ".")).write_text(text)
    return root


def test_constraints_of_a_c_file_reach_uv_and_their_file_is_a_lock_input(tmp_path, fake_uv):
    _project(tmp_path, "numpy\n-c constraints.txt\n", constraints_txt="numpy<2\n")
    lock_project(tmp_path)
    assert "numpy<2" in fake_uv.read_text().splitlines()
    assert check_lock(tmp_path) == []
    (tmp_path / "constraints.txt").write_text("numpy<1.27\n")
    assert check_lock(tmp_path) == ["constraints.txt changed since the lock"]


def test_a_framework_constraint_is_checked_against_the_stack_not_sent_to_uv(tmp_path, fake_uv, capsys):
    _project(tmp_path, "numpy\n-c constraints.txt\n", constraints_txt="torch<2\n")
    assert main(["lock", str(tmp_path)]) != 0
    err = capsys.readouterr().err
    assert "error: constraints.txt:1: asks for torch<2, but the stack has no torch" in err and "Traceback" not in err


def test_a_url_in_a_constraints_file_is_a_constraint_not_a_package():
    from envman.project.sources import Found
    from envman.project.sources.requirements_txt import _read_line

    found = Found("c.txt")
    _read_line(Path("."), "c.txt", "https://files.example/x-1.0-py3-none-any.whl", "c.txt:1", found, True, set())
    assert found.reqs == [] and [c.name for c in found.constraints] == ["x"]  # the wheel's distribution


def test_a_matching_hash_locks(tmp_path, fake_uv):
    _project(tmp_path, f"numpy==2.1.0 \\\n    --hash=sha256:{'a' * 64} \\\n    --hash=sha256:{'b' * 64}\n")
    out = lock_project(tmp_path)
    assert not [n for n in out.notes if "--hash" in n]


def test_a_mismatching_hash_refuses_the_lock_naming_file_line_and_package(tmp_path, fake_uv, capsys):
    _project(tmp_path, f"# pinned\n\nnumpy==2.1.0 --hash=sha256:{'c' * 64}\n")
    with pytest.raises(LockError) as exc:
        lock_project(tmp_path)
    assert exc.value.message == "requirements.txt:3: the --hash for numpy==2.1.0 matches no file the index serves"
    assert main(["lock", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and "hint:" in err and "Traceback" not in err
    assert not (tmp_path / "requirements.lock.txt").exists()


def test_a_mismatching_hash_in_a_constraints_file_refuses_too(tmp_path, fake_uv):
    _project(tmp_path, "numpy\n-c c.txt\n", c_txt=f"numpy==2.1.0 --hash=sha256:{'c' * 64}\n")
    with pytest.raises(LockError, match=r"^c\.txt:1: the --hash for numpy==2.1.0"):
        lock_project(tmp_path)


def test_a_hash_without_an_exact_version_is_a_warning(tmp_path, fake_uv):
    _project(tmp_path, f"numpy>=2 --hash=sha256:{'c' * 64}\n")
    out = lock_project(tmp_path)
    assert ("requirements.txt:1: the --hash options of numpy>=2 are not checked: a hash pins one file, which needs "
            "an exact version (write numpy==VERSION)") in out.notes


def test_files_the_hashes_do_not_list_are_named(tmp_path, fake_uv):
    from envman.lock.pylock import parse_pylock
    from envman.lock.user_hashes import check_user_hashes
    from envman.project.sources.requirements_txt import read_requirements

    (tmp_path / "r.txt").write_text(f"numpy==2.1.0 --hash=sha256:{'b' * 64}\n")
    two = PYLOCK.replace("} }]\n", "} }" + f', {{ url = "{WHL}x", hashes = {{ sha256 = "{"d" * 64}" }} }}]\n', 1)
    notes = check_user_hashes(read_requirements(tmp_path, "r.txt").reqs, parse_pylock(two))
    assert notes == ["warning: r.txt:1: the lock also pins files of numpy==2.1.0 its --hash options do not list: "
                     + WHL.rsplit("/", 1)[1] + "x"]


ARCHIVE = "https://files.example/demo-1.0-py3-none-any.whl"
ARCHIVE_LOCK = f'''lock-version = "1.0"
created-by = "uv"

[[packages]]
name = "demo"
version = "1.0"
archive = {{ url = "{ARCHIVE}", hashes = {{ sha256 = "{'e' * 64}" }} }}
'''


@pytest.mark.parametrize("line", [f"{ARCHIVE} --hash=sha256:HASH", f"demo @ {ARCHIVE} --hash=sha256:HASH"])
def test_the_hash_on_a_url_line_is_held_against_the_file_at_that_url(tmp_path, line):
    """A URL line names one file; its --hash must match what uv measured of that file, or the lock refuses."""
    from envman.lock.pylock import parse_pylock
    from envman.lock.user_hashes import check_user_hashes
    from envman.project.sources.requirements_txt import read_requirements

    (tmp_path / "r.txt").write_text(line.replace("HASH", "e" * 64) + "\n")
    found = read_requirements(tmp_path, "r.txt")
    assert found.warnings == [] and found.reqs[0].hashes == ("sha256:" + "e" * 64,)
    assert check_user_hashes(found.reqs, parse_pylock(ARCHIVE_LOCK)) == []
    (tmp_path / "r.txt").write_text(line.replace("HASH", "f" * 64) + "\n")
    with pytest.raises(LockError) as e:
        check_user_hashes(read_requirements(tmp_path, "r.txt").reqs, parse_pylock(ARCHIVE_LOCK))
    assert e.value.message == (f"r.txt:1: the --hash of {line.split(' --hash')[0]} does not match the file at that "
                               f"URL (it has sha256:{'e' * 64})")


def test_a_hash_on_a_vcs_line_is_refused_with_the_reason(tmp_path):
    from envman.lock.pylock import parse_pylock
    from envman.lock.user_hashes import check_user_hashes
    from envman.project.sources.requirements_txt import read_requirements

    vcs_lock = ('lock-version = "1.0"\ncreated-by = "uv"\n\n[[packages]]\nname = "demo"\nversion = "1.0"\n'
                'vcs = { type = "git", url = "https://github.com/o/demo", commit-id = "' + "a" * 40 + '" }\n')
    (tmp_path / "r.txt").write_text(f"git+https://github.com/o/demo@v1#egg=demo --hash=sha256:{'e' * 64}\n")
    with pytest.raises(LockError, match="the lock records no hash for it"):
        check_user_hashes(read_requirements(tmp_path, "r.txt").reqs, parse_pylock(vcs_lock))


def test_a_vcs_requirement_is_refused_at_lock_time_with_an_archive_to_pin_instead():
    from envman.lock.artifacts import archive_of, refuse_vcs

    sha = "dcba3cb2e2827b402d2701e7e1c7d9fed8a20ef1"
    vcs_lock = ('lock-version = "1.0"\ncreated-by = "uv"\n\n[[packages]]\nname = "clip"\nversion = "1.0"\n'
                f'vcs = {{ type = "git", url = "https://github.com/openai/CLIP.git", commit-id = "{sha}" }}\n')
    with pytest.raises(LockError) as e:
        refuse_vcs(vcs_lock, {"clip": "requirements.txt:4"})
    assert e.value.message.startswith(f"requirements.txt:4: clip @ git+https://github.com/openai/CLIP.git@{sha} is a "
                                      "VCS requirement")
    assert e.value.hint == (f"pin an archive of that commit, which uv hashes: clip @ https://github.com/openai/CLIP/"
                            f"archive/{sha}.tar.gz; or a release from an index (clip==VERSION)")
    assert archive_of(f"git+https://gitlab.com/g/r@{sha}") == f"https://gitlab.com/g/r/-/archive/{sha}/r-{sha}.tar.gz"
    assert archive_of(f"git+https://example.org/g/r.git@{sha}") is None
    refuse_vcs(ARCHIVE_LOCK, {})  # an archive URL has a hash: it passes
