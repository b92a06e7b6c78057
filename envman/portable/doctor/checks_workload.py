"""Will the project's training fit this machine's GPUs? (fact ``workload_fit`` from `envman fit`)."""

from __future__ import annotations

from .findings import Finding, error, warn
from .knowledge import Knowledge
from .view import FactsView, as_dict, as_num, as_str


def check_workload_fit(v: FactsView, k: Knowledge) -> list[Finding]:
    fit = as_dict(v.f.get("workload_fit"))
    if not fit:
        return []
    if as_str(fit.get("error")):
        return [warn("workload-unjudged", f"envman.yaml's workload cannot be estimated: {as_str(fit.get('error'))}",
                     "fix workload: in envman.yaml (its keys are `envman fit`'s options)")]
    peak = as_num(fit.get("peak_mib"))
    margin = as_num(fit.get("margin_pct"))
    if peak is None or not v.gpus:
        return []
    keep = 1 - (margin if margin is not None else 10) / 100
    what = f"{as_str(fit.get('model')) or 'the model'} ({as_str(fit.get('method'))}, {as_str(fit.get('precision'))})"
    short = [(g, peak - g.mem_total_mib * keep) for g in v.gpus
             if g.mem_total_mib and peak > g.mem_total_mib * keep]
    if not short:
        return []
    g, miss = max(short, key=lambda x: x[1])
    names = ", ".join(sorted({x.label for x, _ in short}))
    return [error(
        "workload-does-not-fit",
        f"envman.yaml's workload {what} needs about {peak:,.0f} MiB per GPU; {names} has {g.mem_total_mib:,.0f} MiB "
        f"(short by {miss:,.0f} MiB with a {margin if margin is not None else 10:g}% margin): training will stop with "
        "'CUDA out of memory'",
        "run `envman fit` in the project for the levers ranked by what they save here (a smaller micro-batch with "
        "gradient accumulation, gradient checkpointing, pure bf16, an 8-bit optimizer, LoRA/QLoRA, sharding)",
    )]


CHECKS = (check_workload_fit,)
