"""``envman cluster export``: one lock's built (or pushed) image → NAME_<lock12>.{bundle,sqsh,oci.tar,oci,def}
in the images folder, the exact enroot/apptainer commands, and — where apptainer is installed — the SIF built
and tested. An export that exists for the lock hash is kept (the hash names the image); --force redoes it.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from envman.app.cluster import DEFAULT_FORMATS, FORMATS, ClusterLock, ExportOutcome, default_images_dir, load_cluster
from envman.cluster import export as ex
from envman.cluster import plan
from envman.errors import UsageError
from envman.image.plan import SHM_SIZE

# the preflight in the image: inside the one-file kit, or (images built by envman 0.2) in the kit's folder
PREFLIGHT_IN_KIT = ("opt/envman/kit/envman_portable.py", "opt/envman/kit/envman_portable/preflight.py")
_SUFFIX = {"bundle": "bundle", "sqsh": "sqsh", "archive": "oci.tar", "layout": "oci"}
_WHAT = {"bundle": "an OCI runtime bundle (config.json, rootfs/)", "sqsh": "an enroot squashfs",
         "archive": "an OCI archive", "layout": "an OCI image layout (index.json, oci-layout)"}


def image_source(lf: plan.LockFacts) -> str:
    """The local engine's good tag first (fast, no registry), else the pushed digest."""
    from envman.engine.docker import Engine, EngineError

    try:
        engine = Engine()
        engine.ping()
        if engine.image_exists(lf.tag):
            return f"docker-daemon:{lf.tag}"
    except EngineError:
        pass
    if lf.pinned:
        return f"docker://{lf.pinned}"
    raise UsageError(f"no image {lf.tag} on the local engine and none pushed for this lock",
                     hint="build it first: envman build (add --push REGISTRY to record a digest the cluster can pull)")


def export_one(root: Path, cl: ClusterLock, out: Path, formats: tuple[str, ...], force: bool,
               echo: Callable[[str], None]) -> ExportOutcome:
    lf = cl.facts
    res = ExportOutcome(lf)
    base = out / lf.stem
    targets = {f: Path(f"{base}.{_SUFFIX[f]}") for f in FORMATS}
    for name in ex.sweep(out, lf.stem):
        echo(f"removed {out / name}: left by an export that was stopped")
    todo = [f for f in formats if force or not (targets[f].exists() or targets[f].is_symlink())]
    for f in formats:
        if f not in todo:
            ex.check_existing(targets[f], _SUFFIX[f], _WHAT[f])
            echo(f"{targets[f]} exists for lock {lf.short}: kept (--force exports again)")
    if todo:
        source = image_source(lf)
        echo(f"exporting {source} → {', '.join(todo)} in {out}")
        _export(lf, source, targets, todo, echo)
    res.files = {f: targets[f] for f in formats}
    _check_kit(res, targets, formats)
    _definition(res, out, targets)
    if lf.pinned:
        res.commands.append(shlex.join(plan.enroot_import(lf, str(out)) or []))
    return res


def _export(lf: plan.LockFacts, source: str, targets: dict[str, Path], todo: list[str],
            echo: Callable[[str], None]) -> None:
    tag = lf.short
    keep_layout = "layout" in todo
    with tempfile.TemporaryDirectory(prefix=ex.work_prefix(), dir=targets["layout"].parent
                                     if targets["layout"].parent.exists() else None) as tmp:
        layout = targets["layout"] if keep_layout else Path(tmp) / "layout"
        ex.to_layout(source, layout, tag)
        echo(f"  OCI layout {layout}{'' if keep_layout else ' (temporary)'}")
        if "archive" in todo:
            echo(f"  OCI archive {ex.to_archive(layout, tag, targets['archive'])}")
        if "bundle" in todo or "sqsh" in todo:
            bundle = targets["bundle"] if "bundle" in todo else Path(tmp) / "bundle"
            ex.to_bundle(layout, tag, bundle, SHM_SIZE.replace("gb", "g"))
            if "bundle" in todo:
                echo(f"  OCI runtime bundle {bundle} (srun --container={bundle})")
            if "sqsh" in todo:
                config = ex.image_config(layout, tag)
                provenance = plan.enroot_uri(lf.pinned) if lf.pinned else f"envman:{lf.tag}"
                echo(f"  enroot image {ex.to_sqsh(bundle / 'rootfs', config, targets['sqsh'], provenance)}")


def _check_kit(res: ExportOutcome, targets: dict[str, Path], formats: tuple[str, ...]) -> None:
    """Images built before the preflight existed cannot run it: say so now, not on the cluster."""
    rootfs = targets["bundle"] / "rootfs"
    if "bundle" in formats and rootfs.is_dir() and not any((rootfs / p).is_file() for p in PREFLIGHT_IN_KIT):
        res.notes.append(f"{res.lock.tag} has no envman preflight (built by an older envman): the scheduler files' "
                         "preflight step will fail; rebuild it with `envman build --rebuild`")


def _definition(res: ExportOutcome, out: Path, targets: dict[str, Path]) -> None:
    from envman.cluster.render import DefPlan, render_def
    from envman.cluster.slurm import shell_join
    from envman.files import write_atomic
    from envman.image.plan import WORKDIR

    lf = res.lock
    archive = str(targets["archive"]) if targets["archive"].exists() else None
    source = plan.apptainer_source(lf, archive)
    if source is None:
        res.notes.append("no Apptainer definition: the image is neither pushed nor exported as an OCI archive "
                         "(--format archive)")
        return
    build = plan.apptainer_build(lf, str(out))
    sif = out / f"{lf.stem}.sif"
    test = ["apptainer", "test", *(["--nv"] if lf.gpu else []), str(sif)]
    env = ["/usr/bin/env", *(f"{k}={v}" for k, v in plan.image_env(True))]
    d = DefPlan(
        title=f"envman: {lf.job_name}, lock {lf.short} ({lf.summary})", bootstrap=source[0], source=source[1],
        labels=(("dev.envman.lock-hash", lf.lock_hash),), help=f"envman image {lf.tag}: {lf.summary}",
        workdir=WORKDIR, run=shell_join(["/usr/bin/env", *(f"{k}={v}" for k, v in plan.image_env(False)), *lf.command]),
        # %test checks the node it runs on, whatever GPU count a job would ask for
        test_command=shell_join(env + plan.preflight_argv(lf, plan.Shape(1, 0))), build=shlex.join(build),
        test=shlex.join(test), gpu=lf.gpu,
    )
    path = out / f"{lf.stem}.def"
    write_atomic(path, render_def(d, lf.lock_hash, "envman cluster export"))
    res.files["def"] = path
    res.commands += [shlex.join(build), shlex.join(test),
                     shlex.join(plan.apptainer_build_direct(lf, str(out), source)) + "   # the same image, no %test"]
    if ex.apptainer_available():
        _apptainer(res, build, test, sif)
    else:
        res.notes.append("apptainer is not installed here: the .def and the commands above are checked against "
                         "Apptainer's documented format, not built (docs/cluster.md)")


def _apptainer(res: ExportOutcome, build: list[str], test: list[str], sif: Path) -> None:
    ex.run_tool(build, "apptainer build")
    res.files["sif"] = sif
    p = subprocess.run(test, capture_output=True, text=True, timeout=1800, check=False)
    tail = (p.stderr.strip().splitlines() or ["no output"])[-1]
    if p.returncode == 0:
        res.notes.append(f"apptainer test passed: {tail}")
    else:
        where = " (no GPU on this machine: run it on a GPU node)" if res.lock.gpu and not shutil.which("nvidia-smi") else ""
        res.notes.append(f"apptainer test exited {p.returncode}{where}: {tail}")


def export_images(root: Path, *, out: Path | None = None, formats: tuple[str, ...] = DEFAULT_FORMATS,
                  profile: str | None = None, force: bool = False,
                  echo: Callable[[str], None] = lambda _s: None) -> list[ExportOutcome]:
    from envman.app.cluster import checked_path

    bad = [f for f in formats if f not in FORMATS]
    if bad or not formats:
        raise UsageError(f"--format {(bad or [''])[0][:80]!r}: not one of {', '.join(FORMATS)}",
                         hint=f"a comma-separated list, e.g. --format {','.join(DEFAULT_FORMATS)}")
    out_dir = checked_path(out or default_images_dir(), "--out").resolve()
    if not next(p for p in (out_dir, *out_dir.parents) if p.exists()).is_dir():
        raise UsageError(f"--out {str(out_dir)[:80]!r}: a file stands where the folder goes",
                         hint="name a folder for the images (envman makes it if it is missing)")
    return [export_one(root, cl, out_dir, formats, force, echo) for cl in load_cluster(root, profile)]
