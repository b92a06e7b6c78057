"""What a step holds beyond its allocated peak: the caching allocator's reserve and the CUDA context. PURE.

``max_memory_allocated()`` counts the bytes of live tensors; ``max_memory_reserved()`` counts the segments the
caching allocator took from CUDA for them; nvidia-smi adds the CUDA context. The allocator's rules
(c10/cuda/CUDACachingAllocator.cpp, the constants in matrices/gpu_perf.yaml ``allocator:``): every block is
rounded up to 512 B; a request up to 1 MiB is carved from the small pool's 2 MiB segments; one above 1 MiB and
below 10 MiB from a 20 MiB segment of the large pool; a larger one gets a segment of its own, rounded up to
2 MiB. A block serves only the stream and the pool that made it.

This module applies those rules to the tensors alive at the estimate's peak (model states per parameter tensor,
saved activations as (tokens × hidden) blocks, the temporaries as one request each): the segments that hold
them, each tensor placed once. What it does not see: blocks cached from earlier moments of the step that a
tensor of another size cannot reuse (fragmentation: 0.2–0.5 GB in bench/alloc_replay.py's replays of real
loops, docs/fit-allocator.md), kernel workspaces, the libraries' kernels the context loads at their first
call. The margin (``--margin``) is what covers those: a run whose reserved estimate is inside the card but
within the margin is "tight", not "does not fit".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from envman.fit.architectures import Arch
from envman.fit.runspec import Estimate, dtype_bytes, trainable_linears
from envman.fit.states import gathered_layers, unit_params

# states per trainable parameter tensor (torch.optim / bitsandbytes keep one tensor per state)
_STATES = {"adamw": 2, "adamw-8bit": 2, "paged-adamw": 2, "sgd": 0, "sgd-momentum": 1, "adafactor": 2, "lion": 1}


@dataclass(frozen=True)
class AllocatorRules:
    min_block: int
    small_size: int
    small_segment: int
    large_segment: int
    min_large_alloc: int
    round_large: int
    context_bytes: int


@dataclass(frozen=True)
class Reserve:
    allocated: int  # the estimate's peak (max_memory_allocated)
    rounding: int  # segments − tensors: what max_memory_reserved adds by the allocator's rules
    context: int  # the CUDA context (nvidia-smi counts it; max_memory_reserved does not)

    @property
    def reserved(self) -> int:
        """What ``max_memory_reserved()`` would show."""
        return self.allocated + self.rounding

    @property
    def on_card(self) -> int:
        """What nvidia-smi would show for the process."""
        return self.reserved + self.context


def segments(sizes: Iterable[tuple[int, int]], rules: AllocatorRules) -> int:
    """Bytes of the segments that hold ``sizes`` ((bytes, count) pairs), each tensor placed once.

    A request of 10 MiB or more is a segment of its own, rounded up to 2 MiB; smaller ones are blocks split off
    their pool's shared segments (should_split: a cached block serves any request it holds), so a pool wastes at
    most the tail of its last segment."""
    total, small, mid = 0, 0, 0
    for size, count in sizes:
        if size <= 0 or count <= 0:
            continue
        block = -(-size // rules.min_block) * rules.min_block
        if size <= rules.small_size:
            small += block * count
        elif size < rules.min_large_alloc:
            mid += block * count
        else:
            total += -(-size // rules.round_large) * rules.round_large * count
    total += -(-small // rules.small_segment) * rules.small_segment
    return total + -(-mid // rules.large_segment) * rules.large_segment


def _param_tensors(arch: Arch) -> list[tuple[int, int]]:
    """(elements, count) of the model's parameter tensors: its linears, the embedding, the rest as one per layer."""
    out = [(lin.fan_in * lin.fan_out, lin.count) for lin in arch.linears]
    shared = arch.tied and any(lin.name == "lm_head" for lin in arch.linears)  # the head is the embedding
    if arch.vocab and arch.hidden and not shared:
        out.append((arch.vocab * arch.hidden, 1))
    rest = arch.params - sum(n * k for n, k in out)
    if rest > 0:  # norms, biases, positions: spread over the layers
        out.append((rest // max(arch.layers, 1), max(arch.layers, 1)))
    return out


def _trainable_tensors(arch: Arch, est: Estimate) -> list[tuple[int, int]]:
    s = est.setup
    if s.method in ("lora", "qlora"):
        out: list[tuple[int, int]] = []
        for lin in trainable_linears(arch, s):
            out += [(s.lora_rank * lin.fan_in, lin.count), (s.lora_rank * lin.fan_out, lin.count)]
        return out
    if s.method == "freeze":
        return [(est.trainable_params, 1)]
    return _param_tensors(arch)


def _spread(tensors: list[tuple[int, int]], nbytes: int, per_tensor: int = 1) -> list[tuple[int, int]]:
    """``nbytes`` spread over the tensors' shapes in proportion to their elements (``per_tensor`` each)."""
    elems = sum(n * k for n, k in tensors)
    if nbytes <= 0 or elems <= 0 or per_tensor <= 0:
        return []
    scale = nbytes / elems / per_tensor
    return [(max(1, int(n * scale)), k * per_tensor) for n, k in tensors if n]


def _activation_tensors(arch: Arch, est: Estimate) -> list[tuple[int, int]]:
    """Saved activations as the blocks most of what a layer keeps is: (tokens × hidden) in the compute dtype."""
    nbytes = est.breakdown.activations
    c = 4 if est.setup.precision == "fp32" else 2
    unit = est.samples_tokens * arch.hidden * c if est.unit == "tokens" and arch.hidden else 0
    if nbytes <= 0:
        return []
    if unit <= 0:  # images: one block per layer (or the whole, without layers)
        layers = max(arch.layers, 1)
        return [(nbytes // layers, layers)]
    whole, rest = divmod(nbytes, unit)
    return [(unit, whole)] + ([(rest, 1)] if rest else [])


def copy_in_pool(arch: Arch, est: Estimate) -> int:
    """What the collectives' stream pool holds beyond the gathered parameters counted at the peak; no tensor of the
    default stream can reuse it. FSDP2 (_fsdp_collectives.py foreach_all_gather): the largest unit's all-gather
    output (a root unit kept gathered all step is allocated, states.py). DeepSpeed ZeRO-3 gathers on its allgather
    stream (deepspeedai/DeepSpeed@00a31c99 partitioned_param_coordinator.py __all_gather_params_): the layers'
    linears and the vocabulary-sized embedding/head gather, cached side by side; the estimate counts the larger."""
    s = est.setup
    if s.shard not in ("fsdp", "zero3") or s.deepspeed != (s.shard == "zero3") or s.gpus <= s.tp * s.pp or not arch.layers:
        return 0
    c, layer = dtype_bytes(s.precision)[1], unit_params(arch, s)
    if s.deepspeed:
        return min(gathered_layers(arch, s, 0, layer, 2, 0), 2 * arch.vocab * arch.hidden // (s.tp * s.pp))
    root = 0 if s.fsdp_root_unsharded else (arch.params // (s.tp * s.pp) - arch.layers * layer) * c
    return max(gathered_layers(arch, s, 0, layer, c, 0) // 2, root)


def reserve(arch: Arch, est: Estimate, rules: AllocatorRules) -> Reserve:
    """The reserved estimate of ``est``'s peak: each category's tensors packed by the allocator's rules."""
    b = est.breakdown
    states = _STATES.get(est.setup.optimizer, 2)
    shards = max(1, est.setup.tp * est.setup.pp)
    trainable = _trainable_tensors(arch, est)
    parts = (_spread(_param_tensors(arch), b.weights) + _spread(trainable, b.gradients) + _spread(trainable, b.optimizer, states)
             + _activation_tensors(arch, est) + [(b.temporaries, 1)])
    if shards > 1 or est.setup.shard in ("zero3", "fsdp", "zero1", "zero2"):
        # sharded and flattened states: DeepSpeed keeps them in a few flat buffers, FSDP2 one shard per
        # parameter; the rounding per tensor is then at most one block each: count the bytes as allocated
        parts = _activation_tensors(arch, est) + [(b.temporaries, 1)]
        held = b.weights + b.gradients + b.optimizer + copy_in_pool(arch, est)
    else:
        held = 0
    placed = segments(parts, rules) + held
    return Reserve(est.peak_bytes, max(0, placed - est.peak_bytes), rules.context_bytes)
