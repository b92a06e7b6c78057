"""A push says how far it is (issue 36: a 5.9 GB push was silent for five minutes): Docker's push stream tallied
into layers done and bytes sent, a line at most every few seconds, on stderr."""

from __future__ import annotations

import itertools

import pytest

from envman.engine.docker import Engine
from envman.engine.pushprogress import PushTally

GB = 1_000_000_000
# what the Docker API streams for a push (docker-py's decoded chunks), in the order an engine sends them
STREAM = [
    {"status": "The push refers to repository [registry.example.com/demo]"},
    {"status": "Preparing", "progressDetail": {}, "id": "aaa"},
    {"status": "Preparing", "progressDetail": {}, "id": "bbb"},
    {"status": "Preparing", "progressDetail": {}, "id": "ccc"},
    {"status": "Layer already exists", "progressDetail": {}, "id": "ccc"},
    {"status": "Pushing", "progressDetail": {"current": 1 * GB, "total": 5 * GB}, "id": "aaa"},
    {"status": "Pushing", "progressDetail": {"current": 20_000_000, "total": 900_000_000}, "id": "bbb"},
    {"status": "Pushing", "progressDetail": {"current": 3 * GB, "total": 5 * GB}, "id": "aaa"},
    {"status": "Pushed", "progressDetail": {}, "id": "bbb"},
    {"status": "Pushed", "progressDetail": {}, "id": "aaa"},
    {"status": "1: digest: sha256:d1 size: 1234"},
    {"aux": {"Tag": "1", "Digest": "sha256:d1", "Size": 1234}},
]


def test_the_tally_counts_layers_and_bytes_and_reports_at_most_every_few_seconds():
    lines: list[str] = []
    clock = itertools.count(0, 1.0)  # one second per message
    tally = PushTally("registry.example.com/demo:1", lines.append, every=3.0, clock=lambda: next(clock))
    for message in STREAM:
        tally.feed(message)
    assert lines == [  # at 3 s, 6 s and 9 s
        "pushing registry.example.com/demo:1: 0/3 layers, 0 B of 0 B sent",
        "pushing registry.example.com/demo:1: 1/3 layers, 1.0 GB of 5.9 GB sent",
        "pushing registry.example.com/demo:1: 3/3 layers, 5.9 GB of 5.9 GB sent",
    ]
    assert tally.line() == "pushing registry.example.com/demo:1: 3/3 layers, 5.9 GB of 5.9 GB sent"


class FakeAPI:
    def __init__(self, stream):
        self.stream = stream

    def push(self, repo, tag, stream, decode):
        return iter(self.stream)


class FakeClient:
    def __init__(self, stream):
        self.api = FakeAPI(stream)


def test_engine_push_reports_progress(monkeypatch):
    monkeypatch.setattr(PushTally, "EVERY", 0.0)
    lines: list[str] = []
    assert Engine(FakeClient(STREAM)).push("registry.example.com/demo:1", progress=lines.append) == "sha256:d1"
    assert lines[-1] == "pushing registry.example.com/demo:1: 3/3 layers, 5.9 GB of 5.9 GB sent"
    assert Engine(FakeClient(STREAM)).push("registry.example.com/demo:1") == "sha256:d1"  # no callback: silent


def test_build_prints_push_progress_on_stderr(tmp_path, monkeypatch, capsys):
    import envman.app.build as app_build
    import envman.cli.output as output
    from envman.cli.main import main

    now = iter(range(0, 1000, 11))  # each reading 11 s later: past the 10 s between two plain lines
    monkeypatch.setattr(output, "time", type("T", (), {"monotonic": staticmethod(lambda: next(now))}))

    def fake_build(root, opts, echo, progress):
        progress("pushing registry.example.com/demo:1: 1/3 layers, 1.0 GB of 5.9 GB sent")
        progress("pushing registry.example.com/demo:1: 2/3 layers, 3.0 GB of 5.9 GB sent")
        return [app_build.BuildOutcome(None, "demo:0123456789ab", True)]

    monkeypatch.setattr(app_build, "build_project", fake_build)
    assert main(["build", str(tmp_path), "--no-smoke"]) == 0
    out, err = capsys.readouterr()
    assert err.splitlines() == ["pushing registry.example.com/demo:1: 1/3 layers, 1.0 GB of 5.9 GB sent (11 s)",
                                "pushing registry.example.com/demo:1: 2/3 layers, 3.0 GB of 5.9 GB sent (22 s)"]
    assert out == "ok: demo:0123456789ab (built)\n"


@pytest.mark.parametrize(("n", "text"), [(0, "0 B"), (999, "999 B"), (1500, "1.5 kB"), (5_900_000_000, "5.9 GB")])
def test_human_sizes(n, text):
    from envman.engine.pushprogress import human

    assert human(n) == text
