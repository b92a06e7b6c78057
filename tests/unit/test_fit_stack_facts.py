"""The stack facts read from the sources' code (matrices/fit_stacks.yaml cites each): bitsandbytes' kept
input and LitGPT's held graph, Lightning's NF4 plugin, LitGPT's untied head, one LoRA dropout per adapter,
ResNet's sequential BatchNorm kernels, and utilisation figures that no reference row supplied."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import yaml

from envman.app.fit import FitOptions, run_fit
from envman.fit.architectures import arch_from_config
from envman.fit.estimate import NF4_BYTES_PER_PARAM, QLORA_BYTES_PER_PARAM, Setup, activations, estimate, stack_arch

ROOT = Path(__file__).resolve().parents[2]
MODELS = {m["id"]: m for m in yaml.safe_load((ROOT / "matrices" / "models.yaml").read_text())["models"]}
QV = ("q_proj", "v_proj")


def arch(model_id: str):
    return arch_from_config(MODELS[model_id]["config"])


def litgpt(**kw) -> Setup:
    base = dict(method="qlora", precision="bf16", base_bytes=2, loss="compute", logits_held=True, lora_dropout=True,
                untied_head=True, bnb_keeps_input=True, nf4_double_quant=False, quant_head=True, dequant_copies=2,
                fused_qkv=True, prev_graph_held=True, lora_targets=QV, lora_rank=32, batch=2, seq=512)
    return Setup(**{**base, **kw})


def test_old_bitsandbytes_keeps_every_4bit_input_and_the_held_graph_makes_a_forward_end_peak():
    a = arch("llama-2-7b")
    old, new = activations(a, litgpt()), activations(a, litgpt(bnb_keeps_input=False))
    T, L, h, f = 1024, a.layers, a.hidden, a.ffn
    # per layer norm_1's output, the attention output, norm_2's output, the MLP product; and lm_head's input
    assert old.quant_inputs == L * T * (3 * h + f) * 2 + T * h * 2
    assert new.quant_inputs == 0 and old.saved - new.saved >= L * T * f * 2  # the down projection's input too
    held, dropped = estimate(a, litgpt()), estimate(a, litgpt(prev_graph_held=False))
    assert held.phase == "forward-end" and held.peak_bytes - dropped.peak_bytes > 0.9 * old.quant_inputs


def test_gradient_checkpointing_leaves_no_4bit_input_of_a_past_step():
    a = arch("llama-2-7b")
    assert estimate(a, litgpt(grad_checkpointing=True)).phase != "forward-end"


def test_lightning_nf4_quantises_the_head_without_double_quantisation_and_dequantises_twice():
    a = arch("llama-2-7b")
    hf = estimate(a, litgpt(quant_head=False, nf4_double_quant=True, dequant_copies=1, prev_graph_held=False))
    lit = estimate(a, litgpt(prev_graph_held=False))
    head = a.vocab * a.hidden
    q = a.matmul_params - head
    assert hf.weights_bytes - lit.weights_bytes == int(q * QLORA_BYTES_PER_PARAM + head * 2 + 32 * 2 * (4096 + 4096) * 32) \
        - int((q + head) * NF4_BYTES_PER_PARAM + 32 * 2 * (4096 + 4096) * 32)
    # the largest 4-bit weight is lm_head under Lightning (fp16 + bf16 copies), a projection under transformers
    assert lit.breakdown.temporaries - hf.breakdown.temporaries >= head * 2 * 2 - a.ffn * a.hidden * 2


def test_litgpt_unties_a_tied_head():
    a = arch("llama-3.2-1b")
    assert a.tied and stack_arch(a, litgpt()).params - a.params == a.vocab * a.hidden
    assert stack_arch(arch("llama-2-7b"), litgpt()) == arch("llama-2-7b")  # untied already: unchanged


def test_one_lora_dropout_per_adapter_and_litgpts_fused_qkv_has_one():
    a = arch("llama-2-7b")
    s = Setup(method="lora", precision="bf16", base_bytes=2, lora_dropout=True, lora_targets=("q_proj", "k_proj", "v_proj"),
              lora_rank=8, seq=512)
    separate, fused = activations(a, s), activations(a, replace(s, fused_qkv=True))
    assert separate.saved - fused.saved == a.layers * 2 * 512 * a.hidden * 3  # two more dropouts: output + mask
    # a frozen linear keeps no input: with dropout the adapter keeps the dropout's output instead of x
    no_drop = activations(a, replace(s, lora_dropout=False, fused_qkv=True))
    assert fused.saved - no_drop.saved == a.layers * 512 * a.hidden * (2 + 1) - a.layers * 512 * a.hidden * 2


def test_resnet_step_time_adds_the_batchnorm_kernels_to_the_convolutions():
    res = run_fit(FitOptions(model="resnet-50", precision="fp16-mixed", optimizer="sgd-momentum", batch=256,
                             targets=("a100",)))
    t, e = res.targets[0], res.estimate
    assert t.bound == "compute + memory-bandwidth" and e.elementwise_bytes > 0
    compute = e.train_flops / (t.gpu.peak_tflops("fp16") * 1e12 * t.mfu)
    assert abs(t.step_seconds - (compute + e.elementwise_bytes / t.gpu.bandwidth)) < 1e-9


def test_no_reference_row_supplies_a_utilisation_figure():
    perf = yaml.safe_load((ROOT / "matrices" / "gpu_perf.yaml").read_text())["utilisation"]
    runs = yaml.safe_load((ROOT / "tests" / "reference" / "runs.yaml").read_text())["runs"]
    sources = " ".join(g["source"] for g in perf["generations"])
    used = {r["source"].split(" (")[0].split("@")[0] for r in runs if r["kind"] == "throughput"}
    assert not any(u in sources for u in used), used & set(sources.split())
    assert not any(r.get("calibrates") for r in runs)
