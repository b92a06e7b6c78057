"""The stack facts read from the sources' code (matrices/fit_stacks.yaml cites each): bitsandbytes' kept
input and LitGPT's held graph, Lightning's NF4 plugin, LitGPT's untied head, one LoRA dropout per adapter,
ResNet's sequential BatchNorm kernels, and utilisation figures that no reference row supplied."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import yaml

from envman.app.fit import FitOptions, run_fit
from envman.fit.activations import activations
from envman.fit.architectures import arch_from_config
from envman.fit.estimate import _recomputation, estimate, stack_arch
from envman.fit.runspec import NF4_BYTES_PER_PARAM, QLORA_BYTES_PER_PARAM, Setup, count_trainable
from envman.fit.states import model_states

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
    # two more dropouts (output + mask), less the fused qkv output SDPA's v keeps alive (MHA: its q and k parts)
    assert separate.saved - fused.saved == a.layers * 2 * 512 * a.hidden * 3 - a.layers * 2 * 512 * a.hidden * 2
    # a frozen linear keeps no input: with dropout the adapter keeps the dropout's output instead of x
    no_drop = activations(a, replace(s, lora_dropout=False, fused_qkv=True))
    assert fused.saved - no_drop.saved == a.layers * 512 * a.hidden * (2 + 1) - a.layers * 512 * a.hidden * 2


def _lora(**kw) -> Setup:
    base = dict(method="lora", precision="bf16", base_bytes=2, lora_targets=("q_proj", "k_proj", "v_proj"), lora_rank=8,
                seq=512, attention="flash")
    return Setup(**{**base, **kw})


def test_litgpts_fused_qkv_keeps_what_its_reshapes_keep():
    """LitGPT's attention: k (and v for grouped queries) expanded to the query heads by a copying reshape; for
    MHA/MQA v is a view of the fused output, so SDPA's saved v keeps all of it (litgpt/model.py)."""
    T = 512
    for model, extra in (("llama-2-7b", lambda a: 2 * a.heads * a.head_dim),  # MHA: the q and k parts of qkv
                         ("llama-3-8b", lambda a: 2 * (a.heads - a.kv_heads) * a.head_dim),  # GQA: k, v expanded
                         ("gemma-2b", lambda a: 2 * a.heads * a.head_dim)):  # MQA: k copied, v a view of qkv
        a = arch(model)
        diff = activations(a, _lora(fused_qkv=True)).saved - activations(a, _lora()).saved
        assert diff == a.layers * T * extra(a) * 2, model
    # eager attention counts k and v at the query heads already: grouped queries add nothing more
    g = arch("gemma-2-2b")
    assert activations(g, _lora(fused_qkv=True, attention="eager")).saved == activations(g, _lora(attention="eager")).saved


def test_litgpt_lora_on_q_and_v_only_keeps_index_copys_source():
    """zero_pad's index_copy keeps its source (PyTorch saves it for expand_as): the B output over q and v."""
    a, T = arch("llama-3-8b"), 512
    hq, kv = a.heads * a.head_dim, a.kv_heads * a.head_dim
    qv, qkv = _lora(fused_qkv=True, lora_targets=QV), _lora(fused_qkv=True)
    qv_plain, qkv_plain = _lora(lora_targets=QV), _lora()
    partial = activations(a, qv).saved - activations(a, qv_plain).saved
    whole = activations(a, qkv).saved - activations(a, qkv_plain).saved
    assert partial - whole == a.layers * T * (hq + kv) * 2


def test_lit_gpt_2023_rmsnorm_keeps_the_bf16_residual_not_an_fp32_copy():
    a, T = arch("llama-2-7b"), 512
    upcast, plain = activations(a, _lora()), activations(a, _lora(norm_upcast=False))
    per_norm = T * a.hidden * 4 + T * 4 - (T * a.hidden * 2 + T * 2)
    assert upcast.saved - plain.saved == (2 * a.layers + 1) * per_norm  # two per block and the final norm


def test_fsdp1_no_sync_accumulates_unsharded_gradients():
    """Lightning Fabric's no_backward_sync is FSDP1's no_sync(): full gradients on every rank until the sync."""
    a = arch("gemma-2b")
    s = Setup(method="full", precision="bf16", shard="fsdp", gpus=4, grad_checkpointing=True, batch=1, seq=512,
              accumulation=4, untied_head=True, fsdp_root_unsharded=True, loss="compute", attention="flash")
    synced, no_sync = estimate(a, s), estimate(a, replace(s, fsdp_no_sync=True))
    P = stack_arch(a, s).params
    assert no_sync.breakdown.gradients == P * 2 and synced.breakdown.gradients < P * 2 // 3
    assert estimate(a, replace(s, fsdp_no_sync=True, accumulation=1)).peak_bytes == \
        estimate(a, replace(s, accumulation=1)).peak_bytes  # without accumulation there is nothing to accumulate


def test_the_fsdp_root_unit_holds_an_untied_head_not_the_blocks():
    a = stack_arch(arch("gemma-2b"), Setup(untied_head=True))
    s = Setup(method="full", precision="bf16", shard="fsdp", gpus=4, fsdp_root_unsharded=True, seq=512)
    *_, gathered, _casts, _notes = model_states(a, s, count_trainable(a, s))
    layer = (a.params - 2 * a.vocab * a.hidden) // a.layers
    root = a.params - a.layers * layer
    assert root >= 2 * a.vocab * a.hidden and gathered == 2 * layer * 2 + layer * 2 + root * (2 + 2)


def test_torchtitans_op_policy_saves_the_odd_matmuls_of_a_block():
    """Its policy counts mm calls per block and saves the odd ones: wq, wv, w1, w2 (wq wk wv wo w1 w3 w2)."""
    a, T = arch("llama-3.1-8b"), 2 * 8192
    s = Setup(method="full", precision="bf16-mixed", shard="fsdp", gpus=8, batch=2, seq=8192, attention="flash",
              selective_ckpt=True)
    acts, _, _ = _recomputation(a, s, activations(a, s), 2)
    hq, kv = a.heads * a.head_dim, a.kv_heads * a.head_dim
    assert acts.per_layer == T * a.hidden * 2 + T * hq * 2 + T * a.heads * 4 + T * (hq + kv + a.ffn + a.hidden) * 2


def test_litgpt_double_quantisation_is_the_nf4_dq_option():
    kw = dict(model="llama-2-7b", stack="litgpt", method="qlora", lora_rank=8, lora_targets=QV, batch=1, seq=1304,
              targets=("a100-40gb",))
    nf4, dq = run_fit(FitOptions(**kw)), run_fit(FitOptions(**kw, double_quant=True))
    a = arch("llama-2-7b")
    assert nf4.estimate.weights_bytes - dq.estimate.weights_bytes == \
        int(a.matmul_params * NF4_BYTES_PER_PARAM + (a.params - a.matmul_params) * 2 + 4194304 * 2) \
        - int(a.matmul_params * QLORA_BYTES_PER_PARAM + (a.params - a.matmul_params) * 2 + 4194304 * 2)


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


def peft_qlora(**kw) -> Setup:
    base = dict(method="qlora", precision="bf16-mixed", base_bytes=2, kbit_fp32_extras=True, grad_checkpointing=True,
                optimizer="paged-adamw", attention="flash", lora_rank=32, batch=2, seq=4096,
                lora_targets=("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"))
    return Setup(**{**base, **kw})


def test_transformers_2024_loss_copies_the_shifted_logits_and_peaks_in_the_loss_forward():
    # transformers 4.46.0-4.48.x ForCausalLMLoss: bf16 logits (the output), logits.float(), the contiguous shifted
    # copy and log_softmax's output alive at once: 14 bytes per token per vocabulary entry, 2 more than the 12 at
    # the start of backward (the saved output and its two fp32 gradients)
    a = arch("llama-3.1-8b")
    T, V = 2 * 4096, a.vocab
    old, today = estimate(a, peft_qlora(loss_shift_copy=True)), estimate(a, peft_qlora())
    assert old.phase == "loss" and today.phase == "backward-start"
    assert activations(a, peft_qlora(loss_shift_copy=True)).loss_forward == T * V * (2 + 4 + 4)
    assert activations(a, peft_qlora()).loss_forward == T * V * (2 + 4)
    extra = old.peak_bytes - today.peak_bytes
    assert T * V * 2 - 200 * 2**20 < extra <= T * V * 2  # less the dequantised weight the loss moment lacks


def test_one_sample_has_no_shifted_copy():
    # logits[..., :-1, :] of a (1, s, V) tensor is contiguous (a size-1 dim's stride does not count), so
    # .contiguous() returns it: with batch 1 the 2024 loss is today's (a CPU trace of transformers 4.47.0:
    # 12.3 bytes per token per vocabulary entry at batch 1, 14.2 at batch 2; 4.45.2 and 5.24.0: 12.3 and 12.2 —
    # bench/trace_fit_loss.py)
    a = arch("llama-3.1-8b")
    one, two = dict(batch=1, seq=8192), dict(batch=2, seq=4096)
    assert activations(a, peft_qlora(loss_shift_copy=True, **one)).loss_forward == 8192 * a.vocab * 6
    assert estimate(a, peft_qlora(loss_shift_copy=True, **one)).peak_bytes == estimate(a, peft_qlora(**one)).peak_bytes
    assert estimate(a, peft_qlora(loss_shift_copy=True, **two)).peak_bytes > estimate(a, peft_qlora(**two)).peak_bytes


def test_fp32_logits_need_no_upcast_copy():
    a = arch("llama-3.2-1b")
    assert activations(a, Setup(precision="fp32", batch=2, seq=512)).loss_forward == 1024 * a.vocab * 4
    assert activations(a, Setup(precision="fp32", batch=2, seq=512, loss_shift_copy=True)).loss_forward == 1024 * a.vocab * 8


def test_the_2024_stack_is_what_the_unsloth_rows_run():
    runs = yaml.safe_load((ROOT / "tests" / "reference" / "runs.yaml").read_text())["runs"]
    stacks = {r["envman"]["stack"] for r in runs if r["id"].startswith("unsloth-hf-")}
    assert stacks == {"peft-qlora-2024"}
    from envman.fit.stacks import load_stacks

    shipped = load_stacks(str(ROOT / "matrices"))
    assert shipped["peft-qlora-2024"].get("loss_shift_copy") is True
    assert not shipped["peft-qlora"].get("loss_shift_copy")  # today's transformers pads the labels instead
    assert "4.46" in shipped["peft-qlora-2024"].source and "loss_utils.py" in shipped["peft-qlora-2024"].source


# when the loop frees the gradients (docs/fit-allocator.md; runspec.ZERO_GRAD)
def _vit(**kw) -> Setup:
    return Setup(**{**dict(precision="bf16", batch=16, image_size=224, attention="flash"), **kw})


def test_zero_grad_after_the_forward_keeps_the_last_steps_gradients_through_the_forward():
    # rasbt/pytorch-memory-optim@2d1ae1e747fe 04_lower-batchsize.py: logits = model(x); loss; zero_grad(); backward
    a = arch("vit-large")
    usual, late = estimate(a, _vit()), estimate(a, _vit(zero_grad="before-backward"))
    assert late.phase == "forward-end"
    assert late.breakdown.gradients == count_trainable(a, _vit()) * 2  # bf16 gradients, all of them
    assert late.peak_bytes > usual.peak_bytes and usual.breakdown.gradients == 0
    assert any("after the forward" in n for n in late.notes)


def test_gradients_never_freed_count_as_accumulated_ones():
    # zero_grad(set_to_none=False), PyTorch < 2.0's default: zeroed in place, alive all step, as under accumulation
    for model, setup in (("vit-large", _vit()), ("bert-large", Setup(precision="fp32", batch=4, seq=512)),
                         ("resnet-50", Setup(precision="fp32", batch=32, image_size=224))):
        a = arch(model)
        kept = estimate(a, replace(setup, zero_grad="keep"))
        accumulated = estimate(a, replace(setup, accumulation=2))
        assert kept.peak_bytes == accumulated.peak_bytes > estimate(a, setup).peak_bytes, model
        assert kept.breakdown.gradients == count_trainable(a, setup) * (2 if setup.precision == "bf16" else 4)


def test_an_unknown_zero_grad_is_refused_and_the_default_changes_nothing():
    import pytest

    from envman.fit.runspec import SetupError

    with pytest.raises(SetupError, match="--zero-grad 'sometimes' is not one of before-forward"):
        estimate(arch("vit-large"), _vit(zero_grad="sometimes"))
    res = run_fit(FitOptions(model="vit-large", stack="torch-amp", precision="bf16", batch=16, image_size=224,
                             targets=("a100-sxm4-80gb",), zero_grad="before-backward"))
    assert res.estimate.setup.zero_grad == "before-backward" and res.estimate.phase == "forward-end"
    assert run_fit(FitOptions(model="vit-large", batch=16, targets=("a100-sxm4-80gb",))).estimate.setup.zero_grad \
        == "before-forward"


def test_a_cnns_backward_never_counts_fewer_gradients_than_are_held():
    from envman.fit.estimate import _cnn_backward
    from envman.fit.runspec import Breakdown

    a, s = arch("resnet-50"), Setup(precision="fp32", batch=32, image_size=224)
    acts, grads = activations(a, s), a.params * 4
    worst = _cnn_backward(acts, Breakdown(0, 0, 0, 0, 0), grads, a.params, 0, held=grads)
    assert worst.gradients == grads


def test_tensor_and_pipeline_parallel_split_the_flops_so_the_rate_per_gpu_holds():
    # a tp x pp group computes one micro-batch together: each GPU does 1/(tp*pp) of its FLOPs, and the group's
    # tokens are shared by tp*pp GPUs, so the compute-bound rate per GPU is the one-GPU rate (no bubble, no
    # communication modelled); envman had divided the rate by tp*pp twice (8x low for TP 2 x PP 4)
    kw = dict(model="llama-3.1-70b", stack="fsdp2", batch=1, seq=4096, attention="flash", targets=("h100",))
    one = run_fit(FitOptions(**kw, gpus=8))
    split = run_fit(FitOptions(**{**kw, "stack": None}, shard="none", gpus=8, tp=2, pp=4))
    assert split.estimate.train_flops * 8 == one.estimate.train_flops
    assert one.targets[0].bound == split.targets[0].bound == "compute + memory-bandwidth"  # norms, adds: issue 41.5
    assert abs(split.targets[0].throughput / one.targets[0].throughput - 1) < 1e-9


def test_zero3_keeps_a_16_bit_gradient_partition_and_upcasts_one_sub_group_in_step():
    # stage3.py: grad_partitions_flat_buffer is in gradient_accumulation_dtype (engine.get_data_types: the model's
    # 16-bit dtype unless data_types.grad_accum_dtype is set), allocated for the whole partition at init; step()
    # makes an fp32 copy of one sub-group's gradients at a time (sub_group_size; the shipped stack: 1e9)
    a, n = arch("llama-3.1-8b"), 8
    P = a.params
    for sub_group, tmp in ((1_000_000_000, 4 * 1_000_000_000), (2_000_000_000, 4 * (P // n))):  # P/8 ≈ 1.004e9
        setup = Setup(precision="bf16-mixed", deepspeed=True, shard="zero3", gpus=n, batch=1, seq=512, sub_group=sub_group)
        weights, grads, opt, step_tmp, gathered, _, _ = model_states(a, setup, P)
        assert weights == 2 * P // n and grads == 2 * P // n and opt == int(12 * P / n) and step_tmp == tmp
        assert estimate(a, setup).peak_bytes >= weights + grads + opt + step_tmp


def test_zero3_keeps_the_head_gathered_from_its_forward_to_its_backward_with_its_gradient():
    # partitioned_param_coordinator.py __params_to_release: a parameter reused within stage3_max_reuse_distance
    # elements is not released, and the head's backward follows its forward; its gradient, larger than the
    # reduce bucket, is reduced on its own: 4 bytes per element of the largest tensor while the loss runs
    from envman.fit.states import _deepspeed_states

    a = arch("qwen2.5-14b")
    head = a.vocab * a.hidden
    setup = Setup(precision="bf16-mixed", deepspeed=True, shard="zero3", gpus=8, batch=1, seq=512)
    layer = (a.params - a.embedding_params - head) // a.layers
    gathered = _deepspeed_states(a, setup, a.params, 1, 8, layer)[3]
    assert head > layer and gathered == 4 * head
    lora = replace(setup, method="lora", lora_targets=QV)  # a frozen head: no gradient, the two layers as before
    assert _deepspeed_states(a, lora, count_trainable(a, lora), 1, 8, layer)[3] == 4 * layer
    # a frozen backbone (method freeze) trains its head only: a ViT's classifier, not its 4096 × 1024 MLP linears
    from envman.fit.states import largest_trained as _largest_trained

    vit = arch("vit-large")
    head = vit.linears[-1].fan_in * vit.linears[-1].fan_out
    assert _largest_trained(vit, Setup(method="freeze")) == head < _largest_trained(vit, Setup(method="full"))


def test_a_checkpointed_vit_keeps_every_layers_input_for_every_patch():
    # torch.utils.checkpoint keeps each EncoderBlock's input: (batch, patches + 1, hidden) in the residual dtype.
    # A ViT counts its throughput in images (Acts.tokens = batch), which had made this b·hidden per layer
    a = arch("vit-large")  # 224 px, 16 px patches: 197 positions
    s = _vit(precision="fp32", batch=64, grad_checkpointing=True)
    acts = activations(a, replace(s, grad_checkpointing=False))
    _, kept, _ = _recomputation(a, s, acts, 4)
    assert (acts.tokens, acts.unit, acts.positions) == (64, "images", 64 * 197)
    inputs = a.layers * 64 * 197 * a.hidden * 4  # 1.24 GB
    assert inputs <= kept < inputs + acts.saved - a.layers * acts.per_layer + 1
