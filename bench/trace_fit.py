"""Generate tests/fixtures/fit/traced.json: the measured peak of real training steps, on data-less tensors.

Run ONCE in the separate trace venv (torch + transformers), not in envman's own environment:

    .venv-trace/bin/python bench/trace_fit.py            # all setups (745 s on a shared 2-core machine; the fixture is rewritten after every row)
    .venv-trace/bin/python bench/trace_fit.py --only gpt2 # a subset, printed, fixture untouched

How it measures (and why this way):
- The model is built from the published config values in matrices/models.yaml under
  ``torch._subclasses.fake_tensor.FakeTensorMode``: every tensor has shape, dtype and device but no data,
  so an 8B model costs nothing but Python time.
- ``torch.distributed._tools.mem_tracker.MemTracker`` records every storage alive at every op of
  TWO full steps (forward, backward, optimizer.step, zero_grad(set_to_none=True)); the peak is over both,
  so it covers the first step (optimizer state allocated while the gradients are alive) and the steady
  state (optimizer state alive during the forward).
- Fake tensors live on the CPU device. Fake CUDA tensors fail in backward ("hasPrimaryContext expects a
  valid device index") and CUDA autocast refuses without a GPU. Consequences, stated in docs/fit.md:
  mixed precision uses CPU autocast (bf16) whose cast lists are close to, not identical with, CUDA's;
  attention is the "eager" implementation (it keeps the s×s probabilities, as Korthikanti et al. count);
  flash / memory-efficient SDPA kernels on a real GPU keep less; the optimizer runs with foreach=True
  (the CUDA default, which allocates a parameter-sized intermediate list) because the CPU default is the
  per-tensor loop. CPU storages are not rounded to the CUDA allocator's 512 B blocks (noise below 0.1%).
- LoRA is a minimal PEFT-equivalent adapter (frozen base Linear + A (r×in) and B (out×r), no dropout,
  PEFT's defaults) so the trace needs no peft install.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # envman.fit.trace holds the recipe; the trace venv need not install envman
FIXTURE = ROOT / "tests" / "fixtures" / "fit" / "traced.json"

# model, method, precision, optimizer, batch, seq (tokens) or image size, grad checkpointing, lora rank/targets
SETUPS: list[dict] = [
    {"model": "gpt2", "precision": "fp32", "optimizer": "adamw", "batch": 8, "seq": 512},
    {"model": "gpt2", "precision": "bf16-mixed", "optimizer": "adamw", "batch": 8, "seq": 512},
    {"model": "gpt2", "precision": "bf16", "optimizer": "adamw", "batch": 8, "seq": 512},
    {"model": "gpt2", "precision": "fp32", "optimizer": "sgd", "batch": 8, "seq": 512},
    {"model": "gpt2", "precision": "fp32", "optimizer": "adamw", "batch": 8, "seq": 512, "grad_checkpointing": True},
    {"model": "gpt2", "precision": "fp32", "optimizer": "adamw", "batch": 2, "seq": 1024},
    {"model": "gpt2", "precision": "fp32", "optimizer": "adamw", "batch": 32, "seq": 128},
    {"model": "gpt2", "precision": "fp32", "optimizer": "adamw", "batch": 1, "seq": 128},
    {"model": "gpt2-xl", "precision": "bf16-mixed", "optimizer": "adamw", "batch": 2, "seq": 512},
    {"model": "llama-3.2-1b", "precision": "bf16-mixed", "optimizer": "adamw", "batch": 2, "seq": 512},
    {"model": "llama-3.2-1b", "precision": "bf16", "optimizer": "adamw", "batch": 4, "seq": 1024},
    {"model": "llama-3.2-1b", "precision": "bf16-mixed", "optimizer": "adamw", "batch": 8, "seq": 1024},
    {"model": "llama-3.2-1b", "precision": "bf16", "optimizer": "adamw", "batch": 4, "seq": 1024, "grad_checkpointing": True},
    {"model": "llama-3.2-1b", "precision": "fp32", "optimizer": "sgd", "batch": 1, "seq": 512},
    {"model": "llama-3.2-1b", "method": "lora", "precision": "bf16", "optimizer": "adamw", "batch": 4, "seq": 512,
     "lora_rank": 16, "lora_targets": ["q_proj", "k_proj", "v_proj", "o_proj"]},
    {"model": "llama-3.2-3b", "precision": "bf16", "optimizer": "adamw", "batch": 1, "seq": 1024, "grad_checkpointing": True},
    {"model": "llama-3.2-3b", "precision": "bf16", "optimizer": "adamw", "batch": 4, "seq": 1024},
    {"model": "llama-3.2-3b", "method": "lora", "precision": "bf16", "optimizer": "adamw", "batch": 2, "seq": 512,
     "lora_rank": 16, "lora_targets": ["q_proj", "v_proj"]},
    {"model": "llama-3.1-8b", "precision": "bf16", "optimizer": "adamw", "batch": 1, "seq": 256},
    {"model": "llama-3.1-8b", "precision": "bf16", "optimizer": "adamw", "batch": 1, "seq": 2048},
    {"model": "llama-3.1-8b", "method": "lora", "precision": "bf16", "optimizer": "adamw", "batch": 1, "seq": 512,
     "lora_rank": 8, "lora_targets": ["q_proj", "k_proj", "v_proj", "o_proj"], "grad_checkpointing": True},
    {"model": "bert-base", "precision": "fp32", "optimizer": "adamw", "batch": 32, "seq": 128},
    {"model": "bert-base", "precision": "bf16-mixed", "optimizer": "adamw", "batch": 16, "seq": 512},
    {"model": "bert-large", "precision": "bf16-mixed", "optimizer": "adamw", "batch": 16, "seq": 128, "grad_checkpointing": True},
    {"model": "vit-base", "precision": "fp32", "optimizer": "adamw", "batch": 32, "image_size": 224},
    {"model": "vit-base", "precision": "bf16-mixed", "optimizer": "adamw", "batch": 64, "image_size": 224},
    {"model": "vit-large", "precision": "bf16", "optimizer": "adamw", "batch": 16, "image_size": 224, "grad_checkpointing": True},
    {"model": "vit-large", "precision": "bf16-mixed", "optimizer": "sgd", "batch": 64, "image_size": 224},
    {"model": "resnet-50", "precision": "fp32", "optimizer": "sgd-momentum", "batch": 32, "image_size": 224},
    {"model": "resnet-50", "precision": "bf16-mixed", "optimizer": "adamw", "batch": 64, "image_size": 224},
    {"model": "resnet-50", "precision": "fp32", "optimizer": "adamw", "batch": 8, "image_size": 224},
]

DEFAULTS = {"method": "full", "grad_checkpointing": False, "seq": None, "image_size": None, "lora_rank": None,
            "lora_targets": None}


def load_models() -> dict[str, dict]:
    import yaml

    doc = yaml.safe_load((ROOT / "matrices" / "models.yaml").read_text())
    return {m["id"]: m for m in doc["models"]}


def trace_one(entry: dict, setup: dict) -> dict:
    from envman.fit.runspec import Setup
    from envman.fit.trace import trace_step

    st = Setup(method=setup["method"], precision=setup["precision"], optimizer=setup["optimizer"],
               batch=setup["batch"], seq=setup["seq"], image_size=setup["image_size"],
               grad_checkpointing=setup["grad_checkpointing"], lora_rank=setup["lora_rank"] or 16,
               lora_targets=tuple(setup["lora_targets"] or ()))
    return trace_step(entry["config"], entry["task"], st)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", help="trace only setups of this model id; print, do not write the fixture")
    ap.add_argument("--out", type=Path, default=FIXTURE, help="where to write (default: the test fixture)")
    args = ap.parse_args(argv)
    import torch
    import transformers

    models = load_models()
    out = {
        "generated_by": "bench/trace_fit.py",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": sys.version.split()[0],
        "method": "FakeTensorMode (device cpu) + MemTracker, 2 training steps, peak over both; attention 'eager'; "
                  "optimizer foreach=True; bf16-mixed = torch.autocast('cpu', bfloat16)",
        "complete": False,
        "rows": [],
    }
    t_all = time.perf_counter()
    for raw in SETUPS:
        setup = {**DEFAULTS, **raw}
        if args.only and setup["model"] != args.only:
            continue
        t0 = time.perf_counter()
        res = trace_one(models[setup["model"]], setup)
        dt = time.perf_counter() - t0
        out["rows"].append({"setup": setup, **res, "trace_seconds": round(dt, 1)})
        print(f"{res['peak_bytes'] / 2**30:9.3f} GiB {dt:6.1f}s  {json.dumps(raw)}", flush=True)
        if not args.only:  # after every row: a long run that stops keeps what it measured
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(out, indent=1) + "\n")
    out["complete"] = not args.only
    print(f"total {time.perf_counter() - t_all:.0f}s")
    if not args.only:
        args.out.write_text(json.dumps(out, indent=1) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
