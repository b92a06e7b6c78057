"""The ``fit`` use case: plain options in, a FitResult out. Never prints, never exits."""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from envman.app.prices import run_prices
from envman.errors import UsageError
from envman.fit.advice import Lever, combine, rank_levers
from envman.fit.architectures import Arch, params_from_count
from envman.fit.catalog import GpuSpec, allocator_rules, find_model, gpu_specs, load_config, perf_constants
from envman.fit.cost import RunCost, fmt_duration, price_for, run_cost
from envman.fit.estimate import accumulation_steps, estimate, max_micro_batch
from envman.fit.reserve import Reserve, reserve
from envman.fit.runspec import LOADS, LOSS_FLAGS, Estimate, Setup, SetupError, default_seq
from envman.fit.speed import precision_key, step_time
from envman.fit.stacks import default_stack, find_stack
from envman.portable.doctor.fitverdict import fits_verdict  # the doctor judges with the same rule

DEFAULT_COMPARE = ("h100", "a100", "rtx-4090", "l4")
# LoRA targets where the Setup's (q/k/v/o_proj) name no layer (diffusers' scripts: target_modules=[to_k, to_q, to_v, to_out.0])
_LORA_TARGETS = {"gpt2": ("c_attn",), **dict.fromkeys(("bert", "vit", "clip", "whisper"), ("query", "value", "attn")),
                 "diffusion": ("to_q", "to_k", "to_v", "to_out.0")}


@dataclass(frozen=True)
class FitOptions:
    path: str = "."
    model: str | None = None
    params: int | None = None
    method: str | None = None  # None: the stack's (full unless the stack is LoRA/QLoRA)
    precision: str | None = None  # None: the stack's
    optimizer: str | None = None  # None: the stack's (peft-qlora: paged AdamW), else adamw
    batch: int = 1
    seq: int | None = None
    image_size: int | None = None
    grad_checkpointing: bool | None = None  # None: the stack's (peft-qlora turns it on)
    lora_rank: int = 16
    lora_targets: tuple[str, ...] | None = None
    gpus: int = 1
    shard: str | None = None  # None: the stack's
    global_batch: int | None = None
    targets: tuple[str, ...] = ()
    margin_pct: float = 10.0
    compare: tuple[str, ...] = ()
    attention: str = "auto"  # auto: what transformers picks (SDPA → flash/efficient/cuDNN; eager for Gemma 2)
    mfu: float | None = None  # None: the GPU generation's published utilisation (gpu_perf.yaml)
    trace: bool = False
    stack: str | None = None  # None: envman.yaml workload.stack, else from --method/--shard
    tp: int = 1
    pp: int = 1
    offload: str | None = None
    selective_checkpointing: bool = False
    gpus_per_node: int = 8
    optimizer_impl: str = "foreach"  # foreach (PyTorch's CUDA default) | fused | for-loop (transformers' old AdamW)
    ema: bool = False  # diffusers' --use_ema: an fp32 EMA copy of the trained weights on the GPU
    double_quant: bool | None = None  # None: the stack's; LitGPT's --quantize bnb.nf4-dq (True) vs bnb.nf4 (False)
    zero_grad: str | None = None  # None: the stack's, else before-forward (runspec.ZERO_GRAD: when the loop frees gradients)
    loss: str | None = None  # None: the stack's; hf | chunked | fused (runspec.LOSS_FLAGS: what the loss keeps)
    optimizer_in_backward: bool = False  # each parameter stepped in its AccumulateGrad hook (torchtune optimizer_in_bwd)
    activation_offload: bool = False  # torchtune's OffloadActivations (saved tensors on the CPU)
    packed: int | None = None  # rows of --seq tokens packed from documents of this many tokens (flash-attn varlen)
    compile: bool = False  # torch.compile (Inductor): what the min-cut partitioner recomputes is not saved
    tokens: int | None = None  # the whole run's training tokens: its wall time (and cost) per GPU type
    samples: int | None = None  # or its samples (× epochs)
    epochs: float = 1.0
    prices: tuple[tuple[str, float], ...] = ()  # per GPU-hour, by GPU name ("*": every GPU); never invented


@dataclass(frozen=True)
class TargetFit:
    gpu: GpuSpec
    fits: bool  # fits with the margin kept (verdict "fits"); a "tight" run is not refused either (runs)
    usable_bytes: int
    headroom_bytes: int  # memory − margin − peak (negative: short by that much)
    max_micro_batch: int
    accumulation_steps: int | None
    step_seconds: float | None
    throughput: float | None  # tokens (or images) per second PER GPU, estimated
    notes: tuple[str, ...] = ()
    mfu: float | None = None  # the utilisation the time estimate used
    bound: str = ""  # compute | memory-bandwidth
    lever: Lever | None = None  # --compare: this card's own cheapest way to fit
    run: RunCost | None = None  # --tokens/--samples: the whole run's wall time (and cost at a given price)
    verdict: str = "fits"  # fits | tight (inside the card, within the margin) | does not fit
    reserve: Reserve | None = None  # the reserved estimate (allocator rounding, CUDA context) on this card

    @property
    def runs(self) -> bool:  # not refused: it fits, or it is tight
        return self.verdict != "does not fit"


@dataclass(frozen=True)
class FitResult:
    model_name: str
    model_source: str
    arch: Arch
    estimate: Estimate
    targets: tuple[TargetFit, ...]
    compare: tuple[TargetFit, ...]
    advice: tuple[Lever, ...]
    host_ram_bytes: int
    margin_pct: float
    mfu: float | None
    global_batch: int | None
    traced_peak_bytes: int | None = None
    trace_note: str | None = None
    notes: tuple[str, ...] = field(default=())
    gpus_per_node: int = 1
    trace_analytic_bytes: int | None = None  # envman's estimate for the kernels the trace ran
    band_pct: float = 35.0  # ± of every time estimate (gpu_perf.yaml utilisation.band_pct)


def resolve_model(opts: FitOptions) -> tuple[str, str, Arch, dict | None]:
    if opts.model and opts.params:
        raise UsageError("--model and --params exclude each other", hint="give one of them")
    if opts.params is not None:
        if not isinstance(opts.params, int) or not 0 < opts.params <= 10**15:
            raise UsageError(f"--params {opts.params}: expected a positive parameter count up to 1e15",
                             hint="e.g. --params 7e9, --params 7B")
        return f"{opts.params:,} parameters", "--params", params_from_count(opts.params), None
    if not opts.model:
        raise UsageError("no model given (and no workload: in the project's envman.yaml)",
                         hint="--model llama-3.1-8b, --model path/to/config.json or --params 7e9; or describe the run "
                              "once in envman.yaml: workload: {model: llama-3.1-8b, method: qlora}")
    p = Path(opts.model)
    if p.is_dir() and (p / "model_index.json").is_file():  # a diffusers pipeline folder
        from envman.fit.catalog import load_pipeline

        return p.name, str(p / "model_index.json"), load_pipeline(p), None
    if opts.model.endswith(".json") or p.is_dir() or p.is_file():
        cfg = p / "config.json" if p.is_dir() else p
        arch = load_config(cfg)
        return cfg.parent.name if cfg.name == "config.json" else cfg.stem, str(cfg), arch, None
    entry = find_model(opts.model)
    return entry.name, entry.source, entry.arch, {"id": entry.id}


def _targets(opts: FitOptions) -> tuple[tuple[str, ...], str | None]:
    if opts.targets:
        return tuple(opts.targets), None
    try:  # this machine's GPUs
        from envman.portable.facts.nvidia import scan_gpus

        scan = scan_gpus()
        names = tuple(dict.fromkeys(g.name for g in scan.gpus))
        if names:
            return names, f"targets: detected via {scan.source}"
    except Exception:  # noqa: BLE001 - a failed probe only means "no GPU here"
        pass
    from envman.project.spec import load_spec

    spec = load_spec(Path(opts.path))
    if spec is not None and spec.targets:
        return tuple(spec.targets), "targets: from envman.yaml"
    if opts.compare:
        return (), None
    raise UsageError("no target GPU: none detected on this machine and none in envman.yaml",
                     hint="pass --target GPU (repeatable, e.g. --target h100) or --compare h100,a100,rtx-4090,l4")


def _fit_on(arch: Arch, setup: Setup, est: Estimate, gpu: GpuSpec, margin_pct: float, mfu: float | None,
            global_batch: int | None, fraction: float = 1.0) -> TargetFit:
    usable = int(gpu.card_bytes * min(1 - margin_pct / 100, fraction))
    card = int(gpu.card_bytes * fraction)  # what the driver gives a process (JAX: XLA's share of it)
    res = reserve(arch, est, allocator_rules())
    overhead = res.on_card - res.allocated  # the micro-batch search and the levers compare allocated peaks
    notes: list[str] = []
    if setup.precision.startswith("bf16") and not gpu.bf16:
        notes.append(f"bf16 needs compute capability ≥ 8.0; {gpu.name} is {gpu.cc}: use fp16-mixed or fp32")
    if gpu.uncertain:
        notes.append("its memory is marked uncertain in gpus.yaml (its note says why)" if not gpu.tflops else
                     "its figures are marked uncertain in gpu_perf.yaml (no source read confirms them: uncertain_why there)")
    mb = max_micro_batch(arch, setup, usable - overhead) if arch.family != "params" else \
        (setup.batch if res.on_card <= usable else 0)
    dp = setup.gpus // (setup.tp * setup.pp)
    steps = accumulation_steps(global_batch, mb, dp)  # None without a global batch or when nothing fits
    step_s, util, bound = step_time(arch, est, gpu, mfu)
    thr = est.samples_tokens / step_s * (1 if setup.tp * setup.pp == 1 else 1 / (setup.tp * setup.pp)) if step_s else None
    if step_s is None and not est.train_flops:
        notes.append("no throughput: --params without --seq gives no tokens per step (add --seq N)")
    elif step_s is None and not gpu.tflops:
        notes.append("memory verdict only: gpu_perf.yaml has no datasheet figures for it (its memory is gpus.yaml's)")
    elif step_s is None:
        notes.append(f"no {precision_key(setup.precision, arch)} throughput figure for {gpu.name}")
    verdict = "does not fit" if setup.precision.startswith("bf16") and not gpu.bf16 else \
        fits_verdict(res.on_card, usable, card)
    if verdict == "tight":
        notes.append(f"tight: {fmt_bytes(res.on_card)} with the CUDA context is inside the {fmt_bytes(card)} "
                     f"{'the driver shows' if gpu.driver_total else 'it has'} but within the {margin_pct:g}% margin "
                     "(fragmentation, kernel workspaces): it runs if they stay small")
    return TargetFit(gpu, verdict == "fits", usable, usable - res.on_card, mb, steps, step_s, thr, tuple(notes),
                     util, bound, verdict=verdict, reserve=res)


def _check_options(opts: FitOptions) -> None:
    if not (isinstance(opts.margin_pct, (int, float)) and math.isfinite(opts.margin_pct) and 0 <= opts.margin_pct < 100):
        raise UsageError(f"--margin {opts.margin_pct}: expected a percentage in [0, 100)",
                         hint="e.g. --margin 10 (the default: the CUDA context and the allocator's fragmentation)")
    if opts.mfu is not None and not (math.isfinite(opts.mfu) and 0 < opts.mfu <= 1):
        raise UsageError(f"--mfu {opts.mfu}: expected a fraction in (0, 1]",
                         hint="e.g. --mfu 0.4; without --mfu: the GPU generation's published utilisation (gpu_perf.yaml)")
    if opts.global_batch is not None and opts.global_batch < 1:
        raise UsageError(f"--global-batch {opts.global_batch}: expected a positive number of samples",
                         hint="samples per optimizer step, e.g. --global-batch 64; without it: no accumulation")
    for flag, val in (("--seq", opts.seq), ("--image-size", opts.image_size)):
        if val is not None and val < 1:
            unit, example, default = (("tokens", 2048, "min(2048, the model's positions)") if flag == "--seq"
                                      else ("pixels", 224, "the model's own"))
            raise UsageError(f"{flag} {val}: expected a positive number of {unit}",
                             hint=f"e.g. {flag} {example}; without {flag}: {default}")


def _check_packed(doc: int, setup: Setup, arch: Arch) -> None:
    """A packed row keeps its documents apart only with flash-attn's varlen kernel (transformers' FA2 path for
    DataCollatorWithFlattening's position_ids); the math path would attend across them or need an s×s mask."""
    if arch.task not in ("causal-lm", "masked-lm"):
        raise UsageError(f"--packed packs token sequences; {arch.task} inputs are not",
                         hint="drop --packed: a batch of images or samples has no documents to pack")
    if setup.attention != "flash":
        raise UsageError(f"--packed needs flash attention, not --attention {setup.attention}",
                         hint="--attention flash (flash_attn_varlen_func keeps each document's attention apart)")
    seq = default_seq(arch, setup)
    if not 1 <= doc <= seq:
        raise UsageError(f"--packed {doc}: expected a document length from 1 to the packed row's --seq {seq}",
                         hint="--seq the packed length (e.g. 4096) and --packed the documents' mean length (e.g. 512)")


def _check_global_batch(global_batch: int, batch: int, dp: int) -> None:
    """A global batch is whole micro-steps of every data-parallel GPU: batch × dp × accumulation steps."""
    step = batch * dp
    where = f"--batch {batch}" + (f" × {dp} data-parallel GPUs" if dp > 1 else "")
    if global_batch < step:
        raise UsageError(f"--global-batch {global_batch} is smaller than one micro-step's {step} samples ({where})",
                         hint=f"--global-batch {step} (no accumulation) or a multiple of it; or a smaller --batch")
    if global_batch % step:
        lo, hi = global_batch // step * step, -(-global_batch // step) * step
        raise UsageError(f"--global-batch {global_batch} is not a whole number of micro-steps of {step} samples ({where})",
                         hint=f"--global-batch {lo} or {hi} (whole micro-steps), or a --batch that " + (
                             f"makes {global_batch} a multiple of --batch × {dp} GPUs" if dp > 1 else f"divides {global_batch}"))


def _attention(opts: FitOptions, arch: Arch) -> tuple[str, list[str]]:
    if opts.attention != "auto":
        return opts.attention, []
    # transformers defaults to SDPA, which picks a flash / memory-efficient / cuDNN kernel on CUDA GPUs
    # (none keeps the s×s probabilities); it recommends eager for Gemma 2's soft-capped attention
    if arch.variant == "gemma2":
        return "eager", ["attention: eager (transformers recommends eager for Gemma 2 training)"]
    return "flash", ["attention: SDPA (flash / memory-efficient kernel: no s×s probabilities kept); "
                     "--attention eager for the math kernel"]


def _make_setup(opts: FitOptions, arch: Arch) -> tuple[Setup, list[str]]:
    """The estimator's Setup: the stack's defaults (matrices/fit_stacks.yaml), then every option the user gave
    (Setup's defaults where neither says)."""
    stack = find_stack(opts.stack or ("diffusers" if arch.task == "diffusion" else default_stack(opts.method, opts.shard)))
    if stack.get("method") and opts.method and opts.method != stack.get("method"):
        raise UsageError(f"--stack {stack.name} trains with --method {stack.get('method')}, not {opts.method}",
                         hint="drop --method, or pick the stack of that method (docs/fit.md: stacks)")
    attention, notes = _attention(opts, arch)
    ckpt = stack.get("grad_checkpointing", False) if opts.grad_checkpointing is None else opts.grad_checkpointing
    given = {"method": opts.method, "precision": opts.precision, "optimizer": opts.optimizer, "shard": opts.shard,
             "offload": opts.offload, "zero_grad": opts.zero_grad}
    given = {k: v for k, v in given.items() if v}
    setup = Setup(**{**dict(stack.defaults), **given, "grad_checkpointing": ckpt}, batch=opts.batch, seq=opts.seq,
                  image_size=opts.image_size, lora_rank=opts.lora_rank, gpus=opts.gpus,
                  attention=attention, stack=stack.name, selective_ckpt=opts.selective_checkpointing,
                  tp=opts.tp, pp=opts.pp, optimizer_impl=opts.optimizer_impl, ema=opts.ema, compile=opts.compile,
                  optimizer_in_backward=opts.optimizer_in_backward, activation_offload=opts.activation_offload)
    if opts.double_quant is not None:
        setup = replace(setup, nf4_double_quant=opts.double_quant)
    if opts.loss is not None:
        if opts.loss not in LOSS_FLAGS:
            raise UsageError(f"--loss {opts.loss!r} is not one of {', '.join(LOSS_FLAGS)}",
                             hint="hf (transformers: fp32 logits), chunked (LitGPT: chunks in the compute dtype), "
                                  "fused (flash-attention's in-place cross-entropy, as Liger/Unsloth-style kernels), "
                                  "chunked-fp32 (torchtune: each chunk upcast)")
        setup = replace(setup, loss=LOSS_FLAGS[opts.loss])
    if opts.packed is not None:
        _check_packed(opts.packed, setup, arch)
        setup = replace(setup, packed=opts.packed)
    if setup.method != "qlora" and setup.load.startswith("quantize"):
        setup = replace(setup, load="to-device")  # a 4-bit stack's loading path quantises only for --method qlora
    if setup.precision in ("bf16", "fp16") and setup.method == "lora" and not opts.stack:
        setup = replace(setup, base_bytes=0)  # a pure 16-bit run: the base in the parameter dtype
    return setup, notes


def estimate_run(opts: FitOptions, model: tuple[str, str, Arch, dict | None] | None = None
                 ) -> tuple[str, str, Arch, dict | None, Setup, Estimate]:
    """The model and the per-GPU estimate of ``opts``, whatever GPU it is for (``model``: already resolved)."""
    name, source, arch, entry = model or resolve_model(opts)
    _check_options(opts)
    setup, notes = _make_setup(opts, arch)
    targets = opts.lora_targets or _LORA_TARGETS.get("diffusion" if arch.task == "diffusion" else arch.family)
    if targets:
        setup = replace(setup, lora_targets=tuple(targets))
    if arch.family in ("gpt2", "llama", "bert") and not setup.seq:
        setup = replace(setup, seq=default_seq(arch, setup))  # shown in the output as the value used
    if arch.family in ("vit", "resnet", "unet", "flux") and not setup.image_size:
        setup = replace(setup, image_size=arch.image_size)
    if opts.global_batch:  # accumulation keeps the gradients alive across micro-steps: part of the peak
        dp = max(1, setup.gpus // (setup.tp * setup.pp))
        _check_global_batch(opts.global_batch, setup.batch, dp)
        setup = replace(setup, accumulation=max(1, math.ceil(opts.global_batch / (setup.batch * dp))))
    try:
        est = estimate(arch, setup)
    except SetupError as exc:
        raise UsageError(str(exc), hint=exc.hint) from None
    if opts.compile and not any(n.startswith("torch.compile") for n in est.notes):
        notes.append(COMPILE_NOTE)
    return name, source, arch, entry, setup, replace(est, notes=tuple(notes) + est.notes)


def _framework_fraction(path: str) -> tuple[float, str | None]:
    """The share of each GPU the project's framework lets its allocator use (envman.yaml's framework and env):
    JAX's XLA preallocates 75% unless XLA_PYTHON_CLIENT_MEM_FRACTION says otherwise. The formulas are the same
    for every framework; only this budget differs."""
    from envman import frameworks
    from envman.project.spec import load_spec

    try:
        spec = load_spec(Path(path))
    except Exception:  # noqa: BLE001 - fit works without a project; init and lock report a bad envman.yaml
        return 1.0, None
    name = re.split(r"[\s\[<>=!~;]", spec.framework.strip(), maxsplit=1)[0].lower() if spec and spec.framework else ""
    fw = frameworks.by_alias(name) if name else None
    if fw is None or fw.memory_fraction is None:
        return 1.0, None
    var, default = fw.memory_fraction
    raw = dict(spec.env).get(var) if spec is not None else None
    try:
        fraction = float(raw) if raw is not None else default
    except ValueError:
        fraction = default
    how = f"{var}={raw} in envman.yaml env" if raw is not None else f"{fw.name}'s default; {var} changes it"
    return fraction, f"{fw.name} project: its allocator uses {fraction:.0%} of each GPU ({how})"


def run_fit(opts: FitOptions) -> FitResult:
    name, source, arch, entry, setup, est = estimate_run(opts)
    pnote = None
    if opts.tokens is not None or opts.samples is not None:  # --price-per-gpu-hour, else envman.yaml's
        prices, pnote = run_prices(opts.prices, opts.path)
        opts = replace(opts, prices=prices)
    target_names, tnote = _targets(opts)
    fraction, fnote = _framework_fraction(opts.path)
    notes = list(est.notes) + [n for n in (tnote, fnote, pnote) if n]
    if not arch.validated and arch.family != "params" and not any("not validated" in n for n in notes):
        notes.append(f"{arch.family}: the activation model is not validated against a traced step (docs/fit.md)")
    fits, compare = (tuple(_fit_on(arch, setup, est, g, opts.margin_pct, opts.mfu, opts.global_batch, fraction)
                           for g in gpu_specs(names)) if names else () for names in (target_names, opts.compare))
    first = (fits or compare)[0] if (fits or compare) else None
    advice: tuple[Lever, ...] = ()
    if first is not None and not first.fits:
        budget = _allocated_budget(first)
        card = int(first.gpu.card_bytes * fraction) + budget - first.usable_bytes
        advice = _keep_promises(opts, rank_levers(arch, setup, est, budget, first.gpu.bf16, card),
                                est.peak_bytes, budget, card, (name, source, arch, entry))
    compare = tuple(_with_lever(opts, (name, source, arch, entry), setup, est, t) for t in compare)
    band = float(perf_constants().get("band_pct", 35))
    fits, compare = (tuple(_with_run(opts, est, t, band) for t in ts) for ts in (fits, compare))
    mem = max((t.gpu.memory_bytes for t in fits or compare), default=0)
    # host, PER NODE: the ≥ 2× GPU memory rule (pinned buffers, data loading, checkpoint staging) for the GPUs
    # of one node, and what loading the weights takes there (every rank loads a copy before moving it);
    # CPU offload keeps the fp32 master + moments of its ranks on the host too
    per_node = min(setup.gpus, opts.gpus_per_node)
    host = max(2 * mem * per_node, per_node * arch.params * (4 if setup.precision == "fp32" else 2))
    if setup.offload != "none":
        host += per_node * est.params * 16 // max(1, setup.gpus)
    traced = tnote_trace = trace_analytic = None
    if opts.trace:
        from envman.fit.catalog import raw_config
        from envman.fit.trace import TRACE_KERNELS, trace_peak

        cfg, task = raw_config(str(opts.model) if entry is None else str(entry["id"]))
        traced, tnote_trace = trace_peak(cfg, task, setup)
        # the analytic estimate of what the trace could run (eager, CPU autocast and masks) to compare with
        trace_analytic = estimate(arch, replace(setup, **TRACE_KERNELS, autocast="cpu")).peak_bytes
    return FitResult(name, source, arch, est, fits, compare, advice, host, opts.margin_pct, opts.mfu,
                     opts.global_batch, traced, tnote_trace, tuple(notes), per_node, trace_analytic, band)


# the families whose compiled step is not modelled (activations.py _compile_drops covers the transformer blocks)
COMPILE_NOTE = "torch.compile: not modelled for this model family; the estimate is eager PyTorch's"


# the flags a lever's change names (advice.py), as FitOptions fields: (field, how to read its value, or the value)
_LEVER_FLAGS: dict[str, tuple[str, object]] = {
    "--batch": ("batch", int), "--global-batch": ("global_batch", int), "--precision": ("precision", str),
    "--optimizer": ("optimizer", str), "--method": ("method", str), "--gpus": ("gpus", int), "--shard": ("shard", str),
    "--attention": ("attention", str), "--lora-targets": ("lora_targets", lambda v: tuple(v.split(","))),
    "--grad-checkpointing": ("grad_checkpointing", True), "--fused-optimizer": ("optimizer_impl", "fused"),
}


def lever_options(opts: FitOptions, change: str) -> FitOptions | None:
    """The run a lever's change names: ``opts`` with its flags applied, as the command line would (None: a change
    that is not flags)."""
    toks, kw, i = change.split(), {}, 0
    while i < len(toks):
        spec = _LEVER_FLAGS.get(toks[i])
        if spec is None:
            return None
        name, how = spec
        if callable(how):
            if i + 1 >= len(toks):
                return None
            kw[name], i = how(toks[i + 1]), i + 2
        else:
            kw[name], i = how, i + 1
    return replace(opts, **kw)


def _keep_promises(opts: FitOptions, levers: tuple[Lever, ...], base: int, budget: int, card: int,
                   model: tuple[str, str, Arch, dict | None] | None = None) -> tuple[Lever, ...]:
    """Each lever's figure is what `envman fit` gives with its flags (the stack those flags pick included): a lever
    whose flags make a run envman refuses is dropped, one that saves nothing too."""
    out = []
    for lv in levers:
        run = lever_options(opts, lv.change)
        if run is None:
            out.append(lv)
            continue
        try:
            peak = estimate_run(run, model)[5].peak_bytes
        except (UsageError, SetupError):
            continue
        if peak >= base:
            continue
        fits = peak <= budget
        out.append(replace(lv, peak_bytes=peak, saves_bytes=base - peak, fits=fits, tight=not fits and peak <= card))
    head = [lv for lv in out if lv.lever.startswith("cheapest")]
    return tuple(head + sorted((lv for lv in out if lv not in head), key=lambda lv: (-lv.saves_bytes, lv.lever)))


def _volume(opts: FitOptions, est: Estimate) -> float | None:
    """The whole run in the estimate's unit (tokens, or samples for image models)."""
    if opts.tokens is None and opts.samples is None:
        return None
    if opts.tokens is not None and opts.samples is not None:
        raise UsageError("--tokens and --samples exclude each other", hint="give the run's tokens, or its samples × --epochs")
    for flag, v in (("--tokens", opts.tokens), ("--samples", opts.samples), ("--epochs", opts.epochs)):
        if v is not None and (isinstance(v, bool) or not math.isfinite(v) or v <= 0):
            raise UsageError(f"{flag} {v}: expected a positive number", hint="e.g. --tokens 2e9, or --samples 50000 --epochs 3")
    if opts.tokens is not None:
        if est.unit != "tokens":
            raise UsageError(f"--tokens: this model counts {est.unit}, not tokens", hint="--samples N --epochs E")
        return opts.tokens * opts.epochs
    per = (est.setup.seq or 1) if est.unit == "tokens" else 1
    return (opts.samples or 0) * per * opts.epochs


def _with_run(opts: FitOptions, est: Estimate, t: TargetFit, band: float) -> TargetFit:
    volume = _volume(opts, est)
    if volume is None or t.throughput is None:
        return t
    price = price_for(opts.prices, t.gpu.id, (t.gpu.name,))
    return replace(t, run=run_cost(volume, t.throughput, est.setup.gpus, band, price))


def _allocated_budget(t: TargetFit) -> int:
    """The allocated peak a lever must reach on this card: the margin's budget less the context and rounding."""
    return t.usable_bytes - (t.reserve.on_card - t.reserve.allocated if t.reserve else 0)


def _with_lever(opts: FitOptions, model: tuple[str, str, Arch, dict | None], setup: Setup, est: Estimate,
                t: TargetFit) -> TargetFit:
    """--compare: a card that does not fit gets its own cheapest lever (ranked for ITS memory)."""
    if t.fits:
        return t
    best = combine(model[2], setup, _allocated_budget(t), t.gpu.bf16)  # the cheapest stack of levers that fits this card
    if best is None:
        return t
    kept = _keep_promises(opts, (best,), est.peak_bytes, _allocated_budget(t), t.usable_bytes, model)
    return replace(t, lever=kept[0] if kept else None)


def _target_dict(t: TargetFit, unit: str, gpus: int) -> dict:
    lever = None if t.lever is None else {"lever": t.lever.lever, "change": t.lever.change,
                                          "peak_bytes": t.lever.peak_bytes, "cost": t.lever.cost}
    return {"name": t.gpu.name, "id": t.gpu.id, "memory_bytes": t.gpu.memory_bytes, "fits": t.fits,
            "headroom_bytes": t.headroom_bytes, "max_micro_batch": t.max_micro_batch,
            "accumulation_steps": t.accumulation_steps,
            "step_seconds": None if t.step_seconds is None else round(t.step_seconds, 4),
            f"{unit}_per_second": None if t.throughput is None else round(t.throughput, 1),
            f"{unit}_per_second_all_gpus": None if t.throughput is None else round(t.throughput * gpus, 1),
            "mfu": t.mfu, "bound": t.bound or None, "lever": lever, "verdict": t.verdict,
            "reserved_bytes": t.reserve.reserved if t.reserve else None,
            "on_card_bytes": t.reserve.on_card if t.reserve else None,
            "context_bytes": t.reserve.context if t.reserve else None,
            "run_seconds": None if t.run is None else round(t.run.seconds, 1),
            "run_seconds_range": None if t.run is None else [round(t.run.low, 1), round(t.run.high, 1)],
            "price_per_gpu_hour": None if t.run is None else t.run.price,
            "cost": None if t.run is None or t.run.amount is None else round(t.run.amount, 2),
            "cost_range": None if t.run is None or t.run.amount_range is None
            else [round(x, 2) for x in t.run.amount_range],
            "memory_bandwidth_bytes_per_second": t.gpu.bandwidth or None,
            "notes": list(t.notes)}


def result_dict(res: FitResult) -> dict:
    """The --json contract (docs/fit.md): keep these key names."""
    e = res.estimate
    s = e.setup
    unit = e.unit
    first = (res.targets or res.compare)[0] if (res.targets or res.compare) else None
    thr = None if not first or first.throughput is None else round(first.throughput, 1)
    return {
        "model": {"name": res.model_name, "source": res.model_source, "params": e.params,
                  "trainable_params": e.trainable_params},
        "setup": {"method": s.method, "precision": s.precision, "optimizer": s.optimizer, "batch": s.batch,
                  "seq": s.seq, "image_size": s.image_size, "grad_checkpointing": s.grad_checkpointing,
                  "lora_rank": s.lora_rank if s.method in ("lora", "qlora") else None,
                  "lora_targets": list(s.lora_targets) if s.method in ("lora", "qlora") else None,
                  "gpus": s.gpus, "shard": s.shard, "global_batch": res.global_batch, "attention": s.attention,
                  "margin_pct": res.margin_pct, "stack": s.stack, "accumulation_steps": s.accumulation,
                  "tp": s.tp, "pp": s.pp, "offload": s.offload, "ema": s.ema, "zero_grad": s.zero_grad,
                  "loss": {v: k for k, v in LOSS_FLAGS.items()}.get(s.loss, s.loss),
                  "optimizer_impl": s.optimizer_impl, "optimizer_in_backward": s.optimizer_in_backward,
                  "activation_offload": s.activation_offload, "load": s.load, "packed": s.packed or None},
        "peak_bytes": e.peak_bytes,
        "load_bytes": e.load_bytes,
        "peak_phase": e.phase,
        "breakdown": asdict(e.breakdown),
        "targets": [_target_dict(t, "tokens" if unit == "tokens" else "samples", s.gpus) for t in res.targets],
        "compare": [_target_dict(t, "tokens" if unit == "tokens" else "samples", s.gpus) for t in res.compare],
        "advice": [{"lever": lv.lever, "change": lv.change, "saves_bytes": lv.saves_bytes, "cost": lv.cost,
                    "fits": lv.fits, "tight": lv.tight} for lv in res.advice],
        "host": {"ram_bytes": res.host_ram_bytes, "ram_scope": "per node", "gpus_per_node": res.gpus_per_node,
                 "checkpoint_bytes": e.checkpoint_bytes},
        "estimate": {
            "step_seconds": None if not first or first.step_seconds is None else round(first.step_seconds, 4),
            "tokens_per_second": thr if unit == "tokens" else None, "samples_per_second": None if unit == "tokens" else thr,
            "gpu": first.gpu.id if first else None, "mfu": first.mfu if first else res.mfu,
            "train_flops": e.train_flops, "per": "GPU",
            "band_pct": res.band_pct,
            "bound": first.bound if first else None,
            "basis": "max(training FLOPs (3× forward, +1 forward with checkpointing) / (dense peak × the GPU "
                     "generation's published utilisation), bytes moved / memory bandwidth): an estimate"},
        "traced_peak_bytes": res.traced_peak_bytes,
        "traced_analytic_bytes": res.trace_analytic_bytes,
        "notes": list(res.notes) + ([res.trace_note] if res.trace_note else []),
    }


__all__ = ["LOADS", "fmt_duration"]  # for cli/fit.py, which talks to the use case only


def fmt_bytes(n: float) -> str:
    sign = "-" if n < 0 else ""
    n = abs(n)
    for unit, div in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= div:
            return f"{sign}{n / div:.2f} {unit}"
    return f"{sign}{int(n)} B"
