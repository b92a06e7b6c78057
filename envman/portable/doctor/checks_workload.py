"""Will the project's training fit this machine's GPUs? (fact ``workload_fit`` from `envman fit`: reserved + the
CUDA context, judged with ``fits_verdict``, the rule `envman fit` uses; inside an image there is no such fact)."""

from __future__ import annotations

from .findings import Finding, error, warn
from .fitverdict import fits_verdict
from .knowledge import Knowledge
from .view import FactsView, as_dict, as_num, as_str

_REMEDY = ("run `envman fit` in the project for the levers ranked by what they save here (a smaller micro-batch with "
           "gradient accumulation, gradient checkpointing, pure bf16, an 8-bit optimizer, LoRA/QLoRA, sharding)")


def check_workload_fit(v: FactsView, k: Knowledge) -> list[Finding]:
    fit = as_dict(v.f.get("workload_fit"))
    if not fit:
        return []
    if as_str(fit.get("error")):
        return [warn("workload-unjudged", f"envman.yaml's workload cannot be estimated: {as_str(fit.get('error'))}",
                     "fix workload: in envman.yaml (its keys are `envman fit`'s options)")]
    need = as_num(fit.get("on_card_mib")) or as_num(fit.get("peak_mib"))  # peak_mib: a facts file recorded before on_card_mib
    margin = as_num(fit.get("margin_pct"))
    margin = 10 if margin is None else margin
    if need is None or not v.gpus:
        return []
    judged = [(g, mem, fits_verdict(need, mem * (1 - margin / 100), mem)) for g in v.gpus if (mem := g.mem_total_mib)]
    worst = next((x for x in ("does not fit", "tight") if any(j == x for *_, j in judged)), None)
    if worst is None:
        return []
    hit = [(g, mem) for g, mem, j in judged if j == worst]
    mem = min(m for _, m in hit)
    names = ", ".join(sorted({g.label for g, _ in hit}))
    what = (f"envman.yaml's workload {as_str(fit.get('model')) or 'the model'} ({as_str(fit.get('method'))}, "
            f"{as_str(fit.get('precision'))}) needs about {need:,.0f} MiB per GPU on the card (reserved + the CUDA "
            f"context); {names} has {mem:,.0f} MiB")
    if worst == "tight":
        return [warn("workload-tight", f"{what}: inside the card but within the {margin:g}% margin (fragmentation, "
                     "kernel workspaces): it runs if they stay small", _REMEDY)]
    return [error("workload-does-not-fit", f"{what} (short by {need - mem:,.0f} MiB): training will stop "
                  "with 'CUDA out of memory'", _REMEDY)]


CHECKS = (check_workload_fit,)
