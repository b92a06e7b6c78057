"""podman/buildah without running them: the runtime and limits read from this machine's files, the build and
run command lines, engine choice, and the layer diff that names what makes two builds differ."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from envman.engine import runtime
from envman.engine.archive import differences, read_image_archive
from envman.engine.daemonless import DaemonlessEngine
from envman.engine.errors import EngineError
from envman.engine.protocol import ReproSupport
from envman.engine.runtime import RuntimeChoice
from envman.engine.select import choose_engine

HYBRID = """tmpfs /sys/fs/cgroup tmpfs rw 0 0
cgroup /sys/fs/cgroup/cpu cgroup rw,cpu 0 0
cgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0
"""
UNIFIED = "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid 0 0\n"
LEGACY = "cgroup /sys/fs/cgroup/cpu cgroup rw,cpu 0 0\n"


# ------------------------------------------------------------------------------------------ runtime
@pytest.mark.parametrize("mounts, mode", [(HYBRID, "hybrid"), (UNIFIED, "unified"), (LEGACY, "legacy"), ("", "none")])
def test_cgroup_mode_from_mounts(mounts, mode):
    assert runtime.cgroup_mode(mounts) == mode


def test_hybrid_cgroups_choose_runc_and_say_why():
    choice = runtime.choose_runtime("hybrid", which=lambda t: f"/usr/bin/{t}", env={})
    assert choice == RuntimeChoice("runc", "hybrid cgroups, where crun cannot start containers")
    assert choice.args() == ["--runtime", "runc"]


def test_unified_cgroups_keep_the_engines_default():
    assert runtime.choose_runtime("unified", which=lambda t: "/x", env={}).args() == []


def test_hybrid_without_runc_is_one_clear_error():
    with pytest.raises(EngineError) as e:
        runtime.choose_runtime("hybrid", which=lambda t: "/usr/bin/crun" if t == "crun" else None, env={})
    assert "crun cannot run containers" in e.value.message and "found: crun" in e.value.message
    assert "apt-get install -y runc" in e.value.hint


def test_runtime_named_by_the_environment():
    assert runtime.choose_runtime("hybrid", which=lambda t: None, env={"ENVMAN_OCI_RUNTIME": "crun"}).runtime == "crun"


LIMITS = """Limit                     Soft Limit           Hard Limit           Units
Max processes             96363                96363                processes
Max open files            20000                20000                files
"""


def test_ulimits_only_without_cap_sys_resource():
    with_cap = "CapEff:\t000001ffffffffff\n"
    without = "CapEff:\t000001fffeffffff\n"  # bit 24 cleared: this sandbox's measured value
    assert runtime.ulimit_args(with_cap, LIMITS, "32768\n") == []
    # nproc above pid_max was refused by runc here (measured); no more processes can exist anyway
    assert runtime.ulimit_args(without, LIMITS, "32768\n") == ["--ulimit", "nofile=20000:20000",
                                                                "--ulimit", "nproc=32768:32768"]


# ------------------------------------------------------------------------------------------ commands
def engine(tool: str = "podman") -> DaemonlessEngine:
    e = DaemonlessEngine(tool, exe=f"/usr/bin/{tool}", runtime=RuntimeChoice("runc", "test"),
                         global_args=["--root", "/r"])
    e._version = "4.3.1"
    return e


def test_podman_build_command(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    e = engine()
    e.import_dir(tmp_path, "envman-wheelhouse:abc")
    argv, env = e.build_command(tmp_path, dockerfile="Dockerfile", tags=["p:1"], build_args={"HTTPS_PROXY": "http://u:pw@p"},
                                secrets={"envman_ca": ca}, extra_contexts=e._contexts, source_date_epoch=1700000000,
                                no_cache=True, iidfile="/tmp/iid")
    assert argv[:6] == ["/usr/bin/podman", "--root", "/r", "--runtime", "runc", "build"]
    assert "--layers" in argv and "--no-cache" in argv
    assert argv[argv.index("--timestamp") + 1] == "1700000000"
    assert env == {"HTTPS_PROXY": "http://u:pw@p", "SOURCE_DATE_EPOCH": "1700000000"}
    assert "http://u:pw@p" not in " ".join(argv)  # the value travels in the environment
    assert f"envman-wheelhouse:abc={tmp_path.resolve()}" in argv
    assert f"id=envman_ca,src={ca.resolve()}" in argv
    assert argv[-1] == str(tmp_path)


def test_buildah_takes_the_runtime_after_the_subcommand(tmp_path):
    argv, _ = engine("buildah").build_command(tmp_path)
    assert argv[:6] == ["/usr/bin/buildah", "--root", "/r", "build", "--runtime", "runc"]
    assert "--timestamp" not in argv


def test_secret_path_with_a_comma_is_refused(tmp_path):
    bad = tmp_path / "a,b.pem"
    bad.write_text("x")
    with pytest.raises(EngineError, match="path with a comma"):
        engine().build_command(tmp_path, secrets={"envman_ca": bad})


def test_import_dir_names_a_directory_and_removing_it_forgets_it(tmp_path):
    e = engine()
    assert e.import_dir(tmp_path, "envman-wheelhouse:abc") == f"dir:{tmp_path.resolve()}"
    assert e.image_exists("envman-wheelhouse:abc")
    assert e.remove_image("envman-wheelhouse:abc") is True
    with pytest.raises(EngineError, match="not a directory"):
        e.import_dir(tmp_path / "missing", "x:y")


def test_missing_tool_says_how_to_install():
    e = DaemonlessEngine("buildah", exe=None)
    e.exe = None
    with pytest.raises(EngineError) as err:
        e.ping()
    assert err.value.message == "buildah is not installed (not on PATH)" and "podman-up.sh" in err.value.hint


# ------------------------------------------------------------------------------------------ choosing
class Stub:
    def __init__(self, name, problem=None, clamps=True):
        self.name, self.problem, self.clamps = name, problem, clamps

    def ping(self):
        if self.problem:
            raise EngineError(self.problem)
        return "1"

    def describe(self):
        return self.name

    def repro_support(self):
        return ReproSupport(self.clamps, "")


def test_auto_takes_docker_when_it_answers():
    c = choose_engine(None, env={}, make=lambda n: Stub(n))
    assert c.engine.name == "docker"


def test_auto_falls_back_to_podman_and_says_docker_did_not_answer():
    c = choose_engine(None, env={}, make=lambda n: Stub(n, "no engine answers" if n == "docker" else None))
    assert c.engine.name == "podman" and "docker did not" in c.why


def test_verify_repro_prefers_an_engine_that_can_clamp():
    c = choose_engine(None, need_repro=True, env={}, make=lambda n: Stub(n, clamps=n != "docker"))
    assert c.engine.name == "podman" and "docker cannot clamp layer times" in c.why


def test_no_engine_names_what_was_found_of_each():
    with pytest.raises(EngineError) as e:
        choose_engine(None, env={}, make=lambda n: Stub(n, f"{n} is not installed"))
    assert e.value.message == ("no container engine works here (docker: docker is not installed; "
                               "podman: podman is not installed; buildah: buildah is not installed)")


def test_requested_engine_that_does_not_work_is_refused_not_replaced():
    with pytest.raises(EngineError, match="^--engine podman: podman is not installed"):
        choose_engine("podman", env={}, make=lambda n: Stub(n, f"{n} is not installed"))
    with pytest.raises(EngineError, match="not an engine envman knows"):
        choose_engine("containerd", env={}, make=lambda n: Stub(n))
    assert choose_engine(None, env={"ENVMAN_ENGINE": "buildah"}, make=lambda n: Stub(n)).why == "ENVMAN_ENGINE buildah"


# ------------------------------------------------------------------------------------------ layer diffs
def _tar(files: dict[str, tuple[bytes, int]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, (data, mtime) in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), mtime, 0o644
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _save(layers: list[bytes], steps: list[str], created: str = "2026-11-19T04:26:29Z") -> io.BytesIO:
    """A podman-style docker-archive: <diff_id>.tar members, then the config, then manifest.json."""
    import hashlib

    ids = ["sha256:" + hashlib.sha256(layer).hexdigest() for layer in layers]
    config = {"created": created, "rootfs": {"type": "layers", "diff_ids": ids},
              "history": [{"created": created, "created_by": s} for s in steps], "config": {"User": "app"}}
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as t:
        members = [(i.split(":")[1] + ".tar", layer) for i, layer in zip(ids, layers)]
        members += [("c0nf.json", json.dumps(config).encode()), ("manifest.json", b"[]")]
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    out.seek(0)
    return out


def test_the_diff_names_the_file_stamped_with_the_time():
    base = _tar({"etc/os-release": (b"debian", 0)})
    a = _tar({"opt/x/stable": (b"same", 1700000000), "opt/x/stamp": (b"1764620000", 1700000000)})
    b = _tar({"opt/x/stable": (b"same", 1700000000), "opt/x/stamp": (b"1764620093", 1700000000)})
    steps = ["/bin/sh -c #(nop) ADD file", "|2 PYTHONHASHSEED=0 SOURCE_DATE_EPOCH=1 /bin/sh -c date > /opt/x/stamp"]
    first, second = read_image_archive(_save([base, a], steps)), read_image_archive(_save([base, b], steps))
    assert differences(first, second) == ["layer 2/2 (RUN date > /opt/x/stamp): /opt/x/stamp: content differs"]


def test_the_diff_names_times_modes_config_and_files_in_one_build_only():
    a = _tar({"f": (b"1", 1700000000), "gone": (b"", 0)})
    b = _tar({"f": (b"1", 1764620093), "new": (b"", 0)})
    first = read_image_archive(_save([a], ["RUN x"]))
    second = read_image_archive(_save([b], ["RUN x"], created="2026-12-01T20:00:00Z"))
    got = differences(first, second)
    assert got[0] == "image config: created '2026-11-19T04:26:29Z' vs '2026-12-01T20:00:00Z'"
    assert "layer 1/1 (RUN x): /f: mtime 2023-11-14T22:13:20Z vs 2025-12-01T20:14:53Z" in got
    assert "layer 1/1 (RUN x): /gone: only in the first build" in got
    assert "layer 1/1 (RUN x): /new: only in the second build" in got


def test_layers_not_wanted_are_skipped_unread():
    layer = _tar({"f": (b"1", 0)})
    arc = read_image_archive(_save([layer], ["RUN x"]), wanted=lambda diff_id: False)
    assert arc.layers == {} and len(arc.diff_ids) == 1


def test_identical_images_have_no_differences():
    layer = _tar({"f": (b"1", 0)})
    assert differences(read_image_archive(_save([layer], ["RUN x"])), read_image_archive(_save([layer], ["RUN x"]))) == []


def test_docker_save_layout_is_read_too():
    """docker 20.10's save: <v1 id>/layer.tar members, not named by their diff_id: hashed while read."""
    import hashlib

    layer = _tar({"opt/a": (b"x", 0)})
    diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as t:
        for name, data in (("0123abcd/layer.tar", layer), ("0123abcd/VERSION", b"1.0"),
                           ("feed.json", json.dumps({"rootfs": {"diff_ids": [diff_id]}, "history": []}).encode())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    out.seek(0)
    arc = read_image_archive(out)
    assert list(arc.layers) == [diff_id] and "/opt/a" in arc.layers[diff_id]


def test_runtime_reads_this_machine(monkeypatch, tmp_path):
    f = tmp_path / "mounts"
    f.write_text(HYBRID)
    monkeypatch.setattr(runtime, "_read", lambda p: Path(f).read_text() if p == "/proc/self/mounts" else "")
    monkeypatch.setattr(runtime.shutil, "which", lambda t: f"/usr/sbin/{t}" if t == "runc" else None)
    monkeypatch.delenv("ENVMAN_OCI_RUNTIME", raising=False)
    assert runtime.machine_runtime().runtime == "runc"


def test_the_dockerfiles_own_ignore_file_is_passed_to_buildah(tmp_path):
    df = tmp_path / ".envman" / "Dockerfile.offline"
    df.parent.mkdir()
    df.write_text("FROM x\n")
    argv, _ = engine().build_command(tmp_path, dockerfile=df)
    assert "--ignorefile" not in argv
    (tmp_path / ".envman" / "Dockerfile.offline.dockerignore").write_text("data\n")
    argv, _ = engine().build_command(tmp_path, dockerfile=df)
    assert argv[argv.index("--ignorefile") + 1] == str(df) + ".dockerignore"


# ------------------------------------------------------------------------------------------ BuildKit's clamping
def test_buildkit_version_from_buildx_inspect_and_the_rewrite_threshold(tmp_path):
    from envman.engine import buildkit
    from envman.engine.buildkit import BuildClient

    exe = tmp_path / "docker"
    exe.write_text('#!/bin/sh\nif [ "$2" = inspect ]; then printf "Name: default\\nDriver: docker\\n'
                   ' Buildkit: v0.13.2\\n"; fi\n')
    exe.chmod(0o755)
    bx = BuildClient("buildx", str(exe), "v0.14.0")
    assert buildkit.buildkit_version(bx) == "v0.13.2"
    assert buildkit.can_rewrite_timestamps(bx, "v0.13.2") and not buildkit.can_rewrite_timestamps(bx, "v0.12.5")
    native = BuildClient("native", str(exe), "20.10.24")
    assert buildkit.buildkit_version(native) is None and not buildkit.can_rewrite_timestamps(native, "v0.13.2")


def test_rewrite_timestamp_replaces_load_with_the_explicit_docker_output(tmp_path):
    from envman.engine.buildkit import BuildClient, build_command

    bx = BuildClient("buildx", "/usr/bin/docker", "v0.14.0")
    argv, _ = build_command(bx, tmp_path, rewrite_timestamp=True)
    assert argv[:5] == ["/usr/bin/docker", "buildx", "build", "--output", "type=docker,rewrite-timestamp=true"]
    assert "--load" not in argv
    assert build_command(bx, tmp_path)[0][3] == "--load"


def test_docker_engines_say_whether_and_why_they_clamp(monkeypatch):
    from envman.engine import docker as eng
    from envman.engine.buildkit import BuildClient

    native = eng.Engine(build_client=BuildClient("native", "/usr/bin/docker", "20.10.24+dfsg1"))
    support = native.repro_support()
    assert not support.clamps and "daemon's own BuildKit" in support.how and "BuildKit 0.13+" in support.how
    monkeypatch.setattr(eng, "buildkit_version", lambda c: "v0.12.5")
    old = eng.Engine(build_client=BuildClient("buildx", "/usr/bin/docker", "v0.12.1")).repro_support()
    assert not old.clamps and "BuildKit v0.12.5" in old.how
    monkeypatch.setattr(eng, "buildkit_version", lambda c: "v0.15.1")
    assert eng.Engine(build_client=BuildClient("buildx", "/usr/bin/docker", "v0.16.0")).repro_support().clamps
