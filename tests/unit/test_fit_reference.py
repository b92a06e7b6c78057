"""envman fit against published measurements of real training runs (tests/reference/runs.yaml).

Every row's envman answer is computed here, the aggregate is printed, and the test fails when it falls below
the numbers recorded in docs/fit.md (a regression), or when a fits/OOM verdict is wrong. The table in
docs/fit-reference.md is the one ``markdown_table()`` prints.
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from envman.app.fit import FitOptions, estimate_run, run_fit
from envman.fit.estimate import estimate

ROOT = Path(__file__).resolve().parents[2]
RUNS = yaml.safe_load((ROOT / "tests" / "reference" / "runs.yaml").read_text())["runs"]
# what envman reaches today (docs/fit.md); the test fails if a change makes any of these worse. The fourth round
# added 12 rows (9 of them reserved/monitor figures) and moved the shares down from 0.74 / 1.0: no row got worse
# for a model change but the four DeepSpeed/FSDP 70B rows, which docs/fit.md explains. The fifth round added two
# ms-swift `reserved` peaks outside 10% (−14%, −10.3%): 40 of 64 (0.625), no earlier peak row moved; the
# rows' loops' zero_grad (rasbt: before backward; HF BERT, PyTorch 1.x: kept in place) brought fp16 BERT in: 41 of 64.
# The sixth round added 241 throughput rows from 3 sources (llm-foundry's MPT tables 178 of 209 within 25%,
# NVIDIA's BERT SQuAD tables 8 of 30, NeMo AutoModel 1 of 2): 197 of 256 (0.77, was 11 of 15); no peak share moved.
# Issue 41's fitacc round: the optimizer's step time (gpu_perf.yaml optimizer_passes) 203 → 209 of 262 (0.798)
FLOOR = {"peak_within_10": 0.65, "peak_within_25": 0.95, "throughput_within_25": 0.79, "allocated_within_10": 1.0}
RESERVED_UNITS = ("GiB-reserved", "GB-reserved", "GB-monitor", "MB-nvidia-smi")
UNITS = {"GB": 1e9, "GiB": 2**30, "GiB-reserved": 2**30, "GB-reserved": 1e9, "GB-monitor": 1e9, "GB-unstated": 1e9, "MB-nvidia-smi": 2**20}


def options(row: dict, tmp: Path) -> FitOptions:
    kw = dict(row["envman"])
    archs = kw.pop("architectures", None)
    frozen = kw.pop("frozen", None)
    config = kw.pop("config", None)
    if config is not None:  # a model the catalog lacks, as its source configures it (runs.yaml: mpt_configs)
        path = tmp / f"{row['id']}.json"
        path.write_text(json.dumps(config))
        kw["model"] = str(path)
    if frozen is not None:  # a diffusers pipeline folder holding only the components the run puts on the GPU
        kw["model"] = str(pipeline_folder(kw["model"], frozen, tmp / row["id"]))
    if archs:  # the model's published config with the head its run used (config.json `architectures`)
        from envman.fit.catalog import raw_config

        cfg, _ = raw_config(kw["model"])
        path = tmp / f"{row['id']}.json"
        path.write_text(json.dumps({**cfg, "architectures": archs}))
        kw["model"] = str(path)
    for k in ("lora_targets", "targets"):
        if k in kw:
            kw[k] = tuple(kw[k])
    return FitOptions(**kw)


def pipeline_folder(model: str, frozen: list[str], folder: Path) -> Path:
    """The catalog pipeline's denoiser and the named frozen parts, as a downloaded pipeline folder lays them out."""
    entry = next(e for e in yaml.safe_load((ROOT / "matrices" / "models.yaml").read_text())["models"] if e["id"] == model)
    den = {"UNet2DConditionModel": "unet", "ControlNetModel": "controlnet"}.get(entry["config"].get("_class_name"), "transformer")
    parts = {den: entry["config"], **{f["name"]: f["config"] for f in entry.get("frozen", []) if f["name"] in frozen}}
    for name, cfg in parts.items():
        (folder / name).mkdir(parents=True, exist_ok=True)
        (folder / name / "config.json").write_text(json.dumps(cfg))
    (folder / "model_index.json").write_text(json.dumps({k: ["diffusers", k] for k in parts}))
    return folder


def max_seq(opts: FitOptions, memory_gib: float) -> int:
    """The longest sequence envman says fits in that memory (its default 10% margin)."""
    budget = int(memory_gib * 2**30 * (1 - opts.margin_pct / 100))
    _, _, arch, _, setup, _ = estimate_run(replace(opts, seq=512))
    lo, hi = 0, 262144
    while hi - lo > 16:
        mid = (lo + hi) // 2
        try:
            ok = estimate(arch, replace(setup, seq=mid)).peak_bytes <= budget
        except ValueError:
            ok = False
        lo, hi = (mid, hi) if ok else (lo, mid)
    return lo


def answer(row: dict, tmp: Path) -> dict:
    opts = options(row, tmp)
    m = row["measured"]
    if row["kind"] == "max_seq":
        got = max_seq(opts, m["memory_gb"])
        return {"envman": got, "ref": m["value"], "err": (got - m["value"]) / m["value"], "unit": "tokens"}
    res = run_fit(opts)
    t = res.targets[0]
    if row["kind"] == "fits":
        # tight (inside the card, within the margin) runs if fragmentation stays small: right for a run that ran,
        # wrong for one that ran out of memory
        return {"envman": t.runs, "ref": m["fits"], "ok": t.runs == m["fits"], "peak": res.estimate.peak_bytes,
                "usable": t.usable_bytes, "unit": "verdict", "verdict": t.verdict,
                "on_card": t.reserve.on_card if t.reserve else None}
    if row["kind"] == "throughput":
        rate = t.throughput / (res.estimate.setup.seq or 1) if m["unit"] == "samples/s" and res.estimate.unit == "tokens" \
            else t.throughput  # an encoder's samples: its tokens / the sequence length
        return {"envman": rate, "ref": m["value"], "err": (rate - m["value"]) / m["value"],
                "unit": m["unit"], "bound": t.bound}
    # a reserved figure is judged against the reserved estimate (the allocator's segments), an NVML one with the
    # CUDA context too: the source's own reading where it printed one, else envman's
    r = t.reserve
    got = res.estimate.peak_bytes
    if r is not None and m["unit"] in RESERVED_UNITS:
        got = r.reserved + (m["context_mib"] * 2**20 if "context_mib" in m else
                            r.context if m["unit"] in ("GB-monitor", "MB-nvidia-smi") else 0)
    ref = m["value"] * UNITS[m["unit"]]
    return {"envman": got / UNITS[m["unit"]], "ref": m["value"], "err": (got - ref) / ref, "unit": m["unit"]}


@contextmanager
def shipped_data():
    """The table validates what envman ships (matrices/), not the suite's frozen fixture matrix."""
    from envman.fit import catalog, stacks
    from envman.resources import shipped_matrix_dir

    caches = (catalog.load_models, catalog._load_perf, catalog._perf_doc, catalog.allocator_rules,
              stacks.load_stacks)
    old = os.environ.get("ENVMAN_MATRIX_DIR")
    os.environ["ENVMAN_MATRIX_DIR"] = str(shipped_matrix_dir())
    for c in caches:
        c.cache_clear()
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("ENVMAN_MATRIX_DIR", None)
        else:
            os.environ["ENVMAN_MATRIX_DIR"] = old
        for c in caches:
            c.cache_clear()


@pytest.fixture(scope="module")
def answers(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ref")
    with shipped_data():
        return {r["id"]: answer(r, tmp) for r in RUNS}


def aggregate(answers: dict) -> dict:
    peaks = [answers[r["id"]]["err"] for r in RUNS if r["kind"] in ("peak", "max_seq")]
    thr = [answers[r["id"]]["err"] for r in RUNS if r["kind"] == "throughput"]
    states = [answers[r["id"]]["err"] for r in RUNS if r["kind"] == "model_states"]
    held = [answers[r["id"]]["err"] for r in RUNS if r["kind"] == "throughput" and not r.get("calibrates")]
    verdicts = [answers[r["id"]]["ok"] for r in RUNS if r["kind"] == "fits"]
    share = lambda xs, lim: sum(abs(x) <= lim for x in xs) / len(xs)  # noqa: E731
    allocated = [answers[r["id"]]["err"] for r in RUNS if r["kind"] == "peak" and r["measured"]["unit"] == "GB"]
    return {"rows": len(RUNS), "peak_rows": len(peaks), "peak_within_10": share(peaks, 0.10),
            "allocated_rows": len(allocated), "allocated_within_10": share(allocated, 0.10),
            "peak_within_25": share(peaks, 0.25), "verdicts": len(verdicts), "verdicts_right": sum(verdicts),
            "throughput_rows": len(thr), "throughput_within_25": share(thr, 0.25),
            "throughput_held_out_within_25": share(held, 0.25) if held else None,
            "model_state_rows": len(states), "model_states_within_10": share(states, 0.10) if states else None}


def test_the_table_is_big_and_spread_as_the_issue_asks():
    assert len(RUNS) >= 40
    assert all(r["source"] and r["setup"] for r in RUNS)
    stacks = {r["envman"].get("stack") for r in RUNS}
    assert {"litgpt", "hf-trainer", "fsdp2", "torch-amp"} <= stacks
    assert any(str(s).startswith("peft-qlora") for s in stacks)  # PEFT QLoRA (the 2024 transformers of its rows)
    assert {"peak", "fits", "max_seq", "throughput", "model_states"} == {r["kind"] for r in RUNS}


# verdicts envman gets wrong today, each explained in docs/fit.md ("What stays off, and why"); the test fails
# when another goes wrong, and when one of these comes right (then drop it here and in the docs). None since the
# A100 40GB is judged against the 40,536 MiB a process is given with ECC on (gpu_perf.yaml driver_total_mib)
KNOWN_WRONG: set[str] = set()


def test_every_fits_or_oom_verdict_is_right(answers):
    wrong = {r["id"]: f"envman {answers[r['id']]['envman']}, measured {r['measured']['fits']} "
             f"(peak {answers[r['id']]['peak'] / 2**30:.1f} GiB, on the card {answers[r['id']]['on_card'] / 2**30:.1f} GiB, "
             f"usable {answers[r['id']]['usable'] / 2**30:.1f} GiB)"
             for r in RUNS if r["kind"] == "fits" and not answers[r["id"]]["ok"]}
    assert set(wrong) == KNOWN_WRONG, wrong
    docs = (ROOT / "docs" / "fit.md").read_text()
    assert all(f"`{k}`" in docs for k in KNOWN_WRONG), "explain each wrong verdict in docs/fit.md"


def test_the_aggregate_does_not_regress(answers):
    agg = aggregate(answers)
    print(json.dumps(agg, indent=1))
    assert agg["peak_within_10"] >= FLOOR["peak_within_10"], agg
    assert agg["peak_within_25"] >= FLOOR["peak_within_25"], agg
    assert agg["throughput_within_25"] >= FLOOR["throughput_within_25"], agg
    # the rows printed as max_memory_allocated(): what envman computes, with no allocator reserve to explain a gap
    assert agg["allocated_within_10"] >= FLOOR["allocated_within_10"], agg


def markdown_table(answers: dict) -> str:
    lines = ["| row | source | setup | measured | envman | error |", "|---|---|---|---:|---:|---:|"]
    for r in RUNS:
        a = answers[r["id"]]
        if r["kind"] == "fits":
            meas = "fits" if a["ref"] else "OOM"
            got = a["verdict"] + ("" if a["ok"] else " ✗")
            err = "right" if a["ok"] else "WRONG"
        else:
            meas, got, err = f"{a['ref']:,} {a['unit']}", f"{a['envman']:,.{0 if a['unit'] in ('tokens', 'MB-nvidia-smi') or a['ref'] > 100 else 2}f}", f"{a['err']:+.0%}"
        lines.append(f"| {r['id']} | {r['source'].split(' (')[0]} | {r['setup']} | {meas} | {got} | {err} |")
    return "\n".join(lines)


def test_docs_show_this_table(answers):
    docs = (ROOT / "docs" / "fit-reference.md").read_text()
    assert markdown_table(answers) in docs, "regenerate: .venv/bin/python tests/unit/test_fit_reference.py"


if __name__ == "__main__":  # print the table (docs/fit-reference.md) and the aggregate (docs/fit.md)
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        ans = {r["id"]: answer(r, Path(d)) for r in RUNS}
    print(markdown_table(ans))
    print(json.dumps(aggregate(ans), indent=1))
