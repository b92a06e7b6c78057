"""How many bytes one training step needs on each GPU. PURE: dataclasses in, dataclasses out.

The peak of a step is the largest of three moments (measured the same way in bench/trace_fit.py):

1. start of backward: weights + optimizer state + every tensor autograd saved in the forward + the loss's
   gradient temporaries (for a language model the log-softmax over the vocabulary, b·s·V fp32, 3× at once);
2. during backward: saved tensors not yet freed + gradients produced so far + (with recomputation) one
   layer's recomputed activations;
3. optimizer step: weights + gradients + optimizer state + the optimizer's temporaries (PyTorch's default
   foreach AdamW builds a parameter-sized list for sqrt(v)).

This module puts runspec, activations and states together at those moments, with recomputation and
accumulation, and finds the largest micro-batch that fits.
"""

from __future__ import annotations

import math
from dataclasses import replace

from envman.fit.activations import Acts, act_bytes, activations
from envman.fit.architectures import Arch
from envman.fit.runspec import (
    NF4_BYTES_PER_PARAM,
    QLORA_BYTES_PER_PARAM,
    Breakdown,
    Estimate,
    Setup,
    count_trainable,
    default_seq,
    dtype_bytes,
    trainable_linears,
    validate,
)
from envman.fit.states import largest_trained, model_states, quantised_linears, state_bytes


def _recomputation(arch: Arch, setup: Setup, acts: Acts, c: int) -> tuple[Acts, int, int]:
    """(activations after selective recomputation, bytes kept after the forward, one layer's recompute)."""
    if setup.selective_ckpt and not setup.grad_checkpointing and setup.attention == "eager":
        # Korthikanti et al. 2022 §4.2: recompute the attention core (the s² softmax, its dropout) only
        b, s_ = setup.batch, default_seq(arch, setup)
        drop = b * arch.heads * s_ * s_ * (4 + c + (c + 1 if arch.dropout_attn else 0)) * arch.layers // setup.tp
        acts = replace(acts, saved=acts.saved - drop)
    elif setup.selective_ckpt and not setup.grad_checkpointing and arch.family == "llama":
        # torchtitan's op-level selective AC: keep SDPA's outputs and every other matmul output, recompute the
        # rest (norms, SiLU, products) from the layer input. Its policy counts the block's mm calls and saves
        # the odd ones; in forward order wq, wk, wv, wo, w1, w3, w2 those are wq, wv, w1 and w2
        # (pytorch/torchtitan@9dec370 torchtitan/parallelisms/parallelize_llama.py _custom_policy; models/llama/model.py)
        T = acts.tokens
        r_ = act_bytes(setup)[0]
        hq, kv = arch.heads * arch.head_dim, arch.kv_heads * arch.head_dim
        keep = T * arch.hidden * r_ + T * hq * c + T * arch.heads * 4 + T * (hq + kv + arch.ffn + arch.hidden) * c
        layer = min(acts.per_layer, keep // setup.tp)
        acts = replace(acts, saved=acts.saved - arch.layers * (acts.per_layer - layer), per_layer=layer)
    if setup.grad_checkpointing and acts.ckpt_saved:
        return acts, acts.ckpt_saved, acts.per_layer
    if setup.grad_checkpointing:
        # each layer's input is kept (the residual stream's dtype), one layer is recomputed at a time; a 4-bit
        # linear's kept input lives only in the layer being recomputed
        rows = acts.positions or acts.tokens  # a ViT's tokens count images: its layer inputs hold every patch
        kept = acts.saved - arch.layers * acts.per_layer + arch.layers * rows * arch.hidden * act_bytes(setup)[0] // setup.tp
        return replace(acts, quant_inputs=0), kept, acts.per_layer
    return acts, acts.saved, 0


# torchtune's OffloadActivations keeps this many of the latest saved tensors alive on the GPU in the forward
# (max_fwd_stash_size, default 5) while their copies to the CPU run on a side stream
OFFLOAD_STASH = 5


def _offloaded(arch: Arch, setup: Setup, acts: Acts, kept: int, recompute: int) -> tuple[Acts, int, int]:
    """Activation offloading (pytorch/torchtune@05cda5e9dd03 torchtune/training/_activation_offloading.py,
    OffloadActivations): a saved_tensors_hooks context copies every saved tensor of 1 KiB or more that is not a
    parameter to pinned CPU memory, keeping the latest few on the GPU until their copy is done, and brings each
    back in backward for the autograd node that reads it. On the GPU: the loss's tensors (left to the loop),
    the stash of the latest saved tensors (each at most tokens × the wider of hidden and ffn), and in backward
    one layer's tensors at a time."""
    if not setup.activation_offload:
        return acts, kept, recompute
    rows = acts.positions or acts.tokens
    c = dtype_bytes(setup.precision)[1]
    stash = min(kept - acts.loss_saved, OFFLOAD_STASH * rows * max(arch.hidden, arch.ffn) * c // setup.tp)
    return acts, acts.loss_saved + max(0, stash), max(recompute, acts.per_layer)


def _cnn_backward(acts: Acts, during: Breakdown, grads: int, P: int, extra: int, held: int = 0) -> Breakdown:
    """A non-uniform network's backward peak: saved tensors not yet freed + gradients made so far (at least the
    ``held`` ones: accumulated or never freed), per block."""
    share = grads / max(P, 1)  # bytes of gradient per parameter on this GPU
    alive, done, worst = acts.saved, 0, during
    for saved_k, params_k, tmp_k in reversed(acts.profile):
        done += params_k
        cand = Breakdown(during.weights, max(held, int(done * share)), during.optimizer, alive, tmp_k + extra)
        worst = max(worst, cand, key=lambda bd: bd.total)
        alive -= saved_k
    return worst


def _accumulated(setup: Setup, grads: int, trainable: int, gb: int) -> int:
    """The gradients alive through a later micro-step's forward and backward under gradient accumulation (they
    are summed into, then zeroed only after the optimizer step). FSDP1's no_sync() — what Lightning Fabric's
    no_backward_sync does for FSDP, LitGPT's loop on accumulating steps — keeps them unsharded: "FSDP will
    accumulate the full model gradients (instead of gradient shards) until the eventual sync" (PyTorch docs,
    FullyShardedDataParallel.no_sync; Lightning-AI/pytorch-lightning@2.4.0 src/lightning/fabric/strategies/fsdp.py
    _FSDPBackwardSyncControl; Lightning-AI/litgpt@00af8b0d9b43 litgpt/finetune/full.py:253-254)."""
    if setup.accumulation <= 1:
        return 0
    if setup.fsdp_no_sync and setup.shard == "fsdp":
        return trainable * gb // (setup.tp * setup.pp)
    return grads


def _in_backward(arch: Arch, setup: Setup, grads: int, opt_tmp: int) -> tuple[int, int, int]:
    """(gradients alive, the step's temporaries after backward, those inside backward). With the optimizer in
    backward — torch.distributed.optim._apply_optimizer_in_backward (pytorch/pytorch@035290b77d8b
    torch/distributed/optim/apply_optimizer_in_backward.py; torchtune's optimizer_in_bwd) — a hook on each
    parameter's AccumulateGrad runs that parameter's step, then `param.grad = None`: one gradient alive at a
    time, the per-tensor temporaries inside backward, no step phase after it."""
    if not setup.optimizer_in_backward:
        return grads, opt_tmp, 0
    r, _, gb, _ = dtype_bytes(setup.precision)
    one, mp = _one_tensor(arch, setup), setup.tp * setup.pp
    return min(grads, one * gb // mp), 0, min(opt_tmp, one * r // mp)


def _one_tensor(arch: Arch, setup: Setup) -> int:
    """Elements of the largest trained parameter tensor (a LoRA run: its largest adapter matrix)."""
    if setup.method in ("lora", "qlora"):
        return max((setup.lora_rank * max(lin.fan_in, lin.fan_out) for lin in trainable_linears(arch, setup)), default=0)
    return largest_trained(arch, setup) or arch.largest_param or arch.params


def _load(arch: Arch, setup: Setup, weights: int) -> Breakdown:
    """The checkpoint loading, before the first step (max_memory_allocated counts it): the weights the step
    holds and, while a 4-bit stack quantises, the largest linear's 16-bit copies as its dequantisation counts
    them (transformers: the bf16 weight; LitGPT: it and the fp16 copy quantised from it; torchao's to_nf4 needs
    less than its dequantisation); quantize-after (Lightning 2.1.0) first holds every 4-bit linear in 16 bits."""
    if setup.load not in ("quantize-while-loading", "quantize-after"):
        return Breakdown(weights, 0, 0, 0, 0)
    lins = quantised_linears(arch, setup)
    if setup.load == "quantize-after":  # every 4-bit linear still in 16 bits when the first is converted
        per = QLORA_BYTES_PER_PARAM if setup.nf4_double_quant else NF4_BYTES_PER_PARAM
        weights += int(sum(lin.fan_in * lin.fan_out * lin.count for lin in lins) * (2 - per)) // setup.tp
    one = max((lin.fan_in * lin.fan_out for lin in lins), default=0)
    return Breakdown(weights, 0, 0, 0, 2 * setup.dequant_copies * one // setup.tp)


def stack_arch(arch: Arch, setup: Setup) -> Arch:
    """The model as the stack builds it: LitGPT never ties lm_head to the embedding (its conversion script
    copies the embedding into a separate lm_head), so a tied config gains a vocabulary × hidden matrix."""
    if setup.untied_head and arch.tied and arch.vocab and arch.family == "llama":
        return replace(arch, params=arch.params + arch.vocab * arch.hidden, tied=False)
    return arch


def estimate(arch: Arch, setup: Setup) -> Estimate:
    validate(setup, arch)
    arch = stack_arch(arch, setup)
    r, c, gb, mixed = dtype_bytes(setup.precision)
    P = arch.params
    trainable = count_trainable(arch, setup)
    weights, grads, opt, opt_tmp, gathered, cast_copies, notes = model_states(arch, setup, trainable)
    acts = activations(arch, setup)
    if setup.tp > 1:  # Megatron tensor + sequence parallelism splits every activation over the TP group
        acts = replace(acts, **{k: getattr(acts, k) // setup.tp for k in (
            "saved", "per_layer", "loss_saved", "loss_transient", "layer_transient", "quant_inputs", "loss_forward")})
    notes += acts.notes
    acts, kept, recompute = _offloaded(arch, setup, *_recomputation(arch, setup, acts, c))
    # bitsandbytes dequantises the whole weight of each 4-bit linear for its forward and again in backward
    # (functional.dequantize_4bit, in the dtype it was quantised from, then .to(the compute dtype))
    qlora_tmp = max((lin.fan_in * lin.fan_out for lin in quantised_linears(arch, setup)), default=0) * c \
        * setup.dequant_copies if setup.method == "qlora" else 0
    head_grad = 0
    if arch.task in ("causal-lm", "masked-lm") and setup.method in ("full", "freeze"):
        head_grad = arch.vocab * arch.hidden * gb
    grads, opt_tmp, bwd_step = _in_backward(arch, setup, grads, opt_tmp)
    acc = grads if setup.zero_grad == "keep" else _accumulated(setup, grads, trainable, gb)
    # the gradients alive through the forward: zero_grad() between the forward and backward frees them only then
    fwd = grads if setup.zero_grad == "before-backward" else acc
    # the moments of a step
    start = Breakdown(weights, acc, opt, kept, acts.loss_transient + cast_copies + gathered + qlora_tmp)
    during = Breakdown(weights, max(acc, min(head_grad, grads)), opt, kept - acts.loss_saved + recompute,
                       acts.layer_transient + cast_copies + gathered + qlora_tmp + bwd_step)
    # last op of backward: a tied embedding's dense gradient is summed into the head's (two more tables)
    tied_sum = 2 * arch.vocab * arch.hidden * gb if arch.tied and arch.vocab and setup.method == "full" else 0
    end = Breakdown(weights, grads, opt, 0, tied_sum + gathered)
    step = Breakdown(weights, grads, opt, 0, opt_tmp + gathered)
    if acts.profile and setup.method == "full" and not setup.grad_checkpointing:
        during = _cnn_backward(acts, during, grads, P, cast_copies + gathered, acc)
    if setup.accumulation > 1:
        notes.append(f"gradient accumulation over {setup.accumulation} micro-steps: gradients stay allocated during "
                     "every forward and backward")
    phases = {"backward-start": start, "backward": during, "backward-end": end, "optimizer-step": step}
    if acts.loss_forward:  # the end of the forward: the loss runs while the logits (and their copies) are alive
        phases["loss"] = Breakdown(weights, fwd, opt, kept, acts.loss_forward + cast_copies + gathered)
    if acts.encode_transient:  # before the step's forward: the VAE encodes the batch under no_grad
        phases["encode"] = Breakdown(weights, fwd, opt, 0, acts.encode_transient)
    held = acts.quant_inputs if setup.prev_graph_held else 0
    if held or fwd > acc:
        # end of the next forward: the loop still holds the last step's logits, hence its graph, hence every
        # input bitsandbytes kept as a ctx attribute (LitGPT: `logits = model(...)` rebinds only after the
        # forward returns); this step's and the last step's logits stand where the loss' saved tensors will be.
        # A loop that calls zero_grad() after the forward still holds the last step's gradients here.
        phases["forward-end"] = Breakdown(weights, fwd, opt, kept, held + cast_copies + gathered + qlora_tmp)
    if setup.zero_grad == "before-backward":
        notes.append("zero_grad() after the forward: the last step's gradients stay allocated through the forward")
    elif setup.zero_grad == "keep":
        notes.append("zero_grad(set_to_none=False) (PyTorch < 2.0's default): the gradients stay allocated all step")
    phases["load"] = _load(arch, setup, weights)
    phase, peak = max(phases.items(), key=lambda kv: kv[1].total)
    # time: forward + backward (2× forward for weight and input gradients; frozen weights: input only)
    bwd = 2.0 if setup.method == "full" else 1.0
    # per GPU: tensor parallelism splits every matmul over tp GPUs, pipeline parallelism the layers over pp stages
    flops = acts.fwd_flops * (1 + bwd + (1 if setup.grad_checkpointing else 0)) / (setup.tp * setup.pp)
    kept_params = trainable if setup.method != "full" else P
    ckpt = int(kept_params * r + kept_params * state_bytes(setup.optimizer, r))
    return Estimate(setup, P, trainable, peak.total, peak, phase, weights, ckpt, flops, acts.tokens, acts.unit,
                    tuple(notes), acts.elementwise_bytes, phases["load"].total)


def max_micro_batch(arch: Arch, setup: Setup, budget_bytes: int, limit: int = 1 << 16) -> int:
    """The largest batch whose peak stays within ``budget_bytes`` (0 when even one sample does not fit)."""
    def fits(b: int) -> bool:
        return estimate(arch, replace(setup, batch=b)).peak_bytes <= budget_bytes

    if not fits(1):
        return 0
    lo, hi = 1, 2
    while hi <= limit and fits(hi):
        lo, hi = hi, hi * 2
    if hi > limit:
        return limit
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def accumulation_steps(global_batch: int | None, micro: int, data_parallel: int) -> int | None:
    if not global_batch or micro <= 0:
        return None
    return max(1, math.ceil(global_batch / (micro * data_parallel)))
