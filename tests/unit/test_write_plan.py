"""Issue #12: writes are all or nothing. Every target is checked first, every file is staged beside its target,
then renamed; a failure at any step leaves the project as it was (no mixed set, no temp file) and is one
`error:` line naming the file (exit 1, not 70)."""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

import pytest

import envman.files
from envman.app.init import InitOptions, init_project
from envman.cli.main import main
from envman.errors import UsageError
from envman.files import WritePlan, commit_files

REPOS = Path(__file__).resolve().parent.parent / "fixtures" / "repos"


def snapshot(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def temps(d: Path) -> list[str]:
    return [str(p.relative_to(d)) for p in d.rglob("*.tmp")]


def failing_on(monkeypatch, name: str, k: int, err: int = errno.ENOSPC, under: Path | None = None):
    """os.<name> (or tempfile.mkstemp) raises OSError(err) on its k-th call (0-based), works otherwise; with
    ``under``, only the calls that replace a file in that folder count (envman's cache is not the project)."""
    mod = envman.files.tempfile if name == "mkstemp" else envman.files.os
    real = getattr(mod, name)
    calls = [0]

    def fake(*a, **kw):
        if under is not None and not str(a[1]).startswith(str(under)):
            return real(*a, **kw)
        calls[0] += 1
        if calls[0] - 1 == k:
            raise OSError(err, os.strerror(err))
        return real(*a, **kw)

    monkeypatch.setattr(mod, name, fake)
    return calls


def files_for(root: Path, tag: str) -> list[tuple[Path, str]]:
    return [(root / "a.txt", f"a {tag}\n"), (root / "sub" / "b.txt", f"b {tag}\n"),
            (root / "sub" / "deep" / "c.txt", f"c {tag}\n"), (root / "envman.lock", f"lock {tag}\n")]


@pytest.mark.parametrize("k", range(4))
@pytest.mark.parametrize("first_run", [True, False])
def test_failed_rename_leaves_all_old(tmp_path, monkeypatch, k, first_run):
    if not first_run:
        commit_files(files_for(tmp_path, "old"), tmp_path)
    before = snapshot(tmp_path)
    failing_on(monkeypatch, "replace", k)
    with pytest.raises(UsageError) as exc:
        commit_files(files_for(tmp_path, "new"), tmp_path)
    shown = ["a.txt", "sub/b.txt", "sub/deep/c.txt", "envman.lock"][k]
    assert exc.value.message == f"cannot write {shown}: No space left on device"
    assert snapshot(tmp_path) == before and temps(tmp_path) == []
    if first_run:
        assert list(tmp_path.iterdir()) == []  # folders it created are gone too


@pytest.mark.parametrize("k", range(4))
def test_failed_staging_leaves_all_old(tmp_path, monkeypatch, k):
    commit_files(files_for(tmp_path, "old"), tmp_path)
    before = snapshot(tmp_path)
    failing_on(monkeypatch, "mkstemp", k)
    with pytest.raises(UsageError):
        commit_files(files_for(tmp_path, "new"), tmp_path)
    assert snapshot(tmp_path) == before and temps(tmp_path) == []


def test_success_writes_all_and_lock_last(tmp_path, monkeypatch):
    order = []
    real = os.replace
    monkeypatch.setattr(envman.files.os, "replace", lambda a, b: (order.append(Path(b).name), real(a, b)))
    commit_files(files_for(tmp_path, "new"), tmp_path)
    assert order[-1] == "envman.lock" and (tmp_path / "sub" / "deep" / "c.txt").read_text() == "c new\n"
    assert temps(tmp_path) == []


def test_unwritable_folder_is_found_before_anything_is_written(tmp_path, monkeypatch):
    (tmp_path / ".devcontainer").mkdir()
    real = os.access
    monkeypatch.setattr(envman.files.os, "access",
                        lambda p, m: False if Path(p).name == ".devcontainer" else real(p, m))
    files = [(tmp_path / "Dockerfile", "x\n"), (tmp_path / ".devcontainer" / "devcontainer.json", "{}\n")]
    with pytest.raises(UsageError) as exc:
        commit_files(files, tmp_path)
    assert exc.value.message.startswith("cannot write .devcontainer/devcontainer.json: Permission denied (folder ")
    assert not (tmp_path / "Dockerfile").exists()


def test_name_too_long_and_folder_target_are_found_first(tmp_path):
    (tmp_path / "Dockerfile").mkdir()
    files = [(tmp_path / "ok.txt", "x\n"), (tmp_path / ("n" * 250), "x\n"), (tmp_path / "Dockerfile", "x\n")]
    with pytest.raises(UsageError) as exc:
        commit_files(files, tmp_path)
    assert exc.value.message == f"cannot write {'n' * 250}: File name too long (and 1 more)"
    assert not (tmp_path / "ok.txt").exists()


def test_stale_temps_of_a_killed_run_are_cleaned_and_a_live_runs_are_kept(tmp_path):
    """Issue 24: two locks at once — one's sweep must not delete the other's staged files. A temp file names its
    run (host, pid, start): only a gone run's (or a day-old one) is swept; an unnamed one after an hour."""
    import subprocess
    import time

    from envman.process import host_id

    dead = subprocess.Popen(["true"])
    dead.wait()
    now = int(time.time())
    gone = f".a.txt.{host_id()}-{dead.pid}-{now}-ab_cd123.tmp"
    live = f".a.txt.{host_id()}-{os.getppid()}-{now}-ab_cd124.tmp"  # another envman, staging right now
    old = ".a.txt.ab_cd125.tmp"  # an older envman's name: swept once it is an hour old
    fresh = ".a.txt.ab_cd126.tmp"
    for n in (gone, live, old, fresh, ".other.ab_cd123.tmp"):
        (tmp_path / n).write_text("half")
    os.utime(tmp_path / old, (now - 7200, now - 7200))
    (tmp_path / "a.txt").write_text("same\n")
    WritePlan([(tmp_path / "a.txt", "same\n")], root=tmp_path).write()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live, fresh, ".other.ab_cd123.tmp", "a.txt"])


KILL_AT = """
import os, signal, sys
from pathlib import Path
import envman.files as f
root, k = Path(sys.argv[1]), int(sys.argv[2])
real, n = os.replace, [0]
def replace(a, b):
    if n[0] == k:
        os.kill(os.getpid(), signal.SIGKILL)
    n[0] += 1
    real(a, b)
f.os.replace = replace
f.commit_files([(root / "a.txt", "a new\\n"), (root / "sub" / "b.txt", "b new\\n"),
                (root / "sub" / "deep" / "c.txt", "c new\\n"), (root / "envman.lock", "lock new\\n")], root)
"""


@pytest.mark.parametrize("k", range(1, 4))
def test_a_run_killed_between_renames_never_leaves_a_mixed_set(tmp_path, k):
    """Issue 24: SIGKILL after k of the 4 renames. The journal written before the first lets the next run
    (any read of envman.lock) complete them: the project holds the new set, never half of each."""
    import subprocess
    import sys

    from envman.files import JOURNAL, finish_commit
    from envman.lock.lockfile import try_read_lock

    commit_files(files_for(tmp_path, "old"), tmp_path)
    new = dict((str(p.relative_to(tmp_path)), t.encode()) for p, t in files_for(tmp_path, "new"))
    proc = subprocess.run([sys.executable, "-c", KILL_AT, str(tmp_path), str(k)])
    assert proc.returncode == -9
    mixed = {n: b for n, b in snapshot(tmp_path).items() if not n.endswith(".tmp")}
    assert mixed != new and (tmp_path / JOURNAL).is_file()  # killed halfway: what the next run finds
    try_read_lock(tmp_path / "envman.lock")  # any command that reads the lock completes the commit first
    assert snapshot(tmp_path) == new and temps(tmp_path) == []
    assert finish_commit(tmp_path) is False  # nothing left to complete


def test_a_second_writer_waits_for_the_first(tmp_path):
    import threading
    import time

    from envman.files import project_lock

    done = threading.Event()

    def second():
        WritePlan([(tmp_path / "b.txt", "b\n")], root=tmp_path).write()
        done.set()

    with project_lock(tmp_path):
        t = threading.Thread(target=second)
        t.start()
        time.sleep(0.5)
        assert not done.is_set()  # it waits on the project's lock
    t.join(10)
    assert done.is_set() and (tmp_path / "b.txt").read_text() == "b\n"


# --- through the use case and the CLI ----------------------------------------------------------------------


@pytest.fixture
def repo(tmp_path):
    d = tmp_path / "torch-repo"
    shutil.copytree(REPOS / "torch-repo", d)
    return d


def _count_replaces(monkeypatch, fn, under: Path) -> int:
    calls = []
    real = os.replace
    monkeypatch.setattr(envman.files.os, "replace",
                        lambda a, b: (calls.append(b) if str(b).startswith(str(under)) else None, real(a, b)))
    fn()
    monkeypatch.setattr(envman.files.os, "replace", real)
    return len(calls)


def test_init_is_all_or_nothing_at_every_rename(tmp_path, monkeypatch):
    src = tmp_path / "src"
    shutil.copytree(REPOS / "torch-repo", src)
    probe = tmp_path / "probe"
    shutil.copytree(src, probe)
    n = _count_replaces(monkeypatch, lambda: init_project(probe, InitOptions(targets=("h100",), python="3.11", no_lock=True)),
                        probe)
    assert n >= 8  # envman.yaml, Dockerfile, locks, compose, devcontainer, the kit …
    for k in range(n):
        d = tmp_path / f"k{k}"
        shutil.copytree(src, d)
        before = snapshot(d)
        failing_on(monkeypatch, "replace", k, errno.EACCES, under=d)
        with pytest.raises(UsageError) as exc:
            init_project(d, InitOptions(targets=("h100",), python="3.11", no_lock=True))
        monkeypatch.undo()
        assert exc.value.message.startswith("cannot write ") and "Permission denied" in exc.value.message
        assert snapshot(d) == before, k
        assert temps(d) == [] and not (d / ".envman").exists() and not (d / ".devcontainer").exists()


def test_relock_failure_keeps_the_old_set(repo, monkeypatch, capsys):
    init_project(repo, InitOptions(targets=("h100",), python="3.11", no_lock=True))
    spec = repo / "envman.yaml"
    spec.write_text(spec.read_text().replace("- h100", "- h100\n- a100"))
    before = snapshot(repo)
    failing_on(monkeypatch, "replace", 2, errno.ENOSPC)
    assert main(["init", str(repo), "--no-lock"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("error: cannot write ") and err[0].endswith(": No space left on device")
    assert err[1] == "hint: free space on that disk (or write elsewhere), then re-run; nothing was changed"
    assert snapshot(repo) == before and temps(repo) == []


def test_a_symlinked_dockerfile_stays_a_link_and_is_written_through(repo, tmp_path):
    """Issue 24: a Dockerfile kept in docker/ and linked from the root came back as a regular file (and after a
    failed write the message said nothing changed). It is written through its link, which stays a link."""
    init_project(repo, InitOptions(targets=("h100",), python="3.11", no_lock=True))
    (repo / "docker").mkdir()
    (repo / "Dockerfile").rename(repo / "docker" / "Dockerfile")
    (repo / "Dockerfile").symlink_to("docker/Dockerfile")
    old = (repo / "docker" / "Dockerfile").read_text()
    spec = repo / "envman.yaml"
    spec.write_text(spec.read_text().replace("- h100", "- h100\n- v100"))
    twin = tmp_path / "twin"
    shutil.copytree(repo, twin, symlinks=False)
    init_project(twin, InitOptions(no_lock=True))  # the same project with a plain Dockerfile: what it must hold
    init_project(repo, InitOptions(no_lock=True))
    assert (repo / "Dockerfile").is_symlink() and os.readlink(repo / "Dockerfile") == "docker/Dockerfile"
    assert (repo / "docker" / "Dockerfile").read_text() == (twin / "Dockerfile").read_text() != old


def test_a_failed_write_through_a_link_keeps_the_link_and_its_old_content(repo, monkeypatch):
    init_project(repo, InitOptions(targets=("h100",), python="3.11", no_lock=True))
    (repo / "docker").mkdir()
    (repo / "Dockerfile").rename(repo / "docker" / "Dockerfile")
    (repo / "Dockerfile").symlink_to("docker/Dockerfile")
    spec = repo / "envman.yaml"
    spec.write_text(spec.read_text().replace("- h100", "- h100\n- v100"))
    before = snapshot(repo)
    failing_on(monkeypatch, "replace", 3, errno.ENOSPC, under=repo)
    with pytest.raises(UsageError) as exc:
        init_project(repo, InitOptions(no_lock=True))
    monkeypatch.undo()
    assert exc.value.hint == "free space on that disk (or write elsewhere), then re-run; nothing was changed"
    assert (repo / "Dockerfile").is_symlink() and snapshot(repo) == before


def test_a_dockerfile_linked_out_of_the_project_is_refused_and_kept(repo, tmp_path, capsys):
    init_project(repo, InitOptions(targets=("h100",), python="3.11", no_lock=True))
    outside = tmp_path / "elsewhere" / "Dockerfile"
    outside.parent.mkdir()
    outside.write_text((repo / "Dockerfile").read_text())
    (repo / "Dockerfile").unlink()
    (repo / "Dockerfile").symlink_to(outside)
    spec = repo / "envman.yaml"
    spec.write_text(spec.read_text().replace("- h100", "- h100\n- a100"))
    before = outside.read_text()
    assert main(["init", str(repo), "--no-lock"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"error: Dockerfile is a symbolic link to {outside.resolve()}, outside the project", err
    assert (repo / "Dockerfile").is_symlink() and outside.read_text() == before


def test_a_link_loop_in_a_generated_files_place_is_named_and_replaced_with_force(tmp_path):
    """A link loop is in the way like any other file: refused without --force naming the loop, replaced with it
    (the cluster's sbatch writer read it even with --force: tests/unit/test_cluster_inputs.py)."""
    (tmp_path / "Dockerfile").symlink_to("Dockerfile")
    plan = WritePlan([(tmp_path / "Dockerfile", "FROM x\n")])
    with pytest.raises(UsageError) as exc:
        plan.check(tmp_path, force=False)
    assert (exc.value.message, exc.value.hint) == (f"{tmp_path / 'Dockerfile'}: a symbolic link loop",
                                                   "point the link at a file, or replace it with the file")
    plan.check(tmp_path, force=True)
    assert plan.write() == [tmp_path / "Dockerfile"] and (tmp_path / "Dockerfile").read_text() == "FROM x\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can write files another user owns: run as root to test")
def test_sudo_envman_in_another_users_project_leaves_their_files_theirs(repo):
    """Issue 24: `sudo envman lock` left root-owned files the project's owner could not edit or re-lock."""
    uid, gid = 4242, 4343
    for p in [repo, *repo.rglob("*")]:
        os.lchown(p, uid, gid)
    init_project(repo, InitOptions(targets=("h100",), python="3.11", no_lock=True))
    owners = {str(p.relative_to(repo)): (p.lstat().st_uid, p.lstat().st_gid) for p in repo.rglob("*")}
    assert {o for o in owners.values()} == {(uid, gid)}, {k: v for k, v in owners.items() if v != (uid, gid)}
