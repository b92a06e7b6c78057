"""Issue 38's invariants over ``../shared/corpus`` (235 real repositories' dependency data files): what
``envman init --no-lock --target h100`` must do for every one of them, checked from the outside — the exit code,
the printed lines, envman.yaml/envman.lock and the repository's own files (read here independently of envman's
readers) and SOURCE.yaml's facts about its code. Used by tests/data/test_corpus_invariants.py and, to print the
table, by ``python -m tests.data.corpus_invariants``.

The corpus is data beside the project (CI has ``shared/`` next to the clone); nothing of it is copied into the
repository: each run copies one folder to a temporary directory, because init writes."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import tomllib
import yaml
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet

REPO_ROOT = Path(__file__).resolve().parents[2]
# ENVMAN_CORPUS names it where the checkout is not beside shared/ (a git worktree elsewhere)
CORPUS = Path(os.environ.get("ENVMAN_CORPUS") or REPO_ROOT.parent / "shared" / "corpus")
ARGS = ("--no-lock", "--target", "h100")
DOCUMENTED_EXITS = {0, 1, 2, 3, 4, 7}  # docs/commands.md#exit-codes that init can mean
# a framework module the code imports → the distributions that provide it
FRAMEWORK_DISTS = {
    "torch": {"torch"},
    "tensorflow": {"tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tf-nightly", "tensorflow-macos",
                   "tensorflow-intel", "intel-tensorflow"},
    "jax": {"jax", "jaxlib"},
    "flax": {"flax"},
    "keras": {"keras", "tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tf-keras"},
}
STACK_OF = {"torch": "torch", "tensorflow": "tensorflow", "keras": "tensorflow", "jax": "jax", "flax": "jax"}
# a file of the core never carries one of these words in its name: they name what is optional
_OPTIONAL_WORDS = re.compile(r"(?:^|[-_./])(dev|develop|test|tests|testing|docs?|lint|optional|extras?|windows|win|"
                             r"macos|mac|darwin|osx|rocm|tpu|xpu|npu|mps|notebooks?|demo|docs)(?:$|[-_./])", re.I)

INVARIANTS = {
    "no_traceback": "no traceback, no internal error",
    "documented_exit": "a documented exit code",
    "refusal_lines": "a refusal has an `error:` and a `hint:` line",
    "framework_consistent": "exit 0 ⇒ envman.lock's framework is the one the inputs name",
    "framework_when_imported": "code imports torch/tensorflow/jax ⇒ a framework is named or a refusal says why",
    "hint_followable": "a refusal's hint, followed as printed, names real paths and options and leads on",
    "python_bounds": "the chosen Python satisfies every Python bound in the files read",
    "framework_imports_covered": "every framework module the code imports is in the stack or named in a warning",
    "no_optional_merged": "optional, extra, dev and platform files are not merged into the core",
}


@dataclass
class Run:
    rc: int
    out: str
    err: str
    cwd: Path
    folder: Path  # the copy init was run on
    spec: dict = field(default_factory=dict)
    lock: dict = field(default_factory=dict)

    @property
    def text(self) -> str:
        return self.out + "\n" + self.err

    def line(self, prefix: str) -> str | None:
        return next((ln[len(prefix):].strip() for ln in self.err.splitlines() if ln.startswith(prefix)), None)


def folders() -> list[str]:
    return sorted(p.name for p in CORPUS.iterdir() if p.is_dir()) if CORPUS.is_dir() else []


def source_of(name: str) -> dict:
    return yaml.safe_load((CORPUS / name / "SOURCE.yaml").read_text())


CODE_FILES_CAP = 40  # stand-in files written per framework module (the counts' order is kept up to the cap)


def copy_repo(name: str, tmp: Path) -> Path:
    """The repository's data files, plus what SOURCE.yaml says of its code: one stand-in ``.py`` file per file
    that imports a framework (``import torch``, capped), under ``scripts/`` — a folder no build backend takes for
    a package — so that init sees the evidence the real tree gives it, and nothing of anyone's code is copied."""
    dst = tmp / name
    shutil.copytree(CORPUS / name, dst, symlinks=True, ignore=shutil.ignore_patterns("SOURCE.yaml"))
    counts = source_of(name).get("framework_imports") or {}
    if any(counts.values()):
        code = dst / "scripts" / "envman_corpus_code"
        code.mkdir(parents=True, exist_ok=True)
        for module, n in counts.items():
            for i in range(min(n, CODE_FILES_CAP)):
                (code / f"{module}_{i}.py").write_text(f"import {module}\n")
    return dst


def run_init(cwd: Path, argv: list[str]) -> Run:
    """``envman init`` in-process, from the folder ``cwd`` (the user's), as the console script runs it."""
    import json

    from envman.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(["init", *argv])
            except BaseException as exc:  # noqa: BLE001 - the harness records what escaped main
                import traceback

                err.write("Traceback (escaped main)\n" + "".join(traceback.format_exception(exc)))
                rc = 70
    finally:
        os.chdir(here)
    target = (cwd / argv[0]).resolve() if argv and not argv[0].startswith("-") else cwd
    run = Run(rc, out.getvalue(), err.getvalue(), cwd, target)
    with contextlib.suppress(OSError, yaml.YAMLError):
        run.spec = yaml.safe_load((target / "envman.yaml").read_text()) or {}
    with contextlib.suppress(OSError, ValueError):
        run.lock = json.loads((target / "envman.lock").read_text())
    return run


# ---- the repository's files, read here independently of envman -------------------------------------------

def files_read(run: Run) -> list[str]:
    for ln in run.out.splitlines():
        ln = ln.strip().removeprefix("- ").strip()
        if ln.startswith("found dependencies in: "):
            listed = re.sub(r"\(with ([^)]*)\)", lambda m: m[1].replace(", ", " "), ln[len("found dependencies in: "):])
            return [w.strip(",") for w in listed.split() if re.fullmatch(r"[\w./-]+\.[\w]+|[\w.-]+/[\w./-]+", w.strip(","))]
    return []


def _poetry_python(text: str) -> str | None:
    parts = []
    for p in re.split(r"\s*,\s*|\s+(?=[<>=!~^])", text.strip()):
        m = re.fullmatch(r"\^(\d+)\.(\d+)(?:\.\d+)?", p)
        n = re.fullmatch(r"~(\d+)\.(\d+)(?:\.\d+)?", p)
        if m:
            parts.append(f">={m[1]}.{m[2]},<{int(m[1]) + 1}")
        elif n:
            parts.append(f">={n[1]}.{n[2]},<{n[1]}.{int(n[2]) + 1}")
        elif re.fullmatch(r"\d+(\.\d+)*", p):
            parts.append(f"=={p}.*" if p.count(".") < 2 else f"=={p}")
        elif p and p != "*":
            parts.append(p)
    return ",".join(parts) or None


def _conda_python(text: str) -> str:
    """conda's ``python=3.8.5`` (any build string after a second ``=``) is that minor; ``>=3.8,<3.10`` as written."""
    m = re.fullmatch(r"==?(\d+\.\d+)(?:\.[\d*]+)?(?:=\S+)?", text.strip())
    return f"=={m[1]}.*" if m else text.strip()


def python_bounds(folder: Path, read: list[str]) -> list[tuple[str, str]]:
    """(file, specifier) for every Python bound the read files state."""
    out: list[tuple[str, str]] = []
    for rel in read:
        p = folder / rel
        if not p.is_file():
            continue
        text = p.read_text(errors="replace")
        name = p.name
        try:
            if name == "pyproject.toml":
                doc = tomllib.loads(text)
                rp = (doc.get("project") or {}).get("requires-python")
                if isinstance(rp, str):
                    out.append((rel, rp))
                pp = (((doc.get("tool") or {}).get("poetry") or {}).get("dependencies") or {}).get("python")
                if isinstance(pp, str) and _poetry_python(pp):
                    out.append((rel, _poetry_python(pp)))
            elif name == "setup.cfg":
                m = re.search(r"^python_requires\s*=\s*(.+)$", text, re.M)
                if m:
                    out.append((rel, m[1].strip()))
            elif name.endswith((".yml", ".yaml")):
                doc = yaml.safe_load(text) or {}
                for dep in doc.get("dependencies") or []:
                    if isinstance(dep, str):
                        m = re.fullmatch(r"\s*python\s*([=<>!~].*)", dep)
                        if m:
                            out.append((rel, _conda_python(m[1])))
            elif name == ".python-version":
                v = text.strip().splitlines()[0].strip() if text.strip() else ""
                if re.fullmatch(r"\d+\.\d+(\.\d+)?", v):
                    out.append((rel, f"=={'.'.join(v.split('.')[:2])}.*"))
        except (tomllib.TOMLDecodeError, yaml.YAMLError, AttributeError, TypeError):
            continue
    return out


def minor_satisfies(minor: str, spec: str) -> bool:
    """envman works in minor versions: 3.13 satisfies a bound when some 3.13.x does (docs/init.md)."""
    try:
        s = SpecifierSet(spec.replace("=3.", "==3.").replace("===", "==") if re.match(r"^=\d", spec) else spec)
    except InvalidSpecifier:
        return True  # not a bound anyone can hold envman to
    return any(s.contains(f"{minor}.{patch}", prereleases=True) for patch in range(0, 40))


def requirement_names(run: Run) -> set[str]:
    """The distributions envman.yaml's packages and requirement files name (following -r/-c includes)."""
    names: set[str] = set()
    lines: list[str] = [str(x) for x in run.spec.get("packages") or []]
    seen: set[Path] = set()
    todo = [run.folder / str(r) for r in run.spec.get("requirements") or []]
    while todo:
        p = todo.pop()
        if p in seen or not p.is_file():
            continue
        seen.add(p)
        for ln in p.read_text(errors="replace").splitlines():
            ln = ln.split(" #")[0].strip()
            m = re.match(r"-[rc]\s*(\S+)|--(?:requirement|constraint)[= ](\S+)", ln)
            if m:
                todo.append(p.parent / (m[1] or m[2]))
            elif ln and not ln.startswith(("-", "#")):
                lines.append(ln)
    for ln in lines:
        with contextlib.suppress(InvalidRequirement):
            names.add(Requirement(ln).name.lower().replace("_", "-"))
    return names


# ---- the invariants -----------------------------------------------------------------------------------------

def stack_framework(run: Run) -> str | None:
    fw = ((run.lock.get("stack") or {}).get("framework") or {})
    return fw.get("name") if isinstance(fw, dict) else None


def imported_frameworks(src: dict) -> set[str]:
    counts = src.get("framework_imports") or {}
    return {m for m, n in counts.items() if n}


def check(name: str, run: Run, src: dict, follow=None) -> dict[str, str | None]:
    """invariant → None when it holds, else why not. ``follow(argv)`` runs a hint's command (a fresh copy)."""
    res: dict[str, str | None] = dict.fromkeys(INVARIANTS)
    if "Traceback" in run.text or "internal error" in run.err:
        res["no_traceback"] = run.err.strip().splitlines()[-1] if run.err.strip() else "traceback"
    if run.rc not in DOCUMENTED_EXITS:
        res["documented_exit"] = f"exit {run.rc}"
    if run.rc != 0 and not (run.line("error:") and run.line("hint:")):
        res["refusal_lines"] = "no error:/hint: pair: " + run.err.strip()[:200]
    fw = stack_framework(run)
    if run.rc == 0:
        named = requirement_names(run)
        direct = {STACK_OF[m] for m, dists in FRAMEWORK_DISTS.items() if m in STACK_OF and dists & named
                  and m in ("torch", "jax", "tensorflow")}
        if fw and fw not in direct and direct and not (run.spec.get("framework")):
            res["framework_consistent"] = f"stack {fw}, inputs name {sorted(direct)}"
        if not fw and direct:
            res["framework_consistent"] = f"no framework in envman.lock, inputs name {sorted(direct)}"
    imported = imported_frameworks(src)
    core = {STACK_OF[m] for m in imported}
    if run.rc == 0 and core & {"torch", "tensorflow", "jax"} and not fw:
        res["framework_when_imported"] = f"code imports {sorted(imported)}; exit 0 without a framework"
    if run.rc != 0:
        res["hint_followable"] = hint_problem(run, follow)
    if run.rc == 0 and "--python" not in run.text.split("hint")[0]:
        chosen = _python_row(run.out)
        if chosen:
            bad = [f"{f}: {b}" for f, b in python_bounds(run.folder, files_read(run))
                   if not minor_satisfies(str(chosen), b)]
            if bad:
                res["python_bounds"] = f"Python {chosen} against " + "; ".join(bad)
    if run.rc == 0:
        named = requirement_names(run)
        missing = [m for m in sorted(imported) if not (STACK_OF[m] == fw or FRAMEWORK_DISTS[m] & named
                                                      or re.search(rf"\b{m}\b", run.text.replace(str(run.cwd), "")))]
        if missing:
            res["framework_imports_covered"] = f"imports {missing}: not in the stack, not said"
    merged = [f for f in (files_read(run) + [str(r) for r in run.spec.get("requirements") or []])
              if _OPTIONAL_WORDS.search(Path(f).stem + "/") or _OPTIONAL_WORDS.search(f)]
    explicit = [f for f in merged if f"({f})" in run.out]
    if merged and run.rc == 0 and len(merged) > len(explicit):
        res["no_optional_merged"] = f"read as core: {sorted(set(merged))}"
    return res


def _python_row(out: str) -> str | None:
    m = re.search(r"^python\s+(\d+\.\d+)", out, re.M)
    return m[1] if m else None


_PATH = re.compile(r"(?<![\w=<>!~@])((?:[\w.-]+/)*[\w.-]+\.(?:txt|ya?ml|toml|cfg|lock|in)|(?:[\w.-]+/)+)(?![\w/])")


def hint_problem(run: Run, follow) -> str | None:
    import typer

    from envman.cli.main import app

    hint = run.line("hint:") or ""
    error = run.line("error:") or ""
    cmd = typer.main.get_command(app)
    init_opts = {o for p in cmd.commands["init"].params for o in getattr(p, "opts", [])}  # type: ignore[attr-defined]
    # an option named as one to pass to init must be one of init's
    for opt in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", hint):
        if opt not in init_opts and not re.search(rf"envman (?!init)\w+[^;,]*{re.escape(opt)}", hint):
            return f"names {opt}, not an option of init"
    for path in _PATH.findall(hint):
        path = path.rstrip(".")
        if path in ("envman.yaml", "envman.lock") and re.search(r"\b(create|write|add|set)\b", hint):
            if (run.folder / path).exists() or "create" in hint or "write" in hint:
                continue
        base = run.cwd
        if not (base / path).exists() and not (run.folder / path).exists():
            return f"names {path}, which does not exist from {base.name}/ or the repository"
        if not (base / path).exists() and (run.folder / path).exists() and run.folder != base \
                and "cd " not in hint and not path.startswith(run.folder.name):
            # a path relative to the repository printed to a user who stands elsewhere
            return f"names {path}, relative to the repository, not to where the user stands"
    cmd_path, flags = _command(hint)
    if cmd_path is not None and not (run.cwd / cmd_path).exists():
        return f"runs envman init {cmd_path}, which does not exist from {run.cwd.name}/"
    if follow is None or not (flags or cmd_path):
        return None
    again = follow(cmd_path, flags)
    said = " ".join(["envman init", cmd_path or "", *flags])
    if again.rc != 0 and (again.line("error:") or "") == error:
        return f"following `{said}` repeats the error"
    if again.rc == 70 or "Traceback" in again.text:
        return f"following `{said}` ends in an internal error"
    return None


def _command(hint: str) -> tuple[str | None, list[str]]:
    """The folder an ``envman init X`` in the hint names (None when it names none), and the options it passes."""
    m = re.search(r"envman init ([^\s`;,]+)", hint)
    path = m[1] if m and not m[1].startswith("-") else None
    return path, _flags(hint)


def _flags(hint: str) -> list[str]:
    """The init options a hint tells the user to pass (the first value of each), as they would type them."""
    out: list[str] = []
    m = re.search(r"envman init\s+([^;`]*)", hint)
    words: list[str] = []
    with contextlib.suppress(ValueError):
        words = shlex.split(m[1]) if m else shlex.split(" ".join(re.findall(r"--[a-z-]+(?:[ =](?:'[^']*'|\"[^\"]*\"|[^\s,;)]+))?", hint)))
    i = 0
    while i < len(words):
        w = words[i]
        if w in ("--framework", "--python", "--cuda", "--driver", "--base-image") and i + 1 < len(words):
            if w not in out:
                out += [w, words[i + 1].rstrip(",;)")]
            i += 2
            continue
        if w in ("--cpu", "--force"):
            out.append(w)
        i += 1
    return out


def measure(names: list[str] | None = None, tmp: Path | None = None, progress: bool = False) -> dict[str, dict]:
    """folder → invariant → None or why not."""
    import tempfile

    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as td:
        base = Path(tmp or td)
        for i, name in enumerate(names or folders()):
            where = base / f"r{i}"
            where.mkdir()
            copy_repo(name, where)
            run = run_init(where, [name, *ARGS])

            def follow(path, flags, name=name, i=i):
                again = base / f"f{i}"
                again.mkdir(exist_ok=True)
                copy_repo(name, again)
                return run_init(again, [path or name, *ARGS, *flags])

            results[name] = check(name, run, source_of(name), follow)
            if run.rc != 0 and not results[name]["hint_followable"]:
                # the same refusal for a user standing in the repository (`envman init` there)
                inside = run_init(where / name, [".", *ARGS])
                results[name]["hint_followable"] = hint_problem(inside, None) if inside.rc else None
            shutil.rmtree(where, ignore_errors=True)
            shutil.rmtree(base / f"f{i}", ignore_errors=True)
            if progress:
                bad = {k: v for k, v in results[name].items() if v}
                print(f"{name}: rc={run.rc} {bad or 'ok'}", flush=True)
    return results


def table(results: dict[str, dict]) -> str:
    n = len(results)
    rows = ["| invariant | hold | of |", "|---|---:|---:|"]
    for key, what in INVARIANTS.items():
        held = sum(1 for r in results.values() if not r[key])
        rows.append(f"| {what} | {held} | {n} |")
    return "\n".join(rows)


if __name__ == "__main__":
    import sys

    os.environ.setdefault("ENVMAN_MATRIX_DIR", str(REPO_ROOT / "matrices"))
    res = measure(sys.argv[1:] or None, progress=True)
    print(table(res))
