"""``gather_facts``: every probe in threads under one deadline, merged into one facts dict (docs/facts.md)."""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Callable

FACTS_SCHEMA = 1
DEADLINE_S = 10.0


def gather_facts(
    project_dir: str = ".", *, python: str | None = None, deep: bool = False, deep_timeout: float = 120.0,
    deadline: float = DEADLINE_S, envman_version: str | None = None,
) -> dict[str, Any]:
    from .docker import probe_docker
    from .host import probe_host, read_framework_pins, read_workload
    from .network import probe_network
    from .nvidia import probe_nvidia
    from .packages import probe_packages
    from .project import probe_lock, read_build_intent, read_dockerfiles
    from .system import probe_system
    from .toolchain import probe_toolchain

    project_dir = os.path.abspath(project_dir)
    jobs: dict[str, Callable[[], dict[str, Any]]] = {  # in the order their facts are merged
        "system": lambda: probe_system(project_dir),
        "nvidia": probe_nvidia,
        "packages": lambda: probe_packages(python),
        "toolchain": probe_toolchain,
        "docker": lambda: {"docker": probe_docker()},
        "project": lambda: {"lock": probe_lock(project_dir), "workload": read_workload(project_dir),
                             "pins": read_framework_pins(project_dir), "build_intent": read_build_intent(project_dir),
                             "dockerfiles": read_dockerfiles(project_dir)},
        "host": probe_host,
        "network": lambda: {"network": probe_network()},
    }
    results, errors = run_probes(jobs, deadline)
    facts: dict[str, Any] = {
        "schema": FACTS_SCHEMA,
        "envman": envman_version,
        "collected_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "project": project_dir,
    }
    for name in jobs:
        part = results.get(name) or {}
        err = part.pop("_error", None)
        if err:
            errors[name] = err
        facts.update(part)
    if deep:
        from .deep import merge_deep, probe_deep

        exe = (facts.get("python") or {}).get("executable")
        if facts.get("torch") and exe:
            merge_deep(facts, probe_deep(exe, deep_timeout))
    if errors:
        facts["probe_errors"] = dict(sorted(errors.items()))
    return facts


def run_probes(jobs: dict[str, Callable[[], dict[str, Any]]],
               deadline: float) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    results: dict[str, dict[str, Any]] = {}
    errors: dict[str, str] = {}

    def one(name: str, fn: Callable[[], dict[str, Any]]) -> None:
        try:
            results[name] = fn()
        except Exception as exc:  # noqa: BLE001 - a failed probe is a fact, not a crash
            errors[name] = f"{type(exc).__name__}: {exc}"

    threads = [threading.Thread(target=one, args=(n, fn), name=f"probe-{n}", daemon=True) for n, fn in jobs.items()]
    for t in threads:
        t.start()
    end = time.monotonic() + deadline
    for t in threads:
        t.join(max(0.0, end - time.monotonic()))
    for n, t in zip(jobs, threads):
        if t.is_alive():
            errors[n] = f"timed out after {deadline:g} s"
            results.pop(n, None)
    return dict(results), errors
