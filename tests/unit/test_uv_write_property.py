"""`envman uv write` on any valid pyproject.toml: tables in any order, comments, inline tables and dotted keys.
Each written file keeps every key envman does not manage and every comment, reads back as what was
intended, and a second write changes nothing; what envman cannot edit is refused with a UsageError, never a
crash. Runs on whichever tomlkit is installed (.ci/run's newest-versions step runs it on the newest one)."""

from __future__ import annotations

import re

import pytest
import tomlkit
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envman.errors import UsageError
from envman.project.uvwrite import UvTarget, edit_pyproject

CU130 = UvTarget("torch", "2.14.1", "cu130", "https://download.pytorch.org/whl/cu130", (("torchvision", "0.29.1"),),
                 "3.10", "3.12")
PYPI = UvTarget("torch", "2.14.1", "cu130", None, (("torchvision", "0.29.1"),), "3.10", "3.12")
# what envman writes: everything else in the file is the user's and must come back as it was
MANAGED = {("project", "requires-python"), ("tool", "uv", "sources", "torch"), ("tool", "uv", "sources", "torchvision"),
           ("tool", "uv", "index"), ("tool", "uv", "constraint-dependencies")}

_scalars = st.one_of(st.integers(-10**6, 10**6), st.booleans(), st.text(max_size=12),
                     st.floats(allow_nan=False, allow_infinity=False, width=32))
_values = st.one_of(_scalars, st.lists(_scalars, max_size=3),
                    st.dictionaries(st.sampled_from(["a", "b", "c-d"]), _scalars, max_size=2))
_comments = st.one_of(st.none(), st.text(st.characters(codec="utf-8", exclude_categories=("Cc", "Cs")), max_size=20))


def _value(v: object) -> str:
    if isinstance(v, dict):  # an inline table, as people write them
        return "{ " + ", ".join(f"{k} = {tomlkit.item(x).as_string()}" for k, x in v.items()) + " }"
    return tomlkit.item(v).as_string()


@st.composite
def _table(draw, header: str, fixed: list[str], free: bool = True) -> str:
    lines = [header, *fixed]
    keys = draw(st.lists(st.sampled_from(["k1", "k2", "k3", "dotted.x", "other.y.z", "'quoted key'"]), unique=True,
                         max_size=4 if free else 0))
    for key in keys:
        comment = draw(_comments)
        lines.append(f"{key} = {_value(draw(_values))}" + (f"  # {comment}" if comment is not None else ""))
    if draw(st.booleans()):
        lines.append(f"# {draw(_comments) or 'a note'}")
    return "\n".join(lines) + "\n"


@st.composite
def pyprojects(draw) -> str:
    deps = draw(st.lists(st.sampled_from(["torch", "torchvision>=0.20", "numpy", "requests==2.32.0"]), unique=True))
    tables = [draw(_table("[project]", ['name = "demo"', 'version = "0.1.0"', f"dependencies = {deps!r}".replace("'", '"')]))]
    pool = {
        "[tool.uv]": [],
        "[tool.uv.sources]": ['numpy = { index = "internal" }'],
        "[[tool.uv.index]]": ['name = "internal"', 'url = "https://pypi.example.org/simple"'],
        "[tool.ruff]": [], "[tool.pytest.ini_options]": [], "[build-system]": ['requires = ["setuptools"]'],
        "[project.optional-dependencies]": ['gpu = ["torch"]'], "[dependency-groups]": ['dev = ["pytest"]'],
        "[x.y]": [],
    }
    chosen = draw(st.lists(st.sampled_from(sorted(pool)), unique=True))
    if "[tool.uv.sources]" in chosen and "[[tool.uv.index]]" not in chosen:
        chosen.append("[[tool.uv.index]]")
    shaped = {"[tool.uv.sources]", "[project.optional-dependencies]", "[dependency-groups]"}  # uv's shapes only
    tables += [draw(_table(h, pool[h], h not in shaped)) for h in chosen]
    order = draw(st.permutations(tables))
    gaps = draw(st.lists(st.sampled_from(["\n", "", "# between tables\n", "\n# about the next table\n"]),
                         min_size=len(order), max_size=len(order)))
    return "".join(g + t for g, t in zip(gaps, order))


def _leaves(data: object, path: tuple = ()) -> dict[tuple, object]:
    if path in MANAGED:
        return {}
    if isinstance(data, dict):
        return {k: v for key, sub in data.items() for k, v in _leaves(sub, (*path, key)).items()}
    return {path: data}


def _user_data(text: str) -> dict[tuple, object]:
    return {k: v for k, v in _leaves(tomlkit.parse(text).unwrap()).items() if k not in MANAGED}


def _comments_of(text: str) -> list[str]:
    return [m.group(0).strip() for m in re.finditer(r"#[^\n]*", text)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=pyprojects(), target=st.sampled_from([CU130, PYPI]), crlf=st.booleans())
def test_any_pyproject_keeps_the_users_keys_and_comments_and_a_second_write_is_a_no_op(text, target, crlf):
    tomlkit.parse(text)  # the input is valid TOML
    if crlf:
        text = text.replace("\n", "\r\n")
    try:
        edit = edit_pyproject(text, target)
    except UsageError as err:
        assert err.message.startswith("pyproject.toml: ") and err.hint
        return
    out = edit.text
    assert _user_data(out) == _user_data(text)
    kept = iter(_comments_of(out))
    assert all(c in kept for c in _comments_of(text))  # every comment, in its order
    if crlf:
        assert "\n" not in out.replace("\r\n", "")  # CRLF line ends only
    again = edit_pyproject(out, target)
    assert again.text == out and again.changes == ()
    if edit.changes:
        data = tomlkit.parse(out).unwrap()
        assert data["tool"]["uv"]["constraint-dependencies"][-1].startswith(("torch==", "torchvision=="))


OLD_TOMLKIT = tuple(int(p) for p in tomlkit.__version__.split(".")[:2]) < (0, 15)


@given(text=pyprojects())
@settings(max_examples=40, deadline=None)
def test_uv_write_property_inputs_reach_the_edit(text):
    """The generator's files are ones envman edits (not refused): the property above is about writing. Before
    0.15, tomlkit renders a table split by another ([tool.uv] after [dependency-groups] after [[tool.uv.index]])
    as a second [tool.uv]: envman refuses those, and names the way out."""
    try:
        assert edit_pyproject(text, CU130).text
    except UsageError as err:
        if not (OLD_TOMLKIT and "envman cannot add to the way this file lays out" in err.message):
            raise


HEAD = '[project]\nname = "t"\ndependencies = ["torch"]\n'


@pytest.mark.parametrize("text, message", [
    (HEAD + "[tool.uv]\nsources = [1, 2]\n", "tool.uv.sources = [1, 2] is not a table"),
    ('[project]\nname = "t"\ndependencies = 5\n', "project.dependencies = 5 is not an array of strings"),
    ('[project]\nname = "t"\ndependencies = ["torch", 3]\n', 'project.dependencies = ["torch", 3] is not an array '
                                                                "of strings"),
    (HEAD + '[tool.uv.index]\nname = "x"\nurl = "https://x.org/simple"\n',
     "tool.uv.index is a table, not an array of tables"),
    (HEAD + "[tool.uv]\nindex = [1]\n", "tool.uv.index = [1] is not an array of tables"),
    (HEAD + '[[tool.uv.index]]\nname = "x"\nurl = 7\n', "tool.uv.index[0].url = 7 is not a string"),
    (HEAD + '[[tool.uv.index]]\nname = "x"\nurl = "https://x.org"\nexplicit = "yes"\n',
     'tool.uv.index[0].explicit = "yes" is not a boolean'),
    (HEAD + '[tool.uv.sources]\ntorch = "cu130"\n', 'tool.uv.sources.torch = "cu130" is not a table or array of tables'),
    (HEAD + '[tool.uv]\nconstraint-dependencies = "torch"\n',
     'tool.uv.constraint-dependencies = "torch" is not an array of strings'),
    ('[project]\nname = "t"\nrequires-python = 3.10\n', "project.requires-python = 3.10 is not a string"),
    ('tool = 1\n' + HEAD, "tool = 1 is not a table"),
    (HEAD + '[project.optional-dependencies]\ngpu = "torch"\n',
     'project.optional-dependencies.gpu = "torch" is not an array of strings'),
    (HEAD + '[dependency-groups]\ndev = "pytest"\n', 'dependency-groups.dev = "pytest" is not an array'),
    (HEAD + "[tool]\nuv.package = true\n", "envman cannot add to the way this file lays out [tool] without changing "
                                           "its meaning; nothing was written"),
])
def test_a_shape_uv_does_not_give_a_key_is_refused_by_its_dotted_key(text, message):
    with pytest.raises(UsageError) as err:
        edit_pyproject(text, CU130)
    assert err.value.message == f"pyproject.toml: {message}"
    assert err.value.hint
