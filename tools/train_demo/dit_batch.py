"""The H3 DiT forward (tools/reference/h3_dit.py) over a batch of packed sequences of different lengths, for
training: each sequence is padded at its tail to the batch's longest and the padding rows are masked out of
every attention as keys (what the original's cu_seqlens tail padding does). Built from h3_dit's own pieces
(rms_norm, modulate, RoPE tables and rotation, time embedding, the packed-row AdaLN table lookup); only the
attention and the row scatter are batched here. `check_against_reference` proves, on every run, that each
sequence's outputs equal h3_dit.forward on that sequence alone.

A sequence is a dict (what make_pipeline_goldens' layout / ref2va_layout / row_timesteps give, plus inputs):
    xv [Nv, 96] video rows (patchified)   xa [Na, 32] audio rows   c [L, text_dim] conditioner rows
    ts [M] unique row timesteps   ti [S] per-row index into ts   tags [S]   pos [S, 3] (f64)
    vid, aid, tid: the video, audio and text row indices
"""
import math

import torch
import torch.nn.functional as F

import demo_arch  # noqa: F401  (puts tools/reference on the path)
import h3_dit

MOD = h3_dit.MODALITIES


def _masked_attention(P, W, pre, x, cfg, key_mask, rope=None):
    """x [B, S, hidden]; key_mask [B, S] (True: a real row); rope (cos, sin) [B*S, 6F] or None."""
    heads, hd = cfg["num_attention_heads"], cfg["attention_head_dim"]
    B, S, _ = x.shape
    eps = cfg.get("qk_norm_eps", 1e-5)
    flat = x.reshape(B * S, -1)

    def proj(n):
        return P.r(h3_dit._linear(flat, W[pre + f"attn.{n}.weight"])).view(B * S, heads, hd)

    q = h3_dit.rms_norm(P, proj("to_q"), W[pre + "attn.norm_q.weight"], eps)
    k = h3_dit.rms_norm(P, proj("to_k"), W[pre + "attn.norm_k.weight"], eps)
    v = proj("to_v")
    if rope is not None:
        q = h3_dit.apply_rope(P, q, *rope)
        k = h3_dit.apply_rope(P, k, *rope)
    q, k, v = (t.view(B, S, heads, hd) for t in (q, k, v))
    if hasattr(F, "scaled_dot_product_attention"):  # torch 2: a fused kernel, the same softmax(qk^T/sqrt(d)) v
        o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                           attn_mask=key_mask[:, None, None, :]).transpose(1, 2)
    else:
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) * (1.0 / math.sqrt(hd))
        scores = scores.masked_fill(~key_mask[:, None, None, :], float("-inf"))
        o = torch.einsum("bhqk,bkhd->bqhd", torch.softmax(scores, dim=-1), v)
    o = P.r(o).reshape(B * S, heads * hd)
    return P.r(h3_dit._linear(o, W[pre + "attn.to_out.0.weight"])).view(B, S, -1)


def _refiner(P, W, cfg, x, mask):
    eps = cfg.get("norm_eps", 1e-5)
    for i in range(cfg["num_refiner_layers"]):
        pre = f"token_refiner.refiner_blocks.{i}."
        x = P.r(x + _masked_attention(P, W, pre, h3_dit.rms_norm(P, x, W[pre + "norm1.weight"], eps), cfg, mask))
        x = P.r(x + h3_dit.ffn(P, W, pre, h3_dit.rms_norm(P, x, W[pre + "norm2.weight"], eps)))
    return h3_dit.rms_norm(P, x, W["token_refiner.final_norm.weight"], cfg.get("final_norm_eps", 1e-5))


def forward(W, cfg, seqs, mode="fp32"):
    """-> (video velocity rows [sum Nv, 96], audio velocity rows [sum Na, 32]), each sequence's rows in turn.
    W: diffusers-named fp32 tensors on one device (the trainable leaves)."""
    P = h3_dit._P(mode)
    dev = W["proj_in.weight"].device
    hid = cfg["hidden_size"]
    B = len(seqs)
    S = max(s["tags"].numel() for s in seqs)
    Lmax = max(s["c"].shape[0] for s in seqs)
    ar = torch.arange(S, device=dev)
    mask = torch.stack([ar < s["tags"].numel() for s in seqs])  # [B, S]
    tmask = torch.stack([ar[:Lmax] < s["c"].shape[0] for s in seqs])  # [B, Lmax]
    off = [b * S for b in range(B)]
    idx_v = torch.cat([s["vid"] + o for s, o in zip(seqs, off)])
    idx_a = torch.cat([s["aid"] + o for s, o in zip(seqs, off)])
    idx_t = torch.cat([s["tid"] + o for s, o in zip(seqs, off)])

    # embeddings, scattered into the padded packed buffer
    ev = P.r(h3_dit._linear(torch.cat([s["xv"] for s in seqs]), W["proj_in.weight"], W["proj_in.bias"]))
    ea = P.r(h3_dit._linear(torch.cat([s["xa"] for s in seqs]), W["audio_proj_in.weight"], W["audio_proj_in.bias"]))
    c = torch.zeros(B, Lmax, seqs[0]["c"].shape[1], device=dev)
    for b, s in enumerate(seqs):
        c[b, :s["c"].shape[0]] = s["c"]
    et = P.r(h3_dit._linear(P.r(c), W["context_embedder.weight"], W["context_embedder.bias"]))
    et = _refiner(P, W, cfg, et, tmask)[tmask]  # the real text rows, sequence by sequence
    H = torch.zeros(B * S, hid, device=dev)
    H = H.index_put((idx_t,), et).index_put((idx_v,), ev).index_put((idx_a,), ea)

    # RoPE over every row (padding rows at position 0; they are never attended to)
    pos = torch.zeros(B * S, 3, dtype=torch.float64, device=dev)
    for s, o in zip(seqs, off):
        pos[o:o + s["tags"].numel()] = s["pos"]
    inv = h3_dit.rope_inv_freq(cfg["rope_freq_dim"], cfg.get("rope_theta", 10000.0), dev)
    cos, sin = h3_dit.rope_tables(pos, inv)
    rope = (P.r(cos), P.r(sin))

    # time embedding of every sequence's unique timesteps; per-row AdaLN rows into the joint table
    ts = torch.cat([s["ts"] for s in seqs])
    m_off = [0]
    for s in seqs:
        m_off.append(m_off[-1] + s["ts"].numel())
    temb = h3_dit.time_embedding(W, cfg, ts)
    st = P.r(F.silu(temb))
    M = ts.numel()
    rows = torch.zeros(B * S, dtype=torch.long, device=dev)
    trow = torch.zeros(B * S, dtype=torch.long, device=dev)
    for b, (s, o) in enumerate(zip(seqs, off)):
        n = s["tags"].numel()
        trow[o:o + n] = s["ti"] + m_off[b]
        rows[o:o + n] = trow[o:o + n] * MOD + s["tags"]

    eps, feps = cfg.get("norm_eps", 1e-5), cfg.get("final_norm_eps", 1e-5)
    for i in range(cfg["num_layers"]):
        pre = f"transformer_blocks.{i}."
        mod = P.r(h3_dit._linear(st, W[pre + "adaln_proj.linear.weight"], W[pre + "adaln_proj.linear.bias"]))
        mod = mod.reshape(M * MOD, 6 * hid).index_select(0, rows)
        sh1, sc1, g1, sh2, sc2, g2 = mod.chunk(6, dim=-1)
        x1 = h3_dit.modulate(P, h3_dit.rms_norm(P, H, W[pre + "norm1.weight"], eps), sh1, sc1)
        a = _masked_attention(P, W, pre, x1.view(B, S, hid), cfg, mask, rope).reshape(B * S, hid)
        H = P.r(H + P.r(g1 * a))
        x2 = h3_dit.modulate(P, h3_dit.rms_norm(P, H, W[pre + "norm2.weight"], eps), sh2, sc2)
        H = P.r(H + P.r(g2 * h3_dit.ffn(P, W, pre, x2)))

    fin = P.r(h3_dit._linear(st, W["norm_out.linear.weight"], W["norm_out.linear.bias"]))
    shift, scale = fin.chunk(2, dim=-1)
    y = h3_dit.modulate(P, h3_dit.rms_norm(P, H, W["norm_out.norm.weight"], feps),
                        shift.index_select(0, trow), scale.index_select(0, trow))
    video = h3_dit._linear(y.index_select(0, idx_v), W["proj_out.weight"], W["proj_out.bias"])
    audio = h3_dit._linear(y.index_select(0, idx_a), W["audio_proj_out.weight"], W["audio_proj_out.bias"])
    return video, audio


def check_against_reference(W, cfg, seqs, tol=2e-4):
    """Each sequence's rows of `forward(W, cfg, seqs)` equal h3_dit.forward on that sequence (fp32); raises
    otherwise. Returns the worst relative difference."""
    with torch.no_grad():
        v, a = forward(W, cfg, seqs)
        worst, pv, pa = 0.0, 0, 0
        for s in seqs:
            rv, ra = h3_dit.forward(W, cfg, s["xv"], s["xa"], s["c"], s["ts"], s["ti"], s["tags"], s["pos"],
                                    s["vid"], s["aid"], s["tid"], mode="fp32", device=v.device, prepared=True)
            for got, ref in ((v[pv:pv + rv.shape[0]], rv), (a[pa:pa + ra.shape[0]], ra)):
                d = ((got - ref).abs().max() / ref.abs().max().clamp_min(1e-6)).item()
                worst = max(worst, d)
            pv += rv.shape[0]
            pa += ra.shape[0]
    if not worst < tol:
        raise AssertionError(f"batched DiT forward differs from h3_dit.forward: relative {worst:.3e} >= {tol}")
    return worst
