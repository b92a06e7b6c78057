"""Lines that cannot be installed beside the framework chosen: a release requires some packages at its own series
(tensorflow 2.10 → tensorboard 2.10.*, tensorflow-estimator 2.10.*, keras 2.10.*; matrices/lockstep.yaml). When
``--framework`` moves a TF 1 project to TF 2, its 1.x pins of them do not move with it: every such line is named at
once (issue 38: experiencor/keras-yolo3 was refused at lock once per pin)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import yaml
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from envman.errors import UsageError
from envman.inputs import read_data
from envman.project.req import Req
from envman.resources import matrix_file

FILE = "lockstep.yaml"


@lru_cache(maxsize=2)
def _table(path: Path) -> dict:
    return yaml.safe_load(read_data(path)) or {}


def _required(rule: dict, series: Version) -> list[str]:
    """Versions of the package the framework's ``series`` accepts, as a grid wide enough for a pin to meet one."""
    first, last = (Version(s) for s in rule["same_series"])
    if first <= series <= last:
        return [f"{series.major}.{series.minor}.{p}" for p in range(10)]
    if series > last and rule.get("later"):
        floor = SpecifierSet(rule["later"])
        major = Version(next(iter(floor)).version).major
        return [v for m in range(30) for p in range(10) if (v := f"{major}.{m}.{p}") in floor]
    return []


def refuse_stale(name: str, spec: SpecifierSet, allowed: list, reqs: list[Req]) -> None:
    """Refuse, naming every line, when each release of ``name`` that ``spec`` admits rules a line out."""
    rules = _table(matrix_file(FILE)).get(name) or {}
    series = sorted({Version(f"{v.major}.{v.minor}") for v in allowed if spec.contains(v, prereleases=True)})
    stale = []
    for r in reqs:
        if r.name in rules and series and all((grid := _required(rules[r.name], s)) and not any(
                r.req.specifier.contains(v, prereleases=True) for v in grid) for s in series):
            stale.append(f"{r.origin}: {r.req}")
    if stale:
        raise UsageError(f"{'; '.join(stale)}: {name}{spec} requires other releases of "
                         f"{'these' if len(stale) > 1 else 'this'} (each {name} release pins its own series)",
                         hint=f"drop {'these lines' if len(stale) > 1 else 'the line'} and let {name} bring the "
                              f"matching ones, or choose a {name} of their series with --framework")
