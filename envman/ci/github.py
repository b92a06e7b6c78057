"""The GitHub Actions workflow: check (locks current) → build (BuildKit, persistent cache, push) → smoke
(one job per image, on a self-hosted GPU runner, or on ubuntu-latest with a visible "GPU smoke skipped")."""

from __future__ import annotations

from envman.ci.bake import BAKE_FILE
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

# Majors current on 2026-11 (all run on node24); bump them together after reading each release note.
ACTIONS = {
    "checkout": "actions/checkout@v7", "python": "actions/setup-python@v7",
    "buildx": "docker/setup-buildx-action@v4", "login": "docker/login-action@v4",
    "build": "docker/build-push-action@v7", "bake": "docker/bake-action@v7",
}
HOST_PYTHON = "3.11"  # the Python that runs envman in the check job, not the image's
# A pull request from a fork gets no secrets: it must neither log in nor push, and a self-hosted
# GPU runner must never run its code.
TRUSTED = "github.event_name == 'push' || github.event.pull_request.head.repo.full_name == github.repository"
SECRETS = ("ENVMAN_REGISTRY_USERNAME", "ENVMAN_REGISTRY_TOKEN")


def _expr(text: str) -> str:
    return "${{ " + text + " }}"


def _login(reg: Registry) -> dict:
    ghcr = reg.host == "ghcr.io"  # the workflow's own token can push there
    with_ = {"registry": reg.host} if reg.host else {}
    with_["username"] = _expr("github.actor" if ghcr else f"secrets.{SECRETS[0]}")
    with_["password"] = _expr("secrets.GITHUB_TOKEN" if ghcr else f"secrets.{SECRETS[1]}")
    return {"name": f"log in to {reg.host or 'Docker Hub'}", "if": _expr(TRUSTED), "uses": ACTIONS["login"], "with": with_}


def _with_envman(opts: CiOptions) -> list[dict]:
    """The steps that check out the repository and install envman in the runner's own Python."""
    return [{"uses": ACTIONS["checkout"]}, {"uses": ACTIONS["python"], "with": {"python-version": HOST_PYTHON}},
            {"name": "install envman", "run": "\n".join(opts.install_lines)}]


def _check_job(opts: CiOptions) -> dict:
    return {"name": "locks are current", "runs-on": "ubuntu-latest", "steps": [
        *_with_envman(opts),
        {"name": "the locks match envman.yaml, the requirements and the matrices", "run": "envman lock --check"},
        {"name": "the CI files match the locks", "run": "envman ci check"},
    ]}


def _gha_cache(project: CiProject, img: CiImage, write: bool) -> list[str]:
    """Bake overrides: read the cache of the target and of its same-stack peers, write its own."""
    t = img.target
    reads = [f"{t}.cache-from=type=gha,scope=envman-{i.target}" for i in [img, *peers(project, img)]]
    return reads + ([f"{t}.cache-to=type=gha,mode=max,scope=envman-{t}"] if write else [])


def _build_inputs(project: CiProject, img: CiImage, reg: Registry | None) -> dict:
    with_ = {"context": ".", "file": img.dockerfile, **({"platforms": img.platform} if img.platform else {})}
    return {**with_, "tags": image_tags(project, img, reg)[0]}


def _build_job(project: CiProject, opts: CiOptions) -> dict:
    reg = opts.registry
    job: dict = {"name": "build the image" + ("s" if project.profiled else ""), "needs": "check", "runs-on": "ubuntu-latest"}
    steps: list[dict] = [{"uses": ACTIONS["checkout"]}, {"name": "set up BuildKit", "uses": ACTIONS["buildx"]}]
    if reg:
        if reg.host == "ghcr.io":
            job["permissions"] = {"contents": "read", "packages": "write"}
        steps.append(_login(reg))
    fork = "pull request from a fork: no secrets, no push"
    if project.profiled:
        bake = {"source": ".", "files": BAKE_FILE}
        if reg:
            steps += [
                {"name": "build and push every profile", "id": "bake", "if": _expr(TRUSTED), "uses": ACTIONS["bake"],
                 "with": {**bake, "push": True}},
                {"name": f"build every profile ({fork})", "if": _expr(f"!({TRUSTED})"), "uses": ACTIONS["bake"],
                 "with": {**bake, "set": "*.cache-to=\n"}},
            ]
            job["outputs"] = {"metadata": _expr("steps.bake.outputs.metadata")}
        else:
            lines = [ln for img in project.images for ln in _gha_cache(project, img, True)]
            steps.append({"name": "build every profile (cache: GitHub Actions)", "uses": ACTIONS["bake"],
                          "with": {**bake, "set": "\n".join(lines) + "\n"}})
    else:
        img = project.images[0]
        with_ = _build_inputs(project, img, reg)
        if reg:
            cache = f"type=registry,ref={cache_ref(project, img, reg)}"
            steps += [
                {"name": "build and push", "id": "build", "if": _expr(TRUSTED), "uses": ACTIONS["build"],
                 "with": {**with_, "push": True, "cache-from": cache, "cache-to": cache + ",mode=max"}},
                {"name": f"build ({fork})", "if": _expr(f"!({TRUSTED})"), "uses": ACTIONS["build"],
                 "with": {**with_, "push": False, "cache-from": cache}},
            ]
            job["outputs"] = {"digest": _expr("steps.build.outputs.digest")}
        else:
            steps.append({"name": "build (cache: GitHub Actions)", "uses": ACTIONS["build"], "with": {
                **with_, "cache-from": "type=gha,scope=envman", "cache-to": "type=gha,mode=max,scope=envman"}})
    date = source_date_env(project.images)
    for step in steps:
        if date and step.get("uses") in (ACTIONS["build"], ACTIONS["bake"]):
            step["env"] = dict(date)  # the lock's date, not the clock (docs/reproducible.md)
    job["steps"] = steps
    return job


def _repro_job(opts: CiOptions) -> dict:
    """Two builds from scratch with podman (on GitHub's Ubuntu runners), whose image IDs must agree: on pushes,
    not on every pull request (a torch image is two full builds)."""
    return {"name": "reproducible image (two builds from scratch agree)", "needs": "check", "runs-on": "ubuntu-latest",
            "if": _expr("github.event_name == 'push'"), "steps": [
                *_with_envman(opts),
                {"name": "build twice with podman and compare", "run": "envman build --verify-repro --engine podman --no-smoke"},
            ]}


def _smoke_job(project: CiProject, opts: CiOptions, img: CiImage) -> dict:
    reg, labels = opts.registry, opts.runner(img)
    what = f"smoke test {img.profile}" if img.profile else "smoke test"
    where = f"GPU: {', '.join(labels)}" if labels else ("no GPU" if img.gpu else "CPU-only stack")
    job: dict = {"name": f"{what} ({where})", "needs": "build",
                 "runs-on": ["self-hosted", *labels] if labels else "ubuntu-latest"}
    if reg or labels:  # with a registry only a trusted build pushed the image; never fork code on our runner
        job["if"] = _expr(TRUSTED)
    env = {"ENVMAN_IMAGE": image_tags(project, img, reg)[0]}
    steps: list[dict] = []
    if reg:
        if reg.host == "ghcr.io":
            job["permissions"] = {"packages": "read"}
        steps.append(_login(reg))
        # The digest the build pushed: the smoke tests exactly that image, not whatever the tag points to now.
        env["ENVMAN_DIGEST"] = _expr("needs.build.outputs.digest" if not project.profiled else
                                     f"fromJSON(needs.build.outputs.metadata)['{img.target}']['containerimage.digest']")
    else:  # nothing was pushed: rebuild from the build job's cache, which makes it a cache hit
        steps += [{"uses": ACTIONS["checkout"]}, {"name": "set up BuildKit", "uses": ACTIONS["buildx"]}]
        if project.profiled:
            steps.append({"name": "load the image from the build cache", "uses": ACTIONS["bake"], "with": {
                "source": ".", "files": BAKE_FILE, "targets": img.target, "load": True,
                "set": "\n".join(_gha_cache(project, img, False)) + "\n"}})
        else:
            steps.append({"name": "load the image from the build cache", "uses": ACTIONS["build"], "with": {
                **_build_inputs(project, img, reg), "load": True, "cache-from": "type=gha,scope=envman"}})
        if source_date_env([img]):
            steps[-1]["env"] = source_date_env([img])  # the build job's date: the same layers, a cache hit
    pick, image = "", '"$ENVMAN_IMAGE"'
    if reg:
        pick, image = 'image="$ENVMAN_IMAGE"\nif [ -n "${ENVMAN_DIGEST:-}" ]; then image="$image@$ENVMAN_DIGEST"; fi\n', '"$image"'
    if labels:
        script = pick + f"docker run --rm --gpus all {image} {SMOKE} --require-gpu\n"
    elif not img.gpu:
        script = pick + f"docker run --rm {image} {SMOKE}\n"
    else:
        script = pick + skip_script("github", "LABEL", f"docker run --rm {image} {SMOKE}")
    name = "GPU smoke test" if labels else ("smoke test without a GPU" if img.gpu else "smoke test")
    steps.append({"name": name, "env": env, "run": script})
    job["steps"] = steps
    return job


def github_workflow(project: CiProject, opts: CiOptions) -> dict:
    jobs = {"check": _check_job(opts), "build": _build_job(project, opts)}
    if all(img.source_date_epoch is not None for img in project.images):
        jobs["reproducible"] = _repro_job(opts)
    for img in project.images:
        jobs["smoke" + (f"-{img.target}" if img.profile else "")] = _smoke_job(project, opts, img)
    return {
        "name": "envman",
        "on": ["push", "pull_request"],
        "permissions": {"contents": "read"},
        "concurrency": {"group": "envman-" + _expr("github.ref"), "cancel-in-progress": _expr("github.event_name == 'pull_request'")},
        "defaults": {"run": {"shell": "bash"}},
        "jobs": jobs,
    }
