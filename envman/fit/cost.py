"""What a whole training run takes on a GPU type: wall time from the step estimate, and cost at a price the user
gives. PURE. envman never invents a price: a GPU without one gets a time and no cost. The time's range is the
throughput's (±band%).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RunCost:
    seconds: float  # wall time of the whole run at the estimated rate
    low: float  # at the top of the throughput's band
    high: float  # at its bottom
    price: float | None = None  # per GPU-hour, as the user gave it
    amount: float | None = None  # `seconds` on every GPU at that price (None: no price given)
    amount_range: tuple[float, float] | None = None  # `low` and `high` at that price


def run_cost(volume: float, rate_per_gpu: float, gpus: int, band_pct: float, price: float | None) -> RunCost | None:
    """``volume`` tokens (or samples) at ``rate_per_gpu`` on each of ``gpus`` GPUs; None without a rate."""
    if not rate_per_gpu or rate_per_gpu <= 0 or volume <= 0:
        return None
    rate = rate_per_gpu * gpus
    band = min(max(band_pct, 0.0), 99.0) / 100
    secs = (volume / rate, volume / (rate * (1 + band)), volume / (rate * (1 - band)))
    cost = None if price is None else [s / 3600 * gpus * price for s in secs]
    return RunCost(*secs, price, cost[0] if cost else None, (cost[1], cost[2]) if cost else None)


def price_for(prices: tuple[tuple[str, float], ...], gpu_id: str, aliases: tuple[str, ...]) -> float | None:
    """The price the user gave for this GPU (by any of its names), or the one given for every GPU ("*")."""
    given = dict(prices)
    return next((given[n] for n in (gpu_id, *aliases) if n in given), given.get("*"))


def fmt_duration(seconds: float) -> str:
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"
