"""Private package indexes: named in the lock, their URL supplied at build time — never a literal in a file.

A token is not always in a URL's userinfo (``https://bob:TOKEN@host/simple``, which envman/redact.py cuts):
Gemfury and Cloudsmith put it in the path (``https://pypi.fury.io/TOKEN/me/``,
``https://dl.cloudsmith.io/TOKEN/org/repo/python/simple/``), where nothing tells it from a folder name. So every
index but PyPI's and the framework index the matrix names is *private*: uv gets its URL through its
environment (never its command line), and what envman writes names it by a variable, ``${ENVMAN_INDEX_<HOST>}``,
the form pip expands in a requirements file (pip's "environment variables" in requirements files):

    requirements.lock.txt   --extra-index-url ${ENVMAN_INDEX_PYPI_FURY_IO}/
    pylock.toml             url = "${ENVMAN_INDEX_PYPI_FURY_IO}/-/ver_1/six-1.17.0-py2.py3-none-any.whl"

``envman build`` finds each named index's URL where the lock found it (the environment uv read it from:
UV_INDEX_URL, UV_DEFAULT_INDEX, UV_EXTRA_INDEX_URL, UV_INDEX; envman.yaml's index_urls; the index options of
the project's requirement files), or in a variable of that name, and passes them to the build as one BuildKit
secret (``envman_indexes``), as the CA bundle is: no layer, no history, no build arg holds them.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from envman.errors import ToolError
from envman.redact import redact_userinfo as redact  # what is written and compared: the path stays

PYPI = "https://pypi.org/simple"
PREFIX = "ENVMAN_INDEX_"
SECRET = "envman_indexes"  # the BuildKit secret id: a file of `export NAME=URL` lines, sourced by each pip step
PLACEHOLDER = re.compile(r"\$\{(" + PREFIX + r"[A-Z0-9_]+)\}")
_TOKENISH = 12  # a path segment this long of a private index never appears in a written file (safety net)


def _norm(url: str) -> str:
    return redact(url).rstrip("/")


@dataclass(frozen=True)
class PrivateIndex:
    name: str  # ENVMAN_INDEX_PYPI_FURY_IO
    url: str  # as given, credentials and all: only ever in uv's environment or the build secret

    @property
    def root(self) -> str:
        """What the variable holds: the URL without a trailing ``/`` or ``/simple`` (its files lie below it)."""
        u = self.url.rstrip("/")
        return u[: -len("/simple")] if u.endswith("/simple") else u

    @property
    def shown(self) -> str:
        """The root as uv's answer carries it (envman cuts a URL's userinfo before it reads anything)."""
        return redact(self.root)

    @property
    def host(self) -> str:
        return urlsplit(self.shown).hostname or "?"


def is_public(url: str, public: Iterable[str] = ()) -> bool:
    return _norm(url) in {_norm(PYPI), *(_norm(u) for u in public if u)}


def private_indexes(urls: Iterable[str | None], public: Iterable[str] = ()) -> list[PrivateIndex]:
    """The private indexes among ``urls``, in order, each named by its host (``_2``… for a second one there)."""
    public = tuple(public)
    out: list[PrivateIndex] = []
    seen: set[str] = set()
    for url in urls:
        if not url or is_public(url, public) or _norm(url) in seen or "://" not in url:
            continue
        seen.add(_norm(url))
        host = urlsplit(redact(url)).netloc or "index"  # with its port: two indexes of one host, two names
        base = PREFIX + (re.sub(r"[^A-Z0-9]+", "_", host.upper()).strip("_") or "INDEX")
        name, n = base, 1
        while any(p.name == name for p in out):
            n += 1
            name = f"{base}_{n}"
        out.append(PrivateIndex(name, url))
    return out


def environment_indexes(env: Mapping[str, str]) -> list[str]:
    """The index URLs uv reads from its environment (uv's documented variables), default index first."""
    urls = [env.get("UV_DEFAULT_INDEX") or env.get("UV_INDEX_URL") or ""]
    urls += env.get("UV_EXTRA_INDEX_URL", "").split()
    for item in env.get("UV_INDEX", "").split():  # [name=]url
        name, eq, url = item.partition("=")
        urls.append(url if eq and "://" not in name else item)
    return [u for u in urls if u]


def lock_index_urls(framework_index: str | None, spec_urls: Iterable[str], file_urls: Iterable[str]) -> list[str]:
    """The indexes a lock gives uv, in order: the framework's, envman.yaml's, the requirement files' options.
    One URL once, in its form with credentials where one source has them (an envman.yaml written by an older
    init kept only the redacted form of a requirement file's index)."""
    out: list[str] = []
    for url in [*spec_urls, *file_urls]:
        same = next((k for k, u in enumerate(out) if _norm(u) == _norm(url)), None)
        if same is None:
            out.append(url)
        elif redact(out[same]) == out[same] and redact(url) != url:
            out[same] = url
    fw = [framework_index] if framework_index else []
    return fw + [u for u in out if not fw or _norm(u) != _norm(framework_index or "")]


def project_indexes(framework_index: str | None, spec_urls: Iterable[str], file_urls: Iterable[str],
                    env: Mapping[str, str]) -> list[PrivateIndex]:
    """The private indexes of a project's lock, named as lock/uv.py names them (same sources, same order); a
    variable of an index's name in ``env`` gives its URL directly."""
    urls = lock_index_urls(framework_index, spec_urls, file_urls)
    default = env.get("UV_DEFAULT_INDEX") or env.get("UV_INDEX_URL")
    found = private_indexes([default, *[u for u in urls if u != framework_index], *environment_indexes(env)],
                            public=[framework_index or ""])
    return [PrivateIndex(i.name, env[i.name]) if env.get(i.name) else i for i in found]


def name_indexes(text: str, indexes: Iterable[PrivateIndex]) -> str:
    """``text`` (uv's answer, an index line) with each private index's root replaced by its variable."""
    for idx in sorted(indexes, key=lambda i: -len(i.shown)):
        text = re.sub(re.escape(idx.shown) + r"(?=[/\"'\s]|$)", "${" + idx.name + "}", text)
    return text


def expand_indexes(text: str, indexes: Iterable[PrivateIndex], *, credentials: bool = False) -> str:
    """The variables of ``text`` replaced by their index's root (without its userinfo, unless ``credentials``):
    a seed for uv, a URL to fetch."""
    known = {i.name: (i.root if credentials else i.shown) for i in indexes}
    return PLACEHOLDER.sub(lambda m: known.get(m.group(1), m.group(0)), text)


def named_in(text: str) -> list[str]:
    """The private indexes a lock file names (its ``${ENVMAN_INDEX_…}`` variables), sorted."""
    return sorted(set(PLACEHOLDER.findall(text)))


def check_unleaked(files: Mapping[str, str | None], indexes: Iterable[PrivateIndex]) -> None:
    """The last check before a lock is written: no file holds a private index's root, or a long segment of its
    path (a token in a file URL on another host, a CDN's): a ToolError naming the file and the index."""
    for idx in indexes:
        parts = [p for p in urlsplit(idx.shown).path.split("/") if len(p) >= _TOKENISH]
        root = re.compile(re.escape(idx.shown) + r"(?=[/\"'\s]|$)")
        for fname, text in files.items():
            if text and (root.search(text) or any(p in text for p in parts)):
                raise ToolError(f"{fname} would hold part of the private index {idx.host}'s URL",
                                hint=f"it is named {idx.name} in the lock; a file URL outside it (another host?) "
                                     "carries it: serve the files from the index itself, or report it to envman")


def secret_text(indexes: Iterable[PrivateIndex]) -> str:
    """The build secret's text: one ``export NAME='URL'`` line per index, sourced by /bin/sh in each pip step."""
    return "".join(f"export {i.name}={shlex.quote(i.root)}\n" for i in indexes)
