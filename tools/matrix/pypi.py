"""A small client of a package index (PEP 691 simple API, JSON form): which releases and files exist, and a
wheel's METADATA without downloading the wheel.

METADATA comes from the PEP 658 ``.metadata`` file when the index serves one (``core-metadata`` /
``data-dist-info-metadata`` in the file's entry); otherwise from HTTP range requests (tools/matrix/remote.py).
Measured 2026-11-30: PyPI serves no ``.metadata`` for torch 2.15.0, so both paths matter.
"""

from __future__ import annotations

import json
import urllib.parse
import zipfile
from dataclasses import dataclass
from email.parser import Parser

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from envman.errors import ToolError
from envman.lock.remote import read_member
from tools.matrix.remote import RangeReader
from tools.matrix.remote import http_get as _get

DEFAULT_INDEX = "https://pypi.org/simple"
SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"


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
