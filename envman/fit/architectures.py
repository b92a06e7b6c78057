"""Shapes and parameter counts of a model, from its published config values. Pure: a dict in, an Arch out.

The config is a Hugging Face ``config.json`` (already parsed; ``catalog`` reads files). Counts follow the
reference implementations module by module, so they can be checked against the publishers' figures
(tests: within 2%). ``ArchError`` carries ``dotted.path: problem`` for the catalog to prefix the file.
"""

from __future__ import annotations

from envman.fit import diffusion, families
from envman.fit.shapes import Arch, ArchError, Linear, _get

DECODERS = ("gpt2", "llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "phi3")
# config keys that mean "not a dense decoder", whatever model_type says (a Mixtral config relabelled
# `mistral` is still a mixture of experts): routed to their family or refused, never estimated as dense
MOE_KEYS = ("num_local_experts", "num_experts", "n_routed_experts")
SSM_KEYS = ("state_size", "ssm_cfg", "d_state", "mamba_d_state")
DIFFUSERS_KEYS = ("_class_name", "_diffusers_version")


def arch_from_config(cfg: dict, task: str | None = None) -> Arch:
    """Raise ArchError listing every problem; an unknown model_type names the supported ones."""
    if not isinstance(cfg, dict):
        raise ArchError(["expected a JSON object (a config.json)"])
    mtype = cfg.get("model_type")
    special = _by_keys(cfg, mtype)
    if special is not None:
        return special
    if mtype in DECODERS:
        return _decoder(cfg, mtype)
    if isinstance(mtype, str) and mtype in _OTHERS:
        return _OTHERS[mtype](cfg)
    known = ", ".join((*DECODERS, *families.MOE, *families.SSM, *_OTHERS))
    raise ArchError([f"model_type: {mtype!r} is not supported (supported: {known}); for another "
                     "architecture use --params N (model states only)"])


def _by_keys(cfg: dict, mtype) -> Arch | None:
    """Families recognised by their keys, whatever model_type says: a diffusers denoiser (UNet, ControlNet,
    Flux) is modelled, any other diffusers class refused with a pointer to --params."""
    if any(k in cfg for k in DIFFUSERS_KEYS) or mtype in families.DIFFUSION:
        return diffusion.denoiser(cfg)
    if any(isinstance(cfg.get(k), int) and cfg[k] > 1 for k in MOE_KEYS) or mtype in families.MOE:
        return families.moe(cfg, mtype)
    if mtype in families.SSM or any(k in cfg for k in SSM_KEYS):
        return families.mamba(cfg, mtype)
    return None


def _decoder(cfg: dict, mtype: str) -> Arch:
    p: list[str] = []
    if mtype == "gpt2":
        h = _get(cfg, p, "n_embd", "hidden_size")
        L = _get(cfg, p, "n_layer", "num_hidden_layers")
        a = _get(cfg, p, "n_head", "num_attention_heads")
        V = _get(cfg, p, "vocab_size")
        npos = _get(cfg, p, "n_positions", "max_position_embeddings")
        f = _get(cfg, p, "n_inner", default=4 * h)
        d_attn = _get(cfg, p, "attn_pdrop", default=0.1, kind=float)
        d_hid = _get(cfg, p, "resid_pdrop", default=0.1, kind=float)
        if p:
            raise ArchError(p)
        per_layer = 2 * h + (h * 3 * h + 3 * h) + (h * h + h) + 2 * h + (h * f + f) + (f * h + h)
        params = V * h + npos * h + L * per_layer + 2 * h
        linears: tuple[Linear, ...] = (Linear("c_attn", h, 3 * h, L), Linear("c_proj", h, h, L), Linear("c_fc", h, f, L),
                   Linear("mlp.c_proj", f, h, L), Linear("lm_head", h, V, 1))
        return Arch("gpt2", "causal-lm", params, V * h + npos * h, V * h, linears, hidden=h, layers=L, heads=a,
                    kv_heads=a, head_dim=h // a, ffn=f, vocab=V, max_positions=npos, tied=True,
                    dropout_attn=d_attn, dropout_hidden=d_hid)
    h, L, a, V, f = (_get(cfg, p, k)
                     for k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size",
                               "intermediate_size"))
    g = _get(cfg, p, "num_key_value_heads", default=a)
    d = _get(cfg, p, "head_dim", default=max(h // max(a, 1), 1))
    npos = _get(cfg, p, "max_position_embeddings", default=4096)
    d_attn = _get(cfg, p, "attention_dropout", default=0.0, kind=float)
    if p:
        raise ArchError(p)
    tied = bool(cfg.get("tie_word_embeddings", mtype in ("gemma", "gemma2")))
    attn = h * a * d + 2 * h * g * d + a * d * h
    if mtype == "qwen2":
        attn += a * d + 2 * g * d  # q/k/v biases
    if mtype == "qwen3":
        attn += 2 * d  # q_norm, k_norm (per head dim)
    norms = (4 if mtype == "gemma2" else 2) * h
    per_layer = attn + 3 * h * f + norms
    params = V * h + L * per_layer + h + (0 if tied else V * h)
    linears = (Linear("q_proj", h, a * d, L), Linear("k_proj", h, g * d, L), Linear("v_proj", h, g * d, L),
               Linear("o_proj", a * d, h, L), Linear("gate_proj", h, f, L), Linear("up_proj", h, f, L),
               Linear("down_proj", f, h, L), Linear("lm_head", h, V, 1))
    return Arch("llama", "causal-lm", params, V * h, V * h, linears, hidden=h, layers=L, heads=a, kv_heads=g,
                head_dim=d, ffn=f, vocab=V, max_positions=npos, tied=tied,
                dropout_attn=d_attn, variant="gemma2" if mtype == "gemma2" else "")


def _bert(cfg: dict) -> Arch:
    p: list[str] = []
    h, L, a, f, V = (_get(cfg, p, k)
                     for k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                               "vocab_size"))
    npos = _get(cfg, p, "max_position_embeddings", default=512)
    types = _get(cfg, p, "type_vocab_size", default=2)
    d_hid = _get(cfg, p, "hidden_dropout_prob", default=0.1, kind=float)
    d_attn = _get(cfg, p, "attention_probs_dropout_prob", default=0.1, kind=float)
    if p:
        raise ArchError(p)
    emb = V * h + npos * h + types * h
    per_layer = 4 * (h * h + h) + 2 * h + (h * f + f) + (f * h + h) + 2 * h
    body = (Linear("query", h, h, L), Linear("key", h, h, L), Linear("value", h, h, L),
            Linear("attention.output.dense", h, h, L), Linear("intermediate.dense", h, f, L),
            Linear("output.dense", f, h, L))
    if head_kind(cfg) == "sequence-classification":  # BertForSequenceClassification: pooler + classifier
        labels = _labels(cfg, p, 2)
        if p:
            raise ArchError(p)
        params = emb + 2 * h + L * per_layer + (h * h + h) + (h * labels + labels)
        return Arch("bert", "sequence-classification", params, emb, V * h,
                    body + (Linear("pooler", h, h, 1), Linear("classifier", h, labels, 1)), hidden=h, layers=L,
                    heads=a, kv_heads=a, head_dim=h // a, ffn=f, vocab=V, max_positions=npos, labels=labels,
                    dropout_attn=d_attn, dropout_hidden=d_hid)
    head = (h * h + h) + 2 * h + V  # MLM transform + LayerNorm + decoder bias (decoder weight tied)
    params = emb + 2 * h + L * per_layer + head
    linears = body + (Linear("transform.dense", h, h, 1), Linear("decoder", h, V, 1))
    return Arch("bert", "masked-lm", params, emb, V * h, linears, hidden=h, layers=L, heads=a, kv_heads=a,
                head_dim=h // a, ffn=f, vocab=V, max_positions=npos, tied=True, dropout_attn=d_attn,
                dropout_hidden=d_hid)


def head_kind(cfg: dict) -> str:
    """The head ``architectures`` names (BertForSequenceClassification → sequence-classification)."""
    names = cfg.get("architectures") or []
    names = names if isinstance(names, list) else []
    for suffix, kind in (("ForSequenceClassification", "sequence-classification"), ("ForMaskedLM", "masked-lm"),
                         ("ForCausalLM", "causal-lm"), ("ForImageClassification", "image-classification")):
        if any(isinstance(n, str) and n.endswith(suffix) for n in names):
            return kind
    return ""


def _labels(cfg: dict, p: list[str], default: int) -> int:
    ids = cfg.get("id2label")
    return len(ids) if isinstance(ids, dict) and ids else _get(cfg, p, "num_labels", default=default)


def _vit(cfg: dict) -> Arch:
    p: list[str] = []
    h, L, a = (_get(cfg, p, k) for k in ("hidden_size", "num_hidden_layers", "num_attention_heads"))
    f = _get(cfg, p, "intermediate_size", default=4 * h if isinstance(h, int) else 1)
    img = _get(cfg, p, "image_size", default=224)
    patch = _get(cfg, p, "patch_size", default=16)
    ch = _get(cfg, p, "num_channels", default=3)
    labels = _labels(cfg, p, 1000)
    if p:
        raise ArchError(p)
    n = (img // patch) ** 2 + 1
    per_layer = 4 * h + 4 * (h * h + h) + (h * f + f) + (f * h + h)
    emb = ch * patch * patch * h + h + h + n * h
    params = emb + L * per_layer + 2 * h + h * labels + labels
    linears = (Linear("query", h, h, L), Linear("key", h, h, L), Linear("value", h, h, L),
               Linear("attention.output.dense", h, h, L), Linear("intermediate.dense", h, f, L),
               Linear("output.dense", f, h, L), Linear("patch_embeddings", ch * patch * patch, h, 1),
               Linear("classifier", h, labels, 1))
    return Arch("vit", "image-classification", params, n * h, max(h * f, h * labels), linears, hidden=h, layers=L,
                heads=a, kv_heads=a, head_dim=h // a, ffn=f, image_size=img, patch_size=patch, channels=ch,
                labels=labels, max_positions=n)


def _resnet(cfg: dict) -> Arch:
    p: list[str] = []
    depths = cfg.get("depths")
    widths = cfg.get("hidden_sizes")
    stem = _get(cfg, p, "embedding_size", default=64)
    ch = _get(cfg, p, "num_channels", default=3)
    labels = _labels(cfg, p, 1000)
    if not (isinstance(depths, list) and depths and all(isinstance(x, int) and x > 0 for x in depths)):
        p.append(f"depths: expected a list of positive integers, got {depths!r}")
    if not (isinstance(widths, list) and isinstance(depths, list) and len(widths) == len(depths)
            and all(type(w) is int and w > 0 for w in widths)):
        p.append(f"hidden_sizes: expected one positive width per stage (as many as depths), got {widths!r}")
    kind = cfg.get("layer_type", "bottleneck")
    img = _get(cfg, p, "image_size", default=224)
    if kind not in ("bottleneck", "basic"):
        p.append(f"layer_type: expected 'bottleneck' (ResNet-50 and deeper) or 'basic' (ResNet-18/34), got {kind!r}")
    if p:
        raise ArchError(p)
    assert isinstance(depths, list) and isinstance(widths, list)  # checked above
    params = 7 * 7 * ch * stem + 2 * stem
    linears = [Linear("stem", 7 * 7 * ch, stem, 1)]
    cin = stem
    largest = 0
    for depth, w in zip(depths, widths):
        r = w // 4
        for _ in range(depth):
            if kind == "basic":  # ResNetBasicLayer: two 3×3 convolutions with BatchNorm (transformers modeling_resnet.py)
                block = 9 * cin * w + 9 * w * w + 2 * (w + w)
                lins = [Linear("conv1", 9 * cin, w, 1), Linear("conv2", 9 * w, w, 1)]
                largest = max(largest, 9 * w * w)
            else:
                block = cin * r + 9 * r * r + r * w + 2 * (r + r + w)
                lins = [Linear("conv1", cin, r, 1), Linear("conv2", 9 * r, r, 1), Linear("conv3", r, w, 1)]
            if cin != w:  # projection shortcut (also where the stage strides)
                block += cin * w + 2 * w
                lins.append(Linear("shortcut", cin, w, 1))
            params += block
            linears += lins
            largest = max(largest, 9 * r * r, r * w, cin * w)
            cin = w
    params += cin * labels + labels
    linears.append(Linear("classifier", cin, labels, 1))
    return Arch("resnet", "image-classification", params, 0, max(largest, cin * labels), tuple(linears),
                image_size=img, channels=ch, labels=labels,
                stages=tuple(zip(depths, widths)), stem=stem, hidden=cin, layers=sum(depths),
                variant="basic" if kind == "basic" else "")


def _clip(cfg: dict) -> Arch:
    p: list[str] = []
    tc, vc = (cfg.get(k) or {} for k in ("text_config", "vision_config"))
    p += [f"{k}: expected an object, got {c!r}" for k, c in (("text_config", tc), ("vision_config", vc))
          if not isinstance(c, dict)]
    tc, vc = (c if isinstance(c, dict) else {} for c in (tc, vc))
    proj = _get(cfg, p, "projection_dim", default=512)
    t, v = "text_config.", "vision_config."
    h, L, a = (_get(tc, p, *k, path=t)
               for k in (("hidden_size", "d_model"), ("num_hidden_layers",), ("num_attention_heads",)))
    f = _get(tc, p, "intermediate_size", default=4 * h if isinstance(h, int) else 1, path=t)
    V = _get(tc, p, "vocab_size", default=49408, path=t)
    npos = _get(tc, p, "max_position_embeddings", default=77, path=t)
    vh, vL, va = (_get(vc, p, k, path=v) for k in ("hidden_size", "num_hidden_layers", "num_attention_heads"))
    vf = _get(vc, p, "intermediate_size", default=3072, path=v)
    img = _get(vc, p, "image_size", default=224, path=v)
    patch = _get(vc, p, "patch_size", default=32, path=v)
    if p:
        raise ArchError(p)
    layer = lambda h_, f_: 4 * h_ + 4 * (h_ * h_ + h_) + (h_ * f_ + f_) + (f_ * h_ + h_)  # noqa: E731
    text = V * h + npos * h + L * layer(h, f) + 2 * h
    n = (img // patch) ** 2 + 1
    vision = 3 * patch * patch * vh + vh + n * vh + 2 * vh + vL * layer(vh, vf) + 2 * vh
    params = text + vision + h * proj + vh * proj + 1
    t_arch = Arch("bert", "clip", text, V * h, V * h, (Linear("attn", h, h, 4 * L), Linear("mlp", h, f, 2 * L)),
                  hidden=h, layers=L, heads=a, kv_heads=a, head_dim=h // a, ffn=f, vocab=V, max_positions=npos)
    v_arch = Arch("vit", "clip", vision, n * vh, vh * vf, (Linear("attn", vh, vh, 4 * vL), Linear("mlp", vh, vf, 2 * vL)),
                  hidden=vh, layers=vL, heads=va, kv_heads=va, head_dim=vh // va, ffn=vf, image_size=img,
                  patch_size=patch, max_positions=n)
    return Arch("clip", "clip", params, V * h + n * vh, V * h, t_arch.linears + v_arch.linears, hidden=h, layers=L + vL,
                heads=a, vocab=V, max_positions=npos, image_size=img, patch_size=patch, towers=(t_arch, v_arch))


def _whisper(cfg: dict) -> Arch:
    p: list[str] = []
    d, el, dl, ea, ef, df, V = (_get(cfg, p, k)
                                for k in ("d_model", "encoder_layers", "decoder_layers", "encoder_attention_heads",
                                          "encoder_ffn_dim", "decoder_ffn_dim", "vocab_size"))
    mels = _get(cfg, p, "num_mel_bins", default=80)
    src = _get(cfg, p, "max_source_positions", default=1500)
    tgt = _get(cfg, p, "max_target_positions", default=448)
    if p:
        raise ArchError(p)
    attn = 3 * d * d + 2 * d + d * d + d  # q, v, out with bias; k without (Whisper)
    enc_layer = attn + 2 * d + (d * ef + ef) + (ef * d + d) + 2 * d
    dec_layer = 2 * attn + 3 * 2 * d + (d * df + df) + (df * d + d)
    conv = (mels * d * 3 + d) + (d * d * 3 + d)
    params = conv + src * d + el * enc_layer + 2 * d + V * d + tgt * d + dl * dec_layer + 2 * d
    enc = Arch("bert", "speech-seq2seq", conv + src * d + el * enc_layer, src * d, d * ef,
               (Linear("attn", d, d, 4 * el), Linear("mlp", d, ef, 2 * el)), hidden=d, layers=el, heads=ea,
               kv_heads=ea, head_dim=d // ea, ffn=ef, max_positions=src)
    dec = Arch("bert", "speech-seq2seq", V * d + tgt * d + dl * dec_layer, V * d, V * d,
               (Linear("attn", d, d, 8 * dl), Linear("mlp", d, df, 2 * dl), Linear("lm_head", d, V, 1)), hidden=d,
               layers=dl, heads=ea, kv_heads=ea, head_dim=d // ea, ffn=df, vocab=V, max_positions=tgt, tied=True)
    return Arch("whisper", "speech-seq2seq", params, V * d + tgt * d + src * d, V * d, enc.linears + dec.linears,
                hidden=d, layers=el + dl, heads=ea, vocab=V, ffn=ef, max_positions=src, tied=True, towers=(enc, dec))


_OTHERS = {"bert": _bert, "vit": _vit, "resnet": _resnet, "clip": _clip, "whisper": _whisper}


def params_from_count(n: int) -> Arch:
    """``--params N`` without a config: weights, gradients and optimizer state only (no activation model)."""
    return Arch("params", "unknown", n, 0, 0, (), layers=0)
