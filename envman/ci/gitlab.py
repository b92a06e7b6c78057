"""The .gitlab-ci.yml: stages check → build → smoke. The build runs `docker buildx` against a
docker:dind service with a registry cache; the smoke runs the built image itself as the job image, on a
runner tagged for GPUs (docker executor with ``gpus = "all"``), or untagged with a visible skip line.

Without --registry the images go to the project's own container registry ($CI_REGISTRY_IMAGE), which the
job token can push to and GitLab Runner can pull from: no credentials to set up.
"""

from __future__ import annotations

import shlex

from envman.ci.bake import BAKE_FILE
from envman.ci.install import GIT_APT
from envman.ci.project import (
    SMOKE,
    CiImage,
    CiOptions,
    CiProject,
    Registry,
    cache_ref,
    image_tags,
    peers,
    skip_script,
    source_date_env,
)

DOCKER_IMAGE, DIND_IMAGE, CHECK_IMAGE = "docker:29", "docker:29-dind", "python:3.11-slim"
VARIABLES = ("ENVMAN_REGISTRY_USERNAME", "ENVMAN_REGISTRY_TOKEN")
BUILD_JOB = "envman-build"


def _word(reg: Registry | None, ref: str) -> str:
    """A shell word for a reference made by image_tags/cache_ref; $CI_REGISTRY_IMAGE stays a variable."""
    return f'"$CI_REGISTRY_IMAGE"/{shlex.quote(ref)}' if reg is None else shlex.quote(ref)


def _login(reg: Registry | None) -> str:
    if reg is None:
        return 'echo "$CI_REGISTRY_PASSWORD" | docker login --username "$CI_REGISTRY_USER" --password-stdin "$CI_REGISTRY"'
    return (f'echo "${VARIABLES[1]}" | docker login --username "${VARIABLES[0]}" --password-stdin'
            + (f" {shlex.quote(reg.host)}" if reg.host else ""))


def _cache_args(project: CiProject, img: CiImage, reg: Registry | None, flag: str) -> list[str]:
    """--cache-from for the image and its same-stack peers, --cache-to for its own ref."""
    # With the project registry the references are relative (a Registry-less ref) and prefixed by the variable.
    rel = reg or Registry("", None)
    refs = [cache_ref(project, i, rel).lstrip("/") for i in [img, *peers(project, img)]]
    return ([f"{flag.format(img.target, 'cache-from')}type=registry,ref={_word(reg, r)}" for r in refs]
            + [f"{flag.format(img.target, 'cache-to')}type=registry,ref={_word(reg, refs[0])},mode=max"])


def _build_script(project: CiProject, reg: Registry | None) -> str:
    if project.profiled:
        args = [f"docker buildx bake --file {BAKE_FILE} --push"]
        if reg is None:  # the bake file carries no registry: add it here
            for img in project.images:
                args += [f"--set {img.target}.tags={_word(reg, t)}" for t in image_tags(project, img, None)]
                args += _cache_args(project, img, reg, "--set {}.{}=")
    else:
        img = project.images[0]
        args = ["docker buildx build", f"--file {shlex.quote(img.dockerfile)}"]
        args += [f"--platform {shlex.quote(img.platform)}"] if img.platform else []
        args += [f"--tag {_word(reg, t)}" for t in image_tags(project, img, reg)]
        args += _cache_args(project, img, reg, "--{1} ")
        args += ["--push", "."]
    return " \\\n  ".join(args) + "\n"


def _smoke_job(project: CiProject, opts: CiOptions, img: CiImage) -> dict:
    reg, labels = opts.registry, opts.runner(img)
    ref = image_tags(project, img, reg)[0]
    job: dict = {
        "stage": "smoke",
        "needs": [BUILD_JOB],
        # The image under test is the job's image: GitLab Runner pulls it and hands it the runner's GPUs.
        "image": {"name": ref if reg else f"$CI_REGISTRY_IMAGE/{ref}", "entrypoint": [""]},
        "variables": {"GIT_STRATEGY": "none"},  # the image holds the project; the job needs no clone
    }
    if labels:
        job["tags"] = list(labels)
        job["script"] = [f"{SMOKE} --require-gpu"]
    elif not img.gpu:
        job["script"] = [SMOKE]
    else:
        job["script"] = [skip_script("gitlab", "TAG", SMOKE)]
    return job


def _install(opts: CiOptions) -> list[str]:
    """The check job's install lines: its python image has no git, which pip needs for a git URL."""
    return ([GIT_APT] if opts.install is not None and opts.install.needs_git else []) + opts.install_lines


def gitlab_pipeline(project: CiProject, opts: CiOptions) -> dict:
    reg = opts.registry
    doc: dict = {
        "stages": ["check", "build", "smoke"],
        # One pipeline per change: merge request pipelines, and branch pipelines only without an open MR.
        "workflow": {"rules": [
            {"if": '$CI_PIPELINE_SOURCE == "merge_request_event"'},
            {"if": "$CI_COMMIT_BRANCH && $CI_OPEN_MERGE_REQUESTS", "when": "never"},
            {"if": "$CI_COMMIT_BRANCH"},
            {"if": "$CI_COMMIT_TAG"},
        ]},
        "envman-check": {"stage": "check", "image": CHECK_IMAGE, "script": [
            *_install(opts), "envman lock --check", "envman ci check"]},
        BUILD_JOB: {
            "stage": "build",
            "needs": ["envman-check"],
            "image": DOCKER_IMAGE,
            "services": [DIND_IMAGE],
            # SOURCE_DATE_EPOCH: the lock's date, which buildx passes to BuildKit (docs/reproducible.md)
            "variables": {"DOCKER_TLS_CERTDIR": "/certs", **source_date_env(project.images)},
            # The docker driver cannot export a registry cache: a BuildKit container can.
            "before_script": [_login(reg), "docker buildx create --use --driver docker-container --name envman"],
            "script": [_build_script(project, reg)],
        },
    }
    for img in project.images:
        doc["envman-smoke" + (f"-{img.target}" if img.profile else "")] = _smoke_job(project, opts, img)
    return doc
