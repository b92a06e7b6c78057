"""The kit baked into every image: the portable island, whole, plus the matrix knowledge as JSON.

The island (envman/portable) is standard library only and imports nothing outside itself, so it is
copied as a package named ``envman_portable``: the smoke program runs as ``python -m envman_portable.smoke``
with the kit folder on the path, and the doctor's probes and checks run inside the container unchanged.
"""

from __future__ import annotations

import json
from functools import lru_cache

from envman.resources import matrix_dir, portable_dir

PACKAGE = "envman_portable"
KNOWLEDGE = "knowledge.json"
SMOKE_MODULE = f"{PACKAGE}.smoke"


def island_files() -> dict[str, str]:
    """Relative path under the kit → text, for every module of the island (sorted, no caches)."""
    return dict(_island_files())


@lru_cache(maxsize=1)
def _island_files() -> tuple[tuple[str, str], ...]:  # envman's own files: they do not change while it runs
    root = portable_dir()
    return tuple(
        (f"{PACKAGE}/{p.relative_to(root).as_posix()}", p.read_text(encoding="utf-8"))
        for p in sorted(root.rglob("*.py"))
        if "__pycache__" not in p.parts
    )


def knowledge_json(knowledge: dict) -> str:
    """``Knowledge.to_dict()`` as the kit's knowledge.json."""
    return json.dumps(knowledge, sort_keys=True, indent=1) + "\n"


def doctor_kit(knowledge_text: str) -> dict[str, str]:
    """The whole kit: the island plus the knowledge (``knowledge_json``)."""
    files = island_files()
    files[KNOWLEDGE] = knowledge_text
    return files


def kit_files() -> dict[str, str]:
    """The kit for envman's own matrix. Its knowledge.json is kept on disk under the matrix's key (serializing
    it is a cost every lock would pay), and in memory for the process."""
    from envman.diskcache import cached
    from envman.matrix.knowledge import load_knowledge, matrix_key

    d = matrix_dir()
    key = matrix_key(d)
    if key is None:
        return doctor_kit(knowledge_json(load_knowledge(d).to_dict()))
    if key not in _KIT_TEXT:
        _KIT_TEXT.clear()
        _KIT_TEXT[key] = cached("kit-knowledge", key, lambda: knowledge_json(load_knowledge(d).to_dict()), _text)
    return doctor_kit(_KIT_TEXT[key])


_KIT_TEXT: dict[str, str] = {}


def _text(data: object) -> str:
    """knowledge.json's text, as the cache holds it; anything else is a bad entry (a miss)."""
    if not isinstance(data, str) or not data.startswith("{"):
        raise ValueError("not knowledge.json's text")
    return data
