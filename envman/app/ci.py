"""``envman ci …`` as use cases, and the reminder ``envman lock`` gives about stale generated CI files."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class CiImageReport:
    tag: str  # the first tag the pipeline gives the image (with the registry's prefix)
    profile: str | None
    gpu: bool  # False: a CPU-only stack
    runner: tuple[str, ...]  # the GPU runner's labels for its smoke; () for none


@dataclass(frozen=True)
class CiOutcome:
    root: Path
    written: tuple[Path, ...]  # empty: up to date
    images: tuple[CiImageReport, ...]
    profiled: bool
    stacks: tuple[tuple[tuple[str, ...], str], ...]  # (profiles, summary) grouped by shared stack
    has_registry: bool
    registry_host: str | None  # the server to log in to; None is Docker Hub (or no registry)
    runner_word: str = ""  # the backend's name for a runner selector (LABEL, TAG); "" for the bake file
    setup_notes: tuple[str, ...] = ()  # what the user must set up by hand in the CI system
    install: str = ""  # where the pipelines get envman from ("" for the bake file)


def _options(project, registry: str | None, runners):
    from envman.ci import CiOptions, parse_registry, parse_runners

    return CiOptions(parse_registry(registry), parse_runners(list(runners or ()), project, "--gpu-runner"))


def envman_install(project, spec: str | None, index: str | None, origin=None):
    """How the pipelines install envman: the options, else envman.yaml's ci:, else how this envman was installed
    (``origin``: the installed distribution's, read when not given)."""
    from envman.ci.install import envman_install as install
    from envman.ci.install import installed_origin, read_settings

    settings = read_settings(project.settings)
    names = ("--envman-spec" if spec is not None else "envman.yaml: ci.envman",
             "--envman-index" if index is not None else "envman.yaml: ci.index_url")
    spec = spec if spec is not None else settings.get("envman")
    index = index if index is not None else settings.get("index_url")
    return install(project.root, spec, index, origin or installed_origin(), names)


def _outcome(project, opts, written, backend=None) -> CiOutcome:
    from envman.ci import image_tags, shared_stacks

    images = tuple(
        CiImageReport(image_tags(project, img, opts.registry)[0], img.profile, img.gpu, tuple(opts.runner(img)))
        for img in project.images
    )
    stacks = tuple((tuple(names), summary) for names, summary in shared_stacks(project)) if project.profiled else ()
    reg = opts.registry
    word, notes = ("", ())
    if backend is not None:
        word, notes = backend.runner_word, tuple(backend.setup_notes(opts, any(i.runner for i in images)))
    return CiOutcome(project.root, tuple(written), images, project.profiled, stacks, reg is not None,
                     reg.host if reg else None, word, notes, opts.install.source if opts.install else "")


def write_pipeline(kind: str, path: Path, registry: str | None = None, gpu_runners=(), envman_spec: str | None = None,
                   force: bool = False, envman_index: str | None = None, origin=None) -> CiOutcome:
    """``kind`` github or gitlab: the pipeline file (and docker-bake.json with profiles)."""
    from dataclasses import replace

    from envman import ci as ci_mod

    project = ci_mod.load_ci_project(Path(path).resolve())
    opts = replace(_options(project, registry, gpu_runners),
                   install=envman_install(project, envman_spec, envman_index, origin))
    b = ci_mod.backend(kind)
    files = ci_mod.pipeline_files(b, project, opts)
    return _outcome(project, opts, ci_mod.write_ci_files(project.root, files, force), b)


def write_bake(path: Path, registry: str | None = None, force: bool = False) -> CiOutcome:
    """docker-bake.json: one target per profile."""
    from envman.ci import bake_files, load_ci_project, write_ci_files

    project = load_ci_project(Path(path).resolve())
    opts = _options(project, registry, None)
    return _outcome(project, opts, write_ci_files(project.root, bake_files(project, opts), force))


def check_ci(path: Path) -> tuple[list[str], list[str]]:
    """(stale, notes): CI files envman generated that name images of other locks, and what was checked."""
    from envman.ci import check_ci_files, load_ci_project

    return check_ci_files(load_ci_project(Path(path).resolve()))


# The files envman's CI backends write (envman.ci: BACKENDS' files and BAKE_FILE), named here so that every
# `envman lock` can look for them without importing the backends (~10 ms); tests/unit/test_ci_backends.py
# holds the two lists equal.
CI_FILES = (".github/workflows/envman.yml", ".gitlab-ci.yml", "docker-bake.json")


def has_ci_files(root: Path) -> bool:
    return any((root / f).exists() for f in CI_FILES)


def stale_ci_files(root: Path) -> list[str]:
    """After a re-lock: generated CI files that name images by lock hash (none: nothing loaded)."""
    return check_ci(root)[0] if has_ci_files(root) else []
