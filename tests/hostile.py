"""Helpers of the hostile-input property tests (``from hostile import places``: tests/ is on sys.path, as for fakes)."""

from __future__ import annotations


def places(doc: object, at: tuple = ()) -> list[tuple]:
    """Every key path of a JSON-like document (a list's first two items), where a test puts a hostile value."""
    if isinstance(doc, dict):
        return [p for k, v in doc.items() for p in [(*at, k), *places(v, (*at, k))]]
    if isinstance(doc, list):
        return [p for i, v in enumerate(doc[:2]) for p in [(*at, i), *places(v, (*at, i))]]
    return []
