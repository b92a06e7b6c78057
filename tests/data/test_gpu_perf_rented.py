"""The GPUs people rent have figures in the shipped gpu_perf.yaml, each from the GPU's own document (issue 41).

Read in a fresh process: fit's readers keep gpu_perf.yaml per process, and the unit tests' fixture copy must
neither leak in here nor be replaced by the shipped one for them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import yaml

from envman.resources import shipped_matrix_dir

_PROBE = """
import json
from envman.app.fit import FitOptions, run_fit
from envman.fit.catalog import gpu_specs
res = run_fit(FitOptions(model="gpt2", targets=("rtx-5090", "a40", "a10g", "l4", "l40s", "h200")))
print(json.dumps({"untimed": [t.gpu.id for t in res.targets if not t.throughput],
                  "tflops": {g.id: dict(g.tflops) for g in gpu_specs(("a10g", "a10"))},
                  "bandwidth": {g.id: g.bandwidth for g in gpu_specs(("a10g", "a10"))}}))
"""


def _shipped() -> dict:
    env = {**os.environ, "ENVMAN_MATRIX_DIR": str(shipped_matrix_dir())}
    out = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_the_rented_gpus_get_a_time_estimate_and_the_a10g_its_own_datasheets_rate():
    got = _shipped()
    assert got["untimed"] == []  # the RTX 5090 and the A40 were memory-only
    assert (got["tflops"]["a10g"]["bf16"], got["tflops"]["a10"]["bf16"]) == (70.0, 125.0)  # dense; A10G was at 125
    assert got["bandwidth"]["a10g"] == got["bandwidth"]["a10"] == 600e9


def test_every_entry_says_what_confirms_it_or_why_it_is_uncertain():
    gpus = yaml.safe_load((shipped_matrix_dir() / "gpu_perf.yaml").read_text())["gpus"]
    loose = [g for g, e in gpus.items() if not e.get("confirmed_by") and not (e.get("uncertain") and e.get("uncertain_why"))]
    assert loose == ["rtx-3060", "rtx-6000-ada", "rtx-pro-6000-blackwell"]  # older entries whose document says why
