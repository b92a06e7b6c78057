"""Keep the architecture visible: layers import downwards only, there is no cycle, the pure core does no
IO, cli/ talks to the use cases only, and the portable island imports nothing but the standard library.

The layers, lowest first (docs/architecture.md):
    portable/                      stdlib-only island, copied whole into every image
    hostenv                        the host environment envman reads (cache folder, CA bundle), os only
    errors, resources, _compat     leaves
    model, files, process, inputs  values; atomic files; signals; bounded input reads
    diskcache                      derived values kept on disk by the digest of their source files
    lock/layout                    the names of every file a stack writes: values any adapter reads
    _validate                      "file: dotted.path: problem" accessors (was matrix._Ctx)
    frameworks/                    per-framework plug-ins (schema, names, pins)
    matrix/                        data → model
    lockedstack                    the locked stack: one value the projections below read (PURE)
    resolve/, image/plan           PURE core
    project/, lock/, image/, engine/, ci/, fit/   adapters
    app/                           use cases: return values, never print
    cli/                           parse, call one use case, print, exit
    tools/ (beside envman/)        the repository's workshop (python -m tools.matrix): never in the wheel,
                                   may import any layer of envman, and no envman module imports it
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "envman"

RANK = {
    "portable": 0, "errors": 1, "hostenv": 0.5, "_compat": 1, "envman": 1, "redact": 1,
    "resources": 1.1,  # a data locator: says when ENVMAN_MATRIX_DIR names no folder (a UsageError)
    "model": 2, "files": 2,
    "inputs": 1.9,  # bounded reads of regular files only: what files.py reads back before it writes, too
    "process": 1.9,  # signals, and who owns what a run leaves (files.py names its temp files by it)
    "diskcache": 2.2,  # data derived from data files, kept as JSON by digest (uses files.write_atomic)
    "lock.layout": 2.3,  # the stack's file names (envman.P.lock …): plain values, read by discovery and the context too
    "_validate": 2.5,  # typed YAML accessors over model values, for matrix/ and frameworks/ alike
    "frameworks": 3, "matrix": 4,
    "image.stages": 4.5,  # PURE rules for what the image needs beyond wheels (plan.py places them)
    "lockedstack": 4.8,  # PURE: the locked stack, one value; envman.lock, the Dockerfile plan, SBOM, stack.json read it
    "resolve": 5, "image.plan": 5,
    "project": 6, "lock": 6, "image": 6, "image.render": 6, "image.kit": 6, "image.tables": 6, "image.context": 6, "engine": 6, "ci": 6, "fit": 6,
    "cluster": 6,  # the lock on Slurm/Kubernetes: its planners are pure (PURE_MODULES), export/render do the IO
    "app": 8, "cli": 9, "__main__": 10,
    "tools": 11,  # the repository's workshop, above the product: it may use any of it; nothing in envman/ uses it
}
# adapters that build on another adapter (same rank): named here, so a new sideways arrow is a decision
# (ci → image.kit: a pipeline runs the smoke program as `envman smoke --image` does, KIT_FIRST)
SIDEWAYS = {("ci", "lock"), ("ci", "project"), ("ci", "image.kit"), ("lock", "project"), ("image.render", "image.plan")}
CLI_MAY_IMPORT = {"app", "cli", "errors", "model", "envman", "redact"}
PURE = ["resolve", "image.plan", "image.stages", "lockedstack", "model"]
FORBIDDEN_IN_PURE = {"yaml", "jinja2", "docker", "subprocess", "shutil", "socket", "urllib", "requests", "pynvml",
                     "os", "glob", "tempfile"}


def _modname(p: Path) -> str:
    parts = list(p.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_modname(p): p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts}


def unit(mod: str) -> str:
    parts = mod.split(".")
    if len(parts) == 1:
        return "envman"
    if parts[1] == "image" and len(parts) > 2:
        return f"image.{parts[2]}"
    if len(parts) > 2 and f"{parts[1]}.{parts[2]}" in RANK:
        return f"{parts[1]}.{parts[2]}"  # a module ranked apart from its folder
    return parts[1]


def imports(mod: str) -> set[str]:
    """envman modules that ``mod`` imports, at any depth of its code (function-level imports too)."""
    path = MODULES[mod]
    is_pkg = path.name == "__init__.py"
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "envman"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = mod.split(".") if is_pkg else mod.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "envman":
                continue
            for a in node.names:
                out.add(f"{target}.{a.name}" if f"{target}.{a.name}" in MODULES else target)
    return out


def third_party(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    return out


def test_every_module_has_a_layer():
    assert not {unit(m) for m in MODULES} - set(RANK)


def test_imports_point_downwards():
    bad = []
    for mod in MODULES:
        for dep in imports(mod):
            a, b = unit(mod), unit(dep)
            if a == b or (a, b) in SIDEWAYS:
                continue
            if RANK[b] >= RANK[a]:
                bad.append(f"{mod} -> {dep}")
    assert not bad, "imports that point up or sideways:\n" + "\n".join(sorted(bad))


def test_cli_talks_to_the_use_cases_only():
    bad = [f"{m} -> {d}" for m in MODULES if unit(m) == "cli" for d in imports(m) if unit(d) not in CLI_MAY_IMPORT]
    assert not bad, "\n".join(sorted(bad))


def test_no_import_cycle():
    graph = {m: {d if d in MODULES else d.rsplit(".", 1)[0] for d in imports(m)} & MODULES.keys() for m in MODULES}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for m in sorted(graph):
        if m not in index:
            visit(m)
    # a package's __init__ re-exporting its own modules is not a cycle worth refusing
    cycles = [c for c in cycles if not all(x.startswith(c[0] + ".") or x == c[0] for x in c)]
    assert not cycles, cycles


def test_portable_island_imports_only_the_stdlib_and_itself():
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    # the smoke program imports the frameworks under test inside its observers, from the image's environment
    under_test = {"torch", "tensorflow", "numpy", "jax", "pynvml"}  # pynvml: optional, nvidia-smi otherwise
    for mod, path in MODULES.items():
        if unit(mod) != "portable":
            continue
        assert not {d for d in imports(mod) if not d.startswith("envman.portable")}, mod
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                assert node.module.split(".")[0] in stdlib | under_test, f"{mod} imports {node.module}"
            if isinstance(node, ast.Import):
                for a in node.names:
                    assert a.name.split(".")[0] in stdlib | under_test, f"{mod} imports {a.name}"


PURE_MODULES = {"envman.fit.estimate", "envman.fit.runspec", "envman.fit.activations", "envman.fit.states", "envman.fit.architectures", "envman.fit.advice"}  # fit's pure core
PURE_MODULES |= {f"envman.cluster.{m}" for m in ("plan", "slurm", "k8s", "affinity", "enroot", "nodes", "site", "runtimes", "values",
                                                   "backends")}


def test_pure_core_imports_no_io():
    for mod, path in MODULES.items():
        if unit(mod) in PURE or mod in PURE_MODULES:
            bad = third_party(path) & FORBIDDEN_IN_PURE
            assert not bad, f"{mod} imports {bad}"
            src = path.read_text(encoding="utf-8")
            for needle in ("open(", "os.environ", "read_text(", "write_text(", "print("):
                assert needle not in src, f"{mod} uses {needle}"


def test_only_cli_exits_or_prints():
    for mod, path in MODULES.items():
        if unit(mod) in ("cli", "__main__") or mod in ("envman.portable.smoke", "envman.portable.preflight",
                                                           "envman.portable.allreduce"):  # programs of their own
            continue
        assert "sys.exit(" not in path.read_text(encoding="utf-8"), mod
        assert "typer" not in third_party(path), mod


def test_every_package_ships_in_the_wheel():
    """pyproject lists packages explicitly (matrices/ and templates/ are mapped in): a new subpackage
    missing there would install without its code."""
    from envman._compat import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {_modname(p.parent / "__init__.py") for p in PKG.rglob("*.py") if "__pycache__" not in p.parts}
    assert all((ROOT / m.replace(".", "/") / "__init__.py").is_file() for m in on_disk), "a folder without __init__.py"
    assert on_disk <= listed, sorted(on_disk - listed)


def test_the_workshop_stays_out_of_the_product():
    """tools/ (matrix sync, outdated, the source readers) is rank 11, above envman's cli: it imports envman, envman
    never imports it, and the wheel does not carry it — a user's install has no PyPI/GitHub/NVIDIA readers."""
    from envman._compat import tomllib

    assert [m for m, p in MODULES.items() if "tools" in third_party(p)] == []
    workshop = [p for p in (ROOT / "tools").rglob("*.py") if "__pycache__" not in p.parts]
    assert workshop and all(third_party(p) - {"tools", "envman"} <= set(sys.stdlib_module_names) |
                            {"__future__", "packaging", "yaml", "typer"} for p in workshop)
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    assert [p for p in packages if not p.startswith("envman")] == [] and RANK["tools"] > RANK["__main__"]
