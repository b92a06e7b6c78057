"""A push's progress as one line: Docker's push stream (one message per layer and step) tallied into layers done
and bytes sent, reported at most once every ``every`` seconds. A 5.9 GB push was silent for five minutes."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

_DONE = ("Pushed", "Layer already exists", "Mounted from")


def human(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"  # pragma: no cover (the loop returns)


class PushTally:
    """Feed it the engine's push messages; it calls ``report`` with a line like
    ``pushing REF: 3/12 layers, 1.2 GB of 5.9 GB sent`` (the total: the layers whose size is known yet)."""

    EVERY = 2.0  # seconds between two lines at most (the caller may throttle further)

    def __init__(self, ref: str, report: Callable[[str], None], every: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.ref, self.report, self.clock = ref, report, clock
        self.every = self.EVERY if every is None else every
        self.layers: dict[str, list[Any]] = {}  # id -> [sent, size, done]
        self.last = clock()

    def feed(self, message: dict[str, Any]) -> None:
        layer, status = message.get("id"), str(message.get("status") or "")
        if not isinstance(layer, str) or not layer or status.startswith("The push refers to"):
            return
        entry = self.layers.setdefault(layer, [0, 0, False])
        detail = message.get("progressDetail")
        if status == "Pushing" and isinstance(detail, dict):
            current, total = detail.get("current"), detail.get("total")
            if isinstance(current, int):
                entry[0] = current
            if isinstance(total, int) and total > 0:
                entry[1] = total
        elif status.startswith(_DONE):
            entry[0], entry[2] = max(entry[0], entry[1]), True
        now = self.clock()
        if now - self.last >= self.every:
            self.last = now
            self.report(self.line())

    def line(self) -> str:
        done = sum(1 for e in self.layers.values() if e[2])
        sent = sum(e[0] for e in self.layers.values())
        size = sum(max(e[0], e[1]) for e in self.layers.values())
        return f"pushing {self.ref}: {done}/{len(self.layers)} layers, {human(sent)} of {human(size)} sent"
