"""Two distributions of one import package in a lock (issue 20, found building keras-hub: tensorflow 2.20.0
beside tensorflow-cpu 2.21.0, whose image crashed importing them, exit 139): the one the inputs name is kept,
the others dropped, and what their dependents asked of them asked of the kept one."""

from __future__ import annotations

import pytest
from test_requires_python import Answer, Job, Opts  # tests/unit is on the path

from envman.app.pythonlocks import _settled
from envman.errors import DataError, LockError
from envman.lock.one_module import Family, _families, fix, load_families
from envman.resources import shipped_matrix_dir

TF = Family("tensorflow", ("tensorflow", "tensorflow-cpu"), True, "test")
JWT = Family("jwt", ("pyjwt", "jwt"), False, "test")
INPUT = "-r requirements.in"

# keras-hub's requirements-torch-cuda.txt: tensorflow-cpu, and tensorflow-text>=2.20.1,<2.21.0 (which pins tensorflow)
KERAS_HUB = {"versions": {"tensorflow": "2.20.0", "tensorflow-cpu": "2.21.0", "tensorflow-text": "2.20.1"},
             "via": {"tensorflow": ["tensorflow-text"], "tensorflow-cpu": [INPUT], "tensorflow-text": [INPUT]}}
REQUIRES = {"tensorflow-text": ["tensorflow<2.21,>=2.20.0", "tensorflow-hub>=0.13; extra == 'tests'"]}


def requires(name):
    return REQUIRES.get(name, [])


def test_the_named_distribution_is_kept_and_what_was_asked_of_the_other_moves_to_it():
    got = fix(KERAS_HUB["versions"], KERAS_HUB["via"], ["tensorflow-cpu", "tensorflow-text>=2.20.1,<2.21.0"],
              requires, (TF,))
    assert got is not None
    assert got.overrides == ('tensorflow ; sys_platform == "never"',)
    assert got.constraints == ("tensorflow-cpu<2.21,>=2.20.0",)
    assert got.notes[0].startswith("tensorflow 2.20.0 (required by tensorflow-text) installs the module 'tensorflow', "
                                   "as tensorflow-cpu does, which the project names: tensorflow dropped, "
                                   "tensorflow-cpu held to <2.21,>=2.20.0")


def test_a_lock_without_two_of_a_family_needs_nothing():
    assert fix({"tensorflow-cpu": "2.21.0", "numpy": "2.1.0"}, {}, ["tensorflow-cpu"], requires, (TF,)) is None


@pytest.mark.parametrize(("inputs", "why"), [
    (["keras-nlp"], "the requirements name none of them"),  # both transitive: which one is the project's choice
    (["tensorflow", "tensorflow-cpu"], "the requirements name several of them"),
])
def test_a_clash_envman_cannot_settle_is_one_error_naming_every_distribution_and_who_brings_it(inputs, why):
    via = {"tensorflow": ["keras-nlp"], "tensorflow-cpu": ["tensorflow-text"]}
    with pytest.raises(LockError) as ei:
        fix({"tensorflow": "2.20.0", "tensorflow-cpu": "2.21.0"}, via, inputs, requires, (TF,))
    msg = ei.value.message
    assert "tensorflow 2.20.0 (required by keras-nlp)" in msg and "tensorflow-cpu 2.21.0 (required by tensorflow-text)" in msg
    assert msg.endswith(why)
    assert "name exactly one of tensorflow, tensorflow-cpu" in ei.value.hint


def test_a_family_whose_members_differ_in_api_is_never_substituted():
    with pytest.raises(LockError, match="their modules differ in API"):
        fix({"pyjwt": "2.15.1", "jwt": "1.4.0"}, {"pyjwt": [INPUT], "jwt": ["somelib"]}, ["pyjwt"], requires, (JWT,))


def test_the_lock_is_asked_again_with_the_correction_and_says_it(monkeypatch):
    asked = []
    fixed = Answer(versions={"tensorflow-cpu": "2.20.0", "tensorflow-text": "2.20.1"},
                   via={"tensorflow-cpu": [INPUT], "tensorflow-text": [INPUT]})

    def job_with(more, more_overrides=()):
        asked.append((list(more), list(more_overrides)))
        return Job([fixed], asked)

    first = Answer(versions=KERAS_HUB["versions"], via=KERAS_HUB["via"])
    monkeypatch.setattr("envman.app.pythonlocks._requires_of", lambda lr: requires)
    lr, notes = _settled(first, "3.11", ["tensorflow-cpu", "tensorflow-text>=2.20.1,<2.21.0"], job_with, Opts(), None)
    assert lr is fixed
    assert asked == [(["tensorflow-cpu<2.21,>=2.20.0"], ['tensorflow ; sys_platform == "never"'])]
    assert len(notes) == 1 and "tensorflow dropped" in notes[0]


def test_the_shipped_families_load_and_every_member_is_in_one_family():
    fams = load_families(shipped_matrix_dir())
    names = [n for f in fams for n in f.distributions]
    assert len(names) == len(set(names))
    assert {"tensorflow", "tensorflow-cpu"} <= set(next(f for f in fams if f.module == "tensorflow").distributions)
    assert all(f.source.startswith("wheel file lists read") for f in fams)


def test_a_bad_row_is_named_with_every_problem_at_once():
    doc = {"schema": 1, "families": {"x": {"distributions": ["Opencv_Python", "b"], "interchangeable": "yes"},
                                     "y": {"distributions": ["b", "c"], "interchangeable": True, "source": "s", "extra": 1}}}
    with pytest.raises(DataError) as ei:
        _families(doc)
    msg = ei.value.message
    for part in ("families.x.distributions: write the normalized name 'opencv-python'", "families.x.interchangeable",
                 "families.x.source: missing", "families.y.extra: unknown key", "families.y.distributions: b is in x too"):
        assert part in msg


def test_a_lock_in_a_measured_load_order_crash_says_which_to_import_first():
    from envman.lock.one_module import load_orders, order_warnings

    fams, orders = load_families(shipped_matrix_dir()), load_orders(shipped_matrix_dir())
    [w] = order_warnings({"tensorflow-cpu": "2.20.0", "triton": "3.8.0", "torch": "2.14.1"}, fams, orders)
    assert w.startswith("tensorflow-cpu 2.20.0 loaded before triton 3.8.0 crashes the process") and "import triton first" in w
    # outside what was measured to crash (tensorflow 2.19.1 + triton 3.8.0 and 2.21 + triton 3.6.0 import either way)
    assert order_warnings({"tensorflow-cpu": "2.19.1", "triton": "3.8.0"}, fams, orders) == []
    assert order_warnings({"tensorflow": "2.21.0", "triton": "3.6.0"}, fams, orders) == []
    assert order_warnings({"tensorflow": "2.21.0"}, fams, orders) == []


def test_a_version_that_is_no_version_is_outside_what_was_measured():
    from envman.lock.one_module import load_orders, order_warnings

    fams, orders = load_families(shipped_matrix_dir()), load_orders(shipped_matrix_dir())
    assert order_warnings({"tensorflow": "2.21.0", "triton": "a1b2c3d"}, fams, orders) == []
