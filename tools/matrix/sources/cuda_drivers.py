"""The Linux driver each CUDA toolkit release ships: NVIDIA names it in the runfile,
``cuda_<toolkit>_<driver>_linux.run``, listed in each release's ``docs/sidebar/md5sum.txt`` on
developer.download.nvidia.com. From CUDA 13.4 the toolkit no longer bundles a driver and the runfile is
``cuda_<toolkit>_linux.run``.

The bundled driver runs its toolkit fully, so a ``min_driver`` (Table 3 of the release notes, cuda.yaml)
above the driver of the newest update's runfile is wrong; Table 3 may name a lower one (11.7 Update 1:
>= 515.48.07, the runfile ships 515.65.01), so equality is not required.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date

from packaging.version import InvalidVersion, Version

from envman.model import Ver
from tools.matrix.sources.gitrepo import Fetch, NotFound, http_get
from tools.matrix.sources.snapshot import Snapshot

NAME = "cuda-drivers"
BASE = "https://developer.download.nvidia.com/compute/cuda"
RUNFILE = re.compile(r"\bcuda_(?P<toolkit>\d+\.\d+\.\d+)(?:_(?P<driver>\d+\.\d+(?:\.\d+)?))?_linux\.run\b")


def md5sum_url(update: str) -> str:
    return f"{BASE}/{update}/docs/sidebar/md5sum.txt"


def runfile_url(update: str, driver: str | None) -> str:
    name = f"cuda_{update}_{driver}_linux.run" if driver else f"cuda_{update}_linux.run"
    return f"{BASE}/{update}/local_installers/{name}"


def parse_runfile(text: str, update: str) -> tuple[bool, str | None]:
    """(found, bundled driver or None) for ``update``'s x86_64 runfile named in ``text`` (an md5sum.txt)."""
    for m in RUNFILE.finditer(text):
        if m["toolkit"] == update:
            return True, m["driver"]
    return False, None


def read_source(updates: list[str], fetch: Fetch | None = None, today: date | None = None) -> Snapshot:
    """The runfile of every toolkit update in ``updates`` (the cuda-toolkit releases PyPI lists), from its
    md5sum.txt; an update without one (a PyPI-only respin) is skipped."""
    get = fetch or http_get
    rows = []
    for u in updates:
        try:
            found, driver = parse_runfile(get(md5sum_url(u)).decode("utf-8", "replace"), u)
        except NotFound:  # no installers for this update (a PyPI-only respin): any other failure stops the read
            continue
        if found:
            rows.append([u, driver or "-", runfile_url(u, driver)])
    return Snapshot(NAME, {
        "url": f"{BASE}/",
        "revision": f"newest update {rows[-1][0]}" if rows else "none",
        "read": (today or date.today()).isoformat(),
        "what": "the x86_64 runfile of each CUDA toolkit update (docs/sidebar/md5sum.txt): the Linux driver it bundles",
    }, {"runfiles": rows})


@dataclass(frozen=True)
class Runfile:
    update: Version
    driver: Version | None  # None: the runfile bundles no driver (CUDA 13.4 on)
    url: str


def runfiles(snap: Snapshot) -> list[Runfile]:
    out = []
    for r in snap.rows("runfiles"):
        try:
            out.append(Runfile(Version(r[0]), Ver(r[1]) if r[1] != "-" else None, r[2]))  # keeps "500.00"
        except (InvalidVersion, IndexError):
            continue
    return sorted(out, key=lambda f: f.update)


def check(matrix, snap: Snapshot, file: str = "cuda.yaml") -> list[str]:
    """A minor release whose latest_update is older than a runfile NVIDIA published for it, or whose
    min_driver is above the driver its latest update's runfile bundles."""
    probs = []
    files = runfiles(snap)
    for cr in matrix.cuda:
        mine = [f for f in files if (f.update.major, f.update.minor) == (cr.version.major, cr.version.minor)]
        if not mine:
            continue
        newest = mine[-1]
        where = f"{file}: releases[{cr.label}]"
        if Version(cr.latest_update) < newest.update:
            probs.append(f"{where}.latest_update: {cr.latest_update}, NVIDIA published {newest.update} ({newest.url})")
        own = next((f for f in mine if f.update == Version(cr.latest_update)), None)
        if own is not None and own.driver is not None and cr.min_driver > own.driver:
            probs.append(f"{where}.min_driver: {cr.min_driver} is above the driver {own.driver} that CUDA "
                         f"{cr.latest_update}'s own runfile bundles ({own.url})")
    return probs
