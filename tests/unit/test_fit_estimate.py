"""envman fit's pure core: parameter counts from configs, the step's bytes, levers. No torch, no files but models.yaml."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from envman.fit.architectures import ArchError, arch_from_config
from envman.fit.estimate import accumulation_steps, estimate, max_micro_batch
from envman.fit.runspec import Setup, SetupError

ROOT = Path(__file__).resolve().parents[2]
MODELS = {m["id"]: m for m in yaml.safe_load((ROOT / "matrices" / "models.yaml").read_text())["models"]}


@pytest.mark.parametrize("model_id", sorted(MODELS))
def test_parameter_count_matches_the_published_one(model_id):
    entry = MODELS[model_id]
    arch = arch_from_config(entry["config"])
    assert abs(arch.params - entry["params"]) / entry["params"] <= 0.02, (arch.params, entry["params"])


def test_unknown_model_type_names_the_supported_ones():
    with pytest.raises(ArchError, match=r"model_type: 't5' is not supported \(supported: gpt2, llama"):
        arch_from_config({"model_type": "t5"})


def test_bad_config_values_are_all_reported_with_their_keys():
    with pytest.raises(ArchError) as exc:
        arch_from_config({"model_type": "llama", "hidden_size": -1, "vocab_size": "many"})
    assert exc.value.problems == [
        "hidden_size: expected a positive integer, got -1",
        "num_hidden_layers: missing",
        "num_attention_heads: missing",
        "vocab_size: expected a positive integer, got 'many'",
        "intermediate_size: missing",
    ]


def llama8b():
    return arch_from_config(MODELS["llama-3.1-8b"]["config"])


def test_weights_gradients_and_adam_state_follow_the_zero_paper_for_mixed_precision():
    # PyTorch AMP keeps fp32 weights (4), fp32 grads (4) and two fp32 Adam moments (8): 16 B/param,
    # the ZeRO paper's 2 + 2 + 12 with the fp16 copies replaced by autocast's transient casts.
    est = estimate(llama8b(), Setup(precision="bf16-mixed", optimizer="adamw", batch=1, seq=512))
    p = 8_030_261_248
    assert est.params == p
    assert est.weights_bytes == 4 * p
    assert est.checkpoint_bytes == 12 * p


def test_activations_grow_linearly_with_batch_and_gradient_checkpointing_cuts_them():
    arch = arch_from_config(MODELS["gpt2"]["config"])
    one = estimate(arch, Setup(precision="fp32", batch=4, seq=512)).breakdown.activations
    two = estimate(arch, Setup(precision="fp32", batch=8, seq=512)).breakdown.activations
    assert two == pytest.approx(2 * one, rel=0.01)
    ck = estimate(arch, Setup(precision="fp32", batch=8, seq=512, grad_checkpointing=True))
    assert ck.peak_bytes < 0.5 * estimate(arch, Setup(precision="fp32", batch=8, seq=512)).peak_bytes


def test_lora_trains_only_the_adapters():
    est = estimate(llama8b(), Setup(method="lora", precision="bf16", lora_rank=16,
                                    lora_targets=("q_proj", "v_proj"), batch=1, seq=512))
    # q: 16·(4096+4096), v: 16·(4096+1024), 32 layers
    assert est.trainable_params == 32 * 16 * (4096 + 4096 + 4096 + 1024)


def test_lora_targets_that_match_nothing_name_the_layers_there_are():
    with pytest.raises(SetupError, match=r"matches no layer of this model \(its linear layers: .*q_proj"):
        estimate(llama8b(), Setup(method="lora", lora_targets=("query",)))


def test_qlora_weights_are_about_half_a_byte_per_parameter():
    est = estimate(llama8b(), Setup(method="qlora", precision="bf16", batch=1, seq=512))
    assert 0.55 * 8.03e9 < est.weights_bytes < 0.8 * 8.03e9  # 4-bit linears, bf16 embeddings and head


def test_zero3_splits_the_model_states():
    base = Setup(precision="bf16-mixed", batch=1, seq=1024, grad_checkpointing=True)
    one = estimate(llama8b(), replace(base, gpus=8, shard="ddp"))
    z3 = estimate(llama8b(), replace(base, gpus=8, shard="zero3"))
    assert z3.peak_bytes < one.peak_bytes / 3


def test_max_micro_batch_is_the_largest_that_fits():
    arch = arch_from_config(MODELS["gpt2"]["config"])
    s = Setup(precision="bf16-mixed", seq=1024)
    budget = 20 * 2**30
    b = max_micro_batch(arch, s, budget)
    assert b > 0
    assert estimate(arch, replace(s, batch=b)).peak_bytes <= budget < estimate(arch, replace(s, batch=b + 1)).peak_bytes


def test_accumulation_steps_reach_the_global_batch():
    assert accumulation_steps(256, 8, 4) == 8
    assert accumulation_steps(250, 8, 4) == 8
    assert accumulation_steps(None, 8, 4) is None


def test_each_lever_saves_exactly_the_difference_of_two_estimates():
    from envman.fit.advice import rank_levers

    arch = llama8b()
    setup = Setup(precision="bf16-mixed", batch=4, seq=2048)
    base = estimate(arch, setup)
    budget = int(24 * 2**30 * 0.9)
    levers = rank_levers(arch, setup, base, budget)
    assert levers[0].lever.startswith("cheapest fit: ") and levers[0].fits and levers[0].peak_bytes <= budget
    for lv in levers:
        assert lv.saves_bytes == base.peak_bytes - lv.peak_bytes > 0
        assert lv.cost
    singles = [lv.saves_bytes for lv in levers[1:]]
    assert singles == sorted(singles, reverse=True)


def test_flash_attention_drops_the_quadratic_term():
    arch = arch_from_config(MODELS["gpt2"]["config"])
    from envman.fit.activations import activations

    def saved(s, attention):  # transformer blocks only: the LM head's b·s·V terms are linear either way
        return activations(arch, Setup(precision="bf16-mixed", batch=1, seq=s, attention=attention)).per_layer

    eager = [saved(s, "eager") for s in (512, 1024)]
    flash = [saved(s, "flash") for s in (512, 1024)]
    assert eager[1] / eager[0] > 2.3  # s² probabilities
    assert flash[1] / flash[0] == pytest.approx(2.0, rel=0.01)  # linear in s


# --- issue 22: stacks, families, the ZeRO arithmetic --------------------------------------------------------
def test_zero1_and_zero2_follow_deepspeeds_code():
    # stage_1_and_2.py: the fp32 gradient partition (4Ψ/N) is made in step() and freed after it; stage 1 keeps
    # the whole 16-bit gradients until the step (4Ψ + 16Ψ/N at the step, DeepSpeed's estimator); stage 2 frees
    # the gradients outside this rank's partition bucket by bucket: 2Ψ/N + the bucket + a larger parameter
    from envman.fit.states import model_states

    arch = llama8b()
    P = arch.params
    for shard, bucket in (("zero1", 0), ("zero2", 0), ("zero2", 500_000_000)):
        setup = Setup(precision="bf16-mixed", deepspeed=True, shard=shard, gpus=8, batch=1, seq=512, reduce_bucket=bucket)
        weights, grads, opt, step_tmp, gathered, _, _ = model_states(arch, setup, P)
        assert weights == 2 * P and opt == int(12 * P / 8) and step_tmp == 4 * P // 8 and gathered == 0
        if shard == "zero2" and bucket:
            head = arch.vocab * arch.hidden  # 525M elements > the 5e8 bucket: reduced by itself
            assert grads == 2 * P // 8 + (bucket + head) * 2
        else:
            assert grads == 2 * P  # no bucket given: DeepSpeed's estimator (4Ψ + 16Ψ/N at the step)
        step = estimate(arch, setup)
        assert step.peak_bytes >= weights + grads + opt + step_tmp


def test_zero3_with_params_only_does_not_gather_the_model_twice():
    from envman.fit.architectures import params_from_count

    est = estimate(params_from_count(70_000_000_000), Setup(precision="bf16-mixed", deepspeed=True, shard="zero3", gpus=8))
    assert est.peak_bytes <= 18 * 70e9 / 8 * 1.01  # 18Ψ/N, no phantom "layer" of the whole model


def test_gradient_accumulation_keeps_gradients_alive():
    arch = arch_from_config(MODELS["gpt2"]["config"])
    one = estimate(arch, Setup(precision="fp32", batch=8, seq=512, accumulation=1))
    acc = estimate(arch, Setup(precision="fp32", batch=8, seq=512, accumulation=4))
    assert one.phase == acc.phase == "backward-start"
    assert acc.breakdown.gradients == acc.trainable_params * 4 and acc.peak_bytes - one.peak_bytes == acc.trainable_params * 4


def test_a_mixtral_relabelled_mistral_is_still_a_mixture_of_experts():
    cfg = dict(MODELS["mixtral-8x7b"]["config"], model_type="mistral")
    arch = arch_from_config(cfg)
    assert arch.variant == "moe" and arch.params == MODELS["mixtral-8x7b"]["params"]
    assert abs(arch.active_params - 12.9e9) / 12.9e9 < 0.02  # 2 of 8 experts per token


def test_a_diffusers_class_envman_does_not_model_is_refused_with_a_pointer_to_params():
    with pytest.raises(ArchError, match=r"not a diffusion denoiser .* --params N"):
        arch_from_config({"_class_name": "UVit2DModel", "_diffusers_version": "0.30.0"})


def test_a_classification_head_comes_from_architectures():
    cfg = dict(MODELS["bert-large"]["config"], architectures=["BertForSequenceClassification"])
    arch = arch_from_config(cfg)
    assert arch.task == "sequence-classification" and arch.params < arch_from_config(MODELS["bert-large"]["config"]).params


def test_qlora_via_peft_keeps_embeddings_and_head_in_fp32():
    arch = llama8b()
    peft = estimate(arch, Setup(method="qlora", precision="bf16-mixed", base_bytes=2, kbit_fp32_extras=True, seq=512))
    plain = estimate(arch, Setup(method="qlora", precision="bf16-mixed", base_bytes=2, seq=512))
    # embed + lm_head (+ the norms): 4 B instead of 2
    assert peft.weights_bytes - plain.weights_bytes == pytest.approx(2 * 128256 * 4096 * 2, rel=1e-3)


# --- fourth round: DeepSpeed's 16-bit module and the gathered layers of sharded LoRA/QLoRA --------------------
def test_deepspeed_lora_keeps_the_frozen_base_in_16_bit_and_masters_only_the_adapters():
    # deepspeed/runtime/engine.py _configure_distributed_model: bf16 → self.module.bfloat16() (the frozen base and
    # the adapters alike); stage3.py _get_trainable_parameter_groups: fp32 master + moments for requires_grad only
    from envman.fit.runspec import count_trainable

    arch = llama8b()
    for shard, n in (("zero3", 8), ("zero2", 4)):
        setup = Setup(precision="bf16-mixed", deepspeed=True, shard=shard, gpus=n, method="lora", lora_rank=8,
                      batch=1, seq=512)
        est = estimate(arch, setup)
        t = count_trainable(arch, setup)
        module = (arch.params + t) * 2  # every parameter, frozen or not, in 16 bits
        assert est.breakdown.weights == (module // n if shard == "zero3" else module)
        assert est.breakdown.optimizer == int(t * (4 + 8) / n)  # ZeRO-1/2's fp32 gradient partition: in step() only


def test_sharded_lora_gathers_no_gradient_for_frozen_weights_and_qlora_gathers_packed_nf4():
    from envman.fit.runspec import QLORA_BYTES_PER_PARAM
    from envman.fit.states import gathered_layers

    arch = llama8b()
    layer = (arch.params - arch.embedding_params - arch.vocab * arch.hidden) // arch.layers
    full = Setup(precision="bf16-mixed", shard="fsdp", gpus=8)
    assert gathered_layers(arch, full, arch.params, layer, 2, 4) == 2 * layer * 2 + layer * 4
    lora = replace(full, method="lora")
    assert gathered_layers(arch, lora, 32 * 10**6, layer, 2, 4) == 2 * layer * 2 + 10**6 * 4  # adapters' grads only
    qlora = gathered_layers(arch, replace(full, method="qlora"), 0, layer, 2, 4)
    assert 2 * layer * QLORA_BYTES_PER_PARAM < qlora < 2 * layer * 0.6  # the NF4 storage, not a 16-bit copy


def test_flux_counts_the_t5_tokens_the_run_gives():
    # diffusers' Flux scripts: --max_sequence_length (default 512) T5 tokens join the image tokens in every block
    from envman.fit.catalog import _entry_arch

    arch = _entry_arch(MODELS["flux.1-dev"])
    setup = Setup(precision="bf16-mixed", method="lora", image_size=512, grad_checkpointing=True,
                  lora_targets=("to_q", "to_k", "to_v", "to_out.0"))
    short, default = (estimate(arch, replace(setup, seq=s)).breakdown.activations for s in (77, None))
    assert short < default
    assert estimate(arch, replace(setup, seq=512)).breakdown.activations == default


# --- issue 41.1: basic-block ResNets (ResNet-18/34) -------------------------------------------------------------------
@pytest.mark.parametrize("depths, params", [([2, 2, 2, 2], 11_689_512), ([3, 4, 6, 3], 21_797_672)])
def test_basic_block_resnets_count_torchvisions_parameters(depths, params):
    # microsoft/resnet-18 and -34 configs; torchvision.models.resnet18/34 print these counts
    from envman.fit.architectures import arch_from_config
    from envman.fit.estimate import estimate
    from envman.fit.runspec import Setup

    cfg = {"model_type": "resnet", "num_channels": 3, "embedding_size": 64, "hidden_sizes": [64, 128, 256, 512],
           "depths": depths, "layer_type": "basic", "num_labels": 1000}
    arch = arch_from_config(cfg)
    assert arch.params == params and arch.variant == "basic" and not arch.validated
    est = estimate(arch, Setup(batch=32, image_size=224, precision="fp32", optimizer="sgd-momentum"))
    deeper = estimate(arch_from_config({**cfg, "depths": [d + 1 for d in depths]}),
                      Setup(batch=32, image_size=224, precision="fp32", optimizer="sgd-momentum"))
    assert 0 < est.breakdown.activations < deeper.breakdown.activations and est.train_flops < deeper.train_flops


def test_an_unknown_resnet_layer_type_names_the_two_it_knows():
    from envman.fit.architectures import ArchError, arch_from_config

    with pytest.raises(ArchError) as e:
        arch_from_config({"model_type": "resnet", "hidden_sizes": [64], "depths": [2], "layer_type": "preact"})
    assert e.value.problems == ["layer_type: expected 'bottleneck' (ResNet-50 and deeper) or 'basic' (ResNet-18/34), "
                                "got 'preact'"]


# --- issue 41.5: a small transformer's memory-bound kernels are not at the large-matmul utilisation -----------------
def _step_over_matmul(model_cfg_or_name, **setup):
    from envman.app.fit import FitOptions, run_fit
    from envman.fit.catalog import utilisation

    res = run_fit(FitOptions(model=model_cfg_or_name, targets=("a100",), **setup))
    t = res.targets[0]
    util = utilisation(t.gpu.cc, "bf16")[0]
    matmul = res.estimate.train_flops / (t.gpu.peak_tflops("bf16") * 1e12 * util)
    return t.step_seconds / matmul, t.bound


def test_a_small_transformers_elementwise_kernels_add_to_its_step_a_large_ones_barely(tmp_path):
    tiny = tmp_path / "vit-ti.json"  # ViT-Ti/16 (timm vit_tiny_patch16_224): hidden 192, 12 layers, 3 heads
    tiny.write_text('{"model_type": "vit", "hidden_size": 192, "num_hidden_layers": 12, "num_attention_heads": 3, '
                    '"intermediate_size": 768, "image_size": 224, "patch_size": 16, "num_labels": 1000}')
    small, bound = _step_over_matmul(str(tiny), batch=256, precision="bf16-mixed")
    large, _ = _step_over_matmul("llama-3.1-8b", batch=1, seq=2048, precision="bf16-mixed")
    assert bound == "compute + memory-bandwidth"
    # the large model: its own share is the measured run's, which the utilisation already holds
    assert small > 1.3 and 0.97 < large < 1.03, (small, large)


# --- issue 41.1: activation offloading (torchtune's OffloadActivations) ---------------------------------------------
def test_activation_offload_keeps_the_loss_and_the_stash_of_the_latest_saved_tensors():
    from envman.app.fit import FitOptions, estimate_run
    from envman.fit.estimate import OFFLOAD_STASH

    kw = dict(model="llama-3.1-8b", batch=4, seq=4096, precision="bf16", optimizer="sgd")
    _, _, arch, _, _, eager = estimate_run(FitOptions(**kw))
    _, _, _, _, _, off = estimate_run(FitOptions(**kw, activation_offload=True))
    T = 4 * 4096
    loss = T * arch.vocab * 4  # transformers' fp32 log-softmax, left on the GPU
    assert off.phase == "backward-start"
    assert off.breakdown.activations == loss + OFFLOAD_STASH * T * max(arch.hidden, arch.ffn) * 2
    assert off.peak_bytes < eager.peak_bytes


def test_activation_offload_is_refused_where_it_is_not_modelled():
    from envman.app.fit import FitOptions, estimate_run
    from envman.errors import UsageError

    with pytest.raises(UsageError) as e:
        estimate_run(FitOptions(model="resnet-50", activation_offload=True))
    assert e.value.message == "--activation-offload is modelled for transformer blocks, not resnet"


def test_a_compiled_llama_layer_keeps_the_matmuls_inputs_and_outputs_and_recomputes_the_rest():
    # torch/_functorch/partitioners.py (pytorch/pytorch@c28ba8e5893e): pointwise ops and casts are recomputed,
    # matmul inputs (read by non-fusible backward ops) and norm statistics are saved; autocast's per-linear casts
    # are one after the graph's CSE. Under bf16 autocast (fp32 residual): each RMSNorm drops its fp32 copy and
    # normalised output for the residual itself (4·T·h), q/k/v share one cast (2·T·h·2) and gate/up one (T·h·2),
    # SiLU's output goes (T·f·2)
    from envman.fit.activations import activations

    arch, setup = llama8b(), Setup(precision="bf16-mixed", batch=1, seq=512, attention="flash")
    eager, compiled = activations(arch, setup), activations(arch, replace(setup, compile=True))
    T, h, f = 512, arch.hidden, arch.ffn
    assert eager.per_layer - compiled.per_layer == 2 * 4 * T * h + 2 * T * h * 2 + T * h * 2 + T * f * 2
    # the loss in the graph: the bf16 logits and two fp32 numbers per row instead of the fp32 log-softmax
    V = arch.vocab
    assert (compiled.loss_saved, compiled.loss_transient) == (T * V * 2 + T * 8, T * V * 2)
    blocks = activations(arch, replace(setup, compile=True, compile_scope="blocks"))  # torchtitan: blocks only
    assert (blocks.loss_saved, blocks.per_layer) == (eager.loss_saved, compiled.per_layer)
