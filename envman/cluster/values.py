"""PURE: the grammar of every value that reaches a generated cluster file (sbatch, Apptainer .def, Kubernetes
manifests, the readiness scripts). Each check returns the reason a value is refused, or None; the callers turn
it into one error naming where the value came from (envman.yaml, envman.lock, an option).

Two rules, kept apart: a value is *valid* for its grammar (an image reference, a version, a path), and it is
*quoted* for the exact place it lands (slurm.py: one shell word; k8s.py: the YAML serializer). Control
characters never pass: a newline would make a comment a command line in an sbatch, or start a section in a .def.
"""

from __future__ import annotations

import re

# C0, DEL, C1 and the two Unicode line separators: anything that can end or rewrite a line
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")

# OCI distribution's reference grammar (distribution/reference, reference.go), ASCII only:
#   reference := name [ ":" tag ] [ "@" digest ];  name := [domain "/"] path-component ("/" path-component)*
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*"
_DOMAIN_PART = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = r"sha256:[0-9a-f]{64}"
IMAGE_REF = re.compile(rf"(?:{_DOMAIN}/)?{_COMPONENT}(?:/{_COMPONENT})*(?::{_TAG})?(?:@{_DIGEST})?", re.ASCII)
PINNED_REF = re.compile(rf"(?:{_DOMAIN}/)?{_COMPONENT}(?:/{_COMPONENT})*(?::{_TAG})?@{_DIGEST}", re.ASCII)

NAME = re.compile(r"[a-z0-9]+(?:[._-][a-z0-9]+)*", re.ASCII)  # envman.yaml name:, a profile name
HASH = re.compile(r"[0-9a-f]{64}", re.ASCII)
VERSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+!_-]{0,63}", re.ASCII)  # a PEP 440 / CUDA / driver version
WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._+()-]{0,127}", re.ASCII)  # a GPU name, a variant, an id
ARCH = re.compile(r"(?:sm|compute)_[0-9]{2,3}[a-z]?", re.ASCII)
DRIVER = re.compile(r"[0-9]{1,4}(?:\.[0-9]{1,4}){0,2}", re.ASCII)
MAX_PATH = 1024


def control(value: str) -> str | None:
    m = CONTROL.search(value)
    return f"contains a control character ({m.group()!r})" if m else None


def matches(pattern: re.Pattern[str], value: object, like: str) -> str | None:
    """None when ``value`` is a string the whole of which ``pattern`` matches (a trailing newline included)."""
    if not isinstance(value, str):
        return f"expected a string, got {type(value).__name__}"
    return control(value) or (None if pattern.fullmatch(value) else f"is not {like}")


def image_ref(value: object, *, pinned: bool = False) -> str | None:
    if pinned:
        return matches(PINNED_REF, value, "an image reference by digest (REGISTRY/NAME@sha256:<64 hex>)")
    return matches(IMAGE_REF, value, "an image reference (REGISTRY/NAME[:TAG][@sha256:…])")


def path(value: str) -> str | None:
    """A path that reaches a script or a .def: any printable text (it is quoted where it lands), one line,
    absolute, without surrounding blanks (Apptainer trims the `From:` value)."""
    if len(value) > MAX_PATH:
        return f"is {len(value)} characters long, over {MAX_PATH}"
    return control(value) or ("begins or ends with a blank" if value != value.strip() else None)


def mount(value: str) -> str | None:
    """``SRC[:DST[:ro|rw]]`` as Apptainer's --bind and pyxis' --container-mounts both read it: absolute paths,
    no ',' (both split a list there) and no ':' inside a path."""
    if control(value):
        return control(value)
    parts = value.split(":")
    if len(parts) > 3 or (len(parts) == 3 and parts[2] not in ("ro", "rw")):
        return "is not SRC[:DST[:ro|rw]]"
    for p in parts[:2]:  # a '..' step: Kubernetes refuses it in a hostPath
        if not p.startswith("/") or "," in p or p != p.strip() or len(p) > MAX_PATH or ".." in p.split("/"):
            return "is not SRC[:DST[:ro|rw]] with absolute paths (no ',', no '..' and no blanks around them)"
    return None
