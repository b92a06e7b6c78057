"""Which engine a command uses: ``--engine docker|podman|buildah`` (or ``ENVMAN_ENGINE``), else the first
that works here — a Docker daemon that answers with a BuildKit client, then podman, then buildah. A command
that needs reproducible layers (``build --verify-repro``) prefers, among those that work, one that can clamp
them. When none works, one error names what was found of each and why it cannot be used.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from envman.engine.errors import START_HINT, EngineError
from envman.engine.protocol import ContainerEngine

ENGINES = ("docker", "podman", "buildah")


@dataclass(frozen=True)
class Choice:
    engine: ContainerEngine
    why: str  # said to the user: "--engine podman", "auto: …"


def _make(name: str) -> ContainerEngine:
    if name == "docker":
        from envman.engine.docker import Engine

        return Engine()
    from envman.engine.daemonless import DaemonlessEngine

    return DaemonlessEngine(name)


def _usable(engine: ContainerEngine) -> str | None:
    """None when the engine answers and can build; else why not (one clause)."""
    try:
        engine.ping()
        engine.describe()  # docker: a BuildKit-capable client; podman/buildah: the OCI runtime this machine needs
    except EngineError as exc:
        return exc.message
    return None


def _requested(name: str, source: str, make: Callable[[str], ContainerEngine]) -> Choice:
    if name not in ENGINES:
        raise EngineError(f"{source} {name!r}: not an engine envman knows", hint="one of: " + ", ".join(ENGINES) + " (or auto)")
    engine = make(name)
    problem = _usable(engine)
    if problem:
        raise EngineError(f"{source} {name}: {problem}",
                          hint=START_HINT if name == "docker" else
                          "install podman and buildah (`apt-get install -y podman buildah` or .ci/podman-up.sh)")
    return Choice(engine, f"{source} {name}")


def choose_engine(requested: str | None = None, *, need_repro: bool = False,
                  env: Mapping[str, str] | None = None,
                  make: Callable[[str], ContainerEngine] = _make) -> Choice:
    """The engine to use, and the line that says why. ``requested``: a name from ENGINES, or None/"auto"."""
    env = os.environ if env is None else env
    if requested not in (None, "", "auto"):
        return _requested(str(requested), "--engine", make)
    if env.get("ENVMAN_ENGINE"):
        return _requested(env["ENVMAN_ENGINE"], "ENVMAN_ENGINE", make)
    found: list[tuple[str, str]] = []
    usable: list[ContainerEngine] = []
    for name in ENGINES:
        engine = make(name)
        problem = _usable(engine)
        if problem:
            found.append((name, problem))
        else:
            usable.append(engine)
            if not need_repro:
                break  # the first that works: the others need not be asked
    if not usable:
        said = "; ".join(f"{n}: {why}" for n, why in found)
        raise EngineError(f"no container engine works here ({said})",
                          hint="start Docker (" + START_HINT.split(": ", 1)[-1] + "), or install podman/buildah "
                               "(`apt-get install -y podman buildah`); --engine chooses one")
    if need_repro:
        for i, engine in enumerate(usable):
            if engine.repro_support().clamps:
                skipped = ", ".join(e.name for e in usable[:i])
                return Choice(engine, "auto: the first engine here that builds reproducibly"
                              + (f"; {skipped} cannot clamp layer times" if skipped else ""))
    return Choice(usable[0], "auto: the first engine that answers" + (
        f" ({', '.join(n for n, _ in found)} did not)" if found and found[0][0] == "docker" else ""))
