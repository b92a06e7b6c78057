"""The pure types a model's shape is described with (shared by architectures.py and families.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

VALIDATED = ("gpt2", "llama", "bert", "vit", "resnet")  # families compared against traced peaks


class ArchError(ValueError):
    def __init__(self, problems: list[str]):
        super().__init__("; ".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class Linear:
    """A matmul weight that appears ``count`` times (once per layer): LoRA targets and weight copies."""

    name: str
    fan_in: int
    fan_out: int
    count: int


@dataclass(frozen=True)
class Stage:
    """One UNet block in forward order."""

    kind: str  # down | mid | up
    channels: int
    scale: int  # latent downsampling of this block's resolution (1, 2, 4, 8)
    resnets: tuple[tuple[int, int], ...]  # (in, out) channels of each ResnetBlock2D
    attn_layers: int  # BasicTransformerBlocks per Transformer2DModel after each resnet (0: none)
    heads: int
    sample: str = ""  # down | up | "" (a stride-2 conv / nearest-upsample + conv after the block)


@dataclass(frozen=True)
class UNetShape:
    stages: tuple[Stage, ...]
    in_channels: int
    cross_dim: int
    text_tokens: int = 77
    controlnet: bool = False  # ControlNetModel: a trainable copy of the down and mid blocks beside a frozen UNet
    cond_channels: tuple[int, ...] = ()  # ControlNet conditioning embedding widths (at image resolution)


@dataclass(frozen=True)
class Arch:
    family: str  # gpt2 | llama (llama, mistral, qwen2, gemma2, phi3) | bert | vit | resnet | clip | whisper
    task: str  # causal-lm | masked-lm | image-classification | clip | speech-seq2seq
    params: int
    embedding_params: int  # lookup tables: no FLOPs (excluded from 6·N·tokens)
    largest_param: int  # elements of the largest single tensor (per-tensor optimizer temporaries)
    linears: tuple[Linear, ...]  # every matmul weight (autocast keeps a half-precision copy of each)
    hidden: int = 0
    layers: int = 0
    heads: int = 0
    kv_heads: int = 0
    head_dim: int = 0
    ffn: int = 0
    vocab: int = 0
    max_positions: int = 0
    tied: bool = False
    dropout_attn: float = 0.0
    dropout_hidden: float = 0.0
    image_size: int = 0
    patch_size: int = 0
    channels: int = 3
    labels: int = 0
    stages: tuple[tuple[int, int], ...] = ()  # resnet: (depth, width) per stage
    stem: int = 0  # resnet: stem channels
    towers: tuple[Arch, ...] = field(default=())  # clip / whisper: the encoder and decoder parts
    variant: str = ""  # gemma2 (soft-capping, 4 norms) | moe | mla (DeepSeek) | mamba
    experts: int = 0  # routed experts per MoE layer
    experts_per_tok: int = 0
    expert_ffn: int = 0  # intermediate size of one routed expert
    shared_ffn: int = 0  # intermediate size of the always-on shared expert(s), 0: none
    moe_layers: int = 0  # layers whose MLP is a mixture of experts (the others are dense, width ffn)
    active_params: int = 0  # parameters one token passes through (MoE: k of E experts); 0: all
    ssm_state: int = 0  # mamba: state size N
    expand: int = 0  # mamba: inner width = expand × hidden
    unet: UNetShape | None = None  # diffusion UNet / ControlNet: its blocks (towers: the frozen pipeline parts)

    @cached_property  # frozen dataclass: cached in the instance __dict__, asked hundreds of times per run
    def matmul_params(self) -> int:
        return sum(lin.fan_in * lin.fan_out * lin.count for lin in self.linears)

    @property
    def validated(self) -> bool:
        return self.family in VALIDATED and self.variant in ("", "gemma2")

    @property
    def flop_params(self) -> int:
        """Matmul parameters one token passes through (a MoE token meets k of E experts)."""
        if not self.active_params:
            return self.matmul_params
        return self.matmul_params - (self.params - self.active_params)


def _get(cfg: dict, problems: list[str], *keys: str, default=None, kind=int, path: str = ""):
    for k in keys:
        if k in cfg and cfg[k] is not None:
            v = cfg[k]
            if kind is int and (isinstance(v, bool) or not isinstance(v, int) or v <= 0):
                problems.append(f"{path}{k}: expected a positive integer, got {v!r}")
                return 1
            if kind is float and (isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < 1):
                problems.append(f"{path}{k}: expected a probability in [0, 1), got {v!r}")
                return 0.0
            return v
    if default is None:
        problems.append(f"{path}{keys[0]}: missing")
        return 1 if kind is int else 0.0
    return default
