"""A lock's files for a whole project, checked and written all or nothing, envman.lock last."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from envman.app.lockinputs import BASE_OVERRIDE, LockOptions, ProjectInputs, stack_files
from envman.app.stack import Stack, profile_spec, render_stack
from envman.errors import UsageError
from envman.files import WritePlan, with_header
from envman.lock.artifacts import by_url
from envman.lock.lockfile import Lock, render_lock, try_read_lock
from envman.lock.uv import parse_uv_output
from envman.matrix.load import load_matrix
from envman.model import Matrix, Resolution
from envman.project.spec import SPEC_FILE, ProjectSpec, load_spec


@dataclass
class Outcome:
    resolution: Resolution
    lock: Lock
    written: list[Path] = field(default_factory=list)
    spec_created: bool = False
    notes: list[str] = field(default_factory=list)


@dataclass
class Planned:
    """Everything a run writes, checked against the project, not yet written."""

    stacks: list[Stack]
    plan: WritePlan
    changes: list[tuple[Path, str]]
    notes: list[str]


def generate(root: Path, spec: ProjectSpec, *, no_lock: bool = False, force: bool = False,
             matrix: Matrix | None = None, upgrade: bool = False,
             extra: list[tuple[Path, str]] | None = None, timeout: float | None = None,
             progress=None, base_image: str | None = None, pin_apt=None, apt_snapshot: bool = False) -> Outcome:
    """``base_image``: a --base-image override for this run, recorded in the lock's inputs (not in the
    spec's hash), so `lock --check` and `build --base-image` find the lock current. ``extra``: files written
    in the same all-or-nothing write (the envman.yaml init creates)."""
    inputs = ProjectInputs.read(root, spec, matrix or load_matrix()).with_base_image(base_image)
    opts = LockOptions(no_lock=no_lock, upgrade=upgrade, timeout=timeout, progress=progress, pin_apt=pin_apt,
                       apt_snapshot=apt_snapshot)
    return commit(plan_stacks(inputs, opts, force=force, extra=extra))


def plan_stacks(inputs: ProjectInputs, opts: LockOptions, *, force: bool = False,
                extra: list[tuple[Path, str]] | None = None) -> Planned:
    from envman.project.coexist import place_files

    root, spec = inputs.root, inputs.spec
    place = place_files(root)  # before any slow step: the repository's own files decide envman's names
    if spec.profiles:
        stacks = [render_stack(inputs, profile_spec(spec, p), stack_files(root, p.name), opts) for p in spec.profiles]
    else:
        stacks = [render_stack(inputs, spec, stack_files(root, None), opts)]
    # after uv has started (app/pythonlocks.py prepares it while uv runs)
    from envman.image.kit import KIT_FILE, kit_text, old_kit_notes
    files = [w for s in stacks for w in s.writes] + shared_files(inputs, stacks, place)
    files.append((root / ".envman" / KIT_FILE, kit_text()))  # one file (image/kit.py), not the island's folder
    generated = WritePlan(list(files))
    generated.check(root, force)
    for s in stacks:
        _check_lock_owner(root, s, force)
    files += extra or []  # e.g. the envman.yaml init creates: in the same all-or-nothing write
    files += [(root / s.files.lock, render_lock(s.lock)) for s in stacks]  # envman.lock last: the commit point
    wp = WritePlan(files, root=root)
    return Planned(stacks, wp, wp.changes(), list(place.notes) + stack_notes(inputs, stacks) + old_kit_notes(root))


def shared_files(inputs: ProjectInputs, stacks: list[Stack], place) -> list[tuple[Path, str]]:
    """.dockerignore, compose.yaml (a service per stack) and the devcontainer (the first stack's)."""
    from envman.image.context import dockerignore_text
    from envman.image.plan import compose_plan, devcontainer_plan
    from envman.image.render import render_dockerignore, render_json, render_yaml

    root, name, inputs_hash = inputs.root, inputs.spec.name, inputs.inputs_hash
    gi = root / ".gitignore"
    gitignore = _gitignore(gi)
    services = [(s.files.profile, s.files.dockerfile, f"{name}:{s.lock.short_hash}", s.gpu) for s in stacks]
    first = stacks[0]
    devcontainer = devcontainer_plan(name, first.gpu, place.devcontainer_dockerfile(first.files.dockerfile),
                                     editable=first.install_project)
    return [(root / place.dockerignore, with_header(dockerignore_text(render_dockerignore(), gitignore), inputs_hash)),
            (root / place.compose, with_header(render_yaml(compose_plan(name, services)), inputs_hash)),
            (root / place.devcontainer, with_header(render_json(devcontainer), inputs_hash, "//"))]


def stack_notes(inputs: ProjectInputs, stacks: list[Stack]) -> list[str]:
    notes = [n for s in stacks for n in s.notes]
    for group in shared_stacks(stacks):
        notes.append("profiles " + ", ".join(group) + " share one stack (their images differ only in labels)")
    if len(stacks) > 1:
        for s in stacks:
            fw = s.lock.stack.get("framework") or {}
            notes.append(f"profile {s.files.profile}: {fw.get('name')} {fw.get('version')} {fw.get('variant')}, "
                         f"Python {s.lock.stack['python']} → {s.files.dockerfile}, {s.files.lock}")
    if inputs.spec.workload:  # will the training run fit the GPUs this stack is for? (envman fit, from envman.yaml)
        from envman.app.workload import workload_verdicts

        targets = tuple(dict.fromkeys(t for s in stacks for t in s.spec.targets))
        fit_notes, fit_warnings = workload_verdicts(inputs.spec.workload, targets, str(inputs.root))
        notes += fit_notes + [f"warning: {w}" for w in fit_warnings]
    return notes


def shared_stacks(stacks: list[Stack]) -> list[list[str]]:
    groups: dict[tuple, list[str]] = {}
    for s in stacks:
        groups.setdefault(s.lock.stack_key(), []).append(s.files.profile or "default")
    return [g for g in groups.values() if len(g) > 1]


def commit(planned: Planned) -> Outcome:
    """Write what changed, all or nothing (envman.lock last)."""
    first = planned.stacks[0]
    return Outcome(first.resolution, first.lock, planned.plan.write(planned.changes), notes=planned.notes)


def _check_lock_owner(root: Path, stack: Stack, force: bool) -> None:
    from envman.inputs import present, why_unreadable

    path = root / stack.files.lock
    if force or not present(path):
        return
    try:
        path.stat()
    except OSError as exc:  # a link loop or a link to nowhere is not "no lock": replacing it would lose the link
        why, hint = why_unreadable(path, exc)
        raise UsageError(f"{stack.files.lock}: {why}", hint=hint or "re-run with --force to regenerate it") from None
    if stack.last is None or not stack.last.is_intact():
        raise UsageError(f"would overwrite {stack.files.lock} (edited by hand or not envman's)",
                         hint="re-run with --force to regenerate it")


def require_spec(root: Path) -> ProjectSpec:
    spec = load_spec(root)
    if spec is None:
        raise UsageError(f"no {SPEC_FILE} (or [tool.envman] in pyproject.toml) in {root}", hint="run `envman init` first")
    return spec


def offline_dockerfile(root: Path, profile: str | None, offline_image: str | None) -> str:
    """The project's Dockerfile rendered now; with ``offline_image``, pip reads that wheelhouse with --no-index."""
    return offline_built(root, profile, offline_image).writes[0][1]


def offline_built(root: Path, profile: str | None, offline_image: str | None) -> Stack:
    """``offline_dockerfile``'s stack, its Dockerfile first among its files."""
    spec = require_spec(root)
    files = stack_files(root, profile)
    kept = try_read_lock(root / files.lock)  # the lock's --base-image override, if it was made with one
    inputs = ProjectInputs.read(root, spec, load_matrix()).with_base_image(
        kept.inputs.get(BASE_OVERRIDE) if kept else None)
    spec = inputs.spec
    if profile is not None:
        prof = next((p for p in spec.profiles if p.name == profile), None)
        if prof is None:
            raise UsageError(f"no profile {profile!r} in {spec.source}",
                             hint="profiles: " + ", ".join(p.name for p in spec.profiles))
        spec = profile_spec(spec, prof)
    stack = render_stack(inputs, spec, files, LockOptions(no_lock=True, offline_image=offline_image))
    pylock, source = read_text_or_none(root / files.pylock), read_text_or_none(root / files.source)
    if offline_image is not None and pylock and source:
        # the builder fetches a `name @ url` line from its URL whatever --no-index says
        url_built = by_url(pylock.partition("\n")[2],
                           {p.name for p in parse_uv_output(source.partition("\n")[2]).packages})
        if url_built:
            raise UsageError(f"{', '.join(sorted(url_built))}: locked by URL (see {files.source}), which an offline "
                             "build cannot fetch",
                             hint="build online (the builder stage fetches and hash-checks it), or publish the "
                                  "package to an index the wheelhouse reads and pin it by version")
    return stack


def _gitignore(path: Path) -> str | None:
    """The repository's .gitignore, merged into .dockerignore: a regular file of at most 1 MB (a bigger one,
    or a FIFO, is not merged and the generated patterns stand alone)."""
    from envman.inputs import MAX_SPEC, read_regular

    try:
        return read_regular(path, MAX_SPEC).decode("utf-8", "replace")
    except OSError:
        return None


def read_text_or_none(path: Path) -> str | None:
    """The file's text; None when it is not there; "" when it cannot be read (it then matches no digest)."""
    from envman.inputs import read_regular_text

    try:
        return read_regular_text(path)
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError):
        return ""
