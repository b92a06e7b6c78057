"""The GPUs people rent have figures in the shipped gpu_perf.yaml, each from the GPU's own document (issue 41)."""

from __future__ import annotations

import yaml

from envman.app.fit import FitOptions, run_fit
from envman.fit.catalog import gpu_specs
from envman.resources import shipped_matrix_dir


def test_the_rented_gpus_get_a_time_estimate_not_only_a_memory_verdict():
    res = run_fit(FitOptions(model="gpt2", targets=("rtx-5090", "a40", "a10g", "l4", "l40s", "h200")))
    assert [t.gpu.id for t in res.targets if not t.throughput] == []


def test_the_a10g_is_timed_at_its_own_datasheet_not_the_a10s():
    a10g, a10 = gpu_specs(("a10g", "a10"))
    assert (dict(a10g.tflops)["bf16"], dict(a10.tflops)["bf16"]) == (70.0, 125.0)  # dense: 140 and 250 with sparsity
    assert a10g.bandwidth == a10.bandwidth == 600e9


def test_every_entry_says_what_confirms_it_or_why_it_is_uncertain():
    gpus = yaml.safe_load((shipped_matrix_dir() / "gpu_perf.yaml").read_text())["gpus"]
    loose = [g for g, e in gpus.items() if not e.get("confirmed_by") and not (e.get("uncertain") and e.get("uncertain_why"))]
    assert loose == ["rtx-3060", "rtx-6000-ada", "rtx-pro-6000-blackwell"]  # older entries whose document says why
