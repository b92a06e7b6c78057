#!/usr/bin/env python3
"""One real training setup on the GPU: the allocator's peak after steps 1-3 and the achieved throughput.

    python3 probe_train.py SETUP_JSON MODEL_CONFIG_JSON [--dry-run]

Prints one JSON object on stdout. The model is built from the published config (matrices/models.yaml, the
same shapes `envman fit` reads) and randomly initialised: no weights are downloaded. `torch.cuda.
max_memory_allocated()` is what the caching allocator handed out (bytes, no CUDA context, no fragmentation),
the same quantity `envman fit` estimates; `max_memory_reserved()` beside it is what the allocator held in
segments (what published `reserved` figures print, and what docs/fit-allocator.md could not measure without a GPU). With --dry-run the model is shrunk (setups.json `dry`) and runs on
the CPU so that the code path is exercised where no GPU is.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time

# --dry-run: every config key that sets a size, and the toy value it gets (setups.json `dry` may override)
DRY_SHAPES = {("layers", "n_layer", "num_hidden_layers"): 2, ("hidden", "n_embd", "hidden_size"): 64,
              ("ffn", "intermediate_size"): 128, ("heads", "n_head", "num_attention_heads"): 4,
              ("kv_heads", "num_key_value_heads"): 2, ("head_dim",): 16, ("vocab", "vocab_size"): 512}


def build_model(torch, model_cfg: dict, probe: dict, dry: dict | None, setup_config: dict):
    """(model, make_batch, unit): a randomly initialised model and a function that makes one micro-batch."""
    cfg = dict(model_cfg["config"], **setup_config)
    task = model_cfg["task"]
    batch = probe["batch"] if dry is None else dry["batch"]
    if cfg.get("model_type") == "resnet":
        import torchvision  # noqa: F401  (torchvision's ResNet-50 is what users train; the HF one is not)

        model = torchvision.models.resnet50(weights=None, num_classes=cfg.get("num_labels", 1000))
        side = probe.get("image_size", 224) if dry is None else dry["image_size"]

        def make_batch(device):
            return {"x": torch.randn(batch, 3, side, side, device=device),
                    "y": torch.randint(0, cfg.get("num_labels", 1000), (batch,), device=device)}
        return model, make_batch, ("images", batch)

    import transformers

    if dry is not None:  # a tiny copy of the same architecture: same code path, toy shapes
        for keys, value in DRY_SHAPES.items():
            for k in keys:
                if k in cfg:
                    cfg[k] = dry.get(keys[0], value)
    seq = probe.get("seq", 512) if dry is None else dry["seq"]
    kwargs = {"attn_implementation": probe.get("attention", "eager")}
    config = transformers.AutoConfig.for_model(**cfg)
    head = "sequence-classification" if any(a.endswith("ForSequenceClassification") for a in cfg.get("architectures", ())) else None
    if head:
        model = transformers.AutoModelForSequenceClassification.from_config(config, **kwargs)
    elif task == "causal-lm":
        model = transformers.AutoModelForCausalLM.from_config(config, **kwargs)
    elif task == "masked-lm":
        model = transformers.AutoModelForMaskedLM.from_config(config, **kwargs)
    else:
        raise SystemExit(f"probe_train: task {task!r} has no probe")
    vocab = config.vocab_size

    def make_batch(device):
        ids = torch.randint(0, vocab, (batch, seq), device=device)
        if head == "sequence-classification":
            return {"input_ids": ids, "labels": torch.randint(0, 2, (batch,), device=device)}
        return {"input_ids": ids, "labels": ids}
    return model, make_batch, ("tokens", batch * seq)


def prepare(torch, model, probe: dict):
    """Precision, LoRA and checkpointing as the setup says; returns (model, optimizer, autocast)."""
    precision = probe["precision"]
    dtype16 = {"bf16": torch.bfloat16, "fp16": torch.float16}
    if precision in dtype16:
        model = model.to(dtype16[precision])
    elif probe.get("base_dtype") in dtype16:  # a base loaded in 16 bits (torch_dtype=bfloat16), trained under autocast
        model = model.to(dtype16[probe["base_dtype"]])
    if probe.get("lora_rank"):
        import peft

        cfg = peft.LoraConfig(r=probe["lora_rank"], lora_alpha=2 * probe["lora_rank"],
                              target_modules=probe.get("lora_targets"), lora_dropout=0.0)
        model = peft.get_peft_model(model, cfg)
    if probe.get("grad_checkpointing"):
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-4)  # PyTorch's default (foreach on CUDA), as users run it
    if precision.endswith("-mixed"):
        dtype = torch.bfloat16 if precision.startswith("bf16") else torch.float16
        return model, opt, lambda dev: torch.autocast(dev, dtype=dtype)
    return model, opt, lambda dev: contextlib.nullcontext()


def step(torch, model, opt, batch: dict, autocast, device: str) -> None:
    with autocast(device):
        if "x" in batch:
            loss = torch.nn.functional.cross_entropy(model(batch["x"]), batch["y"])
        else:
            loss = model(**batch).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("setup")
    ap.add_argument("model")
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--steps", type=int, default=10, help="timed steps after the three measured ones")
    a = ap.parse_args()
    setup, model_cfg = json.loads(a.setup), json.loads(a.model)
    dry = setup.get("dry") if a.dry_run else None
    import torch

    device = "cuda" if torch.cuda.is_available() and not a.dry_run else "cpu"
    if not a.dry_run and device != "cuda":
        print(json.dumps({"status": "skipped", "reason": "torch sees no GPU"}))
        return 0
    torch.manual_seed(0)
    model, make_batch, (unit, per_step) = build_model(torch, model_cfg, setup["probe"], dry, setup.get("config", {}))
    model = model.to(device)
    model.train()
    model, opt, autocast = prepare(torch, model, setup["probe"])
    batch = make_batch(device)
    peaks, reserved = [], []
    for _ in range(3):
        step(torch, model, opt, batch, autocast, device)
        if device == "cuda":
            torch.cuda.synchronize()
            peaks.append(torch.cuda.max_memory_allocated())
            reserved.append(torch.cuda.max_memory_reserved())
    steps = (dry or {}).get("steps", a.steps)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    sync()
    t0 = time.perf_counter()
    for _ in range(steps):
        step(torch, model, opt, batch, autocast, device)
    sync()
    dt = (time.perf_counter() - t0) / steps
    out = {"status": "ok", "device": device, "unit": unit, "per_step": per_step,
           "peak_bytes_after_step": peaks, "peak_bytes": max(peaks) if peaks else None,
           "reserved_bytes_after_step": reserved, "reserved_peak_bytes": max(reserved) if reserved else None,
           "step_seconds": round(dt, 5), "throughput": round(per_step / dt, 1),
           "torch": torch.__version__,
           "params": sum(p.numel() for p in model.parameters()),
           "trainable_params": sum(p.numel() for p in model.parameters() if p.requires_grad)}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
