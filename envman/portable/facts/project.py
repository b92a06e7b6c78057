"""The project's envman.lock, read defensively for the drift check (plain json)."""

from __future__ import annotations

import json
import os
import re
from typing import Any

from .commands import read_text

LOCK_FILE = "envman.lock"
STACK_KEYS = ("cuda", "cudnn", "nccl", "python", "min_driver", "min_driver_minor_compat")
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)", re.M)


DEPENDENCY_FILES = ("envman.yaml", "requirements.txt", "pyproject.toml", "setup.py", "environment.yml", "Pipfile")


def probe_lock(project_dir: str) -> dict[str, Any] | None:
    """None when the directory has no envman.lock and is no project (nothing to drift from); ``{path, missing,
    files}`` when it has dependency files (or an envman.yaml) but no lock yet."""
    path = os.path.join(project_dir, LOCK_FILE)
    if not os.path.exists(path):
        files = [f for f in DEPENDENCY_FILES if os.path.isfile(os.path.join(project_dir, f))]
        return {"path": path, "missing": True, "files": files} if files else None
    text = read_text(path, 8 << 20)
    if text is None:
        return {"path": path, "error": "cannot be read"}
    try:
        data = json.loads(text)
    except ValueError as exc:
        return {"path": path, "error": f"not JSON ({exc})"}
    if not isinstance(data, dict) or not isinstance(data.get("stack"), dict):
        return {"path": path, "error": "no 'stack' in it (a layout this envman does not know)"}
    stack = data["stack"]
    lock: dict[str, Any] = {"path": path, "lock_version": data.get("lock_version")}
    fw = stack.get("framework")
    if isinstance(fw, dict):
        lock["framework"] = {k: fw.get(k) for k in ("name", "version", "variant", "index_url") if fw.get(k) is not None}
    lock.update({k: str(stack[k]) for k in STACK_KEYS if isinstance(stack.get(k), (str, int, float))})
    lock.update({k: [str(a) for a in stack[k]] for k in ("arch_list", "ptx") if isinstance(stack.get(k), list)})
    if isinstance(stack.get("companions"), dict):
        lock["companions"] = {str(k): v for k, v in stack["companions"].items() if v}
    base = data.get("base_image")
    if isinstance(base, dict) and isinstance(base.get("kind"), str):
        lock["base_kind"] = base["kind"]
    py_lock: dict[str, Any] = data["python_lock"] if isinstance(data.get("python_lock"), dict) else {}
    req = py_lock.get("requirements")
    lock.update({"unlocked": True} if py_lock and req is None else {})  # `envman init --no-lock`: no Python lock yet
    if isinstance(req, str):
        pins = read_pins(os.path.join(project_dir, req))
        if pins:
            lock["requirements"] = req
            lock["packages"] = pins
    return lock


def read_pins(path: str) -> dict[str, str]:
    """``name==version`` pins of a requirements lock (uv pip compile output)."""
    text = read_text(path, 16 << 20) or ""
    return {re.sub(r"[-_.]+", "-", m.group(1)).lower(): m.group(2) for m in _PIN.finditer(text)}


# Packages that compile CUDA code when pip installs them from source (their PyPI release is an sdist, or a wheel
# only for some torch/CUDA pairs): a project that lists one is about to run nvcc.
SOURCE_BUILDS = ("flash-attn", "apex", "mamba-ssm", "causal-conv1d", "deepspeed", "xformers")
INTENT_FILES = ("requirements.txt", "requirements-gpu.txt", "requirements-dev.txt", "requirements/base.txt",
                "pyproject.toml", "setup.py", "environment.yml", "environment.yaml")
_INTENT = re.compile(r"(?<![\w.-])(flash[-_]attn|apex|mamba[-_]ssm|causal[-_]conv1d|deepspeed|xformers)"
                     r"(?![\w-])|github\.com/NVIDIA/(apex)\b", re.I)
DOCKERFILE_NAMES = re.compile(r"^(Dockerfile([.-][\w.-]+)?|[\w.-]+\.(Dockerfile|dockerfile)|Containerfile)\Z")


# pyproject.toml tables whose requirements an install takes only when asked for (`pip install .[train]`, a uv or
# Poetry group): an extra, not what `pip install .` builds
_OPTIONAL_TABLE = re.compile(r"^(project\.optional-dependencies|dependency-groups|tool\.poetry\.dev-dependencies|"
                             r"tool\.poetry\.group\.([\w.-]+)\.dependencies|tool\.pdm\.dev-dependencies)\Z")
_TABLE = re.compile(r"^\[\[?\s*([^\]]+?)\s*\]\]?\Z")
_KEY = re.compile(r"^\"?([\w.-]+)\"?\s*=(?!=)")
_REQUIRED_TABLES = ("project", "build-system", "tool.poetry.dependencies")
_KEYED = ("project.optional-dependencies", "dependency-groups", "tool.pdm.dev-dependencies")  # keys: extras, groups


def read_build_intent(project_dir: str) -> list[dict[str, str]]:
    """``[{package, file, line}]``: the CUDA source builds the project's requirement files name (`pip install -r`
    or `pip install .` will compile them), with ``extra`` (its name) where only an optional extra or group of
    pyproject.toml names it (a Poetry line marked ``optional = true``: "optional"); [] when its files name none."""
    out: dict[str, dict[str, str]] = {}
    for name in INTENT_FILES:
        text = read_text(os.path.join(project_dir, name), 1 << 20)
        table, key = "", ""
        for line in (text or "").splitlines():
            code = line.split("#", 1)[0].strip()
            t, k = _TABLE.match(code), _KEY.match(code)
            table, key = (t.group(1), "") if t and name.endswith(".toml") else (table, k.group(1) if k else key)
            m = _INTENT.search(code)
            if not code or not m:
                continue
            pkg = re.sub(r"[-_.]+", "-", (m.group(1) or m.group(2))).lower()
            where = _section(name, table, key, code)
            if where is None:
                continue
            entry = {"package": pkg, "file": name, "line": code[:200], **where}
            if pkg not in out or ("extra" in out[pkg] and "extra" not in entry):  # a required line wins over an extra
                out[pkg] = entry
    return list(out.values())


def _section(file: str, table: str, key: str, code: str) -> dict[str, str] | None:
    """{} for a requirement an install takes, {"extra": name} for an optional one, None for a pyproject.toml line
    that is no requirement ([tool.uv]'s settings, its sources and metadata name packages too)."""
    if not file.endswith(".toml"):
        return {}
    opt = _OPTIONAL_TABLE.match(table)
    if opt:
        return {"extra": opt.group(2) or (key if table in _KEYED else "") or "dev"}
    if table not in _REQUIRED_TABLES:
        return None
    return {"extra": "optional"} if re.search(r"\boptional\s*=\s*true\b", code) else {}


# First-level directories whose subdirectories hold Dockerfiles too (docker/docker-cuda/Dockerfile in LlamaFactory,
# dockerfiles/XAgentGen/Dockerfile in XAgent); other first-level directories are read one level deep.
_DOCKER_DIRS = re.compile(r"docker|container|deploy", re.I)
_SKIP_DIRS = re.compile(r"^(\.(?!devcontainer$).*|node_modules|venv|env|site-packages|__pycache__|build|dist)\Z")
MAX_DIRS = 64


def _dockerfile_dirs(project_dir: str) -> list[str]:
    """Relative directories to look in: the top level, first-level ones, docker-ish subdirectories."""
    out = [""]
    try:
        top = sorted(n for n in os.listdir(project_dir) if os.path.isdir(os.path.join(project_dir, n)))
    except OSError:
        return out
    for n in top:
        if _SKIP_DIRS.match(n):
            continue
        out.append(n)
        if _DOCKER_DIRS.search(n):
            try:
                out += [os.path.join(n, m) for m in sorted(os.listdir(os.path.join(project_dir, n)))
                        if os.path.isdir(os.path.join(project_dir, n, m)) and not m.startswith(".")]
            except OSError:
                pass
    return out[:MAX_DIRS]


def read_dockerfiles(project_dir: str, limit: int = 16) -> list[dict[str, Any]]:
    """``[{path, from}]``: the project's Dockerfiles (bounded search) and the images their stages start FROM."""
    from ..dockerfile import DockerfileTooLarge, base_images

    out: list[dict[str, Any]] = []
    for sub in _dockerfile_dirs(project_dir):
        d = os.path.join(project_dir, sub)
        try:
            names = sorted(os.listdir(d))
        except OSError:
            continue
        for n in names:
            if DOCKERFILE_NAMES.match(n) and len(out) < limit and os.path.isfile(os.path.join(d, n)):
                text = read_text(os.path.join(d, n), 1 << 20)
                if text is not None:
                    rec: dict[str, Any] = {"path": os.path.join(sub, n) if sub else n}
                    try:
                        rec["from"] = base_images(text)
                    except DockerfileTooLarge as exc:  # recorded, not followed: what it starts FROM is unknown
                        rec["error"] = str(exc)
                    out.append(rec)
    return out
