"""NVIDIA's supported-GPU list: the "Compatible GPUs" table in README.md of NVIDIA/open-gpu-kernel-modules,
read at every release tag, condensed to the first and last release that lists each (PCI ID, product name).

The product names are what NVML reports (``nvidia-smi --query-gpu=name``), so the list confirms envman's
NVML aliases and gives every listed GPU a PCI device ID and the first driver release that names it.
The open modules run Turing and later; older GPUs (not in the list) run the proprietary modules only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date

from packaging.version import InvalidVersion, Version

from tools.matrix.sources.snapshot import Snapshot

NAME = "nvidia-gpus"
SLUG = "NVIDIA/open-gpu-kernel-modules"
URL = f"https://github.com/{SLUG}"
FILE = "README.md"
# | NVIDIA H100 80GB HBM3 | 2330 10DE 16C1 |: product name, PCI device ID [, subsystem vendor ID, subsystem ID]
ROW = re.compile(r"^\|\s*(?P<name>[^|]*?\S)\s*\|\s*(?P<dev>[0-9A-F]{4})(?:\s+(?P<sv>[0-9A-F]{4})\s+(?P<sd>[0-9A-F]{4}))?\s*\|\s*\Z")


def parse_readme(text: str) -> set[tuple[str, str, str]]:
    """(device ID, "subsystem vendor subsystem" or "", product name) of every row of the table."""
    rows = set()
    for line in text.splitlines():
        m = ROW.match(line)
        if m:
            sub = f"{m['sv']} {m['sd']}" if m["sv"] else ""
            rows.add((m["dev"], sub, m["name"]))
    return rows


def _release(tag: str) -> Version | None:
    try:
        v = Version(tag)
    except InvalidVersion:
        return None
    return v if len(v.release) >= 2 and not v.is_prerelease else None


def read_source(repo, today: date | None = None) -> Snapshot:
    """Every release tag's README (oldest first), condensed: [tags] tag → commit and rows listed there,
    [rows] first tag, last tag, device ID, subsystem, product name."""
    tags = {t: c for t, c in repo.refs("tags").items() if _release(t) is not None}
    order = sorted(tags, key=lambda t: _release(t))  # type: ignore[arg-type, return-value]
    first: dict[tuple[str, str, str], str] = {}
    last: dict[tuple[str, str, str], str] = {}
    counts = []
    for t in order:
        rows = parse_readme(repo.show(tags[t], FILE))
        counts.append([t, tags[t], str(len(rows))])
        for r in rows:
            first.setdefault(r, t)
            last[r] = t
    newest = order[-1] if order else ""
    snap = Snapshot(NAME, {
        "url": repo.url,
        "revision": f"{newest} ({tags.get(newest, '')})",
        "read": (today or date.today()).isoformat(),
        "what": f'{FILE}, section "Compatible GPUs", at every release tag (oldest first): the first and last '
                "release whose table lists each (PCI device ID, subsystem, product name)",
    })
    snap.sections["tags"] = counts
    snap.sections["rows"] = sorted(([first[r], last[r], *r] for r in first),
                                   key=lambda row: (row[2], row[3], row[4], _release(row[0])))
    return snap


@dataclass(frozen=True)
class Listing:
    """The condensed list: when each device ID was first and last named, under which names."""

    tags: tuple[str, ...]  # release tags read, oldest first (by version)
    rows: tuple[tuple[str, str, str, str, str], ...]  # first, last, device, subsystem, name
    url: str
    revision: str
    read: str

    @property
    def first_table(self) -> str | None:
        """The first release whose README carries the table at all (the list's beginning: a GPU listed there
        may have run earlier drivers, with the proprietary modules)."""
        return min((r[0] for r in self.rows), key=Version, default=None)

    @property
    def newest(self) -> str | None:
        return self.tags[-1] if self.tags else None

    def by_name(self, name: str) -> list[tuple[str, str, str, str, str]]:
        key = product_key(name)
        return [r for r in self.rows if product_key(r[4]) == key]

    def first_listing(self, device: str) -> str | None:
        """The first release (by version) whose table names ``device`` under any name."""
        got = [r[0] for r in self.rows if r[2] == device]
        return min(got, key=Version) if got else None

    def tag_url(self, tag: str) -> str:
        return f"{self.url}/blob/{tag}/{FILE}"


def product_key(name: str) -> str:
    """A product name compared as NVML spells it, ignoring case, spacing and a leading 'NVIDIA '."""
    s = re.sub(r"\s+", " ", name.strip().lower())
    return s[7:] if s.startswith("nvidia ") else s


def listing(snap: Snapshot) -> Listing:
    rows = tuple((r[0], r[1], r[2], r[3], r[4]) for r in snap.rows("rows") if len(r) == 5)
    tags = tuple(r[0] for r in snap.rows("tags"))
    return Listing(tags, rows, snap.meta.get("url", URL), snap.meta.get("revision", ""), snap.meta.get("read", ""))
