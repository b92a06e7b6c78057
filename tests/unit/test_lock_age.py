"""Issue 38, class 6, after the lock: init's age rule (project/age.py) applied again once uv has locked, with the
project's exact pins dated by pylock.toml's upload-time and the checkout's last git commit (app/stack.py _age_notes).
coqui-ai/TTS@dbf1a08's pattern: `torch>=2.1` beside pins of distributions the release-date table does not hold
(mutagen==1.47.0, gruut==2.2.3), committed 2024-02; it got torch 2.14 with no word (docs/repos.md)."""

from __future__ import annotations

import os
import subprocess
from datetime import date
from types import SimpleNamespace

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from envman.app.stack import _age_notes
from envman.project.age import last_commit, say_age
from envman.project.req import Req

TTS = ["torch>=2.1", "mutagen==1.47.0", "gruut==2.2.3", "librosa>=0.10.0"]


def _reqs(lines: list[str]) -> list[Req]:
    return [Req(Requirement(line), f"requirements.txt:{i}") for i, line in enumerate(lines, 1)]


def _pylock(uploads: dict[str, tuple[str, str]]) -> str:
    """A pylock.toml as uv writes it, each package with one wheel uploaded at the time given."""
    body = 'lock-version = "1.0"\ncreated-by = "uv"\n'
    for name, (version, when) in uploads.items():
        body += (f'\n[[packages]]\nname = "{name}"\nversion = "{version}"\nwheels = [{{ url = "https://files.example/'
                 f'{name}-{version}-py3-none-any.whl", upload-time = {when}, '
                 f'hashes = {{ sha256 = "{"0" * 64}" }} }}]\n')
    return body


LOCKED = {"torch": ("2.14.1", "2026-09-02T10:00:00Z"), "mutagen": ("1.47.0", "2023-09-03T12:00:00Z"),
          "gruut": ("2.2.3", "2022-04-03T12:00:00Z"), "librosa": ("0.11.0", "2025-03-11T12:00:00Z")}


def _notes(matrix, root, lines: list[str], locked: dict, framework: str = "torch>=2.1") -> list[str]:
    inputs = SimpleNamespace(matrix=matrix, root=root)
    spec, res = SimpleNamespace(framework=framework), SimpleNamespace(framework="torch")
    return _age_notes(inputs, spec, res, _reqs(lines), _pylock(locked))  # type: ignore[arg-type]


def test_exact_pins_the_table_lacks_are_dated_by_their_locked_upload(matrix, tmp_path):
    assert _notes(matrix, tmp_path, TTS, LOCKED) == [
        "warning: the newest release these files name is requirements.txt:1: torch>=2.1 (2023-10); the torch "
        "releases up to 2.14.1 (2026-09) that the range admits came 3 years later: the code predates them. Pass "
        "--framework 'torch==2.4.*' for the release of its time (2024-07), or pin the one it was tested with"]


# a floor resolves to the newest release: its upload says nothing of the code (lm-evaluation-harness's floors);
# a `<` cap dates the code as a pin does
@pytest.mark.parametrize("lines, said", [(["torch>=2.1", "librosa>=0.10.0", "mutagen>=1.40"], False),
                                         (["torch>=2.1", "mutagen<1.48"], True),
                                         (["torch>=2.1", "mutagen~=1.47.0"], True)])
def test_only_pins_and_caps_date_the_code(matrix, tmp_path, lines, said):
    assert any("the code predates them" in n for n in _notes(matrix, tmp_path, lines, LOCKED)) is said


def test_recent_pins_after_the_lock_say_nothing(matrix, tmp_path):
    recent = {**LOCKED, "mutagen": ("1.48.0", "2025-06-01T12:00:00Z"), "gruut": ("2.4.0", "2024-11-03T12:00:00Z")}
    assert _notes(matrix, tmp_path, ["torch>=2.1", "mutagen==1.48.0", "gruut==2.4.0"], recent) == []


def test_a_pin_the_table_already_dates_warns_as_init_did(matrix, tmp_path):
    """The same words as init's (tests/unit/test_repo_rules.py): init's report lists it once."""
    lines = ["numpy>=1.24.3", "torch>=2.1", "numba==0.58.1", "mutagen==1.47.0"]
    init: list[str] = []
    say_age("torch", _reqs(lines), SpecifierSet(">=2.1"), [r.version for r in matrix.frameworks["torch"]], init)
    assert init and _notes(matrix, tmp_path, lines, {**LOCKED, "numba": ("0.58.1", "2023-10-17T12:00:00Z")}) == init


def _git_repo(path, when: str):
    path.mkdir()
    env = {**os.environ, "GIT_COMMITTER_DATE": when, "GIT_AUTHOR_DATE": when, "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org"}
    (path / "requirements.txt").write_text("torch>=2.1\n")
    for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "x"]):
        subprocess.run(["git", "-C", str(path), *args], env=env, check=True)
    return path


def test_a_checkout_last_committed_years_before_the_release_predates_it(matrix, tmp_path):
    root = _git_repo(tmp_path / "tts", "2024-02-20T12:00:00+00:00")
    day, short = last_commit(root) or (None, "")
    assert day == date(2024, 2, 20)
    assert _notes(matrix, root, ["torch>=2.1", "librosa>=0.10.0"], LOCKED) == [
        f"warning: the repository's last commit is {short} (2024-02); the torch releases up to 2.14.1 (2026-09) that "
        "the range admits came 3 years later: the code predates them. Pass --framework 'torch==2.2.*' for the "
        "release of its time (2024-01), or pin the one it was tested with"]


# a checkout committed within two years of the release is maintained: a lone old pin of a distribution the table
# lacks (lm-evaluation-harness's `antlr4-python3-runtime==4.11` pattern) is no age; the table's own dates still are
@pytest.mark.parametrize("lines", [["torch>=2.1", "librosa>=0.10.0"], TTS])
def test_a_recent_checkout_says_nothing_of_floors_or_pins_the_table_lacks(matrix, tmp_path, lines):
    root = _git_repo(tmp_path / "recent", "2026-08-01T12:00:00+00:00")
    assert _notes(matrix, root, lines, LOCKED) == []


def test_a_folder_that_is_no_checkout_has_no_commit(tmp_path):
    (tmp_path / ".git").write_text("gitdir: /nowhere\n")  # a worktree's pointer to a repository that is gone
    assert last_commit(tmp_path) is None and last_commit(tmp_path / "none") is None
