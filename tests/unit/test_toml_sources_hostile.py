"""Pipfile and pixi.toml are a repository's own files, read by `envman init`: any value at any place in them is read,
or refused as one error naming the file and the key, with a hint. Found when `feature = 5` in pixi.toml,
`source = 5` in a Pipfile, or an array nested 50,000 deep made `envman init` an internal error (exit 70)."""
from __future__ import annotations

import copy
import tempfile
from pathlib import Path

import pytest
import tomlkit
from hostile import places
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envman.errors import EnvmanError, UsageError
from envman.project.sources.pipfile import read_pipfile
from envman.project.sources.pixi import read_pixi

# each file as its tool's documentation shows it (pixi's manifest reference, pipenv's Pipfile example), shortened
FILES = {
    "pixi.toml": (read_pixi, {
        "project": {"name": "p", "channels": ["conda-forge"], "platforms": ["linux-64"]},
        "dependencies": {"python": "3.11.*", "pytorch": {"version": ">=2.4", "channel": "pytorch"}},
        "pypi-dependencies": {"transformers": ">=4", "x": {"git": "https://git.example.com/x"}},
        "feature": {"cuda": {"system-requirements": {"cuda": "12"}, "dependencies": {"pytorch-cuda": "12.4"}}},
        "system-requirements": {"cuda": "12"}, "environments": {"default": ["cuda"]}}),
    "Pipfile": (read_pipfile, {
        "source": [{"name": "pypi", "url": "https://pypi.org/simple", "verify_ssl": True}],
        "packages": {"torch": "==2.5.1", "numpy": "*", "x": {"version": ">=1", "index": "pypi"}},
        "dev-packages": {"pytest": "*"}, "requires": {"python_version": "3.11"}}),
}



PLACES = [(name, place) for name, (_, doc) in FILES.items() for place in places(doc)]
TOML = st.recursive(st.booleans() | st.integers(-2**63, 2**63 - 1) | st.floats(allow_nan=False) | st.text(max_size=8)
                    | st.sampled_from(["torch", "torch>=2", "*", "==", "3.11", "https://x.example/simple", "pypi"]),
                    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(
                        st.text(max_size=5) | st.sampled_from(["url", "version", "git", "path", "dependencies"]),
                        kids, max_size=3), max_leaves=5)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(where=st.sampled_from(PLACES), value=TOML)
def test_any_value_anywhere_is_read_or_refused_naming_the_file(where, value):
    name, place = where
    read, doc = FILES[name][0], copy.deepcopy(FILES[name][1])
    holder = doc
    for k in place[:-1]:
        holder = holder[k]
    holder[place[-1]] = value
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / name).write_text(tomlkit.dumps(doc))
        try:
            read(Path(tmp))
        except EnvmanError as e:
            assert e.message.startswith(name) and len(e.message.splitlines()) == 1 and e.hint, e.message


@pytest.mark.parametrize("name", sorted(FILES))
def test_a_file_nested_too_deeply_is_refused_naming_it(tmp_path, name):
    (tmp_path / name).write_text("a = " + "[" * 50_000 + "]" * 50_000 + "\n")
    with pytest.raises(UsageError) as e:
        FILES[name][0](tmp_path)
    assert e.value.message == f"{name}: invalid TOML: maximum recursion depth exceeded"
    assert e.value.hint == "fix the file, or write envman.yaml with packages:"
