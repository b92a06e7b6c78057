#!/usr/bin/env python3
"""envman smoke test: does this Python environment match its lock, and does its GPU stack work?

Part of the portable island, carried by every image envman builds (the one-file kit
/opt/envman/kit/envman_portable.py, envman/image/kit.py; the expected stack beside it as /opt/envman/stack.json) and runnable on a host (`envman smoke --host`):
``python -m envman_portable.smoke`` with the kit on the path. Standard library only, Python 3.8+.

Exit codes:  0  every check passed, GPU checks included (or the stack is CPU-only)
             1  a check failed (or --require-gpu and no GPU visible)
             6  every non-GPU check passed, but no GPU was visible: neither pass nor fail

The JSON report goes to stdout (anything the frameworks print meanwhile goes to stderr); a human summary
goes to stderr unless --json. The code is split into observe_* (imports, runs things, records what it saw or
the error) and evaluate_*/decide (pure: observations -> checks -> exit code), so the GPU logic is tested
with recorded observations on machines without a GPU. Each framework's observer and checks are a plug-in
in frameworks/ (torch.py, tensorflow.py), found by the expected stack's framework name.
"""

from __future__ import annotations

import argparse
import ast
import glob
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
import traceback
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, cast

from . import frameworks
from .facts.commands import read_text, run_command
from .facts.packages import norm
from .frameworks.base import check, release_matches
from .frameworks.base import error as _error
from .versions import arch_covers, parse_arch, vt  # noqa: F401 - arch_covers re-exported

SCHEMA = 1
EXIT_PASS, EXIT_FAIL, EXIT_NO_GPU = 0, 1, 6
DEFAULT_EXPECT = "/opt/envman/stack.json"
NO_GPU_LINE = "GPU checks skipped: no GPU visible"
CPU_STACK_LINE = "GPU checks not applicable: the expected stack is CPU-only"


# ============================================================================ pure: GPU visibility
def gpu_visibility(dev_nodes: Iterable[str], smi_gpus: int | None,
                   nvidia_visible_devices: str | None = None) -> tuple[bool, str]:
    """Is a GPU visible to this process? Evidence: /dev/nvidiaN device nodes, or nvidia-smi listing a GPU
    (WSL2 has no device nodes). NVIDIA_VISIBLE_DEVICES alone is no evidence: CUDA base images set it to
    'all' even in containers started without GPUs. Returns (visible, evidence)."""
    nodes = sorted(n for n in dev_nodes if re.match(r"/dev/nvidia\d+\Z", n))
    evidence: list[str] = []
    if nodes:
        evidence.append("device nodes " + " ".join(nodes))
    if smi_gpus:
        evidence.append("nvidia-smi lists %d GPU(s)" % smi_gpus)
    if evidence:
        return True, "; ".join(evidence)
    why = "no /dev/nvidia[0-9]* device nodes, nvidia-smi %s" % (
        "absent" if smi_gpus is None else "lists no GPU")
    if nvidia_visible_devices not in (None, "", "void", "none"):
        why += " (NVIDIA_VISIBLE_DEVICES=%s, but the container was not given GPUs)" % nvidia_visible_devices
    return False, why


# ============================================================================ pure: expectations
def load_expect(data: object) -> dict[str, Any]:
    """Validate the expected-stack document (docs/smoke.md); raises ValueError naming every problem."""
    problems: list[str] = []
    if not isinstance(data, dict):
        raise ValueError("expected a JSON object")
    schema = data.get("schema")
    if schema != SCHEMA:
        problems.append("schema: %r, this smoke script reads schema %d%s" % (
            schema, SCHEMA, " (written by a newer envman)" if isinstance(schema, int) and schema > SCHEMA else ""))
    fw = data.get("framework")
    if fw is not None:
        if not isinstance(fw, dict):
            problems.append("framework: must be an object or null")
        else:
            for k in ("name", "version", "variant"):
                if not isinstance(fw.get(k), str) or not fw.get(k):
                    problems.append("framework.%s: missing or not a string" % k)
    for k in ("cuda", "cudnn", "nccl", "lock_hash"):
        if data.get(k) is not None and not isinstance(data.get(k), str):
            problems.append("%s: must be a string or null" % k)
    if not isinstance(data.get("python"), str):
        problems.append("python: missing or not a string like '3.11'")
    arch = data.get("arch_list", [])
    if not isinstance(arch, list) or not all(isinstance(a, str) and parse_arch(a) for a in arch):
        problems.append("arch_list: must be a list like ['sm_80', 'sm_90', 'compute_90']")
    imports = data.get("imports", [])
    if not isinstance(imports, list) or not all(
            isinstance(i, (list, tuple)) and len(i) == 2 and isinstance(i[0], str) and (i[1] is None or isinstance(i[1], str))
            for i in imports):
        problems.append("imports: must be a list of [distribution, module or null] pairs")
    problems += _strings_problems("scripts", data.get("scripts", []), "console script names")
    problems += _strings_problems("command", data.get("command", []), "the image's command words")
    if problems:
        raise ValueError("; ".join(problems))
    defaults: dict[str, Any] = {"arch_list": [], "imports": [], "scripts": [], "command": [],
                                **dict.fromkeys(("framework", "cuda", "cudnn", "nccl", "lock_hash"))}
    return {**data, **{k: v for k, v in defaults.items() if k not in data}}


def _strings_problems(key: str, value: object, what: str) -> list[str]:
    if isinstance(value, list) and all(isinstance(x, str) and x for x in value):
        return []
    return ["%s: must be a list of %s" % (key, what)]


def stack_is_cpu_only(expect: dict[str, Any]) -> bool:
    fw: Any = expect.get("framework")  # an object or null
    return bool(fw) and fw.get("variant") == "cpu"


# ============================================================================ pure: evaluation
def evaluate_python(expect: dict[str, Any], observed_version: str) -> dict[str, Any]:
    ok = release_matches(expect["python"], observed_version) and \
        len(vt(observed_version)) >= len(vt(expect["python"]))
    return check("python", ok, expect["python"], observed_version)


def evaluate_imports(expect: dict[str, Any], observed: dict[str, Any]) -> list[dict[str, Any]]:
    """observed: {module: None on success, the error text, or {"error", "host"} when the error was the refusal of
    a host that requires this distribution (observe_host_refusal)}: a warning, not a failure."""
    out: list[dict[str, Any]] = []
    for dist, module in expect["imports"]:
        err = observed.get(module, "not attempted")
        if isinstance(err, dict):
            out.append(dict(check("import " + module, False, "imports", err.get("error"),
                                  "from distribution %s: raised by %s, which requires it and imports: a plug-in its "
                                  "host loads itself, not importable on its own" % (dist, err.get("host"))),
                            status="warn"))
            continue
        out.append(check("import " + module, err is None, "imports", "ok" if err is None else err,
                         "from distribution " + dist + _remedy(err)))
    return out


# modules a package may import without declaring what provides them, which a newer release removed
_REMOVED = {
    "pkg_resources": "setuptools 82.0.0 removed pkg_resources (setuptools NEWS.rst, v82.0.0), and a package imports it "
                     "without requiring setuptools: add 'setuptools<82' to envman.yaml packages: and lock again",
    "distutils": "Python 3.12 removed distutils (PEP 632); setuptools provides it again: add 'setuptools' to "
                 "envman.yaml packages: and lock again",
    # measured 2026-12-02 (Real-ESRGAN's basicsr 1.4.2, its newest release): torchvision 0.16.2 has it, with a
    # warning that 0.17 removes it; torch 2.14.1's torchvision has not
    "torchvision.transforms.functional_tensor": "torchvision 0.17 removed torchvision.transforms.functional_tensor "
                                                "(deprecated in 0.15): torchvision 0.16 has it, with torch 2.1 — pass "
                                                "--framework 'torch==2.1.*' to envman init",
}


def _remedy(err: Any) -> str:
    m = re.search(r"No module named '([\w.]+)'", err) if isinstance(err, str) else None
    name = m.group(1) if m else ""
    known = next((k for k in (name, name.split(".")[0]) if k in _REMOVED), None)
    return ": " + _REMOVED[known] if known else ""


def decide(checks: list[dict[str, Any]], gpu_visible: bool, expect: dict[str, Any],
           require_gpu: bool) -> tuple[int, str, list[str]]:
    """(exit code, status, notes): any failure -> 1; else no GPU visible for a GPU stack -> 6 (1 with
    --require-gpu); else 0."""
    cpu_only = stack_is_cpu_only(expect)
    notes = [CPU_STACK_LINE] if cpu_only else [] if gpu_visible else [NO_GPU_LINE]
    if require_gpu and not gpu_visible:
        checks.append(check("gpu required", False, "a visible GPU", "none", "--require-gpu", gpu=True))
    if any(c["status"] == "fail" for c in checks):
        return EXIT_FAIL, "failed", notes
    if not gpu_visible and not cpu_only:
        return EXIT_NO_GPU, "no-gpu", notes
    return EXIT_PASS, "passed", notes


# Doctor findings about GPU visibility are this script's own "no GPU visible" verdict (exit 6), not failures.
DOCTOR_GPU_VISIBILITY = ("container-no-gpu", "docker-no-nvidia", "no-driver", "nvidia-smi-failed")


def evaluate_doctor(findings: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """envman doctor's verdicts on this environment (the image carries its checks): an error fails the smoke
    test, except the GPU-visibility ones, which decide() reports as 'no GPU visible'."""
    if findings is None:
        return []
    errors = [f for f in findings if f.get("severity") == "error" and f.get("check") not in DOCTOR_GPU_VISIBILITY]
    detail = "; ".join("[%s] %s" % (f.get("check"), f.get("verdict")) for f in errors) or \
        "%d finding(s), no error" % len(findings)
    return [check("doctor", not errors, "no error", "%d error(s)" % len(errors), detail)]


def evaluate_scripts(expect: dict[str, Any], observed: dict[str, str | None]) -> list[dict[str, Any]]:
    """The project's console scripts answer ``--help`` (observed: name → None, or what went wrong)."""
    return [check(name + " --help", observed.get(name) is None, "scripts", "ok" if observed.get(name) is None
                  else observed.get(name)) for name in expect.get("scripts", [])]


def evaluate(expect: dict[str, Any], env_obs: dict[str, Any], fw_obs: dict[str, Any], import_obs: dict[str, Any],
             require_gpu: bool = False, doctor: list[dict[str, Any]] | None = None,
             script_obs: dict[str, str | None] | None = None, entry_obs: dict[str, Any] | None = None
             ) -> dict[str, Any]:
    """Every check from the observations, and the verdict. Pure."""
    checks = [evaluate_python(expect, env_obs["python"])]
    fw = expect["framework"]
    visible = env_obs["gpu_visible"]
    plugin = frameworks.get(fw["name"]) if fw is not None else None
    if plugin is not None:
        checks += plugin.evaluate(expect, fw_obs)
    elif fw is not None:
        checks.append(check("framework", False, fw["name"], None, "the smoke test knows " + ", ".join(frameworks.names())))
    checks += evaluate_imports(expect, import_obs)
    checks += evaluate_scripts(expect, script_obs or {})
    checks += evaluate_entry(entry_obs or {})
    checks += evaluate_doctor(doctor)
    if visible and plugin is not None and not stack_is_cpu_only(expect):
        checks += plugin.evaluate_gpu(expect, fw_obs)
    code, status, notes = decide(checks, visible, expect, require_gpu)
    return {"checks": checks, "exit_code": code, "status": status, "notes": notes}


# ============================================================================ observation (impure)
def observe_environment() -> dict[str, Any]:
    nodes = glob.glob("/dev/nvidia*")
    smi = shutil.which("nvidia-smi")
    smi_lines = [ln for ln in run_command([smi, "-L"], 20).out.splitlines() if ln.startswith("GPU ")] if smi else []
    smi_gpus = len(smi_lines) if smi else None
    nvd = os.environ.get("NVIDIA_VISIBLE_DEVICES")
    visible, evidence = gpu_visibility(nodes, smi_gpus, nvd)
    return {"python": platform.python_version(), "gpu_visible": visible, "gpu_evidence": evidence,
            "nvidia_smi": smi_lines, "nvidia_visible_devices": nvd, "platform": platform.platform()}


def top_level_modules(dist: str) -> list[str]:
    """The public top-level modules a distribution installs (top_level.txt, else its RECORD)."""
    from importlib import metadata

    try:
        d = metadata.distribution(dist)
    except Exception:
        return []
    return _dist_modules(d)


def _dist_modules(d: Any) -> list[str]:
    names = (d.read_text("top_level.txt") or "").split()
    if not names:
        for f in d.files or []:
            path = str(f)
            top = path.split("/")[0]
            if top.endswith((".dist-info", ".data", ".pth")) or top in ("..", "__pycache__", "bin"):
                continue
            if "/" not in path and not path.endswith((".py", ".so", ".pyd")):
                continue  # a top-level data file (shortuuid's COPYING), not a module
            names.append(top.split(".")[0] if "/" not in path else top)
    return sorted({n for n in names if n and not n.startswith("_") and n.replace("_", "a").isalnum()})


def expand_imports(expect: dict[str, Any]) -> dict[str, Any]:
    """[dist, null] means "whatever that distribution installs": every public top-level module of it."""
    out: list[list[str]] = []
    for dist, module in expect["imports"]:
        found = [module] if module is not None else top_level_modules(dist) or [dist.replace("-", "_")]
        out.extend([dist, m] for m in found)
    expect["imports"] = out
    return expect


def kit_knowledge() -> str | None:
    """The matrix knowledge the one-file kit carries (KIT_KNOWLEDGE in its top module, envman/image/kit.py); None
    where this island is not a kit (envman's own package on the host)."""
    text = getattr(sys.modules.get((__package__ or "").split(".")[0]), "KIT_KNOWLEDGE", None)
    return text if isinstance(text, str) else None


def observe_doctor(project_dir: str | None = None) -> list[dict[str, Any]] | None:
    """Run envman doctor's probes and checks from this island, with the matrix knowledge the kit carries. None
    when there is no knowledge (not a kit)."""
    text = kit_knowledge()
    if text is None:
        return None
    try:
        from .doctor.checks import run_checks
        from .doctor.knowledge import Knowledge
        from .facts.gather import gather_facts

        knowledge = Knowledge.from_dict(json.loads(text))
        facts = gather_facts(project_dir or os.getcwd(), python=sys.executable)
        return [f.to_dict() for f in run_checks(facts, knowledge)]
    except Exception as exc:  # the doctor is a bonus: its own failure is reported, never fatal
        return [{"severity": "warn", "check": "doctor-failed", "verdict": _error(exc), "remedy": ""}]


def observe_imports(expect: dict[str, Any]) -> dict[str, Any]:
    import importlib

    out: dict[str, Any] = {}
    for dist, module in expect["imports"]:
        sys.stderr.write("smoke: importing %s\n" % module)  # what a crash (a signal: no report) last began
        sys.stderr.flush()
        try:
            importlib.import_module(module)
            out[module] = None
        except BaseException as exc:  # a broken extension can raise SystemExit & co
            if isinstance(exc, KeyboardInterrupt):
                raise
            host = observe_host_refusal(dist, exc)
            out[module] = _error(exc) if host is None else {"error": _error(exc), "host": host}
    return out


def observe_host_refusal(dist: str, exc: BaseException) -> str | None:
    """The distribution ("tensorflow 2.12.1") whose code raised ``exc`` while ``dist`` was imported, when it requires
    ``dist`` and imports itself: a host refusing to load its own plug-in a second time (TensorFlow's built-in
    ``gs`` file system makes importing tensorflow-io-gcs-filesystem raise AlreadyExistsError). None otherwise: an
    ImportError (a missing module or symbol), or an error raised in the package's own code or in a package that does
    not require it, is the package's fault."""
    if isinstance(exc, ImportError):
        return None
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    top = str(tb.tb_frame.f_globals.get("__name__") or "").split(".")[0] if tb is not None else ""
    try:
        import importlib
        from importlib import metadata

        for d in metadata.distributions():
            name = d.metadata["Name"] or ""
            requires = {norm(re.split(r"[^A-Za-z0-9._-]", r.strip(), maxsplit=1)[0]) for r in d.requires or []}
            if top and norm(name) != norm(dist) and norm(dist) in requires and top in _dist_modules(d):
                importlib.import_module(top)  # the host itself imports (else the failure is the host's: loud)
                return "%s %s" % (name, d.version)
    except BaseException as host_exc:  # the host's own import failing: no excuse, the error stands
        if isinstance(host_exc, KeyboardInterrupt):
            raise
    return None


def observe_scripts(expect: dict[str, Any], timeout: float = 120) -> dict[str, str | None]:
    """``NAME --help`` for each console script: None when it exits 0, else why not."""
    out: dict[str, str | None] = {}
    for name in expect.get("scripts", []):
        path = shutil.which(name)
        if path is None:
            out[name] = "not on PATH"
            continue
        try:
            p = subprocess.run([path, "--help"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                               universal_newlines=True, timeout=timeout, check=False)
        except (OSError, subprocess.SubprocessError) as exc:
            out[name] = _error(exc)
            continue
        tail = (p.stderr or p.stdout).strip().splitlines()[-1:] if p.returncode else []
        out[name] = None if p.returncode == 0 else "exit %d%s" % (p.returncode, (": " + tail[0][:200]) if tail else "")
    return out


# ============================================================================ the entry point's imports
ENTRY_DEFAULTS = ("train.py", "main.py")  # no command: the script a user of the repository runs first
MAX_ENTRY_FILES = 200  # of the project's own files followed from the entry point
_CATCHES = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


def entry_script(command: Sequence[str], cwd: str) -> str | None:
    """The project's script the image's command runs (relative to ``cwd``): its first ``*.py`` word, else the module
    after ``-m`` when it is the project's; with no command, the first of ENTRY_DEFAULTS that exists."""
    for i, word in enumerate(command):
        if word.endswith(".py"):
            return word
        if word == "-m" and i + 1 < len(command):
            files = _module_files(cwd, command[i + 1].split("."))
            if files:
                return os.path.relpath(files[-1], cwd)
    return None if command else next((n for n in ENTRY_DEFAULTS if os.path.isfile(os.path.join(cwd, n))), None)


def _module_files(base: str, parts: Sequence[str]) -> list[str]:
    """The project's files importing ``parts`` from ``base`` runs: each package's __init__.py, then the module."""
    out: list[str] = []
    for i, part in enumerate(parts):
        d = os.path.join(base, part)
        if os.path.isfile(os.path.join(d, "__init__.py")):
            out.append(os.path.join(d, "__init__.py"))
        elif os.path.isfile(d + ".py") and i == len(parts) - 1:
            return out + [d + ".py"]
        elif not os.path.isdir(d):
            break
        base = d
    return out


def top_imports(body: list[Any]) -> Iterator[tuple[str, int, tuple[str, ...], int]]:
    """(module, level, names, line) of each import a module runs when it is imported: not in a function, nor made
    optional by a handler of ImportError, by TYPE_CHECKING or by a Python-version or platform test."""
    for s in body:
        if isinstance(s, ast.Import):
            yield from ((a.name, 0, (), s.lineno) for a in s.names)
        elif isinstance(s, ast.ImportFrom):
            yield s.module or "", s.level or 0, tuple(a.name for a in s.names), s.lineno
        elif isinstance(s, ast.If) and not {getattr(n, "id", getattr(n, "attr", "")) for n in ast.walk(s.test)} & {
                "TYPE_CHECKING", "version_info", "platform", "system"}:
            yield from top_imports(s.body + s.orelse)
        elif hasattr(s, "handlers"):  # try (and except*): the handler's imports run only on an error
            optional = any(_catches(h.type) for h in s.handlers)
            yield from top_imports(([] if optional else s.body) + s.orelse + s.finalbody)
        elif isinstance(s, (ast.With, ast.For, ast.While, ast.ClassDef)):
            yield from top_imports(s.body + getattr(s, "orelse", []))


def _catches(node: Any) -> bool:
    if node is None:
        return True
    names = node.elts if isinstance(node, ast.Tuple) else [node]
    return any(getattr(n, "attr", getattr(n, "id", "")) in _CATCHES for n in names)


def entry_imports(entry: str, cwd: str, seen: set[str] | None = None) -> list[tuple[str, str]]:
    """(module, "file:line" of its first import) of every module from outside the project that the entry script
    imports at top level, following the project's own modules it imports (at most MAX_ENTRY_FILES files: ``seen``)."""
    roots = [os.path.dirname(os.path.join(cwd, entry)) or cwd, cwd]
    todo, out = [os.path.join(cwd, entry)], {}  # type: list[str], dict[str, str]
    seen = set() if seen is None else seen
    while todo and len(seen) < MAX_ENTRY_FILES:
        path = os.path.normpath(todo.pop(0))
        if path in seen:
            continue
        seen.add(path)
        text = read_text(path)  # a FIFO in a module's place would block: None, as an unreadable file
        try:
            body = ast.parse(text, path).body if text is not None else []
        except (SyntaxError, ValueError, RecursionError, MemoryError):  # 1+1+…+1 200,000 long: ast's recursion
            continue
        for module, level, names, line in top_imports(body):
            parts = module.split(".") if module else []
            base = os.path.dirname(path) if level else next(
                (r for r in roots if _module_files(r, parts[:1]) or os.path.isdir(os.path.join(r, parts[0]))), None)
            for _ in range(max(level - 1, 0)):
                base = os.path.dirname(base or "")
            if base is None:
                out.setdefault(module, "%s:%d" % (os.path.relpath(path, cwd), line))
                continue
            todo += _module_files(base, parts) + [f for n in names for f in _module_files(base, parts + [n])[-1:]]
    return sorted(out.items(), key=lambda kv: kv[0])


def distribution_of(module: str, names: dict[str, str]) -> str | None:
    """The distribution that provides ``module`` (matrices/import_names.yaml, as the kit carries it; else the one of
    its top-level name); None for the standard library's."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in names:
            return names[".".join(parts[:n])]
    if parts[0] in getattr(sys, "stdlib_module_names", ()) or parts[0] in sys.builtin_module_names:
        return None
    return norm(parts[0])


def observe_entry(expect: dict[str, Any], cwd: str) -> dict[str, Any]:
    """The entry script (found: whether it is there), and each module it imports (entry_imports) with where, its
    distribution and what importing it gave (None: it imported)."""
    entry = entry_script(expect.get("command") or [], cwd)
    if entry is None or not os.path.isfile(os.path.join(cwd, entry)):
        return {"entry": entry, "found": False, "modules": [], "where": cwd}
    names = getattr(sys.modules.get((__package__ or "").split(".")[0]), "KIT_IMPORT_NAMES", None) or {}
    found = entry_imports(entry, cwd)
    errors = observe_imports({"imports": [(m, m) for m, _ in found]})
    return {"entry": entry, "found": True, "where": cwd,
            "modules": [(m, where, distribution_of(m, names), errors.get(m)) for m, where in found]}


def evaluate_entry(obs: dict[str, Any]) -> list[dict[str, Any]]:
    """One check for the entry point, and one for each module it imports that does not import."""
    entry = obs.get("entry")
    if entry is None:
        return []
    if not obs.get("found"):
        return [dict(check("entry point " + entry, False, "a file", "not found in " + str(obs.get("where")),
                           "its imports were not checked"), status="warn")]
    modules = obs["modules"]
    bad = [m for m in modules if m[3] is not None]
    out = [check("entry point " + entry, not bad, "its imports import",
                 "%d of %d modules import" % (len(modules) - len(bad), len(modules)))]
    for module, where, dist, err in bad:
        said = "from the standard library" if dist is None else "from distribution " + dist
        if dist and "No module named '%s'" % module.split(".")[0] in err:
            said = "distribution %s provides it, and the image does not hold it: add %s to the project's " \
                "requirements (or packages: in envman.yaml) and lock again" % (dist, dist)
        out.append(check("import " + module, False, "imports", err, "%s imports it; %s" % (
            where, _remedy(err)[2:] or said)))
    return out


@contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Frameworks print (at the C level too); the report must be the only thing on stdout."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


# ============================================================================ report
def run_smoke(expect_path: str, require_gpu: bool = False) -> dict[str, Any]:
    started = time.time()
    report: dict[str, Any] = {"schema": SCHEMA, "tool": "envman-smoke", "expect_file": expect_path,
                              "require_gpu": require_gpu}
    try:
        with open(expect_path, encoding="utf-8") as fh:
            expect = load_expect(json.load(fh))
    except (OSError, ValueError) as exc:
        report.update(checks=[check("expected stack", False, expect_path, None, _error(exc))],
                      exit_code=EXIT_FAIL, status="failed", notes=[], gpu={}, lock_hash=None)
        return report
    report["lock_hash"] = expect.get("lock_hash")
    with stdout_to_stderr():
        env_obs = observe_environment()
        fw = expect["framework"]
        plugin = frameworks.get(fw["name"]) if fw else None
        fw_obs = plugin.observe(env_obs["gpu_visible"], env_obs["gpu_evidence"]) if plugin is not None else {}
        import_obs = observe_imports(expand_imports(expect))
        script_obs = observe_scripts(expect)
        entry_obs = observe_entry(expect, os.getcwd())
        doctor = observe_doctor()
    report.update(evaluate(expect, env_obs, fw_obs, import_obs, require_gpu, doctor, script_obs, entry_obs))
    if doctor is not None:
        report["doctor"] = doctor
    report["gpu"] = {"visible": env_obs["gpu_visible"], "evidence": env_obs["gpu_evidence"],
                     "nvidia_smi": env_obs["nvidia_smi"], "devices": fw_obs.get("devices", [])}
    report["observed"] = {"python": env_obs["python"], "platform": env_obs["platform"],
                          **{k: fw_obs.get(k) for k in ("version", "cuda", "cudnn", "nccl", "arch_list",
                                                        "build_cuda", "build_cudnn") if k in fw_obs}}
    report["duration_s"] = round(time.time() - started, 2)
    return report


def format_summary(report: dict[str, Any]) -> str:
    lines: list[str] = []
    for c in report.get("checks", []):
        val = c["observed"] if c["observed"] is not None else ""
        want = "" if c["status"] != "fail" or c["expected"] is None else " (expected %s)" % (c["expected"],)
        detail = (" - " + c["detail"]) if c["detail"] and c["status"] != "pass" else ""
        lines.append("  %-4s  %-32s %s%s%s" % (c["status"].upper(), c["name"], val, want, detail))
    lines += report.get("notes", [])
    word = {"passed": "passed", "failed": "FAILED", "no-gpu": "passed without GPU checks"}.get(report["status"])
    lines.append("smoke test %s (exit %d)" % (word, report["exit_code"]))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="envman smoke test of a Python/CUDA/framework stack")
    ap.add_argument("--expect", default=DEFAULT_EXPECT, help="expected-stack JSON (default %(default)s)")
    ap.add_argument("--require-gpu", action="store_true", help="no visible GPU is a failure (exit 1), not exit 6")
    ap.add_argument("--json", action="store_true", help="only the JSON report (no summary on stderr)")
    args = ap.parse_args(argv)
    try:
        report = run_smoke(args.expect, args.require_gpu)
    except Exception:  # the report must come out whatever broke
        report = {"schema": SCHEMA, "tool": "envman-smoke", "status": "failed", "exit_code": EXIT_FAIL, "notes": [],
                  "checks": [check("smoke script", False, None, None, traceback.format_exc()[-1500:])]}
    if not args.json:
        sys.stderr.write(format_summary(report) + "\n")
    sys.stdout.write(json.dumps(report, indent=2, sort_keys=True, default=str) + "\n")
    sys.stdout.flush()
    return cast(int, report["exit_code"])


if __name__ == "__main__":
    sys.exit(main())
