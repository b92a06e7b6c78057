"""The stdio wire of ``envman mcp``: every line a client sends gets an answer, or reaches the MCP SDK.

The SDK's stdio transport answers nothing to a line it cannot parse: a line that is not JSON, a request nested
100 000 levels deep (the parser's recursion limit) or one that is not a JSON-RPC message leaves the client
waiting for ever. So the process's stdin and stdout are put behind two pipes: a reader thread reads each line
(bounded: ``MAX_LINE``), passes a well-formed message on to the SDK's stdin, and answers any other line itself
with JSON-RPC 2.0's error object — ``-32700`` (parse error) for a line that is not JSON, ``-32600`` (invalid
request) for JSON that is no message, nests deeper than ``MAX_DEPTH`` or is over ``MAX_LINE``, with the
request's ``id`` wherever one can be read at the top level, so that the client stops waiting for it (else
``null``, as the specification says). A writer
thread copies the SDK's answers to the real stdout a line at a time, under the same lock as those errors, so
no two answers interleave. Only os, threading and the SDK's public ``run("stdio")`` are used.
"""

from __future__ import annotations

import json
import os
import re
import select
import threading
from collections.abc import Callable
from itertools import accumulate
from typing import Any, BinaryIO

MAX_LINE = 4 * 1024 * 1024  # a tool call's arguments are a few hundred bytes; a 300 MB line is never held whole
MAX_DEPTH = 64  # envman's tool arguments nest 3 deep; the parsers' recursion limits are far above this

PARSE_ERROR, INVALID_REQUEST = -32700, -32600
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}:,]|[^\s"\[\]{}:,]+', re.S)
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def nesting(text: str) -> int:
    """How deep ``text``'s arrays and objects nest (brackets inside strings do not count), without parsing it."""
    brackets = re.sub(r"[^\[\]{}]", "", _STRING.sub("", text))
    return max(accumulate(_STEP[c] for c in brackets), default=0)


def top_level_id(text: str) -> str | int | None:
    """The ``id`` of a JSON object's top level, read token by token (so at any depth of the rest): a string or an
    integer, else None."""
    depth, tokens = 0, _TOKEN.finditer(text)
    for m in tokens:
        tok = m.group()
        if tok in "[{":
            depth += 1
        elif tok in "]}":
            depth -= 1
        elif depth == 1 and tok == '"id"' and next(tokens, None) is not None:
            value = next(tokens, None)
            return _scalar_id(value.group()) if value is not None else None
    return None


def _scalar_id(tok: str) -> str | int | None:
    try:
        v = json.loads(tok)
    except ValueError:
        return None
    return v if isinstance(v, str) or (isinstance(v, int) and not isinstance(v, bool)) else None


def error_line(id_: Any, code: int, message: str) -> bytes:
    return (json.dumps({"jsonrpc": "2.0", "id": id_, "error": {"code": code, "message": message}},
                       ensure_ascii=True) + "\n").encode("ascii")


def screen(line: bytes, is_message: Callable[[str], bool]) -> bytes | None:
    """None when ``line`` goes on to the SDK (a blank line goes nowhere: b""); else the error answer to send."""
    try:
        text = line.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        return error_line(None, PARSE_ERROR, "Parse error: the line is not UTF-8")
    if not text.strip():
        return b""
    if nesting(text) > MAX_DEPTH:
        return error_line(top_level_id(text), INVALID_REQUEST,
                          f"Invalid Request: nested deeper than {MAX_DEPTH} levels")
    try:
        json.loads(text)
    except ValueError as exc:  # the id, where the top level still shows one: the client stops waiting for it
        return error_line(top_level_id(text), PARSE_ERROR, f"Parse error: not JSON ({exc})")
    if not is_message(text):  # the SDK's own check of a message, on the same text
        return error_line(top_level_id(text), INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 message")
    return None


def read_line(src: BinaryIO) -> tuple[bytes, bool]:
    """The next line of ``src`` without its newline, and whether it was over ``MAX_LINE`` (the rest of an
    overlong line is read and dropped in bounded pieces). (b"", False) at the end."""
    line = src.readline(MAX_LINE + 1)
    if len(line) <= MAX_LINE or line.endswith(b"\n"):
        return line, False
    while True:
        rest = src.readline(1 << 20)
        if not rest or rest.endswith(b"\n"):
            return line[:4096], True


def pump_in(src: BinaryIO, to_sdk: BinaryIO, answer: Callable[[bytes], None],
            is_message: Callable[[str], bool]) -> None:
    """Client → SDK: each line screened; ends (closing the SDK's stdin) when the client's stdin ends."""
    try:
        while True:
            line, overlong = read_line(src)
            if not line:
                return
            if overlong:
                answer(error_line(top_level_id(line.decode("utf-8", "replace")), INVALID_REQUEST,
                                  f"Invalid Request: the line is over {MAX_LINE} bytes"))
                continue
            verdict = screen(line, is_message)
            if verdict is None:
                to_sdk.write(line if line.endswith(b"\n") else line + b"\n")
                to_sdk.flush()
            elif verdict:
                answer(verdict)
    except (BrokenPipeError, ValueError):  # the SDK is gone: nothing left to feed
        return
    finally:
        try:
            to_sdk.close()
        except (BrokenPipeError, ValueError):
            pass


def pump_out(fd: int, answer: Callable[[bytes], None], done: threading.Event) -> None:
    """SDK → client, one whole line at a time, until the pipe is drained after ``done`` (the SDK keeps its own
    copy of the pipe's write end open, so no end of file comes)."""
    pending = bytearray()
    while True:
        if not select.select([fd], [], [], 0.05)[0]:
            if done.is_set():
                break
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        pending += chunk
        while (nl := pending.find(b"\n")) >= 0:
            answer(bytes(pending[:nl + 1]))
            del pending[:nl + 1]
    if pending:
        answer(bytes(pending) + b"\n")


def serve_stdio(run: Callable[[], None], is_message: Callable[[str], bool]) -> None:
    """Run ``run`` (the SDK's stdio server, which reads fd 0 and writes fd 1) behind the screened wire."""
    wire_in = os.fdopen(os.dup(0), "rb")  # buffered: readline finds the newline in what has arrived
    wire_out = os.fdopen(os.dup(1), "wb")  # buffered: a write to a pipe may be partial, BufferedWriter finishes it
    sdk_in_r, sdk_in_w = os.pipe()
    sdk_out_r, sdk_out_w = os.pipe()
    lock, done = threading.Lock(), threading.Event()

    def answer(data: bytes) -> None:
        with lock:
            wire_out.write(data)
            wire_out.flush()

    os.dup2(sdk_in_r, 0)
    os.dup2(sdk_out_w, 1)
    os.close(sdk_in_r)
    os.close(sdk_out_w)
    reader = threading.Thread(target=pump_in, args=(wire_in, os.fdopen(sdk_in_w, "wb"), answer, is_message),
                              daemon=True, name="envman-mcp-in")
    writer = threading.Thread(target=pump_out, args=(sdk_out_r, answer, done),
                              daemon=True, name="envman-mcp-out")
    reader.start()
    writer.start()
    try:
        run()
    finally:
        done.set()  # every answer the SDK wrote is in the pipe: the writer drains it, then stops
        writer.join(timeout=10)
