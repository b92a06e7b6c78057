"""envman.yaml's keys are described once (project/spec.py KEYS): parsing, writing back, the typo hints, the header
init writes and docs/envman-yaml.md all read that table, and a file's problems are reported all at once."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import yaml

from envman.errors import SpecError
from envman.project.spec import KEYS, ProjectSpec, parse_spec, spec_header

DOC = Path(__file__).resolve().parents[2] / "docs" / "envman-yaml.md"
_TABLE = re.compile(r"(<!-- keys:.*?-->\n)(.*?)(<!-- /keys -->)", re.S)


def keys_markdown() -> str:
    """docs/envman-yaml.md's table of keys."""
    rows = ["| key | example | what it is | in a profile |", "|---|---|---|---|"]
    rows += [f"| `{k.name}` | `{k.example}` | {k.doc} | {'yes' if k.profile else ''} |" for k in KEYS]
    return "\n".join(rows) + "\n"


def test_the_docs_table_is_the_key_table(update_golden):
    text = DOC.read_text(encoding="utf-8")
    m = _TABLE.search(text)
    assert m, "docs/envman-yaml.md has no <!-- keys: --> … <!-- /keys --> block"
    if update_golden:
        DOC.write_text(text[:m.start(2)] + keys_markdown() + text[m.end(2):], encoding="utf-8")
        return
    assert m.group(2) == keys_markdown(), "docs/envman-yaml.md's keys differ from KEYS (pytest --update-golden)"


def test_every_field_of_the_spec_is_a_key_and_the_header_names_every_key():
    fields = {f.name for f in dataclasses.fields(ProjectSpec)} - {"source", "project_extras"}
    assert fields == {k.name for k in KEYS}
    header = spec_header()
    assert all(line.startswith("# ") for line in header.splitlines())
    assert all(re.search(rf"\b{k.name}\b", header) for k in KEYS)


def test_a_full_spec_survives_writing_and_reading_back():
    data = {"name": "full", "python": "3.11", "framework": "torch>=2.4", "companions": ["torchvision"],
            "requirements": ["requirements.txt"], "packages": ["numpy"], "system_packages": ["libgl1"],
            "targets": ["h100"], "driver": ">=570", "cuda": "12.8", "cuda_devel": True,
            "command": ["python", "train.py"], "env": {"A": "1"}, "base_image": "python:3.11-slim",
            "install_project": ["train"], "index_urls": ["https://pypi.example/simple"],
            "find_links": ["file:///wheels"], "workload": {"model": "llama-3.1-8b", "lora_targets": ["q_proj"]},
            "sources": ["pyproject.toml"], "profiles": {"old": {"targets": ["v100"], "driver": ">=535"},
                                                        "bare": {"cpu": True, "framework": "none"}}}
    spec = parse_spec(data)
    assert spec.project_extras == ("train",) and spec.profiles[1].framework == "none"
    written = spec.to_data()
    assert list(written) == [k.name for k in KEYS if k.name in written]  # the table's order
    assert parse_spec(yaml.safe_load(spec_header() + yaml.safe_dump(written, sort_keys=False))) == spec


def test_every_problem_is_reported_at_once():
    with pytest.raises(SpecError) as e:
        parse_spec({"name": "Bad Name", "targts": ["h100"], "packages": ["torch @ https://evil.example/x.whl"],
                    "profiles": {"old": {"cuda": ["12"]}}})
    msg = e.value.message
    assert msg.startswith("envman.yaml: targts: unknown key") and msg.endswith(" (and 3 more)")
    hint = e.value.hint.splitlines()
    assert hint[0] == "every problem:"
    assert hint[1] == "  envman.yaml: targts: unknown key (did you mean 'targets'?)"
    assert hint[2].startswith("  envman.yaml: name: 'Bad Name' is not a valid image name")
    assert hint[3] == ("  envman.yaml: packages[0]: 'torch @ https://evil.example/x.whl' is a direct URL "
                       "(pin it by name and version so the lock can hash-check it)")
    assert hint[4] == '  envman.yaml: profiles.old.cuda: expected a string, got list (e.g. cuda: "12.8"; every key: docs/envman-yaml.md)'


def test_one_problem_keeps_its_own_hint():
    with pytest.raises(SpecError) as e:
        parse_spec({"name": "x", "targts": ["h100"]})
    assert (e.value.message, e.value.hint) == ("envman.yaml: targts: unknown key", "did you mean 'targets'?")


@pytest.mark.parametrize("text", ["name: x\npython: 3.10\n", "name: x\nprofiles: {old: {python: 3.10}}\n"])
def test_an_unquoted_python_3_10_is_refused_with_the_quoted_form(text):
    with pytest.raises(SpecError) as e:
        parse_spec(yaml.safe_load(text))
    assert e.value.message.endswith("python: 3.1 is a number: YAML reads an unquoted 3.10 as 3.1")
    assert e.value.hint == 'quote the version: python: "3.10"'
    assert parse_spec(yaml.safe_load('name: x\npython: "3.10"\n')).python == "3.10"
    assert parse_spec(yaml.safe_load("name: x\npython: 3.11\n")).python == "3.11"  # unambiguous as a number
