"""``--stack``: the training code path a run uses, read from matrices/fit_stacks.yaml (IO at the boundary).

A stack is a set of defaults for the estimator's Setup (KEYS); what each does with the bytes and its source
live in the data file, next to the values.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from envman.errors import MatrixError, UsageError
from envman.fit.runspec import LOADS

KEYS = {"precision": str, "method": str, "shard": str, "deepspeed": bool, "base_bytes": int, "kbit_fp32_extras": bool,
        "grad_checkpointing": bool, "loss": str, "offload": str, "lora_dropout": bool, "logits_held": bool,
        "fsdp_root_unsharded": bool, "optimizer": str, "adapter_bytes": int, "bnb_keeps_input": bool,
        "nf4_double_quant": bool, "quant_head": bool, "dequant_copies": int, "untied_head": bool,
        "prev_graph_held": bool, "fused_qkv": bool, "norm_upcast": bool,
        "fsdp_no_sync": bool, "loss_shift_copy": bool, "reduce_bucket": int,
        "zero_grad": str, "sub_group": int, "load": str, "compile_scope": str}
CHOICES = {"load": tuple(LOADS), "compile_scope": ("model", "blocks")}


@dataclass(frozen=True)
class Stack:
    name: str
    defaults: tuple[tuple[str, Any], ...]
    bytes: str
    source: str

    def get(self, key: str, default: Any = None) -> Any:
        return dict(self.defaults).get(key, default)


@lru_cache(maxsize=2)
def load_stacks(directory: str | None = None) -> dict[str, Stack]:
    from envman.fit.catalog import _data_dir, _yaml

    path = Path(directory or _data_dir()) / "fit_stacks.yaml"
    doc = _yaml(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("stacks"), dict):
        raise MatrixError([f"{path.name}: stacks: expected a mapping of stack name → entry"])
    problems: list[str] = []
    out: dict[str, Stack] = {}
    for name, e in doc["stacks"].items():
        at = f"{path.name}: stacks.{name}"
        if not isinstance(e, dict):
            problems.append(f"{at}: expected a mapping")
            continue
        out[str(name)] = _parse_stack(str(name), e, at, problems)
    if problems:
        raise MatrixError(problems)
    return out


def _parse_stack(name: str, e: dict, at: str, problems: list[str]) -> Stack:
    for k in ("bytes", "source"):
        if not isinstance(e.get(k), str) or not e[k]:
            problems.append(f"{at}.{k}: missing")
    defaults = []
    for k, v in e.items():
        if k in ("bytes", "source"):
            continue
        if k not in KEYS:
            problems.append(f"{at}.{k}: unknown key (keys: {', '.join(KEYS)})")
        elif not isinstance(v, KEYS[k]) or (KEYS[k] is int and isinstance(v, bool)):
            problems.append(f"{at}.{k}: expected {KEYS[k].__name__}, got {v!r}")
        elif k in CHOICES and v not in CHOICES[k]:
            problems.append(f"{at}.{k}: {v!r} is not one of {', '.join(CHOICES[k])}")
        else:
            defaults.append((k, v))
    return Stack(name, tuple(sorted(defaults)), str(e.get("bytes")), str(e.get("source")))


def find_stack(name: str) -> Stack:
    stacks = load_stacks()
    if name in stacks:
        return stacks[name]
    near = difflib.get_close_matches(name, list(stacks), n=1)
    raise UsageError(f"--stack {name!r} is not one of {', '.join(stacks)}",
                     hint=f"did you mean {near[0]}?" if near else "docs/fit.md lists what each stack counts")


def default_stack(method: str | None, shard: str | None) -> str:
    """The stack a run most likely uses when nothing names one: PEFT for adapters, DeepSpeed for ZeRO,
    FSDP2 for fsdp, the Hugging Face Trainer otherwise."""
    if method in ("qlora", "lora"):
        return f"peft-{method}"
    if shard in ("zero1", "zero2", "zero3"):
        return f"deepspeed-{shard}"
    return "fsdp2" if shard == "fsdp" else "hf-trainer"
