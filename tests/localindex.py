"""A PEP 503 simple index on 127.0.0.1 for tests that run real uv (download.pytorch.org is not reachable
here): a folder per index (``whl/cu126``), a folder per project, an ``index.html`` whose links carry each
file's sha256 and its PEP 658 metadata hash, served by the standard library's http.server.

``stand_in_wheel`` builds a tiny wheel under any name and version (``torch-2.14.1+cu126``): what a test of
*index selection* needs, since the property under test is which index and which file uv picks. ``add_wheel``
serves a real wheel file (linked, not copied) with the METADATA read out of it.
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import os
import threading
import zipfile
from contextlib import contextmanager
from pathlib import Path


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _link(project_dir: Path, filename: str, metadata: str | None, extra: str = "") -> None:
    sha = sha256_file(project_dir / filename)
    meta = ""
    if metadata is not None:
        (project_dir / f"{filename}.metadata").write_text(metadata, encoding="utf-8")
        m = hashlib.sha256(metadata.encode()).hexdigest()
        meta = f' data-dist-info-metadata="sha256={m}" data-core-metadata="sha256={m}"'
    page = project_dir / "index.html"
    before = page.read_text() if page.exists() else ""
    page.write_text(before + f'<a href="{filename}#sha256={sha}"{meta}{extra}>{filename}</a><br>\n')


def stand_in_wheel(index_dir: Path, name: str, version: str, requires: tuple[str, ...] = (),
                   tag: str = "py3-none-any", label: str | None = None) -> Path:
    """A wheel that installs nothing, named ``name``-``version``; ``label``: a PEP 825 variant label."""
    dist = name.replace("-", "_")
    d = index_dir / name
    d.mkdir(parents=True, exist_ok=True)
    fn = f"{dist}-{version}-{tag}" + (f"-{label}" if label else "") + ".whl"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(f"Requires-Dist: {r}\n" for r in requires)
    with zipfile.ZipFile(d / fn, "w") as zf:
        zf.writestr(f"{dist}-{version}.dist-info/METADATA", meta)
        zf.writestr(f"{dist}-{version}.dist-info/WHEEL", f"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: {tag}\n")
        zf.writestr(f"{dist}-{version}.dist-info/RECORD", "")
    _link(d, fn, meta)
    return d / fn


def add_wheel(index_dir: Path, name: str, wheel: Path) -> Path:
    """Serve a real wheel (a symbolic link to it) with its METADATA as the PEP 658 file."""
    d = index_dir / name
    d.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as zf:
        member = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1)
        meta = zf.read(member).decode("utf-8")
    os.symlink(wheel, d / wheel.name)
    _link(d, wheel.name, meta)
    return d / wheel.name


def add_file(index_dir: Path, name: str, filename: str, body: bytes) -> Path:
    """Any other file linked from a project page (a PEP 825 ``{name}-{version}-variants.json``)."""
    d = index_dir / name
    d.mkdir(parents=True, exist_ok=True)
    (d / filename).write_bytes(body)
    _link(d, filename, None)
    return d / filename


@contextmanager
def serve(root: Path):
    """http://127.0.0.1:PORT serving ``root``; stopped on exit."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *a, **k):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()
        t.join(5)
