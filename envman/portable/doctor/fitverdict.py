"""The one fits / tight / does-not-fit rule, for `envman fit` and the doctor's workload check (no imports: fit
loads it without the doctor)."""

from __future__ import annotations


def fits_verdict(on_card: float, usable: float, card: float) -> str:
    """fits: inside the card with the margin kept; tight: inside the card, within the margin; else does not fit."""
    if on_card <= usable:
        return "fits"
    return "tight" if on_card <= card else "does not fit"
