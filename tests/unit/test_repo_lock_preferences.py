"""A repository's own lock (uv.lock, poetry.lock, pdm.lock, Pipfile.lock) is the starting point of a first lock:
its pins become uv's preferences (uv keeps the ones that fit the image), never constraints. CoordFill's first
lock took kornia 0.8.3 beside the torch 2.1.2 its pdm.lock held, and the image failed importing kornia; the
pdm.lock holds 0.7.1 (issue 20, found building the corpus)."""

from __future__ import annotations

from envman._compat import tomllib
from envman.project.sources.locks import preference_seed, preferences
from tests import corpus


def test_a_pdm_lock_pins_become_preferences():
    pins = dict(preferences(corpus.repo("00sapo__CoordFill")))
    assert pins["kornia"] == "0.7.1" and pins["torch"] == "2.1.2"


def test_every_kind_of_repository_lock_gives_preferences():
    for name in ("Unbabel__COMET", "thu-ml__tianshou", "Yircas__CDEP-with-DeepLIFT", "vwxyzjn__cleanrl"):
        assert len(preferences(corpus.repo(name))) > 10, name


def test_the_seed_is_a_pylock_uv_reads_and_no_pin_text_can_break_out_of_it(tmp_path):
    (tmp_path / "Pipfile.lock").write_text('{"default": {"kornia": {"version": "==0.7.1"}, '
                                           '"evil\\"\\n[[x]]": {"version": "==1.0"}, "odd": {"version": "==not a version"}}}')
    pins = preferences(tmp_path)
    assert pins == (("kornia", "0.7.1"),)
    doc = tomllib.loads(preference_seed(pins) or "")
    assert doc["packages"] == [{"name": "kornia", "version": "0.7.1"}] and doc["lock-version"] == "1.0"


def test_no_repository_lock_no_seed(tmp_path):
    assert preferences(tmp_path) == () and preference_seed(()) is None
