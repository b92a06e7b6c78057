"""``envman fit``: will this training run fit this GPU, and if not, what to change (text, or --json: docs/fit.md).

Exit 0 when the run fits every target GPU, 8 (EXIT_DOES_NOT_FIT) when it does not fit one of them, 2 for
a value that cannot be used (one ``error:`` line), the usual codes otherwise (7: envman's data is corrupt).
"""

from __future__ import annotations

import math
from typing import Optional

import typer

from envman.errors import EXIT_DOES_NOT_FIT, EXIT_USAGE, UsageError


def _split(values: Optional[list[str]]) -> tuple[str, ...]:
    return tuple(x.strip() for v in values or [] for x in v.split(",") if x.strip())


def _params(text: Optional[str], flag: str = "--params") -> Optional[int]:
    if text is None:
        return None
    t = text.strip().lower().replace("_", "").replace(",", "")
    mult = {"k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}.get(t[-1:], 1)
    try:
        v = float(t[:-1] if mult != 1 else t) * mult
    except ValueError:
        raise UsageError(f"{flag} {text!r} is not a number", hint=f"e.g. {flag} 7e9, {flag} 7B, {flag} 350M") from None
    if not math.isfinite(v) or not 1 <= v <= 1e15:
        what = "a parameter count" if flag == "--params" else "a number"
        raise UsageError(f"{flag} {text}: expected {what} between 1 and 1e15",
                         hint=f"e.g. {flag} 7e9, {flag} 7B, {flag} 350M")
    return int(v)


def _prices(text: Optional[str]) -> tuple[tuple[str, float], ...]:
    """--price-per-gpu-hour 2.5 (every GPU) or h100=2.5,l4=0.8 (per GPU)."""
    if text is None:
        return ()
    out = []
    for part in _split([text]):
        name, _, value = part.rpartition("=") if "=" in part else ("*", "", part)
        try:
            price = float(value)
        except ValueError:
            price = math.nan
        if not name.strip() or not math.isfinite(price) or price <= 0:
            raise UsageError(f"--price-per-gpu-hour {text!r}: {part!r} is not a price",
                             hint="a positive price per GPU-hour for every GPU (2.5) or per GPU (h100=2.5,l4=0.8); "
                                  "envman never assumes one")
        out.append((name.strip(), price))
    return tuple(out)


# the command's parameter names that FitOptions spells otherwise
_FIELD = {"target": "targets", "margin": "margin_pct", "selective": "selective_checkpointing",
          "fused_optimizer": "optimizer_impl", "price_per_gpu_hour": "prices"}
# the options that say where and how a run is judged, not what the run is
_JUDGING = frozenset({"targets", "compare", "margin_pct", "mfu", "trace"})


def _given(ctx: typer.Context) -> frozenset[str]:
    """The FitOptions fields the command line set (not left at their defaults): they override envman.yaml's workload."""
    # by the enum's name: typer vendors its own click (typer._click), whose ParameterSource is not click's
    return frozenset(_FIELD.get(n, n) for n in ctx.params if n not in ("path", "as_json")
                     and getattr(ctx.get_parameter_source(n), "name", None) == "COMMANDLINE")


def register(app: typer.Typer) -> None:
    @app.command("fit")
    def fit_cmd(
        ctx: typer.Context,
        path: str = typer.Argument(".", help="Project directory: without --model/--params its envman.yaml workload is the run (options override its keys); its targets are the default GPUs"),
        model: Optional[str] = typer.Option(None, "--model", "-m", help="A name from matrices/models.yaml (llama-3.1-8b, gpt2, vit-base …) or a config.json path"),
        params: Optional[str] = typer.Option(None, "--params", help="Parameter count without a config (7e9, 7B): weights, gradients and optimizer only"),
        method: Optional[str] = typer.Option(None, "--method", help="full | lora | qlora | freeze (default: the stack's, else full)"),
        precision: Optional[str] = typer.Option(None, "--precision", help="fp32 | bf16 | fp16 | bf16-mixed | fp16-mixed (default: the stack's)"),
        stack: Optional[str] = typer.Option(None, "--stack", help="hf-trainer | accelerate | torch-amp | peft-lora | peft-qlora[-2024] | qlora-paper | deepspeed-zero1/2/3[-offload] | fsdp2 | litgpt[-2023] | diffusers (default: envman.yaml workload.stack, else diffusers for a diffusion model, else from --method/--shard)"),
        optimizer: Optional[str] = typer.Option(None, "--optimizer", help="adamw | adamw-8bit | paged-adamw | sgd | sgd-momentum | adafactor | lion (default: the stack's, else adamw)"),
        batch: int = typer.Option(1, "--batch", "-b", help="Micro-batch per GPU"),
        seq: Optional[int] = typer.Option(None, "--seq", "-s", help="Tokens per sample (default: min(2048, the model's context))"),
        image_size: Optional[int] = typer.Option(None, "--image-size", help="Image side in pixels (default: the model's)"),
        grad_checkpointing: Optional[bool] = typer.Option(None, "--grad-checkpointing/--no-grad-checkpointing", help="Recompute each layer in backward (default: the stack's)"),
        selective: bool = typer.Option(False, "--selective-checkpointing", help="Recompute only the attention core (Megatron/torchtitan selective AC)"),
        lora_rank: int = typer.Option(16, "--lora-rank", help="LoRA rank r"),
        lora_targets: Optional[str] = typer.Option(None, "--lora-targets", help="Comma-separated layer names (q_proj,v_proj …)"),
        gpus: int = typer.Option(1, "--gpus", help="Data-parallel GPUs"),
        shard: Optional[str] = typer.Option(None, "--shard", help="none | ddp | zero1 | zero2 | zero3 | fsdp (default: the stack's)"),
        tp: int = typer.Option(1, "--tp", help="Tensor-parallel GPUs (Megatron-style, with sequence parallelism)"),
        pp: int = typer.Option(1, "--pp", help="Pipeline stages"),
        offload: Optional[str] = typer.Option(None, "--offload", help="none | optimizer | params (CPU offload)"),
        global_batch: Optional[int] = typer.Option(None, "--global-batch", help="Samples per optimizer step (sets gradient accumulation)"),
        target: Optional[list[str]] = typer.Option(None, "--target", "-t", help="Target GPU (repeatable). Default: this machine's GPUs, then envman.yaml targets"),
        margin: float = typer.Option(10.0, "--margin", help="Memory kept free, in percent (CUDA context, fragmentation)"),
        attention: str = typer.Option("auto", "--attention", help="auto (what transformers picks: SDPA) | eager (keeps the s×s probabilities) | flash"),
        mfu: Optional[float] = typer.Option(None, "--mfu", help="Utilisation for the time estimate (default: the GPU generation's published figure)"),
        compare: Optional[str] = typer.Option(None, "--compare", help="One row per GPU, e.g. h100,a100,rtx-4090,l4"),
        zero_grad: Optional[str] = typer.Option(None, "--zero-grad", help="When the loop frees the gradients: before-forward (zero_grad() after step(), PyTorch >= 2.0's set_to_none) | before-backward (zero_grad() between the loss and backward: the last step's gradients live through the forward) | keep (set_to_none=False, PyTorch < 2.0). Default: the stack's"),
        loss: Optional[str] = typer.Option(None, "--loss", help="What the loss keeps: hf (transformers: the logits upcast to fp32) | chunked (LitGPT: chunks in the compute dtype) | fused (flash-attention's in-place cross-entropy: the logits in their dtype + a log-sum-exp per row) | chunked-fp32 (torchtune: fp32 log-probabilities, gradients a chunk at a time). Default: the stack's"),
        activation_offload: bool = typer.Option(False, "--activation-offload", help="torchtune's OffloadActivations: saved tensors go to pinned CPU memory and come back in backward"),
        packed: Optional[int] = typer.Option(None, "--packed", help="Rows of --seq tokens packed from documents of this many tokens, attended apart (flash-attn varlen)"),
        compile: bool = typer.Option(False, "--compile", help="torch.compile (Inductor): pointwise ops recomputed in backward, not saved (AOTAutograd's min-cut partitioner); a note names what is dropped"),
        fused_optimizer: bool = typer.Option(False, "--fused-optimizer", help="torch.optim.AdamW(..., fused=True): no parameter-sized temporary in step()"),
        optimizer_in_backward: bool = typer.Option(False, "--optimizer-in-backward", help="Step each parameter in its gradient hook and free its gradient (torchtune optimizer_in_bwd): one gradient alive at a time"),
        tokens: Optional[str] = typer.Option(None, "--tokens", help="The whole run's training tokens (2e9, 300B): its wall time per GPU type"),
        samples: Optional[int] = typer.Option(None, "--samples", help="Or the run's samples (× --epochs)"),
        epochs: float = typer.Option(1.0, "--epochs", help="Passes over --samples (or --tokens)"),
        price_per_gpu_hour: Optional[str] = typer.Option(None, "--price-per-gpu-hour", help="Your price per GPU-hour, for every GPU (2.5) or per GPU (h100=2.5,l4=0.8): the run's cost. envman assumes none"),
        ema: bool = typer.Option(False, "--ema", help="Diffusion (diffusers --use_ema): an fp32 EMA copy of the trained weights on the GPU"),
        trace: bool = typer.Option(False, "--trace", help="Also measure one step with PyTorch on fake tensors (needs torch, transformers)"),
        as_json: bool = typer.Option(False, "--json", help="Machine-readable output (stable contract)"),
    ) -> None:
        """Will this training run fit the GPU — and if not, what to change."""
        from dataclasses import replace

        from envman.app.fit import FitOptions, result_dict, run_fit
        from envman.app.workload import with_workload
        from envman.cli.output import emit_json

        note, given = None, _given(ctx)
        try:
            parsed = {"params": _params(params), "lora_targets": _split([lora_targets]) if lora_targets else None,
                      "targets": _split(target), "compare": _split([compare]) if compare else (),
                      "optimizer_impl": "fused" if fused_optimizer else "foreach",
                      "tokens": _params(tokens, "--tokens"), "prices": _prices(price_per_gpu_hour)}
            opts = FitOptions(**{_FIELD.get(n, n): v for n, v in ctx.params.items() if n != "as_json"} | parsed)
            opts, note = with_workload(opts, given)
            res = run_fit(opts)
            if note:
                res = replace(res, notes=(note, *res.notes))
        except UsageError as exc:  # a value that cannot be used: exit 2, distinct from "does not fit" (8)
            exc.exit_code = EXIT_USAGE
            if note and not given - _JUDGING:  # every value of the run was the workload's: say where it came from
                exc.message = f"envman.yaml workload: {exc.message}"
            raise
        if as_json:
            emit_json(result_dict(res))
        else:
            typer.echo(format_fit(res))
        if res.targets and not all(t.runs for t in res.targets):  # tight runs: exit 0, said in a note
            raise typer.Exit(EXIT_DOES_NOT_FIT)


def _rate(x: Optional[float], unit: str) -> str:
    if x is None:
        return "-"
    return f"{x:,.0f} {unit}/s" if x >= 100 else f"{x:.1f} {unit}/s"


def _setup_lines(res) -> list[str]:
    from dataclasses import asdict

    from envman.app.fit import LOADS, fmt_bytes
    from envman.cli.output import table

    e = res.estimate
    s = e.setup
    size = (f"{s.batch} × {s.seq} tokens" if s.seq else f"{s.batch}") if e.unit == "tokens" else f"{s.batch} images"
    size += f" packed from {s.packed}-token documents" if s.packed else ""
    method = s.method + (f" r={s.lora_rank} on {','.join(s.lora_targets)}" if s.method in ("lora", "qlora") else "")
    shard = "" if s.shard == "none" else f", {s.shard} over {s.gpus} GPUs"
    shard += f", TP {s.tp} × PP {s.pp}" if s.tp * s.pp > 1 else ""
    shard += f", {s.accumulation} accumulation steps" if s.accumulation > 1 else ""
    b = e.breakdown
    lines = [
        f"model    {res.model_name}: {e.params / 1e9:.3g} B params, {e.trainable_params / 1e6:,.1f} M trainable ({method})",
        f"setup    {s.stack}: {s.precision}, {s.optimizer}, micro-batch {size}"
        f"{', gradient checkpointing' if s.grad_checkpointing else ''}, {s.attention} attention{shard}",
        f"peak     {fmt_bytes(e.peak_bytes)} per GPU allocated (max_memory_allocated, at {e.phase})",
        f"load     {fmt_bytes(e.load_bytes)} while the checkpoint loads ({LOADS[s.load]}): "
        + ("the run's peak" if e.phase == "load" else "below the step's peak"),
        *_reserve_line(res),
        table([[f"  {part}", fmt_bytes(n)] for part, n in asdict(b).items()]),
    ]
    if res.traced_peak_bytes is not None:
        same = res.trace_analytic_bytes or e.peak_bytes
        err = (same - res.traced_peak_bytes) / res.traced_peak_bytes * 100
        lines.append(f"traced   {fmt_bytes(res.traced_peak_bytes)} measured with PyTorch for the kernels it can run; "
                     f"envman's estimate of those kernels {fmt_bytes(same)} ({err:+.1f}%)")
    return lines


def _reserve_line(res) -> list[str]:
    from envman.app.fit import fmt_bytes

    first = next((t for t in (*res.targets, *res.compare) if t.reserve is not None), None)
    if first is None:
        return []
    r = first.reserve
    return [f"reserved {fmt_bytes(r.reserved)} (max_memory_reserved: + {fmt_bytes(r.rounding)} of the allocator's "
            f"segments); {fmt_bytes(r.on_card)} on the card with the CUDA context (nvidia-smi)"]


def _run_cells(t) -> list[str]:
    from envman.app.fit import fmt_duration

    r = t.run
    if r is None:
        return ["-", "-"]
    time = f"{fmt_duration(r.seconds)} ({fmt_duration(r.low)}–{fmt_duration(r.high)})"
    rng = r.amount_range
    cost = "no price given" if rng is None else f"{r.amount:,.0f} ({rng[0]:,.0f}–{rng[1]:,.0f})"
    return [time, cost]


def _gpu_lines(res) -> list[str]:
    from envman.app.fit import fmt_bytes
    from envman.cli.output import table

    s = res.estimate.setup
    u = {"tokens": "tok", "images": "img"}.get(res.estimate.unit, "samples")

    def row(t) -> list[str]:
        acc = "-" if t.accumulation_steps is None else str(t.accumulation_steps)
        out = [t.gpu.name, fmt_bytes(t.gpu.memory_bytes), {"fits": "yes", "tight": "tight"}.get(t.verdict, "NO"),
               fmt_bytes(t.headroom_bytes),
               str(t.max_micro_batch), acc, "-" if t.step_seconds is None else f"{t.step_seconds:.3g} s",
               _rate(t.throughput, u)]
        out += [_rate(None if t.throughput is None else t.throughput * s.gpus, u)] if s.gpus > 1 else []
        return out + (_run_cells(t) if runs else [])

    header = ["GPU", "memory", "fits", "headroom", "max micro-batch", "accum steps", "step*", f"{u}/s per GPU*"]
    header += [f"{u}/s all {s.gpus} GPUs*"] if s.gpus > 1 else []
    runs = any(t.run is not None for t in (*res.targets, *res.compare))
    header += ["whole run*", "cost*"] if runs else []
    lines: list[str] = []
    if res.targets:
        lines += ["", f"targets (fits: the estimate on the card with {res.margin_pct:g}% kept free for fragmentation and "
                          "workspaces; tight: inside the card, within that margin):",
                  table([row(t) for t in res.targets], header)]
    if res.compare:
        lines += ["", "compare:", table([row(t) for t in res.compare], header)]
    for t in (*res.targets, *res.compare):
        lines += [f"  ! {t.gpu.name}: {n}" for n in t.notes]
    for t in res.compare:
        if t.lever is not None:
            lines.append(f"  → {t.gpu.name}: {t.lever.lever} → {fmt_bytes(t.lever.peak_bytes)} [{t.lever.change}]")
        elif t.verdict == "tight":
            lines.append(f"  → {t.gpu.name}: tight, and no lever envman knows leaves the margin free")
        elif not t.fits:
            lines.append(f"  → {t.gpu.name}: no lever envman knows makes it fit")
    return lines


def format_fit(res) -> str:
    from envman.app.fit import fmt_bytes

    e = res.estimate
    lines = _setup_lines(res) + _gpu_lines(res)
    if res.advice:
        lines += ["", "to make it fit (bytes saved on this run, biggest first):"]
        for i, lv in enumerate(res.advice, 1):
            lines.append(f"  {i}. {lv.lever}: saves {fmt_bytes(lv.saves_bytes)} → {fmt_bytes(lv.peak_bytes)}"
                         f"{' (fits)' if lv.fits else ' (tight)' if lv.tight else ''}  [{lv.change}]")
            lines.append(f"     cost: {lv.cost}")
    node = f"per node of {res.gpus_per_node} GPUs" if e.setup.gpus > 1 else "per node"
    lines += ["", f"host     RAM ≥ {fmt_bytes(res.host_ram_bytes)} {node} (2× GPU memory, and the weights while loading); "
                  f"checkpoint {fmt_bytes(e.checkpoint_bytes)} on disk (trainable weights + optimizer state)"]
    first = (res.targets or res.compare or (None,))[0]
    if first is not None and first.mfu is not None:
        lines.append(f"* estimate (±{res.band_pct:g}%): max(training FLOPs / (dense peak × {first.mfu:.0%} utilisation), "
                     f"bytes / memory bandwidth) — {first.bound}-bound on {first.gpu.name}; real throughput varies")
    if res.notes or res.trace_note:
        lines += ["", "notes:"] + [f"  - {n}" for n in (*res.notes, *([res.trace_note] if res.trace_note else []))]
    return "\n".join(lines)
