"""Issue 38: `envman init --no-lock --target h100` over every repository of ``../shared/corpus`` (235 real training
repositories' dependency data files; SOURCE.yaml's facts about their code), held to invariants that must hold for
all of them (tests/data/corpus_invariants.py says each). Skips with the reason when the corpus is absent (a user's
clone); CI has ``shared/`` beside the checkout. The table these numbers make is in docs/repos.md.

An exception is a repository for which the invariant's measure is wrong, not envman: each is named with why."""

from __future__ import annotations

import pytest

from envman.resources import shipped_matrix_dir
from tests.data import corpus_invariants as ci

# invariant → {folder: why envman's behaviour is right there}
EXCEPTIONS: dict[str, dict[str, str]] = {key: {} for key in ci.INVARIANTS}
SHARE = 0.98

pytestmark = pytest.mark.skipif(not ci.folders(), reason=f"no corpus at {ci.CORPUS} (set ENVMAN_CORPUS, or put "
                                                        "shared/ beside the checkout as CI does)")


@pytest.fixture(scope="module")
def results():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ENVMAN_MATRIX_DIR", str(shipped_matrix_dir()))
        return ci.measure()


def test_the_corpus_is_the_one_described():
    assert len(ci.folders()) == 235


@pytest.mark.parametrize("invariant", sorted(ci.INVARIANTS))
def test_the_invariant_holds_on_the_corpus(results, invariant):
    broken = {name: r[invariant] for name, r in results.items() if r[invariant]}
    unexplained = {n: why for n, why in broken.items() if n not in EXCEPTIONS[invariant]}
    assert not unexplained, f"{ci.INVARIANTS[invariant]}: " + "; ".join(f"{n}: {w}" for n, w in unexplained.items())
    assert len(results) - len(broken) >= SHARE * len(results)


def test_every_exception_is_still_one(results):
    stale = [(k, n) for k, names in EXCEPTIONS.items() for n in names if not results[n][k]]
    assert not stale, f"these hold now; take them off EXCEPTIONS: {stale}"
