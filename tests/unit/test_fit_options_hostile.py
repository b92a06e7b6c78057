"""`envman fit`'s options, in any combination and with any value: an estimate (exit 0, or 8: it does not fit), or a
refusal — exit 2 for a value out of range, else 1 — as one `error:` line and one `hint:` line; never exit 70.
Found when `--optimizer-in-backward` on a run that does not fit made the advice try FSDP, which that option
forbids: the estimate's SetupError escaped as an internal error."""
from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envman.cli.main import main

OPTIONS = ("--activation-offload --attention --batch --compare --ema --epochs --global-batch --gpus --image-size "
           "--lora-rank --lora-targets --loss --margin --method --mfu --offload --optimizer --packed --params --pp "
           "--precision --price-per-gpu-hour --samples --seq --shard --stack --tokens --tp --use --zero-grad").split()
FLAGS = ("--compile --fused-optimizer --grad-checkpointing --no-grad-checkpointing --optimizer-in-backward "
         "--selective-checkpointing --json").split()
VALUES = st.text(max_size=8) | st.sampled_from([
    "0", "-1", "1e400", "inf", "nan", "1e9", "7B", "1,5", "h100", "l4,h100", ",", "lora", "qlora", "full", "fsdp",
    "zero3", "ddp", "bf16-mixed", "fp32", "adamw", "adamw-8bit", "optimizer", "8", "2", "3", "1024",
    "99999999999999999999", "0.5", "2.49", "1_000", "a\x85b"])


@settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck))
@given(options=st.lists(st.tuples(st.sampled_from(OPTIONS), VALUES), max_size=3),
       flags=st.lists(st.sampled_from(FLAGS), max_size=2))
def test_any_options_are_estimated_or_refused_with_a_hint(options, flags):
    err = io.StringIO()
    with redirect_stderr(err), redirect_stdout(io.StringIO()):
        rc = main(["fit", "--model", "llama-3.1-8b", "--target", "h100", *[w for o in options for w in o], *flags])
    lines = err.getvalue().splitlines()
    assert rc in (0, 1, 2, 8), lines
    if rc in (1, 2) and lines and lines[0].startswith("error: "):  # exit 2 is also click's own usage text
        assert len(lines) == 2 and lines[1].startswith("hint: "), lines


def test_optimizer_in_backward_on_a_run_that_does_not_fit_is_advised_without_sharding():
    out = io.StringIO()
    with redirect_stdout(out), redirect_stderr(io.StringIO()):
        assert main(["fit", "--model", "llama-3.1-8b", "--target", "h100", "--optimizer-in-backward"]) == 8
    assert "to make it fit (bytes saved on this run, biggest first):" in out.getvalue()
    assert "FSDP" not in out.getvalue()
