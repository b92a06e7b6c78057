"""A repository's own Dockerfile, .dockerignore, compose file and devcontainer are never envman's to
overwrite, and never a reason to refuse: envman writes its files beside them under its own names
(``Dockerfile.envman``, ``Dockerfile.envman.dockerignore`` — BuildKit reads ``<Dockerfile>.dockerignore``
before ``.dockerignore`` —, ``compose.envman.yaml``, ``.devcontainer/envman/devcontainer.json``) and says so.

A file is envman's when it carries envman's generated header; once envman has written its own name, it
keeps using it (the choice does not flip back when the user's file goes away)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from envman.files import ownership

COMPOSE_NAMES = ("compose.yaml", "compose.yml", "docker-compose.yaml", "docker-compose.yml")
DEVCONTAINER_NAMES = (".devcontainer/devcontainer.json", ".devcontainer.json")


@dataclass(frozen=True)
class Placement:
    dockerfile: str = "Dockerfile"
    dockerignore: str = ".dockerignore"
    compose: str = "compose.yaml"
    devcontainer: str = ".devcontainer/devcontainer.json"
    notes: tuple[str, ...] = field(default=())

    def devcontainer_dockerfile(self, dockerfile: str) -> str:
        """The Dockerfile's path as devcontainer.json names it (relative to the devcontainer's folder)."""
        return os.path.relpath(dockerfile, os.path.dirname(self.devcontainer)).replace(os.sep, "/")


def _theirs(root: Path, rel: str) -> bool:
    o = ownership(root / rel)
    return o.exists and not o.ours


def _ours(root: Path, rel: str) -> bool:
    return ownership(root / rel).ours


def place_files(root: Path) -> Placement:
    notes: list[str] = []
    dockerfile = "Dockerfile"
    if _ours(root, "Dockerfile.envman") or _theirs(root, "Dockerfile"):
        dockerfile = "Dockerfile.envman"
        if _theirs(root, "Dockerfile"):
            notes.append("the repository's own Dockerfile is kept; envman writes Dockerfile.envman beside it")
    dockerignore = ".dockerignore"
    if _ours(root, f"{dockerfile}.dockerignore") or _theirs(root, ".dockerignore") or dockerfile != "Dockerfile":
        dockerignore = f"{dockerfile}.dockerignore"
        if _theirs(root, ".dockerignore"):
            notes.append(f"the repository's own .dockerignore is kept; envman writes {dockerignore} "
                         "(BuildKit reads it for that Dockerfile)")
    compose = "compose.yaml"
    user_compose = [c for c in COMPOSE_NAMES if _theirs(root, c)]
    if _ours(root, "compose.envman.yaml") or user_compose:
        compose = "compose.envman.yaml"
        if user_compose:
            notes.append(f"the repository's own {user_compose[0]} is kept; envman writes compose.envman.yaml "
                         "(docker compose -f compose.envman.yaml …)")
    devcontainer = ".devcontainer/devcontainer.json"
    user_dev = [c for c in DEVCONTAINER_NAMES if _theirs(root, c)]
    if _ours(root, ".devcontainer/envman/devcontainer.json") or user_dev:
        devcontainer = ".devcontainer/envman/devcontainer.json"
        if user_dev:
            notes.append(f"the repository's own {user_dev[0]} is kept; envman writes {devcontainer} "
                         "(a second configuration editors offer to choose)")
    return Placement(dockerfile, dockerignore, compose, devcontainer, tuple(notes))
