"""envman.yaml (or ``[tool.envman]`` in pyproject.toml) → a validated ``ProjectSpec``.

Every value that can reach a generated file is validated here, at the boundary: names, package and apt
specs, env names and values, the command. Errors name the file and the field, with the closest valid
key as a hint.
"""

from __future__ import annotations

import difflib
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement

from envman import frameworks
from envman.errors import SpecError
from envman.inputs import MAX_VALUE
from envman.redact import redact

SPEC_FILE = "envman.yaml"
KEYS = (
    "name", "python", "framework", "companions", "requirements", "packages", "system_packages",
    "targets", "driver", "cpu", "cuda_devel", "command", "env", "cuda", "profiles", "base_image",
    "install_project", "index_urls", "find_links", "workload", "sources",
)
# `workload:` — what `envman fit` needs to say whether training fits the targets (the keys of its options)
WORKLOAD_KEYS: dict[str, type | tuple[type, ...]] = {
    "model": str, "params": (int, float), "method": str, "precision": str, "optimizer": str, "batch": int,
    "seq": int, "image_size": int, "grad_checkpointing": bool, "lora_rank": int, "lora_targets": list, "gpus": int,
    "shard": str, "global_batch": int, "attention": str, "stack": str,
}
PROFILE_KEYS = ("targets", "driver", "cpu", "cuda", "framework", "python")

MAX_IMAGE_NAME = 255  # Docker's limit on a repository name (distribution/reference NameTotalLengthMax)
_NAME = re.compile(r"^[a-z0-9]+(?:[._-][a-z0-9]+)*$")  # a Docker repository path component
_APT = re.compile(r"^[a-z0-9][a-z0-9+.-]*(?:=[A-Za-z0-9.+:~_-]+)?$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# C0/C1 controls and Unicode line separators: nothing that any reader could take for a line break
_CTRL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_IMAGE_REF = re.compile(r"^[a-z0-9][a-z0-9._/:-]*(?:@sha256:[0-9a-f]{64})?$")
_REL_PATH = re.compile(r"^[A-Za-z0-9_./-]+$")


@dataclass(frozen=True)
class Profile:
    name: str
    targets: tuple[str, ...] = ()
    driver: str | None = None
    cpu: bool = False
    cuda: str | None = None
    framework: str | None = None
    python: str | None = None


@dataclass(frozen=True)
class ProjectSpec:
    name: str
    python: str | None = None
    framework: str | None = None
    companions: tuple[str, ...] = ()
    requirements: tuple[str, ...] = ()
    packages: tuple[str, ...] = ()
    system_packages: tuple[str, ...] = ()
    targets: tuple[str, ...] = ()
    driver: str | None = None
    cpu: bool = False
    cuda_devel: bool = False
    cuda: str | None = None
    command: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    profiles: tuple[Profile, ...] = ()
    base_image: str | None = None  # override (private mirror, air-gapped site, tests); must provide python3 + venv
    # install the project itself into the image: None = when it is a package; a list in envman.yaml = yes, with those extras
    install_project: bool | None = None
    project_extras: tuple[str, ...] = ()
    index_urls: tuple[str, ...] = ()  # extra indexes the repository names, for its non-framework packages
    find_links: tuple[str, ...] = ()
    workload: tuple[tuple[str, Any], ...] = ()  # the training run `envman fit` judges (model, method, precision …)
    sources: tuple[str, ...] = ()  # files init copied packages from (pyproject.toml, setup.py …): lock inputs
    source: str = SPEC_FILE  # where it was read from, for messages

    def to_data(self) -> dict[str, Any]:
        """The canonical, ordered form written to envman.yaml and hashed into the inputs hash."""
        d: dict[str, Any] = {"name": self.name}
        if self.python:
            d["python"] = self.python
        d["framework"] = self.framework
        for key, items in (("companions", self.companions), ("requirements", self.requirements),
                           ("packages", self.packages), ("system_packages", self.system_packages)):
            if items:
                d[key] = list(items)
        if self.cpu:
            d["cpu"] = True
        else:
            d["targets"] = list(self.targets)
            if self.driver:
                d["driver"] = self.driver
        d.update({k: v for k, v in (("cuda", self.cuda), ("cuda_devel", self.cuda_devel or None)) if v})
        if self.command:
            d["command"] = list(self.command)
        if self.env:
            d["env"] = dict(self.env)
        if self.base_image:
            d["base_image"] = self.base_image
        if self.install_project is not None:
            d["install_project"] = list(self.project_extras) if self.project_extras else self.install_project
        d.update({k: list(v) for k, v in (("index_urls", self.index_urls), ("find_links", self.find_links)) if v})
        if self.workload:
            d["workload"] = {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.workload}
        if self.sources:
            d["sources"] = list(self.sources)
        if self.profiles:
            d["profiles"] = {
                p.name: {k: (list(v) if isinstance(v, tuple) else v) for k, v in (
                    ("targets", p.targets), ("driver", p.driver), ("cpu", p.cpu or None), ("cuda", p.cuda),
                    ("framework", p.framework), ("python", p.python)) if v}
                for p in self.profiles
            }
        return d


class _V:
    def __init__(self, source: str):
        self.source = source

    def fail(self, fld: str, problem: str, hint: str | None = None) -> SpecError:
        return SpecError(redact(f"{self.source}: {fld}: {problem}"), hint=hint)  # a value may carry a URL token

    def text(self, data: dict, key: str, fld: str | None = None) -> str | None:
        v = data.get(key)
        if v is None:
            return None
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            v = str(v)
        if not isinstance(v, str):
            raise self.fail(fld or key, f"expected a string, got {type(v).__name__}")
        if _CTRL.search(v):
            raise self.fail(fld or key, f"{v!r} contains a control character (newline, tab …)", "keep values on one line")
        self.bound(fld or key, v)
        return v.strip()

    def bound(self, fld: str, v: str) -> None:
        if len(v) > MAX_VALUE:
            raise self.fail(fld, f"{len(v)} characters, over envman's limit of {MAX_VALUE} for one value",
                            "keep values short; put long content in a file the image copies")

    def flag(self, data: dict, key: str) -> bool:
        v = data.get(key, False)
        if not isinstance(v, bool):
            raise self.fail(key, f"expected true or false, got {v!r}")
        return v

    def strings(self, data: dict, key: str, fld: str | None = None) -> tuple[str, ...]:
        v = data.get(key)
        if v is None:
            return ()
        if isinstance(v, str):
            v = [v]
        if not isinstance(v, list):
            raise self.fail(fld or key, f"expected a list of strings, got {type(v).__name__}")
        out = []
        for i, item in enumerate(v):
            if isinstance(item, (int, float)) and not isinstance(item, bool):
                item = str(item)
            if not isinstance(item, str):
                raise self.fail(f"{fld or key}[{i}]", f"expected a string, got {item!r}")
            if _CTRL.search(item):
                raise self.fail(f"{fld or key}[{i}]", f"{item!r} contains a control character", "one value per line, no newlines")
            self.bound(f"{fld or key}[{i}]", item)
            out.append(item.strip())
        return tuple(out)


def spec_header() -> str:
    """The comment heading an envman.yaml that init writes."""
    return (
        "# envman.yaml: what this project needs. Edit it, then run `envman lock`.\n"
        "# Keys: name, python, framework, companions, requirements, packages, system_packages,\n"
        "#       targets + driver (or cpu: true), cuda, cuda_devel, command, env, profiles, base_image,\n"
        "#       install_project (true | false | [extras]; default: when the project is a package)\n"
    )


def validate_requirement(text: str, fld: str, source: str) -> Requirement:
    """A PEP 508 requirement by name (no URLs: they would bypass the hash-checked lock)."""
    try:
        req = Requirement(text)
    except InvalidRequirement as exc:
        raise SpecError(redact(f"{source}: {fld}: {text!r} is not a valid requirement ({exc})"),
                         hint="write it like numpy, pyyaml>=6 or transformers==4.46.*") from None
    if req.url and not (req.url.startswith(("git+https://", "git+ssh://", "git+file://")) and not _is_framework(req.name)):
        raise SpecError(redact(f"{source}: {fld}: {text!r} is a direct URL"), hint="pin it by name and version so the lock can hash-check it")
    return req


def validate_framework(text: str, fld: str, source: str) -> Requirement:
    """A framework requirement: by name, and without an environment marker (the stack is resolved for the
    image's Python and platform; a marker would silently be ignored)."""
    req = validate_requirement(text, fld, source)
    if req.marker is not None:
        raise SpecError(redact(f"{source}: {fld}: {text!r} has an environment marker ({req.marker})"),
                        hint="drop the `; …` part: the framework is resolved for the image, e.g. torch==2.5.*")
    return req


def _is_framework(name: str) -> bool:
    n = name.lower().replace("_", "-")
    return n in frameworks.by_distribution() or n in frameworks.companions()


def validate_base_image(value: str, fld: str = "--base-image", source: str | None = None) -> str:
    """An image reference, wherever it comes from (envman.yaml, --base-image): it is written into FROM, so
    nothing but a reference passes (no --platform=…, no `AS x`, no line continuation, no newline)."""
    where = f"{source}: {fld}" if source else fld
    if not isinstance(value, str) or _CTRL.search(value):
        raise SpecError(f"{where}: {value!r} contains a control character (newline, tab …)", hint="keep values on one line")
    if not _IMAGE_REF.match(value):
        raise SpecError(f"{where}: {value!r} is not an image reference",
                         hint="like registry.example.com/python:3.11-slim or name@sha256:…")
    return value


def parse_spec(data: Any, source: str = SPEC_FILE) -> ProjectSpec:
    v = _V(source)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise v.fail("(top)", "expected a mapping of keys", f"keys: {', '.join(KEYS)}")
    for key in data:
        if key not in KEYS:
            close = difflib.get_close_matches(str(key), KEYS, n=1)
            raise v.fail(str(key), "unknown key", f"did you mean '{close[0]}'?" if close else f"valid keys: {', '.join(KEYS)}")
    name = _image_name(v, data)
    fw = v.text(data, "framework")
    if fw is not None and fw.lower() not in ("", "none"):
        validate_framework(fw, "framework", source)
    else:
        fw = None
    companions = v.strings(data, "companions")
    for i, c in enumerate(companions):
        known = frameworks.companions()
        if c not in known:
            close = difflib.get_close_matches(c, list(known), n=1)
            raise v.fail(f"companions[{i}]", f"unknown companion {c!r}", f"did you mean {close[0]}?" if close else " or ".join(known))
    reqs = v.strings(data, "requirements")
    for i, r in enumerate(reqs):
        if not _REL_PATH.match(r) or r.startswith("/") or ".." in Path(r).parts:
            raise v.fail(f"requirements[{i}]", f"{r!r} is not a relative path inside the project", "e.g. requirements.txt")
    packages = v.strings(data, "packages")
    for i, p in enumerate(packages):
        validate_requirement(p, f"packages[{i}]", source)
    apt = v.strings(data, "system_packages")
    for i, a in enumerate(apt):
        if not _APT.match(a):
            raise v.fail(f"system_packages[{i}]", f"{a!r} is not a Debian package name", "like libgl1 or git=1:2.39.5-0+deb12u1")
    cpu = v.flag(data, "cpu")
    targets = v.strings(data, "targets")
    if cpu and targets:
        raise v.fail("cpu", "cpu: true and targets exclude each other", "drop one of them")
    cuda_devel = v.flag(data, "cuda_devel")
    cmd_raw = data.get("command")
    if isinstance(cmd_raw, str):
        v.bound("command", cmd_raw)
        if _CTRL.search(cmd_raw):
            raise v.fail("command", "contains a control character", "one line")
        try:
            command = tuple(shlex.split(cmd_raw))
        except ValueError as exc:
            raise v.fail("command", f"cannot split {cmd_raw!r}: {exc}", "write it as a list: [python, train.py]") from None
    else:
        command = v.strings(data, "command")
    env_raw = data.get("env") or {}
    if not isinstance(env_raw, dict):
        raise v.fail("env", "expected a mapping NAME: value")
    env = []
    for k, val in env_raw.items():
        if not isinstance(k, str) or not _ENV_NAME.match(k):
            raise v.fail(f"env.{k}", f"{k!r} is not an environment variable name", "letters, digits and _, not starting with a digit")
        if isinstance(val, bool) or not isinstance(val, (str, int, float)):
            raise v.fail(f"env.{k}", f"expected a string value, got {val!r}")
        sval = str(val)
        v.bound(f"env.{k}", sval)
        if _CTRL.search(sval):
            raise v.fail(f"env.{k}", "value contains a control character (newline, tab …)", "keep values on one line")
        env.append((k, sval))
    profiles = []
    praw = data.get("profiles") or {}
    if not isinstance(praw, dict):
        raise v.fail("profiles", "expected a mapping of profile name → {targets, driver, …}")
    for pname, pdata in praw.items():
        if not isinstance(pname, str) or not _NAME.match(pname):
            raise v.fail(f"profiles.{pname}", "not a valid profile name", "lowercase letters, digits, - and _")
        if not isinstance(pdata, dict):
            raise v.fail(f"profiles.{pname}", "expected a mapping like {targets: [h100]}")
        for key in pdata:
            if key not in PROFILE_KEYS:
                close = difflib.get_close_matches(str(key), PROFILE_KEYS, n=1)
                raise v.fail(f"profiles.{pname}.{key}", "unknown key", f"did you mean '{close[0]}'?" if close else f"valid keys: {', '.join(PROFILE_KEYS)}")
        pv = _V(source)
        pfw = pv.text(pdata, "framework", f"profiles.{pname}.framework")
        if pfw and pfw.lower() != "none":
            validate_framework(pfw, f"profiles.{pname}.framework", source)
        profiles.append(Profile(
            pname, pv.strings(pdata, "targets", f"profiles.{pname}.targets"), pv.text(pdata, "driver", f"profiles.{pname}.driver"),
            pv.flag(pdata, "cpu"), pv.text(pdata, "cuda", f"profiles.{pname}.cuda"),
            pv.text(pdata, "framework", f"profiles.{pname}.framework"), pv.text(pdata, "python", f"profiles.{pname}.python"),
        ))
    index_urls = v.strings(data, "index_urls")
    find_links = v.strings(data, "find_links")
    for i, u in enumerate(index_urls + find_links):
        if not re.match(r"^(https?|file)://\S+$", u):
            raise v.fail("index_urls" if i < len(index_urls) else "find_links", f"{u!r} is not a URL", "like https://pypi.example.com/simple")
    install, extras = _install_project(v, data.get("install_project"))
    workload = _workload(v, data.get("workload"))
    sources = _sources(v, data)
    base = v.text(data, "base_image")
    if base is not None:
        validate_base_image(base, "base_image", source)
    return ProjectSpec(
        base_image=base,
        name=name, python=v.text(data, "python"), framework=fw, companions=companions, requirements=reqs,
        packages=packages, system_packages=tuple(sorted(set(apt))), targets=targets, driver=v.text(data, "driver"),
        cpu=cpu, cuda_devel=cuda_devel, cuda=v.text(data, "cuda"), command=command, env=tuple(env),
        profiles=tuple(profiles), install_project=install, project_extras=extras, source=source,
        index_urls=index_urls, find_links=find_links, workload=workload, sources=sources,
    )


def _image_name(v: _V, data: dict[str, Any]) -> str:
    """``name``: the image's repository name, as Docker accepts it."""
    name = v.text(data, "name")
    if not name:
        raise v.fail("name", "missing", "a lowercase image name like my-trainer")
    if not _NAME.match(name):
        raise v.fail("name", f"{name!r} is not a valid image name", "lowercase letters, digits and . _ - between them")
    if len(name) > MAX_IMAGE_NAME:
        # Docker refuses a repository name over 255 characters, at build time; say it now
        raise v.fail("name", f"{len(name)} characters, over Docker's limit of {MAX_IMAGE_NAME} for an image name",
                     "a short lowercase name like my-trainer")
    return name


def _sources(v: _V, data: dict[str, Any]) -> tuple[str, ...]:
    """``sources:`` — the files init copied packages from, hashed as lock inputs: paths inside the project."""
    sources = v.strings(data, "sources")
    for i, f in enumerate(sources):
        if not _REL_PATH.match(f) or f.startswith("/") or ".." in f.split("/"):
            raise v.fail(f"sources[{i}]", f"{f!r} is not a file in the project")
    return sources


def _workload(v: _V, raw: Any) -> tuple[tuple[str, Any], ...]:
    """``workload:`` as sorted (key, value) pairs; its values are judged by `envman fit` (which names them)."""
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise v.fail("workload", f"expected a mapping (model: llama-3.1-8b, method: lora …), got {type(raw).__name__}")
    out = []
    for k, val in raw.items():
        if k not in WORKLOAD_KEYS:
            near = difflib.get_close_matches(str(k), WORKLOAD_KEYS, n=1)
            raise v.fail(f"workload.{k}", "unknown key", f"did you mean {near[0]}?" if near else
                         "keys: " + ", ".join(WORKLOAD_KEYS))
        want = WORKLOAD_KEYS[k]
        if isinstance(val, bool) and want is not bool or not isinstance(val, want):
            raise v.fail(f"workload.{k}", f"expected {getattr(want, '__name__', 'a number')}, got {val!r}")
        if isinstance(val, str) and (_CTRL.search(val) or len(val) > 200):
            raise v.fail(f"workload.{k}", f"{val!r} is not a plain value")
        if k == "lora_targets":
            val = v.strings({"x": val}, "x", "workload.lora_targets")
        out.append((k, val))
    return tuple(sorted(out))


def _install_project(v: _V, raw: Any) -> tuple[bool | None, tuple[str, ...]]:
    """true | false | auto (the default) | a list of extras, which implies true."""
    if raw is None or raw == "auto":
        return None, ()
    if isinstance(raw, bool):
        return raw, ()
    if isinstance(raw, list):
        extras = v.strings({"x": raw}, "x", "install_project")
        for i, e in enumerate(extras):
            if not _NAME.match(e.lower()):
                raise v.fail(f"install_project[{i}]", f"{e!r} is not an extra's name", "like [train, eval]")
        return True, tuple(extras)
    raise v.fail("install_project", f"expected true, false, auto or a list of extras, got {raw!r}")


def load_spec(project: Path) -> ProjectSpec | None:
    """envman.yaml first, else ``[tool.envman]`` in pyproject.toml; None when neither exists."""
    path = project / SPEC_FILE
    if path.is_file():
        from envman.inputs import MAX_SPEC, load_yaml, read_input

        data = load_yaml(read_input(path, SPEC_FILE, MAX_SPEC, error=SpecError), SPEC_FILE, error=SpecError)
        return parse_spec(data, SPEC_FILE)
    from envman.project.requirements import read_pyproject

    doc = read_pyproject(project)
    if doc is not None:
        tool = doc.get("tool", {}).get("envman")
        if tool is not None:
            return parse_spec(tool, "pyproject.toml [tool.envman]")
    return None
