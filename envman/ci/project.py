"""The project as CI sees it: its locks (one per profile), the options a user gave, and the names
(image tags, cache refs, runner labels) derived from both.

Every value that reaches a generated file is matched against a strict pattern here: the project name,
the profiles, the registry, the runner labels and the pip spec can inject neither YAML nor shell.
"""

from __future__ import annotations

import re
import shlex
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from envman.ci.install import EnvmanInstall
from envman.errors import EXIT_SMOKE_NO_GPU, InternalError, LockError, UsageError
from envman.files import sha256
from envman.image.kit import KIT_FIRST
from envman.lock.layout import LOCK_FILE, PROFILE_LOCK, StackFiles
from envman.lock.lockfile import canonical_json, read_lock
from envman.model import PLATFORMS

SMOKE = shlex.join(["python3", "-c", KIT_FIRST])  # the smoke program every envman image carries
SKIP_LINE = "GPU smoke skipped: no GPU runner configured (envman ci {kind} --gpu-runner {word})"

_NAME = re.compile(r"^[a-z0-9]+(?:[._-][a-z0-9]+)*\Z")  # a Docker repository path component
_HOST = re.compile(r"^(?:localhost|[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)+)(?::[0-9]{1,5})?\Z")
_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}\Z")
_HASH = re.compile(r"^[0-9a-f]{64}\Z")
_DOCKERFILE = re.compile(r"^Dockerfile(?:\.[a-z0-9]+(?:[._-][a-z0-9]+)*)?\Z")


# --- the project -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class CiImage:
    profile: str | None
    lock_file: str
    dockerfile: str
    lock_hash: str
    stack_key: tuple
    summary: str  # "torch 2.14.1 cu130, CUDA 13.0, Python 3.11, base python:3.11-slim-bookworm"
    platform: str | None
    gpu: bool  # False for a CPU-only stack: its smoke needs no GPU runner and skips nothing
    source_date_epoch: int | None = None  # the lock's date: every build of it stamps its files and config with it

    @property
    def tag(self) -> str:
        return self.lock_hash[:12]

    @property
    def target(self) -> str:  # a bake target / GitHub job id: [A-Za-z0-9_-] only
        return (self.profile or "image").replace(".", "_")


@dataclass(frozen=True)
class CiProject:
    root: Path
    name: str
    images: tuple[CiImage, ...]
    settings: dict | None = None  # envman.yaml's ci: as written (where the pipelines get envman; install.py checks it)

    @property
    def profiled(self) -> bool:
        return self.images[0].profile is not None

    @property
    def inputs_hash(self) -> str:
        """What the CI files are generated from: the lock hashes (`envman ci check` compares it)."""
        return sha256(canonical_json({i.profile or "": i.lock_hash for i in self.images}))


def load_ci_project(root: Path) -> CiProject:
    """The locks envman.yaml's profiles call for (envman.lock without profiles), or those on disk."""
    from envman.project.spec import load_spec

    spec = load_spec(root)
    wanted: list[tuple[str | None, str]]
    if spec is not None and spec.profiles:
        wanted = [(p.name, StackFiles.for_profile(p.name).lock) for p in spec.profiles]
    elif spec is not None or (root / LOCK_FILE).exists():
        wanted = [(None, LOCK_FILE)]
    else:
        wanted = sorted((m.group(1), p.name) for p in root.glob("envman.*.lock") if (m := PROFILE_LOCK.match(p.name)))
    missing = [f for _, f in wanted if not (root / f).is_file()] or ([] if wanted else [LOCK_FILE])
    if missing:
        raise UsageError(f"no {', '.join(missing)} in {root}",
                         hint="run `envman lock` first (with profiles it writes envman.PROFILE.lock for each) and commit the locks")
    images = tuple(_image(root, profile, name) for profile, name in wanted)
    names = sorted({n for n, _ in images})
    if len(names) != 1:
        raise LockError(f"the locks name different projects: {', '.join(names)}", hint="run `envman lock` to regenerate them")
    # ci: is read as written: only `envman ci github|gitlab` check it (a bad value must not fail `envman lock`'s
    # look at the CI files)
    return CiProject(root, names[0], tuple(i for _, i in images), spec.ci if spec is not None else None)


def _image(root: Path, profile: str | None, lock_file: str) -> tuple[str, CiImage]:
    data = read_lock(root / lock_file)
    name, lock_hash = data.name, data.get("lock_hash")
    if not isinstance(name, str) or not _NAME.match(name):
        raise LockError(f"{lock_file}: name {name!r} is not a Docker repository name",
                         hint="fix `name` in envman.yaml, then run `envman lock`")
    if not isinstance(lock_hash, str) or not _HASH.match(lock_hash):
        raise LockError(f"{lock_file}: lock_hash is not a sha256 hex digest", hint="regenerate it with `envman lock`")
    if data.get("profile") != profile:
        raise LockError(f"{lock_file}: profile is {data.get('profile')!r}, expected {profile!r}",
                         hint="regenerate it with `envman lock`")
    dockerfile = data.get("dockerfile") or StackFiles.for_profile(profile).dockerfile
    if not isinstance(dockerfile, str) or not _DOCKERFILE.match(dockerfile):
        raise LockError(f"{lock_file}: dockerfile {dockerfile!r} is not a file name in the project",
                         hint="regenerate it with `envman lock`")
    if not (root / dockerfile).is_file():
        raise UsageError(f"{dockerfile}: not found (the image of {lock_file})", hint="run `envman lock` to regenerate it")
    key = data.stack_key()
    fw_text = " ".join(str(x) for x in key[:3] if x) or "no framework"
    cuda = f"CUDA {key[3]}" if key[3] else "CPU"
    summary = f"{fw_text}, {cuda}, Python {key[4]}, base {key[5]}"
    arch = str(data.python_lock.get("platform") or "").split("-")[0]
    return name, CiImage(profile, lock_file, dockerfile, lock_hash, key, summary, PLATFORMS.get(arch), bool(key[3]),
                         data.source_date_epoch)


def source_date_env(images: tuple[CiImage, ...] | list[CiImage]) -> dict[str, str]:
    """``SOURCE_DATE_EPOCH`` for a build step (BuildKit then dates the config and, 0.13+, the files with it):
    the lock's date; none for locks made without one, or profiles whose dates differ (each has its own)."""
    dates = {i.source_date_epoch for i in images}
    return {"SOURCE_DATE_EPOCH": str(dates.pop())} if len(dates) == 1 and None not in dates else {}


def shared_stacks(project: CiProject) -> list[tuple[list[str], str]]:
    """Profiles grouped by stack: same framework version and variant, CUDA, Python and base image."""
    groups: dict[tuple, list[CiImage]] = defaultdict(list)
    for img in project.images:
        groups[img.stack_key].append(img)
    return sorted(([i.profile or project.name for i in imgs], imgs[0].summary) for imgs in groups.values())


def peers(project: CiProject, img: CiImage) -> list[CiImage]:
    return [o for o in project.images if o.stack_key == img.stack_key and o is not img]


# --- options ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Registry:
    ref: str  # "ghcr.io/acme": images are ref/name:tag
    host: str | None  # the server to log in to; None is Docker Hub


@dataclass(frozen=True)
class CiOptions:
    registry: Registry | None = None
    runners: tuple[tuple[str | None, tuple[str, ...]], ...] = ()  # (profile or None for all, labels)
    install: EnvmanInstall | None = None  # how the pipelines install envman (envman/ci/install.py)

    @property
    def install_lines(self) -> list[str]:
        if self.install is None:  # the use case always decides it: a pipeline never guesses a package name
            raise InternalError("CiOptions.install is not set")
        return list(self.install.lines)

    def runner(self, img: CiImage) -> tuple[str, ...]:
        """The GPU runner's labels for the image's smoke; () for none, and always for a CPU-only image."""
        found = dict(self.runners)
        return (found.get(img.profile) or found.get(None) or ()) if img.gpu else ()


def parse_registry(text: str | None) -> Registry | None:
    if text is None or not text.strip():
        return None
    raw = text.strip().rstrip("/")
    parts = raw.split("/")
    host = parts[0] if ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost") else None
    bad = (host is not None and not _HOST.match(host)) or not all(_NAME.match(p) for p in parts[1 if host else 0:])
    if bad or (host is None and not parts[0]):
        raise UsageError(f"--registry: {text!r} is not a registry path",
                         hint="write it like ghcr.io/acme, registry.example.com:5000/team or docker.io/acme (lowercase)")
    return Registry(raw, host)


def parse_runners(values: list[str], project: CiProject, option: str = "--gpu-runner") -> tuple:
    """``LABEL`` (every image), ``PROFILE=LABEL``; ``a,b`` is a runner that has both labels."""
    profiles = {i.profile for i in project.images if i.profile}
    out: dict[str | None, tuple[str, ...]] = {}
    for v in values:
        prof, _, labels = v.rpartition("=")
        if prof and prof not in profiles:
            hint = f"profiles: {', '.join(sorted(profiles))}" if profiles else f"this project has no profiles: write {option} LABEL"
            raise UsageError(f"{option}: {prof!r} is not a profile of {project.name}", hint=hint)
        parts = tuple(labels.split(","))
        if not all(_LABEL.match(p) for p in parts) or "self-hosted" in parts:
            raise UsageError(f"{option}: {labels!r} is not a runner label",
                             hint="letters, digits, . _ and -; several labels as gpu,h100; self-hosted is added for you")
        if (prof or None) in out:
            raise UsageError(f"{option}: {'profile ' + prof if prof else 'the default runner'} is given twice", hint="give each once")
        out[prof or None] = parts
    return tuple(sorted(out.items(), key=lambda kv: kv[0] or ""))


# --- names ----------------------------------------------------------------------------------------


def image_tags(project: CiProject, img: CiImage, registry: Registry | None) -> list[str]:
    prefix = f"{registry.ref}/" if registry else ""
    tags = [f"{prefix}{project.name}:{img.tag}"]
    return tags + ([f"{prefix}{project.name}:{img.tag}-{img.profile}"] if img.profile else [])


def cache_ref(project: CiProject, img: CiImage, registry: Registry) -> str:
    return f"{registry.ref}/{project.name}:buildcache" + (f"-{img.profile}" if img.profile else "")


def skip_script(kind: str, word: str, run: str) -> str:
    """The smoke without a GPU: say so where a reader looks, and take exit 6 (no GPU visible) as a pass."""
    line = SKIP_LINE.format(kind=kind, word=word)
    lines = [f"echo {shlex.quote(line)}"]
    if kind == "github":  # an annotation on the run's summary page, and a line in the job summary
        lines += [f"echo {shlex.quote('::warning title=GPU smoke skipped::' + line)}",
                  f"echo {shlex.quote('### ' + line)} >> \"$GITHUB_STEP_SUMMARY\""]
    return "\n".join(lines + [
        "rc=0",
        f"{run} || rc=$?",
        f'if [ "$rc" -eq {EXIT_SMOKE_NO_GPU} ]; then',
        f"  echo 'smoke: every non-GPU check passed; GPU checks skipped (exit {EXIT_SMOKE_NO_GPU}: no GPU visible)'",
        "  exit 0",
        "fi",
        'exit "$rc"',
    ]) + "\n"
