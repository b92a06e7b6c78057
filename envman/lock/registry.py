"""Ask a registry (OCI distribution API) which digest a tag points to: ``envman lock`` pins the base image
with it. No Docker engine needed. Any failure — no network, no such tag, a registry that wants
credentials — is an answer of None, and the lock then keeps the tag and says the digest is unpinned.
A registry that could not be reached at all is noted in envman's cache (``unreachable_since``).

urllib is imported where a registry is asked: a lock that asks none does not pay for it (~8 MB, ~20 ms).
"""

from __future__ import annotations

import json
import os
import re
import time

from envman.hostenv import cache_root
from envman.redact import redact

MANIFEST_TYPES = ", ".join((
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
))
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}\Z")


def split_ref(ref: str) -> tuple[str, str, str]:
    """``python:3.11-slim`` → (registry-1.docker.io, library/python, 3.11-slim)."""
    name, _, digest = ref.partition("@")
    if digest:
        return "", "", digest
    first, _, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        host, path = first, rest
    else:
        host, path = "registry-1.docker.io", name
        if "/" not in path:
            path = "library/" + path
    repo, _, tag = path.rpartition(":") if ":" in path.rsplit("/", 1)[-1] else (path, "", "latest")
    return host, repo, tag or "latest"


def _scheme(host: str) -> str:
    # a registry on loopback speaks plain HTTP (as Docker itself assumes for 127.0.0.0/8)
    h = host.split(":")[0]
    return "http" if h in ("localhost", "::1") or h.startswith("127.") else "https"


def resolve_digest(ref: str, timeout: float = 3.0) -> str | None:
    host, repo, tag = split_ref(ref)
    if not host:
        return tag if _DIGEST.match(tag) else None
    import urllib.error

    url = f"{_scheme(host)}://{host}/v2/{repo}/manifests/{tag}"
    try:
        digest = _head(url, timeout, None)
    except urllib.error.HTTPError as exc:
        if exc.code != 401:
            return _reached(host, None)
        token = _token(exc.headers.get("WWW-Authenticate", ""), timeout)
        if token is None:
            return _reached(host, None)
        try:
            return _head(url, timeout, token)
        except (urllib.error.URLError, OSError, ValueError):
            return None
    except (urllib.error.URLError, OSError) as exc:  # no answer at all: DNS, refused, timed out, TLS
        _note_unreachable(host, exc)
        return None
    except ValueError:
        return None
    return _reached(host, digest)


def _marker(host: str) -> str:
    return os.path.join(cache_root(), "registry-unreachable", re.sub(r"[^A-Za-z0-9._-]", "_", host))


def unreachable_since(ref: str, within: float) -> float | None:
    """Seconds since ``ref``'s registry last could not be reached, when that was less than ``within`` ago."""
    host = split_ref(ref)[0]
    if not host:
        return None
    try:
        age = time.time() - os.stat(_marker(host)).st_mtime
    except OSError:
        return None
    return age if 0 <= age < within else None


def _note_unreachable(host: str, exc: Exception) -> None:
    path = _marker(host)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(redact(f"{type(exc).__name__}: {exc}") + "\n")  # what failed, for whoever looks
    except OSError:
        pass  # a cache: best effort


def _reached(host: str, digest: str | None) -> str | None:
    """The registry answered (a digest, or an HTTP error): it is reachable again."""
    try:
        os.unlink(_marker(host))
    except OSError:
        pass
    return digest


def _head(url: str, timeout: float, token: str | None) -> str | None:
    import urllib.request

    req = urllib.request.Request(url, method="HEAD", headers={"Accept": MANIFEST_TYPES})
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - http(s) only, built above
        digest = resp.headers.get("Docker-Content-Digest", "")
    return digest if _DIGEST.match(digest) else None


def _token(challenge: str, timeout: float) -> str | None:
    """Anonymous pull token for a Bearer challenge (Docker Hub, GHCR, NGC public images)."""
    if not challenge.lower().startswith("bearer "):
        return None
    params = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
    realm = params.pop("realm", None)
    if not realm or not realm.startswith("https://"):
        return None
    import urllib.error
    import urllib.parse
    import urllib.request

    url = realm + "?" + urllib.parse.urlencode(params)
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310
            data = json.loads(resp.read().decode())
    except (urllib.error.URLError, OSError, ValueError):
        return None
    return data.get("token") or data.get("access_token")
