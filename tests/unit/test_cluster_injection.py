"""Nothing a user can supply becomes a line of a generated cluster file (issue 39.1): for any --images folder,
any `cluster:` value, any lock name, framework version or pushed digest, and any --out folder, the value is
refused with one error and a hint, or every generated sbatch passes `bash -n`, runs (against a fake srun) with
the value arriving as the same single word, and executes nothing planted in it; every .def has exactly the
sections envman writes; every Kubernetes manifest validates.

The shell-execution harness (fake srun/scontrol on PATH, a marker file a planted command would create) is this
test's own; the idea of property-testing generated shell with hypothesis follows the Dockerfile injection tests
(tests/unit/test_dockerfile_injection.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from test_cluster import DIGEST, SPEC, project  # noqa: F401 - the fixture (tests/unit is on the path)

from envman.app import cluster as app
from envman.app import cluster_export
from envman.cluster import values
from envman.cluster.plan import RUNTIMES
from envman.cluster.site import parse_site
from envman.errors import EnvmanError, LockError, SpecError, UsageError
from envman.lock.lockfile import Lock, read_lock, write_lock

MARKER = "PWNED"
# pieces an attacker would plant, mixed with any text hypothesis makes
PLANTS = ["$(touch PWNED)", "`touch PWNED`", "'", '"', "\\", "\n", "\r", " ", "\t", ";touch PWNED;", "&&", "%post",
          "${IFS}", "!", "$", "#", "*", "?", "[", "~", "\u2028", "\x00", ",", ":", "a", "/"]
NASTY = st.one_of(st.lists(st.sampled_from(PLANTS), min_size=1, max_size=6).map("".join),
                  st.text(min_size=1, max_size=20))
SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))

FAKE_SRUN = '#!/bin/sh\nfor a in "$@"; do printf "%s\\0" "$a"; done >> "$SRUN_LOG"\nprintf "\\n\\0" >> "$SRUN_LOG"\n'


def fresh(project: Path, tmp_path: Path, n: object = None) -> Path:  # noqa: F811
    """A copy of the project per example (hypothesis reuses the function's fixtures)."""
    import tempfile

    d = Path(tempfile.mkdtemp(dir=tmp_path)) / "p"
    shutil.copytree(project, d)
    return d


def run_script(script: Path, cwd: Path) -> tuple[subprocess.CompletedProcess, list[list[str]]]:
    """The sbatch run by bash as Slurm would, with srun and scontrol faked: each srun call's argv comes back."""
    fake = cwd / "fakebin"
    fake.mkdir(exist_ok=True)
    (fake / "srun").write_text(FAKE_SRUN)
    (fake / "scontrol").write_text("#!/bin/sh\necho node1\n")
    for f in fake.iterdir():
        f.chmod(0o755)
    log = cwd / "srun.log"
    log.write_bytes(b"")
    env = {"PATH": f"{fake}:/usr/bin:/bin", "SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "node1",
           "SLURM_JOB_NUM_NODES": "1", "SRUN_LOG": str(log), "HOME": str(cwd)}
    p = subprocess.run(["bash", str(script)], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    calls, cur = [], []
    for word in log.read_bytes().decode("utf-8", "surrogateescape").split("\0")[:-1]:
        if word == "\n":
            calls.append(cur)
            cur = []
        else:
            cur.append(word)
    return p, calls


def check_scripts(paths: list[Path], cwd: Path) -> list[list[str]]:
    calls: list[list[str]] = []
    for f in paths:
        if f.suffix != ".sbatch":
            continue
        syntax = subprocess.run(["bash", "-n", str(f)], capture_output=True, text=True)
        assert syntax.returncode == 0, syntax.stderr
        if shutil.which("shellcheck"):  # .ci/run installs it
            lint = subprocess.run(["shellcheck", "--shell=bash", str(f)], capture_output=True, text=True)
            assert lint.returncode == 0, lint.stdout
        p, c = run_script(f, cwd)
        assert not (cwd / MARKER).exists(), f"{f.name} ran a planted command"
        assert p.returncode in (0, 2), p.stderr
        calls += c
    return calls


@SETTINGS
@given(name=NASTY)
def test_any_images_folder_is_one_word_or_refused(project, tmp_path, name):  # noqa: F811
    d = fresh(project, tmp_path, abs(hash(name)))
    images = d / "img" / name
    try:
        out = app.slurm_files(d, images=images, force=True)
    except UsageError as e:
        assert e.message.startswith("--images ") and e.hint, e.message
        assert values.path(str(images)) is not None
        return
    stem = app.load_cluster(d)[0].facts.stem
    real = images.resolve()
    made = False
    try:
        if real.is_relative_to(d):  # never outside the example's folder ("../..")
            real.mkdir(parents=True, exist_ok=True)
            for suffix in ("sqsh", "sif", "bundle"):
                (real / f"{stem}.{suffix}").write_text("")
            made = True
    except OSError:
        pass  # a name the file system refuses (too long …): the scripts stop at the missing image
    calls = check_scripts(out.written, d)
    if made:
        words = {w for c in calls for w in c}
        assert f"--container-image={real / stem}.sqsh" in words and f"{real / stem}.sif" in words
        assert f"--container={real / stem}.bundle" in words


@SETTINGS
@given(key=st.sampled_from(["partition", "account", "constraint", "time", "mem", "namespace"]), value=NASTY)
def test_any_site_value_is_refused_with_a_hint_or_reaches_the_script_whole(project, tmp_path, key, value):  # noqa: F811
    try:
        site = parse_site({key: value})
    except SpecError as e:
        assert e.message.startswith(f"envman.yaml: cluster.{key}: ") and e.hint
        return
    assert values.control(str(getattr(site, key))) is None and " " not in str(getattr(site, key))
    d = fresh(project, tmp_path, abs(hash((key, value))))
    with_cluster(d, **{key: value})
    check_scripts(app.slurm_files(d, images=d / "img", force=True).written, d)


@SETTINGS
@given(mount=NASTY)
@example(mount="\\")  # a backslash before the closing quote: shellcheck read it as an escape (SC1003), found in a fresh venv
def test_any_mount_is_refused_or_passed_as_one_word(project, tmp_path, mount):  # noqa: F811
    m = "/data/" + mount
    try:
        parse_site({"mounts": [m]})
    except SpecError as e:
        assert e.message.startswith("envman.yaml: cluster.mounts[0]: ") and e.hint
        return
    d = fresh(project, tmp_path, abs(hash(mount)))
    with_cluster(d, mounts=[m])
    out = app.slurm_files(d, images=d / "img", force=True)
    (d / "img").mkdir()
    stem = app.load_cluster(d)[0].facts.stem
    for suffix in ("sqsh", "sif", "bundle"):
        (d / "img" / f"{stem}.{suffix}").write_text("")
    words = {w for c in check_scripts(out.written, d) for w in c}
    assert f"--container-mounts={m}" in words and m in words  # pyxis, and apptainer's --bind VALUE


def with_cluster(d: Path, **keys) -> None:
    spec = yaml.safe_load(SPEC)
    spec["cluster"].update(keys)
    (d / "envman.yaml").write_text(yaml.safe_dump(spec, allow_unicode=False))


def relock(d: Path, **changes) -> None:
    """The lock as someone could commit it: changed, and its hash recomputed so it reads as intact."""
    lock = read_lock(d / "envman.lock")
    data = {**lock.to_dict()}
    pushed = changes.pop("pushed", data.get("pushed"))
    for path, v in changes.items():
        cur = data
        *heads, last = path.split(".")
        for h in heads:
            cur[h] = dict(cur[h])
            cur = cur[h]
        cur[last] = v
    write_lock(d / "envman.lock", Lock.create(data).with_changes(pushed=pushed))


@SETTINGS
@given(field=st.sampled_from(["name", "stack.framework.version", "stack.python", "stack.min_driver"]), value=NASTY)
def test_any_lock_value_is_refused_by_name_or_cannot_add_a_line(project, tmp_path, field, value):  # noqa: F811
    d = fresh(project, tmp_path, abs(hash((field, value))))
    relock(d, **{field: value})
    try:
        out = app.slurm_files(d, images=d / "img", force=True)
    except LockError as e:
        assert e.message.startswith(f"envman.lock: {field}: ") and "envman lock" in e.hint
        return
    check_scripts(out.written, d)
    for f in out.written:
        assert [ln for ln in f.read_text().splitlines() if ln.startswith("#SBATCH")] == \
            [ln for ln in f.read_text().splitlines() if "#SBATCH" in ln]


def def_sections(text: str) -> list[str]:
    return [ln.split()[0] for ln in text.splitlines() if ln.startswith("%")]


@SETTINGS
@given(pinned=st.one_of(st.just(""), NASTY), out=NASTY)
def test_any_digest_or_out_folder_keeps_the_definition_to_its_sections(project, tmp_path, pinned, out, monkeypatch):  # noqa: F811
    from envman.cluster import export

    monkeypatch.setattr(export, "apptainer_available", lambda: None)
    monkeypatch.setattr(cluster_export, "image_source", lambda lf: "docker-daemon:x")
    monkeypatch.setattr(cluster_export, "_export", lambda *a, **k: None)
    d = fresh(project, tmp_path, abs(hash((pinned, out))))
    relock(d, pushed={"ref": "r", "digest": DIGEST, "pinned": f"registry.example.com/team/x@{DIGEST}{pinned}"})
    try:
        [res] = cluster_export.export_images(d, out=tmp_path / "o" / out, formats=("archive",))
    except LockError as e:
        assert e.message.startswith("envman.lock: pushed.pinned: ") and e.hint
        return
    except UsageError as e:
        assert e.message.startswith("--out ") and e.hint, e.message
        return
    event("a .def was written")
    text = res.files["def"].read_text()
    assert def_sections(text) == ["%labels", "%help", "%runscript", "%test"]
    assert [ln for ln in text.splitlines() if ln.startswith("From:")] == [f"From: {res.lock.pinned}"]


@pytest.mark.parametrize("under", ["", "sub/dir"])
def test_an_out_folder_where_a_file_stands_is_refused_naming_out(project, tmp_path, under, monkeypatch):  # noqa: F811
    """Found by the property test above (--out /bin/bash): the export named the .def it could not write, not --out."""
    monkeypatch.setattr(cluster_export, "image_source", lambda lf: "docker-daemon:x")
    d = fresh(project, tmp_path, 7)
    relock(d, pushed={"ref": "r", "digest": DIGEST, "pinned": f"registry.example.com/team/x@{DIGEST}"})
    (tmp_path / "f").write_text("mine")
    with pytest.raises(UsageError) as err:
        cluster_export.export_images(d, out=tmp_path / "f" / under, formats=("archive",))
    assert (err.value.message, err.value.hint) == (
        f"--out {str((tmp_path / 'f' / under).resolve())[:80]!r}: a file stands where the folder goes",
        "name a folder for the images (envman makes it if it is missing)")
    assert (tmp_path / "f").read_text() == "mine"


@settings(SETTINGS, max_examples=60)
@given(ns=st.one_of(st.just("training"), NASTY), pinned=st.one_of(st.just("registry.example.com/team/x"), NASTY))
def test_any_namespace_or_digest_gives_valid_manifests_or_an_error(project, tmp_path, ns, pinned):  # noqa: F811
    d = fresh(project, tmp_path, abs(hash((ns, pinned))))
    relock(d, pushed={"ref": "r", "digest": DIGEST, "pinned": f"{pinned}@{DIGEST}"})
    with_cluster(d, namespace=ns)
    try:
        out = app.k8s_files(d, force=True)
    except EnvmanError as e:
        assert e.hint and (e.message.startswith("envman.lock: pushed.pinned: ") or
                           e.message.startswith("envman.yaml: cluster.namespace: ")), e.message
        return
    event("manifests were written")
    manifests(out.written)


def manifests(written) -> list[dict]:
    """The manifests as YAML reads them, the Job checked against Kubernetes' own v1.33 schema (strict)."""
    docs = [yaml.safe_load(f.read_text()) for f in written]
    for doc in docs:
        if doc["kind"] == "Job":
            assert kubernetes_validate.validate(doc, "1.33.0", strict=True)
    return docs


@settings(SETTINGS, max_examples=40)
@given(mounts=st.lists(st.tuples(NASTY, st.one_of(st.just(""), NASTY), st.sampled_from(["", ":ro", ":rw"])),
                       min_size=1, max_size=3))
def test_any_mounts_are_refused_or_reach_the_manifests_as_written(project, tmp_path, mounts):  # noqa: F811
    written = [f"/data/{src}" + (f":/mnt/{dst}{mode}" if dst else "") for src, dst, mode in mounts]
    d = fresh(project, tmp_path, abs(hash(tuple(mounts))))
    with_cluster(d, mounts=written)
    try:
        out = app.k8s_files(d, force=True)
    except SpecError as e:
        assert e.message.startswith("envman.yaml: cluster.mounts[") and e.hint
        return
    event("manifests were written")
    for doc in manifests(out.written):
        if doc["kind"] == "Job":
            pod = doc["spec"]["template"]["spec"]
        else:
            pod = doc["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0][
                "template"]["spec"]["template"]["spec"]
        hosts = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
        data = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] != "dshm"]
        paths = [m["mountPath"].rstrip("/") for m in pod["containers"][0]["volumeMounts"]]
        assert len(set(paths)) == len(paths)  # Kubernetes: a mountPath is unique
        assert [(hosts[m["name"]], m["mountPath"], m.get("readOnly", False)) for m in data] == [
            (w.split(":")[0], (w.split(":") * 2)[1], w.endswith(":ro")) for w in written]


# --- the examples of the issue, exactly ---------------------------------------------------------------------
def test_a_planted_command_in_images_never_runs(project, tmp_path):  # noqa: F811
    images = tmp_path / "x$(touch PWNED)"
    out = app.slurm_files(project, images=images)
    check_scripts(out.written, project)
    apostrophe = app.slurm_files(project, images=tmp_path / "it's here", force=True)
    check_scripts(apostrophe.written, project)


def test_a_newline_in_the_lock_or_out_folder_is_refused_by_name(project, tmp_path):  # noqa: F811
    relock(project, name="x\n#SBATCH --exclusive")
    with pytest.raises(LockError) as e:
        app.slurm_files(project, images=tmp_path)
    assert e.value.message == "envman.lock: name: 'x\\n#SBATCH --exclusive' contains a control character ('\\n')"
    assert e.value.hint.startswith("the value reaches the cluster files: regenerate the lock with `envman lock`")
    with pytest.raises(UsageError) as e:
        app.slurm_files(project, images=tmp_path / "a\n%post")
    assert e.value.message.startswith("--images ") and e.value.message.endswith("contains a control character ('\\n')")


def test_site_patterns_are_whole_and_ascii():
    for key, bad in (("partition", "gpu\n"), ("time", "٠٤:٠٠:٠٠"), ("account", "a\n"), ("constraint", "h100\n")):
        with pytest.raises(SpecError) as e:
            parse_site({key: bad})
        assert e.value.message == f"envman.yaml: cluster.{key}: {bad!r} is not " + \
            {"partition": "a partition name like gpu", "time": "a Slurm time like 04:00:00 or 2-00:00:00",
             "account": "an account name like proj042",
             "constraint": "a Slurm feature expression like h100 or 'h100&ib'"}[key]
        assert e.value.hint == "no spaces, quotes, $ or newlines: the value is written into job scripts"
    for raw in ({"nodes": "2"}, {"tolerations": "x"}, {"profiles": []}, {"mounts": "x"}, [1]):
        with pytest.raises(SpecError) as e:
            parse_site(raw)
        assert e.value.hint, raw


def test_cluster_profiles_must_name_a_declared_profile(project):  # noqa: F811
    (project / "envman.yaml").write_text(SPEC + "  profiles:\n    a10O: {constraint: a100}\n")
    with pytest.raises(SpecError) as e:
        app.load_cluster(project)
    assert e.value.message == "envman.yaml: cluster.profiles.a10O: no such profile in profiles:"
    assert e.value.hint == "declared profiles: none (add a profiles: section first)"


def test_export_format_errors_have_a_hint(project):  # noqa: F811
    with pytest.raises(UsageError) as e:
        cluster_export.export_images(project, formats=("squash",))
    assert e.value.message == "--format 'squash': not one of bundle, sqsh, archive, layout"
    assert e.value.hint == "a comma-separated list, e.g. --format bundle,sqsh,archive"


def test_the_cli_never_prints_a_traceback_for_a_bad_lock_section(project):  # noqa: F811
    import sys

    data = read_lock(project / "envman.lock").to_dict()
    for section, value, message in (
        ("pushed", "registry/x@sha256:1", "envman.lock: pushed: expected an object, got str"),
        ("reproducible", {"source_date_epoch": "x"},
         "envman.lock: reproducible.source_date_epoch: 'x' is not a whole number of seconds ≥ 0"),
        ("reproducible", {"images": [{"engine": "docker"}]},
         "envman.lock: reproducible.images[0].engine_version: missing (and 4 more)"),
    ):
        (project / "envman.lock").write_text(__import__("json").dumps({**data, section: value}))
        p = subprocess.run([sys.executable, "-m", "envman.cli.main", "cluster", "slurm", str(project)],
                           capture_output=True, text=True, env={**os.environ, "ENVMAN_DEBUG": ""})
        assert p.returncode == 1 and p.stderr.splitlines()[0] == f"error: {message}", p.stderr
        assert p.stderr.splitlines()[1].startswith("hint: it is what `envman")


def test_runtimes_registry_drives_the_files(project, tmp_path):  # noqa: F811
    out = app.slurm_files(project, images=tmp_path)
    assert sorted({p.name.split(".")[-2] for p in out.written}) == sorted(RUNTIMES)


def test_a_long_profile_name_is_a_valid_label_value():
    from test_cluster import lf

    from envman.cluster import k8s

    value = k8s.labels(lf(profile="a" * 70 + "-b"))["dev.envman/profile"]
    assert value == "a" * 63


JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=10),
                       lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(
                           ["ref", "digest", "pinned", "images", "engine", "engine_version", "image_id", "dockerfile",
                            "dockerfile_sha256", "lock_hash", "source_date_epoch", "source_date_epoch_from"]), inner,
                           max_size=6), max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(section=st.sampled_from(["pushed", "reproducible", "files", "wheel_variants"]), value=JSONISH)
def test_any_hand_edit_outside_the_hash_is_read_or_refused_by_name(section, value):
    """The sections outside the lock's identity, as anyone could edit them: read, or one LockError naming the
    section by its dotted path — never an exception of another kind (which the CLI reports as exit 70)."""
    import json

    from envman.lock.lockfile import parse_lock

    data = json.loads((Path(__file__).resolve().parents[1] / "golden" / "new-torch" / "envman.lock").read_text())
    try:
        lock = parse_lock(json.dumps({**data, section: value}))
    except LockError as e:
        assert e.message.startswith(f"envman.lock: {section}") and e.hint.startswith("it is what `envman")
        return
    assert lock.source_date_epoch is None or lock.source_date_epoch >= 0
    for r in lock.reproducible.get("images") or ():
        assert all(isinstance(r[k], str) for k in ("engine", "engine_version", "image_id", "dockerfile"))
    pushed = lock.get("pushed") or {}
    assert isinstance(pushed, dict) and all(isinstance(pushed[k], str) for k in ("ref", "pinned") if k in pushed)


def test_a_new_backend_is_one_plan_function_and_one_registry_line(project, tmp_path):  # noqa: F811
    """The contract docs/architecture.md's "where to add" row points at: a Backend whose plan returns files is
    written like the real ones (validated values, envman's header, never over a hand edit)."""
    from envman.cluster.backends import BACKENDS, Backend, Planned, PlannedFile, family

    assert [b.name for b in family("slurm")] == [f"slurm+{rt}" for rt in RUNTIMES] and "k8s" in BACKENDS

    def plan(lf, site, shape, images):
        return Planned((PlannedFile(f"{lf.stem}.toy.yaml", "manifest", {"image": lf.pinned, "gpus": shape.gpus_per_node},
                                    ("a toy scheduler",)),), f"{lf.stem}.toy.yaml", ("toy note",))

    toy = Backend("toy", "toy", plan, needs_pinned=True, submit="toyctl run")
    out = app.backend_files(project, [toy], images=tmp_path, extra="toy", profile=None, force=False, out=None,
                            command="envman cluster toy")
    [f] = out.written
    text = f.read_text()
    assert f.parent == project / ".envman" / "cluster" and text.startswith("# generated by envman — inputs sha256:")
    assert yaml.safe_load(text) == {"image": f"registry.example.com:5000/team/new-torch@{DIGEST}", "gpus": 8}
    assert out.notes == ["new-torch: toy note"] and out.commands == [f"toyctl run .envman/cluster/{f.name}"]


def test_an_image_env_entry_cannot_add_a_line_to_enroots_environment():
    from envman.cluster.enroot import enroot_files
    from envman.errors import ToolError

    with pytest.raises(ToolError) as e:
        enroot_files({"Env": ["A=1\nLD_PRELOAD=/x.so"]}, "p")
    assert e.value.message == "the image's Env entry 'A=1\\nLD_PRELOAD=/x.so' holds a control character"
    assert enroot_files({"Env": ["A=1", "B=2"]}, "p")["etc/environment"] == "A=1\nB=2\n"


def test_apptainer_steps_keep_the_tasks_gpus_through_cleanenv(project, tmp_path):  # noqa: F811
    """--cleanenv drops what Slurm sets per task; the step's sh prefix hands CUDA_VISIBLE_DEVICES and the task
    ids to Apptainer as APPTAINERENV_* on each node (run here: the srun argv, with a fake apptainer)."""
    out = app.slurm_files(project, images=tmp_path, runtimes=("apptainer",))
    stem = app.load_cluster(project)[0].facts.stem
    (tmp_path / f"{stem}.sif").write_text("")
    [train, *_] = check_scripts(out.written[:1], project)
    step = train[train.index("/bin/sh"):]
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "apptainer").write_text("#!/bin/sh\nenv | grep ^APPTAINERENV_ | sort\n")
    (fake / "apptainer").chmod(0o755)
    env = {"PATH": f"{fake}:/usr/bin:/bin", "CUDA_VISIBLE_DEVICES": "2,3", "SLURM_PROCID": "1"}
    p = subprocess.run(step, env=env, capture_output=True, text=True, timeout=30)
    assert p.stdout.splitlines() == ["APPTAINERENV_CUDA_VISIBLE_DEVICES=2,3", "APPTAINERENV_SLURM_PROCID=1"], p.stderr
