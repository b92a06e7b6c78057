"""What ``matrix check`` holds models.yaml's aliases to: an alias finds the entry's config, so it may only name a
model with that config. The data states one config per entry (its ``source``), so an alias is read by its name:

- a version (``llama-3.3-…``, ``…-v0.1``, ``stable-diffusion-v1-4``) or a size (``8b``, ``124M``, ``8x7b``)
  other than the entry's own (its id and name) names another model, unless the entry's ``source`` cites that
  model's config (SD v1.4 beside v1.5: the same architecture, read from both repositories);
- a name carrying another family's word (``mistral`` on a llama entry, the families being the data's
  ``model_type`` values) and not the entry's own names another architecture;
- two entries must not answer to the same name (``--model`` would silently take the first).

A fine-tune's suffix (``-instruct``, ``-chat``, ``-hf``) names no other config: fine-tuning keeps the shapes.
"""

from __future__ import annotations

import re
from typing import Any

_SIZE = re.compile(r"(?<![a-z0-9.])(\d+(?:\.\d+)?(?:x\d+(?:\.\d+)?)?[bm])(?![a-z0-9])")
_EXPLICIT = re.compile(r"(?<![a-z0-9])v(\d+(?:\.\d+)*)(?:-(\d+)(?![a-z0-9]))?")


def _norm(name: str) -> str:
    """The model part of a Hugging Face id (``meta-llama/Llama-3.1-8B`` → ``llama-3.1-8b``), lower case, words
    joined by '-'."""
    return re.sub(r"[\s_()\[\],]+", "-", name.rsplit("/", 1)[-1].lower()).strip("-")


def _family(model_type: Any) -> str | None:
    m = re.match(r"[a-z]+", model_type.lower()) if isinstance(model_type, str) else None
    return m.group(0) if m else None


def version(name: str, family: str | None) -> str | None:
    """The model's version as its name writes it: an explicit ``vN`` (``v1-5`` is 1.5), else the number right
    after the family's word (``llama3.1``, ``Llama-3.3``, ``qwen2.5``); None when it writes none."""
    n = _norm(name)
    m = _EXPLICIT.search(n)
    if m:
        return m.group(1) + (f".{m.group(2)}" if m.group(2) else "")
    m = re.search(re.escape(family) + r"-?(\d+(?:\.\d+)*)(?![\d.]*[a-z0-9])", n) if family else None
    return m.group(1) if m else None


def sizes(name: str) -> set[str]:
    """The parameter counts a name writes (``8b``, ``124m``, ``8x7b``; not ``4k``, a context length)."""
    return set(_SIZE.findall(_norm(name)))


def match_key(name: str) -> str:
    """What ``--model`` matches a name by (envman/fit/catalog.py find_model): its letters and digits, lower case."""
    return "".join(ch for ch in name.lower() if ch.isalnum())


def alias_problems(doc: Any, file: str = "models.yaml") -> list[str]:
    """Every alias of ``doc`` (models.yaml, parsed) that names another model than its entry, as
    ``file: models[id].aliases[i]: problem``."""
    entries = [e for e in (doc.get("models") if isinstance(doc, dict) else None) or [] if isinstance(e, dict)]
    families = {f for e in entries if (f := _family((e.get("config") or {}).get("model_type")))}
    owner: dict[str, str] = {}
    out: list[str] = []
    for e in entries:
        eid, aliases = str(e.get("id")), [a for a in e.get("aliases") or [] if isinstance(a, str)]
        for i, name in enumerate([eid, str(e.get("name")), *aliases]):
            other = owner.setdefault(match_key(name), eid)
            if other != eid:
                where = ("id", "name")[i] if i < 2 else f"aliases[{i - 2}]"
                out.append(f"{file}: models[{eid}].{where}: {name!r} also names models[{other}] (`--model` finds "
                           "the first)")
        out += [f"{file}: models[{eid}].aliases[{i}]: {a!r} {why}" for i, a in enumerate(aliases)
                if (why := _mismatch(e, a, aliases, families))]
    return out


def _mismatch(e: dict, alias: str, aliases: list[str], families: set[str]) -> str | None:
    fam = _family((e.get("config") or {}).get("model_type"))
    named = {f for f in families if f in _norm(alias)}
    if fam and named and fam not in named:
        return (f"names the {'/'.join(sorted(named))} family, not this entry's {fam} (config.model_type): an "
                "alias may only name a model with this entry's config")
    own = [str(e.get("id")), str(e.get("name"))]
    source = str(e.get("source") or "").lower()
    cited = [a for a in aliases if "/" in a and a.lower() in source]  # the configs its source says it read

    def key(values: set[str]) -> set[str]:
        return {v.replace(".", "") for v in values}  # sd-1.5 and sd15 write one version

    for what, of in (("version", lambda n: {v} if (v := version(n, fam)) else set()), ("size", sizes)):
        want, got = set().union(*(of(n) for n in own)), of(alias)
        if want and got and not key(got) <= key(want) and not any(key(got) <= key(of(c)) for c in cited):
            return (f"names {what} {', '.join(sorted(got))}, not this entry's {', '.join(sorted(want))} (read from "
                    "its id and name): give that model its own entry, or cite its identical config in source")
    return None
