"""``lock --base-image X`` kept in envman.yaml: one line replaced or added, the result parsed back."""

from __future__ import annotations

import json
import re
from pathlib import Path

from envman.project.spec import SPEC_FILE, ProjectSpec

_LINE = re.compile(r"^base_image[ \t]*:[ \t]*(?P<value>[^\r\n]*?)[ \t]*(?P<end>\r?\n|$)", re.M)


def base_image_edit(root: Path, spec: ProjectSpec, base_image: str) -> tuple[str | None, str]:
    """(envman.yaml's new text, the note to show) for ``base_image`` (already validated as an image reference);
    no text when it cannot be written there: the lock then records the override as before, and the note says
    what to write. Nothing is written here: the caller writes the text once the lock succeeded."""
    keep = f"base_image: \"{base_image}\""
    if spec.source != SPEC_FILE:
        return None, f"{spec.source}: set {keep.replace(': ', ' = ')} there to keep this base for the next `envman lock`"
    from envman.inputs import MAX_SPEC, read_input

    new = _with_base_image(read_input(root / SPEC_FILE, SPEC_FILE, MAX_SPEC), base_image)
    if new is None or not _same_but_base(new, spec, base_image):
        return None, f"{SPEC_FILE}: could not set base_image in place: write {keep} there to keep this base"
    return new, f"{SPEC_FILE}: base_image set to {base_image}"


def _with_base_image(text: str, value: str) -> str | None:
    line = f"base_image: {json.dumps(value)}"  # a JSON string is a YAML double-quoted scalar
    found = list(_LINE.finditer(text))
    if len(found) > 1:
        return None
    if found:
        m = found[0]
        if m.group("value") in ("", "|", ">", "|-", ">-"):  # the value sits on the lines below: not one line's edit
            return None
        return text[:m.start()] + line + m.group("end") + text[m.end():]
    newline = "\r\n" if "\r\n" in text else "\n"
    return text + ("" if not text or text.endswith("\n") else newline) + line + newline


def _same_but_base(text: str, spec: ProjectSpec, base_image: str) -> bool:
    from dataclasses import replace

    from envman.errors import EnvmanError
    from envman.inputs import load_yaml
    from envman.project.spec import parse_spec

    try:
        back = parse_spec(load_yaml(text, SPEC_FILE), SPEC_FILE)
    except EnvmanError:
        return False
    return back == replace(spec, base_image=base_image)
