"""The project's `workload:` judged for init, lock, doctor and cluster export, as `envman fit` does."""

from __future__ import annotations

from dataclasses import replace

from envman.app.fit import FitOptions, FitResult, estimate_run, fmt_bytes, run_fit
from envman.errors import EnvmanError
from envman.fit.catalog import allocator_rules, gpu_specs
from envman.fit.reserve import reserve


def workload_options(workload: tuple[tuple[str, object], ...] | dict, targets: tuple[str, ...] = (),
                     path: str = ".") -> FitOptions:
    """FitOptions from an envman.yaml ``workload:`` (keys as `envman fit` options) and the spec's targets."""
    kw = dict(workload)
    if "lora_targets" in kw:
        kw["lora_targets"] = tuple(kw["lora_targets"])  # type: ignore[arg-type]
    if "params" in kw:
        kw["params"] = int(kw["params"])  # type: ignore[call-overload]
    return replace(FitOptions(path=path, targets=tuple(targets)), **kw)  # type: ignore[arg-type]


def with_workload(opts: FitOptions, given: frozenset[str]) -> tuple[FitOptions, str | None]:
    """`envman fit` in a project: without --model or --params the run is envman.yaml's ``workload:``, and each
    option given on the command line (``given``: FitOptions field names) overrides its key. (options, a note)."""
    if opts.model or opts.params is not None:
        return opts, None
    from pathlib import Path

    from envman.project.spec import load_spec

    spec = load_spec(Path(opts.path))
    if spec is None or not spec.workload:
        return opts, None
    kept = tuple((k, v) for k, v in spec.workload if k not in given)
    merged = replace(workload_options(kept, opts.targets, opts.path),
                     **{k: getattr(opts, k) for k in given if k != "path"})
    over = sorted(k for k, _ in spec.workload if k in given)
    return merged, "run: envman.yaml workload" + (f" (the command line overrides {', '.join(over)})" if over else "")


def workload_verdicts(workload, targets: tuple[str, ...], path: str = ".") -> tuple[list[str], list[str]]:
    """(notes, warnings) for init and lock: does the project's workload fit each target GPU? GPUs without
    memory and throughput data, or a bare compute capability, are said and skipped, never fatal."""
    if not workload or not targets:
        return [], []
    known, skipped = [], []
    for t in targets:
        try:
            gpu_specs((t,))
            known.append(t)
        except EnvmanError:
            skipped.append(t)
    notes = [f"workload: no memory data for {', '.join(skipped)}: not judged (matrices/gpu_perf.yaml)"] if skipped else []
    warnings: list[str] = []
    for target in known:  # one run per target: the levers are ranked for that GPU's memory
        try:
            res = run_fit(workload_options(workload, (target,), path))
        except EnvmanError as exc:
            return notes, [f"workload: cannot be judged: {exc.message}"]
        _verdict(res, notes, warnings)
    return notes, warnings


def _verdict(res: FitResult, notes: list[str], warnings: list[str]) -> None:
    peak = fmt_bytes(res.estimate.peak_bytes)
    what = f"{res.model_name}, {res.estimate.setup.method}, {res.estimate.setup.precision}"
    for t in res.targets:
        if t.fits:
            notes.append(f"workload: {what}: peak {peak} per GPU fits {t.gpu.name} "
                         f"({fmt_bytes(t.headroom_bytes)} to spare, micro-batch up to {t.max_micro_batch})")
        elif t.runs:
            notes.append(f"workload: {what}: peak {peak} per GPU is tight on {t.gpu.name} (inside the card, "
                         f"{fmt_bytes(-t.headroom_bytes)} into the {res.margin_pct:g}% margin)")
        else:
            a = res.advice[0] if res.advice else None
            lever = f"; first lever: {a.lever} ({a.change}; {a.cost})" if a else ""
            warnings.append(f"workload: {what}: peak {peak} per GPU does not fit {t.gpu.name} "
                            f"(short by {fmt_bytes(-t.headroom_bytes)} with a {res.margin_pct:g}% margin){lever} "
                            "— `envman fit` lists every lever")


def workload_fact(workload, path: str = ".") -> dict:
    """For `envman doctor`: the workload's per-GPU estimate (allocated, and on the card with the allocator's
    reserve and the CUDA context) as a fact its pure check judges on each GPU (the doctor runs in images too,
    where no estimator is)."""
    opts = workload_options(workload, (), path)
    try:
        name, _src, arch, _entry, setup, est = estimate_run(opts)
    except EnvmanError as exc:
        return {"error": exc.message}
    return {"model": name, "method": setup.method, "precision": setup.precision,
            "peak_mib": round(est.peak_bytes / 2**20),
            "on_card_mib": round(reserve(arch, est, allocator_rules()).on_card / 2**20), "margin_pct": opts.margin_pct}
