"""``envman init``: a training repository -> envman.yaml (validated like a typed file), then its lock."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

from envman.app.companions import locked_companions
from envman.app.generate import Outcome, generate
from envman.app.lockinputs import LockOptions
from envman.app.pythonchoice import open_choice, plan_with_wheels
from envman.errors import ResolutionError, UsageError
from envman.image.render import render_yaml
from envman.lock.uv import CudaMajorConflict
from envman.project.spec import SPEC_FILE, ProjectSpec, load_spec, parse_spec, spec_header, validate_base_image


@dataclass
class InitOptions:
    targets: tuple[str, ...] = ()
    driver: str | None = None
    cpu: bool = False
    python: str | None = None
    framework: str | None = None
    base_image: str | None = None
    no_lock: bool = False
    force: bool = False
    timeout: float | None = None  # seconds uv may take (a stalled index ends the lock with its name)
    cuda: str | None = None  # --cuda: decides over the repository's CUDA pins, like --framework and --python


def spec_yaml(spec: ProjectSpec) -> str:
    # cluster: and ci: are not lock inputs (to_data leaves them out of the hash) but are the user's: kept
    extra = {k: v for k, v in (("cluster", spec.cluster), ("ci", spec.ci)) if v}
    return spec_header() + render_yaml({**spec.to_data(), **extra})


# what a re-initialisation (init --force with new options) keeps of the envman.yaml it replaces: what the
# repository's files cannot say, so discovery would lose it
KEPT_ON_REINIT = ("name", "system_packages", "cuda_devel", "command", "env", "workload", "price_per_gpu_hour", "profiles",
                  "cluster", "ci")


def init_project(root: Path, opts: InitOptions, detect_gpus=None, progress=None) -> Outcome:
    if not root.is_dir():
        raise UsageError(f"{root}: not a directory", hint="pass the path of your training repository")
    if opts.base_image is not None:
        validate_base_image(opts.base_image)  # the same check as envman.yaml's base_image
    spec = load_spec(root)
    notes: list[str] = []
    created = spec is None
    if spec is None:
        spec = discovered_spec(root, opts, notes, detect_gpus)
    else:
        given = [n for n, v in (("--target", opts.targets), ("--driver", opts.driver), ("--cpu", opts.cpu),
                                ("--python", opts.python), ("--framework", opts.framework), ("--cuda", opts.cuda)) if v]
        if given and not opts.force:
            raise UsageError(f"{spec.source} exists; {', '.join(given)} would be ignored",
                             hint=f"edit {spec.source} instead (it is the single source of truth), or re-run with "
                                  "--force to re-initialise it from the repository with these options")
        if given:  # init --force: discovered again, with the options; what only envman.yaml says is kept
            spec, created = _reinitialised(root, spec, opts, notes, given, detect_gpus), True
        if opts.base_image and opts.base_image != spec.base_image:
            notes.append(f"base image overridden for this run: {opts.base_image} (add base_image to {spec.source} to keep it)")
    out = _generate(root, spec, created, opts, progress, notes)
    p = root / SPEC_FILE
    if created and p in out.written:
        out.written.remove(p)
        out.written.insert(0, p)
    out.spec_created = created
    out.notes = notes + [n for n in out.notes if n not in notes]  # discovery's report already has its warnings
    return locked_companions(root, load_spec(root) or spec, out)


def _reinitialised(root: Path, old: ProjectSpec, opts: InitOptions, notes: list[str], given: list[str],
                   detect_gpus) -> ProjectSpec:
    if old.source != SPEC_FILE:
        raise UsageError(f"{old.source}: init --force re-initialises envman.yaml only",
                         hint=f"edit {old.source} (or move it to envman.yaml), then run `envman lock`")
    new = discovered_spec(root, opts, notes, detect_gpus)
    kept = {k: getattr(old, k) for k in KEPT_ON_REINIT if getattr(old, k) not in (None, (), False)}
    notes.insert(0, f"{SPEC_FILE}: re-initialised from the repository with {', '.join(given)}"
                 + (f" (kept: {', '.join(k for k in kept if k != 'name')})" if set(kept) - {"name"} else ""))
    return replace(new, **kept)


def discovered_spec(root: Path, opts: InitOptions, notes: list[str], detect_gpus=None) -> ProjectSpec:
    """The spec of what the repository says it needs, the options over it; what was found goes to ``notes``.
    The values come from the repository's files, so they pass the same validation as a typed envman.yaml."""
    from envman.matrix.load import load_matrix
    from envman.project.discover import Asked, discover_repo, nothing_found
    from envman.project.package import find_package

    matrix = load_matrix()
    found = discover_repo(root, {k: list(v) for k, v in matrix.frameworks.items()},
                          asked=Asked(opts.framework, opts.cuda, opts.python, opts.cpu,
                                      matrix.base_images.default_python))
    if not found.read and not opts.framework:
        raise nothing_found(root)
    inf = found.inference
    code = _code_frameworks(root, found, opts)
    cpu = opts.cpu or bool(inf.cpu and not opts.targets)
    if inf.cpu and not opts.cpu:
        notes.append("a CPU stack: the repository asks for a CPU build of its framework" if cpu else
                     "the repository asks for a CPU build of its framework; --target was given, so a GPU stack is resolved")
    targets, driver = list(opts.targets), opts.driver
    if not cpu and not targets:
        if detect_gpus is None:  # this machine's GPUs (raises a UsageError naming --target and --cpu)
            from envman.app.resolve import detected_targets as detect_gpus
        targets, drv, note = detect_gpus()
        notes.append(note)
        driver = driver or (f">={drv}" if drv else None)
    # `-e .` asks for the project; it can only be installed when it is a package (pyproject [build-system] or
    # setup.py): otherwise its source is in the image's work dir and that is all
    installable = found.install_project and find_package(root) is not None
    if found.install_project and not installable:
        notes.append("the requirements install the repository itself (-e . / .), but it is not a package "
                     "(no pyproject.toml [build-system], no setup.py): its source is copied to the image's work "
                     "directory and not installed")
    data = {"name": re.sub(r"[^a-z0-9]+", "-", root.resolve().name.lower()).strip("-") or "envman-project", "python": opts.python or _python_from(found.python),
            "framework": opts.framework or inf.framework or code.framework, "companions": list(inf.companions),
            "requirements": list(found.requirement_files), "packages": list(found.packages), "cpu": cpu,
            "targets": [] if cpu else targets, "driver": driver,
            "cuda": opts.cuda or (None if cpu else (inf.cuda if not opts.framework else None) or found.named_cuda),
            "base_image": opts.base_image,
            "install_project": installable, "sources": found.copied_from, "index_urls": found.index_urls,
            "find_links": found.find_links, "constraints": found.constraints, "overrides": found.overrides,
            "framework_wins": found.framework_wins}
    spec = parse_spec({k: v for k, v in data.items() if v not in (None, [], False)}, SPEC_FILE)
    notes.extend(_found_notes(found, opts, code.framework))
    notes.extend(code.notes)
    return spec


def _code_frameworks(root: Path, found, opts: InitOptions):
    """The frameworks the project's code imports, judged against what its dependency files name (issue 38)."""
    from envman.project.codeimports import judge, read_code_frameworks
    from envman.project.discover import Asked

    name = found.inference.name if found.inference.framework else Asked(opts.framework).framework_name
    return judge(read_code_frameworks(root), name, found.declared, root.name)


def _found_notes(found, opts: InitOptions, from_code: str | None = None) -> list[str]:
    inf = found.inference
    notes = ["found dependencies in: " + ", ".join(found.read)] if found.read else []
    notes += found.report()[1:] if found.read else found.report()
    notes += inf.notes
    if inf.framework:
        notes.append(f"framework constraint from the repository: {inf.framework}")
    elif not opts.framework and not from_code:
        notes.append("no framework (torch, tensorflow, jax) named by the repository, directly or through a package that "
                     "pulls one: the image has none; pass --framework or set framework in envman.yaml if it needs one")
    if found.python:
        notes.append(f"Python constraint from the repository: {found.python}")
    return notes


def _generate(root: Path, spec: ProjectSpec, created: bool, opts: InitOptions, progress,
              notes: list[str]) -> Outcome:
    """init's files. When a locked package pulls nvidia-* wheels of another CUDA major than the stack's
    (mamba-ssm's cutlass wheels are CUDA 12 only) and nobody chose the CUDA, the stack is resolved once more
    for that major, and envman.yaml says so; when no stack has it, the original refusal stands."""
    extra = [(root / SPEC_FILE, spec_yaml(spec))] if created else None
    try:
        if created and open_choice(spec, opts.python, opts.no_lock):  # the newest Python every pin has a wheel for
            return plan_with_wheels(root, spec, LockOptions(timeout=opts.timeout, progress=progress),
                                    lambda s: [(root / SPEC_FILE, spec_yaml(s))], None, opts.force, notes)
        return generate(root, spec, no_lock=opts.no_lock, force=opts.force, timeout=opts.timeout, progress=progress,
                        extra=extra, base_image=None if created else opts.base_image)
    except CudaMajorConflict as conflict:
        if not created or spec.cuda or spec.cpu:
            raise  # the user's envman.yaml (or --cuda) chose the CUDA: the hint says what to change
        retry = replace(spec, cuda=str(conflict.major))
        try:
            out = generate(root, retry, no_lock=opts.no_lock, force=opts.force, timeout=opts.timeout,
                           progress=progress, extra=[(root / SPEC_FILE, spec_yaml(retry))])
        except (ResolutionError, CudaMajorConflict):
            raise conflict from None
        notes.append(f"{conflict.message.split(' (')[0]} needs CUDA {conflict.major}: the stack is resolved for CUDA "
                     f"{conflict.major} instead (cuda: \"{conflict.major}\" in envman.yaml)")
        return out


def _python_from(text: str | None) -> str | None:
    if not text:
        return None
    m = re.fullmatch(r"\s*=?=?\s*(\d+\.\d+)(\.\*|\.\d+)?\s*", text)
    return m.group(1) if m else text.strip()
