"""`matrix check` holds models.yaml's aliases to their entry's config (envman/fit/aliases.py): an alias naming
another version, size or family than its entry, or one that another entry answers to, is a failure naming the
file and key; the shipped catalog passes."""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from envman.fit.aliases import alias_problems, sizes, version
from envman.resources import shipped_matrix_dir


@pytest.fixture(scope="module")
def shipped() -> dict:
    return yaml.safe_load((shipped_matrix_dir() / "models.yaml").read_text(encoding="utf-8"))


def with_alias(doc: dict, entry: str, alias: str, **changes) -> dict:
    out = copy.deepcopy(doc)
    e = next(m for m in out["models"] if m["id"] == entry)
    e["aliases"].append(alias)
    e.update(changes)
    return out


def test_the_shipped_catalog_has_no_alias_of_another_model(shipped):
    assert alias_problems(shipped) == []


@pytest.mark.parametrize("name, family, want_version, want_sizes", [
    ("meta-llama/Llama-3.3-70B-Instruct", "llama", "3.3", {"70b"}),
    ("llama3.1-8b", "llama", "3.1", {"8b"}),
    ("meta-llama/Meta-Llama-3-8B", "llama", "3", {"8b"}),
    ("LLaMA 33B (v1)", "llama", "1", {"33b"}),
    ("llama-30b", "llama", None, {"30b"}),  # 30 is its size, not a version
    ("Mistral 7B v0.3", "mistral", "0.3", {"7b"}),
    ("mistralai/Mixtral-8x7B-v0.1", "mixtral", "0.1", {"8x7b"}),
    ("GPT-2 (124M)", "gpt", "2", {"124m"}),
    ("microsoft/Phi-3-mini-4k-instruct", "phi", "3", set()),  # 4k is a context length
    ("stable-diffusion-v1-5", None, "1.5", set()),
    ("TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T", "llama", None, {"1.1b"}),
])
def test_versions_and_sizes_as_names_write_them(name, family, want_version, want_sizes):
    assert version(name, family) == want_version
    assert sizes(name) == want_sizes


def test_an_alias_of_another_version_fails_naming_file_and_key(shipped):
    probs = alias_problems(with_alias(shipped, "llama-3.1-70b", "llama-3.3-70b-base"))
    assert probs == ["models.yaml: models[llama-3.1-70b].aliases[2]: 'llama-3.3-70b-base' names version 3.3, not "
                     "this entry's 3.1 (read from its id and name): give that model its own entry, or cite its "
                     "identical config in source"]


def test_an_alias_of_another_size_or_family_fails(shipped):
    assert "names size 70b, not this entry's 8b" in alias_problems(with_alias(shipped, "llama-3.1-8b", "llama3.1-70b-x"))[0]
    assert "names size 355m, not this entry's 124m" in alias_problems(with_alias(shipped, "gpt2", "gpt2-355m"))[0]
    fam = alias_problems(with_alias(shipped, "llama-3.1-8b", "mistral-8b-instruct"))
    assert fam == ["models.yaml: models[llama-3.1-8b].aliases[3]: 'mistral-8b-instruct' names the mistral family, "
                   "not this entry's llama (config.model_type): an alias may only name a model with this entry's config"]


def test_a_fine_tune_of_the_same_model_is_no_other_config(shipped):
    assert alias_problems(with_alias(shipped, "llama-3.1-70b", "meta-llama/Llama-3.1-70B-Instruct")) == []


def test_another_version_passes_only_where_the_source_cites_its_config(shipped):
    """SD v1.4 rides on v1.5's entry because the entry's source read v1.4's configs too; without that citation
    the same two aliases fail."""
    sd = next(m for m in shipped["models"] if m["id"] == "stable-diffusion-v1-5")
    assert "CompVis/stable-diffusion-v1-4" in sd["aliases"] and "CompVis/stable-diffusion-v1-4" in sd["source"]
    uncited = copy.deepcopy(shipped)
    next(m for m in uncited["models"] if m["id"] == "stable-diffusion-v1-5")["source"] = \
        "https://huggingface.co/stable-diffusion-v1-5/stable-diffusion-v1-5/blob/main/unet/config.json"
    assert [p.split(": ")[1] for p in alias_problems(uncited)] == [
        "models[stable-diffusion-v1-5].aliases[4]", "models[stable-diffusion-v1-5].aliases[5]"]


def test_a_name_two_entries_answer_to_fails(shipped):
    probs = alias_problems(with_alias(shipped, "llama-3.1-70b", "llama3.3-70b"))
    assert "models.yaml: models[llama-3.3-70b-instruct].aliases[2]: 'llama3.3-70b' also names models[llama-3.1-70b] " \
           "(`--model` finds the first)" in probs


def test_matrix_check_reports_it_with_exit_7(tmp_path):
    d = tmp_path / "matrices"
    shutil.copytree(shipped_matrix_dir(), d)
    models = d / "models.yaml"
    text = models.read_text(encoding="utf-8")
    models.write_text(text.replace('aliases: ["meta-llama/Llama-3.1-70B", "llama3.1-70b"]',
                                   'aliases: ["meta-llama/Llama-3.1-70B", "llama3.1-70b", "llama-3.3-70b-base"]'),
                      encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "envman.cli.main", "matrix", "check"], capture_output=True, text=True,
                         env={**os.environ, "ENVMAN_MATRIX_DIR": str(d)})
    assert out.returncode == 7, out.stdout + out.stderr
    assert out.stdout.startswith("models.yaml: models[llama-3.1-70b].aliases[2]: 'llama-3.3-70b-base' names version 3.3")
