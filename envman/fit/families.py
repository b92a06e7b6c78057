"""Mixture-of-experts and state-space decoders: config → shapes and parameter counts. Pure.

Counted module by module after the Hugging Face implementations (MixtralForCausalLM, Qwen2MoeForCausalLM,
Qwen3MoeForCausalLM, DeepseekV2/V3ForCausalLM with multi-head latent attention, MambaForCausalLM); the
published totals are checked in the tests (within 2%). architectures.py routes a config here by its keys.
"""

from __future__ import annotations

from envman.fit.shapes import Arch, ArchError, Linear, _get

MOE = ("mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3")
SSM = ("mamba",)
DIFFUSION = ("unet", "sd", "sdxl", "flux", "dit")


def _experts(cfg: dict, p: list[str]) -> tuple[int, int]:
    e = next((cfg[k] for k in ("num_local_experts", "num_experts", "n_routed_experts") if isinstance(cfg.get(k), int)), None)
    if not isinstance(e, int) or e < 2:
        p.append("num_local_experts: expected the number of routed experts (≥ 2)")
        e = 2
    k = _get(cfg, p, "num_experts_per_tok", "moe_topk")
    return e, k


def _mla(cfg: dict, p: list[str], h: int, a: int) -> tuple[int, tuple[tuple[str, int, int], ...], int, int]:
    """DeepSeek multi-head latent attention: (params per layer, linears, q/k head dim, v head dim)."""
    kv_r, rope, nope, vd = (_get(cfg, p, k)
                            for k in ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"))
    q_r = cfg.get("q_lora_rank")
    qd = nope + rope
    lins: list[tuple[str, int, int]] = []
    if isinstance(q_r, int) and q_r > 0:
        lins += [("q_a_proj", h, q_r), ("q_b_proj", q_r, a * qd)]
        norms = q_r
    else:
        lins += [("q_proj", h, a * qd)]
        norms = 0
    lins += [("kv_a_proj_with_mqa", h, kv_r + rope), ("kv_b_proj", kv_r, a * (nope + vd)), ("o_proj", a * vd, h)]
    return sum(i * o for _, i, o in lins) + norms + kv_r, tuple(lins), qd, vd


def _shared(cfg: dict, fe: int) -> int:
    """The shared experts' width: qwen2_moe's one shared expert (+ its gate), deepseek's n × the routed width."""
    one, n = cfg.get("shared_expert_intermediate_size"), cfg.get("n_shared_experts")
    if type(one) is int and one > 0:
        return one
    return n * fe if type(n) is int and n > 0 else 0


def moe(cfg: dict, mtype: str | None) -> Arch:
    p: list[str] = []
    h, L, a, V = (_get(cfg, p, k) for k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size"))
    g = _get(cfg, p, "num_key_value_heads", default=a)
    npos = _get(cfg, p, "max_position_embeddings", default=4096)
    E, k = _experts(cfg, p)
    fe = _get(cfg, p, "moe_intermediate_size", "intermediate_size")
    dense_f = _get(cfg, p, "intermediate_size", default=fe)
    shared = _shared(cfg, fe)
    first_dense = cfg.get("first_k_dense_replace") or 0
    if type(first_dense) is not int or not 0 <= first_dense <= L:
        p.append(f"first_k_dense_replace: expected a count of dense layers (0 to num_hidden_layers), got {first_dense!r}")
    if p:
        raise ArchError(p)
    mla = mtype in ("deepseek_v2", "deepseek_v3") or "kv_lora_rank" in cfg
    if mla:
        attn, attn_lins, qd, vd = _mla(cfg, p, h, a)
        if p:
            raise ArchError(p)
        d = qd
    else:
        d = _get(cfg, p, "head_dim", default=max(h // max(a, 1), 1))
        attn = h * a * d + 2 * h * g * d + a * d * h
        if mtype == "qwen2_moe" or cfg.get("qkv_bias"):
            attn += a * d + 2 * g * d
        if mtype == "qwen3_moe":
            attn += 2 * d
        attn_lins = (("q_proj", h, a * d), ("k_proj", h, g * d), ("v_proj", h, g * d), ("o_proj", a * d, h))
    moe_L = L - first_dense
    expert = 3 * h * fe
    router = h * E + (E if mtype == "deepseek_v3" else 0)  # V3: e_score_correction_bias
    shared_p = 3 * h * shared + (h if mtype == "qwen2_moe" and shared else 0)  # qwen2_moe: shared_expert_gate
    per_moe = attn + 2 * h + router + E * expert + shared_p
    per_dense = attn + 2 * h + 3 * h * dense_f
    tied = bool(cfg.get("tie_word_embeddings", False))
    params = V * h + moe_L * per_moe + first_dense * per_dense + h + (0 if tied else V * h)
    active = params - moe_L * (E - k) * expert
    linears = tuple(Linear(n, i, o, L) for n, i, o in attn_lins) + (
        Linear("gate", h, E, moe_L), Linear("experts.gate_proj", h, fe, moe_L * E),
        Linear("experts.up_proj", h, fe, moe_L * E), Linear("experts.down_proj", fe, h, moe_L * E))
    if shared:
        linears += (Linear("shared_expert.gate_proj", h, shared, moe_L), Linear("shared_expert.up_proj", h, shared, moe_L),
                    Linear("shared_expert.down_proj", shared, h, moe_L))
    if first_dense:
        linears += (Linear("gate_proj", h, dense_f, first_dense), Linear("up_proj", h, dense_f, first_dense),
                    Linear("down_proj", dense_f, h, first_dense))
    linears += (Linear("lm_head", h, V, 1),)
    return Arch("llama", "causal-lm", params, V * h, max(V * h, h * fe), linears, hidden=h, layers=L, heads=a,
                kv_heads=a if mla else g, head_dim=d, ffn=dense_f, vocab=V, max_positions=npos, tied=tied,
                variant="mla" if mla else "moe", experts=E, experts_per_tok=k, expert_ffn=fe, shared_ffn=shared,
                moe_layers=moe_L, active_params=active)


def mamba(cfg: dict, mtype: str | None) -> Arch:
    """MambaForCausalLM (Mamba-1): in_proj, depthwise conv, x_proj, dt_proj, A, D, out_proj, RMSNorm."""
    p: list[str] = []
    if mtype not in SSM:
        raise ArchError([f"model_type: {mtype!r} has state-space keys ({', '.join(k for k in cfg if 'state' in k)}) "
                         "but only Mamba-1 (model_type mamba) is modelled: use --params N"])
    h, L, V = (_get(cfg, p, k) for k in ("hidden_size", "num_hidden_layers", "vocab_size"))
    N = _get(cfg, p, "state_size", default=16)
    ex = _get(cfg, p, "expand", default=2)
    kc = _get(cfg, p, "conv_kernel", default=4)
    if p:
        raise ArchError(p)
    inner = ex * h
    r = cfg.get("time_step_rank")
    r = r if isinstance(r, int) and r > 0 else -(-h // 16)  # "auto": ceil(hidden / 16)
    per_layer = (h * 2 * inner + inner * kc + inner + inner * (r + 2 * N) + r * inner + inner
                 + inner * N + inner + inner * h + h)
    tied = bool(cfg.get("tie_word_embeddings", True))
    params = V * h + L * per_layer + h + (0 if tied else V * h)
    linears = (Linear("in_proj", h, 2 * inner, L), Linear("x_proj", inner, r + 2 * N, L), Linear("dt_proj", r, inner, L),
               Linear("out_proj", inner, h, L), Linear("lm_head", h, V, 1))
    return Arch("mamba", "causal-lm", params, V * h, V * h, linears, hidden=h, layers=L, vocab=V, max_positions=0,
                tied=tied, variant="mamba", ssm_state=N, expand=ex, ffn=inner)
