"""Reproducible as bits, offline: the lock's date, the SBOM, and `build --verify-repro` / `envman verify`
orchestrated against the fake engine (the real two builds are tests/integration/test_repro_podman.py)."""

from __future__ import annotations

import io
import json
import tarfile

import pytest
from fakes import FakeEngine

from envman.app.repro import record_image, verify_build, verify_image
from envman.engine.buildkit import BuildClient, BuildResult
from envman.engine.errors import EngineError
from envman.errors import ReproError
from envman.lock.epoch import source_date_epoch
from envman.lock.lockfile import Lock, read_lock, write_lock
from envman.lock.sbom import stack_sbom
from envman.lockedstack import BaseImage, LockedBodies, LockedStack

PYLOCK = """lock-version = "1.0"
created-by = "uv"
requires-python = "==3.11.*"

[[packages]]
name = "numpy"
version = "2.1.3"
wheels = [{ url = "https://files.example/numpy-2.1.3-cp311-cp311-manylinux_2_17_x86_64.whl", upload-time = 2024-11-02T17:48:00Z, size = 1, hashes = { sha256 = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" } }]

[[packages]]
name = "torch"
version = "2.14.1"
wheels = [{ url = "https://files.example/torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl", upload-time = 2026-07-16T10:13:01Z, size = 1, hashes = { sha256 = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb" } }]

[[packages]]
name = "tqdm"
version = "4.68.0"
sdist = { url = "https://files.example/tqdm-4.68.0.tar.gz", upload-time = 2026-11-23T18:01:13Z, size = 1, hashes = { sha256 = "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc" } }
"""


# ------------------------------------------------------------------------------------------ the lock's date
def test_the_date_is_the_newest_upload_of_the_framework_closure():
    sde, why = source_date_epoch(PYLOCK, ["torch"])
    assert sde == 1784196781  # 2026-07-16T10:13:01Z
    assert why == "the newest upload-time among the framework's locked files in pylock.toml: torch 2.14.1 (2026-07-16T10:13:01Z)"


def test_without_a_framework_every_file_counts_sdists_too():
    assert source_date_epoch(PYLOCK)[0] == 1795456873  # tqdm's sdist, 2026-11-23T18:01:13Z


def test_no_lock_or_no_upload_time_is_a_fixed_date():
    assert source_date_epoch(None) == (0, "no Python lock: a fixed date (1970-01-01)")
    assert source_date_epoch('lock-version = "1.0"\n[[packages]]\nname = "x"\nversion = "1"\n')[0] == 0


# ------------------------------------------------------------------------------------------ SBOM
def sbom(lock_hash: str = "5" * 64, base_digest: str | None = "sha256:" + "d" * 64, pylock_text: str = PYLOCK) -> str:
    res = type("R", (), {"framework": "torch", "version": "2.14.1", "variant": "cu130", "cuda": None, "cudnn": None,
                         "python": "3.11", "arch_list": (), "arch": "x86_64"})()
    stack = LockedStack(name="demo", res=res, base=BaseImage("python:3.11-slim-bookworm", "slim", base_digest),
                        inputs_hash="0" * 64, locked=LockedBodies(pylock=pylock_text), apt=("libgomp1",),
                        apt_pins={"libgl1": "1.6.0-1"}, source_date_epoch=1784196781, version="0.2.0")
    return stack_sbom(stack, lock_hash)


def test_sbom_is_the_lock_in_cyclonedx_and_valid():
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    text = sbom()
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    doc = json.loads(text)
    assert doc["metadata"]["timestamp"] == "2026-07-16T10:13:01+00:00"  # the lock's date, not the clock
    by = {c["bom-ref"]: c for c in doc["components"]}
    torch = by["pkg:pypi/torch@2.14.1"]
    assert torch["hashes"] == [{"alg": "SHA-256", "content": "b" * 64}]
    assert torch["externalReferences"][0]["url"].endswith("torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl")
    base = by["base:python:3.11-slim-bookworm"]
    assert (base["name"], base["version"], base["hashes"][0]["content"]) == ("python", "3.11-slim-bookworm", "d" * 64)
    assert by["apt:libgl1"]["purl"] == "pkg:deb/libgl1@1.6.0-1"
    assert by["apt:libgomp1"]["properties"] == [{"name": "envman:version", "value": "not pinned: the archive's version at build time"}]


def test_sbom_bytes_depend_on_the_lock_only():
    assert sbom() == sbom()
    other = json.loads(sbom(pylock_text=PYLOCK.replace("4.68.0", "4.68.1")))
    assert other["serialNumber"] != json.loads(sbom())["serialNumber"]  # derived from what it lists
    assert json.loads(sbom(lock_hash="6" * 64))["serialNumber"] == json.loads(sbom())["serialNumber"]
    unpinned = json.loads(sbom(base_digest=None))
    base = next(c for c in unpinned["components"] if c["bom-ref"].startswith("base:"))
    assert "hashes" not in base and {"name": "envman:digest", "value": "unpinned: no registry answered when locking"} in base["properties"]


def test_package_urls_follow_the_purl_spec():
    """purl-spec: a pypi name lower-cased with `_` as `-`; the version percent-encoded (a local version's `+`), a
    Debian epoch's `:` kept — the spellings packageurl-python gives (checked against it when this was written)."""
    from envman.lock.sbom import purl

    assert purl("pypi", "Foo_Bar", "2.14.1+cu130") == "pkg:pypi/foo-bar@2.14.1%2Bcu130"
    assert purl("deb", "libc6", "1:2.36-9+deb12u9") == "pkg:deb/libc6@1:2.36-9%2Bdeb12u9"
    assert purl("deb", "libgomp1", None) == "pkg:deb/libgomp1"
    doc = json.loads(sbom(pylock_text=PYLOCK.replace('"2.14.1"', '"2.14.1+cu130"')))
    assert "pkg:pypi/torch@2.14.1%2Bcu130" in doc["dependencies"][0]["dependsOn"]


def test_a_private_indexs_placeholder_is_percent_encoded_in_the_sboms_urls():
    """CycloneDX's `url` is an IRI reference: `{` `}` are not allowed in one, so the `${ENVMAN_INDEX_…}` a private
    index's files carry in pylock.toml (docs/security.md) is encoded; the file's own URL characters are kept."""
    private = PYLOCK.replace("https://files.example/torch", "${ENVMAN_INDEX_FILES_EXAMPLE}/torch")
    urls = [r["url"] for c in json.loads(sbom(pylock_text=private))["components"] for r in c.get("externalReferences", [])]
    assert "$%7BENVMAN_INDEX_FILES_EXAMPLE%7D/torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl" in urls
    assert "https://files.example/numpy-2.1.3-cp311-cp311-manylinux_2_17_x86_64.whl" in urls
    assert not any(ch in u for u in urls for ch in '{} "<>')


def test_a_package_listed_twice_is_one_component():
    """CycloneDX requires unique bom-refs: a pylock naming one package twice (two markers) lists it once."""
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    twice = PYLOCK + PYLOCK[PYLOCK.index("[[packages]]\nname = \"numpy\""):PYLOCK.index("[[packages]]\nname = \"torch\"")]
    text = sbom(pylock_text=twice)
    refs = [c["bom-ref"] for c in json.loads(text)["components"]]
    assert refs.count("pkg:pypi/numpy@2.1.3") == 1 and len(refs) == len(set(refs))
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None


def test_the_validator_does_refuse_a_broken_sbom():
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    doc = json.loads(sbom())
    doc["components"][0]["type"] = "not-a-type"
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(json.dumps(doc)) is not None


# ------------------------------------------------------------------------------------------ --verify-repro
def _save(files: dict[str, bytes], created: str = "2026-07-16T10:13:01Z") -> bytes:
    import hashlib

    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w") as t:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), 1784196781
            t.addfile(info, io.BytesIO(data))
    raw = layer.getvalue()
    diff_id = hashlib.sha256(raw).hexdigest()
    config = json.dumps({"created": created, "rootfs": {"diff_ids": ["sha256:" + diff_id]},
                         "history": [{"created_by": "/bin/sh -c pip install ."}]}).encode()
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as t:
        for name, data in ((f"{diff_id}.tar", raw), ("cfg.json", config)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return out.getvalue()


A, B = "sha256:" + "a" * 64, "sha256:" + "c" * 64


def builder(engine: FakeEngine):
    def build(tag: str) -> BuildResult:
        return engine.build(".", tags=[tag], no_cache=True, source_date_epoch=1784196781)
    return build


def test_two_agreeing_builds_pass_and_the_first_is_removed_before_the_second():
    engine = FakeEngine(image_ids=[A, A], archives={A: _save({"opt/a": b"1"})})
    lines: list[str] = []
    out = verify_build(engine, builder(engine), tag="demo:5555-unverified", base="python:3.11", echo=lines.append)
    assert out.image_id == A
    assert [e for e in engine.log if e[0] in ("build", "export", "remove")] == [
        ("build", ("demo:5555-unverified-repro-1",)), ("export", "demo:5555-unverified-repro-1"),
        ("remove", "demo:5555-unverified-repro-1"), ("build", ("demo:5555-unverified",))]
    assert all(b["no_cache"] is True and b["source_date_epoch"] == 1784196781 for b in engine.builds)
    assert lines[-1].startswith(f"reproducible: both builds gave {A}")


def test_two_differing_builds_name_the_file_that_differs():
    engine = FakeEngine(image_ids=[A, B], archives={A: _save({"opt/stamp": b"1764620000"}),
                                                     B: _save({"opt/stamp": b"1764620093"})})
    with pytest.raises(ReproError) as e:
        verify_build(engine, builder(engine), tag="demo:5555-unverified-run1", base="python:3.11", echo=lambda s: None,
                     keep_as="demo:5555-unverified")
    assert e.value.message == (f"two builds of this lock from scratch gave two images ({A} and {B}); "
                               "demo:5555-unverified is the second")
    assert "layer 1/1 (RUN pip install .): /opt/stamp: content differs" in e.value.hint
    assert e.value.exit_code == 1
    assert engine.image_exists("demo:5555-unverified")  # kept for inspection, under the failed-build tag
    assert not engine.image_exists("demo:5555-unverified-run1")  # the run's own tag is gone


def test_an_engine_that_cannot_clamp_is_refused_before_building():
    engine = FakeEngine(clamps=False)
    with pytest.raises(EngineError) as e:
        verify_build(engine, builder(engine), tag="demo:1-unverified", base="b", echo=lambda s: None)
    assert e.value.message == "--verify-repro: docker cannot build reproducibly here: fake BuildKit 0.12: no rewrite-timestamp"
    assert "--engine podman" in e.value.hint and engine.builds == []


# ------------------------------------------------------------------------------------------ the record, verify
@pytest.fixture
def lock_file(tmp_path):
    lock = Lock.create({"lock_version": 1, "name": "demo", "reproducible": {"source_date_epoch": 1784196781}})
    path = tmp_path / "envman.lock"
    write_lock(path, lock)
    (tmp_path / "Dockerfile").write_text("FROM x\n")
    return path


def test_recording_keeps_the_lock_hash_and_replaces_the_same_engines_record(lock_file):
    before = read_lock(lock_file).lock_hash
    engine = FakeEngine()
    root = lock_file.parent
    record_image(lock_file, engine=engine, image_id=B, dockerfile=root / "Dockerfile", root=root)
    record_image(lock_file, engine=engine, image_id=A, dockerfile=root / "Dockerfile", root=root)
    lock = read_lock(lock_file)
    assert lock.lock_hash == before and lock.is_intact()
    assert [r["image_id"] for r in lock.reproducible["images"]] == [A]
    assert lock.reproducible["images"][0]["dockerfile"] == "Dockerfile"
    assert lock.source_date_epoch == 1784196781


def test_verify_says_exactly_this_lock_or_names_what_it_expected(lock_file):
    root = lock_file.parent
    engine = FakeEngine(images=["demo:ok", "demo:other"])
    engine.ids.update({"demo:ok": A, "demo:other": B})
    with pytest.raises(ReproError, match="records no reproducible image"):
        verify_image(lock_file, "demo:ok", engine)
    record_image(lock_file, engine=engine, image_id=A, dockerfile=root / "Dockerfile", root=root)
    v = verify_image(lock_file, "demo:ok", engine)
    assert v.summary().startswith(f"demo:ok is exactly this lock: image {A} is what lock ")
    with pytest.raises(ReproError) as e:
        verify_image(lock_file, "demo:other", engine)
    assert e.value.message == (f"demo:other ({B}) is not an image this lock builds: the lock's reproducible images "
                               f"are {A} (docker 27.0.1, Dockerfile)")


def test_build_result_carries_the_daemonless_client():
    c = BuildClient("podman", "/usr/bin/podman", "4.3.1")
    assert c.describe() == "podman 4.3.1 (/usr/bin/podman build)" and c.supports_named_contexts


# ------------------------------------------------------------------------------------------ apt pins, snapshot
SIMULATION = """Reading package lists...
Building dependency tree...
The following NEW packages will be installed:
  libgl1 libglvnd0 libglx-mesa0
Inst libglvnd0 (1.6.0-1 Debian:12.12/stable [amd64])
Inst libc6 [2.36-9+deb12u9] (2.36-9+deb12u13 Debian-Security:12/stable-security [amd64])
Inst libgl1 (1.6.0-1 Debian:12.12/stable [amd64])
Inst libglx-mesa0 (22.3.6-1+deb12u1 Debian:12.12/stable [amd64])
Inst evil;rm (1 Debian:12/stable [amd64])
Conf libglvnd0 (1.6.0-1 Debian:12.12/stable [amd64])
"""


def test_the_simulation_gives_the_whole_closure_upgrades_included_and_nothing_unsafe():
    from envman.lock.apt import parse_simulation, simulate_command

    assert parse_simulation(SIMULATION) == {"libc6": "2.36-9+deb12u13", "libgl1": "1.6.0-1",
                                            "libglvnd0": "1.6.0-1", "libglx-mesa0": "22.3.6-1+deb12u1"}
    assert simulate_command(["libgl1", "libgl1", "x y"]).endswith("--simulate --no-install-recommends libgl1 'x y'")


def _apt_plan(**kw):
    from envman.image.plan import plan_dockerfile
    from envman.matrix.load import load_matrix
    from envman.resolve.request import build_request
    from envman.resolve.resolver import resolve_stack

    matrix = load_matrix()
    res = resolve_stack(matrix, build_request(matrix, framework="none", cpu=True))
    from envman.lockedstack import BaseImage, LockedStack

    return plan_dockerfile(LockedStack(name="p", res=res, base=BaseImage("python:3.11-slim-bookworm", "slim"),
                                       apt=("libgl1",), inputs_hash="1" * 64, source_date_epoch=1784196781, **kw),
                           "0" * 64)


def test_pins_install_every_package_of_the_closure_at_its_version():
    plan = _apt_plan(apt_pins={"libgl1": "1.6.0-1", "libglvnd0": "1.6.0-1"})
    assert "apt-get install -y --no-install-recommends libgl1=1.6.0-1 libglvnd0=1.6.0-1 && find /var/log" in plan.system_step.command
    assert plan.apt_packages == ("libgl1",) and "at the versions the lock pins" in plan.system_step.comment
    with pytest.raises(ValueError, match="not an apt package pin"):
        _apt_plan(apt_pins={"libgl1": "1.0; curl evil"})


def test_a_snapshot_points_apt_at_the_archive_of_the_lock_date():
    from envman.lock.apt import snapshot_stamp

    stamp = snapshot_stamp(1784196781)
    assert stamp == "20260716T101301Z"
    cmd = _apt_plan(apt_snapshot=stamp).system_step.command
    assert cmd.startswith(". /etc/os-release && rm -f /etc/apt/sources.list.d/debian.sources")
    assert "http://snapshot.debian.org/archive/debian-security/20260716T101301Z" in cmd
    assert "https://snapshot.ubuntu.com/ubuntu/20260716T101301Z" in cmd
    assert cmd.index("> /etc/apt/sources.list ;;") < cmd.index("apt-get update")
    import subprocess

    assert subprocess.run(["sh", "-n", "-c", cmd], capture_output=True).returncode == 0  # it parses as shell


def test_pins_are_kept_while_the_apt_packages_and_base_are_the_same(tmp_path):
    from envman.app.lockinputs import LockOptions
    from envman.app.stack import apt_choice

    last = Lock.create({"system_packages": ["libgl1"], "base_image": {"ref": "b", "digest": None},
                        "apt_pins": {"libgl1": "1.6.0-1"}, "apt_snapshot": "20260716T101301Z"})
    kept = apt_choice(last, ("libgl1",), "b", None, 5, LockOptions())
    assert kept[:2] == ({"libgl1": "1.6.0-1"}, "20260716T101301Z")
    assert kept[2][0] == "apt: the closure of libgl1 pinned (1 package, kept from the last lock)"
    changed = apt_choice(last, ("libgl1", "libgomp1"), "b", None, 5, LockOptions())
    assert changed[:2] == ({}, None) and "not pinned" in changed[2][0] and "--pin-apt" in changed[2][0]
    assert apt_choice(last, ("libgl1",), "b", None, 5, LockOptions(upgrade=True))[:2] == ({}, None)
    asked = apt_choice(None, ("libgl1",), "b", "sha256:d", 1784196781,
                       LockOptions(pin_apt=lambda base, pkgs: {"libgl1": "2"}, apt_snapshot=True))
    assert asked[:2] == ({"libgl1": "2"}, "20260716T101301Z")


def test_a_lock_without_pins_has_no_apt_fields_so_its_hash_is_unchanged():
    from envman.lock.lockfile import build_lock
    from envman.matrix.load import load_matrix
    from envman.resolve.request import build_request
    from envman.resolve.resolver import resolve_stack

    matrix = load_matrix()
    res = resolve_stack(matrix, build_request(matrix, framework="none", cpu=True))
    from envman.lockedstack import BaseImage, LockedStack

    args = dict(name="p", inputs_hash="1" * 64, res=res, base=BaseImage("b", "slim"), apt=("libgl1",))
    plain, pinned = build_lock(LockedStack(**args)), build_lock(LockedStack(**args, apt_pins={"libgl1": "1.6.0-1"}))
    assert "apt_pins" not in plain.data and "apt_snapshot" not in plain.data
    assert pinned.apt_pins == {"libgl1": "1.6.0-1"} and pinned.lock_hash != plain.lock_hash
