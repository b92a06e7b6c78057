"""envman.yaml is the file users edit most: any value of any key (top level or in a profile) is read, or refused as
one SpecError line naming envman.yaml and the key, with a hint — every command prints it as `error:` + `hint:`.
Found when `cluster: [a]`, `python: [3]`, `targets: [false]` and two dozen other wrong types printed an `error:`
line and no hint at all (the problems had none of their own)."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envman.errors import SpecError
from envman.project.spec import KEYS, PROFILE_KEYS, parse_spec

VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10)
    | st.sampled_from(["a\x85b", "a\u2028b", "3.10", "h100", "torch>=2", "https://x.example/simple", ".inf", "0x10", "on"]),
    lambda kids: st.lists(kids, max_size=4)
    | st.dictionaries(st.text(max_size=5) | st.sampled_from(["h100", "model", "batch", "targets", "PATH"]), kids, max_size=3),
    max_leaves=6)


@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))
@given(key=st.sampled_from([k.name for k in KEYS]), in_profile=st.sampled_from([None] + [k.name for k in PROFILE_KEYS]),
       value=VALUES)
def test_any_value_of_any_key_is_read_or_refused_with_a_hint(key, in_profile, value):
    doc = {"name": "demo", "profiles": {"p1": {in_profile: value}}} if in_profile else {"name": "demo", key: value}
    try:
        parse_spec(doc)
    except SpecError as e:
        assert e.message.startswith("envman.yaml: ") and "\n" not in e.message
        assert e.hint and e.hint.strip(), e.message


def test_a_wrong_type_is_refused_with_the_form_of_its_key():
    for doc, message, hint in [
        ({"cluster": ["a"]}, "envman.yaml: cluster: expected a mapping",
         "e.g. cluster: {constraint: h100, gpus_per_node: 8}; every key: docs/envman-yaml.md"),
        ({"profiles": {"old": {"targets": [False]}}}, "envman.yaml: profiles.old.targets[0]: expected a string, got False",
         "e.g. targets: [h100, a100]; every key: docs/envman-yaml.md"),
    ]:
        try:
            parse_spec({"name": "demo", **doc})
        except SpecError as e:
            assert (e.message, e.hint) == (message, hint)
        else:
            raise AssertionError(f"{doc} was read")
