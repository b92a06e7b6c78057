"""What is in an image, file by file, read from a ``docker save`` stream (podman's docker-archive and the
Docker engine's ``docker save`` alike): the config (with ``rootfs.diff_ids`` and ``history``) and, for each
layer, every entry's kind, mode, owner, time, size and content digest. Two such readings say which files make
two builds of one lock differ (``envman build --verify-repro``).

A layer in a save is an uncompressed tar whose sha256 is its diff_id, so each layer member is hashed while it
is read and named by that digest; a member whose name already is a diff_id not asked for is skipped unread.
Everything streams: a 6 GB image is read once, never written to disk.
"""

from __future__ import annotations

import hashlib
import json
import re
import tarfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import IO, Any

Entry = tuple[str, int, int, int, int, int, str]  # kind, mode, uid, gid, mtime, size, sha256 or link target
_KINDS = {tarfile.REGTYPE: "file", tarfile.AREGTYPE: "file", tarfile.DIRTYPE: "dir", tarfile.SYMTYPE: "symlink",
          tarfile.LNKTYPE: "hardlink", tarfile.CHRTYPE: "char", tarfile.BLKTYPE: "block", tarfile.FIFOTYPE: "fifo"}
_HEX = re.compile(r"^(?:blobs/sha256/)?([0-9a-f]{64})(?:\.tar)?\Z")


@dataclass
class ImageArchive:
    config: dict[str, Any] = field(default_factory=dict)
    layers: dict[str, dict[str, Entry]] = field(default_factory=dict)  # "sha256:<diff_id>" → path → entry

    @property
    def diff_ids(self) -> list[str]:
        return list((self.config.get("rootfs") or {}).get("diff_ids") or [])


class _Hashing:
    """A read-only stream that hashes what passes through it."""

    def __init__(self, raw: IO[bytes]):
        self.raw, self.sha = raw, hashlib.sha256()

    def read(self, n: int = -1) -> bytes:
        data = self.raw.read(n)
        self.sha.update(data)
        return data

    def drain(self) -> str:
        while self.read(1 << 20):
            pass
        return "sha256:" + self.sha.hexdigest()


def _index_layer(stream: IO[bytes]) -> tuple[str, dict[str, Entry]]:
    hashing = _Hashing(stream)
    entries: dict[str, Entry] = {}
    with tarfile.open(fileobj=hashing, mode="r|") as tar:  # type: ignore[call-overload]
        for m in tar:
            if m.isreg():
                fh = tar.extractfile(m)
                digest = hashlib.sha256()
                while fh is not None and (chunk := fh.read(1 << 20)):
                    digest.update(chunk)
                what = digest.hexdigest()
            else:
                what = m.linkname
            entries["/" + m.name.removeprefix("./").lstrip("/")] = (
                _KINDS.get(m.type, "other"), m.mode, m.uid, m.gid, int(m.mtime), m.size, what)
    return hashing.drain(), entries


def read_image_archive(stream: IO[bytes], wanted: Callable[[str], bool] = lambda diff_id: True) -> ImageArchive:
    """The config and the indexed layers (those ``wanted`` by diff_id) of one image in a save stream."""
    out = ImageArchive()
    with tarfile.open(fileobj=stream, mode="r|") as outer:  # type: ignore[call-overload]
        for m in outer:
            if not m.isreg():
                continue
            named = _HEX.match(m.name)
            if named and not m.name.endswith(".json") and not wanted("sha256:" + named.group(1)):
                continue
            fh = outer.extractfile(m)
            if fh is None:
                continue
            # a member is a BufferedReader (tarfile.ExFileObject): peeking consumes nothing
            head = fh.peek(512)[:512]  # type: ignore[attr-defined]
            if m.name.endswith(".json") or head[:1] == b"{":
                doc = json.loads(fh.read())
                if isinstance(doc, dict) and "rootfs" in doc:
                    out.config = doc
                continue
            if len(head) == 512 and head[257:262] == b"ustar":
                diff_id, entries = _index_layer(fh)
                if wanted(diff_id):
                    out.layers[diff_id] = entries
    return out


def layer_steps(config: dict[str, Any]) -> list[str]:
    """What made each layer (the history entries that are not empty layers), in diff_id order."""
    steps = [str(h.get("created_by") or "") for h in config.get("history") or [] if not h.get("empty_layer")]
    n = len((config.get("rootfs") or {}).get("diff_ids") or [])
    return (steps + [""] * n)[:n]


def _when(t: int) -> str:
    return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _entry_diff(a: Entry, b: Entry) -> str:
    said = []
    if a[0] != b[0]:
        said.append(f"{a[0]} vs {b[0]}")
    if a[6] != b[6]:
        said.append("content differs" if a[0] == "file" else f"target {a[6]} vs {b[6]}")
    if a[5] != b[5] and a[0] == "file":
        said.append(f"size {a[5]} vs {b[5]}")
    if a[4] != b[4]:
        said.append(f"mtime {_when(a[4])} vs {_when(b[4])}")
    if a[1] != b[1]:
        said.append(f"mode {a[1]:o} vs {b[1]:o}")
    if a[2:4] != b[2:4]:
        said.append(f"owner {a[2]}:{a[3]} vs {b[2]}:{b[3]}")
    return ", ".join(said)


def _short_step(step: str) -> str:
    step = re.sub(r"^\|\d+ (?:\S+=\S* )*", "", step)  # buildah's "|2 ARG=… /bin/sh -c"
    step = step.replace("/bin/sh -c #(nop) ", "").replace("/bin/sh -c ", "RUN ")
    return step if len(step) <= 90 else step[:87] + "..."


def config_differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    out = []
    for key in ("created", "architecture", "os"):
        if a.get(key) != b.get(key):
            out.append(f"image config: {key} {a.get(key)!r} vs {b.get(key)!r}")
    ca, cb = a.get("config") or {}, b.get("config") or {}
    for key in sorted(set(ca) | set(cb)):
        if ca.get(key) != cb.get(key):
            out.append(f"image config: {key} differs")
    ha, hb = a.get("history") or [], b.get("history") or []
    for i, (x, y) in enumerate(zip(ha, hb)):
        for key in ("created", "created_by"):
            if x.get(key) != y.get(key):
                out.append(f"history[{i}] {key}: {x.get(key)!r} vs {y.get(key)!r}")
    if len(ha) != len(hb):
        out.append(f"history: {len(ha)} vs {len(hb)} entries")
    return out


def differences(first: ImageArchive, second: ImageArchive, limit: int = 40) -> list[str]:
    """One line per difference between two images: the config's, then each differing layer's files."""
    out = config_differences(first.config, second.config)
    ids_a, ids_b = first.diff_ids, second.diff_ids
    steps = layer_steps(first.config)
    for i in range(max(len(ids_a), len(ids_b))):
        a = ids_a[i] if i < len(ids_a) else None
        b = ids_b[i] if i < len(ids_b) else None
        if a == b:
            continue
        where = f"layer {i + 1}/{len(ids_a)}" + (f" ({_short_step(steps[i])})" if i < len(steps) and steps[i] else "")
        fa, fb = first.layers.get(a or "", {}), second.layers.get(b or "", {})
        if a is None or b is None or not (fa or fb):
            out.append(f"{where}: {a} vs {b} (its files were not read)")
            continue
        files = []
        for path in sorted(set(fa) | set(fb)):
            if path not in fb:
                files.append(f"{where}: {path}: only in the first build")
            elif path not in fa:
                files.append(f"{where}: {path}: only in the second build")
            elif fa[path] != fb[path]:
                files.append(f"{where}: {path}: {_entry_diff(fa[path], fb[path])}")
        out += files or [f"{where}: the same files, in another order or tar encoding"]
    if len(out) > limit:
        out = out[:limit] + [f"… and {len(out) - limit} more"]
    return out
