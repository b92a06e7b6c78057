"""What one training step's forward keeps for backward, per GPU, family by family. PURE.

Saved activations are counted tensor by tensor from the reference implementations (Hugging Face
transformers, torchvision, diffusers, LitGPT), per layer, in the dtype each tensor has under the chosen
precision; the method and sources are in docs/fit.md. Korthikanti et al. 2022 give the same structure for
Megatron's fused kernels: s·b·h·(34 + 5·a·s/h) bytes per layer in 16-bit.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from envman.fit.architectures import Arch
from envman.fit.runspec import FLUX_T5_TOKENS, Setup, default_seq, dtype_bytes, trainable_linears


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
    positions: int = 0  # rows of the residual stream, where `tokens` counts samples (a ViT: images × (patches + 1))


def act_bytes(setup: Setup) -> tuple[int, int, bool]:
    """(residual-stream dtype, elementwise-output dtype, does every frozen linear keep its input?).

    The residual stream has the embedding's dtype: fp32 master weights under autocast, the loaded dtype of a
    frozen PEFT base, fp32 again after prepare_model_for_kbit_training (QLoRA). bitsandbytes' 4-bit linear
    casts its input to the bf16 compute dtype and returns its output in the input's dtype; before 0.43.2 its
    MatMul4Bit also kept that input for backward (ctx.tensors = (A, B)) though backward never reads it —
    bitsandbytes PR #1270 dropped it (peft/utils/other.py; bitsandbytes/nn/modules.py Linear4bit)."""
    r, c, _, mixed = dtype_bytes(setup.precision)
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
    _, c, _, _ = dtype_bytes(setup.precision)
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


TORCHTUNE_LOSS_CHUNKS = 8  # LinearCrossEntropyLoss(num_output_chunks=8), torchtune's default


def _loss_terms(arch: Arch, setup: Setup, T: int, b: int, c: int) -> tuple[int, int, int]:
    """(saved until the loss backward, extra alive at its start, extra alive during its forward) for a
    vocabulary-sized head."""
    V = arch.vocab
    if not V or arch.task not in ("causal-lm", "masked-lm"):
        return 0, 0, 0
    if setup.loss == "fused":
        # flash-attention's Triton cross-entropy (Dao-AILab/flash-attention@058ad35a3914
        # flash_attn/ops/triton/cross_entropy.py CrossEntropyLoss): one kernel reads the logits in their own dtype,
        # saves them with the fp32 log-sum-exp per row (save_for_backward(logits, lse, labels)); with
        # inplace_backward=True the backward writes the gradient into the logits (dlogits = logits): no fp32 copy,
        # no gradient-sized temporary. The forward's temporaries are per row (losses, lse, z_losses: fp32)
        kept = T * V * c + T * 4
        return kept, 0, 3 * T * 4
    if setup.loss == "fp32-chunked":
        # torchtune's LinearCrossEntropyLoss (pytorch/torchtune@bd2a0fc7c314 torchtune/modules/loss/
        # cross_entropy_loss.py): per chunk of tokens the output projection, logits.float() and cross_entropy; every
        # chunk's fp32 log_softmax output is saved; the backward's two fp32 gradients (and the forward's 16-bit
        # logits and their fp32 copy) exist for one chunk at a time
        chunk = -(-T // TORCHTUNE_LOSS_CHUNKS) * V
        return T * V * 4, 2 * chunk * 4, chunk * (c + 4)
    if setup.compile and setup.compile_scope == "model" and setup.loss == "fp32":
        # compiled with the model: logits.float() and log_softmax are recomputed from the logits (saved in their
        # dtype) and the per-row max and sum; one fused kernel writes the logits' gradient in their dtype
        return T * V * c + T * 8, T * V * c, 0
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
    # autocast casts an activation once per consumer; Inductor's graph CSE (fx_graph_cse) leaves one cast
    copies = len(need_x) if ((mixed and not setup.compile) or (quant_keeps and r != c)) else min(1, len(need_x))
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


def _compile_drops(arch: Arch, setup: Setup, kind: str, T: int, r: int, e: int, frozen: bool) -> dict[str, int]:
    """Per layer, what eager saves and a compiled layer recomputes in backward (AOTAutograd's min-cut partitioner,
    pytorch/pytorch@c28ba8e5893e torch/_functorch/partitioners.py should_ban_recomputation: pointwise ops and
    casts recomputed; matmuls, SDPA, random ops, a matmul's input and a norm's statistics saved; docs/fit.md)."""
    if not setup.compile:
        return {}
    h, f = arch.hidden, arch.ffn
    if kind == "gpt2":  # gelu_new's tanh formula: its input (c_fc's output) and output (c_proj's input) stay
        return {"gelu_new's intermediates": 3 * T * f * e}
    if kind != "llama":  # nn.GELU/LayerNorm (BERT, ViT): what eager saves is what backward's matmuls need
        return {}
    norms = 4 if arch.variant == "gemma2" else 2
    eager_norm = _rms_in(setup, T, h, r) + (T * h * r if not frozen else 0)
    ffn = T * (arch.experts_per_tok * arch.expert_ffn + arch.shared_ffn) if arch.experts else T * f
    return {"RMSNorm's fp32 copies and normalised outputs": norms * max(0, eager_norm - T * h * r - T * 4),
            "SiLU's outputs": ffn * e}


def _transformer(arch: Arch, setup: Setup, b: int, s: int, *, kind: str) -> Acts:
    """Per-layer saved tensors of the Hugging Face GPT-2 / Llama / BERT / ViT blocks (eager attention)."""
    _, c, _, mixed = dtype_bytes(setup.precision)
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
    ln = T * h * r + T * 8  # a LayerNorm's input, mean and rstd
    drop = T * h * _mask(setup, c) if p_hid > 0 else 0
    if kind == "llama":
        norm = _rms_in(setup, T, h, r) + (T * h * r if not frozen else 0)  # RMSNorm: input, rstd, normalised
        norms = norm * (2 if arch.variant == "gemma2" else 1)  # gemma2: post-attention and post-MLP norms too
        layer = (norms + lin_in(("q_proj", "k_proj", "v_proj")) + attn_core + probs + lin_in(("o_proj",), hq)
                 + _fused_qkv(arch, setup, T, c, targets) + norms + _mlp(arch, T, c, e, frozen, targets, lin_in, quant_keeps))
    elif kind == "gpt2":
        layer = (ln + lin_in(("c_attn",)) + attn_core + probs + lin_in(("c_proj",)) + drop
                 + ln + lin_in(("c_fc",)) + 4 * T * f * c + T * f * c + drop)  # gelu_new: 4 saved tensors
    else:  # bert (post-LN) and vit (pre-LN): same tensors
        layer = (lin_in(("query", "key", "value")) + attn_core + probs + lin_in(("attention.output.dense",))
                 + drop + ln + lin_in(("intermediate.dense",)) + 2 * T * f * c + drop + ln)
    drops = _compile_drops(arch, setup, kind, T, r, e, frozen)
    layer -= sum(drops.values())
    # outside the layers
    extra = 0
    if kind == "llama":
        extra = _rms_in(setup, T, h, r) + T * h * r + T * h * c + 2 * s * d * r  # final norm, lm_head input, rope
        if "lm_head" in targets:  # LoRA on the head: its A output (and dropout output + mask)
            extra += T * setup.lora_rank * c + (T * h * (c + 1) if setup.lora_dropout else 0)
    elif kind == "gpt2":
        extra = (T * h * _mask(setup, r) if p_hid > 0 else 0) + ln + T * h * c
    elif kind == "bert":  # embeddings LN + dropout; MLM head: dense in, gelu in, LayerNorm in, decoder in
        extra = ln + (T * h * _mask(setup, r) if p_hid > 0 else 0) + 3 * T * h * c + T * h * c
    elif kind == "vit":
        extra = ln + b * h * c
    if arch.task == "sequence-classification" and kind == "bert":  # pooler + classifier: no vocabulary terms
        extra = extra - 3 * T * h * c - T * h * c + 2 * b * h * c
    loss_saved, loss_transient, loss_forward = _loss_terms(arch, setup, T, b, c)
    saved = L * layer + extra + loss_saved
    # per token: QKᵀ and probs·V; a packed row attends within each document (flash_attn_varlen_func's cu_seqlens)
    attn_flops = 4 * min(s, setup.packed or s) * hq * L
    fwd = T * (2 * arch.flop_params + attn_flops)  # ViT: counts patch embedding and head per token (< 2%)
    ffn_t = T * (arch.experts_per_tok * arch.expert_ffn + arch.shared_ffn) if arch.experts else T * f
    layer_transient = 2 * max(ffn_t * e, S * c if setup.attention == "eager" else 0)
    quant_in = _quant_inputs(arch, setup, T, r, c) if quant_keeps and kind == "llama" else 0
    return Acts(saved, layer, loss_saved, loss_transient, layer_transient, T, "tokens", float(fwd),
                _compile_note(arch, setup, b, s, kind, layer, drops, loss_saved),
                quant_inputs=quant_in, loss_forward=loss_forward)


def _compile_note(arch: Arch, setup: Setup, b: int, s: int, kind: str, layer: int, drops: dict[str, int],
                  loss_saved: int) -> tuple[str, ...]:
    """Which tensors compiling drops against the same step run eagerly: over all layers, or the one layer
    recomputed at a time under checkpointing."""
    if not setup.compile:
        return ()
    eager = _transformer(arch, replace(setup, compile=False), b, s, kind=kind)
    n = 1 if setup.grad_checkpointing else arch.layers
    parts = {k: n * v for k, v in drops.items()}
    parts["autocast's repeated casts"] = n * (eager.per_layer - layer - sum(drops.values()))
    parts["the loss's fp32 log-softmax"] = eager.loss_saved - loss_saved
    dropped = "; ".join(f"{name} {v / 2**30:.2f} GiB" for name, v in parts.items() if v > 0) or "nothing"
    scope = "each block" if setup.compile_scope == "blocks" else "the model and its loss"
    per = " (the checkpointed layer's)" if setup.grad_checkpointing else ""
    return (f"torch.compile: {scope} compiled; AOTAutograd's min-cut partitioner recomputes pointwise ops in backward; "
            f"not saved{per}: {dropped}; still saved: matmul and attention inputs and outputs, norm statistics, "
            "dropout masks (random ops are never recomputed)",)


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
    _, c, _, _ = dtype_bytes(setup.precision)
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
            if arch.variant == "basic":
                step = _basic_block(b, c, cin, w, rout)
                profile.append(step[:3])
                flops, ew = flops + step[3], ew + step[4]
                res, cin = rout, w
                continue
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
    return Acts(saved, 0, 0, 0, 0, b, "images", float(b * flops), CNN_COMPILED if setup.compile else (),
                profile=tuple(profile), elementwise_bytes=b * ew * c)


# the min-cut partitioner's rules (_compile_drops) applied to a convolution block
CNN_COMPILED = ("torch.compile: a convolution block saves what eager saves: BatchNorm's input is a convolution's output "
                "(never recomputed) and ReLU's output the next convolution's input (read by its backward)",)


def _basic_block(b: int, c: int, cin: int, w: int, rout: int) -> tuple[int, int, int, int, int]:
    """transformers' ResNetBasicLayer (ResNet-18/34): conv 3×3 (stride) → BN → ReLU → conv 3×3 → BN, a 1×1
    conv + BN shortcut where the width or resolution changes, the add, ReLU (modeling_resnet.py
    ResNetBasicLayer, ResNetConvLayer, ResNetShortCut). Kept as in the bottleneck count: each BN's input, each
    ReLU's output, the shortcut BN's input. (saved, params, backward temporaries, FLOPs per sample, elementwise
    elements per sample)."""
    short = cin != w
    plane = w * rout * rout
    saved = 2 * plane + 2 * plane + (plane if short else 0)
    params = 9 * cin * w + 9 * w * w + 4 * w + ((cin * w + 2 * w) if short else 0)
    flops = 2 * (9 * cin * w + 9 * w * w + (cin * w if short else 0)) * rout * rout
    ew = BN_RELU_PASSES * 2 * plane + ADD_PASSES * plane + (BN_PASSES * plane if short else 0)
    return b * saved * c, params, 2 * b * plane * c, flops, ew


def _diffusion(arch: Arch, setup: Setup, b: int) -> Acts:
    """A UNet / ControlNet / Flux step (envman/fit/diffusion.py): latents from the frozen VAE, text embeddings
    from the frozen text encoders, an MSE loss on the predicted noise (small next to the activations)."""
    from envman.fit import diffusion

    r, c, _, mixed = dtype_bytes(setup.precision)
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
        _, c, _, _ = dtype_bytes(setup.precision)
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
            acts = replace(acts, notes=acts.notes + (f"{arch.variant}: expert routing modelled after transformers' "
                                                     "eager loop; not validated against a trace",))
        return acts
    if arch.family == "vit":
        size = setup.image_size or arch.image_size
        s = (size // arch.patch_size) ** 2 + 1
        acts = _transformer(arch, setup, b, s, kind="vit")
        return replace(acts, unit="images", tokens=b, positions=b * s)
    if arch.towers:  # clip / whisper: the towers as BERT-style encoders (not validated against a trace)
        eager = replace(setup, compile=False)  # not modelled compiled: a note says the estimate is eager's
        parts = [_transformer(t, eager, b, default_seq(arch, setup) if t.vocab else
                              ((t.image_size // t.patch_size) ** 2 + 1 if t.patch_size else t.max_positions),
                              kind="bert") for t in arch.towers]
        return Acts(sum(p.saved for p in parts), max(p.per_layer for p in parts), sum(p.loss_saved for p in parts),
                    max(p.loss_transient for p in parts), max(p.layer_transient for p in parts), b, "samples",
                    sum(p.fwd_flops for p in parts),
                    (f"{arch.family}: activations modelled as plain encoder towers; not validated against a trace",))
    return Acts(0, 0, 0, 0, 0, b * (setup.seq or 0), "tokens", 2.0 * arch.params * b * (setup.seq or 0),
                ("--params without a config: activations are not estimated (give --model or a config.json)",))
