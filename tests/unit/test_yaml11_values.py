"""A value YAML 1.1 reads otherwise than it is written — base 60 (`time: 1:30` is 90), a leading-zero octal, 0b,
an underscore, yes/no/on/off, .inf/.nan, a date — is refused wherever it stands in envman.yaml (a string field, a
number field, a flag, a list, a mapping's key, the free-form cluster: and ci: sections), with its quoted form in
the hint; never used as what PyYAML made of it. The forms YAML 1.2 reads alike (8, 0x1F, 3.5, true) pass this rule."""

from __future__ import annotations

import datetime
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_cluster import project  # noqa: F401 - the fixture (tests/unit is on the path)

from envman.errors import SpecError
from envman.inputs import WrittenInt, load_yaml
from envman.project.spec import parse_spec

_BOOLS = [f(w) for w in ("yes", "no", "on", "off") for f in (str.lower, str.title, str.upper)]
yaml11_only = st.one_of(
    st.from_regex(r"\A[-+]?[1-9][0-9]{0,2}(?::[0-5]?[0-9]){1,2}(?:\.[0-9]{0,2})?\Z"),  # base 60, int or float
    st.from_regex(r"\A0[0-7]{1,4}\Z"),  # octal
    st.from_regex(r"\A0b[01]{1,8}\Z"),
    st.from_regex(r"\A[1-9][0-9]{0,2}(?:_[0-9]{1,3})+(?:\.[0-9]{1,2})?\Z"),
    st.sampled_from(_BOOLS + [".inf", "-.inf", "+.INF", ".nan", ".NaN"]),
    st.dates(min_value=datetime.date(1000, 1, 1)).map(lambda d: d.isoformat()),
    st.datetimes(min_value=datetime.datetime(1000, 1, 1)).map(lambda d: d.isoformat(" ", "seconds")),
)
# where a value stands: (the envman.yaml text with {} for it, its dotted path, the key its quoted form names)
places = st.sampled_from([
    ("python: {}", "python", "python"), ("cuda: {}", "cuda", "cuda"), ("driver: {}", "driver", "driver"),
    ("name: {}", "name", "name"), ("cpu: {}", "cpu", "cpu"), ("env: {{UMASK: {}}}", "env.UMASK", "UMASK"),
    ("command: [python, {}]", "command[1]", None), ("packages: [six, {}]", "packages[1]", None),
    ("cluster: {{time: {}}}", "cluster.time", "time"), ("cluster: {{partition: {}}}", "cluster.partition", "partition"),
    ("cluster: {{nodes: {}}}", "cluster.nodes", "nodes"), ("ci: {{envman: {}}}", "ci.envman", "envman"),
    ("workload: {{batch: {}}}", "workload.batch", "batch"),
    ("workload: {{grad_checkpointing: {}}}", "workload.grad_checkpointing", "grad_checkpointing"),
    ("profiles: {{old: {{driver: {}}}}}", "profiles.old.driver", "driver"),
])


def _parse(line: str):
    return parse_spec(load_yaml(("" if line.startswith("name:") else "name: x\n") + f"targets: [h100]\n{line}\n", "envman.yaml", numbers_as_written=True))


@settings(max_examples=400, deadline=None)
@given(yaml11_only, places)
def test_a_value_yaml_1_1_changes_is_refused_with_its_quoted_form_wherever_it_stands(text, place):
    line, path, key = place
    with pytest.raises(SpecError) as err:
        _parse(line.format(text))
    first = err.value.message.split(" (and ")[0]
    assert first.startswith(f"envman.yaml: {path}: YAML reads an unquoted {text} as "), err.value.message
    quoted = f'{key}: "{text}"' if key else f'"{text}"'
    assert f"quote it: {quoted}" in (err.value.hint or ""), err.value.hint


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.integers(1, 4096).map(str), st.from_regex(r"\A0x[0-9a-f]{1,3}\Z").filter(lambda t: 0 < int(t, 16) <= 4096)),
       st.sampled_from(["true", "True", "false", "FALSE"]))
def test_what_yaml_1_2_reads_alike_passes_this_rule(number, flag):
    spec = _parse(f"cluster: {{nodes: {number}}}\nworkload: {{batch: {number}, compile: {flag}}}\ncuda_devel: {flag}")
    assert spec.cluster == {"nodes": int(number, 0)} and dict(spec.workload)["batch"] == int(number, 0)
    assert spec.cuda_devel is dict(spec.workload)["compile"] is (flag.lower() == "true")


@pytest.mark.parametrize("line, error, hint", [
    ("time: 1:30", "cluster.time: YAML reads an unquoted 1:30 as 90", 'quote it: time: "1:30", or write 90 if you mean it'),
    ("partition: no", "cluster.partition: YAML reads an unquoted no as false",
     'quote it: partition: "no", or write false if you mean it'),
    ("account: 2026-12-07", "cluster.account: YAML reads an unquoted 2026-12-07 as a date", 'quote it: account: "2026-12-07"'),
])
def test_envman_cluster_refuses_a_site_value_yaml_1_1_changed(project, tmp_path, line, error, hint):  # noqa: F811
    spec = project / "envman.yaml"
    key = line.split(":")[0]
    spec.write_text("".join(f"  {line}\n" if old.startswith(f"  {key}:") else old
                            for old in spec.read_text().splitlines(keepends=True)))
    p = subprocess.run([sys.executable, "-m", "envman.cli.main", "cluster", "slurm", str(project), "--images",
                        str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert (p.returncode, p.stderr.splitlines()) == (1, [f"error: envman.yaml: {error}", f"hint: {hint}"])


def test_a_key_yaml_1_1_changes_is_refused_by_its_text():
    with pytest.raises(SpecError) as err:
        _parse("env: {on: x, 1_0: y}")
    assert err.value.message == "envman.yaml: env.on: YAML reads an unquoted on as true (and 1 more)"
    assert err.value.hint == ('every problem:\n  envman.yaml: env.on: YAML reads an unquoted on as true (quote it: on: '
                              '"on", or write true if you mean it)\n  envman.yaml: env.1_0: YAML reads an unquoted 1_0 '
                              'as 10 (quote it: "1_0", or write 10 if you mean it)')


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=20), yaml11_only), st.one_of(st.integers(), st.booleans()))
def test_what_envman_writes_into_envman_yaml_reads_back_as_written(text, number):
    """init writes envman.yaml with PyYAML's dumper (image/render.py render_yaml), which quotes a string YAML 1.1
    would read as another type: nothing envman writes trips this rule."""
    from envman.image.render import render_yaml

    back = load_yaml(render_yaml({"env": {"X": text}, "workload": {"batch": number}}), "envman.yaml",
                     numbers_as_written=True)
    assert back == {"env": {"X": text}, "workload": {"batch": number}}
    assert type(back["env"]["X"]) is str and type(back["workload"]["batch"]) in (bool, int, WrittenInt)


@pytest.mark.parametrize("text", ["a\x85b", "\u2028", "x\u2029y", "\x85"])
def test_a_unicode_line_break_in_a_value_envman_writes_reads_back_as_written(text):
    """Found by the property test above: PyYAML wrote NEL raw in a single-quoted scalar and it read back as a space."""
    from envman.image.render import render_yaml

    out = render_yaml({"env": {"X": text}})
    assert out.isascii() and load_yaml(out, "envman.yaml")["env"]["X"] == text
