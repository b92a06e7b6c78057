"""The step time's optimizer part (envman/fit/speed.py optimizer_bytes): the optimizer's kernels run after backward
on the same stream, memory-bound, so their time adds to the step's (gpu_perf.yaml optimizer_passes, read from
torch.optim)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from envman.app.fit import FitOptions, run_fit
from envman.fit.speed import optimizer_bytes
from tests.unit.test_fit_reference import shipped_data

BERT = FitOptions(model="bert-large", stack="torch-amp", precision="fp16-mixed", batch=4, seq=384, attention="eager",
                  targets=("v100-sxm2-16gb",))


@pytest.mark.parametrize("optimizer, impl, passes", [
    ("adamw", "foreach", 21),  # mul_, lerp_, mul_, addcmul_, sqrt, div_, add_, addcdiv_: 2+3+2+4+2+2+2+4
    ("adamw", "for-loop", 21),  # the same ops, tensor by tensor
    ("adamw", "fused", 7),  # one kernel: params, grads, both moments read; params and moments written
    ("sgd-momentum", "foreach", 8),  # mul_(bufs), add_(bufs, grads), add_(params, bufs)
    ("lion", "foreach", 0),  # not read: no step time counted
])
def test_the_optimizer_step_moves_its_passes_over_the_state_dtype(optimizer, impl, passes):
    with shipped_data():
        res = run_fit(replace(BERT, optimizer=optimizer, optimizer_impl=impl))
        moved = optimizer_bytes(res.estimate)
    assert moved == pytest.approx(passes * res.estimate.trainable_params * 4)  # fp32 state under autocast


def test_a_small_batch_pays_the_optimizers_step_whole():
    # NVIDIA's BERT-large SQuAD on one V100 16GB, fp16, batch 4 × 384: 35.88 samples/s measured
    # (tests/reference/runs.yaml nvidia-bert-squad-dgx1-16g-g1-b4-amp); without the step's 28 GB of foreach
    # AdamW passes envman said 49.2 samples/s (+37%). 335 M parameters × 21 passes × 4 B / 900 GB/s = 31 ms
    with shipped_data():
        res = run_fit(BERT)
        fused = run_fit(replace(BERT, optimizer_impl="fused"))
    t, f = res.targets[0], fused.targets[0]
    assert t.step_seconds - f.step_seconds == pytest.approx(14 * res.estimate.trainable_params * 4 / 900e9, rel=0.01)
    # samples/s with the catalog's masked-LM head (the row's classifier head: 35.5, -1%; docs/fit-reference.md)
    assert (round(t.throughput / 384, 1), round(f.throughput / 384, 1)) == (33.4, 40.5)
