"""``[tool.poetry]``: dependencies, groups and python, with Poetry's ``^``/``~`` constraints converted to
PEP 440 (Poetry's documented semantics: ^1.2.3 → >=1.2.3,<2.0.0; ^0.2.3 → >=0.2.3,<0.3.0; ~1.2 → >=1.2,<1.3)."""

from __future__ import annotations

import re

from envman.project.sources import Fate, Found
from envman.project.sources.pyproject import FILE, add_python, add_requirement


def _bump(parts: list[int], at: int) -> str:
    up = parts[: at + 1]
    up[at] += 1
    return ".".join(str(p) for p in up)


def poetry_constraint(text: str) -> str:
    """``^1.2`` → ``>=1.2,<2.0``; ``~1.2.3`` → ``>=1.2.3,<1.3``; ``1.2.*`` and ``>=1,<2`` stay; ``*`` → ``""``;
    a bare version ``1.2.3`` means ``==1.2.3``; ``||`` alternatives keep the widest (first floor, last cap)."""
    out = []
    text = text.strip()
    if "||" in text:
        alts = [poetry_constraint(a) for a in text.split("||")]
        return alts[0] if len(alts) == 1 else ",".join(a for a in (alts[0].split(",")[0], alts[-1].split(",")[-1]) if a)
    for part in re.split(r"\s*,\s*|\s+(?=[<>=!~^])", text):
        part = part.strip()
        if part in ("", "*"):
            continue
        m = re.fullmatch(r"([\^~])\s*(\d+(?:\.\d+)*)(.*)", part)
        if m and not part.startswith("~="):
            op, ver, rest = m.groups()
            nums = [int(x) for x in ver.split(".")]
            if op == "^":
                first = next((i for i, x in enumerate(nums) if x != 0), len(nums) - 1)
                cap = _bump(nums, first)
            else:
                cap = _bump(nums, 1 if len(nums) > 1 else 0)
            out.append(f">={ver}{rest},<{cap}")
        elif re.fullmatch(r"\d+(\.\d+)*(\.\*)?", part):
            out.append(f"=={part}")
        else:
            out.append(part)
    return ",".join(out)


def _dep_text(name: str, value) -> tuple[str | None, str]:
    """(PEP 508 text or None when not lockable by name, why)."""
    if isinstance(value, str):
        return f"{name}{poetry_constraint(value)}", ""
    if isinstance(value, list):  # multiple-constraint dependency: the first applies to the newest Python
        value = value[-1] if value else {}
    if isinstance(value, dict):
        extras = f"[{','.join(value['extras'])}]" if value.get("extras") else ""
        marker = f"; python_version{_marker(value['python'])}" if isinstance(value.get("python"), str) and _marker(value["python"]) else ""
        if "git" in value:
            ref = value.get("rev") or value.get("tag") or value.get("branch")
            sub = f"#subdirectory={value['subdirectory']}" if value.get("subdirectory") else ""
            return f"{name}{extras} @ git+{value['git']}{'@' + ref if ref else ''}{sub}", ""
        if "path" in value:
            return None, f"local path {value['path']}: part of the repository's source, not lockable"
        if "url" in value:
            return f"{name}{extras} @ {value['url']}", ""
        return f"{name}{extras}{poetry_constraint(str(value.get('version', '*')))}{marker}", ""
    return None, f"unreadable value {value!r}"


def _marker(py: str) -> str:
    c = poetry_constraint(py).split(",")[0]
    m = re.fullmatch(r"(>=|<=|==|<|>|!=)(.+)", c)
    return f' {m.group(1)} "{m.group(2)}"' if m else ""


def read_poetry(doc: dict, wanted_groups: tuple[str, ...] = ()) -> Found:
    found = Found(FILE)
    poetry = (doc.get("tool") or {}).get("poetry") or {}
    tables = [("dependencies", poetry.get("dependencies") or {}, True)]
    tables += [("dev-dependencies", poetry.get("dev-dependencies") or {}, "dev" in wanted_groups)]
    for g, body in sorted((poetry.get("group") or {}).items()):
        tables.append((f"group.{g}.dependencies", (body or {}).get("dependencies") or {}, g in wanted_groups))
    for tname, deps, wanted in tables:
        for name, value in deps.items():
            where = f"{FILE} tool.poetry.{tname}.{name}"
            if name.lower() == "python":
                py = poetry_constraint(str(value))
                add_python(found, py, where)
                found.fates.append(Fate(where, str(value), "rewrote", f"Python {py}"))
                continue
            text, why = _dep_text(name, value)
            if text is None:
                found.fates.append(Fate(where, str(value), "dropped", why))
                continue
            wanted_here = wanted and not (isinstance(value, dict) and value.get("optional"))
            add_requirement(found, text, where, optional=not wanted_here)
            if text != f"{name}{value}" and wanted_here:
                found.fates[-1] = Fate(where, f"{name} = {value!r}", "rewrote", f"→ {text!r}")
    return found
