"""What a check returns: one finding = severity, check id, a one-line verdict and a remedy."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

ERROR = "error"
WARN = "warn"
INFO = "info"
SEVERITIES = (ERROR, WARN, INFO)


@dataclass(frozen=True)
class Finding:
    severity: str  # error | warn | info
    check: str  # stable id, e.g. "driver-too-old"
    verdict: str  # one line naming the versions involved
    remedy: str | None = None  # a command to run or a version to install

    def to_dict(self) -> dict[str, Any]:
        return {"severity": self.severity, "check": self.check, "verdict": self.verdict, "remedy": self.remedy}


error = partial(Finding, ERROR)  # error(check, verdict, remedy=None)
warn = partial(Finding, WARN)
info = partial(Finding, INFO)
