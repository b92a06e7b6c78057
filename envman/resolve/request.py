"""Parse what a user typed on the command line or in envman.yaml into a resolver ``Request``.

Every bad value becomes one UsageError naming the value, with a hint.
"""

from __future__ import annotations

import difflib
import re

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from envman import frameworks
from envman.errors import UsageError
from envman.model import Matrix, Request, Ver
from envman.resolve.targets import parse_targets

_LOCAL = re.compile(r"\+(cu\d+|cpu)\b")


def parse_framework(text: str | None, known: tuple[str, ...], field: str = "--framework") -> tuple[str | None, SpecifierSet, str | None, str | None]:
    """``torch>=2.4`` → ("torch", SpecifierSet(">=2.4"), variant=None, text)."""
    if text is None or str(text).strip().lower() in ("", "none"):
        return None, SpecifierSet(), None, None
    raw = str(text).strip()
    m = _LOCAL.search(raw)
    variant = m.group(1) if m else None
    try:
        req = Requirement(_LOCAL.sub("", raw))
    except InvalidRequirement as exc:
        raise UsageError(
            f"{field}: {raw!r} is not a valid requirement ({str(exc).splitlines()[0]})",
            hint="write it like torch, torch>=2.4, torch==2.5.* or tensorflow==2.15.*",
        ) from None
    if req.marker is not None:
        raise UsageError(f"{field}: {raw!r} has an environment marker ({req.marker}): the framework is resolved for the "
                         "image, so a marker would be ignored", hint="drop the `; …` part, e.g. torch==2.5.*")
    aliases = frameworks.aliases()
    name = aliases.get(req.name.lower(), req.name.lower())
    if name not in known:
        close = difflib.get_close_matches(name, list(known) + list(aliases), n=1)
        hint = f"did you mean {aliases.get(close[0], close[0])}?" if close else f"envman knows: {', '.join(known)}"
        raise UsageError(f"{field}: unknown framework {req.name!r}", hint=hint)
    return name, req.specifier, None if variant == "cpu" else variant, raw


def _extra_cuda(name: str | None, text: str | None) -> str | None:
    """The CUDA major an extra of the framework names: ``jax[cuda12]>=0.6`` -> "12" (None: no such extra)."""
    if name is None or text is None:
        return None
    majors = dict(frameworks.get(name).cuda_extras) if name in {f.name for f in frameworks.registered()} else {}
    m = re.match(r"\s*[\w.-]+\s*\[([^\]]*)\]", text)
    extras = [e.strip().lower().replace("_", "-") for e in m.group(1).split(",")] if m else []
    return next((majors[e] for e in extras if e in majors), None)


def parse_python(text: str | None, field: str = "--python") -> SpecifierSet:
    if text is None or str(text).strip() == "":
        return SpecifierSet()
    raw = str(text).strip()
    if re.fullmatch(r"\d+\.\d+", raw):
        raw = f"=={raw}.*"
    elif re.fullmatch(r"\d+\.\d+\.\d+", raw):
        raw = "==" + ".".join(raw.split(".")[:2]) + ".*"
    try:
        return SpecifierSet(raw)
    except InvalidSpecifier:
        raise UsageError(f"{field}: {text!r} is not a Python version or specifier", hint="write it like 3.11 or >=3.10,<3.13") from None


def parse_cuda(text: str | None, field: str = "--cuda") -> SpecifierSet:
    if text is None or str(text).strip() == "":
        return SpecifierSet()
    raw = str(text).strip()
    if re.fullmatch(r"\d+(\.\d+)?", raw):
        raw = f"=={raw}.*"
    try:
        return SpecifierSet(raw)
    except InvalidSpecifier:
        raise UsageError(f"{field}: {text!r} is not a CUDA version or specifier", hint="write it like 12.4 or >=12.4") from None


def parse_driver(text: str | None, field: str = "--driver") -> Version | None:
    """``550.54.15``, ``535``, ``>=535`` (a floor: the lowest driver the fleet runs) or ``R470``."""
    if text is None or str(text).strip() == "":
        return None
    raw = str(text).strip()
    body = re.sub(r"^(>=|≥|r)", "", raw, flags=re.I).strip()
    try:
        if not re.fullmatch(r"\d+(\.\d+){0,2}", body):
            raise InvalidVersion(body)
        return Ver(body)
    except InvalidVersion:
        raise UsageError(f"{field}: {text!r} is not a driver version", hint="write it like 550.54.15, 535 or >=535") from None


def build_request(
    matrix: Matrix,
    *,
    framework: str | None = None,
    python: str | None = None,
    targets: list[str] | tuple[str, ...] = (),
    driver: str | None = None,
    cuda: str | None = None,
    cpu: bool = False,
    cuda_devel: bool = False,
    fields: dict[str, str] | None = None,
    own_base: bool = False,
) -> Request:
    f = {"framework": "--framework", "python": "--python", "driver": "--driver", "cuda": "--cuda", **(fields or {})}
    name, spec, variant, text = parse_framework(framework, tuple(sorted(matrix.frameworks)), f["framework"])
    if cpu and targets:
        raise UsageError("--cpu and --target exclude each other", hint="drop --cpu to resolve for GPUs")
    if cpu and cuda_devel:
        raise UsageError("cpu and cuda_devel exclude each other", hint="cuda_devel needs a GPU stack")
    return Request(
        framework=name,
        framework_spec=spec,
        framework_text=text,
        python=parse_python(python, f["python"]),
        targets=() if cpu else parse_targets(matrix, list(targets)),
        driver=parse_driver(driver, f["driver"]),
        cuda=parse_cuda(cuda if cuda is not None else _extra_cuda(name, framework), f["cuda"]),
        variant=variant,
        cpu=cpu,
        cuda_devel=cuda_devel,
        own_base=own_base,
    )
