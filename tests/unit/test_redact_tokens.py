"""No token reaches the terminal: a URL's userinfo, a token in its path (Gemfury, Cloudsmith: ``https://host/TOKEN/
simple``) or in its query, and the fixed-prefix tokens (hf_, sk-, AKIA, ghp_ …), in every message, in uv's cause
lines and in `uv write`'s diff. What envman writes keeps a URL's path (redact_userinfo): the lock names a private
index by a variable instead (lock/indexes.py)."""

from __future__ import annotations

import os
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envman.errors import ToolError
from envman.redact import holds_credentials, redact, redact_userinfo

_ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
# the class: 16 or more letters and digits, holding both (the shape of Gemfury's, Cloudsmith's and most URL tokens)
path_tokens = st.text(_ALNUM, min_size=16, max_size=64).filter(
    lambda t: any(c.isdigit() for c in t) and any(c.isalpha() for c in t))
_words = st.text("abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=12)
hosts = st.builds(lambda a, b: f"{a}.{b}", st.text("abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=10),
                  st.sampled_from(["io", "org", "com", "internal"]))
# where uv and envman put a URL in a line: bare, in backticks, quotes, parentheses, at a line's end
frames = st.sampled_from(["{}", "error: Failed to fetch: `{}`", "  Caused by: error sending request for url ({})",
                          "url = \"{}\"", "'{}' is not reachable", "+url = \"{}\"\n"])


def _prefixed(prefix: str, alphabet: str, size: int) -> st.SearchStrategy[str]:
    return st.text(alphabet, min_size=size, max_size=size).map(lambda t: prefix + t).filter(
        lambda t: prefix != "sk-" or (re.search("[0-9]", t[3:]) and re.search("[A-Za-z]", t[3:])))


UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
prefixed_tokens = st.one_of(
    _prefixed("hf_", _ALNUM, 34), _prefixed("sk-", _ALNUM + "-_", 48), _prefixed("sk-proj-", _ALNUM, 48),
    _prefixed("AKIA", UPPER, 16), _prefixed("ghp_", _ALNUM, 36), _prefixed("gho_", _ALNUM, 36),
    _prefixed("github_pat_", _ALNUM + "_", 82), _prefixed("xoxb-", _ALNUM + "-", 40), _prefixed("xoxp-", _ALNUM, 30),
    _prefixed("glpat-", _ALNUM, 20), _prefixed("npm_", _ALNUM, 36), _prefixed("AIza", _ALNUM + "-_", 35),
)


@settings(max_examples=300, deadline=None)
@given(token=path_tokens, host=hosts, before=st.lists(_words, max_size=3), after=st.lists(_words, max_size=3),
       frame=frames, userinfo=st.sampled_from(["", "bob:s3cr3t@", "__token__@"]))
def test_a_token_in_a_urls_path_never_reaches_the_terminal(token, host, before, after, frame, userinfo):
    url = "https://" + userinfo + host + "/" + "/".join([*before, token, *after, "simple", "torch"]) + "/"
    shown = redact(frame.format(url))
    assert token not in shown and "s3cr3t" not in shown
    assert shown == frame.format("https://" + host + "/" + "/".join([*before, "***", *after, "simple", "torch"]) + "/")


@settings(max_examples=200, deadline=None)
@given(token=prefixed_tokens, host=hosts, where=st.sampled_from(["/{}/simple", "/simple?token={}", "/x?{}",
                                                                   "/simple?key={}&page=2"]))
def test_a_prefixed_token_in_a_path_or_query_is_cut_and_found_in_a_file(token, host, where):
    shown = redact(f"uv: fetching torch from https://{host}" + where.format(token))
    assert token not in shown and "***" in shown
    assert holds_credentials(f"API_KEY={token}\n".encode())
    assert holds_credentials(f'{{"openai": "{token}"}}'.encode())


@pytest.mark.parametrize("url", [
    "https://download.pytorch.org/whl/cu128/torch-2.7.0%2Bcu128-cp312-cp312-manylinux_2_28_x86_64.whl#sha256=abc123",
    "https://pypi.org/simple/nvidia-cudnn-cu12/",
    "https://github.com/huggingface/transformers/releases/tag/v4.57.1",
    "https://pkgs.dev.azure.com/org/123e4567-e89b-12d3-a456-426614174000/_packaging/feed/pypi/simple/",
    "git+https://github.com/org/repo@v1.2.3",
    "https://gitlab.com/api/v4/projects/12345/packages/pypi/simple",
    "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64/",
])
def test_an_ordinary_url_is_shown_as_it_is(url):
    assert redact(f"error: cannot reach {url}") == f"error: cannot reach {url}"


def test_what_envman_writes_keeps_the_path_and_cuts_only_the_userinfo():
    url = "https://bob:s3cr3t@files.example.org/packages/0123456789abcdef0123456789abcdef/x-1.0.tar.gz"
    assert redact_userinfo(url) == "https://files.example.org/packages/0123456789abcdef0123456789abcdef/x-1.0.tar.gz"
    assert redact(url) == "https://files.example.org/packages/***/x-1.0.tar.gz"


TOKEN = "1a2B3c4D5e6F7g8H9i0J"  # the shape of a Gemfury token


def test_uvs_cause_lines_lose_a_path_token(tmp_path):
    from envman.lock.uvproc import UvRun
    from tests.unit.test_lock_uv import fake_uv

    say = (f"error: Failed to fetch: `https://pypi.fury.io/{TOKEN}/me/simple/numpy/`\n"
           f"  Caused by: HTTP status client error (401 Unauthorized) for url (https://pypi.fury.io/{TOKEN}/me/simple/"
           "numpy/)\n")
    exe = fake_uv(tmp_path, f"sys.stderr.write({say!r})\nsys.exit(2)\n")
    with pytest.raises(ToolError) as exc:
        UvRun([exe], dict(os.environ), str(tmp_path)).wait()
    assert TOKEN not in exc.value.message + exc.value.hint
    assert "https://pypi.fury.io/***/me/simple/numpy/" in exc.value.message + exc.value.hint


def test_uv_writes_diff_never_prints_the_token_of_the_users_own_index(tmp_path, capsys):
    from envman.cli.main import main
    from tests.unit.test_uv_writeback import _lock

    text = ('[project]\nname = "t"\nversion = "0"\nrequires-python = ">=3.11"\ndependencies = ["torch"]\n\n'
            f'[[tool.uv.index]]\nname = "internal"\nurl = "https://pypi.fury.io/{TOKEN}/me/"\n')
    (tmp_path / "pyproject.toml").write_text(text)
    _lock(tmp_path)
    assert main(["uv", "write", str(tmp_path), "--check"]) == 1
    out = capsys.readouterr()
    assert TOKEN not in out.out + out.err
    assert ' url = "https://pypi.fury.io/***/me/"' in out.out  # a context line of the diff
    assert (tmp_path / "pyproject.toml").read_text() == text
