"""``--json`` contracts of init, lock and build, and of every error when ``--json`` is given (docs/commands.md).

A command's JSON is one document on stdout; everything else (progress, the engine's log, the error and hint lines)
goes to stderr. An error is ``{"error", "hint", "exit_code"}`` — a refusal adds the resolver's ``conflicts`` and
``alternatives`` — and the exit code is the one the command has without ``--json``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from envman.errors import EnvmanError, ResolutionError


def wants_json(argv: list[str]) -> bool:
    return "--json" in (argv[:argv.index("--")] if "--" in argv else argv)


def error_json(err: EnvmanError) -> dict[str, Any]:
    from envman.redact import redact

    out: dict[str, Any] = {"error": redact(err.message)}
    if isinstance(err, ResolutionError):  # the resolver's own refusal (resolve --json's contract), and the rest
        from envman.app.resolve import refusal_json

        out = refusal_json(err)
    return {**out, "hint": redact(err.hint) if err.hint else None, "exit_code": err.exit_code}


def outcome_json(out, root: Path, ci_stale: list[str] | None = None) -> dict[str, Any]:
    """What ``envman init --json`` and ``envman lock --json`` print: the lock, the files, the stack."""
    from envman.app.resolve import resolution_json

    lock = out.lock
    base = (lock.get("base_image") or {}).get("ref") if hasattr(lock, "get") else None
    doc = {
        "name": lock["name"],
        "lock_hash": lock["lock_hash"],
        "image": f"{lock['name']}:{lock['lock_hash'][:12]}",
        "written": [p.relative_to(root).as_posix() for p in out.written],
        "up_to_date": not out.written,
        "notes": list(out.notes),
        "base_image": base,
        "stack": resolution_json(out.resolution),
    }
    if ci_stale is not None:
        doc["ci_stale"] = list(ci_stale)
    return doc


def build_json(outcomes, exit_code: int) -> dict[str, Any]:
    """What ``envman build --json`` prints: one entry per image, and the run's exit code."""
    return {"images": [_image(o) for o in outcomes], "exit_code": exit_code}


def _image(o) -> dict[str, Any]:
    smoke = o.smoke
    if smoke is None:
        state = "skipped"
    elif getattr(smoke, "failed", False):
        state = "failed"
    elif getattr(smoke, "no_gpu", False):
        state = "passed-without-gpu"
    else:
        state = "passed"
    return {"profile": o.profile, "image": o.image, "built": bool(o.built), "smoke": state,
            "pushed": dict(o.pushed) if o.pushed else None, "notes": list(o.notes)}
