"""What a setup.py computes from literals in its own file, evaluated over its syntax tree (issue 38, class 2): a
``deps = {…}`` table built by a comprehension over a literal list, ``install_requires = [deps["torch"], …]``,
``base + extra``, ``sorted(set(...))``. Nothing of the file runs: only literals, the file's module-level names
bound to them, comprehensions, subscripts, ``+`` and a short list of pure functions (``list``, ``sorted``,
``str.split``, ``re.findall`` …) are evaluated; anything else (a file read, a function of the project, an import)
raises ``Unknowable`` with the expression, so the caller says what is not knowable instead of guessing."""

from __future__ import annotations

import ast
import re
from typing import Any, Callable

_MAX_DEPTH = 40
_MAX_ITEMS = 10_000  # a comprehension longer than this is not a dependency list
_BUILTINS: dict[str, Callable[..., Any]] = {"list": list, "tuple": tuple, "set": set, "sorted": sorted, "dict": dict, "str": str, "len": len,
             "reversed": lambda x: list(reversed(x))}
_STR_METHODS = {"split", "strip", "lstrip", "rstrip", "lower", "replace", "splitlines", "startswith", "endswith",
                "join", "format", "partition"}
_COMPARE = {ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b, ast.In: lambda a, b: a in b,
            ast.NotIn: lambda a, b: a not in b}
_RE: dict[str, Callable[..., Any]] = {"findall": re.findall, "sub": re.sub, "split": re.split, "match": re.match, "search": re.search}


class Unknowable(Exception):
    """The expression (shortened) that only running setup.py would give."""


def evaluate(node: ast.AST, names: dict[str, ast.AST], scope: dict[str, Any] | None = None, depth: int = 0) -> Any:
    if depth > _MAX_DEPTH:
        raise Unknowable(ast.unparse(node)[:60])
    scope = scope or {}
    if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
        return _comprehension(node, names, scope, depth)
    if isinstance(node, ast.Name):
        if node.id in scope:
            return scope[node.id]
        if node.id in names:
            return evaluate(names[node.id], names, {}, depth + 1)
        raise Unknowable(node.id)
    rule = _RULES.get(type(node))
    if rule is None:
        raise Unknowable(ast.unparse(node)[:60])
    return rule(node, lambda n: evaluate(n, names, scope, depth + 1))


def _sequence(node, ev) -> Any:
    items = [x for e in node.elts for x in (ev(e.value) if isinstance(e, ast.Starred) else [ev(e)])]
    return set(items) if isinstance(node, ast.Set) else items


def _dict(node: ast.Dict, ev) -> dict:
    out: dict = {}
    for k, v in zip(node.keys, node.values):
        if k is None:
            out.update(ev(v))
        else:
            out[ev(k)] = ev(v)
    return out


def _binop(node: ast.BinOp, ev) -> Any:
    if not isinstance(node.op, ast.Add):
        raise Unknowable(ast.unparse(node)[:60])
    return ev(node.left) + ev(node.right)


def _unary(node: ast.UnaryOp, ev) -> Any:
    if not isinstance(node.op, ast.Not):
        raise Unknowable(ast.unparse(node)[:60])
    return not ev(node.operand)


def _boolop(node: ast.BoolOp, ev) -> Any:
    vals = [ev(v) for v in node.values]
    return all(vals) if isinstance(node.op, ast.And) else any(vals)


def _compare(node: ast.Compare, ev) -> Any:
    if len(node.ops) != 1 or type(node.ops[0]) not in _COMPARE:
        raise Unknowable(ast.unparse(node)[:60])
    return _COMPARE[type(node.ops[0])](ev(node.left), ev(node.comparators[0]))


def _fstring(node: ast.JoinedStr, ev) -> str:
    return "".join(str(ev(v.value)) if isinstance(v, ast.FormattedValue) else str(ev(v)) for v in node.values)


def _subscript(value: Any, index: ast.AST, ev) -> Any:
    try:
        if isinstance(index, ast.Slice):
            return value[slice(*(ev(x) if x is not None else None for x in (index.lower, index.upper, index.step)))]
        return value[ev(index)]
    except (KeyError, IndexError, TypeError) as exc:
        raise Unknowable(f"{exc.__class__.__name__}: {exc}"[:60]) from None


def _call(node: ast.Call, ev) -> Any:
    if node.keywords:
        raise Unknowable(ast.unparse(node)[:60])
    f = node.func
    args = [ev(a) for a in node.args]
    try:
        if isinstance(f, ast.Name) and f.id in _BUILTINS:
            return _BUILTINS[f.id](*args)
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "re" and f.attr in _RE:
            return _RE[f.attr](*args)
        if isinstance(f, ast.Attribute) and f.attr in _STR_METHODS:
            target = ev(f.value)
            if isinstance(target, str):
                return getattr(target, f.attr)(*args)
        if isinstance(f, ast.Attribute) and f.attr == "group":  # re.match(...).group(n)
            target = ev(f.value)
            if isinstance(target, re.Match):
                return target.group(*args)
    except (TypeError, ValueError, IndexError, re.error) as exc:
        raise Unknowable(f"{ast.unparse(node)[:40]}: {exc}"[:60]) from None
    raise Unknowable(ast.unparse(node)[:60])


def _comprehension(node, names, scope, depth) -> Any:
    results: list = []

    def walk(gens: list[ast.comprehension], local: dict[str, Any]) -> None:
        if not gens:
            ev = lambda n: evaluate(n, names, local, depth + 1)  # noqa: E731
            results.append((ev(node.key), ev(node.value)) if isinstance(node, ast.DictComp) else ev(node.elt))
            if len(results) > _MAX_ITEMS:
                raise Unknowable("a comprehension too long for a dependency list")
            return
        g = gens[0]
        if g.is_async:
            raise Unknowable(ast.unparse(g)[:60])
        for item in evaluate(g.iter, names, local, depth + 1):
            inner = dict(local)
            _bind(g.target, item, inner)
            if all(evaluate(c, names, inner, depth + 1) for c in g.ifs):
                walk(gens[1:], inner)

    walk(list(node.generators), dict(scope))
    if isinstance(node, ast.DictComp):
        return dict(results)
    return set(results) if isinstance(node, ast.SetComp) else results


def _bind(target: ast.AST, value: Any, scope: dict[str, Any]) -> None:
    if isinstance(target, ast.Name):
        scope[target.id] = value
    elif isinstance(target, (ast.Tuple, ast.List)):
        values = list(value)
        if len(values) != len(target.elts):
            raise Unknowable("an unpacking of another length")
        for t, v in zip(target.elts, values):
            _bind(t, v, scope)
    else:
        raise Unknowable(ast.unparse(target)[:60])


_RULES: dict[type, Callable[[Any, Callable[[ast.AST], Any]], Any]] = {
    ast.Constant: lambda node, ev: node.value, ast.List: _sequence, ast.Tuple: _sequence, ast.Set: _sequence,
    ast.Dict: _dict, ast.BinOp: _binop, ast.UnaryOp: _unary, ast.BoolOp: _boolop, ast.Compare: _compare,
    ast.JoinedStr: _fstring, ast.Call: _call,
    ast.Subscript: lambda node, ev: _subscript(ev(node.value), node.slice, ev),
}
