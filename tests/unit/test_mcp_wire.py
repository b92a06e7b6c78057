"""`envman mcp`'s stdio wire (envman/cli/mcpwire.py, issue 39 cause 13): every line a client sends gets an answer.
The SDK's stdio transport answered nothing to a line that is not JSON or a request nested 100 000 levels deep,
so the client waited for ever; now each such line gets JSON-RPC's -32700 or -32600 error, with the request's id
where its top level shows one."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envman.cli import mcpwire
from envman.cli.mcpwire import INVALID_REQUEST, PARSE_ERROR, nesting, read_line, screen, top_level_id

pytest.importorskip("mcp", reason="the MCP SDK is the envman[mcp] extra (the test extra installs it)")

from mcp_types import jsonrpc_message_adapter  # noqa: E402


def is_message(text: str) -> bool:
    try:
        jsonrpc_message_adapter.validate_json(text, by_name=False)
    except ValueError:
        return False
    return True


def deep(n: int, id_: object = 7) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": id_, "method": "tools/list"})[:-1] + ', "params": {"x": ' + "[" * n + "]" * n + "}}"


INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


def test_envman_mcp_answers_every_line_over_real_stdio():
    """As a client does: the lines written, stdin kept open until every answer came (the SDK drops requests still
    in flight when stdin closes), read with a deadline."""
    import select
    import time

    lines = [json.dumps(INIT), json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
             "this is not json", deep(100_000), '{"jsonrpc": "2.0", "id": 8, "method": "tools/list"',
             '{"id": 10, "hello": 1}', json.dumps({"jsonrpc": "2.0", "id": 9, "method": "ping"})]
    proc = subprocess.Popen([sys.executable, "-m", "envman.cli.main", "mcp"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    answers: dict = {}
    try:
        proc.stdin.write(("\n".join(lines) + "\n").encode())
        proc.stdin.flush()
        pending, deadline = b"", time.monotonic() + 120
        while set(answers) != {1, None, 7, 8, 9, 10} and time.monotonic() < deadline:
            if select.select([proc.stdout], [], [], 1)[0]:
                chunk = proc.stdout.read1(1 << 16)
                if not chunk:
                    break
                *done, pending = (pending + chunk).split(b"\n")
                answers.update((a["id"], a) for a in map(json.loads, done))
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
        proc.stdout.close()
        proc.stderr.close()
    assert set(answers) == {1, None, 7, 8, 9, 10}, answers
    assert answers[1]["result"]["serverInfo"]["name"] == "envman" and answers[9]["result"] == {}
    assert answers[None]["error"] == {"code": -32700, "message": "Parse error: not JSON (Expecting value: line 1 column 1 (char 0))"}
    assert answers[7]["error"] == {"code": -32600, "message": "Invalid Request: nested deeper than 64 levels"}
    assert answers[8]["error"] == {"code": -32700, "message": "Parse error: not JSON (Expecting ',' delimiter: line 1 column 51 (char 50))"}
    assert answers[10]["error"] == {"code": -32600, "message": "Invalid Request: not a JSON-RPC 2.0 message"}


def answer(line: str) -> dict:
    got = screen(line.encode("utf-8", "surrogatepass"), is_message)
    assert got is not None and got.endswith(b"\n") and got.count(b"\n") == 1 and got.isascii()
    return json.loads(got)


@settings(max_examples=300, deadline=None)
@given(st.text().filter(lambda t: not is_message(t) and "\n" not in t and "\r" not in t and t.strip()))
def test_any_line_that_is_no_message_gets_an_error_answer(text):
    try:
        a = answer(text)
    except UnicodeEncodeError:  # a lone surrogate cannot be sent as UTF-8 at all
        return
    assert a["jsonrpc"] == "2.0" and a["error"]["code"] in (PARSE_ERROR, INVALID_REQUEST)
    assert a["id"] is None or isinstance(a["id"], (str, int))


@settings(max_examples=100, deadline=None)
@given(st.integers(65, 5000), st.one_of(st.integers(-2**53, 2**53), st.text(max_size=20)))
def test_a_request_nested_too_deep_is_refused_with_its_own_id(depth, id_):
    a = answer(deep(depth, id_))
    assert a == {"jsonrpc": "2.0", "id": id_,
                 "error": {"code": -32600, "message": "Invalid Request: nested deeper than 64 levels"}}


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=5), kids, max_size=3)))
def test_nesting_counts_what_json_nests_and_ignores_brackets_in_strings(value):
    def depth(v) -> int:
        kids = list(v.values()) if isinstance(v, dict) else v if isinstance(v, list) else None
        return 0 if kids is None else 1 + max(map(depth, kids), default=0)

    assert nesting(json.dumps(value)) == depth(value)
    assert top_level_id(json.dumps({"x": value, "id": "k"})) == "k"


def test_a_message_and_a_blank_line_pass_to_the_sdk():
    assert screen(json.dumps(INIT).encode() + b"\n", is_message) is None
    assert screen(b"  \n", is_message) == b""
    assert json.loads(screen(b"\xff\xfe\n", is_message)) == {  # type: ignore[arg-type]
        "jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error: the line is not UTF-8"}}


def test_an_overlong_line_is_dropped_in_bounded_reads_and_the_next_one_read(monkeypatch):
    monkeypatch.setattr(mcpwire, "MAX_LINE", 1024)
    src = io.BytesIO(b'{"id": 3, "x": "' + b"a" * 5000 + b'"}\n' + b'{"next": 1}\n')
    line, overlong = read_line(src)
    assert overlong and line.startswith(b'{"id": 3') and len(line) <= 4096
    assert read_line(src) == (b'{"next": 1}\n', False)
    sent: list[bytes] = []
    mcpwire.pump_in(io.BytesIO(b'{"id": 4, "x": "' + b"b" * 5000 + b'"}\n'), io.BytesIO(), sent.append, is_message)
    assert [json.loads(s) for s in sent] == [{"jsonrpc": "2.0", "id": 4, "error": {
        "code": -32600, "message": "Invalid Request: the line is over 1024 bytes"}}]
