"""Who pulls in whom, for a lock uv wrote as pylock.toml (which holds no dependency edges): read from each
locked wheel's METADATA (PEP 658 ``<wheel url>.metadata``, a few KB) and cached by the wheel's sha256,
which never changes what it names — a re-lock with the same pins asks no server. The framework's image
layer is cut from these edges; ``# via`` comments in requirements.lock.txt come from them too."""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name

from envman.hostenv import ca_bundle, cache_root
from envman.lock.pylock import PylockPackage

if TYPE_CHECKING:
    import ssl

# The network modules (http.client, ssl, urllib, zipfile) are imported where a request is made: a lock whose
# graph is in the cache makes none, and should not pay for their import.

INPUT = "-r requirements.in"


_local = threading.local()


def _fetch(url: str, timeout: float, ctx, headers: dict[str, str] | None = None,
           method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    """One request on this thread's keep-alive connection to the host: ~100 small reads from one file host
    cost one TLS handshake per thread, not one each (through a TLS-intercepting proxy, handshakes are what
    is slow). With a proxy configured in the environment, urllib (which honours it) does the request."""
    import http.client
    import urllib.error
    import urllib.parse
    import urllib.request

    from envman.errors import EnvmanError
    from envman.lock.remote import read_body

    if any(os.environ.get(v) for v in ("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY")):
        req = urllib.request.Request(url, headers=headers or {}, method=method)
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=ctx) as resp:  # noqa: S310
                return resp.status, dict(resp.headers), read_body(resp, url, within=max(4 * timeout, 30.0))
        except urllib.error.HTTPError as exc:
            return exc.code, {}, b""
    u = urllib.parse.urlsplit(url)
    host = u.hostname or ""
    conns = _local.__dict__.setdefault("conns", {})
    key = (u.scheme, u.netloc)
    path = u.path + ("?" + u.query if u.query else "")
    for attempt in (0, 1):
        conn = conns.get(key)
        if conn is None:
            conn = (http.client.HTTPSConnection(host, u.port, timeout=timeout, context=ctx) if u.scheme == "https"
                    else http.client.HTTPConnection(host, u.port, timeout=timeout))
            conns[key] = conn
        try:
            conn.request(method, path, headers=headers or {})
            resp = conn.getresponse()
            body = read_body(resp, url, within=max(4 * timeout, 30.0))  # bounded, and a trickle is cut
            if resp.will_close:
                conn.close()
                conns.pop(key, None)
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, body
        except (http.client.HTTPException, OSError, EnvmanError) as exc:
            conn.close()
            conns.pop(key, None)
            if attempt or isinstance(exc, EnvmanError):
                raise
    raise OSError("unreachable")


_SHA256 = re.compile(r"[0-9a-f]{64}")


def cache_dir() -> Path:
    return Path(cache_root()) / "metadata-v1"


def ssl_context() -> ssl.SSLContext:
    """TLS that trusts the CA bundle pip is told to use (a TLS-intercepting proxy's)."""
    import ssl

    return ssl.create_default_context(cafile=ca_bundle())


REQUIRES_PYTHON = "Requires-Python: "


def requires_dist(pkg: PylockPackage, timeout: float, ctx: ssl.SSLContext | None = None) -> list[str] | None:
    """The wheel's Requires-Dist lines, and its Requires-Python as one more line (``Requires-Python: <3.11``,
    which no requirement parses as), or None when no wheel's metadata can be read (sdist-only, no PEP 658)."""
    wheel = next((f for f in pkg.files if f.kind == "wheel" and f.sha256 and f.url.startswith(("http://", "https://"))), None)
    if wheel is None:
        return None
    from envman.diskcache import read_small
    from envman.errors import EnvmanError

    if not _SHA256.fullmatch(wheel.sha256):  # a name in the cache folder: hex only (a lock is input, never a path)
        return None
    cached = cache_dir() / f"{wheel.sha256}.m2"  # .m2: with Requires-Python (an entry without it is not read)
    kept = read_small(cached, 1 << 20)
    if kept is not None:
        try:
            return [ln for ln in kept.decode("utf-8").splitlines() if ln]
        except UnicodeDecodeError:
            pass  # not what envman wrote: a miss
    try:
        status, _, body = _fetch(wheel.url + ".metadata", timeout, ctx)
    except (OSError, ValueError, EnvmanError):  # unreachable, or an answer too big or too slow: no metadata
        status, body = 0, b""
    if status == 200:
        meta = body.decode("utf-8", "replace")
    else:
        ranged = _metadata_by_range(wheel.url, timeout, ctx)  # no PEP 658 file: read it out of the zip, as uv does
        if ranged is None:
            return None
        meta = ranged
    from email.parser import HeaderParser

    headers = HeaderParser().parsestr(meta)
    reqs = list(headers.get_all("Requires-Dist") or [])
    if headers.get("Requires-Python"):
        reqs.append(REQUIRES_PYTHON + " ".join(str(headers["Requires-Python"]).split())[:200])  # said in a note
    _keep(cached, "".join(r + "\n" for r in reqs))
    return reqs


def _keep(path: Path, text: str) -> None:
    """A cache entry, renamed into place whole; a read-only cache only costs the next lock a fetch."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass


def _metadata_by_range(url: str, timeout: float, ctx) -> str | None:
    """METADATA out of the wheel's zip by HTTP range requests (the one range reader, lock/remote.py), over
    this thread's keep-alive connections; None when the host cannot serve ranges or the zip has none."""
    import urllib.error
    import zipfile

    from envman.errors import EnvmanError
    from envman.lock.remote import RangeReader, read_member

    def get(u: str, headers: dict[str, str]) -> tuple[bytes, dict[str, str]]:
        status, got, body = _fetch(u, timeout, ctx, headers)
        if status != 206:
            raise OSError(f"HTTP {status} to a range request")
        return body, got

    try:
        with zipfile.ZipFile(RangeReader(url, None, get)) as zf:
            name = next(n for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA"))
            return read_member(zf, name).decode("utf-8", "replace")
    except (urllib.error.URLError, OSError, ValueError, StopIteration, zipfile.BadZipFile, EnvmanError):
        return None


Graph = tuple[dict[str, list[str]], list[str], list[tuple[str, str, str]]]


def dependency_parents(pkgs: list[PylockPackage], inputs: list[str], python: str, platform: str,
                       timeout: float = 30.0) -> Graph:
    """{package: sorted parents (``-r requirements.in`` for an input line)}, the packages whose metadata
    could not be read (their own dependencies are then unknown), and the (name, version, Requires-Python) of
    each locked package whose Requires-Python excludes the target's Python — uv ignores upper bounds there
    (``<3.11``), pip does not. A re-lock that uv answers with the same files reads it all from one cache entry."""
    import hashlib
    import json

    key = hashlib.sha256(json.dumps([sorted((p.name, p.version, sorted(f.sha256 for f in p.files)) for p in pkgs),
                                     sorted(inputs), python, platform]).encode()).hexdigest()
    from envman.diskcache import read_small

    entry = cache_dir() / "graphs" / f"{key}.json"
    kept = _graph(read_small(entry))
    if kept is not None:
        return kept
    parents, unknown, excluded = _dependency_parents(pkgs, inputs, python, platform, timeout)
    if not unknown:  # an incomplete graph is asked again next time
        _keep(entry, json.dumps({"parents": parents, "unknown": unknown, "excluded": excluded}))
    return parents, unknown, excluded


def _graph(raw: bytes | None) -> Graph | None:
    """A cached graph as envman wrote it ({"parents": {name: [names]}, "unknown": [names], "excluded":
    [[name, version, requires-python]]}), or None (a miss: an entry without "excluded" too)."""
    import json

    try:
        data = json.loads(raw) if raw is not None else None
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    parents, unknown = data.get("parents"), data.get("unknown")
    if not isinstance(parents, dict) or not isinstance(unknown, list) or not all(isinstance(u, str) for u in unknown):
        return None
    if not all(isinstance(v, list) and all(isinstance(x, str) for x in v) for v in parents.values()):
        return None
    excluded = data.get("excluded")
    if not isinstance(excluded, list) or not all(isinstance(e, list) and len(e) == 3 and all(isinstance(x, str) for x in e)
                                                 for e in excluded):
        return None
    return parents, unknown, [(e[0], e[1], e[2]) for e in excluded]


def _dependency_parents(pkgs: list[PylockPackage], inputs: list[str], python: str, platform: str,
                        timeout: float) -> Graph:
    from concurrent.futures import ThreadPoolExecutor

    from envman.model import target_environment

    locked = {p.name: p for p in pkgs}
    ctx = ssl_context()
    with ThreadPoolExecutor(max_workers=16) as pool:
        meta = dict(zip(locked, pool.map(lambda p: requires_dist(p, timeout, ctx), locked.values())))
    env = target_environment(python, platform)
    parents: dict[str, set[str]] = {n: set() for n in locked}
    extras: dict[str, set[str]] = {n: set() for n in locked}
    todo: list[str] = []
    for line in inputs:
        try:
            r = Requirement(line)
        except InvalidRequirement:
            continue
        n = str(canonicalize_name(r.name))
        if n in locked and (r.marker is None or r.marker.evaluate(env)):
            parents[n].add(INPUT)
            extras[n] |= set(r.extras)
            todo.append(n)
    done: dict[str, frozenset[str]] = {}
    while todo:
        n = todo.pop()
        active = frozenset(extras[n])
        if done.get(n) == active:
            continue
        done[n] = active
        for line in meta.get(n) or []:
            try:
                r = Requirement(line)
            except InvalidRequirement:
                continue
            child = canonicalize_name(r.name)
            if child not in locked or child == n:
                continue
            if r.marker is not None and not any(r.marker.evaluate({**env, "extra": e}) for e in ("", *active)):
                continue
            parents[child].add(n)
            if not set(r.extras) <= extras[child] or child not in done:
                extras[child] |= set(r.extras)
                todo.append(child)
    unknown = sorted(n for n, m in meta.items() if m is None)
    excluded = [(n, locked[n].version, spec) for n, m in sorted(meta.items()) for spec in _python_specs(m)
                if excludes_python(spec, python)]
    return {n: sorted(ps, key=lambda v: (v != INPUT, v)) for n, ps in parents.items()}, unknown, excluded


def _python_specs(meta: list[str] | None) -> list[str]:
    return [ln[len(REQUIRES_PYTHON):] for ln in meta or [] if ln.startswith(REQUIRES_PYTHON)]


def excludes_python(spec: str, python: str) -> bool:
    """Requires-Python ``spec`` admits no release of Python ``python`` (3.11: neither 3.11.0 nor 3.11.99);
    a spec packaging cannot read excludes nothing (pip then decides)."""
    try:
        s = SpecifierSet(spec)
    except InvalidSpecifier:
        return False
    return not any(s.contains(f"{python}.{patch}", prereleases=True) for patch in (0, 99))
