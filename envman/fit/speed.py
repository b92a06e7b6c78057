"""How long a training step takes on a GPU: its FLOPs at the GPU generation's published utilisation, or the bytes
it moves at the memory bandwidth, whichever is longer (docs/fit.md: Time). The figures: matrices/gpu_perf.yaml."""

from __future__ import annotations

from envman.fit.architectures import Arch
from envman.fit.catalog import GpuSpec, perf_constants, utilisation
from envman.fit.runspec import Estimate, dtype_bytes
from envman.model import Cc


def precision_key(precision: str, arch: Arch | None = None) -> str:
    if precision == "fp32":
        # cuDNN runs fp32 convolutions on TF32 tensor cores by default (torch.backends.cudnn.allow_tf32 = True);
        # matmuls stay fp32 (torch.backends.cuda.matmul.allow_tf32 = False)
        return "tf32" if arch is not None and arch.family == "resnet" else "fp32"
    return "bf16" if precision.startswith("bf16") else "fp16"


def traffic(arch: Arch, est: Estimate) -> float:
    """Bytes a step moves through GPU memory: saved activations (gpu_perf.yaml activation_passes), the
    weights read three times (forward, input and weight gradients), the optimizer's read-modify-write."""
    passes = float(perf_constants().get("activation_passes", 8))
    b = est.breakdown
    return passes * b.activations + 3 * est.weights_bytes + 2 * (b.optimizer + b.gradients)


# families whose layer is a pre-/post-norm transformer block as transformers writes it (elementwise_bytes below)
_BLOCKS = ("gpt2", "llama", "bert", "vit")


def _per_token_layer(family: str, h: int, f: int, r: int, c: int) -> float:
    """Bytes one layer's memory-bound kernels move per token, forward and backward: the two residual adds (read
    two, write one), the two norms (read the input, write the output — fp32 under CUDA autocast, whose fp32 list
    has layer_norm — and, under autocast, the cast of that output for the next matmul), the MLP's activation
    (GELU: read, write; SwiGLU: SiLU and the product); RMSNorm as transformers' LlamaRMSNorm runs it eagerly
    (upcast to fp32, the variance pass, the normalised output, the cast back, the weight). The backward of each
    reads the output's gradient and the saved input and writes the input's gradient: 1.5× the forward's
    passes. RoPE, the weights' own casts and the loss are left out."""
    mixed = r != c
    o = 4 if mixed else c  # the norm's output dtype (autocast: fp32)
    if family == "llama":
        norm = (0 if r == 4 else r + 4) + 8 + 4 + 8 + (4 + c) + 2 * c  # to(fp32), pow, mean, mul, to(dtype), weight
        act = 5 * c * f  # SiLU (read, write) and the product (read two, write one)
    else:
        norm = r + o + (4 + c if mixed else 0)
        act = 2 * c * f
    return 2.5 * (2 * 3 * r * h + 2 * norm * h + act)


def _source_share(gpu: GpuSpec, key: str, util: float, r: int, c: int) -> float:
    """The share of the measured run's step that its memory-bound kernels took, had it run on ``gpu``: the
    utilisation figure includes it (gpu_perf.yaml utilisation.generations[].shape)."""
    gen = next((g for g in perf_constants().get("generations") or []
                if gpu.cc is not None and gpu.cc >= Cc.parse(str(g["cc_min"]))), None)
    shape = (gen or {}).get("shape") if key != "fp32" else None
    tf = gpu.peak_tflops(key)
    if not isinstance(shape, dict) or not gpu.bandwidth or not tf:
        return 0.0
    h, f, kv = int(shape["hidden"]), int(shape["ffn"]), int(shape.get("kv_width") or shape["hidden"])
    mlp = 3 * h * f if shape["family"] == "llama" else 2 * h * f
    flops = 6 * (2 * h * h + 2 * h * kv + mlp)  # forward and backward matmuls per token per layer
    ew = _per_token_layer(str(shape["family"]), h, f, r, c) / gpu.bandwidth
    mm = flops / (tf * 1e12 * util)
    return ew / mm if mm else 0.0


def elementwise_bytes(arch: Arch, est: Estimate) -> int:
    """Bytes a transformer step's memory-bound kernels move (``_per_token_layer`` × tokens × layers). The
    utilisation figures are measured on models with 1.5k–26k hidden sizes, where these kernels are a few
    percent of a step; at a hidden size of a few hundred they are not, and eager PyTorch runs them in order
    with the matmuls."""
    if arch.family not in _BLOCKS or arch.variant not in ("", "gemma2") or not arch.hidden or not arch.layers:
        return 0
    s = est.setup
    r, c, _, _ = dtype_bytes(s.precision)
    tokens = est.samples_tokens
    if arch.family == "vit" and arch.patch_size:
        tokens *= ((s.image_size or arch.image_size) // arch.patch_size) ** 2 + 1
    per = _per_token_layer(arch.family, arch.hidden, arch.ffn or 4 * arch.hidden, r, c)
    return int(per * tokens * arch.layers / max(1, s.tp * s.pp))


def optimizer_bytes(est: Estimate) -> float:
    """Bytes the optimizer's step moves: its passes over a state-sized tensor (gpu_perf.yaml optimizer_passes,
    read from torch.optim), each ``optimizer / states`` bytes on this GPU; 0 for optimizers not read."""
    s = est.setup
    passes = (perf_constants().get("optimizer_passes") or {}).get(s.optimizer, {}).get(s.optimizer_impl, 0)
    states = {"adamw": 2, "sgd-momentum": 1}.get(s.optimizer, 0)
    return passes * est.breakdown.optimizer / states if states else 0.0


def step_time(arch: Arch, est: Estimate, gpu: GpuSpec, mfu: float | None) -> tuple[float | None, float | None, str]:
    """(seconds per step per GPU, the utilisation used, what bounds it). The optimizer's step follows the
    backward on the same stream: its memory-bound time adds."""
    key = precision_key(est.setup.precision, arch)
    if key == "tf32" and not gpu.peak_tflops("tf32"):
        key = "fp32"  # no TF32 before Ampere: cuDNN runs fp32 convolutions on the CUDA cores
    tf = gpu.peak_tflops(key)
    if not tf or not est.train_flops:
        return None, None, ""
    util = mfu if mfu is not None else utilisation(gpu.cc, "fp32" if key == "fp32" else "bf16")[0]
    compute = est.train_flops / (tf * 1e12 * util)
    ew = est.elementwise_bytes
    if not ew and gpu.bandwidth and (ew := elementwise_bytes(arch, est)):
        # the measured run's own memory-bound share is inside the utilisation: the matmuls took the rest
        compute *= max(0.0, 1 - _source_share(gpu, key, util, *dtype_bytes(est.setup.precision)[:2]))
    if gpu.bandwidth:
        compute += optimizer_bytes(est) / gpu.bandwidth
    if ew and gpu.bandwidth:
        # a CNN's convolutions and its BatchNorm/ReLU/add kernels run one after another on one stream (eager
        # PyTorch: kernels on a stream execute in order), so their times add: convolutions at the compute
        # rate, the elementwise kernels at the memory bandwidth (activations.py: BN_RELU_PASSES)
        step = compute + ew / gpu.bandwidth
        memory = traffic(arch, est) / gpu.bandwidth if not est.elementwise_bytes else 0.0
        return max(step, memory), util, ("compute + memory-bandwidth" if step >= memory else "memory-bandwidth")
    memory = traffic(arch, est) / gpu.bandwidth if gpu.bandwidth else 0.0
    return max(compute, memory), util, ("compute" if compute >= memory else "memory-bandwidth")
