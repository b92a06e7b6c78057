"""A build step's own output (pip's "Looking in indexes: …", a step that echoes a token) passes through envman
when it streams the build log (--progress plain) and when a failed build's last lines become the hint: no URL
userinfo, no token in a URL's path or query, no fixed-prefix token (hf_, ghp_ …) reaches envman's stdout or
stderr, whichever engine ran the build."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envman.cli.main import report_error
from envman.engine.buildkit import BuildClient
from envman.engine.daemonless import DaemonlessEngine
from envman.engine.docker import Engine
from envman.engine.errors import BuildError
from envman.engine.runtime import RuntimeChoice
from tests.unit.test_engine import FakeSDK

_ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
secrets = st.text(_ALNUM, min_size=16, max_size=40).filter(
    lambda t: any(c.isdigit() for c in t) and any(c.isalpha() for c in t))
# where a RUN step's tools put a credential in a line (pip's index banner, a proxy URL, curl, an echoed variable)
frames = st.sampled_from([
    "#7 1.234 Looking in indexes: https://pypi.fury.io/{s}/team/simple",
    "#7 1.234 Looking in indexes: https://bob:{s}@pypi.example.com/simple",
    "STEP 5/9: RUN pip install -i https://__token__:{s}@host.internal/simple torch",
    "#9 0.5 curl: (22) The requested URL returned error: 404 https://files.example.com/x?token={s}",
    "#9 0.5 HF_TOKEN=hf_{s}{s}",
    "#9 0.5 using ghp_{s}{s}{s}",
])


def _client(tmp_path: Path, exit_code: int) -> str:
    """A build client that prints a file's lines (the build log) and then succeeds or fails."""
    path = tmp_path / "bin" / "docker"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\ncat "{tmp_path}/log"\n'
                    'while [ $# -gt 0 ]; do if [ "$1" = --iidfile ]; then echo sha256:abc > "$2"; fi; shift; done\n'
                    f"exit {exit_code}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def _build(tmp_path: Path, kind: str, exit_code: int) -> None:
    cli = _client(tmp_path, exit_code)
    if kind == "docker":
        Engine(FakeSDK(), build_client=BuildClient("native", cli, "20.10")).build(
            tmp_path, tags=["x:1"], progress="plain", on_output=print)
    else:
        eng = DaemonlessEngine("podman", exe=cli, runtime=RuntimeChoice("runc", "test"))
        eng._version = "4.3.1"
        eng.build(tmp_path, tags=["x:1"], progress="plain", on_output=print)


@pytest.mark.parametrize("kind", ["docker", "podman"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(frame=frames, secret=secrets, fails=st.booleans())
def test_a_credential_in_a_build_steps_output_never_reaches_the_terminal(tmp_path, capsys, kind, frame, secret, fails):
    (tmp_path / "log").write_text(f"#1 [1/9] FROM base\n{frame.format(s=secret)}\n#10 DONE\n")
    try:
        _build(tmp_path, kind, 1 if fails else 0)
    except BuildError as err:
        report_error(err)
        assert not any(secret in line for line in err.output_tail)
    out, errs = capsys.readouterr()
    assert "#10 DONE" in out and secret not in out + errs
    assert ("last lines of its output:" in errs) == fails


def test_the_redacted_lines_keep_what_the_user_needs(tmp_path, capsys):
    (tmp_path / "log").write_text("#7 1.2 Looking in indexes: https://bob:s3cretpassw0rd99@pypi.example.com/simple\n"
                                  "#7 1.3 Looking in indexes: https://pypi.fury.io/A1b2C3d4E5f6G7h8/team/simple\n")
    _build(tmp_path, "docker", 0)
    assert capsys.readouterr().out.splitlines() == [
        "#7 1.2 Looking in indexes: https://pypi.example.com/simple",
        "#7 1.3 Looking in indexes: https://pypi.fury.io/***/team/simple",
    ]
