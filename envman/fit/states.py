"""Weights, gradients and optimizer state per GPU: plain, quantised (QLoRA), sharded (ZeRO, FSDP) and offloaded.
PURE. Each stack's byte accounting, with the framework code it was read in, is in matrices/fit_stacks.yaml
and docs/fit.md.
"""

from __future__ import annotations

from dataclasses import replace

from envman.fit.architectures import Arch
from envman.fit.runspec import NF4_BYTES_PER_PARAM, QLORA_BYTES_PER_PARAM, Setup, dtype_bytes


def state_bytes(optimizer: str, state_dtype: int) -> float:
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
    r, _, gb, _ = dtype_bytes(setup.precision)
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
        _, c, _, mixed = dtype_bytes(setup.precision)
        weights += sum(t.params for t in arch.towers) * (c if mixed else r) + (trainable * 4 if setup.ema else 0)
    grads = trainable * (setup.adapter_bytes or gb) if setup.method in ("lora", "qlora") else trainable * gb
    opt = int(trainable * state_bytes(setup.optimizer, r))
    # optimizer temporaries: foreach AdamW/Lion keep a trainable-sized list; per-tensor loops the largest tensor
    per_tensor = 2 * min(arch.largest_param or trainable, trainable) * r
    opt_tmp = {"foreach": trainable * r, "fused": 0, "for-loop": per_tensor}[setup.optimizer_impl] \
        if setup.optimizer in ("adamw", "lion") else per_tensor if setup.optimizer == "adafactor" else 0
    if setup.optimizer == "paged-adamw":
        # bitsandbytes' paged optimizers keep their state in unified memory that the driver evicts to CPU RAM
        # when the GPU runs out (QLoRA paper §3): it does not have to fit beside the step's peak
        opt, opt_tmp = 0, 0
    return weights, grads, opt, opt_tmp, fp32_stored


def unit_params(arch: Arch, setup: Setup) -> int:
    """One transformer block's parameters per model-parallel GPU: not the embedding, and not an untied lm_head
    (the root unit's)."""
    head = arch.vocab * arch.hidden if arch.vocab and not arch.tied and arch.task == "causal-lm" else 0
    return (arch.params - arch.embedding_params - head) // arch.layers // (setup.tp * setup.pp) if arch.layers else 0


def gathered_layers(arch: Arch, setup: Setup, trainable: int, layer_params: int, c: int, gb: int) -> int:
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


def largest_trained(arch: Arch, setup: Setup) -> int:
    """The elements of the largest trained parameter tensor: the embedding or a linear (LoRA trains small adapters;
    a frozen backbone trains its head only, the last linear: count_trainable)."""
    if setup.method == "freeze":
        return max((lin.fan_in * lin.fan_out for lin in arch.linears[-1:]), default=0)
    if setup.method != "full":
        return 0
    sizes = [lin.fan_in * lin.fan_out for lin in arch.linears]
    return max(sizes + [arch.vocab * arch.hidden if arch.vocab else 0])


def _deepspeed_states(arch: Arch, setup: Setup, trainable: int, mp: int, n: int, layer_params: int):
    """DeepSpeed bf16/fp16: a 16-bit module; fp32 master, moments and fp32 gradient partitions (4 + K + 4
    bytes) split over the data-parallel GPUs (stage 1: 4Ψ + 16Ψ/N, its 16-bit gradients kept whole until the
    step; stage 2: 2Ψ + 18Ψ/N + the reduce bucket; stage3.py: 18Ψ/N)."""
    module = _deepspeed_module(arch, setup, trainable)
    master, gathered = int(trainable * (4 + state_bytes(setup.optimizer, 4)) / mp / n), 0
    if setup.shard == "zero3":
        # stage3.py: the gradient partition (grad_partitions_flat_buffer, allocated at init) is in
        # gradient_accumulation_dtype, which engine.get_data_types makes the 16-bit model dtype unless
        # data_types.grad_accum_dtype says otherwise; step() upcasts one sub-group's at a time
        # (_prepare_fp32_grad_for_sub_group: flatten(...).to(fp32), freed in _release_sub_group)
        weights, grads = module // mp // n, trainable * 2 // mp // n
        # the largest gather of a step is at the loss: partitioned_param_coordinator.py __params_to_release keeps
        # a parameter whose next use is within stage3_max_reuse_distance (1e9 elements), so the head gathered for
        # its forward stays gathered into its backward, and its 16-bit gradient — larger than the reduce bucket
        # (h² elements) — waits whole for its own reduce-scatter (stage3.py __add_grad_to_ipg_bucket)
        gathered = max(gathered_layers(arch, setup, trainable, layer_params, 2, 0),
                       2 * 2 * largest_trained(arch, setup) // mp)
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
        extra = largest_trained(arch, setup) // mp
        grads = trainable * 2 // mp // n + (setup.reduce_bucket + (extra if extra > setup.reduce_bucket else 0)) * 2
        note = (f"ZeRO-2 (DeepSpeed): 16-bit weights replicated; 16-bit gradients reduced bucket by bucket into "
                f"this GPU's partition; fp32 master, moments and gradient partitions split over {n} GPUs "
                "(2Ψ + 18Ψ/N + the bucket; DeepSpeed's estimator says 4Ψ + 16Ψ/N)")
    else:
        weights, grads = module // mp, trainable * 2 // mp
        note = (f"ZeRO-{setup.shard[-1]} (DeepSpeed): 16-bit weights and gradients replicated, fp32 master, "
                f"moments and gradient partitions split over {n} GPUs (DeepSpeed's estimator: 4Ψ + 16Ψ/N)")
    if setup.shard in ("none", "ddp"):
        # no ZeRO: FP16_Optimizer (fp16/fused_optimizer.py) step() copies every gradient to fp32 and flattens the
        # copies into one buffer, the fp16 gradients still alive: 8 bytes per parameter beside the states
        note = ("DeepSpeed without ZeRO (FP16_Optimizer): fp16 weights and gradients, fp32 flat master and moments, "
                "all replicated; step() flattens fp32 copies of the gradients")
        return weights, grads, master, gathered, trainable * 8 // mp, note
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


def model_states(arch: Arch, setup: Setup, trainable: int) -> tuple[int, int, int, int, int, int, list[str]]:
    """(weights, gradients, optimizer state, optimizer temporaries, gathered layers, autocast copies, notes),
    per GPU. Sources: the ZeRO paper §3 (2 + 2 + K), DeepSpeed's own estimators, PyTorch FSDP2's
    MixedPrecisionPolicy (sharded fp32 parameters, gradients and moments; bf16 unsharded layers)."""
    _, c, gb, mixed = dtype_bytes(setup.precision)
    P = arch.params
    weights, grads, opt, opt_tmp, fp32_stored = _base_states(arch, setup, trainable)
    notes: list[str] = []
    if setup.optimizer == "paged-adamw":
        notes.append("paged AdamW: its 32-bit state (8 B per trainable parameter) is paged to CPU RAM under pressure")
    mp = setup.tp * setup.pp  # model parallel: each GPU holds 1/(tp·pp) of every model state
    n = setup.gpus // mp  # data-parallel degree
    weights, grads, opt, opt_tmp = weights // mp, grads // mp, opt // mp, opt_tmp // mp
    layer_params = unit_params(arch, setup)
    gathered = 0
    if setup.shard in _SHARD_NOTES and not (setup.deepspeed and setup.shard != "fsdp"):
        notes.append(_SHARD_NOTES[setup.shard].format(n=n))
    if setup.deepspeed and setup.shard != "fsdp":
        zero = setup.shard in ("zero1", "zero2", "zero3")
        weights, grads, opt, gathered, opt_tmp, note = _deepspeed_states(arch, setup, trainable, mp, n if zero else 1,
                                                                         layer_params)
        notes.append(note)
    elif setup.shard in ("zero1", "zero2", "zero3", "fsdp"):
        opt, opt_tmp = opt // n, opt_tmp // n
        grads = grads if setup.shard == "zero1" else grads // n
        if setup.shard in ("zero3", "fsdp"):
            weights = weights // n
            # the layer computing and the one prefetched, unsharded in the compute dtype, and one layer's
            # unsharded gradients before its reduce-scatter
            gathered = gathered_layers(arch, setup, trainable, layer_params, c, gb)
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
