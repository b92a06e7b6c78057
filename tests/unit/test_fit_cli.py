"""`envman fit` on the command line: text, the --json contract, errors as one line. Offline, no torch."""

from __future__ import annotations

import json
import sys

import pytest
import typer
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from envman.cli.fit import register
from envman.errors import EnvmanError

JSON_KEYS = {"model", "setup", "peak_bytes", "breakdown", "targets", "advice", "host", "estimate"}


@pytest.fixture(scope="module")
def app():
    a = typer.Typer()
    register(a)

    @a.callback()
    def _root():  # a group, as in envman's main app
        pass

    return a


def run(app, *args):
    res = CliRunner().invoke(app, ["fit", *args])
    if isinstance(res.exception, EnvmanError):  # main.py's error boundary turns these into error:/hint: lines
        return res, res.exception
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res, None


def test_json_contract_keeps_its_key_names(app):
    res, err = run(app, "--model", "llama-3.1-8b", "--seq", "2048", "--batch", "1", "--target", "h100",
                   "--grad-checkpointing", "--global-batch", "64", "--json")
    assert err is None
    d = json.loads(res.stdout)
    assert JSON_KEYS <= set(d)
    assert set(d["model"]) >= {"name", "params", "trainable_params"}
    assert set(d["breakdown"]) == {"weights", "gradients", "optimizer", "activations", "temporaries"}
    t = d["targets"][0]
    assert set(t) >= {"name", "memory_bytes", "fits", "headroom_bytes", "max_micro_batch"}
    assert set(d["host"]) == {"ram_bytes", "ram_scope", "gpus_per_node", "checkpoint_bytes"}
    assert set(d["estimate"]) >= {"step_seconds", "tokens_per_second"}
    assert d["model"]["params"] == 8_030_261_248
    assert d["peak_bytes"] == sum(d["breakdown"].values())
    for lever in d["advice"]:
        assert set(lever) >= {"lever", "saves_bytes", "cost"}


def test_a_run_that_does_not_fit_exits_8_and_ranks_levers(app):
    res, err = run(app, "--model", "llama-3.1-8b", "--seq", "2048", "--batch", "4", "--target", "rtx-4090", "--json")
    assert err is None and res.exit_code == 8  # EXIT_DOES_NOT_FIT: distinct from bad input (2)
    d = json.loads(res.stdout)
    assert d["targets"][0]["fits"] is False and d["targets"][0]["headroom_bytes"] < 0
    saves = [lv["saves_bytes"] for lv in d["advice"]]
    assert d["advice"][0]["lever"].startswith("cheapest fit:") and d["advice"][0]["fits"]
    assert saves[1:] == sorted(saves[1:], reverse=True)
    names = {lv["lever"] for lv in d["advice"]}
    assert {"gradient checkpointing", "LoRA adapters", "8-bit AdamW (bitsandbytes)"} <= names


def test_text_output_shows_breakdown_targets_host_and_time(app):
    res, err = run(app, "--model", "gpt2", "--seq", "1024", "--batch", "8", "--target", "rtx-4090",
                   "--global-batch", "64")
    assert err is None and res.exit_code == 0
    out = res.stdout
    for needle in ("peak ", "weights", "activations", "NVIDIA GeForce RTX 4090", "accum steps", "host     RAM",
                   "checkpoint", "estimate (±", "tok/s per GPU"):
        assert needle in out


def test_compare_gives_one_row_per_gpu(app):
    res, err = run(app, "--model", "vit-base", "--batch", "64", "--precision", "bf16-mixed",
                   "--compare", "h100,a100,rtx-4090,l4", "--json")
    assert err is None and res.exit_code == 0
    d = json.loads(res.stdout)
    assert [c["id"] for c in d["compare"]] == ["h100-sxm", "a100-sxm4-80gb", "rtx-4090", "l4"]
    assert all(c["samples_per_second"] > 0 for c in d["compare"])


def test_config_json_path_is_read_offline(app, tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"model_type": "llama", "vocab_size": 32000, "hidden_size": 2048,
                               "intermediate_size": 5632, "num_hidden_layers": 22, "num_attention_heads": 32,
                               "num_key_value_heads": 4, "max_position_embeddings": 2048}))
    res, err = run(app, "--model", str(cfg), "--seq", "2048", "--target", "l4", "--json")
    assert err is None
    assert json.loads(res.stdout)["model"]["params"] == 1_100_048_384  # TinyLlama-1.1B


def test_params_only(app):
    res, err = run(app, "--params", "7B", "--target", "h100", "--json")
    assert err is None
    d = json.loads(res.stdout)
    assert d["model"]["params"] == 7_000_000_000 and d["breakdown"]["activations"] == 0


def test_params_without_seq_says_why_there_is_no_throughput(app):
    res, err = run(app, "--params", "7B", "--target", "h100")
    assert err is None and "micro-batch 1," in res.stdout and "default context" not in res.stdout
    assert "--params without --seq gives no tokens per step" in res.stdout
    assert "no bf16 throughput figure" not in res.stdout  # H100 has one: the missing input is the tokens


@pytest.mark.parametrize(("args", "message"), [
    (["--model", "lama-3.1-8b", "--target", "h100"], "unknown model 'lama-3.1-8b'"),
    (["--model", "gpt2", "--target", "h1000"], "unknown GPU 'h1000'"),
    (["--model", "gpt2", "--target", "h100", "--precision", "int3"],
     "--precision 'int3' is not one of fp32, bf16, fp16, bf16-mixed, fp16-mixed"),
    (["--model", "gpt2", "--target", "h100", "--gpus", "4"], "--gpus 4 needs --shard ddp|zero1|zero2|zero3|fsdp"),
])
def test_bad_input_is_one_error_line(app, args, message):
    _, err = run(app, *args)
    assert err is not None and err.message == message


def test_bad_config_json_names_file_and_key(app, tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"model_type": "llama", "hidden_size": 0}))
    _, err = run(app, "--model", str(cfg), "--target", "h100")
    assert err is not None and err.message.startswith(f"{cfg}: hidden_size: expected a positive integer, got 0")


def test_no_target_anywhere_says_how_to_give_one(app, tmp_path, monkeypatch):
    import envman.portable.facts.nvidia as nv

    monkeypatch.setattr(nv, "scan_gpus", lambda: type("S", (), {"gpus": [], "source": None})())
    _, err = run(app, str(tmp_path), "--model", "gpt2")
    assert err is not None and err.message == "no target GPU: none detected on this machine and none in envman.yaml"


def test_trace_without_torch_is_one_line(app, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    _, err = run(app, "--model", "gpt2", "--target", "h100", "--trace")
    assert err is not None and err.message == "--trace needs torch and transformers (torch is not installed)"


def test_analytic_path_imports_no_torch_jinja2_or_docker():
    import subprocess

    code = ("import sys, typer; from envman.cli.fit import register; from envman.app.fit import FitOptions, run_fit; "
            "run_fit(FitOptions(model='gpt2', targets=('h100',))); "
            "print(sorted(m for m in ('torch', 'jinja2', 'docker', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_trace_prints_the_traced_peak_beside_the_analytic_one(app):
    pytest.importorskip("torch", reason="--trace needs torch (the accuracy fixture covers the comparison offline)")
    pytest.importorskip("transformers", reason="--trace needs transformers")
    res, err = run(app, "--model", "gpt2", "--seq", "64", "--batch", "1", "--precision", "fp32",
                   "--target", "h100", "--trace", "--json")
    assert err is None, err
    d = json.loads(res.stdout)
    assert d["traced_peak_bytes"] > 0
    assert abs(d["traced_analytic_bytes"] - d["traced_peak_bytes"]) / d["traced_peak_bytes"] < 0.10


# --- the data files (catalog: the IO boundary) ------------------------------------------------------------


def test_every_gpu_perf_entry_is_a_gpus_yaml_id_with_a_source():
    import yaml

    from envman.fit.catalog import gpu_specs
    from envman.matrix.load import load_matrix
    from envman.resources import matrix_dir

    ids = {g.id for g in load_matrix().gpus}
    listed = set(yaml.safe_load((matrix_dir() / "gpu_perf.yaml").read_text(encoding="utf-8"))["gpus"])
    assert listed <= ids
    assert {"h100-sxm", "a100-sxm4-80gb", "rtx-4090", "l4"} <= listed
    assert all(g.source.startswith("https://") for g in gpu_specs(sorted(listed)))  # what fit reads of them


def test_bf16_follows_compute_capability():
    from envman.fit.catalog import gpu_specs
    from envman.model import Cc

    by = {g.id: g for g in gpu_specs(["t4", "a100", "l4", "h100"])}
    assert (by["t4"].bf16, by["a100-sxm4-80gb"].bf16) == (False, True)
    # fp8 tensor cores from 8.9 (Ada, Hopper): the capabilities the estimator reads
    assert (by["a100-sxm4-80gb"].cc, by["l4"].cc, by["h100-sxm"].cc) == (Cc(8, 0), Cc(8, 9), Cc(9, 0))


def test_gpu_perf_problems_are_all_reported_with_file_and_path(tmp_path, monkeypatch):
    from envman.errors import MatrixError
    from envman.fit import catalog

    (tmp_path / "gpu_perf.yaml").write_text(
        "gpus:\n  h100-sxm:\n    memory_bytes: -1\n    bandwidth: fast\n    printed: {bf61: 3, fp32: no}\n")
    monkeypatch.setenv("ENVMAN_MATRIX_DIR", str(tmp_path))
    catalog._load_perf.cache_clear()
    with pytest.raises(MatrixError) as exc:
        catalog.perf_constants()  # the file as every fit reads it
    catalog._load_perf.cache_clear()
    assert exc.value.problems == [
        "gpu_perf.yaml: gpus.h100-sxm.memory_bytes: expected a positive integer, got -1",
        "gpu_perf.yaml: gpus.h100-sxm.printed.bf61: unknown precision (did you mean bf16?)",
        "gpu_perf.yaml: gpus.h100-sxm.printed.fp32: expected a positive number, got False",
        "gpu_perf.yaml: gpus.h100-sxm.bandwidth: expected the datasheet's memory bandwidth ('3.35TB/s'), got 'fast'",
        "gpu_perf.yaml: gpus.h100-sxm.source: missing",
    ]


def test_dense_figures_are_derived_from_the_printed_sparse_ones():
    from envman.fit.catalog import gpu_specs

    h100, a100 = gpu_specs(["h100", "a100"])
    assert h100.peak_tflops("bf16") == 1979 / 2 and h100.bandwidth == 3.35e12  # printed with sparsity
    assert a100.peak_tflops("bf16") == 312 and a100.bandwidth == 2.039e12  # the A100 sheet prints dense


def test_models_yaml_problems_name_the_entry_and_config_key(tmp_path):
    from envman.errors import MatrixError
    from envman.fit.catalog import load_models

    (tmp_path / "models.yaml").write_text(
        "models:\n  - {id: x, name: X, task: causal-lm, params: 5, source: 'https://x',\n"
        "     config: {model_type: llama, hidden_size: 8}}\n")
    with pytest.raises(MatrixError) as exc:
        load_models(str(tmp_path))
    assert exc.value.problems[0] == "models.yaml: models[0].config.num_hidden_layers: missing"


def test_every_shipped_model_has_a_source_url():
    from envman.fit.catalog import load_models

    models = load_models()
    assert len(models) >= 20
    assert all(m.source.startswith("https://") for m in models)


# --- envman.yaml `workload:` in init/lock and the doctor -------------------------------------------------------
def test_workload_is_validated_in_envman_yaml():
    from envman.errors import UsageError
    from envman.project.spec import parse_spec

    spec = parse_spec({"name": "w", "cpu": True, "workload": {"model": "gpt2", "method": "lora", "batch": 4}})
    assert dict(spec.workload) == {"model": "gpt2", "method": "lora", "batch": 4}
    with pytest.raises(UsageError) as e:
        parse_spec({"name": "w", "cpu": True, "workload": {"modle": "gpt2"}})
    assert e.value.message == "envman.yaml: workload.modle: unknown key" and e.value.hint == "did you mean model?"
    with pytest.raises(UsageError) as e:
        parse_spec({"name": "w", "cpu": True, "workload": {"batch": "4"}})
    assert e.value.message == "envman.yaml: workload.batch: expected int, got '4'"


def test_init_says_whether_the_workload_fits_each_target(tmp_path):
    from envman.app.init import InitOptions, init_project

    (tmp_path / "requirements.txt").write_text("torch\n")
    (tmp_path / "envman.yaml").write_text(
        "name: w\npython: '3.11'\nframework: torch\ntargets: [rtx-4090, h100]\n"
        "workload: {model: gpt2, method: full, precision: bf16-mixed, batch: 8, seq: 1024}\n")
    out = init_project(tmp_path, InitOptions(no_lock=True))
    fits = [n for n in out.notes if n.startswith("workload: GPT-2")]
    assert len(fits) == 2 and all(" fits " in n for n in fits), out.notes
    (tmp_path / "envman.yaml").write_text(
        "name: w\npython: '3.11'\nframework: torch\ntargets: [rtx-4090]\n"
        "workload: {model: llama-3.1-8b, method: full, precision: bf16-mixed}\n")
    out = init_project(tmp_path, InitOptions(no_lock=True), )
    [warning] = [n for n in out.notes if n.startswith("warning: workload:")]
    assert "does not fit NVIDIA GeForce RTX 4090" in warning and "first lever:" in warning


def test_the_workload_does_not_make_the_lock_stale(tmp_path):
    from envman.app.init import InitOptions, init_project
    from envman.app.lock import check_lock

    (tmp_path / "envman.yaml").write_text("name: w\npython: '3.11'\ncpu: true\n")
    init_project(tmp_path, InitOptions(no_lock=True))
    (tmp_path / "envman.yaml").write_text("name: w\npython: '3.11'\ncpu: true\nworkload: {model: gpt2}\n")
    assert check_lock(tmp_path) == []  # what is trained is not what is built


def test_doctor_finds_a_workload_that_does_not_fit_this_gpu():
    from envman.portable.doctor.checks import run_checks

    gpus = [{"index": 0, "name": "NVIDIA GeForce RTX 4090", "cc": "8.9", "mem_total_mib": 24564}]
    big = {"model": "Llama 3.1 8B", "method": "full", "precision": "bf16-mixed", "peak_mib": 153170,
           "on_card_mib": 153500, "margin_pct": 10}
    [f] = [f for f in run_checks({"gpus": gpus, "workload_fit": big}) if f.check == "workload-does-not-fit"]
    assert f.severity == "error" and ("needs about 153,500 MiB per GPU on the card (reserved + the CUDA context); "
                                      "GPU 0 NVIDIA GeForce RTX 4090 has 24,564 MiB (short by 128,936 MiB)") in f.verdict
    assert "envman fit" in f.remedy
    small = {**big, "model": "GPT-2", "peak_mib": 9000, "on_card_mib": 9300}  # near miss: fits with the margin
    assert not [f for f in run_checks({"gpus": gpus, "workload_fit": small}) if f.check.startswith("workload")]
    assert not [f for f in run_checks({"gpus": gpus}) if f.check.startswith("workload")]  # no workload: quiet


def test_doctor_gathers_the_workload_fit_on_the_host(tmp_path):
    from envman.app.doctor import _workload_fit

    assert _workload_fit(str(tmp_path)) is None
    (tmp_path / "envman.yaml").write_text("name: w\ncpu: true\nworkload: {model: gpt2, batch: 2, seq: 512}\n")
    fit = _workload_fit(str(tmp_path))
    assert fit["model"] == "GPT-2 (124M)" and 0 < fit["peak_mib"] < fit["on_card_mib"] and fit["margin_pct"] == 10


def test_resolve_judges_a_projects_workload_on_its_targets(tmp_path):
    from envman.app.resolve import resolve_request
    from envman.errors import UsageError

    (tmp_path / "envman.yaml").write_text("name: w\ncpu: true\nworkload: {model: gpt2, batch: 8, seq: 1024}\n")
    res = resolve_request("torch", targets=["h100"], workload_from=tmp_path)
    [note] = [n for n in res.notes if n.topic == "workload"]
    assert note.startswith("workload: GPT-2 (124M), full, bf16-mixed: peak ") and " fits NVIDIA H100" in note
    (tmp_path / "envman.yaml").write_text("name: w\ncpu: true\n")
    with pytest.raises(UsageError, match="no workload: in envman.yaml"):
        resolve_request("torch", targets=["h100"], workload_from=tmp_path)


# --- issue 22: bad input, exit codes, labels, the README's example ------------------------------------------
@pytest.mark.parametrize(("args", "message"), [
    (["--model", "gpt2", "--seq", "-5"], "--seq -5: expected a positive number of tokens"),
    (["--model", "gpt2", "--seq", "0"], "--seq 0: expected a positive number of tokens"),
    (["--model", "gpt2", "--seq", "100000"], "--seq 100000 is longer than this model's 1,024 positions (max_position_embeddings)"),
    (["--model", "gpt2", "--method", "lora", "--lora-rank", "0"], "--lora-rank 0: expected a positive whole number"),
    (["--model", "gpt2", "--method", "lora", "--lora-rank", "-4"], "--lora-rank -4: expected a positive whole number"),
    (["--model", "vit-base", "--image-size", "0"], "--image-size 0: expected a positive number of pixels"),
    (["--model", "vit-base", "--image-size", "-224"], "--image-size -224: expected a positive number of pixels"),
    (["--params", "7e99"], "--params 7e99: expected a parameter count between 1 and 1e15"),
    (["--params", "inf"], "--params inf: expected a parameter count between 1 and 1e15"),
    (["--model", "gpt2", "--global-batch", "0"], "--global-batch 0: expected a positive number of samples"),
])
def test_bad_numbers_are_one_error_line_and_exit_2(app, args, message):
    _, err = run(app, *args, "--target", "h100")
    assert err is not None and err.message == message and err.exit_code == 2
    assert err.hint, f"{message}: no hint"


# every refusal of fit's validation says where to go: the valid range, the model's positions, an example
@pytest.mark.parametrize(("args", "hint"), [
    (["--model", "gpt2", "--seq", "100000"], "--seq 1024 at most for this model"),
    (["--model", "gpt2", "--seq", "-5"], "e.g. --seq 2048"),
    (["--model", "gpt2", "--method", "lora", "--lora-rank", "-4"], "1 or more, e.g. --lora-rank 16"),
    (["--model", "gpt2", "--batch", "0"], "1 or more, e.g. --batch 4"),
    (["--model", "vit-base", "--image-size", "8"], "--image-size 16 at least; the model's own is 224"),
    (["--model", "gpt2", "--precision", "int3"], "e.g. --precision fp32"),
    (["--model", "gpt2", "--attention", "flahs"], "did you mean --attention flash?"),
    (["--model", "gpt2", "--gpus", "4"], "e.g. --gpus 4 --shard ddp"),
    (["--model", "gpt2", "--gpus", "6", "--tp", "4", "--shard", "ddp"], "e.g. --gpus 4"),
    (["--model", "gpt2", "--method", "lora", "--lora-targets", "q_proj"], "e.g. --lora-targets c_attn"),
    (["--model", "llama-3.2-1b", "--method", "qlora", "--precision", "fp32"], "drop --precision"),
    (["--model", "resnet-50", "--grad-checkpointing"], "drop --grad-checkpointing"),
    (["--model", "gpt2", "--margin", "150"], "e.g. --margin 10"),
    (["--model", "gpt2", "--mfu", "2"], "e.g. --mfu 0.4"),
    (["--model", "gpt2", "--global-batch", "0"], "e.g. --global-batch 64"),
    (["--model", "gpt2", "--offload", "disk"], "--offload takes none, optimizer, params"),
    # combinations no stack runs: an adapter without layers, offload without sharding, more stages than layers
    (["--params", "7B", "--method", "lora"], "with --params: --method full"),
    (["--params", "7B", "--method", "freeze"], "--model NAME or --model path/to/config.json"),
    (["--model", "gpt2", "--offload", "optimizer"], "--shard zero2 --offload optimizer"),
    (["--model", "gpt2", "--offload", "params", "--shard", "zero2", "--gpus", "2"], "--shard zero3 --offload params"),
    (["--model", "gpt2", "--gpus", "16", "--pp", "16"], "--pp 12 at most"),
])
def test_every_refusal_has_a_hint_that_leads_somewhere(app, args, hint):
    _, err = run(app, *args, "--target", "h100")
    assert err is not None and err.exit_code == 2, err
    assert err.hint is not None and hint in err.hint, (err.message, err.hint)


def test_a10g_is_a_target_and_the_readme_qlora_example_fits_a_24gb_card(app):
    res, err = run(app, "--model", "llama-3.1-8b", "--method", "qlora", "--target", "a10g", "--target", "rtx-4090", "--json")
    assert err is None and res.exit_code == 0
    d = json.loads(res.stdout)
    assert d["setup"]["stack"] == "peft-qlora" and d["setup"]["attention"] == "flash"
    assert all(t["fits"] for t in d["targets"])


def test_gpus_n_labels_per_gpu_and_all_gpu_rates_and_host_ram_per_node(app):
    res, err = run(app, "--model", "llama-3.1-8b", "--stack", "fsdp2", "--gpus", "16", "--seq", "4096",
                   "--target", "h100", "--json")
    assert err is None
    d = json.loads(res.stdout)
    t = d["targets"][0]
    assert t["tokens_per_second_all_gpus"] == pytest.approx(16 * t["tokens_per_second"], rel=1e-3)
    assert d["host"]["ram_scope"] == "per node" and d["host"]["gpus_per_node"] == 8
    assert d["host"]["ram_bytes"] < 16 * 2 * t["memory_bytes"]  # not the whole cluster as one host


def test_compare_gives_each_card_its_own_lever(app):
    res, err = run(app, "--model", "llama-3.1-8b", "--seq", "2048", "--compare", "h100,rtx-4090,l4", "--json")
    assert err is None
    cmp = {c["id"]: c for c in json.loads(res.stdout)["compare"]}
    assert cmp["rtx-4090"]["lever"] and cmp["rtx-4090"]["lever"]["peak_bytes"] <= cmp["rtx-4090"]["memory_bytes"]
    assert not cmp["h100-sxm"]["fits"] or cmp["h100-sxm"]["lever"] is None


def test_unknown_stack_names_the_known_ones(app):
    _, err = run(app, "--model", "gpt2", "--stack", "deepspeed-zero4", "--target", "h100")
    assert err is not None and err.message.startswith("--stack 'deepspeed-zero4' is not one of") and err.exit_code == 2


def test_zero_grad_says_when_the_loop_frees_the_gradients(app):
    """--zero-grad: a loop that calls zero_grad() between the loss and backward holds the last step's gradients
    through the forward (rasbt/pytorch-memory-optim), so its peak is higher; a value outside the three is exit 2."""
    def peak(*extra):
        res, err = run(app, "--model", "vit-base", "--precision", "bf16", "--batch", "16", "--target", "h100",
                       "--json", *extra)
        assert err is None
        return json.loads(res.stdout)
    usual, late = peak(), peak("--zero-grad", "before-backward")
    assert late["peak_bytes"] > usual["peak_bytes"] and late["peak_phase"] == "forward-end"
    assert late["breakdown"]["gradients"] == late["model"]["trainable_params"] * 2  # every bf16 gradient
    _, err = run(app, "--model", "vit-base", "--zero-grad", "sometimes", "--target", "h100")
    assert err is not None and err.exit_code == 2 and err.message.startswith("--zero-grad 'sometimes' is not one of")


# --- `envman fit` in a project: envman.yaml's workload is the run, the command line overrides its keys ------
def _project(tmp_path, workload: str):
    (tmp_path / "envman.yaml").write_text(f"name: p\ntargets: [a100]\nworkload:\n{workload}")
    return str(tmp_path)


def test_fit_in_a_project_judges_its_workload(app, tmp_path):
    path = _project(tmp_path, "  model: llama-3.1-8b\n  stack: peft-qlora\n  seq: 4096\n")
    res, err = run(app, path, "--json")
    assert err is None, err
    d = json.loads(res.stdout)
    assert (d["model"]["name"], d["setup"]["stack"], d["setup"]["seq"]) == ("Llama 3.1 8B", "peft-qlora", 4096)
    assert d["targets"][0]["id"] == "a100-sxm4-80gb" and d["notes"][0] == "run: envman.yaml workload"


def test_an_option_overrides_the_workload_key_and_says_so(app, tmp_path):
    path = _project(tmp_path, "  model: llama-3.1-8b\n  stack: peft-qlora\n  seq: 4096\n")
    res, err = run(app, path, "--seq", "1024", "--batch", "2", "--json")
    d = json.loads(res.stdout)
    assert (d["setup"]["seq"], d["setup"]["batch"], d["setup"]["stack"]) == (1024, 2, "peft-qlora")
    assert d["notes"][0] == "run: envman.yaml workload (the command line overrides seq)"


def test_a_model_on_the_command_line_is_another_run(app, tmp_path):
    path = _project(tmp_path, "  model: llama-3.1-8b\n  stack: peft-qlora\n")
    res, err = run(app, path, "--model", "gpt2", "--json")
    d = json.loads(res.stdout)
    assert d["setup"]["stack"] == "hf-trainer" and not any(n.startswith("run: envman.yaml") for n in d["notes"])


def test_a_bad_workload_value_says_it_is_the_workloads(app, tmp_path):
    _, err = run(app, _project(tmp_path, "  model: llama-3.1-8b\n  seq: -3\n"))
    assert err is not None and err.exit_code == 2
    assert err.message == "envman.yaml workload: --seq -3: expected a positive number of tokens"


def test_a_gpu_without_datasheet_figures_gets_the_memory_verdict_and_says_so(app):
    # rtx-a6000 is in gpus.yaml (48 GiB) but not in gpu_perf.yaml: fit judges memory, prints no throughput
    res, err = run(app, "--model", "llama-3.1-8b", "--method", "qlora", "--target", "rtx-a6000", "--json")
    assert err is None, err
    t = json.loads(res.stdout)["targets"][0]
    assert (t["id"], t["memory_bytes"], t["fits"]) == ("rtx-a6000", 48 * 2**30, True)
    assert t["step_seconds"] is None and t["tokens_per_second"] is None and t["memory_bandwidth_bytes_per_second"] is None
    assert any(n.startswith("memory verdict only") for n in t["notes"])
    res, _ = run(app, "--model", "llama-3.1-8b", "--method", "full", "--target", "rtx-a6000", "--json")
    assert json.loads(res.stdout)["targets"][0]["fits"] is False and res.exit_code == 8


@pytest.mark.parametrize(("args", "message"), [
    (["--model", "vit-base", "--method", "freeze"], "--trace has no recipe for --method freeze (it traces full fine-tuning and LoRA)"),
    (["--model", "gpt2", "--method", "qlora"], "--trace cannot trace --method qlora: bitsandbytes' 4-bit kernels need a GPU"),
    (["--model", "gpt2", "--stack", "deepspeed-zero3", "--gpus", "2"],
     "--trace measures one process on one device: it cannot trace --stack deepspeed-zero3 (shard zero3, offload none)"),
])
def test_trace_says_what_it_cannot_trace_before_needing_torch(app, args, message):
    _, err = run(app, *args, "--trace", "--target", "h100")
    assert err is not None and err.exit_code == 2 and err.message == message


def test_no_model_and_no_workload_points_to_both(app, tmp_path):
    (tmp_path / "envman.yaml").write_text("name: p\ntargets: [a100]\n")
    _, err = run(app, str(tmp_path))
    assert err is not None and err.exit_code == 2 and err.message.startswith("no model given")
    assert "--model llama-3.1-8b" in err.hint and "workload: {model: llama-3.1-8b" in err.hint


# --- issue 39 (causes 10, 11): the workload's type errors lead somewhere; a global batch is whole micro-steps ------
@pytest.mark.parametrize("value", ["4", 4.5, True, [4], {"n": 4}, None])
def test_every_workload_type_error_has_a_hint(value):
    from envman.errors import SpecError
    from envman.project.spec import WORKLOAD_KEYS, parse_spec

    for key, want in WORKLOAD_KEYS.items():
        if value is None or (isinstance(value, want) and not isinstance(value, bool)) or (want is bool and value is True):
            continue
        with pytest.raises(SpecError) as e:
            parse_spec({"name": "w", "cpu": True, "workload": {key: value}})
        assert e.value.message.startswith(f"envman.yaml: workload.{key}: expected "), e.value.message
        assert e.value.hint and e.value.hint.startswith(f"e.g. {key}: "), (key, e.value.hint)


def test_a_workload_that_is_not_a_mapping_says_what_one_looks_like():
    from envman.errors import SpecError
    from envman.project.spec import parse_spec

    with pytest.raises(SpecError) as e:
        parse_spec({"name": "w", "cpu": True, "workload": ["llama-3.1-8b"]})
    assert e.value.message == "envman.yaml: workload: expected a mapping (model: llama-3.1-8b, method: lora …), got list"
    assert e.value.hint == "e.g. workload: {model: llama-3.1-8b, method: qlora, batch: 4} (docs/envman-yaml.md)"


def test_lora_targets_that_are_not_names_are_refused_with_a_hint():
    from envman.errors import SpecError
    from envman.project.spec import parse_spec

    with pytest.raises(SpecError) as e:
        parse_spec({"name": "w", "cpu": True, "workload": {"lora_targets": [{"q": 1}]}})
    assert e.value.message == "envman.yaml: workload.lora_targets: expected a list of layer names, got [{'q': 1}]"
    assert e.value.hint == "e.g. lora_targets: [q_proj, v_proj]"


@pytest.mark.parametrize("args, message, hint", [
    (("--batch", "8", "--global-batch", "2"), "--global-batch 2 is smaller than one micro-step's 8 samples (--batch 8)",
     "--global-batch 8 (no accumulation) or a multiple of it; or a smaller --batch"),
    (("--batch", "8", "--global-batch", "20"), "--global-batch 20 is not a whole number of micro-steps of 8 samples (--batch 8)",
     "--global-batch 16 or 24 (whole micro-steps), or a --batch that divides 20"),
    (("--batch", "4", "--gpus", "4", "--shard", "ddp", "--global-batch", "24"),
     "--global-batch 24 is not a whole number of micro-steps of 16 samples (--batch 4 × 4 data-parallel GPUs)",
     "--global-batch 16 or 32 (whole micro-steps), or a --batch that makes 24 a multiple of --batch × 4 GPUs"),
])
def test_a_global_batch_is_whole_micro_steps(app, args, message, hint):
    res, err = run(app, "--model", "gpt2", *args, "--target", "h100")
    assert err is not None and (err.message, err.hint, err.exit_code) == (message, hint, 2)


def test_the_workloads_batch_above_its_global_batch_is_refused_naming_the_workload(app, tmp_path):
    (tmp_path / "envman.yaml").write_text("name: w\npython: '3.11'\ncpu: true\n"
                                          "workload: {model: gpt2, batch: 8, global_batch: 2}\n")
    res, err = run(app, str(tmp_path), "--target", "h100")
    assert err is not None and err.exit_code == 2
    assert err.message == "envman.yaml workload: --global-batch 2 is smaller than one micro-step's 8 samples (--batch 8)"


# --- issue 41.4: every lever's flags give the figure the advice printed -------------------------------------------
@pytest.mark.parametrize("base", [
    ("--model", "llama-3.1-8b", "--method", "full", "--target", "a100-80gb"),
    ("--model", "llama-3.1-8b", "--method", "full", "--batch", "8", "--seq", "1024", "--target", "rtx-4090"),
    ("--model", "llama-3.1-8b", "--method", "full", "--precision", "fp32", "--batch", "4", "--global-batch", "16",
     "--target", "h100"),
    ("--model", "gpt2-xl", "--precision", "fp32", "--batch", "16", "--attention", "eager", "--target", "t4"),
    ("--model", "llama-3.1-8b", "--stack", "peft-lora", "--batch", "8", "--target", "rtx-4090"),
    ("--model", "llama-3.1-8b", "--gpus", "8", "--shard", "ddp", "--batch", "4", "--target", "a100-40gb"),
    ("--model", "vit-large", "--precision", "fp32", "--batch", "512", "--target", "t4"),
])
def test_every_lever_gives_the_figure_it_promised(app, base):
    res, err = run(app, *base, "--compare", "rtx-4090,l4", "--json")
    assert err is None, err
    d = json.loads(res.stdout)
    levers = [(lv["change"], lv["saves_bytes"]) for lv in d["advice"]]
    levers += [(t["lever"]["change"], d["peak_bytes"] - t["lever"]["peak_bytes"]) for t in d["compare"] if t["lever"]]
    assert levers, "the base run fits: nothing to check"
    for change, saves in levers:
        # drop a flag the base run already gives (the lever's value wins, as on a command line)
        flags = change.split()
        kept = list(base)
        for f in [f for f in flags if f.startswith("--")]:
            if f in kept:
                i = kept.index(f)
                del kept[i:i + (1 if f in ("--grad-checkpointing", "--fused-optimizer") else 2)]
        again, err = run(app, *kept, *flags, "--json")
        assert err is None, (change, err)
        assert d["peak_bytes"] - json.loads(again.stdout)["peak_bytes"] == saves, change


# --- issue 41.1: what the loss keeps (--loss), the fused optimizer, the optimizer step in backward -----------------
GPT3_125M = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_embd": 768, "n_head": 12, "n_layer": 12,
             "n_positions": 2048, "vocab_size": 50257}


@pytest.mark.parametrize("loss, peak, phase", [
    ("hf", "74.81 GiB", "backward-start"),  # transformers: the fp32 log-softmax of 32 × 2048 × 50257 logits, 3× at once
    ("chunked", "45.29 GiB", "backward-start"),  # LitGPT: in the compute dtype, 128-token chunks
    ("fused", "44.14 GiB", "loss"),  # flash-attention's in-place kernel: the bf16 logits and an fp32 lse per row
])
def test_the_loss_names_what_it_keeps(app, tmp_path, loss, peak, phase):
    # flash-attention's GPT3-125M at 32 × 2048 ran on 80 GB with its fused in-place cross-entropy (issue 41)
    (tmp_path / "config.json").write_text(json.dumps(GPT3_125M))
    res, err = run(app, "--model", str(tmp_path / "config.json"), "--seq", "2048", "--batch", "32", "--loss", loss,
                   "--target", "a100-80gb")
    assert err is None and res.exit_code == 0
    assert f"peak     {peak} per GPU allocated (max_memory_allocated, at {phase})" in res.output


def test_an_unknown_loss_is_refused_with_the_four_it_knows(app):
    res, err = run(app, "--model", "gpt2", "--loss", "liger", "--target", "h100")
    assert (err.message, err.exit_code) == ("--loss 'liger' is not one of hf, chunked, fused, chunked-fp32", 2)
    assert err.hint.startswith("hf (transformers: fp32 logits), chunked (LitGPT")


def test_the_fused_optimizer_and_the_step_in_backward_drop_what_they_free(app):
    base = ("--model", "gpt2", "--batch", "1", "--seq", "128", "--precision", "fp32", "--target", "h100", "--json")
    peaks = {}
    for extra in ((), ("--fused-optimizer",), ("--optimizer-in-backward",)):
        res, err = run(app, *base, *extra)
        assert err is None
        d = json.loads(res.stdout)
        peaks[extra] = (d["peak_bytes"], d["peak_phase"])
    # foreach AdamW's sqrt(v) list is the step's peak; fused has none; in backward only one tensor's gradient lives
    assert peaks[()][1] == "optimizer-step"
    assert peaks[("--fused-optimizer",)][0] < peaks[()][0]
    assert peaks[("--optimizer-in-backward",)][0] < peaks[("--fused-optimizer",)][0]


def test_the_step_in_backward_refuses_accumulation(app):
    res, err = run(app, "--model", "gpt2", "--batch", "2", "--global-batch", "8", "--optimizer-in-backward", "--target", "h100")
    assert err.exit_code == 2 and err.message.startswith("--optimizer-in-backward steps each parameter as its gradient")


# --- issue 41.7: the whole run's wall time per GPU type, and its cost at the user's price ---------------------------
def test_the_whole_run_takes_volume_over_rate_and_costs_only_at_a_given_price(app):
    res, err = run(app, "--model", "llama-3.1-8b", "--method", "qlora", "--target", "h100", "--compare", "h100,l4",
                   "--tokens", "1e9", "--price-per-gpu-hour", "h100=2.5", "--json")
    assert err is None
    d = json.loads(res.stdout)
    band = d["estimate"]["band_pct"] / 100
    for t in d["compare"]:
        rate = t["tokens_per_second"]
        assert t["run_seconds"] == pytest.approx(1e9 / rate, rel=1e-3)
        lo, hi = t["run_seconds_range"]
        assert (lo, hi) == (pytest.approx(1e9 / (rate * (1 + band)), rel=1e-3), pytest.approx(1e9 / (rate * (1 - band)), rel=1e-3))
    h100, l4 = d["compare"]
    assert h100["cost"] == pytest.approx(h100["run_seconds"] / 3600 * 2.5, rel=1e-3)
    assert h100["cost_range"] == [pytest.approx(h100["run_seconds_range"][0] / 3600 * 2.5, rel=1e-3),
                                  pytest.approx(h100["run_seconds_range"][1] / 3600 * 2.5, rel=1e-3)]
    assert (l4["price_per_gpu_hour"], l4["cost"], l4["cost_range"]) == (None, None, None)  # no price: none invented


def test_the_run_counts_every_gpu_hour_and_samples_times_epochs(app):
    one, _ = run(app, "--model", "gpt2", "--seq", "1024", "--batch", "8", "--target", "a100", "--samples", "1000",
                 "--epochs", "3", "--price-per-gpu-hour", "2", "--json")
    eight, _ = run(app, "--model", "gpt2", "--seq", "1024", "--batch", "8", "--gpus", "8", "--shard", "ddp",
                   "--target", "a100", "--samples", "1000", "--epochs", "3", "--price-per-gpu-hour", "2", "--json")
    a, b = json.loads(one.stdout)["targets"][0], json.loads(eight.stdout)["targets"][0]
    assert a["run_seconds"] == pytest.approx(3000 * 1024 / a["tokens_per_second"], abs=0.06)  # rounded to 0.1 s
    assert b["cost"] == pytest.approx(b["run_seconds"] / 3600 * 8 * 2, abs=0.005)  # rounded to a cent


@pytest.mark.parametrize("args, message", [
    (("--price-per-gpu-hour", "h100=free"), "--price-per-gpu-hour 'h100=free': 'h100=free' is not a price"),
    (("--price-per-gpu-hour", "-1"), "--price-per-gpu-hour '-1': '-1' is not a price"),
    (("--tokens", "1e9", "--samples", "10"), "--tokens and --samples exclude each other"),
    (("--samples", "10", "--epochs", "0"), "--epochs 0.0: expected a positive number"),
    (("--tokens", "lots"), "--tokens 'lots' is not a number"),
])
def test_run_volume_and_price_errors_are_one_line_with_a_hint(app, args, message):
    res, err = run(app, "--model", "gpt2", "--target", "h100", *args)
    assert err is not None and err.message == message and err.hint and err.exit_code == 2


def test_an_image_model_counts_samples_not_tokens(app):
    res, err = run(app, "--model", "vit-base", "--target", "h100", "--tokens", "1e6")
    assert err.message == "--tokens: this model counts images, not tokens" and err.hint == "--samples N --epochs E"


def test_compile_drops_what_the_partitioner_recomputes_and_says_which(app):
    base, _ = run(app, "--model", "gpt2", "--target", "h100", "--batch", "8", "--json")
    res, err = run(app, "--model", "gpt2", "--target", "h100", "--batch", "8", "--compile", "--json")
    d, e = json.loads(res.stdout), json.loads(base.stdout)
    assert err is None and d["peak_bytes"] < e["peak_bytes"]
    assert ("torch.compile: the model and its loss compiled; AOTAutograd's min-cut partitioner recomputes pointwise "
            "ops in backward; not saved: gelu_new's intermediates 1.69 GiB; the loss's fp32 log-softmax 0.77 GiB; "
            "still saved: matmul and attention inputs and outputs, norm statistics, dropout masks (random ops are "
            "never recomputed)") in d["notes"]


def test_compile_of_a_cnn_or_an_unmodelled_family_says_so_and_keeps_the_eager_figure(app):
    for model, note in (("resnet-50", "torch.compile: a convolution block saves what eager saves: BatchNorm's input "
                                      "is a convolution's output (never recomputed) and ReLU's output the next "
                                      "convolution's input (read by its backward)"),
                        ("mamba-2.8b", "torch.compile: not modelled for this model family; the estimate is eager "
                                       "PyTorch's")):
        base, _ = run(app, "--model", model, "--target", "h100", "--json")
        res, err = run(app, "--model", model, "--target", "h100", "--compile", "--json")
        d = json.loads(res.stdout)
        assert err is None and d["peak_bytes"] == json.loads(base.stdout)["peak_bytes"] and note in d["notes"]


_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=300),
                       lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=2),
                       max_leaves=5)


@settings(max_examples=300, deadline=None)
@given(key=st.sampled_from(sorted(__import__("envman.project.spec", fromlist=["WORKLOAD_KEYS"]).WORKLOAD_KEYS)),
       value=_VALUES)
def test_any_workload_value_is_taken_or_refused_with_a_hint(key, value):
    from envman.errors import SpecError
    from envman.project.spec import parse_spec

    try:
        parse_spec({"name": "w", "cpu": True, "workload": {key: value}})
    except SpecError as exc:
        assert exc.message.startswith(f"envman.yaml: workload.{key}"), exc.message
        assert exc.hint, (key, value, exc.message)


def test_the_workload_names_what_the_loss_keeps_and_the_other_issue_41_run_options(app, tmp_path):
    (tmp_path / "envman.yaml").write_text("name: w\npython: '3.11'\ncpu: true\nworkload: {model: gpt2, batch: 8, "
                                          "seq: 1024, loss: fused, activation_offload: true, compile: true}\n")
    res, err = run(app, str(tmp_path), "--target", "h100", "--json")
    assert err is None
    d = json.loads(res.stdout)
    assert (d["setup"]["loss"], d["setup"]["activation_offload"]) == ("fused", True)
    assert any(n.startswith("torch.compile:") for n in d["notes"])
