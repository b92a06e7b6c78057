"""How a generated pipeline installs envman: from where the user's own envman really comes.

No envman is published on the public index, and the name is unclaimed there: ``pip install envman==V`` fails
today, and would run whatever someone registers under that name tomorrow, beside the registry token. So the
pipeline installs the envman the user runs, pinned, from its real source:

1. an explicit source: ``--envman-spec``/``--envman-index``, else envman.yaml's ``ci: {envman: …, index_url: …}``
   (a wheel in the repository, a requirement with a pinned URL, or a version from a named index);
2. else how this envman was installed (PEP 610's ``direct_url.json`` of the installed distribution): a git URL at
   a commit, a wheel inside the repository (checked by its sha256), a wheel at an https URL with its hash, or a
   folder inside the repository;
3. else nothing: an editable checkout elsewhere, a local wheel outside the repository, an install from an index
   nobody named is refused, naming the ``ci:`` key and the option that say where CI gets envman.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from envman.errors import SpecError, UsageError
from envman.redact import redact, redact_userinfo

SETTINGS = ("envman", "index_url")  # envman.yaml's ci: keys
_PIP_SPEC = re.compile(r"^[A-Za-z0-9 ._\-\[\],<>=!~*+:/@#%&?]+\Z")  # no quotes, $, {}, `, ; or newlines
_WHEEL_PATH = re.compile(r"^(?:[A-Za-z0-9_.+-]+/)*envman-[A-Za-z0-9_.+-]+\.whl\Z")
_DIR_PATH = re.compile(r"^[A-Za-z0-9_.+-]+(?:/[A-Za-z0-9_.+-]+)*\Z")
_INDEX = re.compile(r"^https://[A-Za-z0-9.-]+(?::[0-9]{1,5})?(?:/[A-Za-z0-9._~%+-]+)*/?\Z")
_GIT_URL = re.compile(r"^git\+(?:https|ssh)://[A-Za-z0-9.@:_-]+(?:/[A-Za-z0-9._~%+-]+)+@[0-9a-f]{40}\Z")
_HTTPS_ARCHIVE = re.compile(r"^https://[A-Za-z0-9.-]+(?::[0-9]{1,5})?(?:/[A-Za-z0-9._~%+-]+)+#sha256=[0-9a-f]{64}\Z")
GIT_APT = "apt-get update -qq && apt-get install -y -qq --no-install-recommends git"
_WHERE_HINT = ("say where CI gets envman: `ci: {envman: vendor/envman-V-py3-none-any.whl}` (a wheel committed to the "
               "repository), `ci: {envman: 'envman @ git+https://HOST/envman@COMMIT'}` or `ci: {index_url: "
               "https://INDEX/simple}` in envman.yaml (or --envman-spec / --envman-index)")


@dataclass(frozen=True)
class EnvmanInstall:
    """The shell lines a pipeline's job runs to install envman (each quoted for the shell), and what they are."""

    lines: tuple[str, ...]
    source: str  # for the report: "the wheel vendor/envman-0.2.0-py3-none-any.whl in the repository (sha256 ab12…)"
    needs_git: bool = False  # pip clones a git URL: an image without git must install it first


@dataclass(frozen=True)
class Origin:
    """This envman's installed distribution: its version and PEP 610 ``direct_url.json`` (None: from an index)."""

    version: str
    direct_url: dict[str, Any] | None


def installed_origin() -> Origin | None:
    """How the running envman was installed, read through importlib.metadata; None when it is not installed."""
    from importlib import metadata

    # an installer's record (INSTALLER, PEP 376) over a build's leftovers (a checkout's envman.egg-info on sys.path)
    found = sorted(metadata.distributions(name="envman"), key=lambda d: d.read_text("INSTALLER") is None)
    if not found:
        return None
    dist = found[0]
    text = dist.read_text("direct_url.json")
    try:
        data = json.loads(text) if text else None
    except ValueError:
        data = None
    return Origin(dist.version, data if isinstance(data, dict) else None)


def read_settings(ci: Any, source: str = "envman.yaml") -> dict[str, str]:
    """envman.yaml's ``ci:`` mapping, checked: only ``envman`` and ``index_url``, each a one-line string."""
    if ci is None:
        return {}
    if not isinstance(ci, dict):
        raise SpecError(f"{source}: ci: expected a mapping", hint="write it like ci: {envman: 'envman @ git+https://HOST/envman@COMMIT'}")
    out = {}
    for key, value in ci.items():
        if key not in SETTINGS:
            raise SpecError(f"{source}: ci.{key}: unknown key", hint=f"keys: {', '.join(SETTINGS)}")
        if not isinstance(value, str) or not value.strip():
            raise SpecError(f"{source}: ci.{key}: expected a string", hint=_WHERE_HINT)
        out[key] = value
    return out


def envman_install(root: Path, spec: str | None, index: str | None, origin: Origin | None,
                   names: tuple[str, str] = ("--envman-spec", "--envman-index")) -> EnvmanInstall:
    """The install lines for ``spec`` (a requirement on envman or a wheel in ``root``) from ``index``, else for the
    installed ``origin``. ``names``: where spec and index came from, for messages."""
    index_url = _index(index, names[1]) if index is not None else None
    if spec is not None:
        return _explicit(root, spec, index_url, names[0])
    if origin is None:
        raise UsageError("envman is not installed as a package here, so there is no install to repeat in CI", hint=_WHERE_HINT)
    if index_url is not None:
        return _from_index(f"envman=={origin.version}", index_url)
    return _detected(root, origin)


def _from_index(req: str, index_url: str) -> EnvmanInstall:
    # --index-url, never --extra-index-url: with two indexes pip takes the higher version from either, and the
    # public index's unclaimed name could win
    return EnvmanInstall((f"python -m pip install --index-url {shlex.quote(index_url)} {shlex.quote(req)}",),
                         f"{req} from {index_url}")


def _explicit(root: Path, spec: str, index_url: str | None, name: str) -> EnvmanInstall:
    text = spec.strip()
    if text.endswith(".whl") and "://" not in text and "@" not in text:
        return _wheel(root, text, name, expected=None)
    req = _requirement(text, name)
    if req.url is None:
        if index_url is None:
            raise UsageError(f"{name}: {text!r} names no source, and no envman is published on the public index "
                             "(pypi.org): pip would fail there, or install whatever someone registers under the name",
                             hint=_WHERE_HINT)
        return _from_index(text, index_url)
    if index_url is not None:
        raise UsageError(f"{name}: {text!r} is a URL: an index for it means nothing", hint="give one of the two")
    if req.url.startswith("git+"):
        if not _GIT_URL.match(req.url):
            raise UsageError(f"{name}: {text!r} does not pin a commit",
                             hint="pin the 40-hex commit: envman @ git+https://HOST/PATH@COMMIT")
        return EnvmanInstall((f"python -m pip install {shlex.quote(text)}",), f"{req.url[4:]}", needs_git=True)
    if not _HTTPS_ARCHIVE.match(req.url):
        raise UsageError(f"{name}: {text!r} is not an https URL pinned by its sha256",
                         hint="write it like envman @ https://HOST/envman-V-py3-none-any.whl#sha256=HEX")
    return EnvmanInstall((f"python -m pip install {shlex.quote(text)}",), req.url)


def _requirement(text: str, name: str):
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        req = Requirement(text) if _PIP_SPEC.match(text) else None
    except InvalidRequirement:
        req = None
    if req is None or req.name.lower() != "envman" or req.marker is not None:
        raise UsageError(f"{name}: {redact(text)!r} is not a requirement on envman",
                         hint="write it like envman @ git+https://HOST/envman@COMMIT, a wheel in the repository "
                              "(vendor/envman-V-py3-none-any.whl) or envman==V with an index")
    _no_credentials(text, name)
    return req


def _no_credentials(text: str, name: str) -> None:
    if redact_userinfo(text) != text:  # a CI file is committed: a token in it is a leaked token
        raise UsageError(f"{name}: {redact(text)!r} carries credentials in its URL",
                         hint="give the CI job the token as a secret (PIP_INDEX_URL, netrc), not in the generated file")


def _index(url: str, name: str) -> str:
    _no_credentials(url, name)
    if not _INDEX.match(url):
        raise UsageError(f"{name}: {url!r} is not an https index URL", hint="write it like https://pypi.example.com/simple")
    return url


def _wheel(root: Path, rel: str, name: str, expected: str | None) -> EnvmanInstall:
    """A wheel committed to the repository: the job checks its sha256 before pip installs it."""
    if not _WHEEL_PATH.match(rel) or ".." in rel.split("/"):
        raise UsageError(f"{name}: {rel!r} is not a path to an envman wheel inside the repository",
                         hint="a relative path like vendor/envman-0.2.0-py3-none-any.whl (letters, digits, . _ + -)")
    path = root / rel
    if not (_inside(path, root) and path.is_file()):
        raise UsageError(f"{name}: {rel} is not a file inside {root}", hint="commit the wheel into the repository, then re-run")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if expected is not None and digest != expected:
        raise UsageError(f"{rel}: its sha256 is not that of the wheel this envman was installed from",
                         hint="put the wheel you installed there (or reinstall from it), then re-run")
    return EnvmanInstall(
        (f"echo {shlex.quote(f'{digest}  {rel}')} | sha256sum --check --strict -", f"python -m pip install {shlex.quote('./' + rel)}"),
        f"the wheel {rel} in the repository (sha256 {digest[:12]}…)")


def _detected(root: Path, origin: Origin) -> EnvmanInstall:
    du = origin.direct_url
    if du is None:
        raise UsageError(f"this envman {origin.version} was installed from a package index envman cannot see, and none "
                         "is published on the public one (pypi.org)", hint=_WHERE_HINT)
    raw = du.get("url")
    url = raw if isinstance(raw, str) else ""
    vcs, archive = du.get("vcs_info"), du.get("archive_info")
    if isinstance(vcs, dict) and vcs.get("vcs") == "git" and isinstance(vcs.get("commit_id"), str):
        spec = f"envman @ git+{url}@{vcs['commit_id']}"
        if url.startswith(("https://", "ssh://")) and redact_userinfo(url) == url and _GIT_URL.match(f"git+{url}@{vcs['commit_id']}"):
            return _explicit(root, spec, None, "this envman's git source")
        raise UsageError(f"this envman was installed from the git repository {redact(url)}, which CI cannot reach",
                         hint=_WHERE_HINT)
    local = _local_path(url)
    if isinstance(archive, dict):
        hashes = archive.get("hashes") if isinstance(archive.get("hashes"), dict) else {}
        sha = hashes.get("sha256") if isinstance(hashes, dict) else None
        if local is not None and _inside(local, root) and local.name.endswith(".whl"):
            return _wheel(root, local.resolve().relative_to(root.resolve()).as_posix(), "this envman's wheel", sha)
        if url.startswith("https://") and isinstance(sha, str):
            return _explicit(root, f"envman @ {url}#sha256={sha}", None, "this envman's source")
        raise UsageError(f"this envman was installed from {redact(url)}, which CI cannot reach (not a wheel in the "
                         "repository)", hint=_WHERE_HINT)
    if local is not None and _inside(local, root):
        rel = local.resolve().relative_to(root.resolve()).as_posix()
        if rel == "." or _DIR_PATH.match(rel):
            target = "." if rel == "." else "./" + rel
            return EnvmanInstall((f"python -m pip install {shlex.quote(target)}",), f"the folder {target} in the repository")
    editable = " (editable)" if isinstance(du.get("dir_info"), dict) and du["dir_info"].get("editable") else ""
    raise UsageError(f"this envman runs from the local folder {redact(url)}{editable}, which CI cannot reach",
                     hint=_WHERE_HINT)


def _local_path(url: str) -> Path | None:
    parts = urlsplit(url)
    return Path(unquote(parts.path)) if parts.scheme == "file" and parts.netloc in ("", "localhost") else None


def _inside(path: Path, root: Path) -> bool:
    try:
        return path.resolve().is_relative_to(root.resolve())
    except (OSError, RuntimeError):
        return False
