"""Reads of a remote wheel without downloading it: a bounded HTTP body (``read_body``), a seekable file over
HTTP range requests (``RangeReader``, over the caller's transport) that ``zipfile`` reads, and a bounded read of
one zip member (``read_member``). lock/graph.py reads a wheel's METADATA this way when the index serves no
PEP 658 file; the repository's matrix tools (tools/matrix/remote.py) build their urllib reads on it.

The zip's end record and central directory sit at the end of the file, the member itself somewhere inside:
each a few KiB of a wheel that may weigh 500 MB. Stdlib only; every request has a timeout.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Callable

from envman.errors import EnvmanError, ToolError

TIMEOUT_S = 30.0
BLOCK = 256 * 1024  # one range request fetches at least this much: few round trips for a central directory
MAX_MEMBER = 16 * 1024 * 1024  # METADATA and version.py are small; refuse to pull a huge member by range
MAX_BODY = 64 * 1024 * 1024  # an index page or a .metadata file; PyPI's torch page is ~2 MB
MAX_RATIO = 200  # deflate packs a shared library ~3:1, METADATA ~4:1; a zip bomb packs 1000:1 and more


def read_body(resp, url: str, limit: int = MAX_BODY, within: float = 4 * TIMEOUT_S) -> bytes:
    """A response body of at most ``limit`` bytes, read within ``within`` seconds: each read's timeout does not
    stop a server that trickles a byte at a time (a slow-loris index); this does, and an endless body too."""
    import time

    deadline = time.monotonic() + within
    chunks: list[bytes] = []
    total = 0
    read = getattr(resp, "read1", resp.read)  # what has arrived: read(n) would wait for all n bytes
    while chunk := read(min(1 << 16, limit + 1 - total)):
        total += len(chunk)
        if total > limit:
            raise ToolError(f"{url}: the answer is over {limit >> 20} MB", hint="is the index URL right? (--index-url)")
        if time.monotonic() > deadline:
            raise ToolError(f"{url}: the answer took over {within:g} s", hint="the index is too slow, or not an index")
        chunks.append(chunk)
    return b"".join(chunks)


def read_member(zf: zipfile.ZipFile, name: str, limit: int = MAX_MEMBER, error: type[EnvmanError] = ToolError) -> bytes:
    """One member of a wheel, refused before it is inflated when it would be over ``limit`` bytes or packed
    tighter than any real wheel (a zip bomb: 2.9 GiB of METADATA from a few MB), and cut at ``limit`` whatever
    its header says. Every zip member envman reads (the lock's metadata; the workshop's sync and --wheel) goes through
    ``check_member``."""
    info = zf.getinfo(name)
    check_member(info, limit, error)
    with zf.open(info) as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise error(f"{name}: over {limit >> 20} MB uncompressed")
    return data


def check_member(info: zipfile.ZipInfo, limit: int, error: type[EnvmanError]) -> None:
    if info.file_size > limit:
        raise error(f"{info.filename}: {info.file_size} bytes uncompressed, over envman's limit of {limit >> 20} MB",
                    hint="not a wheel envman reads (a zip bomb?)")
    if info.compress_size and info.file_size > 1 << 20 and info.file_size / info.compress_size > MAX_RATIO:
        raise error(f"{info.filename}: packed {info.file_size // info.compress_size}:1, tighter than any real wheel",
                    hint="not a wheel envman reads (a zip bomb?)")


Get = Callable[[str, "dict[str, str]"], "tuple[bytes, dict[str, str]]"]


class RangeReader(io.RawIOBase):
    """A read-only, seekable file over HTTP range requests, with a block cache: what ``zipfile`` needs to
    read one member of a remote wheel. ``get(url, headers) -> (body, lower-cased headers)`` is the transport
    (the lock's graph passes its keep-alive connections, the workshop urllib); it raises when the server does
    not answer a range with 206."""

    def __init__(self, url: str, size: int | None, get: Get):
        super().__init__()
        self.url = url
        self._get = get
        self.pos = 0
        self.requests = 0
        self._segments: list[tuple[int, bytes]] = []
        if size is None:
            size = self._probe_size()
        self.size = size

    def _probe_size(self) -> int:
        data, headers = self._range("bytes=-%d" % BLOCK)
        m = re.search(r"/(\d+)\s*\Z", headers.get("content-range", ""))
        if not m:
            raise ToolError(f"{self.url}: the server ignores HTTP range requests",
                            hint="pass --wheel PATH with a downloaded wheel")
        total = int(m.group(1))
        self._segments.append((total - len(data), data))
        return total

    def _range(self, spec: str) -> tuple[bytes, dict[str, str]]:
        self.requests += 1
        return self._get(self.url, {"Range": spec})

    def _covering(self, pos: int) -> tuple[int, bytes]:
        for start, data in self._segments:
            if start <= pos < start + len(data):
                return start, data
        lo = (pos // BLOCK) * BLOCK
        hi = min(self.size, lo + BLOCK) - 1
        data, _ = self._range(f"bytes={lo}-{hi}")
        self._segments.append((lo, data))
        return lo, data

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence]
        self.pos = max(0, base + offset)
        return self.pos

    def read(self, n: int = -1) -> bytes:
        end = self.size if n is None or n < 0 else min(self.size, self.pos + n)
        if end - self.pos > MAX_MEMBER:
            raise ToolError(f"{self.url}: refusing to read {end - self.pos} bytes by range",
                            hint="pass --wheel PATH with a downloaded wheel")
        out = bytearray()
        while self.pos < end:
            start, chunk = self._covering(self.pos)
            off = self.pos - start
            piece = chunk[off:off + (end - self.pos)]
            if not piece:
                break
            out += piece
            self.pos += len(piece)
        return bytes(out)

    def readinto(self, buf) -> int:  # type: ignore[override]
        data = self.read(len(buf))
        buf[:len(data)] = data
        return len(data)
