"""matrices/release_dates.yaml (tools/matrix/release_dates.py, from PyPI's JSON API): every framework release the
matrices hold has its series' date, so the age rule of envman/project/age.py never goes silent for want of one."""

from __future__ import annotations

from datetime import date

import yaml

from envman.resources import shipped_matrix_dir


def test_every_framework_release_in_the_matrices_has_a_date(matrix):
    series = yaml.safe_load((shipped_matrix_dir() / "release_dates.yaml").read_text())["series"]
    missing = [f"{fw} {rel.version}" for fw, rels in matrix.frameworks.items() for rel in rels
               if f"{rel.version.major}.{rel.version.minor}" not in series[fw]]
    assert missing == []
    assert series["torch"]["2.1"] == "2023-10-04" and series["tensorflow"]["1.15"] == "2019-10-16"
    assert all(date.fromisoformat(d) for dates in series.values() for d in dates.values())
