"""Issue 41, round four: the checkpoint's load as a moment of the run (max_memory_allocated counts it), and the
stacks read from their code this round — LitGPT under Lightning 2.1.0 (the whole bf16 model before quantising),
torchtune's QLoRA on torchao's NF4, DeepSpeed's fp16 optimizer without ZeRO (matrices/fit_stacks.yaml cites each)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import typer
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from envman.cli.fit import register
from envman.errors import EnvmanError, MatrixError
from envman.fit.architectures import arch_from_config
from envman.fit.estimate import estimate
from envman.fit.runspec import NF4_BYTES_PER_PARAM, QLORA_BYTES_PER_PARAM, Setup
from envman.fit.stacks import load_stacks
from envman.fit.states import quantised_linears

ROOT = Path(__file__).resolve().parents[2]
MODELS = {m["id"]: m for m in yaml.safe_load((ROOT / "matrices" / "models.yaml").read_text())["models"]}
LLMS = ("llama-2-7b", "llama-2-13b", "llama-3.1-8b", "mistral-7b-v0.1", "tinyllama-1.1b", "gemma-7b", "phi-3-mini")


def arch(model_id: str):
    return arch_from_config(MODELS[model_id]["config"])


def stack_setup(name: str, **kw) -> Setup:
    """The Setup a stack's defaults give (as app/fit.py builds it), with ``kw`` on top."""
    keys = set(Setup.__dataclass_fields__)
    stack = load_stacks(str(ROOT / "matrices"))[name]
    return Setup(**{**{k: v for k, v in stack.defaults if k in keys}, **kw})


@pytest.fixture(autouse=True, scope="module")
def _shipped():
    """The stacks are shipped data (matrices/fit_stacks.yaml), not the frozen fixture matrix."""
    from test_fit_reference import shipped_data

    with shipped_data():
        yield


@pytest.fixture(scope="module")
def app():
    a = typer.Typer()
    register(a)

    @a.callback()
    def _root():
        pass

    return a


def run(app, *args):
    res = CliRunner().invoke(app, ["fit", *args])
    if isinstance(res.exception, EnvmanError):
        return res, res.exception
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res, None


L210 = ("--model", "llama-2-7b", "--method", "qlora", "--stack", "litgpt-lightning-2.1.0", "--lora-rank", "8",
        "--lora-targets", "q_proj,v_proj", "--batch", "1")


def test_lightning_2_1_0_loads_the_whole_bf16_model_so_a_short_run_peaks_at_the_load(app):
    a = arch("llama-2-7b")
    e = estimate(a, stack_setup("litgpt-lightning-2.1.0", method="qlora", lora_rank=8,
                                lora_targets=("q_proj", "v_proj"), batch=1, seq=512))
    head = a.vocab * a.hidden  # LitGPT's lm_head: its first child, converted first (a clone and its fp16 copy)
    q = sum(lin.fan_in * lin.fan_out * lin.count for lin in quantised_linears(a, e.setup))
    assert q == a.matmul_params  # every linear, lm_head too (Lightning replaces every nn.Linear)
    assert e.phase == "load" and e.peak_bytes == e.load_bytes
    assert e.load_bytes == e.weights_bytes + int(q * (2 - NF4_BYTES_PER_PARAM)) + 2 * 2 * head
    res, err = run(app, *L210, "--seq", "512", "--target", "a100-40gb")
    assert err is None and res.exit_code == 0
    assert "peak     13.05 GiB per GPU allocated (max_memory_allocated, at load)" in res.output
    assert ("load     13.05 GiB while the checkpoint loads (the whole 16-bit model on the GPU, then each linear "
            "replaced by its 4-bit copy): the run's peak") in res.output


def test_a_long_sequence_peaks_in_the_step_and_says_the_load_is_below_it(app):
    res, err = run(app, *L210, "--seq", "1304", "--target", "a100-40gb")
    assert err is None
    assert "peak     13.12 GiB per GPU allocated (max_memory_allocated, at backward-start)" in res.output
    assert ("load     13.05 GiB while the checkpoint loads (the whole 16-bit model on the GPU, then each linear "
            "replaced by its 4-bit copy): below the step's peak") in res.output


def test_the_verdict_uses_the_load_when_it_is_the_larger(app):
    # Llama 2 13B: ~24.3 GiB of bf16 weights cannot be on a 24 GB A10G, whatever the step needs
    args = ("--model", "llama-2-13b", "--method", "qlora", "--lora-rank", "8", "--lora-targets", "q_proj,v_proj",
            "--batch", "1", "--seq", "512", "--target", "a10g", "--json")
    old, _ = run(app, *args, "--stack", "litgpt-lightning-2.1.0")
    fixed, _ = run(app, *args, "--stack", "litgpt-2023")
    o, f = json.loads(old.stdout), json.loads(fixed.stdout)
    assert (o["peak_phase"], o["targets"][0]["verdict"], old.exit_code) == ("load", "does not fit", 8)
    assert (f["peak_phase"], f["targets"][0]["verdict"], fixed.exit_code) == ("backward-start", "fits", 0)
    assert (o["setup"]["load"], f["setup"]["load"]) == ("quantize-after", "quantize-while-loading")
    assert o["load_bytes"] == o["peak_bytes"] and f["load_bytes"] < f["peak_bytes"]


@settings(max_examples=40, deadline=None)
@given(model=st.sampled_from(LLMS), batch=st.integers(1, 8), seq=st.integers(1, 4096),
       rank=st.sampled_from([4, 8, 16, 64]), ckpt=st.booleans(),
       stack=st.sampled_from(["peft-qlora", "qlora-paper", "litgpt", "litgpt-2023", "torchao-qlora",
                              "litgpt-lightning-2.1.0"]))
@example(model="gemma-7b", batch=1, seq=1, rank=4, ckpt=True, stack="qlora-paper")  # the least a step adds
def test_the_peak_is_the_larger_of_the_load_and_the_step(model, batch, seq, rank, ckpt, stack):
    a = arch(model)
    seq = min(seq, a.max_positions or seq)
    s = stack_setup(stack, method="qlora", batch=batch, seq=seq, lora_rank=rank, grad_checkpointing=ckpt)
    e, step = estimate(a, s), estimate(a, replace(s, load="to-device"))
    assert e.peak_bytes == max(e.load_bytes, step.peak_bytes)
    assert (e.phase == "load") == (e.load_bytes > step.peak_bytes)
    if s.load == "quantize-while-loading":  # one weight at a time: never above the step that dequantises it
        assert e.phase != "load"


def test_a_full_run_of_a_4bit_stack_loads_as_stored(app):
    res, err = run(app, "--model", "gpt2", "--stack", "litgpt", "--seq", "128", "--target", "h100", "--json")
    d = json.loads(res.stdout)
    assert err is None and d["setup"]["load"] == "to-device" and d["peak_phase"] != "load"
    assert d["load_bytes"] == d["breakdown"]["weights"]


def test_an_unknown_load_in_the_stacks_file_names_the_file_stack_and_value(tmp_path):
    (tmp_path / "fit_stacks.yaml").write_text(
        "stacks:\n  mine:\n    load: sideways\n    bytes: b\n    source: s\n")
    with pytest.raises(MatrixError) as exc:
        load_stacks(str(tmp_path))
    assert exc.value.problems == ["fit_stacks.yaml: stacks.mine.load: 'sideways' is not one of to-device, "
                                  "quantize-while-loading, quantize-after, meta"]


def test_an_unknown_compile_scope_in_the_stacks_file_names_the_file_stack_and_value(tmp_path):
    (tmp_path / "fit_stacks.yaml").write_text(
        "stacks:\n  mine:\n    compile_scope: layers\n    bytes: b\n    source: s\n")
    with pytest.raises(MatrixError) as exc:
        load_stacks(str(tmp_path))
    assert exc.value.problems == ["fit_stacks.yaml: stacks.mine.compile_scope: 'layers' is not one of model, blocks"]


def test_torchao_qlora_stores_nf4_with_double_quantised_scalers_and_keeps_the_rest_in_bf16():
    a = arch("llama-3.1-8b")
    s = stack_setup("torchao-qlora", batch=2, seq=512, lora_rank=8,
                    lora_targets=("q_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"))
    e = estimate(a, s)
    q = sum(lin.fan_in * lin.fan_out * lin.count for lin in quantised_linears(a, s))
    assert q == a.matmul_params - a.vocab * a.hidden  # the output projection stays bf16
    assert e.weights_bytes == int(q * QLORA_BYTES_PER_PARAM + (a.params - q) * 2 + e.trainable_params * 2)
    assert (s.precision, s.optimizer, s.kbit_fp32_extras, s.grad_checkpointing) == ("bf16", "adamw", False, True)
    # get_original_weight: two int64 index tensors of half the weights, two bf16 half-lookups, two scaled halves
    # and the stacked result — 14 bytes per weight of the largest block linear, in forward and backward alike
    one = max(lin.fan_in * lin.fan_out for lin in quantised_linears(a, s))
    assert e.breakdown.temporaries - estimate(a, replace(s, dequant_copies=1)).breakdown.temporaries == 12 * one
    # to_nf4: 4 bits, an int8 scaler per 64 weights and a 16-bit factor per 256 scalers (double_quantize_scalers
    # computes it in the weight's dtype) = 0.51575 B: bnb's double quantisation, 0.515875 B, within 0.03%
    assert abs((4 + 8 / 64 + 16 / (64 * 256)) / 8 - QLORA_BYTES_PER_PARAM) < 2e-4


def test_torchtunes_chunked_loss_saves_fp32_log_probs_and_frees_the_gradient_a_chunk_at_a_time():
    a = arch("llama-3.1-8b")
    s = stack_setup("torchao-qlora", batch=2, seq=512, lora_rank=8, lora_targets=("q_proj", "v_proj"))
    hf, tt = estimate(a, replace(s, loss="fp32")), estimate(a, s)
    T, V = 1024, a.vocab
    chunk = T // 8 * V
    # hf: saved T·V·4, 2·T·V·4 alive at the start of backward; torchtune: saved the same, one chunk's gradients
    assert hf.breakdown.activations == tt.breakdown.activations
    assert hf.breakdown.temporaries - tt.breakdown.temporaries == 2 * T * V * 4 - 2 * chunk * 4


def test_deepspeed_fp16_without_zero_holds_24_bytes_a_parameter_at_its_step(app):
    res, err = run(app, "--model", "gpt2-xl", "--stack", "deepspeed-fp16", "--batch", "1", "--seq", "1024",
                   "--target", "v100-32gb", "--json")
    d = json.loads(res.stdout)
    P = d["model"]["params"]
    assert err is None and d["peak_phase"] == "optimizer-step"
    assert d["breakdown"] == {"weights": 2 * P, "gradients": 2 * P, "optimizer": 12 * P, "activations": 0,
                              "temporaries": 8 * P}
    assert (d["targets"][0]["verdict"], res.exit_code) == ("does not fit", 8)
    assert any(n.startswith("DeepSpeed without ZeRO (FP16_Optimizer): fp16 weights and gradients") for n in d["notes"])


@settings(max_examples=40, deadline=None)
@given(model=st.sampled_from(LLMS), batch=st.integers(1, 4), docs=st.integers(1, 16), doc=st.integers(16, 1024),
       ckpt=st.booleans())
def test_a_packed_row_costs_the_memory_of_its_tokens_and_the_attention_of_its_documents(model, batch, docs, doc, ckpt):
    a = arch(model)
    doc = min(doc, (a.max_positions or doc * docs) // docs)
    base = Setup(attention="flash", grad_checkpointing=ckpt)
    packed = estimate(a, replace(base, batch=batch, seq=docs * doc, packed=doc))
    row = estimate(a, replace(base, batch=batch, seq=docs * doc))  # one long sequence of the same tokens
    apart = estimate(a, replace(base, batch=batch * docs, seq=doc))  # the documents as samples
    assert packed.peak_bytes == row.peak_bytes and packed.samples_tokens == row.samples_tokens
    assert packed.train_flops == apart.train_flops <= row.train_flops


@pytest.mark.parametrize(("args", "message", "hint"), [
    (("--attention", "eager"), "--packed needs flash attention, not --attention eager",
     "--attention flash (flash_attn_varlen_func keeps each document's attention apart)"),
    (("--seq", "4096", "--packed", "8192"), "--packed 8192: expected a document length from 1 to the packed row's "
     "--seq 4096", "--seq the packed length (e.g. 4096) and --packed the documents' mean length (e.g. 512)"),
])
def test_a_packed_run_it_cannot_model_is_one_error_line(app, args, message, hint):
    res, err = run(app, "--model", "llama-3.1-8b", "--packed", "512", *args, "--target", "h100")
    assert (err.message, err.hint, err.exit_code) == (message, hint, 2)


def test_packing_an_image_model_is_refused(app):
    res, err = run(app, "--model", "vit-base", "--packed", "16", "--target", "h100")
    assert (err.message, err.exit_code) == ("--packed packs token sequences; image-classification inputs are not", 2)


def test_a_packed_run_says_so_in_text_and_json(app):
    args = ("--model", "llama-3.1-8b", "--seq", "8192", "--packed", "512", "--grad-checkpointing", "--target", "h100")
    res, err = run(app, *args)
    assert err is None and ("setup    hf-trainer: bf16-mixed, adamw, micro-batch 1 × 8192 tokens packed from "
                            "512-token documents, gradient checkpointing, flash attention") in res.output
    d = json.loads(run(app, *args, "--json")[0].stdout)
    assert d["setup"]["packed"] == 512
