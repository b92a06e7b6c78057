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


def _name(root: Path, default: str, envmans: str, users: tuple[str, ...], said: str, notes: list[str],
          moved: bool = False) -> str:
    """``envmans`` where envman wrote it before, where the repository has one of ``users`` (``said`` then names
    it), or when ``moved``; else ``default``."""
    user = [c for c in users if _theirs(root, c)]
    if user:
        notes.append(said.format(user[0]))
    return envmans if user or moved or ownership(root / envmans).ours else default


def place_files(root: Path) -> Placement:
    notes: list[str] = []
    dockerfile = _name(root, "Dockerfile", "Dockerfile.envman", ("Dockerfile",), "the repository's own {} is kept; "
                       "envman writes Dockerfile.envman beside it", notes)
    dockerignore = _name(root, ".dockerignore", f"{dockerfile}.dockerignore", (".dockerignore",), "the repository's own"
                         " {} is kept; envman writes " + f"{dockerfile}.dockerignore (BuildKit reads it for that "
                         "Dockerfile)", notes, moved=dockerfile != "Dockerfile")
    compose = _name(root, "compose.yaml", "compose.envman.yaml", COMPOSE_NAMES, "the repository's own {} is kept; "
                    "envman writes compose.envman.yaml (docker compose -f compose.envman.yaml …)", notes)
    devcontainer = _name(root, ".devcontainer/devcontainer.json", ".devcontainer/envman/devcontainer.json",
                         DEVCONTAINER_NAMES, "the repository's own {} is kept; envman writes "
                         ".devcontainer/envman/devcontainer.json (a second configuration editors offer to choose)", notes)
    return Placement(dockerfile, dockerignore, compose, devcontainer, tuple(notes))
