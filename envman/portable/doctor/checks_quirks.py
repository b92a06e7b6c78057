"""Per-release defects no version rule predicts (matrices/extensions.yaml ``quirks``)."""

from __future__ import annotations

from .findings import Finding
from .knowledge import Knowledge
from .view import FactsView


def check_quirks(v: FactsView, k: Knowledge) -> list[Finding]:
    out = []
    for fw in v.frameworks:
        if fw.gpu is False:
            continue
        for qid, sev, says, fix, when, unless in k.quirks_of(fw.name, fw.base):
            if when and not v.pkg(when):
                continue
            if any(text in v.env.get(var, "") for var, text in unless):
                continue  # the workaround is in place
            out.append(Finding(sev, qid, f"{fw.label} {says}", fix))
    return out


CHECKS = (check_quirks,)
