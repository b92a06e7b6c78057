"""uv ignores the upper bound of a package's Requires-Python (documented: it reads ``>=3.8.6,<3.11`` as
``>=3.8.6``), pip does not: keras-hub's lock held backports-strenum 1.3.1 (Requires-Python >=3.8.6,<3.11) for
Python 3.11 and its image build stopped at pip (issue 20, found building the corpus). envman reads each locked
wheel's Requires-Python with its Requires-Dist, excludes the pin and asks uv again."""

from __future__ import annotations

import pytest
from test_lock_uv import PYLOCK, R, fake_uv  # tests/unit is on the path

from envman.app.pythonlocks import _settled
from envman.errors import LockError
from envman.lock import uv as uvmod
from envman.lock.graph import excludes_python


@pytest.mark.parametrize(("spec", "python", "excluded"), [
    (">=3.8.6,<3.11", "3.11", True),
    (">=3.8.6,<3.11", "3.10", False),
    (">=3.11.4", "3.11", False),  # a later 3.11 admits it: the image's patch release decides, not envman
    ("!=3.11.*,>=3.8", "3.11", True),
    (">=3.12", "3.11", True),
    ("not a specifier", "3.11", False),  # unreadable: pip decides
])
def test_which_requires_python_excludes_a_minor(spec, python, excluded):
    assert excludes_python(spec, python) is excluded


def test_the_lock_names_a_pin_whose_requires_python_excludes_the_target(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_CACHE_DIR", str(tmp_path / "cache"))
    deps = {"torch": ["numpy>=1", "Requires-Python: >=3.9"], "numpy": ["Requires-Python: >=3.8.6,<3.11"], "oldpkg": []}
    monkeypatch.setattr("envman.lock.graph.requires_dist", lambda p, timeout, ctx=None: deps[p.name])
    write = f"out = sys.argv[sys.argv.index('-o') + 1]\nopen(out, 'w').write({PYLOCK!r})\n"
    monkeypatch.setattr(uvmod, "uv_binary", lambda: fake_uv(tmp_path, write))
    lr = uvmod.python_lock_job(["torch==2.14.1", "oldpkg"], "3.11", [], ["torch"], R()).compile()
    assert lr.python_excluded == (("numpy", "2.1.0", ">=3.8.6,<3.11"),)
    assert "numpy==2.1.0" in lr.req_text  # the Requires-Python line is no dependency of anything
    assert "numpy==2.1.0 \\\n    --hash=sha256:bb\n    # via torch\n" in lr.req_text


class Answer:
    def __init__(self, excluded=(), versions=None, via=None):
        from envman.lock.uv import LockedPackage, PythonLock

        self.python_excluded = tuple(excluded)
        self.versions = dict(versions or {})
        self.python_lock = PythonLock([], [LockedPackage(n, v, [], list((via or {}).get(n, [])))
                                           for n, v in self.versions.items()])
        self.pylock_text = None


class Job:
    def __init__(self, answers, asked):
        self.answers, self.asked = answers, asked

    def compile(self, progress=None, while_waiting=None):
        return self.answers.pop(0)


class Opts:
    progress = None


def test_an_excluded_pin_is_asked_again_without_it_and_said():
    asked: list[list[str]] = []
    answers = [Answer()]

    def job_with(more, more_overrides=()):
        asked.append(list(more))
        return Job(answers, asked)

    first = Answer([("backports-strenum", "1.3.1", ">=3.8.6,<3.11")])
    lr, notes = _settled(first, "3.11", [], job_with, Opts(), None)
    assert asked == [["backports-strenum!=1.3.1"]] and not lr.python_excluded
    assert notes == ["backports-strenum 1.3.1 requires Python >=3.8.6,<3.11, which excludes 3.11 (uv ignores the "
                     "upper bounds of Requires-Python, pip refuses it): excluded, uv asked again"]


def test_no_uv_run_when_nothing_is_excluded():
    lr, notes = _settled(Answer(), "3.11", [], lambda *more: pytest.fail("uv asked again"), Opts(), None)
    assert notes == [] and not lr.python_excluded


def test_a_pin_no_release_of_which_admits_the_python_is_one_error_with_a_way_out():
    bad = ("oldonly", "1.0", "<3.9")
    answers = [Answer([bad]), Answer([bad]), Answer([bad])]
    with pytest.raises(LockError) as ei:
        _settled(Answer([bad]), "3.11", [], lambda *more: Job(answers, []), Opts(), None)
    assert ei.value.message.startswith("oldonly 1.0 requires Python <3.9, not 3.11")
    assert "pass --python" in ei.value.hint and "constraints:" in ei.value.hint
