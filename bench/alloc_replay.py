"""Replay one training loop's tensor events through a model of PyTorch's CUDA caching allocator (a DIAGNOSTIC).

This is a diagnostic, never a reference: its numbers are not measurements and no row of tests/reference/ may be
compared with them. It answers one question for docs/fit-allocator.md: how much of the gap between what envman
estimates (the peak of `max_memory_allocated()`) and a published `max_memory_reserved()` / NVML figure is the
caching allocator packing the step's tensors into cached segments?

Run it in a separate venv with torch (CPU build is enough), torchvision and transformers — never in envman's own:

    /tmp/fitreserve-venv/bin/python bench/alloc_replay.py              # every setup
    /tmp/fitreserve-venv/bin/python bench/alloc_replay.py --only vit   # setups whose name contains "vit"
    python3 bench/alloc_replay.py --device cuda --only vit-l16-bf16-b16      # on a GPU (needs torchvision /
                                                                           # transformers there): the real peaks,
                                                                           # and the real event stream replayed

How it works:
- Trace: the real model code (torchvision's vit_l_16, transformers' BertForSequenceClassification) runs under
  ``torch._subclasses.fake_tensor.FakeTensorMode`` (tensors with shape and dtype, no data) and a
  ``TorchDispatchMode`` that records, in program order, every new storage an ATen op returns (an allocation of its
  ``nbytes``) and, through a weakref on the storage, the moment it dies (a free). Parameters and buffers are
  allocated first, in ``model.parameters()`` / ``buffers()`` order, as ``.to("cuda")`` would.
  The training loops are the sources' own (rasbt/pytorch-memory-optim: forward, loss, ``zero_grad()``, backward,
  ``step()``; the accumulating variant; Hugging Face's Trainer: forward, backward, step, ``model.zero_grad()``).
- Fake CPU tensors run CPU kernels' shape functions: where CUDA's differ in what they allocate, the script says so.
  ``F.dropout`` is routed to ``torch.native_dropout`` (what CUDA's ``dropout`` calls for 0 < p < 1: a 1-byte mask;
  CPU's ``dropout`` keeps a mask in the input's dtype). Kernel-internal workspaces (cuBLAS, cuDNN, flash
  attention's backward accumulators) are invisible to a trace at the ATen level and are not replayed;
  ``--cuda-flash-copies`` adds the one kind read in PyTorch's code (the CUDA flash wrapper's q/k/v copies).
- Replay: ``Allocator`` follows c10/cuda/CUDACachingAllocator.cpp (pytorch/pytorch@001074d25084, the rules
  unchanged since 2.0 for the default configuration): sizes rounded up to 512 B; requests <= 1 MiB from the small
  pool, whose segments are 2 MiB; larger requests from the large pool, in a new 20 MiB segment when < 10 MiB and
  otherwise in a segment of the request rounded up to 2 MiB; a request takes the smallest cached free block that
  holds it (ties: the lower address); the block is split when the rest is >= 512 B (small pool) or > 1 MiB (large
  pool); a freed block merges with free neighbours of its own segment only; segments are never released (no
  out-of-memory retry happens on an 80 GB card at these sizes); one stream. ``reserved`` is the sum of segments,
  ``allocated`` the sum of allocated blocks (what ``max_memory_allocated()`` counts).
"""

from __future__ import annotations

import argparse
import bisect
import sys
import types
import weakref
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field

KMIN, KSMALL, KSMALLBUF, KLARGEBUF, KMINLARGE, KROUND = 512, 1 << 20, 2 << 20, 20 << 20, 10 << 20, 2 << 20


@dataclass
class Block:
    seg: int
    off: int
    size: int
    small: bool
    free: bool = True
    prev: Block | None = None
    next: Block | None = None


@dataclass
class Allocator:
    """The caching allocator's bookkeeping, one stream, default configuration (no max_split_size, no
    expandable segments, no garbage-collection threshold)."""

    pools: dict = field(default_factory=lambda: {True: [], False: []})  # small? -> sorted [(size, seg, off, id)]
    blocks: dict = field(default_factory=dict)  # id -> Block
    reserved: int = 0
    allocated: int = 0
    peak_reserved: int = 0
    peak_allocated: int = 0
    segments: list = field(default_factory=list)  # sizes

    def _key(self, b: Block) -> tuple:
        return (b.size, b.seg, b.off, id(b))

    def _insert(self, b: Block) -> None:
        b.free = True
        self.blocks[id(b)] = b
        bisect.insort(self.pools[b.small], self._key(b))

    def _remove(self, b: Block) -> None:
        pool = self.pools[b.small]
        pool.pop(bisect.bisect_left(pool, self._key(b)))

    def malloc(self, nbytes: int) -> Block:
        size = KMIN if nbytes < KMIN else KMIN * -(-nbytes // KMIN)
        small = size <= KSMALL
        pool = self.pools[small]
        i = bisect.bisect_left(pool, (size,))
        if i < len(pool):
            b = self.blocks[pool[i][3]]
            self._remove(b)
        else:  # cudaMalloc a new segment
            seg = KSMALLBUF if small else (KLARGEBUF if size < KMINLARGE else KROUND * -(-size // KROUND))
            b = Block(len(self.segments), 0, seg, small)
            self.segments.append(seg)
            self.reserved += seg
        rest = b.size - size
        if (rest >= KMIN) if small else (rest > KSMALL):
            tail = Block(b.seg, b.off + size, rest, small, prev=b, next=b.next)
            if b.next:
                b.next.prev = tail
            b.next, b.size = tail, size
            self._insert(tail)
        b.free = False
        self.allocated += b.size
        self.peak_reserved = max(self.peak_reserved, self.reserved)
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        return b

    def free(self, b: Block) -> None:
        self.allocated -= b.size
        for nb in (b.prev, b.next):
            if nb is not None and nb.free:
                self._remove(nb)
                if nb is b.prev:
                    b.off, b.prev = nb.off, nb.prev
                    if nb.prev:
                        nb.prev.next = b
                else:
                    b.next = nb.next
                    if nb.next:
                        nb.next.prev = b
                b.size += nb.size
        self._insert(b)


class Trace:
    """Storage births and deaths in program order, with phase marks."""

    def __init__(self) -> None:
        self.events: list[tuple] = []
        self.live: dict[int, weakref.ref] = {}
        self.next_id = 0
        self.ops: dict[str, int] = {}
        self.cuda_flash_copies = False  # --cuda-flash-copies: add the copies CUDA's flash wrapper makes

    def track(self, t) -> None:
        import torch
        if not isinstance(t, torch.Tensor):
            return
        st = t.untyped_storage()
        key = st._cdata
        if key in self.live or st.nbytes() == 0:
            return
        sid = self.next_id
        self.next_id += 1
        self.events.append(("a", sid, st.nbytes()))

        def gone(_w, sid=sid, key=key):
            self.live.pop(key, None)
            self.events.append(("f", sid))
        self.live[key] = weakref.ref(st, gone)

    def mark(self, what: str) -> None:
        self.events.append(("m", what))


def recorder(trace: Trace):
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types_, args=(), kwargs=None):
            scratch = _flash_copies(func, args) if trace.cuda_flash_copies else []
            for i, n in enumerate(scratch):
                trace.events.append(("a", f"scratch{trace.next_id}.{i}", n))
            out = func(*args, **(kwargs or {}))
            for i, _ in enumerate(scratch):
                trace.events.append(("f", f"scratch{trace.next_id}.{i}"))
            trace.next_id += 1
            trace.ops[str(func)] = trace.ops.get(str(func), 0) + 1
            for t in tree_flatten(out)[0]:
                if isinstance(t, torch.Tensor):
                    trace.track(t)
            return out
    return Recorder()


def _flash_copies(func, args) -> list[int]:
    """The copies CUDA's flash SDPA wrapper of PyTorch 2.0/2.1 makes and frees inside the op, which a trace at
    the ATen level cannot see: `_scaled_dot_product_flash_attention_cuda` reshapes query/key/value, transposed
    to (batch, seq, heads, dim), to (batch·seq, heads, dim) — a copy unless that layout is contiguous, which it
    is not for nn.MultiheadAttention's (seq, batch, heads, dim)-ordered projections — and its backward does the
    same with grad_out, query, key, value and out (aten/src/ATen/native/transformers/cuda/attention.cu and
    attention_backward.cu of that era). The CPU flash kernel traced here stands in for CUDA's."""
    import torch
    name = str(func)
    if "_scaled_dot_product_flash_attention_for_cpu" not in name:
        return []
    ts = [a for a in args if isinstance(a, torch.Tensor) and a.dim() == 4]
    ts = ts[:3] if "backward" not in name else ts[:5]
    return [t.numel() * t.element_size() for t in ts if not t.transpose(1, 2).is_contiguous()]


def replay(trace: Trace) -> dict:
    alloc, live, at = Allocator(), {}, {}
    phase, marks, last_reserved = "setup", [], 0
    for ev in trace.events:
        if ev[0] == "a":
            live[ev[1]] = alloc.malloc(ev[2])
        elif ev[0] == "f":
            b = live.pop(ev[1], None)
            if b is not None:
                alloc.free(b)
        else:
            phase = ev[1]
            marks.append((phase, alloc.allocated, alloc.reserved))
        if alloc.allocated == alloc.peak_allocated:
            at["allocated"] = phase
        if ev[0] == "a" and alloc.reserved == alloc.peak_reserved and last_reserved < alloc.reserved:
            at["reserved"] = phase
        last_reserved = alloc.reserved
    large = sorted((s for s in alloc.segments if s > KSMALLBUF), reverse=True)
    return {"peak_allocated": alloc.peak_allocated, "peak_reserved": alloc.peak_reserved,
            "allocated_peak_phase": at.get("allocated"),
            "reserved_peak_phase": at.get("reserved"), "segments": len(alloc.segments),
            "large_segments": len(large), "small_segments_bytes": sum(s for s in alloc.segments if s == KSMALLBUF),
            "marks": marks}


def _patch_dropout() -> None:
    """CUDA's dropout (0 < p < 1) is native_dropout, whose mask is bool; CPU's keeps a mask in the input dtype."""
    import torch
    import torch.nn.functional as F

    def dropout(input, p=0.5, training=True, inplace=False):
        if not training or p == 0.0:
            return input
        return torch.native_dropout(input, p, True)[0]
    F.dropout = dropout


@contextmanager
def session(trace: Trace | None):
    """Fake CPU tensors with the recorder (a trace to fill), or a real CUDA device (no trace: the caching
    allocator itself counts). Yields (device, the loop's context, mark)."""
    if trace is None:
        yield "cuda", nullcontext, lambda what: None
        return
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        yield "cpu", lambda: recorder(trace), trace.mark


def _on_device(model, dt, dev: str, trace: Trace | None):
    """Weights and buffers allocated first, in parameters() / buffers() order, as .to("cuda") allocates them."""
    if trace is None:
        return model.to(dt).to(dev)
    for t in [*model.parameters(), *model.buffers()]:
        trace.track(t)
    return model


def vit_setup(batch: int, dtype: str, accumulation: int, micro_steps: int, late_zero_grad: bool = True,
              autocast: str | None = None):
    """rasbt's loops; ``autocast`` fp16: Fabric's 16-mixed (fp32 weights, autocast; the GradScaler's in-place
    unscale allocates nothing that matters and is left out — its inf check reads a value fake tensors lack)."""
    def run(trace: Trace | None) -> None:
        import torch
        import torch.nn.functional as F
        if trace is not None:
            sys.modules.setdefault("torchvision._meta_registrations", types.ModuleType("torchvision._meta_registrations"))
            torch.nn.init.trunc_normal_ = lambda t, *a, **k: t  # data-dependent on fake tensors; values do not matter
        from torchvision.models import vit_l_16
        dt = {"bf16": torch.bfloat16, "fp32": torch.float32}[dtype]
        with session(trace) as (dev, loop, mark):
            if trace is not None:
                torch.set_default_dtype(dt)  # Fabric bf16-true: module.to(bfloat16) (fake tensors cannot swap)
            model = vit_l_16()
            model.heads.head = torch.nn.Linear(1024, 10)
            torch.set_default_dtype(torch.float32)
            model = _on_device(model, dt, dev, trace)
            opt = torch.optim.Adam(model.parameters(), lr=5e-5, foreach=True)  # torch 2.1's CUDA default
            with loop():
                logits = features = targets = loss = None
                for i in range(micro_steps):
                    mark(f"step{i}:batch")
                    nf = torch.randn(batch, 3, 224, 224, device=dev)
                    nt = torch.zeros(batch, dtype=torch.long, device=dev)
                    features, targets = nf, nt
                    del nf, nt
                    if not late_zero_grad:
                        opt.zero_grad()  # the usual loop: gradients freed before the forward
                    mark(f"step{i}:forward")
                    x = features.to(dt)  # Fabric's precision.convert_input inside _FabricModule.forward
                    if autocast is None:
                        out = model(x)
                    else:  # CPU autocast for fake tensors (CUDA's refuses without a GPU): close to CUDA's lists
                        with torch.autocast("cpu" if trace is not None else "cuda", dtype=torch.float16):
                            out = model(x)
                    del x
                    logits = out
                    del out
                    mark(f"step{i}:loss")
                    loss = F.cross_entropy(logits, targets) / (accumulation if accumulation > 1 else 1)
                    if accumulation == 1 and late_zero_grad:
                        opt.zero_grad()  # rasbt's loop: after the forward, before backward
                    mark(f"step{i}:backward")
                    loss.backward()
                    if accumulation == 1 or i % accumulation == 0:
                        mark(f"step{i}:optimizer")
                        opt.step()
                        if accumulation > 1:
                            opt.zero_grad()
                    with torch.no_grad():
                        torch.argmax(logits, 1)
                mark("end")
    return run


def bert_setup(batch: int, set_to_none: bool, steps: int):
    def run(trace: Trace | None) -> None:
        import torch
        from transformers import BertConfig, BertForSequenceClassification
        if trace is not None:
            _patch_dropout()  # on CUDA, dropout is native_dropout already
        cfg = BertConfig(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096,
                         vocab_size=30522, max_position_embeddings=512, num_labels=2)
        cfg._attn_implementation = "eager"
        with session(trace) as (dev, loop, mark):
            model = _on_device(BertForSequenceClassification(cfg), torch.float32, dev, trace)
            model.train()
            # transformers' AdamW (adamw_hf, the Trainer's default until 4.x): a per-parameter loop
            opt = torch.optim.AdamW(model.parameters(), lr=5e-5, weight_decay=0.0, foreach=False)
            with loop():
                model.zero_grad(set_to_none=set_to_none)
                for i in range(steps):
                    mark(f"step{i}:batch")
                    ids = torch.zeros(batch, 512, dtype=torch.long, device=dev)
                    labels = torch.zeros(batch, dtype=torch.long, device=dev)
                    mark(f"step{i}:forward")
                    loss = model(input_ids=ids, labels=labels).loss
                    mark(f"step{i}:backward")
                    loss.backward()
                    del loss
                    mark(f"step{i}:optimizer")
                    opt.step()
                    model.zero_grad(set_to_none=set_to_none)
                    del ids, labels
                mark("end")
    return run


SETUPS = {
    "vit-l16-bf16-b64": vit_setup(64, "bf16", 1, 3),
    "vit-l16-bf16-b16": vit_setup(16, "bf16", 1, 3),
    "vit-l16-bf16-b16-zero-grad-first": vit_setup(16, "bf16", 1, 3, late_zero_grad=False),
    "vit-l16-bf16-b4-accum4": vit_setup(4, "bf16", 4, 9),
    "vit-l16-fp32-b64": vit_setup(64, "fp32", 1, 3),
    "vit-l16-16mixed-b64": vit_setup(64, "fp32", 1, 3, autocast="fp16"),
    "bert-large-fp32-b4-grads-kept": bert_setup(4, False, 3),
    "bert-large-fp32-b4-set-to-none": bert_setup(4, True, 3),
}


def replay_cuda_history(snapshot: dict) -> tuple[int, int]:
    """The real allocator's event stream (torch.cuda.memory._snapshot()'s device trace) replayed through
    ``Allocator``: (modelled peak reserved, segments the real allocator made) — a check of the model itself."""
    alloc, live, real_segments = Allocator(), {}, 0
    for ev in snapshot["device_traces"][0]:
        if ev["action"] == "alloc":
            live[ev["addr"]] = alloc.malloc(ev["size"])
        elif ev["action"] == "free_completed" and ev["addr"] in live:
            alloc.free(live.pop(ev["addr"]))
        elif ev["action"] == "segment_alloc":
            real_segments += ev["size"]
    return alloc.peak_reserved, real_segments


def run_cuda(name: str, run) -> None:
    """On a GPU: the same loop on real tensors; the allocator's own peaks, and its event stream replayed."""
    import torch
    torch.cuda.memory._record_memory_history(max_entries=2_000_000)
    torch.cuda.reset_peak_memory_stats()
    try:
        run(None)
    except ImportError as exc:
        print(f"{name}: skipped on cuda ({exc})")
        return
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    modelled, made = replay_cuda_history(snap)
    print(f"{name} [cuda {torch.__version__}]: max_memory_allocated {torch.cuda.max_memory_allocated() / 1e9:.3f} GB, "
          f"max_memory_reserved {torch.cuda.max_memory_reserved() / 1e9:.3f} GB; its event stream through the model: "
          f"reserved {modelled / 1e9:.3f} GB (segments the allocator made: {made / 1e9:.3f} GB)")
    torch.cuda.empty_cache()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="")
    ap.add_argument("--ops", action="store_true", help="print the ATen ops the trace saw")
    ap.add_argument("--device", default="fake", choices=("fake", "cuda"),
                    help="fake: trace on data-less CPU tensors and replay (default); cuda: run for real on a GPU")
    ap.add_argument("--cuda-flash-copies", action="store_true",
                    help="add the q/k/v (and grad_out/out) copies PyTorch 2.0/2.1's CUDA flash SDPA makes inside the op")
    args = ap.parse_args()
    for name, run in SETUPS.items():
        if args.only not in name:
            continue
        if args.device == "cuda":
            run_cuda(name, run)
            continue
        trace = Trace()
        trace.cuda_flash_copies = args.cuda_flash_copies
        run(trace)
        r = replay(trace)
        gb = 1e9
        print(f"{name}: allocated peak {r['peak_allocated'] / gb:.3f} GB ({r['allocated_peak_phase']}), "
              f"reserved peak {r['peak_reserved'] / gb:.3f} GB ({r['reserved_peak_phase']}), reserve - allocated "
              f"{(r['peak_reserved'] - r['peak_allocated']) / gb:.3f} GB; {r['segments']} segments "
              f"({r['large_segments']} large, small pool {r['small_segments_bytes'] / 2**20:.0f} MiB), "
              f"{sum(1 for e in trace.events if e[0] == 'a')} allocations")
        for ph, a, res in r["marks"]:
            print(f"    {ph:<22} allocated {a / gb:7.3f}  reserved {res / gb:7.3f}")
        if args.ops:
            print("    ops:", ", ".join(f"{k} {v}" for k, v in sorted(trace.ops.items())))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
