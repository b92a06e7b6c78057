"""Typed accessors over parsed YAML that collect every problem as ``file: dotted.path: what is wrong``.

Shared by the matrix loader and the frameworks' schema loaders (envman/frameworks), so a framework's
loader can validate its own file without importing matrix/.
"""

from __future__ import annotations

from typing import Any

from packaging.version import InvalidVersion, Version

from envman.model import Cc, Provenance, Ver


class Ctx:
    """Collects problems for one file; ``at`` builds dotted paths."""

    def __init__(self, file: str, problems: list[str]):
        self.file = file
        self.problems = problems

    def bad(self, path: str, what: str) -> None:
        self.problems.append(f"{self.file}: {path}: {what}")

    def req(self, obj: Any, key: str, path: str, kind: type | tuple = object) -> Any:
        if not isinstance(obj, dict):
            self.bad(path, "expected a mapping")
            return None
        if key not in obj or obj[key] is None:
            self.bad(f"{path}.{key}" if path else key, "missing")
            return None
        val = obj[key]
        if not isinstance(val, kind) or (kind is str and isinstance(val, bool)):
            self.bad(f"{path}.{key}" if path else key, f"expected {_kind_name(kind)}, got {val!r}")
            return None
        return val

    def version(self, obj: Any, key: str, path: str, *, optional: bool = False) -> Version | None:
        if optional and (not isinstance(obj, dict) or obj.get(key) is None):
            return None
        raw = self.req(obj, key, path, (str, int, float))
        if raw is None:
            return None
        p = f"{path}.{key}" if path else key
        if not isinstance(raw, str):
            self.bad(p, f"write versions as quoted strings, got {raw!r}")
            return None
        try:
            return Ver(raw)
        except InvalidVersion:
            self.bad(p, f"not a version: {raw!r}")
            return None

    def archs(self, obj: Any, key: str, path: str, *, optional: bool = False) -> tuple[Cc, ...]:
        if optional and (not isinstance(obj, dict) or obj.get(key) is None):
            return ()
        raw = self.req(obj, key, path, list)
        if raw is None:
            return ()
        out = []
        for i, a in enumerate(raw):
            try:
                if not str(a).startswith("sm_"):
                    raise ValueError
                out.append(Cc.parse(str(a)))
            except ValueError:
                self.bad(f"{path}.{key}[{i}]", f"not an architecture like sm_86: {a!r}")
        if len(set(out)) != len(out):
            self.bad(f"{path}.{key}", "duplicate architectures")
        return tuple(out)

    def prov(self, obj: Any, path: str) -> Provenance:
        if not isinstance(obj, dict):
            return Provenance("")
        src = obj.get("source") if obj.get("source") is not None else obj.get("measured")
        if not isinstance(src, str) or not src.strip():
            self.bad(f"{path}.source" if path else "source", "missing: every entry cites a primary source URL or 'measured: <how>'")
            src = ""
        elif "source" in obj and not src.startswith(("http://", "https://", "measured:")):
            self.bad(f"{path}.source", f"not a URL or 'measured: <how>': {src!r}")
        elif "measured" in obj and "source" not in obj:
            src = "measured: " + src
        unc = obj.get("uncertain", False)
        note = obj.get("note")
        if not isinstance(unc, bool):
            self.bad(f"{path}.uncertain", f"expected true/false, got {unc!r}")
            unc = False
        if unc and not note:
            self.bad(f"{path}.note", "missing: an uncertain entry says what is unsure")
        return Provenance(src, unc, note if isinstance(note, str) else None)


def _kind_name(kind: Any) -> str:
    names = {str: "a string", list: "a list", dict: "a mapping", int: "an integer", bool: "true/false"}
    if isinstance(kind, tuple):
        return " or ".join(names.get(k, k.__name__) for k in kind)
    return names.get(kind, getattr(kind, "__name__", str(kind)))


def items(ctx: Ctx, doc: Any, key: str, *, optional: bool = False) -> list[tuple[str, Any]]:
    if optional:  # absent: no items
        lst = doc.get(key) if isinstance(doc, dict) else None
        if lst is not None and not isinstance(lst, list):
            ctx.bad(key, "expected a list")
            lst = None
    else:
        lst = ctx.req(doc, key, "", list)
    return [(f"{key}[{i}]", e) for i, e in enumerate(lst or [])]


def dupes(ctx: Ctx, path: str, keys: list[Any], what: str) -> None:
    seen: set[Any] = set()
    for k in keys:
        if k is not None and k in seen:
            ctx.bad(path, f"duplicate {what} {k}")
        seen.add(k)


def pythons(ctx: Ctx, e: Any, p: str) -> tuple[str, ...]:
    py = ctx.req(e, "python", p, list) or []
    good = []
    for i, v in enumerate(py):
        if not isinstance(v, str) or len(v.split(".")) != 2:
            ctx.bad(f"{p}.python[{i}]", f"expected a quoted 'X.Y', got {v!r}")
        else:
            good.append(v)
    return tuple(good)


def patch_python(ctx: Ctx, pe: Any, pp: str, default: tuple[str, ...]) -> tuple[str, ...]:
    if isinstance(pe, dict) and "python" in pe:
        return pythons(ctx, pe, pp)
    return default


def opt_str(ctx: Ctx, obj: Any, key: str, path: str) -> str | None:
    val = obj.get(key) if isinstance(obj, dict) else None
    if val is not None and not isinstance(val, str):
        ctx.bad(f"{path}.{key}", f"write versions as quoted strings, got {val!r}")
        return None
    return val


