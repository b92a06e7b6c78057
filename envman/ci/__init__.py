"""CI pipelines for a locked project: a GitHub Actions workflow, a .gitlab-ci.yml and a docker-bake.json.

locks (project.py) → pipeline data (github.py, gitlab.py, bake.py) → files with envman's header (files.py).
The files are serialized from Python data (PyYAML's safe dumper, json), never templated, and name the
image of each lock by its hash: `envman ci check` (run by the pipelines) fails when a lock moved on.

To add a CI system: a module with its pipeline function and one ``CiBackend`` line in ``BACKENDS``; `envman ci
NAME`, `envman ci check` and the re-lock reminder pick it up from there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from envman.ci import files as _files
from envman.ci.bake import BAKE_FILE, bake_data, bake_ownership, render_bake
from envman.ci.files import GITHUB_FILE, GITLAB_FILE, write_ci_files
from envman.ci.github import github_workflow
from envman.ci.gitlab import gitlab_pipeline
from envman.ci.project import (
    CiImage,
    CiOptions,
    CiProject,
    Registry,
    image_tags,
    load_ci_project,
    parse_registry,
    parse_runners,
    shared_stacks,
)
from envman.files import dump_yaml, with_header

__all__ = [
    "BACKENDS", "BAKE_FILE", "GITHUB_FILE", "GITLAB_FILE", "CiBackend", "CiImage", "backend", "pipeline_files", "CiOptions", "CiProject", "Registry", "bake_data",
    "bake_ownership", "check_ci_files", "bake_files", "image_tags",
    "load_ci_project", "parse_registry", "parse_runners", "render_bake", "shared_stacks",
    "write_ci_files",
]


@dataclass(frozen=True)
class CiBackend:
    name: str  # the `envman ci NAME` subcommand
    file: str  # where its pipeline lives in the repository
    runner_word: str  # what the system calls the runner selector in help and hints: LABEL, TAG
    pipeline: Callable[[CiProject, CiOptions], dict]
    setup_notes: Callable[[CiOptions, bool], list[str]]  # (options, any GPU runner) -> what to set up by hand

    @property
    def command(self) -> str:
        return f"envman ci {self.name}"


def bake_files(project: CiProject, opts: CiOptions) -> list[tuple[str, str]]:
    return [(BAKE_FILE, render_bake(project, opts.registry))]


def _github_notes(opts: CiOptions, gpu_runner: bool) -> list[str]:
    reg = opts.registry
    notes = []
    if reg is not None and reg.host != "ghcr.io":
        notes.append("secrets: set ENVMAN_REGISTRY_USERNAME and ENVMAN_REGISTRY_TOKEN in the repository's Actions secrets")
    if gpu_runner:
        notes.append("actionlint: list your runner labels under self-hosted-runner.labels in .github/actionlint.yaml")
    return notes


def _gitlab_notes(opts: CiOptions, gpu_runner: bool) -> list[str]:
    if opts.registry is None:
        return []
    return ["variables: set ENVMAN_REGISTRY_USERNAME and ENVMAN_REGISTRY_TOKEN (masked) in the project's CI/CD "
            "variables, and DOCKER_AUTH_CONFIG so the runner can pull the image"]


BACKENDS: tuple[CiBackend, ...] = (
    CiBackend("github", GITHUB_FILE, "LABEL", github_workflow, _github_notes),
    CiBackend("gitlab", GITLAB_FILE, "TAG", gitlab_pipeline, _gitlab_notes),
)


def backend(name: str) -> CiBackend:
    return {b.name: b for b in BACKENDS}[name]


def pipeline_files(b: CiBackend, project: CiProject, opts: CiOptions) -> list[tuple[str, str]]:
    """The backend's pipeline file, plus docker-bake.json when the project has profiles."""
    body = dump_yaml(b.pipeline(project, opts))
    files = [(b.file, with_header(body, project.inputs_hash, command=b.command))]
    return files + (bake_files(project, opts) if project.profiled else [])


def pipeline_commands() -> dict[str, str]:
    return {b.file: b.command for b in BACKENDS}


def check_ci_files(project: CiProject) -> tuple[list[str], list[str]]:
    """(stale, notes): envman's CI files (every backend's, and the bake file) that name other locks' images."""
    return _files.check_ci_files(project, pipeline_commands())
