"""How many bytes one training step needs on each GPU. PURE: dataclasses in, dataclasses out.

The peak of a step is the largest of three moments (measured the same way in bench/trace_fit.py):

1. start of backward: weights + optimizer state + every tensor autograd saved in the forward + the loss's
   gradient temporaries (for a language model the log-softmax over the vocabulary, b·s·V fp32, 3× at once);
2. during backward: saved tensors not yet freed + gradients produced so far + (with recomputation) one
   layer's recomputed activations;
3. optimizer step: weights + gradients + optimizer state + the optimizer's temporaries (PyTorch's default
   foreach AdamW builds a parameter-sized list for sqrt(v)).

Saved activations are counted tensor by tensor from the reference implementations (Hugging Face
transformers, eager attention), per layer, in the dtype each tensor has under the chosen precision; the
method and sources are in docs/fit.md. Korthikanti et al. 2022 give the same structure for Megatron's
fused kernels: s·b·h·(34 + 5·a·s/h) bytes per layer in 16-bit.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, field, replace

from envman.fit.architectures import Arch

PRECISIONS = ("fp32", "bf16", "fp16", "bf16-mixed", "fp16-mixed")
OPTIMIZERS = ("adamw", "adamw-8bit", "paged-adamw", "sgd", "sgd-momentum", "adafactor", "lion")
METHODS = ("full", "lora", "qlora", "freeze")
SHARDS = ("none", "ddp", "zero1", "zero2", "zero3", "fsdp")
ATTENTION = ("eager", "flash")
LOSSES = ("fp32", "compute")
OFFLOAD = ("none", "optimizer", "params")
# when the training loop frees the last step's gradients (docs/fit-allocator.md): before the next forward
# (optimizer.zero_grad() after step(), set_to_none=True: PyTorch >= 2.0's default); after the next forward,
# just before backward (rasbt/pytorch-memory-optim's loop); never (zero_grad(set_to_none=False), PyTorch < 2.0's
# default: the gradients are zeroed in place and stay allocated through every forward and backward)
ZERO_GRAD = ("before-forward", "before-backward", "keep")
DROPOUT_MASKS = ("bool", "input")

_EXAMPLE = {"batch": 4, "gpus": 8, "lora-rank": 16, "accumulation": 4, "tp": 2, "pp": 2}

QLORA_BYTES_PER_PARAM = (4 + 0.127) / 8  # NF4 + double-quantised constants: 0.127 bit/param (QLoRA paper, §3)
FLUX_T5_TOKENS = 512  # diffusers examples/dreambooth/train_dreambooth_lora_flux.py: --max_sequence_length default 512
NF4_BYTES_PER_PARAM = (4 + 32 / 64) / 8  # NF4 with one fp32 absmax per 64-value block (compress_statistics=False)


@dataclass(frozen=True)
class Setup:
    method: str = "full"
    precision: str = "bf16-mixed"
    optimizer: str = "adamw"
    batch: int = 1
    seq: int | None = None  # tokens per sample; None: min(2048, the model's max positions)
    image_size: int | None = None  # None: the model's
    grad_checkpointing: bool = False
    lora_rank: int = 16
    lora_targets: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
    gpus: int = 1
    shard: str = "none"
    # kernels: what the comparison with the traced reference pins down (docs/fit.md)
    attention: str = "eager"  # eager: the s×s probabilities are kept; flash: only the log-sum-exp
    dropout_mask: str = "bool"  # bool: CUDA's fused dropout (1 B); input: CPU's mask in the input's dtype
    optimizer_impl: str = "foreach"  # foreach (PyTorch's CUDA default) | fused | for-loop
    # what the training stack does with the bytes (envman/fit/stacks.py fills these from --stack)
    stack: str = "custom"
    base_bytes: int = 0  # frozen (LoRA/QLoRA) base as loaded (2: torch_dtype=bfloat16); 0: the parameter dtype
    kbit_fp32_extras: bool = False  # PEFT prepare_model_for_kbit_training: non-quantised params upcast to fp32
    loss: str = "fp32"  # fp32: transformers upcasts the logits; compute: LitGPT's chunked loss in the compute dtype
    deepspeed: bool = False  # DeepSpeed ZeRO: a 16-bit module, fp32 master + moments (+ fp32 grads) partitioned
    accumulation: int = 1  # gradient accumulation steps: gradients stay alive across micro-steps
    offload: str = "none"  # none | optimizer (ZeRO-Offload, FSDP CPU offload) | params (ZeRO-3 offload_param)
    selective_ckpt: bool = False  # Megatron/torchtitan selective recomputation of the attention core
    tp: int = 1  # tensor parallel (Megatron-style with sequence parallelism)
    pp: int = 1  # pipeline parallel stages (1F1B: the first stage holds one micro-batch's worth of every layer)
    autocast: str = "cuda"  # whose cast lists: cuda (softmax/layer_norm/loss in fp32) | cpu (the traced reference)
    lora_dropout: bool = False  # dropout on the adapters' input (LitGPT configs: 0.05): its mask and output are kept
    logits_held: bool = False  # the training loop holds the logits through backward (LitGPT's fit loop)
    fsdp_root_unsharded: bool = False  # FSDP1 wrapping each Block only: embeddings + head stay gathered all step
    adapter_bytes: int = 0  # LoRA adapters' dtype (the QLoRA script casts them to bf16); 0: the parameter dtype
    # 4-bit (bitsandbytes) facts of the stack: which version and which wrapper (matrices/fit_stacks.yaml cites each)
    bnb_keeps_input: bool = False  # bitsandbytes < 0.43.2: MatMul4Bit keeps its input in ctx.tensors (PR #1270)
    nf4_double_quant: bool = True  # False: one fp32 absmax per 64 weights (LitGPT's bnb.nf4), 0.5625 B/param
    quant_head: bool = False  # lm_head quantised too (Lightning's plugin replaces every nn.Linear; HF skips it)
    dequant_copies: int = 1  # dequantised weight copies alive at once (2: quantised from fp16, computed in bf16)
    untied_head: bool = False  # a separate lm_head even where the config ties it (LitGPT never ties)
    prev_graph_held: bool = False  # the loop holds the last step's logits (and so its graph) into the next forward
    ema: bool = False  # an EMA copy of the trained weights in fp32 on the GPU (diffusers' EMAModel, --use_ema)
    fused_qkv: bool = False  # one linear computes q, k and v (LitGPT's `attn`): one LoRA adapter, one dropout
    norm_upcast: bool = True  # RMSNorm upcasts its input to fp32 (transformers, LitGPT); False: lit-gpt@8641822
    fsdp_no_sync: bool = False  # accumulation under FSDP1's no_sync(): every rank accumulates unsharded gradients
    loss_shift_copy: bool = False  # transformers 4.46.0-4.48.x ForCausalLMLoss: a contiguous fp32 copy of the shifted logits
    reduce_bucket: int = 0  # DeepSpeed ZeRO-2's reduce_bucket_size (elements): the 16-bit gradient bucket on the GPU
    zero_grad: str = "before-forward"  # when the loop frees the gradients (ZERO_GRAD)
    sub_group: int = 0  # DeepSpeed ZeRO-3's sub_group_size (elements): step() upcasts one sub-group's gradients at a time


@dataclass(frozen=True)
class Breakdown:
    weights: int
    gradients: int
    optimizer: int
    activations: int
    temporaries: int

    @property
    def total(self) -> int:
        return self.weights + self.gradients + self.optimizer + self.activations + self.temporaries


@dataclass(frozen=True)
class Estimate:
    setup: Setup
    params: int
    trainable_params: int
    peak_bytes: int
    breakdown: Breakdown  # at the peak
    phase: str  # backward-start | backward | backward-end | optimizer-step | forward-end | encode | loss
    weights_bytes: int  # the model's weights as stored for training (per GPU)
    checkpoint_bytes: int  # a resumable checkpoint: trainable weights + optimizer state (all GPUs together)
    train_flops: float  # per step, per GPU
    samples_tokens: int  # tokens (or images) per step per GPU
    unit: str  # tokens | images
    notes: tuple[str, ...] = field(default=())
    elementwise_bytes: int = 0  # bytes the step's memory-bound kernels (BatchNorm, ReLU, residual adds) move


class SetupError(ValueError):
    """A setup the estimator cannot honour; the message is one line for the user, the hint where to go."""

    def __init__(self, message: str, hint: str):
        super().__init__(message)
        self.hint = hint


def _bytes(prec: str) -> tuple[int, int, int, bool]:
    """(residual/param dtype, compute dtype, grad dtype, mixed?)."""
    if prec == "fp32":
        return 4, 4, 4, False
    if prec.endswith("-mixed"):
        return 4, 2, 4, True
    return 2, 2, 2, False


def validate(setup: Setup, arch: Arch) -> None:
    _check_choices(setup)
    _check_numbers(setup, arch)
    if setup.grad_checkpointing and arch.family == "resnet":
        raise SetupError("gradient checkpointing is not modelled for ResNet (Hugging Face's ResNet has none)",
                         "drop --grad-checkpointing; a smaller --batch lowers ResNet's activations")
    if setup.shard == "none" and setup.gpus > setup.tp * setup.pp:
        raise SetupError(f"--gpus {setup.gpus} needs --shard ddp|zero1|zero2|zero3|fsdp",
                         f"e.g. --gpus {setup.gpus} --shard ddp (replicated) or --shard fsdp (sharded); "
                         "--tp/--pp split the model instead")
    if setup.method == "qlora" and setup.precision == "fp32":
        raise SetupError("QLoRA computes in bf16/fp16, not --precision fp32",
                         "drop --precision (the QLoRA stacks' bf16-mixed), or --precision bf16 / fp16-mixed")


def _check_choices(setup: Setup) -> None:
    for name, val, allowed in (("method", setup.method, METHODS), ("precision", setup.precision, PRECISIONS),
                               ("optimizer", setup.optimizer, OPTIMIZERS), ("shard", setup.shard, SHARDS),
                               ("attention", setup.attention, ATTENTION), ("zero-grad", setup.zero_grad, ZERO_GRAD)):
        if val not in allowed:
            near = difflib.get_close_matches(str(val), allowed, n=1)
            raise SetupError(f"--{name} {val!r} is not one of {', '.join(allowed)}",
                             f"did you mean --{name} {near[0]}?" if near else f"e.g. --{name} {allowed[0]}")
    if setup.loss not in LOSSES or setup.offload not in OFFLOAD:
        raise SetupError(f"unknown loss {setup.loss!r} or offload {setup.offload!r}",
                         f"--offload takes {', '.join(OFFLOAD)}; a stack's loss is {' or '.join(LOSSES)}")


def _check_numbers(setup: Setup, arch: Arch) -> None:
    for flag, num in (("batch", setup.batch), ("gpus", setup.gpus), ("lora-rank", setup.lora_rank),
                      ("accumulation", setup.accumulation), ("tp", setup.tp), ("pp", setup.pp)):
        if isinstance(num, bool) or not isinstance(num, int) or num < 1:
            raise SetupError(f"--{flag} {num}: expected a positive whole number", f"1 or more, e.g. --{flag} {_EXAMPLE[flag]}")
    if setup.seq is not None and (isinstance(setup.seq, bool) or setup.seq < 1):
        raise SetupError(f"--seq {setup.seq}: expected a positive number of tokens",
                         "e.g. --seq 2048; without --seq: min(2048, the model's positions)")
    if setup.image_size is not None and setup.image_size < 1:
        raise SetupError(f"--image-size {setup.image_size}: expected a positive number of pixels",
                         "e.g. --image-size 224; without it: the model's own")
    if setup.seq and arch.max_positions and arch.family in ("gpt2", "llama", "bert") and setup.seq > arch.max_positions:
        raise SetupError(f"--seq {setup.seq} is longer than this model's {arch.max_positions:,} positions "
                         "(max_position_embeddings)", f"--seq {arch.max_positions} at most for this model; "
                         "a longer context needs a model (config.json) with more positions")
    if setup.image_size and arch.patch_size and setup.image_size < arch.patch_size:
        raise SetupError(f"--image-size {setup.image_size} is smaller than one {arch.patch_size}-pixel patch",
                         f"--image-size {arch.patch_size} at least" + (f"; the model's own is {arch.image_size}"
                                                                        if arch.image_size else ""))
    if setup.gpus % (setup.tp * setup.pp):
        mp = setup.tp * setup.pp
        raise SetupError(f"--gpus {setup.gpus} is not a multiple of --tp {setup.tp} × --pp {setup.pp}",
                         f"--gpus = data-parallel × tp × pp: e.g. --gpus {mp * max(1, setup.gpus // mp)}")


def trainable_linears(arch: Arch, setup: Setup):
    if setup.method not in ("lora", "qlora"):
        return ()
    chosen = tuple(lin for lin in arch.linears if any(lin.name == t or lin.name.endswith("." + t) or
                                                      lin.name.split(".")[-1] == t for t in setup.lora_targets))
    if not chosen:
        names = sorted({lin.name.split(".")[-1] for lin in arch.linears})
        raise SetupError(f"--lora-targets {','.join(setup.lora_targets)} matches no layer of this model "
                         f"(its linear layers: {', '.join(names)})", f"e.g. --lora-targets {','.join(names[:2])}")
    return chosen


def count_trainable(arch: Arch, setup: Setup) -> int:
    if setup.method == "full":
        return arch.params
    if setup.method == "freeze":
        return max(lin.fan_in * lin.fan_out + lin.fan_out for lin in arch.linears[-1:]) if arch.linears else 0
    return sum(setup.lora_rank * (lin.fan_in + lin.fan_out) * lin.count for lin in trainable_linears(arch, setup))


def default_seq(arch: Arch, setup: Setup) -> int:
    if setup.seq:
        return setup.seq
    return min(2048, arch.max_positions or 2048) if arch.family != "bert" else min(512, arch.max_positions or 512)


# --- activations ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Acts:
    saved: int  # everything autograd keeps after the forward (per GPU)
    per_layer: int  # one layer's saved tensors (recomputed when checkpointing)
    loss_saved: int  # part of `saved` freed right after the loss backward (log-softmax output)
    loss_transient: int  # extra bytes alive at the start of backward (loss gradients)
    layer_transient: int  # gradient temporaries while back-propagating through one layer
    tokens: int
    unit: str
    fwd_flops: float  # per step
    notes: tuple[str, ...] = ()
    # non-uniform networks (CNNs): per block in forward order (saved bytes, parameters, backward temporaries);
    # the backward peak is where the saved tensors not yet freed plus the gradients made so far are largest
    profile: tuple[tuple[int, int, int], ...] = ()
    quant_inputs: int = 0  # part of `saved`: the inputs bitsandbytes < 0.43.2 keeps in ctx.tensors (freed with the graph)
    elementwise_bytes: int = 0  # bytes a step's memory-bound kernels move, where they are counted (CNNs: BatchNorm/ReLU)
    ckpt_saved: int = 0  # kept with gradient checkpointing, where the family counts it itself (diffusion)
    encode_transient: int = 0  # a frozen encoder's no-grad forward before the step (the VAE encoding the images)
    loss_forward: int = 0  # beyond `saved`, alive while the loss's forward runs (the logits and their fp32 copies)


def act_bytes(setup: Setup) -> tuple[int, int, bool]:
    """(residual-stream dtype, elementwise-output dtype, does every frozen linear keep its input?).

    The residual stream has the embedding's dtype: fp32 master weights under autocast, the loaded dtype of a
    frozen PEFT base, fp32 again after prepare_model_for_kbit_training (QLoRA). bitsandbytes' 4-bit linear
    casts its input to the bf16 compute dtype and returns its output in the input's dtype; before 0.43.2 its
    MatMul4Bit also kept that input for backward (ctx.tensors = (A, B)) though backward never reads it —
    bitsandbytes PR #1270 dropped it (peft/utils/other.py; bitsandbytes/nn/modules.py Linear4bit)."""
    r, c, _, mixed = _bytes(setup.precision)
    if setup.deepspeed or (setup.shard in ("zero3", "fsdp") and mixed):
        return c, c, False  # DeepSpeed's bf16 module / FSDP2's param_dtype=bf16: the forward runs in 16-bit
    if setup.method == "qlora":
        keeps = setup.bnb_keeps_input
        return (4, 4, keeps) if setup.kbit_fp32_extras else (setup.base_bytes or r, c, keeps)
    if setup.method == "lora" and setup.base_bytes:
        return setup.base_bytes, c, False
    return r, c, False


def _mask(setup: Setup, dtype_bytes: int) -> int:
    return 1 if setup.dropout_mask == "bool" else dtype_bytes


def _mlp(arch: Arch, T: int, c: int, e: int, frozen: bool, targets: set[str], lin_in, quant: bool) -> int:
    """SwiGLU MLP (gate, up, SiLU, product), or a MoE layer as transformers' Mixtral/Qwen-MoE/DeepSeek run it:
    the router's fp32 softmax, each expert's gathered tokens (T·k rows), its SwiGLU tensors and its output
    kept for the routing-weight product, plus the shared expert (not validated against a trace). ``quant``:
    a 4-bit down projection keeps its input (the product, cast to the compute dtype) too."""
    h, f = arch.hidden, arch.ffn
    down = not frozen or "down_proj" in targets

    def down_in(width: int) -> int:
        if frozen and down:  # a LoRA target: its adapter (and a 4-bit base's kept input)
            return lin_in(("down_proj",), width)
        return T * width * e if down else (T * width * c if quant else 0)

    if not arch.experts:
        return lin_in(("gate_proj", "up_proj")) + T * f * e * 3 + down_in(f)
    Tk, fe, fs = T * arch.experts_per_tok, arch.expert_ffn, arch.shared_ffn
    out = lin_in(("gate",)) + T * arch.experts * 4 + Tk * 4  # router input, fp32 softmax, top-k weights
    out += Tk * h * c * (1 if not frozen or quant else 0) + Tk * fe * e * 3 + down_in(fe) * arch.experts_per_tok
    out += Tk * h * e
    if fs:
        out += lin_in(("shared_expert.gate_proj",)) + T * fs * e * 3 + down_in(fs)
    return out


def _quant_inputs(arch: Arch, setup: Setup, T: int, r: int, c: int) -> int:
    """The inputs every 4-bit linear's MatMul4Bit keeps as a ctx attribute (bitsandbytes < 0.43.2): one per
    distinct input tensor, or one per consumer when each casts its own bf16 copy (an fp32 residual stream).
    A ctx attribute is not released after backward like saved tensors: it lives as long as the graph."""
    h, f, L = arch.hidden, arch.ffn, arch.layers
    casts = r != c
    hq = arch.heads * arch.head_dim
    per = T * h * c * (3 if casts else 1) + T * hq * c  # q/k/v input, o_proj input
    if arch.experts:
        Tk = T * arch.experts_per_tok
        per += Tk * h * c + Tk * arch.expert_ffn * c + (T * h * c + T * arch.shared_ffn * c if arch.shared_ffn else 0)
    else:
        per += T * h * c * (2 if casts else 1) + T * f * c  # gate/up input, down_proj input
    return L * per + (T * h * c if setup.quant_head else 0)


def _mamba(arch: Arch, setup: Setup, b: int, s: int) -> Acts:
    """MambaForCausalLM blocks (not validated against a trace): RMSNorm with an fp32 residual, in_proj's
    input and output (x, z), the depthwise conv and SiLU outputs, x_proj's dt/B/C, dt, the scan output, the
    gated product and out_proj's input."""
    _, c, _, _ = _bytes(setup.precision)
    h, L, inner, N = arch.hidden, arch.layers, arch.ffn, arch.ssm_state
    T = b * s
    layer = T * h * 4 + T * 4 + T * h * c + T * 2 * inner * c + 5 * T * inner * c + T * (h // 16 + 2 * N) * c
    V = arch.vocab
    saved = L * layer + T * h * 4 + T * h * c + T * V * 4
    fwd = T * 2 * arch.matmul_params + T * L * inner * N * 6  # matmuls + the selective scan
    return Acts(saved, layer, T * V * 4, 2 * T * V * 4, 2 * T * 2 * inner * c, T, "tokens", float(fwd),
                ("mamba: activation model not validated against a trace (selective-scan kernel buffers approximated)",))


def _attention_terms(arch: Arch, setup: Setup, kind: str, T: int, S: int, r: int, c: int,
                     mixed: bool) -> tuple[int, int]:
    """(q/k/v/out as the attention kernel keeps them, the s×s probabilities eager attention keeps)."""
    a, g, d = arch.heads, arch.kv_heads, arch.head_dim
    hq = a * d
    if setup.attention == "flash":
        return T * hq * c + 2 * T * g * d * c + T * hq * c + T * a * 4, 0  # q, k, v, out, log-sum-exp
    cuda_amp = mixed and setup.autocast == "cuda"  # CUDA autocast runs softmax in fp32 (its fp32 op list)
    if kind in ("llama", "vit"):  # softmax(dtype=float32).to(q.dtype)
        probs = 4 + (c if c != 4 else 0) + (c if arch.variant == "gemma2" else 0)  # gemma2: tanh soft-cap
    elif kind == "gpt2":  # the causal mask in the model's dtype promotes the scores to it
        probs = r + (c if c != r and arch.dropout_attn == 0 else 0)
    else:  # bert: softmax in the compute dtype (fp32 under CUDA autocast, then cast back for probs·V)
        probs = 4 + c if cuda_amp else c
    if arch.dropout_attn > 0:
        probs += _mask(setup, c) + c
    return 3 * T * hq * c, probs * S  # q, kᵀ, v as the batched matmuls keep them (GQA: after repeat_kv)


def _loss_terms(arch: Arch, setup: Setup, T: int, b: int, c: int) -> tuple[int, int, int]:
    """(saved until the loss backward, extra alive at its start, extra alive during its forward) for a
    vocabulary-sized head."""
    V = arch.vocab
    if not V or arch.task not in ("causal-lm", "masked-lm"):
        return 0, 0, 0
    if setup.loss == "compute":
        # LitGPT: lm_head and cross-entropy in 128-token chunks in the compute dtype (chunked_cross_entropy);
        # the log-softmax output (+ the logits the loop holds through backward)
        return T * V * c * (2 if setup.logits_held else 1), 3 * min(T, 128 * b) * V * c, 0
    # transformers upcasts the logits: the fp32 log_softmax output is saved, and at the start of backward its
    # incoming gradient and its input gradient (both fp32) are alive at once
    saved = T * V * 4 + (T * V * c if arch.variant == "gemma2" else 0)  # gemma2: tanh soft-cap keeps its output
    # during the loss's forward, beside the log_softmax output: the model's logits in the compute dtype (the
    # output holds them), their fp32 copy (`logits.float()`; none when they are fp32 already) and, in
    # transformers 4.46.0-4.48.x, `logits[..., :-1, :].contiguous()` — an fp32 copy of the shifted logits
    # (4.49.0 pads the labels instead; loss/loss_utils.py ForCausalLMLoss). With one sample the slice of a
    # (1, s, V) tensor is contiguous already and `.contiguous()` returns it: no copy
    shifted = T * V * 4 if setup.loss_shift_copy and b > 1 else 0
    forward = T * V * c + (T * V * 4 if c != 4 else 0) + shifted
    return saved, 2 * T * V * 4, forward


def _linear_inputs(setup: Setup, names: tuple[str, ...], width: int, T: int, c: int, r: int, frozen: bool,
                   targets: set[str], mixed: bool, quant_keeps: bool) -> int:
    """Bytes a group of linears sharing one input keeps for backward: the input once, or once per consumer
    under autocast (the cast of an activation is not cached) or when each 4-bit linear casts its own copy; a
    frozen linear keeps none. A LoRA adapter keeps its A output, and its input — or, with LoRA dropout, the
    dropout's output and 1-byte mask instead (one dropout per adapter; LitGPT's fused qkv has one)."""
    tgt = [n for n in names if n in targets]
    need_x = [n for n in names if not frozen or quant_keeps or (n in tgt and not setup.lora_dropout)]
    if not need_x and not tgt:
        return 0
    copies = len(need_x) if (mixed or (quant_keeps and r != c)) else min(1, len(need_x))
    out = T * width * c * copies + len(tgt) * T * setup.lora_rank * c
    if tgt and setup.lora_dropout:
        out += (1 if setup.fused_qkv and "q_proj" in names else len(tgt)) * T * width * (c + 1)
    return out


def _rms_in(setup: Setup, T: int, h: int, r: int) -> int:
    """What an RMSNorm keeps of its input: transformers' LlamaRMSNorm and LitGPT's upcast it (`x.float()`: the
    fp32 copy and the fp32 rstd are saved); lit-gpt@8641822's computes in the input's dtype (lit_gpt/rmsnorm.py:
    the residual itself and its rsqrt are saved)."""
    return T * h * 4 + T * 4 if setup.norm_upcast else T * h * r + T * r


def _fused_qkv(arch: Arch, setup: Setup, T: int, c: int, targets: set[str]) -> int:
    """What LitGPT's attention keeps beyond the separate q/k/v projections _attention_terms counts
    (litgpt/model.py CausalSelfAttention.forward, litgpt/lora.py LoRAQKVLinear; lit-gpt@8641822 the same):
    the fused `attn` output is viewed as (B, groups, q_per_kv + 2, T, hs); k — and v for grouped queries — are
    expanded to the query heads and `reshape` copies them; with one kv head per query head (MHA) or a single
    one (MQA) the reshape of v is a view, so SDPA's saved v keeps the whole fused output alive. LoRA on some
    but not all of q, k, v: zero_pad's index_copy keeps its source, the B output over the enabled widths
    (autograd saves `source` for its `expand_as`; PyTorch tools/autograd/derivatives.yaml, index_copy)."""
    if not setup.fused_qkv or not arch.heads:
        return 0
    a, g, d = arch.heads, arch.kv_heads or arch.heads, arch.head_dim
    hq, kv = a * d, g * d
    v_kept = T * (hq + 2 * kv) * c if g in (a, 1) else T * hq * c
    counted = 2 * T * (hq if setup.attention == "eager" else kv) * c  # k and v as _attention_terms counts them
    enabled = [w for name, w in (("q_proj", hq), ("k_proj", kv), ("v_proj", kv)) if name in targets]
    index_copy_source = T * sum(enabled) * c if 0 < len(enabled) < 3 else 0
    return T * hq * c + v_kept - counted + index_copy_source


def _transformer(arch: Arch, setup: Setup, b: int, s: int, *, kind: str) -> Acts:
    """Per-layer saved tensors of the Hugging Face GPT-2 / Llama / BERT / ViT blocks (eager attention)."""
    _, c, _, mixed = _bytes(setup.precision)
    r, e, quant_keeps = act_bytes(setup)
    if setup.deepspeed or (setup.shard in ("zero3", "fsdp") and mixed):
        mixed = False  # no autocast: the module itself is 16-bit
    h, L, a, d, f = arch.hidden, arch.layers, arch.heads, arch.head_dim, arch.ffn
    hq = a * d
    T = b * s
    S = b * a * s * s
    lora = setup.method in ("lora", "qlora")
    frozen = setup.method != "full"
    targets = {lin.name.split(".")[-1] for lin in trainable_linears(arch, setup)} if lora else set()
    p_hid = arch.dropout_hidden

    def lin_in(names: tuple[str, ...], width: int = h) -> int:
        return _linear_inputs(setup, names, width, T, c, r, frozen, targets, mixed, quant_keeps)

    attn_core, probs = _attention_terms(arch, setup, kind, T, S, r, c, mixed)
    if kind == "llama":
        norm = _rms_in(setup, T, h, r) + (T * h * r if not frozen else 0)  # RMSNorm: input, rstd, normalised
        norms = norm * (2 if arch.variant == "gemma2" else 1)  # gemma2: post-attention and post-MLP norms too
        layer = (norms + lin_in(("q_proj", "k_proj", "v_proj")) + attn_core + probs + lin_in(("o_proj",), hq)
                 + _fused_qkv(arch, setup, T, c, targets) + norms + _mlp(arch, T, c, e, frozen, targets, lin_in, quant_keeps))
    elif kind == "gpt2":
        ln = T * h * r + T * 8
        drop = T * h * _mask(setup, c) if p_hid > 0 else 0
        layer = (ln + lin_in(("c_attn",)) + attn_core + probs + lin_in(("c_proj",)) + drop
                 + ln + lin_in(("c_fc",)) + 4 * T * f * c + T * f * c + drop)  # gelu_new: 4 saved tensors
    else:  # bert (post-LN) and vit (pre-LN): same tensors
        ln = T * h * r + T * 8
        drop = T * h * _mask(setup, c) if p_hid > 0 else 0
        layer = (lin_in(("query", "key", "value")) + attn_core + probs + lin_in(("attention.output.dense",))
                 + drop + ln + lin_in(("intermediate.dense",)) + 2 * T * f * c + drop + ln)
    # outside the layers
    extra = 0
    if kind == "llama":
        extra = _rms_in(setup, T, h, r) + T * h * r + T * h * c + 2 * s * d * r  # final norm, lm_head input, rope
        if "lm_head" in targets:  # LoRA on the head: its A output (and dropout output + mask)
            extra += T * setup.lora_rank * c + (T * h * (c + 1) if setup.lora_dropout else 0)
    elif kind == "gpt2":
        extra = (T * h * _mask(setup, r) if p_hid > 0 else 0) + T * h * r + T * 8 + T * h * c
    elif kind == "bert":
        extra = (T * h * r + T * 8 + (T * h * _mask(setup, r) if p_hid > 0 else 0)  # embeddings LN + dropout
                 + 3 * T * h * c + T * h * c)  # MLM head: dense in, gelu in, LayerNorm in, decoder in
    elif kind == "vit":
        extra = T * h * r + T * 8 + b * h * c
    if arch.task == "sequence-classification" and kind == "bert":  # pooler + classifier: no vocabulary terms
        extra = extra - 3 * T * h * c - T * h * c + 2 * b * h * c
    loss_saved, loss_transient, loss_forward = _loss_terms(arch, setup, T, b, c)
    saved = L * layer + extra + loss_saved
    attn_flops = 4 * s * hq * L  # per token: QKᵀ and probs·V
    fwd = T * (2 * arch.flop_params + attn_flops)  # ViT: counts patch embedding and head per token (< 2%)
    ffn_t = T * (arch.experts_per_tok * arch.expert_ffn + arch.shared_ffn) if arch.experts else T * f
    layer_transient = 2 * max(ffn_t * e, S * c if setup.attention == "eager" else 0)
    quant_in = _quant_inputs(arch, setup, T, r, c) if quant_keeps and kind == "llama" else 0
    return Acts(saved, layer, loss_saved, loss_transient, layer_transient, T, "tokens", float(fwd),
                quant_inputs=quant_in, loss_forward=loss_forward)


# Passes over each tensor of the memory-bound kernels around a convolution, forward + backward, as PyTorch's
# CUDA kernels make them (aten/src/ATen/native/cuda/Normalization.cuh): BatchNorm training reads its input
# twice (batch_norm_collect_statistics, then batch_norm_transform_input) and writes once; its backward reads
# input and gradient twice (batch_norm_backward_reduce, batch_norm_backward_elemt) and writes once (3 + 5);
# ReLU reads and writes (2), its backward reads the output and the gradient and writes (3); a residual add
# reads two tensors and writes one (3), its backward passes the gradient through.
BN_RELU_PASSES = 13
BN_PASSES = 8
ADD_PASSES = 3


def _resnet(arch: Arch, setup: Setup, b: int, size: int) -> Acts:
    """HF ResNet (bottleneck, BatchNorm): conv input, BN input, ReLU output of every block are kept."""
    _, c, _, _ = _bytes(setup.precision)
    H = size // 2
    stem = arch.stem
    stem_saved = b * (2 * stem * H * H * c + stem * (H // 2) ** 2 * (8 + c))  # BN in, ReLU out, pool idx, pool out
    profile = [(stem_saved, 7 * 7 * arch.channels * stem + 2 * stem, 2 * b * stem * H * H * c)]
    flops = 2 * 7 * 7 * arch.channels * stem * H * H
    # stem BN + ReLU, max-pool (reads its input and writes its output forward, the reverse backward)
    ew = BN_RELU_PASSES * stem * H * H + 2 * (stem * H * H + stem * (H // 2) ** 2)
    res = H // 2
    cin = stem
    for si, (depth, w) in enumerate(arch.stages):
        r = w // 4
        for i in range(depth):
            rin = res
            rout = res // 2 if (i == 0 and si > 0) else res
            ew += (BN_RELU_PASSES * (r * rin * rin + r * rout * rout + w * rout * rout) + ADD_PASSES * w * rout * rout
                   + (BN_PASSES * w * rout * rout if cin != w else 0))
            blk = r * rin * rin * 2 + r * rout * rout * 2 + w * rout * rout * 2 + (w * rout * rout if cin != w else 0)
            params = cin * r + 9 * r * r + r * w + 2 * (r + r + w) + ((cin * w + 2 * w) if cin != w else 0)
            flops += 2 * (cin * r * rin * rin + 9 * r * r * rout * rout + r * w * rout * rout
                          + (cin * w * rout * rout if cin != w else 0))
            profile.append((b * blk * c, params, 2 * b * max(w * rout * rout, r * rin * rin) * c))
            res, cin = rout, w
    profile.append((b * cin * c, cin * arch.labels + arch.labels, 0))
    flops += 2 * cin * arch.labels
    saved = sum(p[0] for p in profile)
    return Acts(saved, 0, 0, 0, 0, b, "images", float(b * flops), profile=tuple(profile), elementwise_bytes=b * ew * c)


def _diffusion(arch: Arch, setup: Setup, b: int) -> Acts:
    """A UNet / ControlNet / Flux step (envman/fit/diffusion.py): latents from the frozen VAE, text embeddings
    from the frozen text encoders, an MSE loss on the predicted noise (small next to the activations)."""
    from envman.fit import diffusion

    r, c, _, mixed = _bytes(setup.precision)
    d = diffusion.Dtypes(4, 4, c, c) if mixed and setup.autocast == "cuda" else diffusion.Dtypes(r, r, c, r)
    targets = frozenset(lin.name.split(".")[-1] if not lin.name.endswith("to_out.0") else "to_out.0"
                        for lin in trainable_linears(arch, setup))
    tr = diffusion.Train("full" if setup.method == "full" else "frozen", targets, setup.lora_rank,
                         setup.attention == "eager")
    size = setup.image_size or arch.image_size
    if arch.family == "flux":
        # the T5 prompt tokens: diffusers' Flux scripts take --max_sequence_length (default 512) — `--seq`
        t = diffusion.flux_activations(arch, b, size, d, tr, setup.seq or FLUX_T5_TOKENS)
    else:
        t = diffusion.unet_activations(arch, b, size, d, tr)
    vae = next((x for x in arch.towers if x.task == "vae"), None)
    encode = 3 * b * size * size * (vae.hidden if vae else 0) * c  # the VAE encoder's first block, at image size
    return Acts(t.saved, t.worst, 0, 0, 2 * t.worst // 4, b, "images", t.flops, ckpt_saved=t.kept,
                encode_transient=encode,
                notes=(f"{arch.variant}: activations counted block by block from diffusers; "
                       "not validated against a traced step",))


def activations(arch: Arch, setup: Setup) -> Acts:
    b = setup.batch
    if arch.family in ("unet", "flux"):
        return _diffusion(arch, setup, b)
    if setup.method == "freeze":
        # backbone under no_grad: only the head's input and the loss are kept
        s = default_seq(arch, setup)
        T = b * (s if arch.family not in ("resnet", "vit") else 1)
        _, c, _, _ = _bytes(setup.precision)
        V = arch.vocab if arch.task in ("causal-lm", "masked-lm") else arch.labels
        full = activations(arch, replace(setup, method="full"))
        # the forward still materialises each layer's output: its largest tensors are the transient
        biggest = max([full.layer_transient, *(p[2] for p in full.profile)])
        return replace(full, saved=T * arch.hidden * c + T * V * 4, per_layer=0, loss_saved=T * V * 4,
                       loss_transient=2 * T * V * 4, layer_transient=biggest, profile=())
    if arch.family == "resnet":
        return _resnet(arch, setup, b, setup.image_size or arch.image_size)
    if arch.family == "mamba":
        return _mamba(arch, setup, b, default_seq(arch, setup))
    if arch.family in ("gpt2", "llama", "bert"):
        acts = _transformer(arch, setup, b, default_seq(arch, setup), kind=arch.family)
        if arch.variant in ("moe", "mla"):
            acts = replace(acts, notes=(f"{arch.variant}: expert routing modelled after transformers' eager loop; "
                                        "not validated against a trace",))
        return acts
    if arch.family == "vit":
        size = setup.image_size or arch.image_size
        s = (size // arch.patch_size) ** 2 + 1
        acts = _transformer(arch, setup, b, s, kind="vit")
        return replace(acts, unit="images", tokens=b)
    if arch.towers:  # clip / whisper: the towers as BERT-style encoders (not validated against a trace)
        parts = [_transformer(t, setup, b, default_seq(arch, setup) if t.vocab else
                              ((t.image_size // t.patch_size) ** 2 + 1 if t.patch_size else t.max_positions),
                              kind="bert") for t in arch.towers]
        return Acts(sum(p.saved for p in parts), max(p.per_layer for p in parts), sum(p.loss_saved for p in parts),
                    max(p.loss_transient for p in parts), max(p.layer_transient for p in parts), b, "samples",
                    sum(p.fwd_flops for p in parts),
                    (f"{arch.family}: activations modelled as plain encoder towers; not validated against a trace",))
    return Acts(0, 0, 0, 0, 0, b * (setup.seq or 0), "tokens", 2.0 * arch.params * b * (setup.seq or 0),
                ("--params without a config: activations are not estimated (give --model or a config.json)",))


# --- the step ----------------------------------------------------------------------------------------------


def _state_bytes(optimizer: str, state_dtype: int) -> float:
    return {"adamw": 2 * state_dtype, "adamw-8bit": 2, "paged-adamw": 8, "sgd": 0, "sgd-momentum": state_dtype,
            "adafactor": 0.04 * state_dtype, "lion": state_dtype}[optimizer]


def quantised_linears(arch: Arch, setup: Setup):
    """The linears a 4-bit stack stores in NF4: all but the MoE router and — unless the stack quantises it
    (Lightning's plugin replaces every nn.Linear) — lm_head, which transformers' bnb integration skips."""
    skip = ("gate",) if setup.quant_head and not arch.tied else ("gate", "lm_head")
    return tuple(lin for lin in arch.linears if lin.name not in skip)


def _base_states(arch: Arch, setup: Setup, trainable: int) -> tuple[int, int, int, int, int]:
    """(weights, gradients, optimizer state, optimizer temporaries, fp32 matmul weights autocast copies) on one
    unsharded GPU. QLoRA after PEFT/bitsandbytes: NF4 linears, the rest in the loaded or upcast dtype."""
    r, _, gb, _ = _bytes(setup.precision)
    P = arch.params
    frozen_b = setup.base_bytes or r
    adapter = setup.adapter_bytes or r
    fp32_stored = arch.matmul_params if setup.method in ("full", "freeze") and r == 4 else 0
    if setup.method == "qlora":
        q = sum(lin.fan_in * lin.fan_out * lin.count for lin in quantised_linears(arch, setup))
        extra_b = 4 if setup.kbit_fp32_extras else frozen_b
        per = QLORA_BYTES_PER_PARAM if setup.nf4_double_quant else NF4_BYTES_PER_PARAM
        weights = int(q * per + (P - q) * extra_b + trainable * adapter)
        fp32_stored = (arch.vocab * arch.hidden if not arch.tied else 0) if extra_b == 4 else 0
    elif setup.method == "lora":
        weights = P * frozen_b + trainable * adapter
        fp32_stored = arch.matmul_params if frozen_b == 4 else 0
    else:
        weights = P * r
    if arch.task == "diffusion":
        # the pipeline's frozen parts (text encoders, VAE, a ControlNet's UNet) in the scripts' weight_dtype
        # (fp16/bf16 under mixed precision, else fp32); --ema: diffusers' EMAModel keeps an fp32 shadow copy
        _, c, _, mixed = _bytes(setup.precision)
        weights += sum(t.params for t in arch.towers) * (c if mixed else r) + (trainable * 4 if setup.ema else 0)
    grads = trainable * (setup.adapter_bytes or gb) if setup.method in ("lora", "qlora") else trainable * gb
    opt = int(trainable * _state_bytes(setup.optimizer, r))
    # optimizer temporaries: foreach AdamW/Lion keep a trainable-sized list; per-tensor loops the largest tensor
    if setup.optimizer in ("adamw", "lion"):
        opt_tmp = {"foreach": trainable * r, "fused": 0,
                   "for-loop": 2 * min(arch.largest_param or trainable, trainable) * r}[setup.optimizer_impl]
    elif setup.optimizer == "adafactor":
        opt_tmp = 2 * min(arch.largest_param or trainable, trainable) * r
    else:
        opt_tmp = 0
    if setup.optimizer == "paged-adamw":
        # bitsandbytes' paged optimizers keep their state in unified memory that the driver evicts to CPU RAM
        # when the GPU runs out (QLoRA paper §3): it does not have to fit beside the step's peak
        opt, opt_tmp = 0, 0
    return weights, grads, opt, opt_tmp, fp32_stored


def _gathered_layers(arch: Arch, setup: Setup, trainable: int, layer_params: int, c: int, gb: int) -> int:
    """ZeRO-3/FSDP: the layer computing and the one prefetched, unsharded as the layer stores them, and the
    computing layer's unsharded gradients before their reduce-scatter. A LoRA/QLoRA layer's frozen weights
    have no gradient (requires_grad=False: FSDP and ZeRO-3 make none), and a QLoRA layer gathers its packed
    NF4 storage — bnb_4bit_quant_storage=bfloat16 packs the 4-bit values into the 16-bit tensor FSDP and
    ZeRO-3 shard (huggingface/peft docs/source/accelerate/fsdp.md, deepspeed.md) — not a 16-bit copy."""
    if not layer_params:
        return 0
    if setup.method not in ("lora", "qlora"):
        return 2 * layer_params * c + layer_params * gb
    q = 0
    if setup.method == "qlora":
        q = sum(lin.fan_in * lin.fan_out * lin.count for lin in quantised_linears(arch, setup)
                if lin.name != "lm_head") // max(arch.layers, 1)
    per = QLORA_BYTES_PER_PARAM if setup.nf4_double_quant else NF4_BYTES_PER_PARAM
    stored = int(q * per) + (layer_params - q) * c
    return 2 * stored + trainable // max(arch.layers, 1) * gb


def _deepspeed_module(arch: Arch, setup: Setup, trainable: int) -> int:
    """The bytes of DeepSpeed's 16-bit module. With bf16/fp16 enabled the engine casts the whole module
    (`_configure_distributed_model`: `self.module.bfloat16()` / `.half()`, deepspeed/runtime/engine.py), a
    LoRA run's frozen base and its adapters alike; NF4 weights keep their packed storage. The fp32 master,
    moments and gradient partitions exist for the trainable parameters only (stage3.py and stage_1_and_2.py
    keep `p.requires_grad` params: `_get_trainable_parameter_groups`)."""
    if setup.method in ("full", "freeze"):
        return arch.params * 2
    sixteen = replace(setup, base_bytes=2, adapter_bytes=2, kbit_fp32_extras=False)
    return _base_states(arch, sixteen, trainable)[0]


def _largest_trained(arch: Arch, setup: Setup) -> int:
    """The elements of the largest trained parameter tensor: the embedding or a linear (LoRA trains small adapters)."""
    if setup.method not in ("full", "freeze"):
        return 0
    sizes = [lin.fan_in * lin.fan_out for lin in arch.linears]
    return max(sizes + [arch.vocab * arch.hidden if arch.vocab else 0])


def _deepspeed_states(arch: Arch, setup: Setup, trainable: int, mp: int, n: int, layer_params: int):
    """DeepSpeed bf16/fp16: a 16-bit module; fp32 master, moments and fp32 gradient partitions (4 + K + 4
    bytes) split over the data-parallel GPUs (stage 1: 4Ψ + 16Ψ/N, its 16-bit gradients kept whole until the
    step; stage 2: 2Ψ + 18Ψ/N + the reduce bucket; stage3.py: 18Ψ/N)."""
    module = _deepspeed_module(arch, setup, trainable)
    k = _state_bytes(setup.optimizer, 4)
    if setup.shard == "zero3":
        # stage3.py: the gradient partition (grad_partitions_flat_buffer, allocated at init) is in
        # gradient_accumulation_dtype, which engine.get_data_types makes the 16-bit model dtype unless
        # data_types.grad_accum_dtype says otherwise; step() upcasts one sub-group's at a time
        # (_prepare_fp32_grad_for_sub_group: flatten(...).to(fp32), freed in _release_sub_group)
        weights, grads = module // mp // n, trainable * 2 // mp // n
        master = int(trainable * (4 + k) / mp / n)
        # the largest gather of a step is at the loss: partitioned_param_coordinator.py __params_to_release keeps
        # a parameter whose next use is within stage3_max_reuse_distance (1e9 elements), so the head gathered for
        # its forward stays gathered into its backward, and its 16-bit gradient — larger than the reduce bucket
        # (h² elements) — waits whole for its own reduce-scatter (stage3.py __add_grad_to_ipg_bucket)
        gathered = max(_gathered_layers(arch, setup, trainable, layer_params, 2, 0),
                       2 * 2 * _largest_trained(arch, setup) // mp)
        note = (f"ZeRO-3 (DeepSpeed): 16-bit weights and gradients, fp32 master and moments split over {n} GPUs; "
                "the layer in use and the prefetched one gathered")
    elif setup.shard == "zero2" and setup.reduce_bucket:
        # stage_1_and_2.py reduce_ipg_grads with partition_gradients: once a bucket is reduced, the gradients of
        # parameters outside this rank's partition are cleared (clear_grad_attribute) and the partition's are
        # copied into grads_in_partition, a 16-bit buffer of the partition's size; what else is alive is the
        # bucket (reduce_bucket_size elements) and a parameter larger than it, reduced by itself
        # (extra_large_param_to_reduce) — the largest is the embedding or an untied head
        # (backward_prologue allocates the bucket whole, a second one with overlap_comm: one counted)
        weights = module // mp
        extra = _largest_trained(arch, setup) // mp
        grads = trainable * 2 // mp // n + (setup.reduce_bucket + (extra if extra > setup.reduce_bucket else 0)) * 2
        master, gathered = int(trainable * (4 + k) / mp / n), 0
        note = (f"ZeRO-2 (DeepSpeed): 16-bit weights replicated; 16-bit gradients reduced bucket by bucket into "
                f"this GPU's partition; fp32 master, moments and gradient partitions split over {n} GPUs "
                "(2Ψ + 18Ψ/N + the bucket; DeepSpeed's estimator says 4Ψ + 16Ψ/N)")
    else:
        weights, grads = module // mp, trainable * 2 // mp
        master, gathered = int(trainable * (4 + k) / mp / n), 0
        note = (f"ZeRO-{setup.shard[-1]} (DeepSpeed): 16-bit weights and gradients replicated, fp32 master, "
                f"moments and gradient partitions split over {n} GPUs (DeepSpeed's estimator: 4Ψ + 16Ψ/N)")
    if setup.method in ("lora", "qlora"):
        note += "; the frozen base in the 16-bit module, fp32 master and moments for the adapters only"
    # stages 1/2 make the fp32 gradient partition in step() (flat_grad_partition.to(fp32), freed after the
    # update: stage_1_and_2.py step), so it is alive with the step's states, not with the activations
    step_tmp = 4 * min(setup.sub_group, trainable // mp // n) if setup.shard == "zero3" else trainable * 4 // mp // n
    return weights, grads, master, gathered, step_tmp, note


_SHARD_NOTES = {"zero1": "ZeRO-1: optimizer state split over {n} GPUs",
                "zero2": "ZeRO-2: optimizer state and gradients split over {n} GPUs",
                "zero3": "ZeRO-3: weights, gradients and optimizer state split over {n} GPUs",
                "fsdp": "FSDP2 (full shard): weights, gradients and optimizer state split over {n} GPUs; "
                        "bf16 unsharded layers (MixedPrecisionPolicy)",
                "ddp": "DDP: gradients all-reduced in buckets (gradient_as_bucket_view=True assumed: no extra copy)"}


def _model_states(arch: Arch, setup: Setup, trainable: int) -> tuple[int, int, int, int, int, int, list[str]]:
    """(weights, gradients, optimizer state, optimizer temporaries, gathered layers, autocast copies, notes),
    per GPU. Sources: the ZeRO paper §3 (2 + 2 + K), DeepSpeed's own estimators, PyTorch FSDP2's
    MixedPrecisionPolicy (sharded fp32 parameters, gradients and moments; bf16 unsharded layers)."""
    _, c, gb, mixed = _bytes(setup.precision)
    P = arch.params
    weights, grads, opt, opt_tmp, fp32_stored = _base_states(arch, setup, trainable)
    notes: list[str] = []
    if setup.optimizer == "paged-adamw":
        notes.append("paged AdamW: its 32-bit state (8 B per trainable parameter) is paged to CPU RAM under pressure")
    mp = setup.tp * setup.pp  # model parallel: each GPU holds 1/(tp·pp) of every model state
    n = setup.gpus // mp  # data-parallel degree
    weights, grads, opt, opt_tmp = weights // mp, grads // mp, opt // mp, opt_tmp // mp
    # one transformer block's parameters: not the embedding, and not an untied lm_head (the root unit's)
    head = arch.vocab * arch.hidden if arch.vocab and not arch.tied and arch.task == "causal-lm" else 0
    layer_params = (P - arch.embedding_params - head) // arch.layers // mp if arch.layers else 0
    gathered = 0
    if setup.shard in _SHARD_NOTES and not (setup.deepspeed and setup.shard != "ddp"):
        notes.append(_SHARD_NOTES[setup.shard].format(n=n))
    if setup.deepspeed and setup.shard in ("zero1", "zero2", "zero3"):
        weights, grads, opt, gathered, opt_tmp, note = _deepspeed_states(arch, setup, trainable, mp, n, layer_params)
        notes.append(note)
    elif setup.shard in ("zero1", "zero2", "zero3", "fsdp"):
        opt, opt_tmp = opt // n, opt_tmp // n
        grads = grads if setup.shard == "zero1" else grads // n
        if setup.shard in ("zero3", "fsdp"):
            weights = weights // n
            # the layer computing and the one prefetched, unsharded in the compute dtype, and one layer's
            # unsharded gradients before its reduce-scatter
            gathered = _gathered_layers(arch, setup, trainable, layer_params, c, gb)
            if setup.fsdp_root_unsharded:  # the root unit (embeddings, head, final norm) is gathered with its grads
                gathered += (P - arch.layers * layer_params * mp) * (c + gb) // mp
            fp32_stored = 0
    if setup.shard in ("zero3", "fsdp") and not layer_params:
        notes.append("--params gives no layer structure: the gathered layer of ZeRO-3/FSDP is not counted")
    weights, grads, opt, opt_tmp = _offload(setup, weights, grads, opt, opt_tmp, notes)
    casts = 2 * fp32_stored // mp if mixed and not setup.deepspeed else 0
    return weights, grads, opt, opt_tmp, gathered, casts, notes


def _offload(setup: Setup, weights: int, grads: int, opt: int, opt_tmp: int, notes: list[str]) -> tuple[int, int, int, int]:
    if setup.offload in ("optimizer", "params"):
        opt, opt_tmp = 0, 0
        if setup.deepspeed:
            grads = 0  # ZeRO-Offload moves the reduced 16-bit gradients to the CPU bucket by bucket
        notes.append("optimizer state and step on the CPU (offload): the host needs the fp32 master + moments")
    if setup.offload == "params":
        weights = 0
        notes.append("parameters offloaded to the CPU: only the gathered layers are on the GPU")
    return weights, grads, opt, opt_tmp


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
        kept = acts.saved - arch.layers * acts.per_layer + arch.layers * acts.tokens * arch.hidden * act_bytes(setup)[0] // setup.tp
        return replace(acts, quant_inputs=0), kept, acts.per_layer
    return acts, acts.saved, 0


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


def stack_arch(arch: Arch, setup: Setup) -> Arch:
    """The model as the stack builds it: LitGPT never ties lm_head to the embedding (its conversion script
    copies the embedding into a separate lm_head), so a tied config gains a vocabulary × hidden matrix."""
    if setup.untied_head and arch.tied and arch.vocab and arch.family == "llama":
        return replace(arch, params=arch.params + arch.vocab * arch.hidden, tied=False)
    return arch


def estimate(arch: Arch, setup: Setup) -> Estimate:
    validate(setup, arch)
    arch = stack_arch(arch, setup)
    r, c, gb, mixed = _bytes(setup.precision)
    P = arch.params
    trainable = count_trainable(arch, setup)
    weights, grads, opt, opt_tmp, gathered, cast_copies, notes = _model_states(arch, setup, trainable)
    state_dtype = r
    acts = activations(arch, setup)
    if setup.tp > 1:  # Megatron tensor + sequence parallelism splits every activation over the TP group
        acts = replace(acts, saved=acts.saved // setup.tp, per_layer=acts.per_layer // setup.tp,
                       loss_saved=acts.loss_saved // setup.tp, loss_transient=acts.loss_transient // setup.tp,
                       layer_transient=acts.layer_transient // setup.tp, quant_inputs=acts.quant_inputs // setup.tp,
                       loss_forward=acts.loss_forward // setup.tp)
    notes += acts.notes
    acts, kept, recompute = _recomputation(arch, setup, acts, c)
    # bitsandbytes dequantises the whole weight of each 4-bit linear for its forward and again in backward
    # (functional.dequantize_4bit, in the dtype it was quantised from, then .to(the compute dtype))
    qlora_tmp = max((lin.fan_in * lin.fan_out for lin in quantised_linears(arch, setup)), default=0) * c \
        * setup.dequant_copies if setup.method == "qlora" else 0
    head_grad = 0
    if arch.task in ("causal-lm", "masked-lm") and setup.method in ("full", "freeze"):
        head_grad = arch.vocab * arch.hidden * gb
    acc = grads if setup.zero_grad == "keep" else _accumulated(setup, grads, trainable, gb)
    # the gradients alive through the forward: zero_grad() between the forward and backward frees them only then
    fwd = grads if setup.zero_grad == "before-backward" else acc
    # the moments of a step
    start = Breakdown(weights, acc, opt, kept, acts.loss_transient + cast_copies + gathered + qlora_tmp)
    during = Breakdown(weights, max(acc, min(head_grad, grads)), opt, kept - acts.loss_saved + recompute,
                       acts.layer_transient + cast_copies + gathered + qlora_tmp)
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
    phase, peak = max(phases.items(), key=lambda kv: kv[1].total)
    # time: forward + backward (2× forward for weight and input gradients; frozen weights: input only)
    bwd = 2.0 if setup.method == "full" else 1.0
    # per GPU: tensor parallelism splits every matmul over tp GPUs, pipeline parallelism the layers over pp stages
    flops = acts.fwd_flops * (1 + bwd + (1 if setup.grad_checkpointing else 0)) / (setup.tp * setup.pp)
    ckpt = int(trainable * r + trainable * _state_bytes(setup.optimizer, state_dtype)) if setup.method != "full" else \
        int(P * r + P * _state_bytes(setup.optimizer, state_dtype))
    return Estimate(setup, P, trainable, peak.total, peak, phase, weights, ckpt, flops, acts.tokens, acts.unit,
                    tuple(notes), acts.elementwise_bytes)


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
