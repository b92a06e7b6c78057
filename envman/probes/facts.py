"""``gather_facts``: every probe at once, merged into one facts dict (schema: docs/facts.md).

Probes run in threads (most of their time is spent waiting on subprocesses, sockets and the kernel),
each bounded by its own timeouts and all by one deadline. A probe that raises or overruns becomes an
entry in ``probe_errors``; the others' facts still arrive.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Callable

from .. import __version__

FACTS_SCHEMA = 1
DEADLINE_S = 10.0


def gather_facts(
    project_dir: str = ".", *, python: str | None = None, deep: bool = False, deep_timeout: float = 120.0,
    deadline: float = DEADLINE_S,
) -> dict:
    from .docker import probe_docker
    from .nvidia import probe_nvidia
    from .packages import probe_packages
    from .project import probe_lock
    from .system import probe_system
    from .toolchain import probe_toolchain

    project_dir = os.path.abspath(project_dir)
    jobs: dict[str, Callable[[], dict]] = {
        "packages": lambda: probe_packages(python),
        "nvidia": probe_nvidia,
        "toolchain": probe_toolchain,
        "docker": lambda: {"docker": probe_docker()},
        "system": lambda: probe_system(project_dir),
        "project": lambda: {"lock": probe_lock(project_dir)},
    }
    results, errors = run_probes(jobs, deadline)
    facts: dict = {
        "schema": FACTS_SCHEMA,
        "envman": __version__,
        "collected_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "project": project_dir,
    }
    for name in ("system", "nvidia", "packages", "toolchain", "docker", "project"):
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


def run_probes(jobs: dict[str, Callable[[], dict]], deadline: float) -> tuple[dict[str, dict], dict[str, str]]:
    results: dict[str, dict] = {}
    errors: dict[str, str] = {}

    def one(name: str, fn: Callable[[], dict]) -> None:
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


# --- facts files: `--dump-facts FILE` writes one, `--facts FILE` judges one from another machine --------


def read_facts_file(path: str) -> dict:
    """The facts in ``path``; a missing, unreadable or malformed file is a UsageError naming it."""
    import json

    from ..errors import UsageError

    hint = "create it on the machine to diagnose with `envman doctor --dump-facts facts.json`"
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        raise UsageError(f"facts file {path}: not found", hint=hint) from None
    except IsADirectoryError:
        raise UsageError(f"facts file {path}: is a directory", hint=hint) from None
    except (OSError, UnicodeDecodeError) as exc:
        why = getattr(exc, "strerror", None) or exc
        raise UsageError(f"facts file {path}: cannot be read: {why}", hint=hint) from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        where = f"line {exc.lineno}, column {exc.colno}: {exc.msg}" if hasattr(exc, "lineno") else str(exc)
        raise UsageError(f"facts file {path}: not valid JSON ({where})", hint=hint) from None
    if not isinstance(data, dict):
        raise UsageError(f"facts file {path}: expected a JSON object at the top, got {type(data).__name__}", hint=hint)
    schema = data.get("schema")
    if isinstance(schema, int) and schema > FACTS_SCHEMA:
        raise UsageError(f"facts file {path}: schema {schema} is newer than this envman reads ({FACTS_SCHEMA})",
                         hint="upgrade envman (pip install -U envman)")
    return data


def write_facts_file(path: str, facts: dict) -> None:
    import json

    from ..fsutil import write_atomic

    write_atomic(path, json.dumps(facts, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
