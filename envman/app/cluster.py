"""``envman cluster …`` as use cases: the locked project → its cluster facts and the scheduler files (the lock's
facts: cluster_lock.py; the readiness table: cluster_nodes.py; exports: cluster_export.py). Values back; never
prints (progress goes through ``echo``) or exits.

One family, not ``envman slurm`` and ``envman k8s``: every runtime takes the same lock, the same image by
digest and the same preflight; only the file format differs, so the runtime is an option of one command.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from envman.cluster.plan import RUNTIMES, LockFacts, Shape, Site, job_shape
from envman.errors import UsageError
from envman.lock.layout import StackFiles
from envman.lock.lockfile import read_lock

FORMATS = ("bundle", "sqsh", "archive", "layout")
DEFAULT_FORMATS = ("bundle", "sqsh", "archive")
# Under .envman/, never the project's root: a `cluster/` folder there is a top-level package to setuptools'
# flat-layout discovery (the next lock differs, or `lock --check` fails with "several top-level packages")
FILES_DIR = ".envman/cluster"
OLD_FILES_DIR = "cluster"  # where envman wrote them until issue 36: read for the move note, never written
_POWERS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


@dataclass(frozen=True)
class ClusterLock:
    facts: LockFacts
    site: Site
    shape: Shape


def default_images_dir() -> Path:
    """Outside the project on purpose: the project is the image's build context, and a bundle there would be
    copied into the next image."""
    from envman.resources import cache_dir

    return cache_dir() / "cluster"


# --- the locked project ------------------------------------------------------------------------------------
def load_cluster(root: Path, profile: str | None = None) -> list[ClusterLock]:
    """Every lock of the project (one per profile), with its site settings and job shape."""
    from envman.app.cluster_lock import lock_facts
    from envman.cluster.site import check_profiles, parse_site
    from envman.project.spec import load_spec

    spec = load_spec(root)
    if spec is None:
        raise UsageError(f"no envman.yaml in {root}", hint="run `envman init` first, then `envman build`")
    site = parse_site(spec.cluster, spec.source)
    check_profiles(site, [p.name for p in spec.profiles], spec.source)
    names: list[str | None] = [p.name for p in spec.profiles] or [None]
    if profile is not None:
        if profile not in names:
            raise UsageError(f"--profile {profile}: no such profile",
                             hint="profiles: " + (", ".join(str(n) for n in names if n) or "none declared"))
        names = [profile]
    out = []
    for p in names:
        lf = lock_facts(root, read_lock(root / StackFiles.for_profile(p).lock), spec.command)
        psite = site.for_profile(p)
        gpus, note = _fit_gpus(spec.workload, lf, str(root))
        out.append(ClusterLock(lf, psite, job_shape(lf, psite, gpus, note)))
    return out


def _fit_gpus(workload: tuple, lf: LockFacts, path: str) -> tuple[int | None, str | None]:
    """The run's total GPUs from `envman fit`: the workload's own `gpus`, else — when it shards — the smallest
    power of two at which it fits the lock's first target GPU."""
    if not workload or not lf.gpu or not lf.targets:
        return None, None
    from envman.app.fit import run_fit
    from envman.app.workload import workload_options
    from envman.errors import EnvmanError

    w = dict(workload)
    target = lf.targets[0].id
    try:
        if w.get("gpus"):
            res = run_fit(workload_options(workload, (target,), path))
            fits = res.targets[0].fits if res.targets else None
            return int(w["gpus"]), (f"{w['gpus']} GPU(s): envman.yaml workload.gpus; envman fit: "
                                    f"{'fits' if fits else 'does NOT fit'} {target} at that count")
        for n in _POWERS if w.get("shard") in ("zero1", "zero2", "zero3", "fsdp") else (1,):
            res = run_fit(workload_options({**w, "gpus": n}, (target,), path))
            if res.targets and res.targets[0].fits:
                return n, f"{n} GPU(s): the fewest at which envman fit says the workload fits {target}"
    except EnvmanError as exc:
        return None, f"envman fit could not judge the workload: {exc.message}"
    return None, f"envman fit: the workload does not fit {target} (see `envman fit`); sized without it"


# --- scheduler files ---------------------------------------------------------------------------------------
@dataclass
class FilesOutcome:
    written: list[Path] = field(default_factory=list)
    unchanged: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)  # what to run next


def _inputs_hash(cl: ClusterLock, extra: object) -> str:
    from envman.files import sha256
    from envman.lock.lockfile import canonical_json

    return sha256(canonical_json({"lock": cl.facts.lock_hash, "site": repr(cl.site), "shape": repr(cl.shape),
                                  "pinned": cl.facts.pinned, "extra": repr(extra)}))


def checked_path(path: Path, option: str) -> Path:
    """A folder the user names that reaches a generated file (a script, a .def): one printable line."""
    from envman.cluster.values import path as path_problem

    text = str(path)
    problem = path_problem(text)
    if problem:
        raise UsageError(f"{option} {text[:80]!r}: {problem}",
                         hint="name a folder whose path is one line of printable text (it is written into job files)")
    return path


def slurm_files(root: Path, *, images: Path | None = None, runtimes: tuple[str, ...] = RUNTIMES,
                profile: str | None = None, force: bool = False, out: Path | None = None) -> FilesOutcome:
    """.envman/cluster/NAME_<lock12>.RUNTIME.sbatch (training) and .nodes.RUNTIME.sbatch (readiness) per lock."""
    from envman.cluster.backends import BACKENDS

    bad = [r for r in runtimes if r not in RUNTIMES]
    if bad:
        raise UsageError(f"--runtime {bad[0][:80]!r}: not one of {', '.join(RUNTIMES)}",
                         hint="repeat --runtime for several, or leave it out for all of them")
    images = checked_path(images or default_images_dir(), "--images").resolve()
    backends = [BACKENDS[f"slurm+{rt}"] for rt in runtimes]
    return backend_files(root, backends, images=images, extra=(str(images), runtimes), profile=profile, force=force,
                         out=out, command="envman cluster slurm", shape_notes=True)


def k8s_files(root: Path, *, profile: str | None = None, force: bool = False, out: Path | None = None) -> FilesOutcome:
    """.envman/cluster/NAME_<lock12>.job.yaml (and .trainjob.yaml for torch) per lock."""
    from envman.cluster.backends import family

    return backend_files(root, family("k8s"), images=default_images_dir(), extra="k8s", profile=profile,
                         force=force, out=out, command="envman cluster k8s")


def backend_files(root: Path, backends: list, *, images: Path, extra: object, profile: str | None, force: bool,
                  out: Path | None, command: str, shape_notes: bool = False) -> FilesOutcome:
    """Every file of ``backends`` (cluster/backends.py) for every lock of the project: planned, rendered, then
    written all or nothing into --out or .envman/cluster/."""
    from envman.cluster.render import render_manifest, render_sbatch
    from envman.cluster.runtimes import ImageFiles

    where = checked_path(out, "--out").resolve() if out is not None else root / FILES_DIR
    files: list[tuple[Path, str]] = []
    result = FilesOutcome()
    for cl in load_cluster(root, profile):
        if not cl.facts.command:
            raise UsageError("envman.yaml has no `command:` to train with",
                             hint="add one, e.g. command: [python, train.py] (the image's CMD uses it too)")
        ih = _inputs_hash(cl, extra)
        for b in backends:
            if b.needs_pinned and not cl.facts.pinned:
                raise UsageError(f"{cl.facts.job_name}: the image is not in a registry yet (a pod pulls it by digest)",
                                 hint="push it first: envman build --push REGISTRY (it records the digest in the lock)")
            base = images / cl.facts.stem
            planned = b.plan(cl.facts, cl.site, cl.shape,
                             ImageFiles(sqsh=f"{base}.sqsh", sif=f"{base}.sif", bundle=f"{base}.bundle"))
            for f in planned.files:
                text = (render_sbatch(f.body, ih, command) if f.kind == "sbatch"
                        else render_manifest(f.body, ih, command, list(f.about)))
                files.append((where / f.name, text))
            result.notes += [f"{cl.facts.job_name}: {n}" for n in planned.notes]
            if b is backends[0]:
                result.commands.append(f"{b.submit} {_shown(root, where / planned.run)}")
        if shape_notes:
            result.notes += [f"{cl.facts.job_name}: {w}" for w in cl.shape.why]
    _write(root, files, force, result)
    return result


def _shown(root: Path, path: Path) -> str:
    import shlex

    try:
        return shlex.quote(str(path.relative_to(root)))
    except ValueError:
        return shlex.quote(str(path))


def _write(root: Path, files: list[tuple[Path, str]], force: bool, out: FilesOutcome) -> None:
    from envman.cluster.render import ownership
    from envman.files import commit_files, holds

    inside = all(p.is_relative_to(root) for p, _ in files)
    blocked, changed = [], []
    for path, text in files:
        if holds(path, text):
            out.unchanged.append(path)
            continue
        # with --force nothing in the way is read, as in WritePlan: a link loop is replaced like any other file
        o = ownership(path) if not force else None
        if o and o.exists and (not o.ours or o.edited):
            blocked.append(_shown(root, path) + (" (edited by hand)" if o.ours else " (not generated by envman)"))
        changed.append((path, text))
    if blocked:
        raise UsageError("would overwrite " + ", ".join(blocked), hint="keep your version, or re-run with --force")
    if changed:
        commit_files(changed, root if inside else None)
    out.written += [p for p, _ in changed]
    old = root / OLD_FILES_DIR
    if inside and files and files[0][0].parent != old and any(_ours(f) for f in _listed(old)):
        out.notes.append(f"envman now writes these files under {_shown(root, files[0][0].parent)}; the old "
                         f"{OLD_FILES_DIR}/ folder is a top-level package to setuptools' flat layout: remove it "
                         f"(rm -r {OLD_FILES_DIR})")


def _ours(path: Path) -> bool:
    """For a note after the files are written: an unreadable old file is not worth an error then."""
    from envman.cluster.render import ownership

    try:
        return ownership(path).ours
    except UsageError:
        return False


def _listed(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.suffix in (".sbatch", ".yaml"))[:50]
    except OSError:
        return []


# --- exports -----------------------------------------------------------------------------------------------
@dataclass
class ExportOutcome:
    lock: LockFacts
    files: dict[str, Path] = field(default_factory=dict)  # format → path
    commands: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
