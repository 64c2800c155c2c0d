"""Independent PyTorch reference of the H3 conditioner's language stack (Qwen3-VL text model, layers 0..49).

Written from /work/shared/spec/h3-model.md §8.1; transformers' Qwen3-VL text model was read for
understanding only. Needs torch (1.13 or 2.x) and numpy.

Weights: a dict of official names (`model.language_model.embed_tokens.weight`,
`model.language_model.layers.{i}.{input_layernorm,post_attention_layernorm}.weight`,
`...self_attn.{q,k,v,o}_proj.weight`, `...self_attn.{q,k}_norm.weight`, `...mlp.{gate,up,down}_proj.weight`).
Config: the `text_config` dict of text_encoder/config.json.

Forward for text-only input (positions 0..L-1; the interleaved MRoPE sections then all see the same position,
so the rotation is ordinary 1-D NeoX "rotate half" RoPE over the whole head_dim):
  h = embed[ids]
  for i in 0..n_used-1:
      x = RMSNorm(h; input_layernorm)
      q = per-head RMSNorm(x Wq^T; q_norm), k = per-head RMSNorm(x Wk^T; k_norm), v = x Wv^T
      q, k = RoPE(q), RoPE(k)   inv_freq_j = 1 / theta^(2j/D), angle = pos * inv_freq (fp32), cos/sin of
                                [angle, angle]
      a = causal GQA softmax(q k^T / sqrt(D)) v   (query head h uses kv head h // (Hq/Hkv))
      h = h + a Wo^T
      x = RMSNorm(h; post_attention_layernorm)
      h = h + (SiLU(x Wg^T) * (x Wu^T)) Wd^T
  output = h  (hidden_states[n_used]: no final norm)
n_used = min(50, num_hidden_layers) unless given.

PRECISION ("bf16" mode emulates eager bf16 PyTorch; "fp32" makes every rounding a no-op): tensors are stored
in fp32 and `r()` rounds to bf16 where the bf16 model produces a bf16 tensor:
  RMSNorm (Qwen style): r(w * r(x * rsqrt(mean(x^2) + eps)))     -- two roundings
  GEMM: r(x @ W^T), fp32 accumulation
  RoPE: cos/sin rounded to bf16; q' = r(r(q*cos) + r(rotate_half(q)*sin))
  attention: fp32 scores and softmax, output rounded once
  residual: r(h + branch); MLP: r(r(silu(r(g))) * r(u)) before the down projection (eager), or with
  `swiglu_one_rounding=True` r(silu(r(g)) * r(u)) -- the engine's fused swiglu op rounds once; that one
  rounding moves the tiny configs' outputs by up to 1.6e-2 abs (rel-RMS 3e-3..5e-3), so the bf16 goldens use
  the engine's contract and the script prints the eager-vs-engine gap.
"""
import math

import torch

P = "model.language_model."


def _r(mode):
    if mode == "bf16":
        return lambda x: x.to(torch.bfloat16).to(torch.float32)
    return lambda x: x


def n_used_layers(cfg, n_used=None):
    n = cfg["num_hidden_layers"]
    return min(50, n) if n_used is None else min(n_used, n)


def rope_tables(L, head_dim, theta):
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).to(torch.float32) / head_dim))
    pos = torch.arange(L, dtype=torch.float32)
    ang = pos[:, None] * inv[None, :]
    emb = torch.cat([ang, ang], dim=-1)
    return emb.cos(), emb.sin()


def forward(weights, cfg, ids, mode="fp32", n_used=None, record=None, swiglu_one_rounding=False, positions=None,
            mrope_section=None, vision=None):
    """positions [3, L] + mrope_section: interleaved MRoPE tables (h3_vision.mrope_tables); vision: dict(rows
    LongTensor [V], embeds [V, hidden], deepstack [list of [V, hidden]]) replaces rows / adds after layer j."""
    r = _r(mode)
    W = {k: r(v.to(torch.float32)) for k, v in weights.items() if k.startswith(P)}
    D = cfg["head_dim"]
    Hq, Hkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    eps = float(cfg["rms_norm_eps"])
    theta = float(cfg["rope_theta"])
    L = ids.shape[0]

    def rms(x, w):
        n = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
        return r(w * r(n))

    def lin(x, name):
        return r(x @ W[name].t())

    if positions is None:
        cos, sin = rope_tables(L, D, theta)
    else:
        import h3_vision
        cos, sin = h3_vision.mrope_tables(positions, D, theta, mrope_section)
    cos, sin = r(cos)[:, None, :], r(sin)[:, None, :]

    def rope(x):
        half = D // 2
        rot = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return r(r(x * cos) + r(rot * sin))

    mask = torch.ones(L, L, dtype=torch.bool).tril()
    h = W[P + "embed_tokens.weight"][ids.long()]
    if vision is not None:
        h = h.clone()
        h[vision["rows"]] = r(vision["embeds"].to(torch.float32))
    for i in range(n_used_layers(cfg, n_used)):
        p = f"{P}layers.{i}."
        x = rms(h, W[p + "input_layernorm.weight"])
        q = rms(lin(x, p + "self_attn.q_proj.weight").view(L, Hq, D), W[p + "self_attn.q_norm.weight"])
        k = rms(lin(x, p + "self_attn.k_proj.weight").view(L, Hkv, D), W[p + "self_attn.k_norm.weight"])
        v = lin(x, p + "self_attn.v_proj.weight").view(L, Hkv, D)
        q, k = rope(q), rope(k)
        rep = Hq // Hkv
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        s = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(D)
        s = s.masked_fill(~mask[None], float("-inf"))
        a = r(torch.einsum("hqk,khd->qhd", s.softmax(-1), v).reshape(L, Hq * D))
        o = lin(a, p + "self_attn.o_proj.weight")
        h = r(h + o)
        x = rms(h, W[p + "post_attention_layernorm.weight"])
        g = lin(x, p + "mlp.gate_proj.weight")
        u = lin(x, p + "mlp.up_proj.weight")
        act = torch.nn.functional.silu(g)
        m = r((act if swiglu_one_rounding else r(act)) * u)
        h = r(h + lin(m, p + "mlp.down_proj.weight"))
        if vision is not None and i < len(vision["deepstack"]):
            h = h.clone()
            h[vision["rows"]] = r(h[vision["rows"]] + r(vision["deepstack"][i].to(torch.float32)))
        if record is not None:
            record[f"layers.{i}.out"] = h.clone()
    return h


def random_weights(cfg, seed, n_layers=None):
    """Random bf16 weights with official names (norm weights around 1)."""
    g = torch.Generator().manual_seed(seed)
    Hs, D = cfg["hidden_size"], cfg["head_dim"]
    Hq, Hkv, F, V = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["intermediate_size"], cfg["vocab_size"]

    def u(*shape, scale):
        return ((torch.rand(*shape, generator=g) * 2 - 1) * scale).to(torch.bfloat16)

    w = {P + "embed_tokens.weight": u(V, Hs, scale=1.0), P + "norm.weight": (1 + u(Hs, scale=0.1).float()).bfloat16()}
    for i in range(cfg["num_hidden_layers"] if n_layers is None else n_layers):
        p = f"{P}layers.{i}."
        w[p + "input_layernorm.weight"] = (1 + u(Hs, scale=0.2).float()).bfloat16()
        w[p + "post_attention_layernorm.weight"] = (1 + u(Hs, scale=0.2).float()).bfloat16()
        w[p + "self_attn.q_proj.weight"] = u(Hq * D, Hs, scale=1 / math.sqrt(Hs))
        w[p + "self_attn.k_proj.weight"] = u(Hkv * D, Hs, scale=1 / math.sqrt(Hs))
        w[p + "self_attn.v_proj.weight"] = u(Hkv * D, Hs, scale=1 / math.sqrt(Hs))
        w[p + "self_attn.o_proj.weight"] = u(Hs, Hq * D, scale=1 / math.sqrt(Hq * D))
        w[p + "self_attn.q_norm.weight"] = (1 + u(D, scale=0.2).float()).bfloat16()
        w[p + "self_attn.k_norm.weight"] = (1 + u(D, scale=0.2).float()).bfloat16()
        w[p + "mlp.gate_proj.weight"] = u(F, Hs, scale=1 / math.sqrt(Hs))
        w[p + "mlp.up_proj.weight"] = u(F, Hs, scale=1 / math.sqrt(Hs))
        w[p + "mlp.down_proj.weight"] = u(Hs, F, scale=1 / math.sqrt(F))
    return w
