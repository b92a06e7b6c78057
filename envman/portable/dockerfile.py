"""Reading a Dockerfile statically: stages, ENV/ARG, pip/uv/conda/apt installs; nothing executed."""

from __future__ import annotations

import json
import re
import shlex
from collections import ChainMap
from typing import Any, Mapping

_ARG_REF = re.compile(r"\$(?:\{(\w+)(?::?-([^}]*))?\}|(\w+))")
_PIP = re.compile(r"^(?:\S*/)?(?:pip3?(?:\.\d+)?|python3?(?:\.\d+)?\s+-m\s+pip|uv\s+pip)(?:\s+--?[\w-]+)*\s+install\b")
_CONDA = re.compile(r"^(?:\S*/)?(?:conda|mamba|micromamba)\s+install\b")
_APT = re.compile(r"^(?:\S*/)?(?:apt-get|apt)\s+(?:-\S+\s+)*install\b")
# pip options that take a value (the value is not a requirement)
_PIP_VALUED = {"-r", "--requirement", "-c", "--constraint", "-i", "--index-url", "--extra-index-url", "-f",
               "--find-links", "--target", "-t", "--prefix", "--root", "--python", "-e", "--editable", "--src",
               "--trusted-host", "--cache-dir", "--platform", "--python-version", "--implementation", "--abi",
               "--config-settings", "-C", "--global-option", "--build-option", "--progress-bar", "--log"}


def logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, instruction) with continuations joined and comments dropped."""
    out: list[tuple[int, str]] = []
    buf: list[str] = []
    start = 0
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if line.lstrip().startswith("#") or not (buf or line.strip()):
            continue  # a comment (inside a continued instruction too), or a blank line between instructions
        if not buf:
            start = n
        if line.endswith("\\"):
            buf.append(line[:-1])
            continue
        buf.append(line)
        out.append((start, " ".join(b.strip() for b in buf)))
        buf = []
    if buf:
        out.append((start, " ".join(b.strip() for b in buf)))
    return out


# Work bounds: a Dockerfile is read, never trusted. One value after substitution, every substitution of a file
# together, and the ARG/ENV names a file may set (40 self-doubling ARGs once grew one process to 24 GB).
MAX_VALUE = 1 << 20
MAX_EXPANDED = 16 << 20
MAX_NAMES = 4096


class DockerfileTooLarge(ValueError):
    """The Dockerfile asks for more work than any real one: ``where`` names the line, ``what`` the bound."""

    def __init__(self, line: int, what: str):
        super().__init__(f"line {line}: {what}")
        self.line, self.what = line, what


class _Budget:
    """What one parse may still expand, and the line being read (for the error)."""

    def __init__(self) -> None:
        self.left, self.line = MAX_EXPANDED, 0

    def spend(self, n: int) -> None:
        self.left -= n
        if self.left < 0:
            raise DockerfileTooLarge(self.line, f"ARG/ENV substitution expands past {MAX_EXPANDED >> 20} MiB in all")


def substitute(text: str, values: Mapping[str, str], budget: _Budget | None = None) -> str:
    """$VAR / ${VAR} / ${VAR:-default} with the values known at this point; an unknown one stays as written. The
    result is bounded (MAX_VALUE; with ``budget``, every substitution of the file together): DockerfileTooLarge."""
    size = [len(text)]

    def one(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(3)
        if name in values:
            got = values[name]
        else:
            got = m.group(2) if m.group(2) is not None else m.group(0)
        size[0] += len(got) - len(m.group(0))
        if size[0] > MAX_VALUE:
            raise DockerfileTooLarge(budget.line if budget else 0,
                                     f"${name} expands this value past {MAX_VALUE >> 20} MiB")
        if budget is not None:
            budget.spend(len(got))
        return got

    return _ARG_REF.sub(one, text)


def _assignments(rest: str) -> dict[str, str]:
    """ENV/ARG operands: K=V pairs (quoted values kept whole), or the legacy `ENV K V…`."""
    try:
        words = shlex.split(rest, posix=True)
    except ValueError:
        words = rest.split()
    if words and "=" not in words[0] and len(words) > 1:
        return {words[0]: " ".join(words[1:])}
    out = {}
    for w in words:
        k, eq, v = w.partition("=")
        if k:
            out[k] = v if eq else ""
    return out


def _commands(run: str) -> list[str]:
    """The simple commands of a RUN line: split at &&, ||, ; and | (not inside quotes)."""
    if run.startswith("["):
        try:
            argv = json.loads(run)
            run = " ".join(str(a) for a in argv[2:]) if argv[:1] in (["/bin/sh"], ["sh"], ["bash"], ["/bin/bash"]) \
                else " ".join(str(a) for a in argv)
        except ValueError:
            pass
    parts, cur, quote = [], [], ""
    i = 0
    while i < len(run):
        c = run[i]
        if quote:
            cur.append(c)
            if c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
            cur.append(c)
        elif run.startswith(("&&", "||"), i):
            parts.append("".join(cur))
            cur = []
            i += 2
            continue
        elif c in ";|":
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def _strip_prefixes(cmd: str) -> str:
    """`sudo`, `env K=V`, `K=V` assignments and `--mount` flags in front of a command (linear: an index, not a
    list sliced once per word)."""
    words = cmd.split()
    i = 0
    while i < len(words) and (words[i] in ("sudo", "env", "exec", "time", "nohup") or _ASSIGN.match(words[i])):
        i += 1
    return " ".join(words[i:])


_ASSIGN = re.compile(r"^\w+=")


_PIP_KEYS = {"-r": "requirements", "--requirement": "requirements", "-c": "constraints", "--constraint": "constraints",
             "-e": "editable", "--editable": "editable", "--extra-index-url": "extra_index_urls", "-f": "find_links",
             "--find-links": "find_links"}


def parse_pip(cmd: str) -> dict[str, Any]:
    """`pip install …` -> {packages, requirements, constraints, index URLs, find_links, flags}."""
    try:
        words = _uncommented(shlex.split(cmd))
    except ValueError:
        words = _uncommented(cmd.split())
    words = words[words.index("install") + 1:] if "install" in words else []
    out: dict[str, Any] = {"packages": [], "requirements": [], "constraints": [], "index_url": None,
                           "extra_index_urls": [], "find_links": [], "upgrade": False, "no_deps": False,
                           "editable": []}
    it = iter(words)
    for w in it:
        opt, eq, val = w.partition("=")
        if opt in _PIP_VALUED:
            if not eq:
                val = next(it, "")
            if opt in ("-i", "--index-url"):
                out["index_url"] = val
            elif opt in _PIP_KEYS:
                out[_PIP_KEYS[opt]].append(val)
        elif w in ("-U", "--upgrade", "--no-deps"):
            out["upgrade" if w != "--no-deps" else "no_deps"] = True
        elif w and not w.startswith("-"):  # (a flag without a value: --no-cache-dir, --user, --pre, -q)
            out["packages"].append(w)
    return out


def _uncommented(words: list[str]) -> list[str]:
    """The words before a shell comment: a word that begins with # ends the command (`pip install cmake  # from
    apt is too old` installs cmake only); a # inside a word (`pkg.whl#sha256=…`) is part of it, as in sh."""
    cut = next((i for i, w in enumerate(words) if w.startswith("#")), len(words))
    return words[:cut]


def parse_conda(cmd: str) -> dict[str, Any]:
    words = _uncommented(cmd.split())
    words = words[words.index("install") + 1:] if "install" in words else []
    out: dict[str, Any] = {"packages": [], "channels": []}
    it = iter(words)
    for w in it:
        if w in ("-c", "--channel", "-n", "--name", "-p", "--prefix"):
            value = next(it, None)  # the option's value, never a package
            if w in ("-c", "--channel") and value is not None:
                out["channels"].append(value)
        elif w.startswith("--channel="):
            out["channels"].append(w.split("=", 1)[1])
        elif not w.startswith("-"):
            out["packages"].append(w.strip("'\""))
    return out


def parse_dockerfile(text: str) -> dict[str, Any]:
    """{stages: [{line, image, name, parent, env, args, installs, copies}], args} — one stage per FROM; ``installs``
    in order, each {line, tool: pip|conda|apt, …what it installs}; ENV values are inherited from a parent stage."""
    args: dict[str, str] = {}
    stages: list[dict[str, Any]] = []
    budget = _Budget()
    for n, ins in logical_lines(text):
        budget.line = n
        word, _, rest = ins.partition(" ")
        op, rest = word.upper(), rest.strip()
        if op == "ARG":
            _arg(args, stages, rest, budget)
        elif op == "FROM":
            stages.append(_stage(n, rest, args, stages))
        elif stages:
            _instruction(stages[-1], n, op, rest, args, budget)
        if len(args) + sum(len(s["args"]) + len(s["env"]) for s in stages[-1:]) > MAX_NAMES:
            raise DockerfileTooLarge(n, f"more than {MAX_NAMES} ARG/ENV names")
    return {"stages": stages, "args": args}


def _arg(args: dict[str, str], stages: list[dict[str, Any]], rest: str, budget: _Budget) -> None:
    """ARG before the first FROM is global; inside a stage it names a global (or gives its own default)."""
    scope = {**args, **(stages[-1]["args"] if stages else {})}
    for k, v in _assignments(rest).items():
        v = substitute(v, scope, budget)  # a default may name an earlier ARG
        if stages:
            stages[-1]["args"][k] = v if v else args.get(k, "")
        elif v or k not in args:
            args[k] = v
        scope[k] = v


def _stage(n: int, rest: str, args: dict[str, str], stages: list[dict[str, Any]]) -> dict[str, Any]:
    words = [w for w in rest.split() if not w.startswith("--platform")]
    image = substitute(words[0], args) if words else ""
    name = words[2] if len(words) >= 3 and words[1].lower() == "as" else None
    parent = next((s for s in stages if s["name"] and s["name"] == image), None)
    return {"line": n, "image": image, "name": name, "parent": parent["name"] if parent else None,
            "env": dict(parent["env"]) if parent else {}, "args": {}, "installs": [], "copies": []}


def _instruction(st: dict[str, Any], n: int, op: str, rest: str, args: dict[str, str], budget: _Budget) -> None:
    values = ChainMap(st["env"], st["args"], args)  # looked up, never copied: a line costs what it says
    if op == "ENV":
        st["env"].update({k: substitute(v, values, budget) for k, v in _assignments(rest).items()})
    elif op in ("COPY", "ADD"):
        st["copies"].append({"line": n, "args": [w for w in rest.split() if not w.startswith("--")]})
    elif op == "RUN":
        body = re.sub(r"--mount=\S+\s*|--network=\S+\s*|--security=\S+\s*", "", rest)
        for cmd in _commands(substitute(body, values, budget)):
            one = _install(n, _strip_prefixes(cmd))
            if one:
                st["installs"].append(one)


def _install(n: int, cmd: str) -> dict[str, Any] | None:
    if _PIP.match(cmd):
        return {"line": n, "tool": "pip", "command": cmd, **parse_pip(cmd)}
    if _CONDA.match(cmd):
        return {"line": n, "tool": "conda", "command": cmd, **parse_conda(cmd)}
    if _APT.match(cmd):
        pkgs = [w for w in cmd.split()[1:] if not w.startswith("-") and w != "install"]
        return {"line": n, "tool": "apt", "command": cmd, "packages": pkgs}
    return None


def base_images(text: str) -> list[str]:
    """The images a Dockerfile's stages start FROM (a stage built on an earlier stage is left out)."""
    return [s["image"] for s in parse_dockerfile(text)["stages"] if not s["parent"]]
