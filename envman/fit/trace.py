"""``envman fit --trace``: measure one real training step with PyTorch, on tensors without data.

torch and transformers are imported only here and only when asked: the analytic path needs neither.
The recipe (also used by bench/trace_fit.py to produce the accuracy fixture):

- the model is built from its config values under ``FakeTensorMode`` (shapes and dtypes, no storage);
- ``MemTracker`` follows every storage through TWO steps (forward, backward, optimizer.step,
  zero_grad(set_to_none=True)); the peak is over both (first step: state allocated while gradients live;
  second: state alive during the forward);
- tensors are fake CPU tensors: fake CUDA tensors fail in backward without a GPU and CUDA autocast
  refuses, so mixed precision is CPU autocast (bf16), attention is the "eager" implementation, dropout
  masks have the input's dtype (CPU kernel) and the optimizer runs foreach=True (the CUDA default).
  The analytic model is compared under the same kernels (Setup(dropout_mask="input", attention="eager")).
"""

from __future__ import annotations

import contextlib
from typing import Any

from envman.errors import UsageError

TRACE_KERNELS: dict[str, Any] = {"attention": "eager", "dropout_mask": "input", "optimizer_impl": "foreach"}


def _need_torch():
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as exc:
        raise UsageError(f"--trace needs torch and transformers ({exc.name} is not installed)",
                         hint="pip install torch transformers (in this environment), or drop --trace") from None


def build_model(config: dict, task: str, dtype):
    import torch
    import transformers
    import transformers.initialization as hf_init

    # fake tensors have no values: trunc_normal_'s rejection loop (`if not mask.any()`) cannot run on them,
    # and initial values do not change memory
    hf_init.TORCH_INIT_FUNCTIONS["trunc_normal_"] = lambda tensor, *a, **k: tensor
    cfg = dict(config)
    mtype = cfg.pop("model_type")
    conf = transformers.AutoConfig.for_model(mtype, **cfg)
    if hasattr(conf, "use_cache"):
        conf.use_cache = False  # training: no KV cache (the Trainer and gradient checkpointing switch it off too)
    kw = {} if mtype == "resnet" else {"attn_implementation": "eager"}
    auto = {"causal-lm": transformers.AutoModelForCausalLM, "masked-lm": transformers.AutoModelForMaskedLM,
            "image-classification": transformers.AutoModelForImageClassification}.get(task)
    if auto is None:
        raise UsageError(f"--trace has no recipe for task {task!r}", hint="causal-lm, masked-lm and image-classification are traced")
    prev = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # pure bf16/fp16: built in that dtype (Module.to() cannot swap fake parameters)
    try:
        return auto.from_config(conf, **kw)
    finally:
        torch.set_default_dtype(prev)


def apply_lora(model, rank: int, targets, adapter_dtype=None) -> None:
    """PEFT-equivalent adapters (frozen base Linear + B·A, no dropout: PEFT's defaults), in ``adapter_dtype``
    (None: the base layer's)."""
    import torch
    from torch import nn

    class _Lora(nn.Module):
        def __init__(self, base: nn.Linear, r: int):
            super().__init__()
            self.base = base
            dt = adapter_dtype or base.weight.dtype
            self.lora_A = nn.Linear(base.in_features, r, bias=False, dtype=dt)
            self.lora_B = nn.Linear(r, base.out_features, bias=False, dtype=dt)

        def forward(self, x):
            return self.base(x) + self.lora_B(self.lora_A(x))

    replaced = 0
    for mod in list(model.modules()):
        for child_name, child in list(mod.named_children()):
            if isinstance(child, nn.Linear) and child_name in targets:
                setattr(mod, child_name, _Lora(child, rank))
                replaced += 1
    missing = [t for t in targets if not any(n.split(".")[-1] == t for n, _ in model.named_modules())]
    if not replaced or missing:
        raise UsageError(f"--trace: LoRA targets {', '.join(missing or targets)} are not linear layers of this model",
                         hint="name the model's own linear layers (--lora-targets q_proj,v_proj …)")
    # MemTracker installs a grad hook on every nn.Parameter and refuses frozen ones, so the frozen weights
    # become buffers: same storage, no gradient, exactly what a frozen parameter costs.
    lora = {id(p) for n, p in model.named_parameters() if "lora_" in n}
    frozen: dict[int, torch.Tensor] = {}
    for mod in model.modules():
        for pname, p in list(mod._parameters.items()):
            if p is not None and id(p) not in lora:
                t = frozen.setdefault(id(p), p.detach())
                del mod._parameters[pname]
                mod.register_buffer(pname, t)


def make_inputs(config: dict, task: str, setup, dtype) -> dict:
    import torch

    b = setup.batch
    if task in ("causal-lm", "masked-lm"):
        ids = torch.zeros(b, setup.seq or 512, dtype=torch.long)
        return {"input_ids": ids, "labels": ids}
    size = setup.image_size or config.get("image_size", 224)
    pix = torch.zeros(b, config.get("num_channels", 3), size, size, dtype=dtype)
    return {"pixel_values": pix, "labels": torch.zeros(b, dtype=torch.long)}


def make_optimizer(params, name: str):
    import torch

    kw = {"adamw": {"lr": 1e-4}, "sgd": {"lr": 1e-3}, "sgd-momentum": {"lr": 1e-3, "momentum": 0.9}}.get(name)
    if kw is None:
        raise UsageError(f"--trace supports the optimizers adamw, sgd and sgd-momentum, not {name!r}",
                         hint="drop --trace (the estimate is analytic), or trace with --optimizer adamw")
    cls = torch.optim.AdamW if name == "adamw" else torch.optim.SGD
    return cls([p for p in params if p.requires_grad], foreach=True, **kw)


def model_dtypes(setup) -> tuple[str, str]:
    """(the dtype the model is built in, its LoRA adapters' dtype), as the run's stack loads them: a frozen base
    in its loaded dtype (peft-lora: torch_dtype=bfloat16, fp16 under fp16 autocast), else the parameters' dtype
    (fp32 master weights under autocast)."""
    prec = setup.precision
    params = prec if prec in ("bf16", "fp16") else "fp32"
    sized = {2: "fp16" if prec.startswith("fp16") else "bf16", 4: "fp32"}
    if setup.method != "lora":
        return params, params
    return sized.get(setup.base_bytes, params), sized.get(setup.adapter_bytes, params)


def traceable(setup) -> None:
    """Refuse, before importing torch, what one process on CPU fake tensors cannot trace."""
    if setup.method == "qlora":
        raise UsageError("--trace cannot trace --method qlora: bitsandbytes' 4-bit kernels need a GPU",
                         hint="drop --trace (the estimate is analytic), or trace the LoRA run with --method lora")
    if setup.method != "full" and setup.method != "lora":
        raise UsageError(f"--trace has no recipe for --method {setup.method} (it traces full fine-tuning and LoRA)",
                         hint="drop --trace (the estimate is analytic), or trace --method full")
    if setup.deepspeed or setup.shard != "none" or setup.offload != "none" or setup.tp * setup.pp > 1:
        raise UsageError(f"--trace measures one process on one device: it cannot trace --stack {setup.stack} "
                         f"(shard {setup.shard}, offload {setup.offload})", hint="drop --trace, or trace the unsharded run")
    if setup.gpus > 1:
        raise UsageError(f"--trace measures one GPU, not --gpus {setup.gpus}",
                         hint="drop --trace, or trace --gpus 1 (the per-GPU step without sharding)")


def trace_step(config: dict, task: str, setup) -> dict:
    """Peak bytes of two training steps and MemTracker's categories at that peak."""
    traceable(setup)
    _need_torch()
    import warnings

    import transformers

    # the libraries' own chatter (deprecations, MemTracker's hook warnings, config notices) is not envman's output
    level = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return _two_steps(config, task, setup)
    finally:
        transformers.logging.set_verbosity(level)


def _two_steps(config: dict, task: str, setup) -> dict:
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.mem_tracker import MemTracker

    prec = setup.precision
    torch_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
    amp_dtype = torch.float16 if prec == "fp16-mixed" else torch.bfloat16
    base, adapter = model_dtypes(setup)
    with FakeTensorMode():
        model = build_model(config, task, torch_dtype[base])
        if setup.method == "lora":
            apply_lora(model, setup.lora_rank, setup.lora_targets, torch_dtype[adapter])
        if setup.grad_checkpointing:  # transformers 5.x renames it (the old name warns, and goes in v6)
            if hasattr(model, "activation_checkpointing_enable"):
                model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
            else:
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.train()
        opt = make_optimizer(model.parameters(), setup.optimizer)
        inputs = make_inputs(config, task, setup, torch_dtype[base])
        amp = torch.autocast("cpu", dtype=amp_dtype) if prec.endswith("-mixed") else contextlib.nullcontext()
        mt = MemTracker()
        mt.track_external(model, opt)
        with mt:
            for _ in range(2):
                with amp:
                    loss = model(**inputs).loss
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                del loss
                mt.reset_mod_stats()  # module stats only; the device peak is kept across steps
        peak = mt.get_tracker_snapshot("peak")
    (dev, snap), = peak.items()
    return {"peak_bytes": int(snap["Total"]), "device": str(dev),
            "at_peak": {str(getattr(k, "value", k)): int(v) for k, v in snap.items() if k != "Total"}}


def trace_peak(config: dict, task: str, setup) -> tuple[int, str]:
    res = trace_step(config, task, setup)
    cannot = []
    if setup.attention != "eager":
        cannot.append("SDPA's flash/memory-efficient kernel (without a GPU SDPA runs the math kernel, which keeps "
                      "the s×s probabilities: the trace is of eager attention)")
    if setup.precision.endswith("-mixed"):
        cannot.append("CUDA autocast (CPU autocast's cast lists were traced)")
    note = ("traced: PyTorch FakeTensorMode + MemTracker on CPU fake tensors, compared with envman's estimate of "
            "the same kernels (eager attention, CPU autocast, CPU dropout masks, foreach optimizer)")
    if cannot:
        note += "; could not trace " + "; ".join(cannot)
    return res["peak_bytes"], note
