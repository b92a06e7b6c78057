"""envman.yaml's price_per_gpu_hour (issue 41, item 7): `envman fit --tokens N` costs the whole run at the prices
the user keeps in the project; --price-per-gpu-hour overrides them; envman never invents one."""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from envman.errors import SpecError
from envman.inputs import load_yaml
from envman.project.spec import parse_spec
from tests.unit.test_fit_cli import app, run  # noqa: F401 - the fixture

HINT = ("e.g. price_per_gpu_hour: {h100: 2.49, l4: 0.8} (a decimal point, not a comma): your provider's price; "
        "envman assumes none")


def _spec(text: str):
    return parse_spec(load_yaml("name: w\ncpu: true\n" + text, "envman.yaml", error=SpecError, numbers_as_written=True))


def test_one_price_for_every_gpu_or_one_per_gpu_name_and_written_back_as_given():
    assert _spec("price_per_gpu_hour: 2.5\n").price_per_gpu_hour == (("*", 2.5),)
    spec = _spec("price_per_gpu_hour: {h100: 2.49, 4090: 0.4}\n")  # YAML reads the key 4090 as a number
    assert spec.price_per_gpu_hour == (("h100", 2.49), ("4090", 0.4))
    assert spec.to_data()["price_per_gpu_hour"] == {"h100": 2.49, "4090": 0.4}
    assert _spec("price_per_gpu_hour: 2.5\n").to_data()["price_per_gpu_hour"] == 2.5


@pytest.mark.parametrize("value, message, hint", [
    ("{h100: 010}", "price_per_gpu_hour.h100: YAML reads an unquoted 010 as 8",
     'quote it: h100: "010", or write 8 if you mean it'),  # the one YAML 1.1 rule (test_yaml11_values.py)
    ("{h100: 0x1A}", "price_per_gpu_hour.h100: YAML reads 0x1A as 26", "write the price in decimal digits, e.g. 2.49"),
    ("{h100: 1:30}", "price_per_gpu_hour.h100: YAML reads an unquoted 1:30 as 90",
     'quote it: h100: "1:30", or write 90 if you mean it'),
    ('{h100: "2.5"}', "price_per_gpu_hour.h100: expected a positive price per GPU-hour, got '2.5'", HINT),
    ("{h100: 2,49}", "price_per_gpu_hour.49: expected a positive price per GPU-hour, got None", HINT),  # flow: 2 keys
    ("\n  h100: 2,49", "price_per_gpu_hour.h100: expected a positive price per GPU-hour, got '2,49'", HINT),
    ("{h100: .inf}", "price_per_gpu_hour.h100: YAML reads an unquoted .inf as inf",
     'quote it: h100: ".inf", or write inf if you mean it'),
    ("0", "price_per_gpu_hour: expected a positive price per GPU-hour, got 0", HINT),
    ("[1]", "price_per_gpu_hour: expected a positive price per GPU-hour, got [1]", HINT),
    ("{yes: 1}", "price_per_gpu_hour.yes: YAML reads an unquoted yes as true",
     'quote it: yes: "yes", or write true if you mean it'),
])
def test_a_bad_price_is_one_error_naming_the_key_and_a_hint(value, message, hint):
    with pytest.raises(SpecError) as e:
        _spec(f"price_per_gpu_hour: {value}\n")
    assert (e.value.message, e.value.hint, e.value.exit_code) == (f"envman.yaml: {message}", hint, 1)


@given(st.text(alphabet="0123456789._:+-xobeE,", min_size=1, max_size=8))
@example("010")
@example("0b11")
@example("1_0.5")
@example("1:00")
def test_a_price_envman_takes_is_the_number_its_text_says(text):
    """Whatever is written, envman either refuses it (naming the key) or takes the number the decimal text says."""
    try:
        spec = _spec(f"price_per_gpu_hour:\n  h100: {text}\n")
    except SpecError as e:
        assert e.message.startswith(("envman.yaml: price_per_gpu_hour.", "envman.yaml: line ")) and e.hint
        return
    [(name, price)] = spec.price_per_gpu_hour
    assert name == "h100" and price == float(text.replace("_", "")) > 0


def _project(tmp_path, prices: str):
    (tmp_path / "envman.yaml").write_text(f"name: w\ncpu: true\nprice_per_gpu_hour: {prices}\n")
    return str(tmp_path)


def test_fit_costs_the_run_at_the_projects_prices_and_the_option_overrides_them(app, tmp_path):  # noqa: F811
    path = _project(tmp_path, "{h100: 2.49, a100-80gb: 1.29}")
    res, err = run(app, path, "--model", "gpt2", "--compare", "a100,h100", "--tokens", "2e10", "--json")
    d = json.loads(res.stdout)
    a100, h100 = d["compare"]
    assert err is None and (a100["price_per_gpu_hour"], h100["price_per_gpu_hour"]) == (1.29, 2.49)
    assert h100["cost"] == pytest.approx(h100["run_seconds"] / 3600 * 2.49, abs=0.005)
    assert "prices: envman.yaml's price_per_gpu_hour (--price-per-gpu-hour overrides it)" in d["notes"]
    res, err = run(app, path, "--model", "gpt2", "--compare", "a100,h100", "--tokens", "2e10", "--json",
                   "--price-per-gpu-hour", "h100=1.99")
    a100, h100 = json.loads(res.stdout)["compare"]
    assert (a100["price_per_gpu_hour"], h100["price_per_gpu_hour"]) == (None, 1.99)  # the option replaces the file's


@pytest.mark.parametrize("prices, message", [
    ("{h1000: 2}", "envman.yaml: price_per_gpu_hour.h1000: unknown GPU 'h1000'"),
    ("{sm_90: 2}", "envman.yaml: price_per_gpu_hour.sm_90: a compute capability, not a GPU"),
])
def test_a_price_for_no_known_gpu_is_refused_naming_the_key(app, tmp_path, prices, message):  # noqa: F811
    res, err = run(app, _project(tmp_path, prices), "--model", "gpt2", "--target", "h100", "--tokens", "1e9")
    assert (err.message, err.exit_code) == (message, 2) and err.hint


def test_prices_are_read_only_for_a_run_and_do_not_make_the_lock_stale(app, tmp_path):  # noqa: F811
    from envman.app.init import InitOptions, init_project
    from envman.app.lock import check_lock

    res, err = run(app, _project(tmp_path, "{h1000: 2}"), "--model", "gpt2", "--target", "h100")
    assert err is None and res.exit_code == 0  # no --tokens: no price is looked at
    (tmp_path / "envman.yaml").write_text("name: w\npython: '3.11'\ncpu: true\n")
    init_project(tmp_path, InitOptions(no_lock=True))
    (tmp_path / "envman.yaml").write_text("name: w\npython: '3.11'\ncpu: true\nprice_per_gpu_hour: 2.5\n")
    assert check_lock(tmp_path) == []  # what a run costs is not what is built


@pytest.mark.parametrize("text, message, hint", [
    ("{batch: 010}", "workload.batch: YAML reads an unquoted 010 as 8",
     'quote it: batch: "010", or write 8 if you mean it'),
])
def test_the_workload_refuses_the_same_misread_numbers(text, message, hint):
    with pytest.raises(SpecError) as e:
        _spec(f"workload: {text}\n")
    assert (e.value.message, e.value.hint) == (f"envman.yaml: {message}", hint)
