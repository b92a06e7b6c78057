"""The training run `envman fit` describes, and what its estimate returns. PURE: dataclasses in, dataclasses out.

A ``Setup`` is one run as the stacks name it (matrices/fit_stacks.yaml: precision, method, sharding, the
framework's memory semantics); ``validate`` refuses what no run can be, naming the field.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from envman.fit.architectures import Arch

PRECISIONS = ("fp32", "bf16", "fp16", "bf16-mixed", "fp16-mixed")
OPTIMIZERS = ("adamw", "adamw-8bit", "paged-adamw", "sgd", "sgd-momentum", "adafactor", "lion")
METHODS = ("full", "lora", "qlora", "freeze")
SHARDS = ("none", "ddp", "zero1", "zero2", "zero3", "fsdp")
ATTENTION = ("eager", "flash")
LOSSES = ("fp32", "compute", "fused", "fp32-chunked")
# --loss: what the loss keeps, named as users know it → Setup.loss (hf: transformers upcasts the logits to fp32;
# chunked: LitGPT's chunked cross-entropy in the compute dtype; fused: flash-attention's in-place Triton kernel;
# chunked-fp32: torchtune's LinearCrossEntropyLoss, each chunk's logits upcast to fp32)
LOSS_FLAGS = {"hf": "fp32", "chunked": "compute", "fused": "fused", "chunked-fp32": "fp32-chunked"}
# how a stack's checkpoint reaches the GPU (matrices/fit_stacks.yaml `load:`, each with its source)
LOADS = {"to-device": "the model moved to the GPU as the step stores it",
         "quantize-while-loading": "each 16-bit weight quantised on the GPU as it is loaded, one at a time",
         "quantize-after": "the whole 16-bit model on the GPU, then each linear replaced by its 4-bit copy",
         "meta": "built on the meta device, each GPU loading only its shards"}
OFFLOAD = ("none", "optimizer", "params")
# when the training loop frees the last step's gradients (docs/fit-allocator.md): before the next forward
# (optimizer.zero_grad() after step(), set_to_none=True: PyTorch >= 2.0's default); after the next forward,
# just before backward (rasbt/pytorch-memory-optim's loop); never (zero_grad(set_to_none=False), PyTorch < 2.0's
# default: the gradients are zeroed in place and stay allocated through every forward and backward)
ZERO_GRAD = ("before-forward", "before-backward", "keep")

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
    loss: str = "fp32"  # LOSSES: what the loss keeps (LOSS_FLAGS names each as --loss does)
    deepspeed: bool = False  # DeepSpeed: a 16-bit module, fp32 master + moments (+ fp32 grads), partitioned by ZeRO
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
    optimizer_in_backward: bool = False  # each parameter's step runs in its AccumulateGrad hook, then its grad is freed
    activation_offload: bool = False  # torchtune's OffloadActivations: saved tensors copied to CPU, brought back in backward
    load: str = "to-device"  # how the checkpoint reaches the GPU (LOADS)
    packed: int = 0  # each row of seq tokens packed from documents of this many tokens, attended apart (varlen)
    compile: bool = False  # torch.compile with Inductor: AOTAutograd's min-cut partitioner picks what is saved
    compile_scope: str = "model"  # model: the loss inside the graph (HF's torch_compile); blocks: each block only


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
    phase: str  # load | backward-start | backward | backward-end | optimizer-step | forward-end | encode | loss
    weights_bytes: int  # the model's weights as stored for training (per GPU)
    checkpoint_bytes: int  # a resumable checkpoint: trainable weights + optimizer state (all GPUs together)
    train_flops: float  # per step, per GPU
    samples_tokens: int  # tokens (or images) per step per GPU
    unit: str  # tokens | images
    notes: tuple[str, ...] = field(default=())
    elementwise_bytes: int = 0  # bytes the step's memory-bound kernels (BatchNorm, ReLU, residual adds) move
    load_bytes: int = 0  # allocated while the checkpoint loads, before the first step


class SetupError(ValueError):
    """A setup the estimator cannot honour; the message is one line for the user, the hint where to go."""

    def __init__(self, message: str, hint: str):
        super().__init__(message)
        self.hint = hint


def dtype_bytes(prec: str) -> tuple[int, int, int, bool]:
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
    if arch.family == "params" and setup.method != "full":
        raise SetupError(f"--method {setup.method} needs the model's layers, and --params gives only a parameter count",
                         "--model NAME or --model path/to/config.json (its linear layers); with --params: --method full")
    if setup.offload != "none" and setup.shard in ("none", "ddp"):
        raise SetupError(f"--offload {setup.offload} needs a sharded run (DeepSpeed ZeRO or FSDP), not --shard {setup.shard}",
                         "--shard zero2 --offload optimizer (ZeRO-Offload, also on one GPU) or --shard zero3 --offload params")
    if setup.offload == "params" and setup.shard not in ("zero3", "fsdp"):
        raise SetupError(f"--offload params needs --shard zero3 or fsdp (ZeRO-{setup.shard[-1]} keeps the weights on "
                         "every GPU)", "--shard zero3 --offload params, or --offload optimizer")
    if arch.layers and setup.pp > arch.layers:
        raise SetupError(f"--pp {setup.pp}: more pipeline stages than this model's {arch.layers} layers",
                         f"--pp {arch.layers} at most (one layer per stage)")
    if setup.activation_offload and arch.family not in ("gpt2", "llama", "bert", "vit"):
        raise SetupError(f"--activation-offload is modelled for transformer blocks, not {arch.family}",
                         "drop --activation-offload for this model (its saved tensors are counted on the GPU)")
    if setup.optimizer_in_backward and (setup.accumulation > 1 or setup.shard not in ("none", "ddp")
                                        or setup.optimizer == "paged-adamw"):
        raise SetupError("--optimizer-in-backward steps each parameter as its gradient is made: no gradient "
                         "accumulation, no sharded or paged optimizer",
                         "drop --global-batch (or make it --batch × GPUs), --shard and paged-adamw, or drop "
                         "--optimizer-in-backward")
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
