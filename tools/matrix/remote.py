"""The workshop's reads of an index over plain urllib: ``http_get``, a ``RangeReader`` that uses it, and
``copy_member`` for a big wheel member (a CUDA library). Out of envman/ (issue 37): the product's lock reads
wheels over its own keep-alive connections (lock/graph.py) and never a whole library; the bounds are envman's
(envman/lock/remote.py: ``read_body``, ``check_member``)."""

from __future__ import annotations

import urllib.error
import urllib.request
import zipfile

from envman.errors import EnvmanError, ToolError
from envman.lock import remote
from envman.lock.remote import TIMEOUT_S, check_member, read_body

MAX_LIBRARY = 4 * 1024 ** 3  # torch's biggest CUDA library is ~1.5 GB uncompressed


def http_get(url: str, headers: dict[str, str] | None = None) -> tuple[bytes, dict[str, str]]:
    req = urllib.request.Request(url, headers={"User-Agent": "envman-matrix-refresh", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:  # noqa: S310 - an index URL the user chose
            got = {k.lower(): v for k, v in resp.headers.items()}
            if headers and "Range" in headers and resp.status != 206:
                # a server that ignores Range answers with the whole wheel: never read 500 MB by accident
                raise ToolError(f"{url}: the server ignores HTTP range requests (HTTP {resp.status})",
                                hint="pass --wheel PATH with a downloaded wheel, or use an index that serves PEP 658 metadata")
            return read_body(resp, url), got
    except urllib.error.HTTPError as exc:
        raise ToolError(f"{url}: HTTP {exc.code} {exc.reason}", hint="is the index URL right? (--index-url)") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ToolError(f"{url}: cannot reach the index ({reason})", hint="check the network or pass --index-url") from None


class RangeReader(remote.RangeReader):
    """envman's range reader over ``http_get`` unless told another transport."""

    def __init__(self, url: str, size: int | None = None, get: remote.Get | None = None):
        super().__init__(url, size, get or http_get)


def copy_member(zf: zipfile.ZipFile, name: str, dst, limit: int = MAX_LIBRARY, error: type[EnvmanError] = ToolError) -> int:
    """``read_member`` for a big member, streamed into the open file ``dst``: the bytes written."""
    info = zf.getinfo(name)
    check_member(info, limit, error)
    total = 0
    with zf.open(info) as src:
        while chunk := src.read(1 << 20):
            total += len(chunk)
            if total > limit:
                raise error(f"{name}: over {limit >> 20} MB uncompressed")
            dst.write(chunk)
    return total
