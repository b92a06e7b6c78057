"""A small client of a package index (PEP 691 simple API, JSON form): which releases and files exist, and a
wheel's METADATA without downloading the wheel.

METADATA comes from the PEP 658 ``.metadata`` file when the index serves one (``core-metadata`` /
``data-dist-info-metadata`` in the file's entry); otherwise from HTTP range requests: the zip's end record
and central directory at the end of the file, then the member itself, each a few KiB of a wheel that may
weigh 500 MB. Measured 2026-11-30: PyPI serves no ``.metadata`` for torch 2.15.0, so both paths matter.
Stdlib only (urllib + zipfile over a seekable range reader); every request has a timeout.
"""

from __future__ import annotations

import io
import json
import re
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from email.parser import Parser

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from envman.errors import EnvmanError, ToolError

DEFAULT_INDEX = "https://pypi.org/simple"
SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"
TIMEOUT_S = 30.0
BLOCK = 256 * 1024  # one range request fetches at least this much: few round trips for a central directory
MAX_MEMBER = 16 * 1024 * 1024  # METADATA and version.py are small; refuse to pull a huge member by range
MAX_BODY = 64 * 1024 * 1024  # an index page or a .metadata file; PyPI's torch page is ~2 MB
MAX_LIBRARY = 4 * 1024 ** 3  # torch's biggest CUDA library is ~1.5 GB uncompressed
MAX_RATIO = 200  # deflate packs a shared library ~3:1, METADATA ~4:1; a zip bomb packs 1000:1 and more


@dataclass(frozen=True)
class IndexFile:
    filename: str
    url: str
    version: Version
    local: str | None  # "cu128" of torch-2.7.0+cu128-…; None for the plain PyPI wheel
    python_tags: tuple[str, ...]  # ("cp311",)
    platforms: tuple[str, ...]  # ("manylinux_2_28_x86_64",)
    metadata_url: str | None  # PEP 658 .metadata, when the index serves it
    yanked: bool
    size: int | None


@dataclass(frozen=True)
class Project:
    name: str
    files: tuple[IndexFile, ...]  # wheels only

    def versions(self, final_only: bool = True) -> list[Version]:
        """Public versions (local labels dropped) that have at least one file not yanked, oldest first."""
        vs = {Version(f.version.public) for f in self.files if not f.yanked}
        return sorted(v for v in vs if not (final_only and (v.is_prerelease or v.is_devrelease)))


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[bytes, dict[str, str]]:
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
    its header says. Every zip member envman reads (matrix refresh, --wheel, the lock's metadata) goes through
    this or ``copy_member``."""
    info = zf.getinfo(name)
    _check_member(info, limit, error)
    with zf.open(info) as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise error(f"{name}: over {limit >> 20} MB uncompressed")
    return data


def copy_member(zf: zipfile.ZipFile, name: str, dst, limit: int = MAX_LIBRARY, error: type[EnvmanError] = ToolError) -> int:
    """``read_member`` for a big member, streamed into the open file ``dst``: the bytes written."""
    info = zf.getinfo(name)
    _check_member(info, limit, error)
    total = 0
    with zf.open(info) as src:
        while chunk := src.read(1 << 20):
            total += len(chunk)
            if total > limit:
                raise error(f"{name}: over {limit >> 20} MB uncompressed")
            dst.write(chunk)
    return total


def _check_member(info: zipfile.ZipInfo, limit: int, error: type[EnvmanError]) -> None:
    if info.file_size > limit:
        raise error(f"{info.filename}: {info.file_size} bytes uncompressed, over envman's limit of {limit >> 20} MB",
                    hint="not a wheel envman reads (a zip bomb?)")
    if info.compress_size and info.file_size > 1 << 20 and info.file_size / info.compress_size > MAX_RATIO:
        raise error(f"{info.filename}: packed {info.file_size // info.compress_size}:1, tighter than any real wheel",
                    hint="not a wheel envman reads (a zip bomb?)")


def fetch_project(name: str, index_url: str = DEFAULT_INDEX) -> Project:
    """The wheels of ``name`` on a PEP 691 JSON simple index."""
    base = index_url.rstrip("/")
    url = f"{base}/{name}/"
    body, _ = _get(url, {"Accept": SIMPLE_JSON})
    try:
        doc = json.loads(body)
        raw_files = doc["files"]
    except (ValueError, KeyError, TypeError):
        raise ToolError(f"{url}: not a PEP 691 JSON simple index page", hint="pass a simple index URL like https://pypi.org/simple") from None
    files = []
    for f in raw_files:
        fn = f.get("filename", "")
        if not fn.endswith(".whl"):
            continue
        try:
            _, ver, _, tags = parse_wheel_filename(fn)
        except (InvalidWheelFilename, InvalidVersion):
            continue
        meta = f.get("core-metadata", f.get("data-dist-info-metadata"))
        furl = urllib.parse.urljoin(url, f.get("url", fn))
        files.append(IndexFile(
            fn, furl, ver, ver.local,
            tuple(sorted({t.interpreter for t in tags})), tuple(sorted({t.platform for t in tags})),
            furl.split("#", 1)[0] + ".metadata" if meta else None,
            bool(f.get("yanked")), f.get("size"),
        ))
    return Project(doc.get("name", name), tuple(files))


Get = Callable[[str, "dict[str, str]"], "tuple[bytes, dict[str, str]]"]


class RangeReader(io.RawIOBase):
    """A read-only, seekable file over HTTP range requests, with a block cache: what ``zipfile`` needs to
    read one member of a remote wheel. ``get(url, headers) -> (body, lower-cased headers)`` is the transport
    (urllib by default; the lock's graph passes its keep-alive connections); it raises when the server does
    not answer a range with 206."""

    def __init__(self, url: str, size: int | None = None, get: Get | None = None):
        super().__init__()
        self.url = url
        self._get = get or _get
        self.pos = 0
        self.requests = 0
        self._segments: list[tuple[int, bytes]] = []
        if size is None:
            size = self._probe_size()
        self.size = size

    def _probe_size(self) -> int:
        data, headers = self._range("bytes=-%d" % BLOCK)
        m = re.search(r"/(\d+)\s*$", headers.get("content-range", ""))
        if not m:
            raise ToolError(f"{self.url}: the server ignores HTTP range requests",
                            hint="pass --wheel PATH with a downloaded wheel")
        total = int(m.group(1))
        start = total - len(data)
        self._store(start, data)
        return total

    def _range(self, spec: str) -> tuple[bytes, dict[str, str]]:
        self.requests += 1
        return self._get(self.url, {"Range": spec})

    def _store(self, start: int, data: bytes) -> None:
        self._segments.append((start, data))

    def _covering(self, pos: int) -> tuple[int, bytes]:
        for start, data in self._segments:
            if start <= pos < start + len(data):
                return start, data
        lo = (pos // BLOCK) * BLOCK
        hi = min(self.size, lo + BLOCK) - 1
        data, _ = self._range(f"bytes={lo}-{hi}")
        self._store(lo, data)
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


@dataclass(frozen=True)
class RemoteWheel:
    file: IndexFile
    metadata: str  # the METADATA text
    members: dict[str, str]  # other members read by range (e.g. torch/version.py), when asked for and present
    how: str  # "PEP 658 .metadata" | "HTTP range requests (N)"

    def parsed(self):
        return Parser().parsestr(self.metadata)


def read_remote_wheel(f: IndexFile, members: tuple[str, ...] = ()) -> RemoteWheel:
    """METADATA of ``f`` (PEP 658 when served and no other member is asked for, else by range), and
    ``members`` by range when asked."""
    if f.metadata_url and not members:
        body, _ = _get(f.metadata_url)
        return RemoteWheel(f, body.decode("utf-8", "replace"), {}, "PEP 658 .metadata")
    reader = RangeReader(f.url, f.size)
    try:
        zf = zipfile.ZipFile(reader)
    except zipfile.BadZipFile as exc:
        raise ToolError(f"{f.url}: not a readable wheel ({exc})") from None
    with zf:
        names = zf.namelist()
        meta_name = next((n for n in names if n.endswith(".dist-info/METADATA") and n.count("/") == 1), None)
        if meta_name is None:
            raise ToolError(f"{f.filename}: no *.dist-info/METADATA in the wheel")
        meta = read_member(zf, meta_name).decode("utf-8", "replace")
        got = {m: read_member(zf, m).decode("utf-8", "replace") for m in members if m in names}
    return RemoteWheel(f, meta, got, f"HTTP range requests ({reader.requests})")
