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

from envman.project.req import Req
from envman.resources import matrix_dir, shipped_matrix_dir

FILE = "release_dates.yaml"
GAP = timedelta(days=730)  # pins superseded this long before the newest release: the code predates it
OF_ITS_TIME = timedelta(days=365)  # the release proposed: the newest one out within a year of the pins


@lru_cache(maxsize=2)
def _load(path: Path) -> tuple[dict[str, dict[Version, date]], dict[str, Version]]:
    doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
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


def say_age(name: str, reqs: list[Req], total: SpecifierSet, allowed: list, notes: list[str]) -> None:
    """Warn, naming the dates, when the newest ``name`` release the range admits came out years after every version
    the files name was superseded by a newer series, and the files pin a release exactly (a floor alone is no date:
    it is rarely raised) or name nothing newer than a floor of ``name`` across an API break (TensorFlow 2.0, whose
    source is the data file); propose the release of the pins' time."""
    path = matrix_dir() / FILE
    dates, breaks = _load(path if path.is_file() else shipped_matrix_dir() / FILE)

    def first(n: str, v: Version) -> date | None:
        return dates.get(n, {}).get(Version(f"{v.major}.{v.minor}"))

    def superseded(n: str, v: Version) -> date:
        later = [d for s, d in dates[n].items() if s > Version(f"{v.major}.{v.minor}")]
        return min(later) if later else date.max

    fits = sorted(Version(str(v)) for v in allowed if total.contains(v, prereleases=True))
    newest_day = first(name, fits[-1]) if fits else None
    seen = [(day, r, v, pin) for r in reqs for v, pin in _named(r) if (day := first(r.name, v))]
    if not newest_day or not seen:
        return
    day, r, v, _ = max(seen, key=lambda s: s[0])
    brk = breaks.get(name)
    old = any(s[3] for s in seen) or (r.name == name and brk is not None and v < brk <= fits[-1])
    if not old or newest_day - max(superseded(s[1].name, s[2]) for s in seen) <= GAP:
        return
    then = [v for v in fits if (d := first(name, v)) and d <= day + OF_ITS_TIME]
    pick = (then or fits)[-1 if then else 0]
    notes.append(f"warning: the newest release these files name is {r.origin}: {r.req} ({day:%Y-%m}); the {name} "
                 f"releases up to {fits[-1]} ({newest_day:%Y-%m}) that the range admits came "
                 f"{round((newest_day - day).days / 365)} years later: the code predates them. Pass --framework "
                 f"'{name}=={pick.major}.{pick.minor}.*' for {'the release of its time' if then else 'the oldest envman knows'}"
                 f" ({first(name, pick):%Y-%m}), or pin the one it was tested with")
