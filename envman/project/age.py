"""How old is a repository's code, from the versions its files name? A framework range admits the newest release;
a codebase whose exact pins are years older predates it (issue 38, class 6: a TF1-era `tensorflow>=1.15` beside
`tensorflow-probability==0.7.0` got TensorFlow 2.21; coqui-ai/TTS's `torch>=2.1` beside 2023 pins got torch 2.14).
The series' first upload dates on PyPI are data: matrices/release_dates.yaml (``python -m tools.matrix.release_dates``)."""

from __future__ import annotations

from datetime import date, timedelta
from functools import lru_cache
from pathlib import Path

import yaml
from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from envman.inputs import read_data
from envman.project.req import Req
from envman.resources import matrix_file

FILE = "release_dates.yaml"
GAP = timedelta(days=730)  # pins superseded this long before the newest release: the code predates it
OF_ITS_TIME = timedelta(days=365)  # the release proposed: the newest one out within a year of the pins


@lru_cache(maxsize=2)
def _load(path: Path) -> tuple[dict[str, dict[Version, date]], dict[str, Version]]:
    doc = yaml.safe_load(read_data(path)) or {}
    return ({name: {Version(k): date.fromisoformat(v) for k, v in series.items()} for name, series in doc["series"].items()},
            {name: Version(v) for name, v in (doc.get("api_breaks") or {}).items()})


def _named(r: Req) -> list[tuple[Version, bool]]:
    """The versions a line names as the least it takes, each with whether it pins one release."""
    out = []
    for sp in r.req.specifier:
        if sp.operator in ("==", "===", "~=", ">=", ">"):
            try:
                out.append((Version(sp.version.rstrip(".*")), sp.operator in ("==", "===", "~=")))
            except InvalidVersion:
                continue
    return out


def say_age(name: str, reqs: list[Req], total: SpecifierSet, allowed: list, notes: list[str],
            uploaded: dict[str, date] | None = None, root: Path | None = None) -> None:
    """Warn, naming the dates, when the newest ``name`` release the range admits came out years after every version
    the files name was superseded by a newer series, and the files pin a release exactly (a floor alone is no date:
    it is rarely raised) or name nothing newer than a floor of ``name`` across an API break (TensorFlow 2.0, whose
    source is the data file); propose the release of the pins' time. After the lock, ``uploaded`` dates the exact
    pins (==, ~=, a `<` cap) by their locked files' upload (not in a checkout committed since), and ``root``'s last
    git commit, if it is one, is a date the code cannot postdate (coqui-ai/TTS: `torch>=2.1`, committed 2024-02)."""
    dates, breaks = _load(matrix_file(FILE))

    def first(n: str, v: Version) -> date | None:
        return dates.get(n, {}).get(Version(f"{v.major}.{v.minor}"))

    def superseded(n: str, v: Version | None, day: date) -> date:
        later = [d for s, d in dates.get(n, {}).items() if v is not None and s > Version(f"{v.major}.{v.minor}")]
        return min(later) if later else (day if v is None else date.max)

    fits = sorted(Version(str(v)) for v in allowed if total.contains(v, prereleases=True))
    newest_day = first(name, fits[-1]) if fits else None
    table: list[tuple[date, Req, Version | None, bool]] = [
        (day, r, v, pin) for r in reqs for v, pin in _named(r) if (day := first(r.name, v))]
    # a line that pins a release or caps the series: what the lock then holds dates the code
    locked: list[tuple[date, Req, Version | None, bool]] = [
        (day, r, None, True) for r in reqs if any(sp.operator in ("==", "===", "~=", "<", "<=") for sp in r.req.specifier)
        and (day := (uploaded or {}).get(r.name))]
    if not newest_day:
        return
    commit = last_commit(root) if root is not None else None
    recent = commit is not None and newest_day - commit[0] <= GAP  # maintained: a pin the table lacks is no age
    for seen in (table, table + locked) if locked and not recent else (table,):  # the table's words first: init's
        if not seen:
            continue
        day, r, v, _ = max(seen, key=lambda s: s[0])
        brk = breaks.get(name)
        old = any(s[3] for s in seen) or (r.name == name and brk is not None and v is not None and v < brk <= fits[-1])
        if old and newest_day - max(superseded(s[1].name, s[2], s[0]) for s in seen) > GAP:
            return notes.append(_predates(name, fits, first, f"the newest release these files name is {r.origin}: "
                                          f"{r.req}", day, OF_ITS_TIME))
    if commit and newest_day - commit[0] > GAP:
        what = f"the repository's last commit is {commit[1]}"
        notes.append(_predates(name, fits, first, what, commit[0], timedelta()))


def _predates(name: str, fits: list[Version], first, what: str, day: date, slack: timedelta) -> str:
    newest_day = first(name, fits[-1])
    then = [v for v in fits if (d := first(name, v)) and d <= day + slack]
    pick = (then or fits)[-1 if then else 0]
    return (f"warning: {what} ({day:%Y-%m}); the {name} releases up to {fits[-1]} ({newest_day:%Y-%m}) that the range "
            f"admits came {round((newest_day - day).days / 365)} years later: the code predates them. Pass --framework "
            f"'{name}=={pick.major}.{pick.minor}.*' for {'the release of its time' if then else 'the oldest envman knows'}"
            f" ({first(name, pick):%Y-%m}), or pin the one it was tested with")


def last_commit(root: Path) -> tuple[date, str] | None:
    """(day, short hash) of a git checkout's last commit, offline; None when it is none (or git is absent)."""
    import subprocess

    if not (root / ".git").exists():
        return None
    try:
        out = subprocess.run(["git", "-C", str(root), "log", "-1", "--format=%cI %h"], capture_output=True, text=True,
                             timeout=10, check=True).stdout.split()
        return date.fromisoformat(out[0][:10]), out[1]
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None
