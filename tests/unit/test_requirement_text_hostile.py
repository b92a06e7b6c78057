"""A requirement is text a user writes in many files (requirements.txt, pyproject.toml, envman.yaml) and on the
command line (--framework): any text is read, or refused as ONE error line (naming where) with a hint. Found when
packaging's message for `foo bar baz` — its reason, then the text and a caret under it — made the `error:` line
three lines, pyproject's build-system.requires refused `x y` with no hint at all, and a URL line with text after
the URL was an internal error."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from envman.errors import EnvmanError
from envman.project.package import find_package
from envman.project.sources.requirements_txt import read_requirements
from envman.project.spec import parse_spec
from envman.resolve.request import parse_framework

PIECES = ["torch", "numpy", ">=", "==", "2.4", "[cuda]", ";", "python_version", "<", "'3.11'", "@", " ", ",", "(",
          ")", "~=", "*", "-", ".", "https://x.example/a.whl", "#", "\\", '"', "\u2028", "\x85", "é"]
TEXT = (st.lists(st.sampled_from(PIECES), min_size=1, max_size=8).map("".join)
        | st.text(st.characters(exclude_categories=("Cs", "Cc")), min_size=1, max_size=20))


def _requirements_txt(root: Path, text: str) -> None:
    (root / "requirements.txt").write_text(text + "\n")
    read_requirements(root, "requirements.txt")


def _build_requires(root: Path, text: str) -> None:
    (root / "pyproject.toml").write_text(f"[build-system]\nrequires = [{json.dumps(text)}]\n"
                                         'build-backend = "setuptools.build_meta"\n[project]\nname = "p"\n')
    find_package(root)


READERS = {
    "--framework": lambda root, text: parse_framework(text, ("torch", "tensorflow", "jax")),
    "envman.yaml packages": lambda root, text: parse_spec({"name": "demo", "packages": [text]}),
    "envman.yaml framework": lambda root, text: parse_spec({"name": "demo", "framework": text}),
    "requirements.txt": _requirements_txt,
    "build-system.requires": _build_requires,
}


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(reader=st.sampled_from(sorted(READERS)), text=TEXT)
@example(reader="requirements.txt", text='https://x.example/a.whl ="')  # exit 70 before: no try around the URL line
@example(reader="requirements.txt", text="-r a\x00b")  # exit 70 before: ValueError (embedded null byte)
def test_any_requirement_text_is_read_or_refused_in_one_line_with_a_hint(reader, text):
    with tempfile.TemporaryDirectory() as tmp:
        try:
            READERS[reader](Path(tmp), text)
        except EnvmanError as e:
            assert len(e.message.splitlines()) == 1, e.message
            assert e.hint, e.message


def test_packaging_s_caret_diagram_is_left_out():
    try:
        parse_framework("torch >>2", ("torch",))
    except EnvmanError as e:
        assert e.message == ("--framework: 'torch >>2' is not a valid requirement "
                             "(Expected semicolon (after name with no version specifier) or end)")
    else:
        raise AssertionError("torch >>2 was read")
