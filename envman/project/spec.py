"""envman.yaml (or ``[tool.envman]`` in pyproject.toml) → a validated ``ProjectSpec``.

The keys are described once, in ``KEYS``: how each is read and checked, how it is written back, and what it
means. Parsing, serialising (``ProjectSpec.to_data``), the typo hints, the header of the envman.yaml init
writes and docs/envman-yaml.md all read that table. Every value that can reach a generated file is validated
here, at the boundary; every problem of a file is reported at once, the first in the message.
"""

from __future__ import annotations

import difflib
import math
import re
import shlex
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement

from envman import frameworks
from envman.errors import SpecError
from envman.inputs import MAX_SPEC, MAX_VALUE, Yaml11, load_yaml, plain_numbers, present, read_input
from envman.project.sources.pyproject import read_pyproject
from envman.redact import redact

SPEC_FILE = "envman.yaml"
# `workload:` — what `envman fit` needs to say whether training fits the targets (the keys of its options): each
# key's type, and what it looks like, for the hint of a value of the wrong type (YAML as a user writes it)
_WORKLOAD: dict[str, tuple[type | tuple[type, ...], str]] = {
    "model": (str, "llama-3.1-8b"), "params": ((int, float), "7e9"), "method": (str, "lora"),
    "precision": (str, "bf16-mixed"), "optimizer": (str, "adamw"), "batch": (int, "4"), "seq": (int, "2048"),
    "image_size": (int, "224"), "grad_checkpointing": (bool, "true"), "lora_rank": (int, "16"),
    "lora_targets": (list, "[q_proj, v_proj]"), "gpus": (int, "8"), "shard": (str, "fsdp"), "global_batch": (int, "64"),
    "attention": (str, "flash"), "stack": (str, "peft-lora"), "loss": (str, "fused"),
    "optimizer_in_backward": (bool, "true"), "activation_offload": (bool, "true"), "compile": (bool, "true"),
}
WORKLOAD_KEYS = {k: t for k, (t, _) in _WORKLOAD.items()}

# Docker's limit on a repository name (distribution/reference NameTotalLengthMax, 255) holds for the name as it
# normalizes it: a bare name is docker.io/library/NAME, so 237 characters are left (measured with Docker 20.10:
# a 237-character name tags, a 238-character one is refused "repository name must not be more than 255 characters")
MAX_IMAGE_NAME = 255 - len("docker.io/library/")
_NAME = re.compile(r"^[a-z0-9]+(?:[._-][a-z0-9]+)*\Z")  # a Docker repository path component
_APT = re.compile(r"^[a-z0-9][a-z0-9+.-]*(?:=[A-Za-z0-9.+:~_-]+)?\Z")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
# C0/C1 controls and Unicode line separators: nothing that any reader could take for a line break
_CTRL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_IMAGE_REF = re.compile(r"^[a-z0-9][a-z0-9._/:-]*(?:@sha256:[0-9a-f]{64})?\Z")
_REL_PATH = re.compile(r"^[A-Za-z0-9_./-]+\Z")
_URL = re.compile(r"^(https?|file)://\S+\Z")


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
    price_per_gpu_hour: tuple[tuple[str, float], ...] = ()  # the user's prices by GPU name ("*": every GPU)
    sources: tuple[str, ...] = ()  # files init copied packages from (pyproject.toml, setup.py …): lock inputs
    cluster: dict[str, Any] | None = None  # `envman cluster`'s site settings, as written (envman/cluster/site.py)
    ci: dict[str, Any] | None = None  # `envman ci`'s settings, as written (envman/ci/install.py checks them)
    # uv constraints and overrides for the lock (init copies [tool.uv] constraint-/override-dependencies here)
    constraints: tuple[str, ...] = ()
    overrides: tuple[str, ...] = ()
    # the requirement files' framework/companion lines yield to framework:/cuda: (set by init --framework/--cuda)
    framework_wins: bool = False
    source: str = SPEC_FILE  # where it was read from, for messages

    def to_data(self) -> dict[str, Any]:
        """The canonical, ordered form written to envman.yaml and hashed into the inputs hash."""
        out = {}
        for k in KEYS:
            value = k.written(self)
            if value is not _OMIT:
                out[k.name] = value
        return out


class Problems:
    """Every problem of one file, as ``file: dotted.path: what is wrong``, each with its hint."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.found: list[tuple[str, str | None]] = []

    def bad(self, path: str, what: str, hint: str | None = None) -> None:
        """``hint`` defaults to the form of the innermost key ``path`` names (``profiles.p.targets[0]``: targets)."""
        key = next((k for part in reversed(re.split(r"[.\[]", path)) for k in KEYS if k.name == part), None)
        hint = hint or (f"e.g. {key.name}: {key.example}; " if key else "") + "every key: docs/envman-yaml.md"
        self.found.append((redact(f"{self.source}: {path}: {what}"), hint))  # a value may carry a URL token

    def check(self, validate: Callable[..., Any], *args: Any) -> None:
        """A validator that raises SpecError (shared with --base-image and the lock's packages), collected."""
        try:
            validate(*args)
        except SpecError as exc:
            self.found.append((exc.message, exc.hint))

    def raise_any(self) -> None:
        """One problem: its message and hint; several: the first, "(and N more)", and every one in the hint."""
        if not self.found:
            return
        (first, hint), more = self.found[0], len(self.found) - 1
        if not more:
            raise SpecError(first, hint=hint)
        raise SpecError(f"{first} (and {more} more)",
                        hint="every problem:\n  " + "\n  ".join(f"{m} ({h})" if h else m for m, h in self.found))


# --- readers: (problems, raw value, dotted path) → the value (a fallback after a problem) ---------------------


_VERSION_KEYS = ("python", "cuda", "driver")


def _number_text(p: Problems, v: float | int, path: str) -> str | None:
    """A number where a string goes, as text: the text it was written as when the number reads back as that
    (3.11, 8.0, 570); else refused with the quoted form, never turned into another value silently (YAML and
    TOML read 3.10 as 3.1; what only YAML 1.1 changes, ``_yaml11`` refuses first)."""
    text = str(v)
    written = getattr(v, "written", text)
    if written == text:
        return text
    key = path.rsplit(".", 1)[-1]
    quoted = f'{key}: "{written}"' if re.fullmatch(r"[A-Za-z_][\w-]*", key) else f'"{written}"'
    lang = "TOML" if p.source.startswith("pyproject") else "YAML"
    p.bad(path, f"{text} is a number: {lang} reads an unquoted {written} as {text}",
          f"quote the version: {quoted}" if key in _VERSION_KEYS else f"quote it: {quoted}")
    return None


def _yaml11(p: Problems, v: Any, path: str) -> Any:
    """``v`` without the ``Yaml11`` scalars (``1:30``, ``010``, ``no``, a date …), each refused with its quoted
    form: a value YAML 1.1 read otherwise than it reads is never used, in any key (cluster: and ci: included)."""
    if isinstance(v, dict):
        return {k: _yaml11(p, x, f"{path}.{k}".lstrip(".")) for k, x in v.items()
                if not _refused(p, k, f"{path}.{k}".lstrip(".")) and not _refused(p, x, f"{path}.{k}".lstrip("."))}
    if isinstance(v, list):
        return [_yaml11(p, x, f"{path}[{i}]") for i, x in enumerate(v) if not _refused(p, x, f"{path}[{i}]")]
    return v


def _refused(p: Problems, v: Any, path: str) -> bool:
    if not isinstance(v, Yaml11):
        return False
    key = path.rsplit(".", 1)[-1]
    quoted = f'{key}: "{v.text}"' if re.fullmatch(r"[A-Za-z_][\w-]*", key) else f'"{v.text}"'
    value = str(v.value).lower() if isinstance(v.value, (bool, float, int)) else "a date"
    p.bad(path, f"YAML reads an unquoted {v.text} as {value}",
          f"quote it: {quoted}" + ("" if value == "a date" else f", or write {value} if you mean it"))
    return True


def _text(p: Problems, v: Any, path: str) -> str | None:
    if v is None:
        return None
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        v = _number_text(p, v, path)
        if v is None:
            return None
    if not isinstance(v, str):
        p.bad(path, f"expected a string, got {type(v).__name__}")
        return None
    if _CTRL.search(v):
        p.bad(path, f"{v!r} contains a control character (newline, tab …)", "keep values on one line")
        return None
    return v.strip() if _bounded(p, path, v) else None


def _bounded(p: Problems, path: str, v: str) -> bool:
    if len(v) > MAX_VALUE:
        p.bad(path, f"{len(v)} characters, over envman's limit of {MAX_VALUE} for one value",
              "keep values short; put long content in a file the image copies")
        return False
    return True


def _flag(p: Problems, v: Any, path: str) -> bool:
    if v is None:
        return False
    if not isinstance(v, bool):
        p.bad(path, f"expected true or false, got {v!r}")
        return False
    return v


def _strings(p: Problems, v: Any, path: str) -> tuple[str, ...]:
    if v is None:
        return ()
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list):
        p.bad(path, f"expected a list of strings, got {type(v).__name__}")
        return ()
    out = []
    for i, item in enumerate(v):
        if isinstance(item, (int, float)) and not isinstance(item, bool):
            item = _number_text(p, item, f"{path}[{i}]")
            if item is None:
                continue
        if not isinstance(item, str):
            p.bad(f"{path}[{i}]", f"expected a string, got {item!r}")
        elif _CTRL.search(item):
            p.bad(f"{path}[{i}]", f"{item!r} contains a control character", "one value per line, no newlines")
        elif _bounded(p, f"{path}[{i}]", item):
            out.append(item.strip())
    return tuple(out)


def _each(read: Callable[[Problems, Any, str], tuple[str, ...]], ok: Callable[[str], bool], what: str, hint: str | None):
    """``read``, then every item held to ``ok``: ``'x' is not <what>`` names the one that is not."""
    def reader(p: Problems, v: Any, path: str) -> tuple[str, ...]:
        items = read(p, v, path)
        for i, item in enumerate(items):
            if not ok(item):
                p.bad(f"{path}[{i}]", f"{item!r} is not {what}", hint)
        return items
    return reader


def _image_name(p: Problems, v: Any, path: str) -> str:
    """The image's repository name, as Docker accepts it."""
    name = _text(p, v, path)
    if not name:
        if name is not None or v is None:  # else _text said what is wrong with it
            p.bad(path, "missing", "a lowercase image name like my-trainer")
    elif not _NAME.match(name):
        p.bad(path, f"{name!r} is not a valid image name", "lowercase letters, digits and . _ - between them")
    elif len(name) > MAX_IMAGE_NAME:
        # Docker refuses it at build time; say it now
        p.bad(path, f"{len(name)} characters, over Docker's limit of {MAX_IMAGE_NAME} for an image name "
              "(255 with the docker.io/library/ it is read as)", "a short lowercase name like my-trainer")
    return name or ""


def _python(p: Problems, v: Any, path: str) -> str | None:
    # YAML reads an unquoted 3.10 as the number 3.1 (and no Python envman builds is 3.1)
    if isinstance(v, float) and str(v) == "3.1" and not hasattr(v, "written"):
        p.bad(path, "3.1 is a number: YAML reads an unquoted 3.10 as 3.1", 'quote the version: python: "3.10"')
        return None
    return _text(p, v, path)


def _framework(p: Problems, v: Any, path: str) -> str | None:
    """A framework requirement; ``none`` (or empty): no framework."""
    fw = _profile_framework(p, v, path)
    return None if fw is None or fw.lower() in ("", "none") else fw


def _profile_framework(p: Problems, v: Any, path: str) -> str | None:
    """A profile's framework, where ``none`` overrides the project's (a profile without one)."""
    fw = _text(p, v, path)
    if fw and fw.lower() != "none":
        p.check(validate_framework, fw, path, p.source)
    return fw


def _companions(p: Problems, v: Any, path: str) -> tuple[str, ...]:
    items = _strings(p, v, path)
    known = frameworks.companions()
    for i, c in enumerate(items):
        if c not in known:
            close = difflib.get_close_matches(c, list(known), n=1)
            p.bad(f"{path}[{i}]", f"unknown companion {c!r}", f"did you mean {close[0]}?" if close else " or ".join(known))
    return items


def _packages(p: Problems, v: Any, path: str) -> tuple[str, ...]:
    items = _strings(p, v, path)
    for i, item in enumerate(items):
        p.check(validate_requirement, item, f"{path}[{i}]", p.source)
    return items


def _apt(p: Problems, v: Any, path: str) -> tuple[str, ...]:
    items = _each(_strings, lambda a: bool(_APT.match(a)), "a Debian package name", "like libgl1 or git=1:2.39.5-0+deb12u1")(p, v, path)
    return tuple(sorted(set(items)))


def _command(p: Problems, v: Any, path: str) -> tuple[str, ...]:
    if not isinstance(v, str):
        return _strings(p, v, path)
    if not _bounded(p, path, v):
        return ()
    if _CTRL.search(v):
        p.bad(path, "contains a control character", "one line")
        return ()
    try:
        return tuple(shlex.split(v))
    except ValueError as exc:
        p.bad(path, f"cannot split {v!r}: {exc}", "write it as a list: [python, train.py]")
        return ()


def _env(p: Problems, v: Any, path: str) -> tuple[tuple[str, str], ...]:
    if not v:
        return ()
    if not isinstance(v, dict):
        p.bad(path, "expected a mapping NAME: value")
        return ()
    out = []
    for k, val in v.items():
        if not isinstance(k, str) or not _ENV_NAME.match(k):
            p.bad(f"{path}.{k}", f"{k!r} is not an environment variable name", "letters, digits and _, not starting with a digit")
        elif isinstance(val, bool) or not isinstance(val, (str, int, float)):
            p.bad(f"{path}.{k}", f"expected a string value, got {val!r}")
        elif (isinstance(val, str) or _number_text(p, val, f"{path}.{k}") is not None) \
                and _bounded(p, f"{path}.{k}", str(val)):
            if _CTRL.search(str(val)):
                p.bad(f"{path}.{k}", "value contains a control character (newline, tab …)", "keep values on one line")
            else:
                out.append((k, str(val)))
    return tuple(out)


def _base_image(p: Problems, v: Any, path: str) -> str | None:
    base = _text(p, v, path)
    if base is not None:
        p.check(validate_base_image, base, path, p.source)
    return base


def _install_project(p: Problems, v: Any, path: str) -> tuple[bool | None, tuple[str, ...]]:
    """true | false | auto (the default) | a list of extras, which implies true."""
    if v is None or v == "auto":
        return None, ()
    if isinstance(v, bool):
        return v, ()
    if isinstance(v, list):
        extras = _each(_strings, lambda e: bool(_NAME.match(e.lower())), "an extra's name", "like [train, eval]")(p, v, path)
        return True, extras
    p.bad(path, f"expected true, false, auto or a list of extras, got {v!r}")
    return None, ()


def _urls(p: Problems, v: Any, path: str) -> tuple[str, ...]:
    items = _strings(p, v, path)
    for u in items:
        if not _URL.match(u):
            p.bad(path, f"{u!r} is not a URL", "like https://pypi.example.com/simple")
    return items


def _misread(v: Any) -> bool:
    """A number YAML 1.1 read as another than its decimal text says: 010 (octal 8), 0x10, 0b10, 1:30 (base 60)."""
    if not hasattr(v, "written") or not math.isfinite(v):  # .inf and .nan are refused as values, not as text
        return False
    try:
        return float(v.written.replace("_", "")) != v
    except ValueError:
        return True


def _workload(p: Problems, v: Any, path: str) -> tuple[tuple[str, Any], ...]:
    """Sorted (key, value) pairs; their values are judged by `envman fit` (which names them)."""
    if v is None:
        return ()
    if not isinstance(v, dict):
        p.bad(path, f"expected a mapping (model: llama-3.1-8b, method: lora …), got {type(v).__name__}",
              "e.g. workload: {model: llama-3.1-8b, method: qlora, batch: 4} (docs/envman-yaml.md)")
        return ()
    out = []
    for k, val in v.items():
        val = plain_numbers(val)
        want = WORKLOAD_KEYS.get(k)
        if want is None:
            near = difflib.get_close_matches(str(k), WORKLOAD_KEYS, n=1)
            p.bad(f"{path}.{k}", "unknown key", f"did you mean {near[0]}?" if near else "keys: " + ", ".join(WORKLOAD_KEYS))
        elif isinstance(val, bool) and want is not bool or not isinstance(val, want):
            p.bad(f"{path}.{k}", f"expected {getattr(want, '__name__', 'a number')}, got {val!r}",
                  f"e.g. {k}: {_WORKLOAD[k][1]} (the value of `envman fit --{k.replace('_', '-')}`)")
        elif k == "lora_targets" and isinstance(val, list) and not all(isinstance(i, str) for i in val):
            p.bad(f"{path}.{k}", f"expected a list of layer names, got {val!r}", f"e.g. {k}: {_WORKLOAD[k][1]}")
        elif isinstance(val, str) and (_CTRL.search(val) or len(val) > 200):
            p.bad(f"{path}.{k}", f"{val!r} is not a plain value",
                  f"one line of at most 200 characters, e.g. {k}: {_WORKLOAD[k][1]}")
        else:
            out.append((k, _strings(p, val, f"{path}.lora_targets") if k == "lora_targets" else val))
    return tuple(sorted(out))


def _prices(p: Problems, v: Any, path: str) -> tuple[tuple[str, float], ...]:
    """One price per GPU-hour for every GPU (``2.5``, kept as ``*``) or one per GPU name (``{h100: 2.49}``); the
    names are resolved by `envman fit`. A number YAML reads as another (``010``, ``0x10``, ``1:30``) is refused."""
    if v is None:
        return ()
    out = []
    for name, price in v.items() if isinstance(v, dict) else [("*", v)]:
        at = path if name == "*" and not isinstance(v, dict) else f"{path}.{name}"
        name = str(name) if isinstance(name, int) and not isinstance(name, bool) else name  # `4090: 0.4`
        if not isinstance(name, str) or not name.strip() or _CTRL.search(name) or len(name) > 100:
            p.bad(at, f"{name!r} is not a GPU name", "a name or alias from matrices/gpus.yaml, e.g. h100, rtx-4090")
        elif isinstance(price, bool) or not isinstance(price, (int, float)) or not 0 < price < math.inf:
            p.bad(at, f"expected a positive price per GPU-hour, got {plain_numbers(price)!r}",
                  "e.g. price_per_gpu_hour: {h100: 2.49, l4: 0.8} (a decimal point, not a comma): your provider's "
                  "price; envman assumes none")
        elif _misread(price):
            p.bad(at, f"YAML reads {getattr(price, 'written', '')} as {plain_numbers(price)!r}",
                  "write the price in decimal digits, e.g. 2.49")
        else:
            out.append((name.strip(), float(price)))
    return tuple(out)


def _profiles(p: Problems, v: Any, path: str) -> tuple[Profile, ...]:
    if not v:
        return ()
    if not isinstance(v, dict):
        p.bad(path, "expected a mapping of profile name → {targets, driver, …}")
        return ()
    out = []
    for name, data in v.items():
        where = f"{path}.{name}"
        if not isinstance(name, str) or not _NAME.match(name):
            p.bad(where, "not a valid profile name", "lowercase letters, digits, - and _")
        elif not isinstance(data, dict):
            p.bad(where, "expected a mapping like {targets: [h100]}")
        else:
            values = _read(p, data, PROFILE_KEYS, where + ".")
            out.append(Profile(name, **values))
    return tuple(out)


_OMIT = object()


def _listed(attr: str) -> Callable[[Any], Any]:
    """Written when set; tuples as lists."""
    def write(spec: Any) -> Any:
        value = getattr(spec, attr)
        return (list(value) if isinstance(value, tuple) else value) if value else _OMIT
    return write


def _pairs(attr: str) -> Callable[[Any], Any]:
    def write(spec: Any) -> Any:
        value = getattr(spec, attr)
        return {k: (list(x) if isinstance(x, tuple) else x) for k, x in value} if value else _OMIT
    return write


@dataclass(frozen=True)
class Key:
    """One key of envman.yaml: how it is read (and checked), how it is written back, what it means."""

    name: str
    read: Callable[[Problems, Any, str], Any]
    doc: str
    example: str
    write: Callable[[Any], Any] | None = None  # default: written when set (``_listed``)
    profile: bool = False  # a profile may set it too (its value for that profile's stack)
    read_in_profile: Callable[[Problems, Any, str], Any] | None = None

    def written(self, spec: Any) -> Any:
        return (self.write or _listed(self.name))(spec)


# The order is envman.yaml's (init writes it so) and docs/envman-yaml.md's.
KEYS: tuple[Key, ...] = (
    Key("name", _image_name, "The image's repository name: lowercase letters, digits and `. _ -`.", "my-trainer",
        write=lambda s: s.name),
    Key("python", _python, "The image's Python: a version or a specifier (quote it: YAML reads 3.10 as 3.1).",
        '"3.11"', profile=True),
    Key("framework", _framework, "The framework and its version range (`none`: no framework).", "torch>=2.4",
        write=lambda s: s.framework, profile=True, read_in_profile=_profile_framework),
    Key("companions", _companions, "The framework's companion packages, pinned to its build.", "[torchvision]"),
    Key("requirements", _each(_strings, lambda r: bool(_REL_PATH.match(r)) and not r.startswith("/")
                              and ".." not in Path(r).parts, "a relative path inside the project", "e.g. requirements.txt"),
        "Requirement files inside the project, locked with their `-r`/`-c` includes.", "[requirements.txt]"),
    Key("packages", _packages, "More requirements, PEP 508, by name (or a non-framework package by an https "
        "or VCS URL; never with credentials).", "[numpy, pyyaml>=6]"),
    Key("system_packages", _apt, "Debian packages the image installs with apt.", "[libgl1]"),
    Key("cpu", _flag, "A CPU-only image (instead of `targets`).", "true", profile=True),
    Key("targets", _strings, "The GPUs the image must run on (names or aliases from matrices/gpus.yaml).",
        "[h100, a100]", write=lambda s: _OMIT if s.cpu else list(s.targets), profile=True),
    Key("driver", _text, "The fleet's NVIDIA driver floor.", '">=570"',
        write=lambda s: s.driver if s.driver and not s.cpu else _OMIT, profile=True),
    Key("cuda", _text, "The CUDA version to resolve for (default: the newest the targets and driver allow).",
        '"12.8"', profile=True),
    Key("cuda_devel", _flag, "Start from an nvidia/cuda devel image (nvcc for packages built from source).", "true"),
    Key("command", _command, "The image's command: a list, or a string split like a shell.", "[python, train.py]"),
    Key("env", _env, "Environment variables set in the image.", "{WANDB_MODE: offline}", write=_pairs("env")),
    Key("base_image", _base_image, "Start from this image instead (a mirror, an air-gapped site); it needs python3 "
        "with venv.", "registry.example.com/python:3.11-slim"),
    Key("install_project", _install_project, "Install the project itself: `true`, `false`, `auto` (default: when "
        "it is a package) or a list of its extras.", "[train]",
        write=lambda s: _OMIT if s.install_project is None else list(s.project_extras) or s.install_project),
    Key("index_urls", _urls, "Extra package indexes, for the packages that are not the framework's.",
        "[https://pypi.example.com/simple]"),
    Key("find_links", _urls, "Folders or pages of wheels uv may also take packages from.", "[file:///wheels]"),
    Key("constraints", _packages, "Constraints uv holds the lock to (they install nothing); init copies pyproject's "
        "`[tool.uv] constraint-dependencies` here.", '["certifi<2024"]'),
    Key("overrides", _packages, "Requirements uv puts in place of what any package asks for; init copies pyproject's "
        "`[tool.uv] override-dependencies` here.", '["transformers>=5.4"]'),
    Key("framework_wins", _flag, "The requirement files' framework and companion lines yield to `framework`/`cuda` "
        "instead of being refused (init sets it when `--framework`/`--cuda` overrode them).", "true"),
    Key("workload", _workload, "The training run `envman fit` judges: " + ", ".join(WORKLOAD_KEYS) + ".",
        "{model: llama-3.1-8b, method: lora}", write=_pairs("workload")),
    Key("price_per_gpu_hour", _prices, "Your price per GPU-hour, for every GPU (`2.5`) or per GPU name: `envman fit "
        "--tokens N` prices the whole run with it (`--price-per-gpu-hour` overrides it); envman assumes none.",
        "{h100: 2.49, l4: 0.8}",
        write=lambda s: _OMIT if not s.price_per_gpu_hour else dict(s.price_per_gpu_hour).get("*")
        or dict(s.price_per_gpu_hour)),
    Key("sources", _each(_strings, lambda f: bool(_REL_PATH.match(f)) and not f.startswith("/")
                         and ".." not in f.split("/"), "a file in the project", None),
        "The files init copied packages from (they are lock inputs: editing one makes the lock stale).",
        "[pyproject.toml]"),
    Key("profiles", _profiles, "More stacks of the same project, each with its own lock and Dockerfile; a profile "
        "may set " + ", ".join(k for k in ("python", "framework", "cpu", "targets", "driver", "cuda")) + ".",
        "{old-fleet: {targets: [v100]}}", write=lambda s: {pr.name: {
            k.name: w for k in PROFILE_KEYS if (w := k.written(pr)) is not _OMIT} for pr in s.profiles} or _OMIT),
    # not written back nor hashed: moving a job to another partition must not make the image's lock stale
    Key("cluster", lambda p, v, path: plain_numbers(v) if v is None or isinstance(v, dict) else p.bad(path, "expected a mapping"),
        "Site settings of `envman cluster` (Slurm feature, partition, GPUs per node …; docs/cluster.md).",
        "{constraint: h100, gpus_per_node: 8}", write=lambda s: _OMIT),
    # not written back nor hashed either: where CI gets envman is no input of the image
    Key("ci", lambda p, v, path: plain_numbers(v) if v is None or isinstance(v, dict) else p.bad(path, "expected a mapping"),
        "Settings of `envman ci`: where the pipelines install envman from (`envman`: a wheel in the repository or "
        "a pinned requirement; `index_url`: the index that serves it; docs/ci.md).",
        "{envman: vendor/envman-0.2.0-py3-none-any.whl}", write=lambda s: _OMIT),
)
PROFILE_KEYS: tuple[Key, ...] = tuple(
    Key(k.name, k.read_in_profile or k.read, k.doc, k.example, write=_listed(k.name)) for k in KEYS if k.profile)


def _read(p: Problems, data: dict, keys: tuple[Key, ...], prefix: str = "") -> dict[str, Any]:
    """Every key of ``keys`` read from ``data``; an unknown key of ``data`` is a problem with the closest name."""
    names = [k.name for k in keys]
    for key in data:
        if key not in names:
            close = difflib.get_close_matches(str(key), names, n=1)
            p.bad(f"{prefix}{key}", "unknown key", f"did you mean '{close[0]}'?" if close else f"valid keys: {', '.join(names)}")
    return {k.name: k.read(p, data.get(k.name), prefix + k.name) for k in keys}


def parse_spec(data: Any, source: str = SPEC_FILE) -> ProjectSpec:
    p = Problems(source)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        p.bad("(top)", "expected a mapping of keys", f"keys: {', '.join(k.name for k in KEYS)}")
        p.raise_any()
    values = _read(p, _yaml11(p, data, ""), KEYS)
    if values["cpu"] and values["targets"]:
        p.bad("cpu", "cpu: true and targets exclude each other", "drop one of them")
    p.raise_any()
    values["install_project"], values["project_extras"] = values["install_project"]
    return ProjectSpec(**values, source=source)


def spec_header() -> str:
    """The comment heading an envman.yaml that init writes: the keys, and where they are described."""
    keys = textwrap.wrap(", ".join(k.name for k in KEYS), 100, initial_indent="# Keys: ", subsequent_indent="#       ")
    return ("# envman.yaml: what this project needs. Edit it, then run `envman lock`.\n" + "\n".join(keys) + "\n"
            "# Every key: docs/envman-yaml.md (envman's documentation)\n")


def validate_requirement(text: str, fld: str, source: str) -> Requirement:
    """A PEP 508 requirement by name, or a non-framework package by an https archive/wheel URL or a VCS URL: uv
    locks a URL file with its sha256 (a VCS checkout is refused at lock time, naming the archive to use); the
    framework is never taken from a URL (envman pins its build), and no URL carries credentials."""
    try:
        req = Requirement(text)
    except InvalidRequirement as exc:
        raise SpecError(redact(f"{source}: {fld}: {text!r} is not a valid requirement ({str(exc).splitlines()[0]})"),
                         hint="write it like numpy, pyyaml>=6 or transformers==4.46.*") from None
    if req.url and re.match(r"^[a-z+]+://[^/@]+@", req.url) and not req.url.startswith("git+ssh://"):
        raise SpecError(redact(f"{source}: {fld}: {text!r} carries credentials in its URL"),
                        hint="give the index or host its token through the environment (netrc, UV_INDEX_*), never a file")
    if req.url and not (req.url.startswith(("git+https://", "git+ssh://", "git+file://", "https://"))
                        and not _is_framework(req.name)):
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


def load_spec(project: Path) -> ProjectSpec | None:
    """envman.yaml first, else ``[tool.envman]`` in pyproject.toml; None when neither exists."""
    path = project / SPEC_FILE
    if present(path):  # a FIFO, a link loop or to nowhere is named as such, never "no envman.yaml"
        # parsed every run, never cached: a cached parse would be data the lock builds from, not envman.yaml
        # (whoever can write the cache could add a package); PyYAML's import is ~10 ms (issue 24)
        text = read_input(path, SPEC_FILE, MAX_SPEC, error=SpecError)
        return parse_spec(load_yaml(text, SPEC_FILE, error=SpecError, numbers_as_written=True), SPEC_FILE)
    doc = read_pyproject(project)
    if doc is not None:
        tool = doc.get("tool", {}).get("envman")
        if tool is not None:
            return parse_spec(tool, "pyproject.toml [tool.envman]")
    return None
