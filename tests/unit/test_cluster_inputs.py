"""What `envman cluster` reads that it did not write this run (issue 39.5, 39.6, 39.12, 36.4): the reports every
node writes, its own output paths (a FIFO, binary bytes), what a killed export left, a file of the wrong kind
under an export's name, and the project packaging must not see the files it writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_cluster import project  # noqa: F401 - the fixture (tests/unit is on the path)

from envman.app import cluster as app
from envman.app import cluster_export
from envman.cluster import export
from envman.cluster.nodes import node_classes, printable, report_problem
from envman.errors import UsageError
from envman.process import Owner


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "envman.cli.main", "cluster", *args], capture_output=True,
                          text=True, timeout=timeout)


def good(node: str = "n1", **over) -> dict:
    return {"tool": "envman-preflight", "node": node, "exit_code": 0, "gpu_count": 1, "driver": "580.95.05",
            "gpus": [{"name": "NVIDIA H100"}], "shm_mib": 1024, "checks": [], **over}


# --- the nodes' reports ------------------------------------------------------------------------------------
def test_reports_of_the_wrong_shape_are_named_not_a_crash(tmp_path):
    (tmp_path / "n1.json").write_text(json.dumps(good()) + "\n")
    cases = {
        "a.json": good("a", gpu_count="eight"),
        "b.json": good("b", gpus="H100"),
        "c.json": good("c", checks=[1, 2]),
        "d.json": good("d", network={"ib_devices": [{"ports": "up"}]}),
        "e.json": good("e", exit_code="0"),
    }
    for name, doc in cases.items():
        (tmp_path / name).write_text(json.dumps(doc) + "\n")
    (tmp_path / "f.json").write_text("[" * 100_000 + "]" * 100_000 + "\n")
    p = cli("nodes", str(tmp_path))
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
    assert p.stdout.splitlines()[-6:] == [
        "unreadable: a.json (gpu_count: unexpected str); see the .log beside it",
        "unreadable: b.json (gpus: unexpected str); see the .log beside it",
        "unreadable: c.json (checks: unexpected list); see the .log beside it",
        "unreadable: d.json (network.ib_devices[].ports: not a list of objects); see the .log beside it",
        "unreadable: e.json (exit_code: unexpected str); see the .log beside it",
        "unreadable: f.json (nested too deeply); see the .log beside it",
    ]


def test_a_fifo_and_a_huge_report_are_refused_without_reading_them(tmp_path):
    (tmp_path / "n1.json").write_text(json.dumps(good()) + "\n")
    os.mkfifo(tmp_path / "fifo.json")
    with open(tmp_path / "huge.json", "wb") as f:
        f.truncate(300 * 1024 * 1024)  # sparse: 300 MB of size, no disk
    t = time.monotonic()
    p = cli("nodes", str(tmp_path), timeout=30)
    assert time.monotonic() - t < 30
    assert "unreadable: fifo.json (not a regular file (a FIFO, socket or device)); see the .log beside it" in p.stdout
    assert "unreadable: huge.json (300.0 MB, over envman's limit of 1.0 MB); see the .log beside it" in p.stdout


def test_a_newline_in_a_gpu_name_cannot_fake_a_table_line(tmp_path):
    fake = "H100\n8× NVIDIA H100 · driver 999 · 1 node(s): ready"
    (tmp_path / "n1.json").write_text(json.dumps(good(gpus=[{"name": fake}], node="n1\x1b[2J")) + "\n")
    p = cli("nodes", str(tmp_path))
    lines = p.stdout.splitlines()
    assert lines[0] == "1× H100\\n8× NVIDIA H100 · driver 999 · 1 node(s): ready · driver 580.95.05 · 1 node(s): ready"
    assert lines[1] == "  nodes   n1\\x1b[2J"


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(doc=st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(
                            ["node", "gpus", "gpu_count", "driver", "checks", "network", "exit_code", "shm_mib",
                             "name", "status", "ports", "ib_devices", "nccl_env", "memlock_kib", "tool"]), inner,
                            max_size=6), max_leaves=20))
def test_any_report_that_passes_the_schema_makes_a_table_of_printable_lines(doc):
    report = {"tool": "envman-preflight", "node": "n", "exit_code": 0, **doc} if isinstance(doc, dict) else doc
    if report_problem(report) is not None:
        return
    for c in node_classes([report]):
        for text in (c.gpus, c.driver, c.nccl, c.shm, *c.nodes, *c.failures):
            assert text == printable(text) and "\n" not in text


# --- its own output paths --------------------------------------------------------------------------------
def test_a_fifo_or_binary_bytes_where_an_sbatch_goes_are_refused(project, tmp_path):  # noqa: F811
    first = app.slurm_files(project, images=tmp_path, runtimes=("oci",))
    fifo, binary = first.written
    fifo.unlink()
    os.mkfifo(fifo)
    binary.write_bytes(b"\xff\xfe\x00binary")
    p = cli("slurm", str(project), "--images", str(tmp_path), "--runtime", "oci", timeout=60)
    assert p.returncode == 1, p.stderr
    assert p.stderr.splitlines()[0] == (f"error: would overwrite .envman/cluster/{fifo.name} (not generated by envman), "
                                        f".envman/cluster/{binary.name} (not generated by envman)")
    assert p.stderr.splitlines()[1] == "hint: keep your version, or re-run with --force"


# --- where the files go ------------------------------------------------------------------------------------
def test_packaging_never_sees_the_cluster_files(project, tmp_path):  # noqa: F811
    from setuptools.discovery import FlatLayoutPackageFinder

    (project / "train.py").write_text("print('hi')\n")
    before = sorted(FlatLayoutPackageFinder.find(str(project)))
    app.slurm_files(project, images=tmp_path)
    app.k8s_files(project)
    assert sorted(p.name for p in project.iterdir()) == [".envman", "Dockerfile", "envman.lock", "envman.yaml",
                                                        "train.py"]
    assert sorted(FlatLayoutPackageFinder.find(str(project))) == before == []
    out = app.slurm_files(project, images=tmp_path, out=tmp_path / "jobs", runtimes=("oci",))
    assert [p.parent for p in out.written] == [tmp_path / "jobs"] * 2


def test_files_in_the_old_place_get_a_note(project, tmp_path):  # noqa: F811
    old = app.slurm_files(project, images=tmp_path, runtimes=("oci",), out=project / "cluster")
    assert old.written
    again = app.slurm_files(project, images=tmp_path, runtimes=("oci",))
    assert again.notes[-1] == ("envman now writes these files under .envman/cluster; the old cluster/ folder is a "
                               "top-level package to setuptools' flat layout: remove it (rm -r cluster)")


# --- what a killed export left -----------------------------------------------------------------------------
def test_an_export_removes_what_a_killed_one_left_and_nothing_else(tmp_path):
    stem = "proj_0123456789ab"
    dead = Owner(Owner.me().host, 2**22 + 12345, int(time.time())).label  # a pid no process has
    live = Owner.me().label
    made = {
        f".{stem}.sqsh.{dead}-abcd1234.tmp": True, f"envman-oci-{dead}-abcd_123": True,
        f".{stem}.bundle.{live}-abcd1234.tmp": False, f"envman-oci-{live}-zzzz1234": False,
        f".{stem}.sqsh.old12345.tmp": True,  # an older envman's name, an hour old
        f".other_0123456789ab.sqsh.{dead}-abcd1234.tmp": False, "mine.tmp": False,
    }
    for name in made:
        (tmp_path / name).mkdir()
    old = time.time() - 2 * 3600
    os.utime(tmp_path / f".{stem}.sqsh.old12345.tmp", (old, old))
    removed = export.sweep(tmp_path, stem)
    assert sorted(removed) == sorted(n for n, gone in made.items() if gone)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(n for n, gone in made.items() if not gone)


def test_a_file_of_the_wrong_kind_is_not_reported_as_the_export(project, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setattr(export, "apptainer_available", lambda: None)
    stem = app.load_cluster(project)[0].facts.stem
    (tmp_path / f"{stem}.bundle").write_text("not a bundle")
    try:
        cluster_export.export_images(project, out=tmp_path, formats=("bundle",))
    except UsageError as e:
        assert e.message == f"{tmp_path}/{stem}.bundle exists but is not a folder, not an OCI runtime bundle " \
                            "(config.json, rootfs/)"
        assert e.hint == "move it away, or re-run with --force to replace it"
    else:
        raise AssertionError("a regular file was reported as the bundle")
    assert (tmp_path / f"{stem}.bundle").read_text() == "not a bundle"


def test_staged_exports_carry_their_run(tmp_path):
    with export.Staged(tmp_path / "x.sqsh") as st_:
        assert st_.dir.name.startswith(f".x.sqsh.{Owner.me().label}-") and st_.dir.name.endswith(".tmp")
    assert export.work_prefix() == f"envman-oci-{Owner.me().label}-"


def test_forcing_an_export_over_a_file_puts_the_folder_in_its_place(tmp_path):
    target = tmp_path / "x.bundle"
    target.write_text("user's file")
    st_ = export.Staged(target)
    st_.path.mkdir()
    (st_.path / "config.json").write_text("{}")
    assert st_.commit() == target and (target / "config.json").is_file()
    assert not Path(st_.dir).exists()


def test_no_move_note_when_the_user_names_the_old_folder(project, tmp_path):  # noqa: F811
    app.slurm_files(project, images=tmp_path, runtimes=("oci",), out=project / "cluster")
    again = app.slurm_files(project, images=tmp_path, runtimes=("oci",), out=project / "cluster", force=True)
    assert not any("envman now writes" in n for n in again.notes)


# --- the project's Dockerfile (the image's driver floor is read from it) -------------------------------------
def test_a_dockerfile_that_cannot_be_read_is_named_not_taken_for_absent(project, tmp_path):  # noqa: F811
    df = project / "Dockerfile"
    df.unlink()
    os.mkfifo(df)
    p = cli("slurm", str(project), "--images", str(tmp_path), "--runtime", "oci")
    assert p.returncode == 1 and p.stderr.splitlines() == [
        "error: Dockerfile: not a regular file (a FIFO, socket or device)", "hint: point it at a regular file"]
    df.unlink()
    df.write_bytes(b"\xff\xfeFROM x\n")
    p = cli("k8s", str(project))
    assert p.returncode == 1 and p.stderr.splitlines() == ["error: Dockerfile: not UTF-8 text (byte 0)",
                                                           "hint: save it as UTF-8"]
    df.unlink()  # absent: the lock's own floor
    assert app.load_cluster(project)[0].facts.min_driver == "580.95.05"


def test_an_sbatch_in_the_way_that_cannot_be_read_is_named_not_called_someone_elses(project, tmp_path):  # noqa: F811
    first = app.slurm_files(project, images=tmp_path, runtimes=("oci",))
    loop = first.written[0]
    text = loop.read_text()
    loop.unlink()
    loop.symlink_to(loop.name)  # a link to itself: ELOOP, which says nothing about whose file it was
    p = cli("slurm", str(project), "--images", str(tmp_path), "--runtime", "oci")
    assert p.returncode == 1 and p.stderr.splitlines() == [
        f"error: {loop}: a symbolic link loop", "hint: point the link at a file, or replace it with the file"]
    assert loop.is_symlink()
    # --force replaces it like any other file in the way (it was the same error): a link to itself, a loop of two
    out = app.slurm_files(project, images=tmp_path, runtimes=("oci",), force=True)
    assert loop in out.written and not loop.is_symlink() and loop.read_text() == text
    other = loop.with_name("other")
    other.symlink_to(loop.name)
    loop.unlink()
    loop.symlink_to(other.name)
    p = cli("slurm", str(project), "--images", str(tmp_path), "--runtime", "oci", "--force")
    assert p.returncode == 0 and not loop.is_symlink() and loop.read_text() == text and other.is_symlink(), p.stderr
