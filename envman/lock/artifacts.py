"""Which locked packages have no wheel for the target platform, read from uv's pylock.toml.

uv writes pylock.toml for ``--python-platform``/``--python-version``: each package lists its ``sdist`` and
only the ``wheels`` that fit that platform. A package with an sdist and no wheel there cannot be installed
with ``--only-binary=:all:``: the Dockerfile builds it in a builder stage instead (image/stages.py).
"""

from __future__ import annotations

from envman.errors import LockError
from envman.lock.pylock import parse_pylock


def source_only(pylock_text: str) -> list[tuple[str, str]]:
    """(name, version) of the packages with a source distribution and no wheel for the target: an sdist on
    the index, or a direct archive by URL (``name @ https://…/x.tar.gz``). A VCS checkout or a local folder
    is not a hash-checked file to build from."""
    return sorted((p.name, p.version) for p in parse_pylock(pylock_text)
                  if not any(f.is_wheel for f in p.files) and any(f.is_source for f in p.files))


def by_url(pylock_text: str, names: set[str]) -> set[str]:
    """Those of ``names`` that are locked by URL (``name @ url``): pip installs such a requirement from its URL
    even when a wheel of it is installed, so the image's last install must not list them."""
    return {p.name for p in parse_pylock(pylock_text) if p.name in names and p.direct}


def refuse_unbuildable(pylock_text: str, python: str) -> None:
    """A locked package with neither a wheel for the target nor an sdist (wheels for other platforms only)
    cannot be installed at all: say so at lock time, not in the middle of a build."""
    bad = [f"{p.name}=={p.version}" for p in parse_pylock(pylock_text) if not p.files and p.direct is None]
    if bad:
        raise LockError(f"{', '.join(bad)}: no wheel for Linux x86_64 / Python {python} and no sdist on the index",
                        hint="pin a version that ships a manylinux wheel (or an sdist), or drop the requirement")


_VCS_SCHEMES = ("git+", "hg+", "svn+", "bzr+")


def refuse_vcs(pylock_text: str, origins: dict[str, str]) -> None:
    """A VCS requirement locks to a commit, but a checkout has no file hash: the image's hash-checked install
    (`pip install --require-hashes`) refuses it. Say so at lock time, naming the line and what to write
    instead, not in the middle of `envman build`. ``origins``: a package name or a requirement's URL → the
    line that asked for it (a URL line without #egg= names no package)."""
    vcs = [p for p in parse_pylock(pylock_text) if p.direct and p.direct.startswith(_VCS_SCHEMES) and not p.files]
    if not vcs:
        return
    p = vcs[0]
    bare = (p.direct or "").rsplit("@", 1)[0]
    origin = origins.get(p.name) or next((o for url, o in origins.items() if _strip_ref(url) == bare), None)
    where = f"{origin}: " if origin else ""
    others = f" (and {', '.join(q.name for q in vcs[1:])})" if len(vcs) > 1 else ""
    archive = archive_of(p.direct or "")
    raise LockError(
        f"{where}{p.name} @ {p.direct}{others} is a VCS requirement: the image installs only hash-checked files, "
        "and a checkout has no file hash, so `envman build` would fail on it",
        hint=(f"pin an archive of that commit, which uv hashes: {p.name} @ {archive}; " if archive else
              "pin an archive (.tar.gz, .zip) of that commit by URL, which uv hashes; ")
        + f"or a release from an index ({p.name}==VERSION)")


def _strip_ref(url: str) -> str:
    """``git+https://host/o/r.git@v1#egg=r`` → ``git+https://host/o/r.git`` (what uv's locked URL starts with)."""
    url = url.split("#", 1)[0]
    head, sep, tail = url.rpartition("@")
    return head if sep and "/" not in tail else url


def archive_of(direct: str) -> str | None:
    """``git+https://github.com/o/r.git@<commit>`` → GitHub's archive of that commit (GitLab's likewise);
    None for other hosts, whose archive URLs envman does not know."""
    import re

    m = re.match(r"^git\+https://(github\.com|gitlab\.com)/([^/@#]+/[^/@#]+?)(?:\.git)?@([0-9a-f]{7,40})\Z", direct)
    if not m:
        return None
    host, repo, sha = m.groups()
    if host == "github.com":
        return f"https://github.com/{repo}/archive/{sha}.tar.gz"
    return f"https://gitlab.com/{repo}/-/archive/{sha}/{repo.rsplit('/', 1)[1]}-{sha}.tar.gz"


def refuse_framework_build_without_framework(names: list[str], framework: str | None) -> None:
    """A source-only package that imports the framework while it builds needs the framework in the stack."""
    if names and framework is None:
        raise LockError(f"{', '.join(names)} imports the framework (torch) while it builds from source, "
                        "and this stack has no framework",
                        hint="add framework: torch to envman.yaml, or pin a version of it that ships a wheel")


def refuse_in_framework_closure(source: list[tuple[str, str]], closure: set[str], framework: str | None) -> None:
    """The framework's own layer installs wheels only and is the builder's first step: a source-only
    package inside it cannot be built there."""
    bad = [f"{n}=={v}" for n, v in source if n in closure]
    if bad:
        raise LockError(f"{', '.join(bad)} (needed by {framework or 'the framework'}) has no wheel for the target platform",
                        hint="pin a version that ships a manylinux x86_64 wheel, or choose another framework version")
