"""Plain-text tables, JSON and the resolver's text for the CLI. No rich: it costs ~100 ms of import per run."""

from __future__ import annotations

import contextlib
import json
import re
import sys
import time
from collections.abc import Iterator
from typing import Any, TextIO

from envman.errors import ResolutionError

# Terminal escape sequences (ECMA-48): OSC (a title, OSC 52 the clipboard, OSC 8 a link) up to BEL or ST;
# DCS/SOS/PM/APC strings up to ST (tmux's passthrough wraps another sequence in one); CSI (cursor, colours,
# clearing); 8-bit CSI/OSC; two-character escapes. Then any control character left but newline and tab, DEL, C1
# and the bidirectional overrides that make text read other than it is.
_ESCAPES = re.compile(
    r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[P_^X][\s\S]*?(?:\x1b\\|\x9c|$)"
    r"|\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x9b[0-?]*[ -/]*[@-~]"
    r"|[\x90\x98\x9d\x9e\x9f][^\x07\x9c]*(?:\x07|\x9c)?"
    r"|\x1b[ -/]*[0-~]?"
)
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def clean(text: str) -> str:
    """``text`` as it may reach a terminal: no escape sequence, no control character but newline and tab."""
    if text.isprintable():  # the common case, in C
        return text
    return _CONTROLS.sub("", _ESCAPES.sub("", text))


class CleanStream:
    """A text stream that writes everything through ``clean``: what envman prints (messages, tables, a facts
    file's names, an index's metadata) cannot move the cursor, clear the screen or write the clipboard.
    ``unfiltered`` is the stream itself, for envman's own live progress line."""

    def __init__(self, stream: TextIO) -> None:
        self.unfiltered = stream
        self.written = False  # anything written yet: the boundary's JSON error is the only document on stdout
        self.encoding = getattr(stream, "encoding", "utf-8")
        self.errors = getattr(stream, "errors", "strict")

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self.unfiltered.write(clean(text))
        self.written = self.written or bool(text)
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self.unfiltered.flush()

    def isatty(self) -> bool:
        return bool(getattr(self.unfiltered, "isatty", lambda: False)())

    def fileno(self) -> int:
        return self.unfiltered.fileno()

    @property
    def buffer(self) -> Any:
        """The binary stream beneath, for a protocol that speaks bytes (envman mcp's JSON-RPC, whose JSON escapes
        every control character itself): not text envman echoes."""
        return self.unfiltered.buffer


@contextlib.contextmanager
def clean_streams() -> Iterator[None]:
    """sys.stdout and sys.stderr through ``clean`` while a command runs (the CLI's boundary installs it)."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = CleanStream(saved[0]), CleanStream(saved[1])  # type: ignore[assignment]
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def table(rows: list[list[str]], header: list[str] | None = None) -> str:
    all_rows = ([header] if header else []) + rows
    if not all_rows:
        return ""
    widths = [max(len(r[i]) if i < len(r) else 0 for r in all_rows) for i in range(max(len(r) for r in all_rows))]
    lines = []
    for n, r in enumerate(all_rows):
        lines.append("  ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip())
        if header and n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=False, ensure_ascii=False) + "\n")


def print_refusal(err: ResolutionError) -> None:
    from envman.redact import redact

    lines = [f"error: {redact(err.message)}"]
    if err.conflicts:
        lines.append("blocked by:")
        lines += [f"  - {c}" for c in err.conflicts]
    if err.alternatives:
        lines.append("nearest alternatives:")
        lines += [f"  - {a['change']}" for a in err.alternatives]
    if err.hint:
        lines.append(f"hint: {redact(err.hint)}")
    print("\n".join(lines), file=sys.stderr)


def format_resolution(res, base_image: str | None = None) -> str:
    """``base_image``: the image the lock really starts from (``--base-image``, envman.yaml), when not the stack's."""
    rows = []
    if res.framework:
        how = "plain PyPI wheel" if res.index_url is None else res.index_url
        rows.append(["framework", f"{res.framework} {res.version}", f"{res.variant} ({how})"])
        comps = ", ".join(f"{k} {v}" for k, v in res.companions if v)
        if comps:
            rows.append(["companions", comps, ""])
    rows.append(["python", res.python, ""])
    if res.cuda:
        rows.append(["cuda", res.cuda, f"cuDNN {res.cudnn or '-'}, NCCL {res.nccl or '-'}"])
        drv = f"≥ {res.min_driver}"
        if res.min_driver_minor_compat:
            drv += f" (minor-compat ≥ {res.min_driver_minor_compat})"
        mode = {"full": "full", "minor-compat": "minor-version compat only"}.get(res.driver_mode or "", "")
        rows.append(["driver", drv, f"{res.driver}{' (assumed)' if res.driver_assumed else ''}: {mode}"])
    if res.arch_list:
        rows.append(["arch list", " ".join(res.arch_list), ("PTX " + " ".join(res.ptx)) if res.ptx else ""])
    if res.targets:
        rows.append(["targets", ", ".join(f"{t.label} ({t.cc.sm})" for t in res.targets), ""])
    rows.append(_base_row(res, base_image))
    if res.platform != "linux/amd64":  # x86_64 summaries read as they always did
        rows.append(["platform", res.platform, f"Linux {res.arch} wheels and image"])
    out = [table(rows)]
    if res.notes:
        out.append("\nwhy:")
        out += [f"  - {n}" for n in res.notes]
    if res.warnings:
        out.append("\nwarnings:")
        out += [f"  ! {w}" for w in res.warnings]
    return "\n".join(out)


def _base_row(res, base_image: str | None) -> list[str]:
    if base_image and base_image != res.base_image:
        return ["base image", base_image, f"override (the stack's default: {res.base_image})"]
    return ["base image", res.base_image, res.base_kind]


def format_outcome(out, root) -> str:
    """What ``envman init`` and ``envman lock`` print: the stack, the notes, the files, the lock hash."""
    ref = (out.lock.get("base_image") or {}).get("ref") if hasattr(out.lock, "get") else None
    lines = [format_resolution(out.resolution, base_image=ref), ""]
    lines += [f"  - {n}" for n in out.notes]
    if out.written:
        names = [str(p.relative_to(root)) for p in out.written]
        private = [n for n in names if n.startswith(".envman/")]
        shown = [n for n in names if not n.startswith(".envman/")]
        if private:
            shown.append(f".envman/ ({', '.join(n.removeprefix('.envman/') for n in private)})")  # envman's own
        lines.append("wrote: " + ", ".join(shown))
    else:
        lines.append("up to date: nothing changed")
    lines.append(f"lock hash: {out.lock['lock_hash'][:12]} (image tag {out.lock['name']}:{out.lock['lock_hash'][:12]})")
    return "\n".join(lines)


class Progress:
    """uv's progress on stderr: one live line on a terminal, plain lines otherwise (at most one every few
    seconds, so a CI log shows a stall without drowning in lines)."""

    def __init__(self, stream=None, every: float = 5.0) -> None:
        self.stream = getattr(stream or sys.stderr, "unfiltered", stream or sys.stderr)  # its own \r\x1b[K
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.live = self.tty  # a live line wants uv's per-request log
        self.every, self.start, self.shown = every, time.monotonic(), False
        self.last = self.start  # plain lines: only once a step has taken a while

    def __call__(self, line: str) -> None:
        now = time.monotonic()
        msg = f"{clean(line)} ({now - self.start:.0f} s)"
        if self.tty:
            self.stream.write("\r\x1b[K" + msg[:120])
            self.shown = True
        elif now - self.last >= self.every:
            self.stream.write(msg + "\n")
        else:
            return
        self.last = now
        self.stream.flush()

    def done(self) -> None:
        if self.tty and self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
