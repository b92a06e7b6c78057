"""How long a training step takes on a GPU: its FLOPs at the GPU generation's published utilisation, or the bytes
it moves at the memory bandwidth, whichever is longer (docs/fit.md: Time). The figures: matrices/gpu_perf.yaml."""

from __future__ import annotations

from envman.fit.architectures import Arch
from envman.fit.catalog import GpuSpec, perf_constants, utilisation
from envman.fit.runspec import Estimate


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


def step_time(arch: Arch, est: Estimate, gpu: GpuSpec, mfu: float | None) -> tuple[float | None, float | None, str]:
    """(seconds per step per GPU, the utilisation used, what bounds it)."""
    key = precision_key(est.setup.precision, arch)
    if key == "tf32" and not gpu.peak_tflops("tf32"):
        key = "fp32"  # no TF32 before Ampere: cuDNN runs fp32 convolutions on the CUDA cores
    tf = gpu.peak_tflops(key)
    if not tf or not est.train_flops:
        return None, None, ""
    util = mfu if mfu is not None else utilisation(gpu.cc, "fp32" if key == "fp32" else "bf16")[0]
    compute = est.train_flops / (tf * 1e12 * util)
    if est.elementwise_bytes and gpu.bandwidth:
        # a CNN's convolutions and its BatchNorm/ReLU/add kernels run one after another on one stream (eager
        # PyTorch: kernels on a stream execute in order), so their times add: convolutions at the compute
        # rate, the elementwise kernels at the memory bandwidth (activations.py: BN_RELU_PASSES)
        return compute + est.elementwise_bytes / gpu.bandwidth, util, "compute + memory-bandwidth"
    memory = traffic(arch, est) / gpu.bandwidth if gpu.bandwidth else 0.0
    return max(compute, memory), util, ("compute" if compute >= memory else "memory-bandwidth")
