"""envman/diskcache.py: values derived from data files, kept on disk by the digest of their bytes."""

from __future__ import annotations

from envman import diskcache


def test_a_value_is_computed_once_then_read_back(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_CACHE_DIR", str(tmp_path))
    calls = []

    def compute():
        calls.append(1)
        return {"answer": 42}

    assert diskcache.cached("thing", "ab" * 32, compute, lambda v: isinstance(v, dict)) == {"answer": 42}
    assert diskcache.cached("thing", "ab" * 32, compute, lambda v: isinstance(v, dict)) == {"answer": 42}
    assert len(calls) == 1 and diskcache.cache_path("thing", "ab" * 32).is_file()
    # other bytes, another digest: computed afresh
    assert diskcache.cached("thing", "cd" * 32, compute, lambda v: True) == {"answer": 42} and len(calls) == 2


def test_a_rejected_or_corrupt_entry_is_computed_again(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_CACHE_DIR", str(tmp_path))
    diskcache.cache_path("thing", "ef" * 32).parent.mkdir(parents=True, exist_ok=True)
    diskcache.cache_path("thing", "ef" * 32).write_bytes(b"not a pickle")
    assert diskcache.cached("thing", "ef" * 32, lambda: "fresh", lambda v: v == "fresh") == "fresh"
    assert diskcache.cached("thing", "ef" * 32, lambda: "again", lambda v: v == "again") == "again"  # rejected


def test_an_unwritable_cache_only_means_computing_every_time(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache folder would be")
    monkeypatch.setenv("ENVMAN_CACHE_DIR", str(blocker / "cache"))
    assert diskcache.cached("thing", "01" * 32, lambda: 7, lambda v: True) == 7
    assert diskcache.cached("thing", "01" * 32, lambda: 8, lambda v: True) == 8
