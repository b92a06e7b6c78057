"""Issue 20's corpus (46 real repositories) as the tests read it, assembled: each repository's dependency data
files, byte for byte from ``../shared/corpus/<name>/`` (the 235-repository corpus beside the checkout, found as
tests/data/corpus_invariants.py finds it: ``ENVMAN_CORPUS``, else ``shared/`` beside the clone) — the files
tests/fixtures/corpus/data_files.yaml names — laid into envman's own files of tests/fixtures/corpus/<name>/
(SOURCE, the setup.py fixtures, empty stubs of its packages and folders, placeholders, symlinks). The project
keeps nothing of the repositories' own.

``repo(name)``: the tree, assembled once per run, to read in place. ``copy_repo(name, dst)``: a fresh tree to
write into (init writes). Both skip the test, saying why, when the corpus is absent (a user's clone); CI has it."""

from __future__ import annotations

import shutil
import tempfile
from functools import cache
from pathlib import Path

import pytest
import yaml

from tests.data.corpus_invariants import CORPUS as SHARED

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "corpus"
ABSENT = f"no corpus at {SHARED} (set ENVMAN_CORPUS, or put shared/ beside the checkout as CI does)"


def names() -> list[str]:
    """The repositories of the corpus, sorted (a folder of ours each, so this needs no shared corpus)."""
    return sorted(p.name for p in FIXTURES.iterdir() if p.is_dir())


@cache
def _data_files() -> dict[str, list[str]]:
    return yaml.safe_load((FIXTURES / "data_files.yaml").read_text())["repos"]


def _assemble(name: str, dst: Path) -> None:
    """Our files (symlinks kept: torchtitan's requirements.txt points into .ci/docker/), then its data files."""
    files = _data_files()[name]
    missing = [f for f in files if not (SHARED / name / f).is_file()]
    assert not missing, f"{SHARED / name} lacks {missing}: not the corpus tests/fixtures/corpus/data_files.yaml names"
    shutil.copytree(FIXTURES / name, dst, symlinks=True)
    for rel in files:
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(SHARED / name / rel, dst / rel)


@cache
def _workdir() -> tempfile.TemporaryDirectory:
    return tempfile.TemporaryDirectory(prefix="envman-corpus-")  # removed when the interpreter exits


def repo(name: str) -> Path:
    """The repository's tree, assembled once per run: read it, never write into it (``copy_repo`` for that)."""
    if not SHARED.is_dir():
        pytest.skip(ABSENT)
    d = Path(_workdir().name) / name
    if not d.is_dir():
        _assemble(name, d)
    return d


def copy_repo(name: str, dst: Path) -> Path:
    """A copy of the repository's tree at ``dst`` (created), symlinks followed, as ``shutil.copytree`` makes it."""
    shutil.copytree(repo(name), dst)
    return dst
