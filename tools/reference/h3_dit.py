"""Independent PyTorch reference of the MiniMax-H3 DiT forward pass.

Written from /work/shared/spec/h3-model.md (§2 tensors, §5 packed layout, §6 forward, §15 pitfalls);
the public diffusers port was read for understanding only.  Runs on torch 1.13 (CPU) and torch 2.x
(CPU or `--device cuda`); no other packages.

Weights are a dict of *diffusers*-named tensors (see `original_to_diffusers` for the original layout).
Config is a diffusers `config.json` dict (see `original_config_to_diffusers`).

PRECISION CONTRACT (mode "bf16"; mode "fp32" runs the same graph with every rounding step a no-op
and all weights upcast to fp32)
-----------------------------------------------------------------------------------------------
Implementation technique: every tensor is *stored* in fp32; `_P.r(x)` = round-to-nearest-even to bf16
(and back to fp32) is applied exactly where the reference bf16 model produces a bf16 tensor.  A torch
bf16 elementwise op computes in fp32 and rounds once, so this emulation is bit-identical to eager bf16
for elementwise ops and makes the result independent of the device's bf16 kernels.  GEMMs accumulate in
fp32 (TF32 is disabled on CUDA) and round once after the bias add.

 1. fp32 islands (spec §2.3): proj_in, audio_proj_in, time_embedder.linear_1/2, proj_out, audio_proj_out
    keep fp32 weights and run fp32 GEMMs.  Everything else (context_embedder, refiner, blocks incl. AdaLN,
    norm_out.*) uses bf16 weights (fp32-stored weights are rounded to bf16 on load in bf16 mode).
 2. Embeddings (§6.1): E_v = bf16(fp32 GEMM(Xv) + b); E_a likewise; text: C is rounded to bf16 first,
    E_t = bf16(C @ Wc^T + b) (fp32 accumulate, one rounding).  Packed buffer H is bf16, zero-filled,
    rows scattered text, video, audio.
 3. Time embedding (§6.2, §15.2): fp32 throughout.  omega_k = exp(fp32(-ln(10000) * k) / 128), k < 128
    (computed in fp32 exactly like diffusers' get_timestep_embedding; /128 is exact), arg = t * omega (fp32),
    e = [cos(arg), sin(arg)]; temb = W2 @ SiLU(W1 @ e + b1) + b2, fp32.
 4. AdaLN (§6.3, §15.5): s = bf16(SiLU_fp32(temb)) (SiLU in fp32, ONE rounding), mod = bf16(s @ W^T + b)
    per block, viewed [M*3, 6*hidden], chunks shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp;
    table row = timestep_index*3 + tag.  Final layer: bf16(s @ Wf^T + bf) chunks (shift, scale), row =
    timestep_index (no modality).
 5. RMSNorm (all of them: norm1/norm2, per-head norm_q/norm_k, refiner final_norm, norm_out.norm):
    y = bf16( x_f32 * rsqrt(mean_f32(x^2) + eps) * w_f32 ), eps in fp32, ONE rounding.  This is the
    current torch `rms_norm` composite (torch >= 2.6-ish: normalize and weight-multiply in the fp32 opmath
    type, then `type_as(input)`) and the fused CUDA kernel.  torch 2.4/2.5's composite rounded to bf16
    *before* the weight multiply (two roundings); pass `rms_two_roundings=True` to emulate that.
 6. Modulate (§6.3): x = bf16( bf16( n * bf16(1 + scale) ) + shift )  -- three bf16 roundings, exactly
    what eager `n * (1.0 + scale) + shift` does on bf16 tensors.  Same formula for the final layer.
 7. Residual (§6.3): H = bf16( H + bf16(gate * branch_out) )  -- two roundings (eager `H + gate * out`).
 8. Attention (§6.3): q,k,v = bf16 GEMMs (no bias); per-head RMSNorm (item 5, eps = qk_norm_eps) -> bf16;
    RoPE (§5.3): positions f64 -> f32, inv_freq[k] = 1 / fp32(theta ** (fp32(2k) / (2F))) (fp32 pow then
    reciprocal, F = rope_freq_dim), freqs = pos_f32 * inv_freq (fp32), cat [f_t, f_h, f_w] then duplicated
    (6F channels), cos/sin computed in fp32 then ROUNDED TO bf16; rotate-half on the first 6F channels of
    each head (pairs (i, i+3F)), rest passes through:
        out = bf16( bf16(x * cos) + bf16(rotate_half(x) * sin) )      (three roundings, eager bf16)
    Scores/softmax/PV: q, k, v (bf16 values) upcast to fp32, S = (q k^T) * (1/sqrt(head_dim)) in fp32,
    softmax in fp32, O = P V in fp32 (P is NOT rounded to bf16), then O rounded to bf16 once.  This is the
    "exact" attention; FlashAttention/cuDNN kernels round P to bf16 before PV, which is within tolerance.
    Output projection: bf16(O @ Wo^T).  Refiner attention: same, text rows only, no RoPE.
 9. SwiGLU FFN: h = bf16(x @ W1^T) (diffusers rows [value; gate]); g = bf16(SiLU_fp32(gate));
    m = bf16(value * g); out = bf16(m @ W2^T).  (SiLU evaluated in fp32 and rounded once = CUDA/opmath
    behaviour; note torch 1.13's *CPU* bf16 SiLU kernel is not correctly rounded, ~30% of values differ by
    1 ulp, which is why this file never runs a bf16 elementwise kernel itself.)
10. Output (§6.4): y = modulate(RMSNorm(H; norm_out.norm, final_norm_eps)) in bf16, then cast to fp32
    (exact), fp32 GEMMs with proj_out / audio_proj_out, rows selected by video_indices / audio_indices.
"""
import argparse
import json
import math
import os
import re
import sys

import torch

F32 = torch.float32
BF16 = torch.bfloat16
MODALITIES = 3  # 0 video, 1 text, 2 audio (§5.2)

FP32_ISLAND_PREFIXES = ("proj_in.", "audio_proj_in.", "time_embedder.", "proj_out.", "audio_proj_out.")


def is_fp32_island(name):
    return name.startswith(FP32_ISLAND_PREFIXES)


# ---------------------------------------------------------------------------------------------------
# precision helper
# ---------------------------------------------------------------------------------------------------
class _P:
    def __init__(self, mode, rms_two_roundings=False):
        if mode not in ("fp32", "bf16"):
            raise ValueError(f"mode must be fp32 or bf16, got {mode}")
        self.bf16 = mode == "bf16"
        self.rms_two_roundings = rms_two_roundings

    def r(self, x):
        """Round to the activation dtype (bf16 RNE) and keep fp32 storage; identity in fp32 mode."""
        return x.to(BF16).to(F32) if self.bf16 else x


def _linear(x, w, b=None):
    y = x @ w.t()
    if b is not None:
        y = y + b
    return y


def rms_norm(P, x, w, eps):
    """§6 item 5 of the module docstring. x holds bf16-representable values in bf16 mode."""
    rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    if P.rms_two_roundings:
        return P.r(P.r(x * rstd) * w)
    return P.r(x * rstd * w)


def modulate(P, n, shift, scale):
    return P.r(P.r(n * P.r(1.0 + scale)) + shift)


# ---------------------------------------------------------------------------------------------------
# RoPE and time embedding
# ---------------------------------------------------------------------------------------------------
def rope_inv_freq(rope_freq_dim, theta=10000.0, device="cpu"):
    F = rope_freq_dim
    return 1.0 / (theta ** (torch.arange(0, 2 * F, 2, dtype=F32, device=device) / (2 * F)))


def rope_tables(position_ids, inv_freq):
    """position_ids [S,3] (f64) -> cos, sin [S, 6F] fp32 (§5.3)."""
    pos = position_ids.to(F32)
    freqs = pos.unsqueeze(-1) * inv_freq.view(1, 1, -1)  # [S,3,F] fp32 products
    freqs = torch.cat((freqs[:, 0], freqs[:, 1], freqs[:, 2]), dim=-1)
    freqs = torch.cat((freqs, freqs), dim=-1)
    return freqs.cos(), freqs.sin()


def apply_rope(P, x, cos, sin):
    """x [S, heads, head_dim]; rotate-half over the first cos.shape[-1] channels of each head."""
    R = cos.shape[-1]
    xr, xp = x[..., :R], x[..., R:]
    c = cos[:, None, :]
    s = sin[:, None, :]
    x1, x2 = xr.chunk(2, dim=-1)
    rot = torch.cat((-x2, x1), dim=-1)
    out = P.r(P.r(xr * c) + P.r(rot * s))
    return torch.cat((out, xp), dim=-1)


def timestep_sinusoid(t, dim=256, max_period=10000.0):
    """[M] -> [M, dim] fp32, [cos, sin], unscaled t (§6.2, §15.2)."""
    half = dim // 2
    exponent = -math.log(max_period) * torch.arange(0, half, dtype=F32, device=t.device)
    exponent = exponent / half
    omega = torch.exp(exponent)
    arg = t.to(F32)[:, None] * omega[None, :]
    return torch.cat((torch.cos(arg), torch.sin(arg)), dim=-1)


def time_embedding(W, cfg, timestep):
    e = timestep_sinusoid(timestep, cfg.get("freq_dim", 256))
    h = _linear(e, W["time_embedder.linear_1.weight"], W["time_embedder.linear_1.bias"])
    h = torch.nn.functional.silu(h)
    return _linear(h, W["time_embedder.linear_2.weight"], W["time_embedder.linear_2.bias"])


# ---------------------------------------------------------------------------------------------------
# attention / ffn / blocks
# ---------------------------------------------------------------------------------------------------
def attention(P, W, pre, x, cfg, rope=None):
    heads, hd = cfg["num_attention_heads"], cfg["attention_head_dim"]
    S = x.shape[0]
    q = P.r(_linear(x, W[pre + "attn.to_q.weight"])).view(S, heads, hd)
    k = P.r(_linear(x, W[pre + "attn.to_k.weight"])).view(S, heads, hd)
    v = P.r(_linear(x, W[pre + "attn.to_v.weight"])).view(S, heads, hd)
    eps = cfg.get("qk_norm_eps", 1e-5)
    q = rms_norm(P, q, W[pre + "attn.norm_q.weight"], eps)
    k = rms_norm(P, k, W[pre + "attn.norm_k.weight"], eps)
    if rope is not None:
        q = apply_rope(P, q, *rope)
        k = apply_rope(P, k, *rope)
    scores = torch.einsum("qhd,khd->hqk", q, k) * (1.0 / math.sqrt(hd))  # fp32
    p = torch.softmax(scores, dim=-1)  # fp32
    o = torch.einsum("hqk,khd->qhd", p, v)  # fp32, P not rounded
    o = P.r(o).reshape(S, heads * hd)
    return P.r(_linear(o, W[pre + "attn.to_out.0.weight"]))


def ffn(P, W, pre, x):
    h = P.r(_linear(x, W[pre + "ff.net.0.proj.weight"]))
    val, gate = h.chunk(2, dim=-1)  # diffusers order [value; gate]
    m = P.r(val * P.r(torch.nn.functional.silu(gate)))
    return P.r(_linear(m, W[pre + "ff.net.2.weight"]))


def refiner(P, W, cfg, x):
    eps = cfg.get("norm_eps", 1e-5)
    for i in range(cfg["num_refiner_layers"]):
        pre = f"token_refiner.refiner_blocks.{i}."
        x = P.r(x + attention(P, W, pre, rms_norm(P, x, W[pre + "norm1.weight"], eps), cfg, rope=None))
        x = P.r(x + ffn(P, W, pre, rms_norm(P, x, W[pre + "norm2.weight"], eps)))
    return rms_norm(P, x, W["token_refiner.final_norm.weight"], cfg.get("final_norm_eps", 1e-5))


def prepare_weights(weights, mode, device="cpu"):
    """fp32 storage on `device`; in bf16 mode non-island weights are forced to bf16 values."""
    out = {}
    for n, t in weights.items():
        t32 = t.to(device=device, dtype=F32)
        if mode == "bf16" and not is_fp32_island(n):
            t32 = t32.to(BF16).to(F32)
        out[n] = t32
    return out


def forward(weights, cfg, hidden_states, audio_hidden_states, encoder_hidden_states, timestep,
            timestep_indices, token_tags, position_ids, video_indices, audio_indices, text_indices,
            mode="bf16", record=None, device="cpu", rms_two_roundings=False, prepared=False):
    """DiT forward (§6).  Returns (sample [Nv, 96] fp32, audio_sample [Na, 32] fp32).

    `record`: optional dict filled with named fp32 intermediates: refiner_out, temb, blocks.{i}.norm1_out
    (modulated), blocks.{i}.attn_out (after out proj, before gate), blocks.{i}.ff_out (before gate),
    blocks.{i}.out (residual stream after the block), final_norm_out (modulated, before the heads).
    """
    P = _P(mode, rms_two_roundings)
    if torch.device(device).type == "cuda":  # fp32 GEMMs must be real fp32 (not TF32) for the contract
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    W = weights if prepared else prepare_weights(weights, mode, device)
    dev = device
    hid = cfg["hidden_size"]
    eps = cfg.get("norm_eps", 1e-5)
    feps = cfg.get("final_norm_eps", 1e-5)

    def rec(name, t):
        if record is not None:
            record[name] = t.detach().to("cpu", F32).clone()

    ti = timestep_indices.to(dev, torch.int64)
    tags = token_tags.to(dev, torch.int64)
    vid = video_indices.to(dev, torch.int64)
    aid = audio_indices.to(dev, torch.int64)
    tid = text_indices.to(dev, torch.int64)
    S = position_ids.shape[0]

    # RoPE tables (§5.3): fp32 math, cast to the activation dtype before use.
    inv_freq = rope_inv_freq(cfg["rope_freq_dim"], cfg.get("rope_theta", 10000.0), dev)
    cos, sin = rope_tables(position_ids.to(dev, torch.float64), inv_freq)
    cos, sin = P.r(cos), P.r(sin)
    assert cos.shape[-1] <= cfg["attention_head_dim"], "6*rope_freq_dim must be <= head_dim"

    # 1. embeddings
    ev = P.r(_linear(hidden_states.to(dev, F32), W["proj_in.weight"], W["proj_in.bias"]))
    ea = P.r(_linear(audio_hidden_states.to(dev, F32), W["audio_proj_in.weight"], W["audio_proj_in.bias"]))
    c = P.r(encoder_hidden_states.to(dev, F32))
    et = P.r(_linear(c, W["context_embedder.weight"], W["context_embedder.bias"]))
    et = refiner(P, W, cfg, et)
    rec("refiner_out", et)
    H = torch.zeros(S, hid, dtype=F32, device=dev)
    H[tid] = et
    H[vid] = ev
    H[aid] = ea

    # 2. time embedding (fp32), SiLU in fp32 then one rounding for all AdaLN GEMMs
    temb = time_embedding(W, cfg, timestep.to(dev))
    rec("temb", temb)
    s = P.r(torch.nn.functional.silu(temb))
    M = temb.shape[0]
    rows = ti * MODALITIES + tags

    # 3. blocks
    for i in range(cfg["num_layers"]):
        pre = f"transformer_blocks.{i}."
        mod = P.r(_linear(s, W[pre + "adaln_proj.linear.weight"], W[pre + "adaln_proj.linear.bias"]))
        mod = mod.reshape(M * MODALITIES, 6 * hid)
        sh1, sc1, g1, sh2, sc2, g2 = [m.index_select(0, rows) for m in mod.chunk(6, dim=-1)]
        x1 = modulate(P, rms_norm(P, H, W[pre + "norm1.weight"], eps), sh1, sc1)
        rec(f"blocks.{i}.norm1_out", x1)
        a = attention(P, W, pre, x1, cfg, rope=(cos, sin))
        rec(f"blocks.{i}.attn_out", a)
        H = P.r(H + P.r(g1 * a))
        x2 = modulate(P, rms_norm(P, H, W[pre + "norm2.weight"], eps), sh2, sc2)
        f = ffn(P, W, pre, x2)
        rec(f"blocks.{i}.ff_out", f)
        H = P.r(H + P.r(g2 * f))
        rec(f"blocks.{i}.out", H)

    # 4. output
    fin = P.r(_linear(s, W["norm_out.linear.weight"], W["norm_out.linear.bias"]))
    shift, scale = fin.chunk(2, dim=-1)  # shift FIRST
    y = modulate(P, rms_norm(P, H, W["norm_out.norm.weight"], feps),
                 shift.index_select(0, ti), scale.index_select(0, ti))
    rec("final_norm_out", y)
    sample = _linear(y, W["proj_out.weight"], W["proj_out.bias"]).index_select(0, vid)
    audio_sample = _linear(y, W["audio_proj_out.weight"], W["audio_proj_out.bias"]).index_select(0, aid)
    return sample, audio_sample


# ---------------------------------------------------------------------------------------------------
# original <-> diffusers layout (§2.3)
# ---------------------------------------------------------------------------------------------------
CONFIG_RENAMES = {  # diffusers -> original
    "num_refiner_layers": "token_refiner_num_layers",
    "ffn_dim": "ffn_hidden_size",
    "in_channels": "latents_dim",
    "audio_in_channels": "audio_latents_dim",
    "freq_dim": "timestep_input_dim",
    "time_embed_hidden_dim": "time_embed_hidden_size",
    "rope_freq_dim": "rope_inv_freq_len",
}
ORIGINAL_CONFIG_KEYS = ("hidden_size", "num_layers", "token_refiner_num_layers", "num_attention_heads",
                        "attention_head_dim", "ffn_hidden_size", "latents_dim", "audio_latents_dim",
                        "patch_size", "text_dim", "timestep_input_dim", "time_embed_hidden_size",
                        "time_embed_dim", "adaln_out_features", "final_adaln_out_features",
                        "rope_inv_freq_len", "norm_eps", "qk_norm_eps", "final_norm_eps")
_DIFFUSERS_CONFIG_KEYS = ("num_attention_heads", "attention_head_dim", "hidden_size", "num_layers",
                          "num_refiner_layers", "ffn_dim", "in_channels", "audio_in_channels", "patch_size",
                          "text_dim", "freq_dim", "time_embed_hidden_dim", "time_embed_dim", "rope_freq_dim",
                          "rope_theta", "norm_eps", "qk_norm_eps", "final_norm_eps")


def is_original_config(cfg):
    return "ffn_hidden_size" in cfg or "latents_dim" in cfg


def original_config_to_diffusers(ocfg):
    inv = {v: k for k, v in CONFIG_RENAMES.items()}
    cfg = {"_class_name": "MiniMaxH3Transformer3DModel"}
    for k in _DIFFUSERS_CONFIG_KEYS:
        src = CONFIG_RENAMES.get(k, k)
        if src in ocfg:
            cfg[k] = ocfg[src]
    cfg.setdefault("rope_theta", 10000.0)
    hid = cfg["hidden_size"]
    if "adaln_out_features" in ocfg and ocfg["adaln_out_features"] != 18 * hid:
        raise ValueError("adaln_out_features must be 6*3*hidden_size")
    if "final_adaln_out_features" in ocfg and ocfg["final_adaln_out_features"] != 2 * hid:
        raise ValueError("final_adaln_out_features must be 2*hidden_size")
    del inv
    return cfg


def diffusers_config_to_original(cfg):
    o = {"_class_name": "MiniMaxH3DiTModel"}
    for k in ORIGINAL_CONFIG_KEYS:
        if k == "adaln_out_features":
            o[k] = 18 * cfg["hidden_size"]
        elif k == "final_adaln_out_features":
            o[k] = 2 * cfg["hidden_size"]
        else:
            inv = {v: kk for kk, v in CONFIG_RENAMES.items()}
            o[k] = cfg[inv.get(k, k)]
    return o


_TOP_RENAMES = (  # original prefix -> diffusers prefix (whole-prefix match, never substring)
    ("video_patch_proj.", "proj_in."),
    ("audio_patch_proj.", "audio_proj_in."),
    ("condition_proj.", "context_embedder."),
    ("time_embedder.proj_in.", "time_embedder.linear_1."),
    ("time_embedder.proj_out.", "time_embedder.linear_2."),
    ("final_layer.norm.", "norm_out.norm."),
    ("final_layer.adaln_proj.linear.", "norm_out.linear."),
    ("final_layer.video_out.", "proj_out."),
    ("final_layer.audio_out.", "audio_proj_out."),
    ("token_refiner.final_norm.", "token_refiner.final_norm."),
)
_BLOCK_PREFIXES = (("token_refiner.blocks.", "token_refiner.refiner_blocks."), ("blocks.", "transformer_blocks."))
_BLOCK_RENAMES = {  # original in-block suffix -> diffusers (qkv_proj and fc1 are handled separately)
    "norm1.weight": "norm1.weight",
    "norm2.weight": "norm2.weight",
    "attn.q_norm.weight": "attn.norm_q.weight",
    "attn.k_norm.weight": "attn.norm_k.weight",
    "attn.out_proj.weight": "attn.to_out.0.weight",
    "mlp.fc2.weight": "ff.net.2.weight",
    "adaln_proj.linear.weight": "adaln_proj.linear.weight",
    "adaln_proj.linear.bias": "adaln_proj.linear.bias",
}


def _split_block(name, prefixes):
    """'blocks.3.attn.x' -> ('blocks.', '3', 'attn.x') for the first matching prefix, else None."""
    for p, q in prefixes:
        if name.startswith(p):
            m = re.match(r"(\d+)\.(.*)$", name[len(p):])
            if m:
                return p, q, m.group(1), m.group(2)
    return None


def original_to_diffusers(sd, cfg, qkv_interleaved=True):
    """Original (MiniMaxH3DiTModel) state dict -> diffusers names/layout (§2.3).

    qkv_proj rows per-head interleaved [h0:q,k,v, h1:q,k,v, ...] (official shards; pass
    qkv_interleaved=False for Comfy/GGUF-style [q_all;k_all;v_all]) -> to_q/to_k/to_v;
    mlp.fc1 [gate; value] -> ff.net.0.proj [value; gate]; rope.inv_freq dropped.  No transposes.
    `cfg` may be either config flavour.  Unknown names raise.
    """
    if is_original_config(cfg):
        cfg = original_config_to_diffusers(cfg)
    heads, hd = cfg["num_attention_heads"], cfg["attention_head_dim"]
    out = {}
    for name, t in sd.items():
        if name == "rope.inv_freq":
            continue
        blk = _split_block(name, _BLOCK_PREFIXES)
        if blk is not None:
            _, dpre, i, rest = blk
            p = f"{dpre}{i}."
            if rest == "attn.qkv_proj.weight":
                if qkv_interleaved:
                    g = t.reshape(heads, 3, hd, *t.shape[1:])
                    q, k, v = (g[:, j].reshape(heads * hd, *t.shape[1:]) for j in range(3))
                else:
                    q, k, v = t.split(heads * hd, dim=0)
                out[p + "attn.to_q.weight"] = q.contiguous()
                out[p + "attn.to_k.weight"] = k.contiguous()
                out[p + "attn.to_v.weight"] = v.contiguous()
            elif rest == "mlp.fc1.weight":
                gate, value = t.chunk(2, dim=0)
                out[p + "ff.net.0.proj.weight"] = torch.cat([value, gate], 0).contiguous()
            elif rest in _BLOCK_RENAMES:
                out[p + _BLOCK_RENAMES[rest]] = t
            else:
                raise KeyError(f"unknown original block tensor {name}")
            continue
        for a, b in _TOP_RENAMES:
            if name.startswith(a):
                out[b + name[len(a):]] = t
                break
        else:
            raise KeyError(f"unknown original tensor {name}")
    return out


def diffusers_to_original(sd, cfg):
    """Inverse of `original_to_diffusers` (interleaved QKV, [gate; value] fc1, + rope.inv_freq fp32)."""
    heads, hd = cfg["num_attention_heads"], cfg["attention_head_dim"]
    inv_blocks = tuple((b, a) for a, b in _BLOCK_PREFIXES)
    inv_block_renames = {v: k for k, v in _BLOCK_RENAMES.items()}
    out = {}
    for name, t in sd.items():
        blk = _split_block(name, inv_blocks)
        if blk is not None:
            _, opre, i, rest = blk
            p = f"{opre}{i}."
            dp = name[: len(name) - len(rest)]
            if rest in ("attn.to_k.weight", "attn.to_v.weight"):
                continue
            if rest == "attn.to_q.weight":
                q, k, v = sd[dp + "attn.to_q.weight"], sd[dp + "attn.to_k.weight"], sd[dp + "attn.to_v.weight"]
                g = torch.stack([x.reshape(heads, hd, *x.shape[1:]) for x in (q, k, v)], dim=1)
                out[p + "attn.qkv_proj.weight"] = g.reshape(3 * heads * hd, *q.shape[1:]).contiguous()
            elif rest == "ff.net.0.proj.weight":
                value, gate = t.chunk(2, dim=0)
                out[p + "mlp.fc1.weight"] = torch.cat([gate, value], 0).contiguous()
            elif rest in inv_block_renames:
                out[p + inv_block_renames[rest]] = t
            else:
                raise KeyError(f"unknown diffusers block tensor {name}")
            continue
        for a, b in _TOP_RENAMES:
            if name.startswith(b):
                out[a + name[len(b):]] = t
                break
        else:
            raise KeyError(f"unknown diffusers tensor {name}")
    out["rope.inv_freq"] = rope_inv_freq(cfg["rope_freq_dim"], cfg.get("rope_theta", 10000.0))
    return out


# ---------------------------------------------------------------------------------------------------
# loading helpers + CLI
# ---------------------------------------------------------------------------------------------------
INPUT_NAMES = ("hidden_states", "audio_hidden_states", "encoder_hidden_states", "timestep", "timestep_indices",
               "token_tags", "position_ids", "video_indices", "audio_indices", "text_indices")


def load_model_dir(path):
    """Folder with config.json + safetensors (diffusers or original layout) -> (diffusers weights, cfg)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import safetensors_io as sio
    with open(os.path.join(path, "config.json")) as f:
        cfg = json.load(f)
    sd, _ = sio.load(path)
    if is_original_config(cfg):
        sd = original_to_diffusers(sd, cfg)
        cfg = original_config_to_diffusers(cfg)
    return sd, cfg


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="weights folder (diffusers or original layout)")
    ap.add_argument("--inputs", required=True)
    ap.add_argument("--mode", choices=("fp32", "bf16"), default="bf16")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", help="write sample/audio_sample/intermediates here")
    ap.add_argument("--compare", help="golden outputs_*.safetensors to diff against")
    ap.add_argument("--rms-two-roundings", action="store_true")
    a = ap.parse_args()
    if a.device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    import safetensors_io as sio
    W, cfg = load_model_dir(a.model)
    inp, _ = sio.load(a.inputs)
    rec = {}
    v, au = forward(W, cfg, *[inp[n] for n in INPUT_NAMES], mode=a.mode, record=rec, device=a.device,
                    rms_two_roundings=a.rms_two_roundings)
    rec["sample"] = v.cpu()
    rec["audio_sample"] = au.cpu()
    if a.out:
        sio.save(a.out, rec, {"mode": a.mode})
    if a.compare:
        g, _ = sio.load(a.compare)
        worst = 0.0
        for n in sorted(g):
            d = (g[n].float() - rec[n].float()).abs().max().item()
            scale = g[n].float().abs().max().item()
            worst = max(worst, d)
            print(f"{n:28s} max|diff| {d:.3e}   max|golden| {scale:.3e}")
        print(f"worst max|diff| {worst:.3e}")


if __name__ == "__main__":
    main()
