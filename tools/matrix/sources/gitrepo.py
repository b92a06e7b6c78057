"""A git repository as a source of files at named revisions: a local clone (``git`` on a git dir) or the
repository on GitHub (``git ls-remote`` for the refs, raw.githubusercontent.com for one file at one commit).

Both give the same two answers, so a reader is written once and runs offline on a clone as well as live:
``refs(kind)`` → {tag or branch name: commit} and ``show(commit, path)`` → that file's text.
"""

from __future__ import annotations

import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

from envman.errors import ToolError

TIMEOUT_S = 60.0
MAX_FILE = 4 * 1024 * 1024  # a README or a build script; refuse anything much larger

Fetch = Callable[[str], bytes]


class NotFound(ToolError):
    """HTTP 404: the source has no such file (a CUDA update published on PyPI only, say)."""


def http_get(url: str) -> bytes:
    req = urllib.request.Request(url, headers={"User-Agent": "envman-matrix-sync"})
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:  # noqa: S310 - a fixed https source URL
            data = resp.read(MAX_FILE + 1)
    except urllib.error.HTTPError as exc:
        kind = NotFound if exc.code == 404 else ToolError
        raise kind(f"{url}: HTTP {exc.code} {exc.reason}", hint="is the source still at that address?") from None
    except (urllib.error.URLError, OSError) as exc:
        raise ToolError(f"{url}: cannot reach it ({getattr(exc, 'reason', exc)})",
                        hint="matrix sync without --live reads the snapshot in matrices/sources/") from None
    if len(data) > MAX_FILE:
        raise ToolError(f"{url}: more than {MAX_FILE} bytes: not the file envman reads")
    return data


def _git(args: list[str], what: str) -> str:
    try:
        out = subprocess.run(["git", *args], capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except FileNotFoundError:
        raise ToolError("git is not installed", hint="install git to read the source repository") from None
    except subprocess.TimeoutExpired:
        raise ToolError(f"git {args[0]} timed out after {TIMEOUT_S:.0f} s ({what})") from None
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise ToolError(f"git {args[0]} failed for {what}: {tail}")
    return out.stdout


def parse_ls_remote(text: str, kind: str) -> dict[str, str]:
    """{name: commit} from ``git ls-remote --tags|--heads`` output; an annotated tag's ``^{}`` line (the
    commit it points at) wins over the tag object's own line."""
    prefix = f"refs/{kind}/"
    out: dict[str, str] = {}
    peeled: dict[str, str] = {}
    for line in text.splitlines():
        sha, _, ref = line.partition("\t")
        if not ref.startswith(prefix):
            continue
        name = ref[len(prefix):]
        if name.endswith("^{}"):
            peeled[name[:-3]] = sha
        else:
            out[name] = sha
    out.update(peeled)
    return out


@dataclass(frozen=True)
class GitHubRepo:
    """owner/name on GitHub, read live."""

    slug: str  # "NVIDIA/open-gpu-kernel-modules"
    fetch: Fetch = http_get
    remote: str | None = None  # what ls-remote asks (default the https URL; a local path in tests)

    @property
    def url(self) -> str:
        return f"https://github.com/{self.slug}"

    def refs(self, kind: str) -> dict[str, str]:
        return parse_ls_remote(_git(["ls-remote", f"--{kind}", self.remote or self.url], self.url), kind)

    def show(self, commit: str, path: str) -> str:
        return self.fetch(f"https://raw.githubusercontent.com/{self.slug}/{commit}/{path}").decode("utf-8")


@dataclass(frozen=True)
class LocalRepo:
    """A clone (or bare git dir) of a GitHub repository, cited by its GitHub URL."""

    slug: str
    git_dir: str

    @property
    def url(self) -> str:
        return f"https://github.com/{self.slug}"

    def refs(self, kind: str) -> dict[str, str]:
        fmt = "%(refname:strip=2)\t%(objectname)\t%(*objectname)"
        out = {}
        for line in _git(["--git-dir", self.git_dir, "for-each-ref", f"--format={fmt}", f"refs/{kind}"], self.git_dir).splitlines():
            name, sha, peeled = (line.split("\t") + ["", ""])[:3]
            out[name] = peeled or sha
        return out

    def show(self, commit: str, path: str) -> str:
        return _git(["--git-dir", self.git_dir, "show", f"{commit}:{path}"], f"{self.slug} {commit}:{path}")
