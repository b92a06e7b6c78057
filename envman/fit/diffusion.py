"""Diffusion denoisers and their frozen parts: diffusers configs → shapes and parameter counts. Pure.

Counted module by module after huggingface/diffusers (UNet2DConditionModel with ResnetBlock2D,
Transformer2DModel / BasicTransformerBlock with GEGLU feed-forward, Downsample2D / Upsample2D;
ControlNetModel; FluxTransformer2DModel; AutoencoderKL) and transformers (CLIPTextModel[WithProjection],
T5EncoderModel). The published totals are checked in the tests (within 2%): SD 1.x UNet 860M, text
encoder 123M (CompVis/stable-diffusion-v1-4 model card), SDXL UNet 2.6B and text encoders 817M (Podell et
al. 2023, Table 1), FLUX.1 [dev] 12B (its model card).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from envman.fit.shapes import Arch, ArchError, Linear, Stage, UNetShape, _get

VAE_FACTOR = 8  # AutoencoderKL: three stride-2 down blocks, 512 px → 64 latent


def _resnet_params(cin: int, cout: int, temb: int) -> int:
    p = 2 * cin + 9 * cin * cout + cout + 2 * cout + 9 * cout * cout + cout
    p += temb * cout + cout if temb else 0
    return p + (cin * cout + cout if cin != cout else 0)


def _transformer_params(c: int, layers: int, cross: int) -> int:
    """Transformer2DModel: GroupNorm, proj_in/out, BasicTransformerBlocks (self-attn, cross-attn, GEGLU ×4)."""
    block = (2 * c + 3 * c * c + c * c + c  # norm1, attn1 q/k/v (no bias), to_out
             + 2 * c + c * c + 2 * cross * c + c * c + c  # norm2, attn2
             + 2 * c + c * 8 * c + 8 * c + 4 * c * c + c)  # norm3, GEGLU proj (2 × 4c), ff out
    return 2 * c + 2 * (c * c + c) + layers * block


def _per_block(cfg: dict, p: list[str], key: str, n: int, default):
    v = cfg.get(key, default)
    v = list(v) if isinstance(v, (list, tuple)) else [v] * n
    if len(v) != n or not all(x is default or (type(x) is int and x > 0) for x in v):
        p.append(f"{key}: expected a positive integer, or one per block ({n}), got {cfg.get(key)!r}")
        return [1] * n
    return v


def unet_stages(cfg: dict, p: list[str]) -> tuple[Stage, ...]:
    """UNet2DConditionModel's blocks as diffusers builds them (get_down_block / get_up_block)."""
    boc = cfg.get("block_out_channels")
    downs, ups = cfg.get("down_block_types"), cfg.get("up_block_types")
    if not (isinstance(boc, list) and boc and isinstance(downs, list) and isinstance(ups, list)
            and len(downs) == len(boc) == len(ups)):
        p.append("block_out_channels / down_block_types / up_block_types: expected lists of one length")
        return ()
    if not all(type(c) is int and c > 0 for c in boc) or not all(isinstance(k, str) for k in downs + ups):
        p.append("block_out_channels: expected positive integers; down_block_types / up_block_types: block names")
        return ()
    n = len(boc)
    lpb = _get(cfg, p, "layers_per_block", default=2)
    heads = _per_block(cfg, p, "num_attention_heads", n, None)
    if heads[0] is None:  # diffusers' historical naming: attention_head_dim is the number of heads
        heads = _per_block(cfg, p, "attention_head_dim", n, 8)
    tl = _per_block(cfg, p, "transformer_layers_per_block", n, 1)
    stages: list[Stage] = []
    cin = boc[0]
    for i, kind in enumerate(downs):
        cout = boc[i]
        attn = tl[i] if "CrossAttn" in kind else 0
        res = tuple((cin if j == 0 else cout, cout) for j in range(lpb))
        stages.append(Stage("down", cout, 2 ** i, res, attn, heads[i], "down" if i < n - 1 else ""))
        cin = cout
    mid = boc[-1]
    stages.append(Stage("mid", mid, 2 ** (n - 1), ((mid, mid), (mid, mid)), tl[-1], heads[-1]))
    rev, rheads, rtl = boc[::-1], heads[::-1], tl[::-1]
    prev = rev[0]
    for i, kind in enumerate(ups):
        cout, skip_in = rev[i], rev[min(i + 1, n - 1)]
        res = tuple(((prev if j == 0 else cout) + (skip_in if j == lpb else cout), cout) for j in range(lpb + 1))
        attn = rtl[i] if "CrossAttn" in kind else 0
        stages.append(Stage("up", cout, 2 ** (n - 1 - i), res, attn, rheads[i], "up" if i < n - 1 else ""))
        prev = cout
    return tuple(stages)


def _stage_params(s: Stage, temb: int, cross: int) -> int:
    p = sum(_resnet_params(a, b, temb) for a, b in s.resnets)
    if s.attn_layers:
        p += (len(s.resnets) - (1 if s.kind == "mid" else 0)) * _transformer_params(s.channels, s.attn_layers, cross)
    if s.sample:
        p += 9 * s.channels * s.channels + s.channels
    return p


def _stage_linears(s: Stage, temb: int, cross: int) -> list[Linear]:
    """Each conv as a matmul (k²·in → out) and each attention/feed-forward linear, for LoRA targets and FLOPs."""
    c = s.channels
    out = [Linear("conv1", 9 * a, b, 1) for a, b in s.resnets] + [Linear("conv2", 9 * b, b, 1) for _, b in s.resnets]
    out += [Linear("time_emb_proj", temb, b, 1) for _, b in s.resnets]
    out += [Linear("conv_shortcut", a, b, 1) for a, b in s.resnets if a != b]
    n_attn = (len(s.resnets) - (1 if s.kind == "mid" else 0)) if s.attn_layers else 0
    if n_attn:
        k = n_attn * s.attn_layers
        out += [Linear("proj_in", c, c, n_attn), Linear("proj_out", c, c, n_attn),
                Linear("attn1.to_q", c, c, k), Linear("attn1.to_k", c, c, k), Linear("attn1.to_v", c, c, k),
                Linear("attn1.to_out.0", c, c, k), Linear("attn2.to_q", c, c, k), Linear("attn2.to_k", cross, c, k),
                Linear("attn2.to_v", cross, c, k), Linear("attn2.to_out.0", c, c, k),
                Linear("ff.net.0.proj", c, 8 * c, k), Linear("ff.net.2", 4 * c, c, k)]
    if s.sample:
        out.append(Linear("sampler.conv", 9 * c, c, 1))
    return out


def _unet_totals(cfg: dict, stages: tuple[Stage, ...], p: list[str], only: tuple[str, ...]) -> tuple[int, list[Linear]]:
    boc0 = stages[0].channels
    temb = 4 * boc0
    cross = _get(cfg, p, "cross_attention_dim", default=768)
    cin = _get(cfg, p, "in_channels", default=4)
    params = 9 * cin * boc0 + boc0 + boc0 * temb + temb + temb * temb + temb  # conv_in, time_embedding
    linears = [Linear("conv_in", 9 * cin, boc0, 1), Linear("time_embedding", boc0, temb, 1)]
    if cfg.get("addition_embed_type") == "text_time":  # SDXL: add_embedding (text_embeds + time_ids → temb)
        proj = _get(cfg, p, "projection_class_embeddings_input_dim", default=2816)
        params += proj * temb + temb + temb * temb + temb
        linears.append(Linear("add_embedding", proj, temb, 1))
    for s in stages:
        if s.kind in only:
            params += _stage_params(s, temb, cross)
            linears += _stage_linears(s, temb, cross)
    if "up" in only:
        params += 2 * boc0 + 9 * boc0 * cin + cin  # conv_norm_out, conv_out
        linears.append(Linear("conv_out", 9 * boc0, cin, 1))
    return params, linears


def unet(cfg: dict, frozen: tuple[Arch, ...] = (), control: bool = False) -> Arch:
    """A UNet2DConditionModel, or (``control``) a ControlNetModel: conditioning embedding, conv_in, time embedding,
    the down and mid blocks and one zero 1×1 conv per down-path output (diffusers controlnets/controlnet.py)."""
    p: list[str] = []
    downs = cfg.get("down_block_types")
    ups = ["UpBlock2D"] * len(downs) if control and isinstance(downs, list) else cfg.get("up_block_types")
    stages = unet_stages({**cfg, "up_block_types": ups}, p)
    size = _get(cfg, p, "sample_size", default=64)
    if p:
        raise ArchError(p)
    params, linears = _unet_totals(cfg, stages, p, ("down", "mid") if control else ("down", "mid", "up"))
    cond = (cfg.get("conditioning_embedding_out_channels") or [16, 32, 96, 256]) if control else []
    if not (isinstance(cond, list) and all(type(c) is int and c > 0 for c in cond)):
        p.append(f"conditioning_embedding_out_channels: expected a list of positive integers, got {cond!r}")
    cc = _get(cfg, p, "conditioning_channels", default=3) if control else 3
    if p:
        raise ArchError(p)
    boc0 = stages[0].channels
    if control:
        params += 9 * cc * cond[0] + cond[0] + 9 * cond[-1] * boc0 + boc0
        for a, b in zip(cond[:-1], cond[1:]):
            params += 9 * a * a + a + 9 * a * b + b
        zero = [boc0] + [s.channels for s in stages if s.kind == "down"
                         for _ in range(len(s.resnets) + (1 if s.sample else 0))]
        params += sum(c * c + c for c in zero)  # zero convs
        mid = next(s.channels for s in stages if s.kind == "mid")
        params += mid * mid + mid
        linears += [Linear("controlnet_block", c, c, 1) for c in zero]
    shape = UNetShape(stages, int(cfg.get("in_channels") or 4), int(cfg.get("cross_attention_dim") or 768),
                      controlnet=control, cond_channels=tuple(cond))
    return Arch("unet", "diffusion", params, 0, max(lin.fan_in * lin.fan_out for lin in linears), tuple(linears),
                hidden=boc0, layers=sum(len(s.resnets) for s in stages), image_size=size * VAE_FACTOR,
                towers=frozen, variant="controlnet" if control else "unet", unet=shape)


def flux(cfg: dict, frozen: tuple[Arch, ...] = ()) -> Arch:
    """FluxTransformer2DModel: 19 double-stream (MMDiT) and 38 single-stream blocks, AdaLayerNorm modulation,
    rope, q/k RMSNorm (diffusers transformers/transformer_flux.py)."""
    p: list[str] = []
    L2 = _get(cfg, p, "num_layers", default=19)
    L1 = _get(cfg, p, "num_single_layers", default=38)
    hd = _get(cfg, p, "attention_head_dim", default=128)
    a = _get(cfg, p, "num_attention_heads", default=24)
    ctx = _get(cfg, p, "joint_attention_dim", default=4096)
    pooled = _get(cfg, p, "pooled_projection_dim", default=768)
    cin = _get(cfg, p, "in_channels", default=64)
    size = _get(cfg, p, "sample_size", default=128)
    if p:
        raise ArchError(p)
    d = a * hd
    emb = lambda i: i * d + d + d * d + d  # noqa: E731 - TimestepEmbedding / PixArtAlphaTextProjection
    params = emb(256) + (emb(256) if cfg.get("guidance_embeds", True) else 0) + emb(pooled)
    params += ctx * d + d + cin * d + d  # context_embedder, x_embedder
    ff = d * 4 * d + 4 * d + 4 * d * d + d
    double = 2 * (d * 6 * d + 6 * d) + 6 * (d * d + d) + 2 * (d * d + d) + 4 * hd + 2 * ff
    single = d * 3 * d + 3 * d + d * 4 * d + 4 * d + 5 * d * d + d + 3 * (d * d + d) + 2 * hd
    params += L2 * double + L1 * single + d * 2 * d + 2 * d + d * cin + cin
    linears = (Linear("attn.to_q", d, d, L2 + L1), Linear("attn.to_k", d, d, L2 + L1), Linear("attn.to_v", d, d, L2 + L1),
               Linear("attn.add_q_proj", d, d, L2), Linear("attn.add_k_proj", d, d, L2), Linear("attn.add_v_proj", d, d, L2),
               Linear("attn.to_out.0", d, d, L2), Linear("attn.to_add_out", d, d, L2), Linear("ff.net.0.proj", d, 4 * d, 2 * L2),
               Linear("ff.net.2", 4 * d, d, 2 * L2), Linear("norm1.linear", d, 6 * d, 2 * L2),
               Linear("proj_mlp", d, 4 * d, L1), Linear("proj_out", 5 * d, d, L1), Linear("norm.linear", d, 3 * d, L1),
               Linear("context_embedder", ctx, d, 1), Linear("x_embedder", cin, d, 1))
    return Arch("flux", "diffusion", params, 0, 5 * d * d, linears, hidden=d, layers=L2 + L1, heads=a, kv_heads=a,
                head_dim=hd, ffn=4 * d, image_size=size * VAE_FACTOR, towers=frozen,
                variant="mmdit", moe_layers=L2)


def clip_text(cfg: dict) -> Arch:
    """CLIPTextModel(WithProjection): token + position embeddings, pre-LN layers, final LayerNorm."""
    p: list[str] = []
    h, L, f = (_get(cfg, p, k) for k in ("hidden_size", "num_hidden_layers", "intermediate_size"))
    V = _get(cfg, p, "vocab_size", default=49408)
    npos = _get(cfg, p, "max_position_embeddings", default=77)
    proj = _get(cfg, p, "projection_dim", default=0)
    if p:
        raise ArchError(p)
    layer = 2 * h + 4 * (h * h + h) + 2 * h + h * f + f + f * h + h
    params = V * h + npos * h + L * layer + 2 * h + (h * proj
                                                     if cfg.get("architectures") == ["CLIPTextModelWithProjection"] else 0)
    return Arch("frozen", "text-encoder", params, V * h, V * h, (), hidden=h, layers=L, max_positions=npos)


def t5_encoder(cfg: dict) -> Arch:
    """T5EncoderModel (gated-GELU feed-forward, no biases, relative position bias in the first layer)."""
    p: list[str] = []
    d, L, ff, heads = (_get(cfg, p, k) for k in ("d_model", "num_layers", "d_ff", "num_heads"))
    kv = _get(cfg, p, "d_kv", default=64)
    V = _get(cfg, p, "vocab_size", default=32128)
    buckets = _get(cfg, p, "relative_attention_num_buckets", default=32)
    if p:
        raise ArchError(p)
    gated = str(cfg.get("feed_forward_proj", "")).startswith("gated")
    layer = 4 * d * heads * kv + (3 if gated else 2) * d * ff + 2 * d
    params = V * d + L * layer + d + buckets * heads
    return Arch("frozen", "text-encoder", params, V * d, V * d, (), hidden=d, layers=L)


def vae(cfg: dict) -> Arch:
    """AutoencoderKL: encoder and decoder (ResnetBlock2D without time embedding, one single-head attention in
    each mid block), quant_conv / post_quant_conv where the config uses them."""
    p: list[str] = []
    boc = cfg.get("block_out_channels")
    if not (isinstance(boc, list) and boc and all(type(c) is int and c > 0 for c in boc)):
        raise ArchError(["block_out_channels: expected a list of positive integers"])
    lpb = _get(cfg, p, "layers_per_block", default=2)
    lat = _get(cfg, p, "latent_channels", default=4)
    cin = _get(cfg, p, "in_channels", default=3)
    if p:
        raise ArchError(p)
    top = boc[-1]
    mid = 2 * _resnet_params(top, top, 0) + 2 * top + 4 * (top * top + top)
    enc = 9 * cin * boc[0] + boc[0] + mid + 2 * top + 9 * top * 2 * lat + 2 * lat + _vae_blocks(boc, lpb)
    dec = 9 * lat * top + top + mid + 2 * boc[0] + 9 * boc[0] * cin + cin + _vae_blocks(boc[::-1], lpb + 1)
    quant = (4 * lat * lat + 2 * lat if cfg.get("use_quant_conv", True) else 0) + \
        (lat * lat + lat if cfg.get("use_post_quant_conv", True) else 0)
    return Arch("frozen", "vae", enc + dec + quant, 0, 0, (), hidden=boc[0], layers=len(boc), channels=cin)


def _vae_blocks(chans: list[int], n: int) -> int:
    """One side of AutoencoderKL in order: ``n`` resnets a block, a resampling conv after every block but the last."""
    return sum(_resnet_params(a if j == 0 else c, c, 0) for a, c in zip(chans[:1] + chans[:-1], chans)
               for j in range(n)) + sum(9 * c * c + c for c in chans[:-1])


def frozen_part(cfg: dict) -> Arch:
    """A frozen pipeline component from its config: text encoder (CLIP / T5) or VAE."""
    kind = cfg.get("_class_name") or cfg.get("model_type")
    if not isinstance(kind, str) or kind not in _FROZEN:
        raise ArchError([f"{kind!r}: not a text encoder or VAE envman counts (CLIP text, T5 encoder, AutoencoderKL)"])
    return _FROZEN[kind](cfg)


def denoiser(cfg: dict, frozen: tuple[Arch, ...] = ()) -> Arch:
    cls = cfg.get("_class_name")
    if not isinstance(cls, str) or cls not in DENOISERS:
        raise ArchError([f"_class_name: {cls!r} is not a diffusion denoiser envman models "
                         f"({', '.join(DENOISERS)}); use --params N for the model states only"])
    return DENOISERS[cls](cfg, frozen)


DENOISERS: dict[str, Callable[..., Arch]] = {"UNet2DConditionModel": unet, "ControlNetModel": partial(unet, control=True),
             "FluxTransformer2DModel": flux}
_FROZEN = {"UNet2DConditionModel": unet, "AutoencoderKL": vae, "clip_text_model": clip_text,  # the UNet a ControlNet steers
           "CLIPTextModel": clip_text, "CLIPTextModelWithProjection": clip_text, "t5": t5_encoder,
           "T5EncoderModel": t5_encoder}


# --- activations ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Dtypes:
    """Bytes per element: n = what a GroupNorm/LayerNorm keeps of its input (fp32 under CUDA autocast, whose
    fp32 list holds group_norm and layer_norm), a = a norm's output and the SiLU that reads it, c = what a
    conv/linear keeps of its input (autocast's cast) and the attention tensors, r = the residual stream."""

    n: int
    a: int
    c: int
    r: int


@dataclass(frozen=True)
class Train:
    """How a part of the network trains: full (every weight), frozen (no weight; gradients flow through it to
    what trains before it: LoRA's frozen base, the UNet a ControlNet steers), none (no gradient reaches it)."""

    mode: str
    targets: frozenset[str] = frozenset()  # LoRA-targeted linears (diffusers' scripts: to_q, to_k, to_v, to_out.0)
    rank: int = 0
    eager: bool = False  # attention probabilities kept (the math kernel) instead of flash/efficient SDPA

    def kept(self, name: str, T: int, width: int, c: int) -> int:
        """What a linear/conv keeps for backward: its input only if its weight trains, a LoRA target's A output."""
        return (T * width * c if self.mode == "full" or name in self.targets else 0) + \
            (T * self.rank * c if name in self.targets else 0)


@dataclass
class Tally:
    saved: int = 0  # kept after the forward, without checkpointing
    kept: int = 0  # kept with gradient checkpointing (each checkpointed module's input + what is outside them)
    worst: int = 0  # the largest single checkpointed module's saved bytes (recomputed one at a time)
    flops: float = 0.0  # forward FLOPs

    def module(self, saved: int, inp: int, ckpt: bool = True) -> None:
        self.saved += saved
        if ckpt:
            self.kept += inp
            self.worst = max(self.worst, saved)
        else:
            self.kept += saved


def _resnet(t: Tally, d: Dtypes, cin: int, cout: int, T: int, tr: Train) -> None:
    """ResnetBlock2D: GroupNorm → SiLU → conv → (+temb) → GroupNorm → SiLU → conv (+ 1×1 shortcut)."""
    t.flops += 2 * T * (9 * cin * cout + 9 * cout * cout + (cin * cout if cin != cout else 0))
    if tr.mode == "none":
        return
    s = T * cin * (d.n + d.a) + T * cout * (d.n + d.a)
    if tr.mode == "full":
        s += T * cin * d.c + T * cout * d.c + (T * cin * d.r if cin != cout else 0)
    t.module(s, T * cin * d.r)


def _attn_block(t: Tally, d: Dtypes, c: int, T: int, heads: int, cross: int, text: int, tr: Train) -> None:
    """BasicTransformerBlock: LayerNorm → self-attention → LayerNorm → cross-attention → LayerNorm → GEGLU."""
    b = text // 77 or 1
    t.flops += 2 * T * 18 * c * c + 2 * text * 2 * cross * c + 4 * T * (T // b) * c + 4 * T * 77 * c
    if tr.mode == "none":
        return

    def lin(name: str) -> int:
        return tr.kept(name, T, c, d.c)

    core = (2 * T * c * d.c + T * heads * (T // b) * (4 + d.c)) if tr.eager else (4 * T * c * d.c + T * heads * 4)
    s = T * c * d.n + lin("to_q") + lin("to_k") + lin("to_v") + core + lin("to_out.0")  # self-attention
    s += T * c * d.n + lin("to_q") + 2 * T * c * d.c + text * 2 * c * d.c + T * heads * 4 + lin("to_out.0")
    # GEGLU: gelu keeps its gate, a view that holds the whole 8c projection; the product keeps gelu's output
    s += T * c * d.n + lin("ff.net.0.proj") + 8 * T * c * d.c + 4 * T * c * d.c + lin("ff.net.2") * 4
    t.module(s, T * c * d.r)


def _transformer2d(t: Tally, d: Dtypes, c: int, T: int, layers: int, heads: int, cross: int, text: int,
                   tr: Train) -> None:
    t.flops += 2 * T * 2 * c * c
    if tr.mode != "none":  # GroupNorm, proj_in and proj_out sit outside the checkpointed blocks
        t.module(T * c * d.n + (T * c * (d.c + d.r) if tr.mode == "full" else 0), 0, ckpt=False)
    for _ in range(layers):
        _attn_block(t, d, c, T, heads, cross, text, tr)


def _stage(t: Tally, d: Dtypes, s: Stage, T0: int, cross: int, text: int, tr: Train) -> None:
    T = T0 // (s.scale * s.scale)
    for i, (cin, cout) in enumerate(s.resnets):
        _resnet(t, d, cin, cout, T, tr)
        if s.attn_layers and not (s.kind == "mid" and i == 0):
            _transformer2d(t, d, s.channels, T, s.attn_layers, s.heads, cross, text, tr)
    if s.sample:
        Ts = T // 4 if s.sample == "down" else 4 * T  # Downsample2D: stride-2 conv; Upsample2D: nearest ×2, conv
        t.flops += 2 * Ts * 9 * s.channels * s.channels
        if tr.mode == "full":
            t.module((T if s.sample == "down" else 4 * T) * s.channels * d.c, 0, ckpt=False)


def unet_activations(arch: Arch, b: int, size: int, d: Dtypes, tr: Train) -> Tally:
    """Saved bytes of one training step's forward through a UNet (or a ControlNet and the UNet it steers):
    a LoRA run's blocks before the first attention need no gradient; a ControlNet's UNet needs none on its
    down path (the ControlNet's residuals join it at the skip connections and the mid block)."""
    shape = arch.unet
    assert shape is not None
    T0 = b * (size // VAE_FACTOR) ** 2  # latent positions
    text = b * shape.text_tokens
    t = Tally()
    if shape.controlnet:
        T_img = b * size * size
        for cin, cout in zip((3, *shape.cond_channels), shape.cond_channels):  # conditioning embedding, image res
            t.module(T_img * cin * d.c + T_img * cout * d.a, 0, ckpt=False)
            t.flops += 2 * T_img * 9 * cin * cout
            T_img //= 4
        for s in shape.stages:
            if s.kind != "up":
                _stage(t, d, s, T0, shape.cross_dim, text, Train("full", eager=tr.eager))
        steered = next((x.unet for x in arch.towers if x.unet is not None), None)
        for s in steered.stages if steered else ():
            _stage(t, d, s, T0, shape.cross_dim, text, Train("none" if s.kind == "down" else "frozen", eager=tr.eager))
    else:
        seen_attn = False
        for s in shape.stages:
            seen_attn = seen_attn or bool(s.attn_layers)
            _stage(t, d, s, T0, shape.cross_dim, text, tr if tr.mode == "full" or seen_attn else Train("none"))
    c0 = shape.stages[0].channels
    t.module(T0 * c0 * (d.n + d.a) + (T0 * c0 * d.c if tr.mode == "full" else 0), 0, ckpt=False)  # norm_out, conv_out
    return t


def flux_activations(arch: Arch, b: int, size: int, d: Dtypes, tr: Train, text_tokens: int) -> Tally:
    """FluxTransformer2DModel under flash/efficient SDPA (not validated against a trace or a measurement):
    per stream of a double block LayerNorm + modulation, q/k RMSNorm (fp32), joint attention, gated
    residuals, GELU(tanh) feed-forward; per single block the same on the joined tokens, its MLP and proj_out."""
    dim, L2, L1 = arch.hidden, arch.moe_layers, arch.layers - arch.moe_layers
    Ti = b * (size // VAE_FACTOR // 2) ** 2  # 2×2 latent patches
    Tt = b * text_tokens
    t = Tally()

    for T in (Ti, Tt):  # one stream of a double block (both streams' q/k/v join in one attention)
        s = 2 * T * dim * d.n + 2 * T * dim * 4 + 4 * T * dim * d.c + T * arch.heads * 4 + 10 * T * dim * d.c
        s += sum(tr.kept(n, T, dim, d.c) for n in ("to_q", "to_k", "to_v", "to_out.0", "ff.net.0.proj"))
        s += tr.kept("ff.net.2", T, 4 * dim, d.c)
        for _ in range(L2):
            t.module(s, T * dim * d.r)
    T = Ti + Tt
    s = T * dim * (d.n + 4) + 2 * T * dim * 4 + 4 * T * dim * d.c + T * arch.heads * 4 + 9 * T * dim * d.c
    s += sum(tr.kept(n, T, dim, d.c) for n in ("to_q", "to_k", "to_v", "proj_mlp")) + tr.kept("proj_out", T, 5 * dim, d.c)
    for _ in range(L1):
        t.module(s, T * dim * d.r)
    t.flops = 2.0 * (Ti + Tt) * arch.matmul_params + 4.0 * (Ti + Tt) * (Ti + Tt) // b * dim * (L1 + L2)
    return t
