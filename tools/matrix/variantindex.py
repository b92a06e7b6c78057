"""Reading what a package index serves about variant wheels (PEP 825, draft): the project page's links to the
``{name}-{version}-variants.json`` file and to variant wheels (a wheel file name with a sixth component, the
variant label). The simple page is read as PEP 691 JSON when the index offers it, else as PEP 503 HTML; the
variants.json is checked against the hash its link carries (OPTIONAL in PEP 825; said when absent).
"""

from __future__ import annotations

import hashlib
import json
import re
import urllib.parse
from dataclasses import dataclass
from html.parser import HTMLParser

from envman.errors import ToolError
from tools.matrix.pypi import SIMPLE_JSON, _get

MAX_VARIANTS_JSON = 5 * 1024 * 1024


@dataclass(frozen=True)
class IndexVariants:
    url: str | None  # the variants.json's URL; None when the page links none
    doc: object  # its parsed JSON (None without one)
    wheel_labels: tuple[str, ...]  # labels of the variant wheels the page links for this version
    hashed: bool  # the link carried a sha256 and the file matched it


def normalize(name: str) -> str:
    """Wheel-file normalization (the binary distribution format's file name rules): ``a-b.c`` → ``a_b_c``."""
    return re.sub(r"[-_.]+", "_", name).lower()


def wheel_label(filename: str, name: str, version: str) -> str | None:
    """The variant label of a wheel of ``name`` ``version`` (None: not a variant wheel, or another release).
    Six components are a build tag or a label: a build tag starts with a digit, a Python tag never does."""
    if not filename.endswith(".whl"):
        return None
    parts = filename[:-4].split("-")
    if len(parts) < 6 or normalize(parts[0]) != normalize(name) or parts[1] != version:
        return None
    if len(parts) == 6 and parts[2][:1].isdigit():
        return None  # a build tag, no label
    return parts[-1] if len(parts) in (6, 7) else None


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str]] = []  # (href, text)
        self._href: str | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self._href = dict(attrs).get("href")

    def handle_data(self, data):
        if self._href is not None and data.strip():
            self.links.append((self._href, data.strip()))
            self._href = None


def _page_files(page_url: str) -> list[tuple[str, str, str | None]]:
    """(file name, absolute URL, sha256 or None) of every file the project page links."""
    body, headers = _get(page_url, {"Accept": f"{SIMPLE_JSON}, text/html;q=0.1"})
    if SIMPLE_JSON in headers.get("content-type", ""):
        doc = json.loads(body)
        return [(f["filename"], urllib.parse.urljoin(page_url, f["url"]), (f.get("hashes") or {}).get("sha256"))
                for f in doc.get("files", []) if isinstance(f, dict) and "filename" in f and "url" in f]
    parser = _Links()
    parser.feed(body.decode("utf-8", "replace"))
    out = []
    for href, text in parser.links:
        url, _, fragment = urllib.parse.urljoin(page_url, href).partition("#")
        # "sha256=HEX"; wheelnext's test index writes "sha256=sha256=HEX", read alike
        sha = fragment.rsplit("sha256=", 1)[-1] if "sha256=" in fragment else None
        out.append((urllib.parse.unquote(url.rsplit("/", 1)[-1]) or text, url, sha))
    return out


def read_index_variants(index_url: str, name: str, version: str) -> IndexVariants:
    """What the index at ``index_url`` (a simple API root) links for ``name`` ``version``."""
    page = f"{index_url.rstrip('/')}/{name}/"
    files = _page_files(page)
    labels = tuple(sorted({lb for fn, _, _ in files if (lb := wheel_label(fn, name, version))}))
    wanted = f"{normalize(name)}-{version}-variants.json"
    match = next(((u, s) for fn, u, s in files if fn == wanted), None)
    if match is None:
        return IndexVariants(None, None, labels, False)
    url, sha = match
    body, _ = _get(url, None)
    if len(body) > MAX_VARIANTS_JSON:
        raise ToolError(f"{url}: {len(body)} bytes, over envman's limit for a variants.json", hint="is the URL right?")
    got = hashlib.sha256(body).hexdigest()
    if sha is not None and got != sha.lower():
        raise ToolError(f"{url}: sha256 {got} does not match the index's {sha}",
                        hint="the file changed after the index listed it; nothing was checked")
    try:
        doc = json.loads(body)
    except ValueError as exc:
        raise ToolError(f"{url}: not JSON ({exc})", hint="the index serves a broken variants.json") from None
    return IndexVariants(url, doc, labels, sha is not None)
