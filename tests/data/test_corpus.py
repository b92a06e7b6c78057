"""The corpus of issue 20 (46 real repositories' dependency files, assembled by tests/corpus.py) held to what envman
should do with each (tests/fixtures/corpus/expectations.yaml, judged by hand from the repositories' files and
READMEs): `envman init --no-lock --target h100` with the command a refusal hints at gives the expected stack,
and without it the refusal names what blocks. Offline; the lock and build results are in docs/repos.md."""

from __future__ import annotations

import shlex

import pytest
import yaml

from envman.app.init import InitOptions, init_project
from envman.errors import EnvmanError
from tests import corpus

CORPUS = corpus.FIXTURES
EXPECT = yaml.safe_load((CORPUS / "expectations.yaml").read_text())["repos"]
FLAGS = {"--framework": "framework", "--python": "python", "--cuda": "cuda"}


def _options(args: str) -> dict:
    words = shlex.split(args or "")
    return {FLAGS[words[i]]: words[i + 1] for i in range(0, len(words), 2)}


def test_every_corpus_repository_has_an_expectation_and_a_source():
    folders = {p.name for p in CORPUS.iterdir() if p.is_dir()}
    assert folders == set(EXPECT) and len(folders) >= 40
    for f in folders:
        source = (CORPUS / f / "SOURCE").read_text()
        assert source.startswith("repository: https://github.com/") and "\ncommit: " in source, f


@pytest.mark.parametrize("name", sorted(n for n, e in EXPECT.items() if e["serve"]))
def test_a_servable_repository_gets_its_stack(tmp_path, name):
    e = EXPECT[name]
    d = tmp_path / name
    corpus.copy_repo(name, d)
    out = init_project(d, InitOptions(targets=("h100",), no_lock=True, **_options(e.get("args", ""))))
    r = out.resolution
    got = f"{r.framework} {r.version} {r.variant}" if r.framework else "none"
    assert got == e["stack"], "\n".join(out.notes)


@pytest.mark.parametrize("name", sorted(n for n, e in EXPECT.items() if e.get("refusal")))
def test_without_the_hinted_command_the_refusal_names_what_blocks_and_the_command(tmp_path, name):
    e = EXPECT[name]
    d = tmp_path / name
    corpus.copy_repo(name, d)
    with pytest.raises(EnvmanError) as ei:
        init_project(d, InitOptions(targets=("h100",), no_lock=True))
    assert e["refusal"] in ei.value.message
    flag = e["args"].split()[0]
    assert flag in (ei.value.hint or ""), ei.value.hint
    assert not (d / "envman.yaml").exists()
