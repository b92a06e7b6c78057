"""Which transformers releases copy the shifted logits: a diagnostic for matrices/fit_stacks.yaml's loss_shift_copy.

Not a reference (PyTorch's tracer on CPU fake tensors, CPU autocast): it checks envman's reading of
`ForCausalLMLoss` against the release's own code. Run with torch and the transformers release to test on the
path, e.g. in the kit venv (.ci/kit-venv.sh) with an older transformers in a --target folder:

    .venv-kit/bin/python bench/trace_fit_loss.py                     # the venv's transformers
    PYTHONPATH=/tmp/tf447 .venv-kit/bin/python bench/trace_fit_loss.py   # pip install --target /tmp/tf447 --no-deps transformers==4.47.0 ...

It prints the step's peak per token per vocabulary entry at batch 1 and 2 for a one-layer Llama whose logits
dominate (1,024 tokens, 131,072 entries). Measured (torch 2.13.0 CPU): 4.45.2 12.32 / 12.17, 4.47.0 12.32 / 14.17,
5.24.0 12.34 / 12.19 — the shifted copy (2 more bytes: bf16 logits + fp32 copy + shifted copy + log_softmax) only
in 4.46-4.48 and only for two or more samples.
"""

from __future__ import annotations

import torch
import transformers
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed._tools.mem_tracker import MemTracker

T, V = 1024, 131072


def peak_per_entry(batch: int) -> float:
    with FakeTensorMode():
        conf = transformers.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                        num_attention_heads=2, num_key_value_heads=2, vocab_size=V,
                                        max_position_embeddings=T, use_cache=False)
        model = transformers.LlamaForCausalLM(conf)
        model.train()
        ids = torch.zeros(batch, T, dtype=torch.long)
        mt = MemTracker()
        mt.track_external(model)
        with mt:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                out = model(input_ids=ids, labels=ids)
            loss = out.loss
            del out  # the Trainer's compute_loss returns only the loss
            loss.backward()
        (_, snap), = mt.get_tracker_snapshot("peak").items()
    return snap["Total"] / (batch * T * V)


if __name__ == "__main__":
    print(f"transformers {transformers.__version__}: batch 1 {peak_per_entry(1):.2f}, batch 2 {peak_per_entry(2):.2f} "
          "bytes per token per vocabulary entry at the peak")
