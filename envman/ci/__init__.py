"""CI pipelines for a locked project: a GitHub Actions workflow, a .gitlab-ci.yml and a docker-bake.json.

locks (project.py) → pipeline data (github.py, gitlab.py, bake.py) → files with envman's header (files.py).
The files are serialized from Python data (PyYAML's safe dumper, json), never templated, and name the
image of each lock by its hash: `envman ci check` (run by the pipelines) fails when a lock moved on.
"""

from __future__ import annotations

from envman.ci.bake import BAKE_FILE, bake_data, bake_ownership, render_bake
from envman.ci.files import GITHUB_FILE, GITLAB_FILE, check_ci_files, dump_yaml, with_ci_header, write_ci_files
from envman.ci.github import github_workflow
from envman.ci.gitlab import gitlab_pipeline
from envman.ci.project import (
    CiImage, CiOptions, CiProject, Registry, image_tags, load_ci_project, parse_envman_spec, parse_registry,
    parse_runners, shared_stacks,
)

__all__ = [
    "BAKE_FILE", "GITHUB_FILE", "GITLAB_FILE", "CiImage", "CiOptions", "CiProject", "Registry", "bake_data",
    "bake_ownership", "check_ci_files", "github_files", "gitlab_files", "bake_files", "image_tags",
    "load_ci_project", "parse_envman_spec", "parse_registry", "parse_runners", "render_bake", "shared_stacks",
    "write_ci_files",
]


def bake_files(project: CiProject, opts: CiOptions) -> list[tuple[str, str]]:
    return [(BAKE_FILE, render_bake(project, opts.registry))]


def github_files(project: CiProject, opts: CiOptions) -> list[tuple[str, str]]:
    body = dump_yaml(github_workflow(project, opts))
    files = [(GITHUB_FILE, with_ci_header(body, project.inputs_hash, "envman ci github"))]
    return files + (bake_files(project, opts) if project.profiled else [])


def gitlab_files(project: CiProject, opts: CiOptions) -> list[tuple[str, str]]:
    body = dump_yaml(gitlab_pipeline(project, opts))
    files = [(GITLAB_FILE, with_ci_header(body, project.inputs_hash, "envman ci gitlab"))]
    return files + (bake_files(project, opts) if project.profiled else [])
