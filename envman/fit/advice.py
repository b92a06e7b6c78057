"""Levers for a run that does not fit: what each saves on THIS run, and what it costs. Pure.

Every lever is re-estimated with the same model (``estimate``), so "saves" is the difference of two peaks,
not a rule of thumb. Costs are stated from the sources in docs/fit.md.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache

from envman.fit.architectures import Arch
from envman.fit.estimate import estimate, max_micro_batch
from envman.fit.runspec import Estimate, Setup, SetupError


@dataclass(frozen=True)
class Lever:
    lever: str
    change: str  # the command-line change
    saves_bytes: int
    peak_bytes: int
    cost: str
    fits: bool  # the first target then fits (with the margin)
    tight: bool = False  # it does not fit with the margin, but inside the card (the verdict "tight")


def _candidates(arch: Arch, setup: Setup, budget: int, bf16_ok: bool,
                only: str | None = None) -> list[tuple[str, str, Setup, str]]:
    """Every lever that applies to this run (``only``: just that one, skipping the others' estimates)."""
    out: list[tuple[str, str, Setup, str]] = []
    transformer = arch.family not in ("resnet", "params")
    want = lambda name: only is None or only == name  # noqa: E731
    if setup.batch > 1 and arch.family != "params" and want("smaller micro-batch + gradient accumulation"):
        fit = max(1, max_micro_batch(arch, replace(setup, batch=1), budget, limit=setup.batch - 1)) if budget else 1
        # a divisor of the micro-batch, so that the same global batch is whole micro-steps (--global-batch)
        b = max(d for d in range(1, setup.batch) if setup.batch % d == 0 and d <= max(1, fit))
        steps = setup.accumulation * (setup.batch // b)
        dp = max(1, setup.gpus // (setup.tp * setup.pp))
        out.append(("smaller micro-batch + gradient accumulation",
                    f"--batch {b} --global-batch {b * steps * dp}",
                    replace(setup, batch=b, accumulation=steps),
                    f"none on the result (the same global batch of {b * steps * dp}); throughput drops if a batch "
                    f"of {b} leaves the GPU under-occupied"))
    if not setup.grad_checkpointing and transformer and setup.method != "freeze" and want("gradient checkpointing"):
        out.append(("gradient checkpointing", "--grad-checkpointing", replace(setup, grad_checkpointing=True),
                    "speed: one extra forward per step (about +33% step time); accuracy: none"))
    if transformer and setup.attention == "eager" and want("flash / memory-efficient attention"):
        out.append(("flash / memory-efficient attention", "--attention flash",
                    replace(setup, attention="flash"),
                    "none (exact attention, faster: attn_implementation='sdpa' or 'flash_attention_2'); needs "
                    "fp16/bf16 and a recent GPU for FlashAttention-2"))
    p = "bf16-mixed" if bf16_ok else "fp16-mixed"
    if setup.precision == "fp32" and want(f"{p} autocast"):
        out.append((f"{p} autocast", f"--precision {p}", replace(setup, precision=p),
                    "speed: faster on tensor cores; accuracy: on par for most training"
                    + ("" if bf16_ok else " (fp16 needs loss scaling)")))
    if setup.precision in ("fp32", "bf16-mixed", "fp16-mixed") and bf16_ok and want("pure bf16 weights and optimizer state"):
        out.append(("pure bf16 weights and optimizer state", "--precision bf16", replace(setup, precision="bf16"),
                    "accuracy: no fp32 master weights, small updates can round away (use Kahan summation / "
                    "stochastic rounding, or expect a small quality loss)"))
    if setup.optimizer in ("adamw", "lion") and setup.optimizer_impl == "foreach" and want("fused AdamW kernel"):
        out.append(("fused AdamW kernel", "--fused-optimizer", replace(setup, optimizer_impl="fused"),
                    "none: same update in one kernel (torch.optim.AdamW(..., fused=True)), without the "
                    "parameter-sized temporary of the foreach default"))
    if setup.optimizer == "adamw" and setup.method in ("full", "lora", "qlora") and want("8-bit AdamW (bitsandbytes)"):
        out.append(("8-bit AdamW (bitsandbytes)", "--optimizer adamw-8bit", replace(setup, optimizer="adamw-8bit"),
                    "accuracy: on par with 32-bit Adam in Dettmers et al. 2022; needs the bitsandbytes package"))
    if setup.method == "full" and transformer and (want("LoRA adapters") or want("QLoRA (4-bit base)")):
        targets = ("q_proj", "k_proj", "v_proj", "o_proj") if arch.family == "llama" else \
            ("c_attn",) if arch.family == "gpt2" else ("query", "value")
        lo = replace(setup, method="lora", lora_targets=targets)
        out.append(("LoRA adapters", f"--method lora --lora-targets {','.join(targets)}", lo,
                    "trains rank-r adapters only: close to full fine-tuning on most tasks; not for pre-training"))
        if setup.precision != "fp32":
            out.append(("QLoRA (4-bit base)", "--method qlora", replace(lo, method="qlora"),
                        "speed: dequantisation makes steps slower; accuracy: small loss vs 16-bit LoRA (QLoRA paper)"))
    if only is None or only not in _ORDER:  # the sharding levers are never stacked by combine()
        out += _shard_levers(arch, setup, budget)
    return out


def _shard_levers(arch: Arch, setup: Setup, budget: int) -> list[tuple[str, str, Setup, str]]:
    out: list[tuple[str, str, Setup, str]] = []
    if setup.gpus > 1 and setup.shard not in ("zero3", "fsdp"):
        out.append((f"shard everything over {setup.gpus} GPUs", "--shard fsdp", replace(setup, shard="fsdp"),
                    "speed: all-gathers weights every layer (needs a fast interconnect)"))
    elif setup.gpus == 1 and arch.family != "params":
        for n in (2, 4, 8):
            sh = replace(setup, gpus=n, shard="fsdp")
            try:
                peak = estimate(arch, sh).peak_bytes
            except SetupError:  # an option of the run forbids it (--optimizer-in-backward: no sharded optimizer)
                continue
            if peak <= budget or n == 8:
                out.append((f"FSDP / ZeRO-3 over {n} GPUs", f"--gpus {n} --shard fsdp", sh,
                            f"needs {n} GPUs; speed: all-gathers weights every layer"))
                break
    return out


def rank_levers(arch: Arch, setup: Setup, base: Estimate, budget: int, bf16_ok: bool = True,
                card: int | None = None) -> tuple[Lever, ...]:
    """Each applicable lever with the bytes it saves on this run, biggest saving first (``budget``: the allocated
    peak that fits with the margin; ``card``: the one that fits inside the card, "tight")."""
    levers: list[Lever] = []
    for name, change, new, cost in _candidates(arch, setup, budget, bf16_ok):
        try:
            est = estimate(arch, new)
        except SetupError:
            continue
        saves = base.peak_bytes - est.peak_bytes
        if saves <= 0:
            continue
        fits = est.peak_bytes <= budget
        levers.append(Lever(name, change, saves, est.peak_bytes, cost, fits,
                            not fits and card is not None and est.peak_bytes <= card))
    ranked = sorted(levers, key=lambda lv: (-lv.saves_bytes, lv.lever))
    # first: the cheapest way to fit (levers stacked in order of cost), when it takes more than one lever
    combo = combine(arch, setup, budget, bf16_ok) if ranked else None
    if combo is not None and " + " in combo.lever:
        ranked.insert(0, replace(combo, saves_bytes=base.peak_bytes - combo.peak_bytes))
    return tuple(ranked)


# cheapest first: levers that cost nothing in accuracy, then speed, then accuracy/method changes
_ORDER = ("fused AdamW kernel", "flash / memory-efficient attention", "smaller micro-batch + gradient accumulation",
          "gradient checkpointing", "bf16-mixed autocast", "fp16-mixed autocast", "8-bit AdamW (bitsandbytes)",
          "pure bf16 weights and optimizer state", "LoRA adapters", "QLoRA (4-bit base)")


def _apply(arch: Arch, setup: Setup, budget: int, bf16_ok: bool, names: tuple[str, ...]):
    current, changes = setup, []
    for wanted in _ORDER:
        if wanted not in names:
            continue
        cands = {n: (c, new) for n, c, new, _ in _candidates(arch, current, budget, bf16_ok, only=wanted)}
        if wanted == "QLoRA (4-bit base)" and current.method == "lora" and current.precision != "fp32":
            cands[wanted] = ("--method qlora", replace(current, method="qlora"))
        if wanted in cands:
            change, current = cands[wanted]
            changes.append(change)
    return current, changes


def combine(arch: Arch, setup: Setup, budget: int, bf16_ok: bool) -> Lever | None:
    """No single lever is enough: stack them cheapest first until the run fits, then drop every lever the
    fit does not need (most costly first). None: even all of them together do not fit."""
    chosen: tuple[str, ...] = ()

    @cache  # the peak of each stack of levers, estimated once (the same stacks are asked for again and again)
    def peak_of(names: tuple[str, ...]) -> int:
        return estimate(arch, _apply(arch, setup, budget, bf16_ok, names)[0]).peak_bytes

    for wanted in _ORDER:
        trial = chosen + (wanted,)
        try:
            peak, before = peak_of(trial), peak_of(chosen)
        except SetupError:
            continue
        if peak < before:
            chosen = trial
            if peak <= budget:
                break
    else:  # even all of them together do not fit
        return None
    for name in reversed(chosen):
        fewer = tuple(n for n in chosen if n != name)
        try:
            if peak_of(fewer) <= budget:
                chosen = fewer
        except SetupError:
            continue
    final, changes = _apply(arch, setup, budget, bf16_ok, chosen)
    if "QLoRA (4-bit base)" in chosen and "LoRA adapters" in chosen:  # one --method flag: qlora with the targets
        changes = [c.replace("--method lora", "--method qlora") for c in changes if c != "--method qlora"]
    peak = estimate(arch, final).peak_bytes
    return Lever("cheapest fit: " + " + ".join(chosen), " ".join(changes), 0, peak,
                 "the costs of each lever listed below", True)
