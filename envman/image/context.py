"""A lean build context: the generated .dockerignore keeps data, runs and weights out, merges the
repository's .gitignore, and ``envman build`` measures what is left and names the biggest paths.

Kept apart from render.py's base .dockerignore (caches, secrets) so each list has one owner: this
module adds the training-repository patterns and the .gitignore merge on top of whatever base it is given.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# BUILD_INPUTS: what the Dockerfile itself reads from the context, re-included whatever DATA_PATTERNS exclude
from envman.lock.layout import BUILD_INPUTS

# Datasets, experiment outputs and weights: gigabytes that no image needs (mount them at run time).
DATA_PATTERNS = (
    "data", "runs", "checkpoints", "wandb", "outputs", "mlruns", "lightning_logs",
    "**/*.pt", "**/*.pth", "**/*.ckpt", "**/*.safetensors", "**/*.bin",
)
WARN_BYTES = 1 << 30


def gitignore_patterns(text: str) -> list[str]:
    """.gitignore lines in .dockerignore syntax. git matches a slash-free pattern at any depth (→ ``**/p``)
    and a pattern with an inner or leading slash from the root (→ ``p`` without the leading slash);
    .dockerignore cannot say "directories only", so a trailing slash is dropped (it then also matches a
    file of that name, which an ignored directory's name rarely is)."""
    out = []
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line or line.startswith("#"):
            continue
        neg = line.startswith("!")
        pat = line[1:] if neg else line
        pat = pat.rstrip("/")
        if not pat:
            continue
        if pat.startswith("/"):
            pat = pat.lstrip("/")
        elif "/" not in pat and not pat.startswith("**"):
            pat = f"**/{pat}"
        out.append(("!" if neg else "") + pat)
    return out


def dockerignore_text(base: str, gitignore: str | None) -> str:
    """``base`` (envman's caches and secrets), the training-repository patterns, the .gitignore, then the
    files the build reads (so a .gitignore'd ``.envman/`` cannot break the build)."""
    parts = [base.rstrip("\n"), "", "# datasets, experiment outputs and weights (mount them at run time)", *DATA_PATTERNS]
    if gitignore is not None:
        pats = gitignore_patterns(gitignore)
        if pats:
            parts += ["", "# from .gitignore", *pats]
    parts += ["", "# what the Dockerfile reads, whatever the patterns above say", *BUILD_INPUTS]
    return "\n".join(parts) + "\n"


def _regex(pattern: str) -> re.Pattern:
    out = ""
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out += "(?:.*/)?"
            i += 3
            continue
        if pattern.startswith("**", i):
            out += ".*"
            i += 2
            continue
        out += {"*": "[^/]*", "?": "[^/]"}.get(c, re.escape(c))
        i += 1
    return re.compile(out + "$")


@dataclass(frozen=True)
class Rule:
    regex: re.Pattern
    negate: bool


def parse_dockerignore(text: str) -> list[Rule]:
    rules = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        neg = line.startswith("!")
        pat = os.path.normpath(line[1:] if neg else line).lstrip("/")
        rules.append(Rule(_regex(pat), neg))
    return rules


def is_ignored(rel: str, rules: list[Rule]) -> bool:
    """Docker's rule: the last matching pattern wins; a pattern matching a parent directory matches the path."""
    parts = rel.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    ignored = False
    for r in rules:
        if any(r.regex.match(p) for p in prefixes):
            ignored = not r.negate
    return ignored


@dataclass(frozen=True)
class ContextSize:
    total: int
    biggest: tuple[tuple[str, int], ...]  # top-level entries, largest first


def ignore_file(root: Path, dockerfile: str = "Dockerfile") -> Path:
    """The ignore file BuildKit applies: ``<Dockerfile>.dockerignore`` beside the Dockerfile when there is one
    (envman writes one when the repository keeps its own .dockerignore), else ``.dockerignore``."""
    own = root / f"{dockerfile}.dockerignore"
    return own if os.path.lexists(own) else root / ".dockerignore"


def context_files(root: Path, dockerfile: str = "Dockerfile") -> Iterator[tuple[str, int]]:
    """(path relative to root, bytes) of every file the engine would receive as the build context."""
    from envman.errors import UsageError
    from envman.inputs import MAX_SPEC, NOT_REGULAR, read_regular

    for other in {root / ".dockerignore", root / f"{dockerfile}.dockerignore"}:  # both: the client reads either
        if os.path.lexists(other) and not other.is_file():
            raise UsageError(f"{other.name}: {NOT_REGULAR}", hint="remove it (`envman lock` then writes envman's)")
    di = ignore_file(root, dockerfile)
    try:
        rules = parse_dockerignore(read_regular(di, MAX_SPEC).decode("utf-8", "replace"))
    except FileNotFoundError:
        rules = []
    except OSError as exc:  # a FIFO would hang the engine's client as it reads it: refused here first
        raise UsageError(f"{di.name}: {exc.strerror}", hint="remove it (`envman lock` then writes envman's)") from None
    prune = not any(r.negate for r in rules)  # with a `!` rule, an ignored folder may still ship a file
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        rel_dir = "" if rel_dir == "." else rel_dir.replace(os.sep, "/")
        if prune:
            dirnames[:] = [d for d in dirnames if not is_ignored(f"{rel_dir}/{d}".lstrip("/"), rules)]
        dirnames.sort()
        for f in sorted(filenames):
            rel = f"{rel_dir}/{f}".lstrip("/")
            if is_ignored(rel, rules):
                continue
            try:
                yield rel, os.lstat(os.path.join(dirpath, f)).st_size
            except OSError:
                continue


def measure_context(root: Path, top: int = 5, dockerfile: str = "Dockerfile") -> ContextSize:
    """Bytes the engine would receive, respecting the ignore file, summed per top-level entry."""
    per_top: dict[str, int] = {}
    for rel, size in context_files(root, dockerfile):
        key = rel.split("/")[0] + ("/" if "/" in rel else "")
        per_top[key] = per_top.get(key, 0) + size
    biggest = sorted(per_top.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    return ContextSize(sum(per_top.values()), tuple(biggest))


def context_secrets(root: Path, dockerfile: str = "Dockerfile") -> list[str]:
    """Files that hold credentials and that the ignore file does not keep out of the build context, sorted:
    by name (envman.redact.CREDENTIAL_FILES), or by what the first bytes of a small file look like (a private
    key, a service-account key, a netrc entry), whatever it is called."""
    from envman.diskcache import read_small
    from envman.redact import CONTENT_BYTES, holds_credentials, is_credential_file

    # a small file's head, read as a cache is: a regular file only (never a FIFO), no link followed
    return sorted(rel for rel, size in context_files(root, dockerfile) if is_credential_file(rel) or (
        0 < size <= 4 * CONTENT_BYTES and (head := read_small(root / rel, 4 * CONTENT_BYTES)) is not None
        and holds_credentials(head[:CONTENT_BYTES])))


def context_warning(root: Path, limit: int = WARN_BYTES, dockerfile: str = "Dockerfile") -> str | None:
    size = measure_context(root, dockerfile=dockerfile)
    if size.total <= limit:
        return None
    names = ", ".join(f"{p} ({_human(n)})" for p, n in size.biggest)
    return (f"the build context is {_human(size.total)} after .dockerignore (over {_human(limit)}): biggest {names}; "
            "add them to .dockerignore and mount data and weights at run time")


def _human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n} B"
        n /= 1024
    return f"{n:.1f} GB"
