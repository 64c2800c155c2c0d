"""PyTorch reference for the MiniMax-H3 VAEs, written from docs/spec (h3-model.md §3 step 4, §9.1–9.3, §10).

Functional (weights are a dict of tensors named like the official checkpoints), fp32, CPU. Used by
make_vae_goldens.py to produce the goldens the C++ tests compare against.

Video (`AutoencoderKLMiniMaxH3` decoder): de-normalize, post_quant_conv (1x1x1), ViT decoder over every latent
voxel (+ register tokens + one zero token), LayerNorm + proj_out, unpatchify; temporal clips of
tokens_chunk + token_overlap latents with pre-padding, cross-fade of the overlap frames; spatial tiles laid in
pixel space with min overlap, each blended with its unblended top and left neighbours.
Video encoder (`AutoencoderKLMiniMaxH3` encoder, §9.1): causal 3-D CNN (temporal pad 2 zero frames in front,
spatial reflect pad 1), per-frame GroupNorm + SiLU ResNet blocks, right/bottom-padded stride-2 downsamplers,
norm_out + SiLU + conv_out + quant_conv -> moments (mean | logvar); 17-frame clips, token_drop; spatial tiles
laid in pixel space, blended in latent space; the keyframe recipe (posterior sample with a generator seeded
42, fp16 rounding, per-channel normalization).
Audio (`AutoencoderKLMiniMaxH3Audio` decoder): de-normalize, dec_in_proj, BigVGAN (weight-norm folded),
anti-aliased SnakeBeta, conv_post, clamp.
Audio encoder (§10 "Encoder", for ref2va audio references): right-pad to the hop, DAC trunk (Snake with alpha in
linear space, residual units at dilations 1/3/9, strided convs k=2s pad ceil(s/2)), pre_block (causal attention
whose heads are averaged and whose head dim is adaptive-average-pooled, plus a LayerNorm'd projection, then a
GeGLU MLP behind two LayerNorms), mean_proj -> posterior mean; the ref2va rows (transpose, per-channel
normalization, channel-major reshape).
"""
import math

import torch
import torch.nn.functional as F

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


# ---------------------------------------------------------------------------------------------------------
# Video: geometry
# ---------------------------------------------------------------------------------------------------------
def split_tiles(length, tile, min_overlap, ratio):
    """Tile starts and overlaps over `length` pixels (spec §9.3)."""
    if tile >= length:
        return [0], [length], []
    n = math.ceil(length / tile)
    while tile * n - min_overlap * (n - 1) < length:
        n += 1
    overlaps = [min_overlap] * (n - 1)
    leftover = tile * n - sum(overlaps) - length
    for i in range(leftover // ratio):
        overlaps[i % (n - 1)] += ratio
    starts = [0]
    for i in range(n - 1):
        starts.append(starts[-1] + tile - overlaps[i])
    return starts, [tile] * n, overlaps


def temporal_geometry(clip_length, temporal_ratio, token_drop):
    pre_pad = (-clip_length) % temporal_ratio
    chunk = math.ceil(clip_length / temporal_ratio)
    token_overlap = (-token_drop) % chunk
    frame_overlap = max(token_overlap * temporal_ratio - pre_pad, 0)
    return pre_pad, chunk, token_overlap, frame_overlap


def clip_plan(num_latents, clip_length=17, temporal_ratio=4, token_drop=3):
    """The temporal decode plan: padded latent count, clips (start, length), trimmed frames, output frames."""
    pre_pad, chunk, token_overlap, frame_overlap = temporal_geometry(clip_length, temporal_ratio, token_drop)
    num_tokens = num_latents + token_drop
    pad_tokens = (-num_tokens) % chunk
    num_chunks = (num_tokens + pad_tokens) // chunk - int(token_drop > 0)
    clips = [(i * chunk, chunk + token_overlap) for i in range(num_chunks)]
    kept = chunk * temporal_ratio - pre_pad
    frames = num_chunks * kept + (frame_overlap if token_drop > 0 else 0)
    trim = 0
    if pad_tokens > 0:
        tail = clip_length % temporal_ratio
        before = num_latents  # latent count before the padding
        trim = sum(tail if tail and (before + k) % chunk == 0 else temporal_ratio for k in range(pad_tokens))
    return dict(pad_tokens=pad_tokens, num_chunks=num_chunks, clips=clips, frame_pre_padding=pre_pad,
                frame_overlap=frame_overlap, trim_frames=trim, frames=frames - trim)


# ---------------------------------------------------------------------------------------------------------
# Video: ViT decoder
# ---------------------------------------------------------------------------------------------------------
def rms_norm(x, weight, eps):
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return y * weight if weight is not None else y


def rope_tables(t, h, w, n_extra, head_dim, ratio, theta):
    rot = int(head_dim * ratio)
    inv_freq = 1.0 / theta ** torch.arange(0, 1, 6 / rot, dtype=torch.float32)
    axes = [2.0 * (torch.arange(0.5, n, dtype=torch.float32) / n) - 1.0 for n in (t, h, w)]
    pos = torch.stack(torch.meshgrid(*axes, indexing="ij"), dim=-1).reshape(-1, 3)
    pos = torch.cat([pos, torch.zeros(n_extra, 3)], dim=0)
    ang = 2.0 * math.pi * pos[:, :, None] * inv_freq[None, None, :]
    ang = ang.reshape(ang.shape[0], -1).repeat(1, 2)  # [S, rot]
    return ang.cos(), ang.sin()


def apply_rope(x, cos, sin):
    rot = cos.shape[-1]
    xr, xp = x[..., :rot], x[..., rot:]
    a, b = xr.chunk(2, dim=-1)
    rotated = torch.cat([-b, a], dim=-1)
    return torch.cat([xr * cos[:, None, :] + rotated * sin[:, None, :], xp], dim=-1)


def vit_decode(z, W, cfg):
    """z [24, t, h, w] de-normalized latents of one tile-clip -> pixels [3, t*pt, h*p, w*p]."""
    c, t, h, w = z.shape
    heads, hd = cfg["decoder_num_attention_heads"], cfg["decoder_attention_head_dim"]
    eps = cfg["decoder_norm_eps"]
    p, pt = cfg["_patch"], cfg["_patch_t"]
    nreg = cfg["decoder_num_register_tokens"]
    x = z.reshape(c, -1).t()  # tokens (t, y, x)
    x = x @ W["post_quant_conv.weight"].reshape(c, c).t() + W["post_quant_conv.bias"]
    x = x @ W["decoder.proj_in.weight"].t() + W["decoder.proj_in.bias"]
    n = x.shape[0]
    dim = x.shape[1]
    x = torch.cat([x, W["decoder.register_tokens"].reshape(nreg, dim), x.new_zeros(1, dim)], dim=0)
    cos, sin = rope_tables(t, h, w, nreg + 1, hd, cfg["decoder_rope_dim_ratio"], cfg["decoder_rope_theta"])
    cos, sin = cos.to(x.device), sin.to(x.device)
    for i in range(cfg["decoder_num_layers"]):
        pre = f"decoder.transformer_blocks.{i}."
        y = rms_norm(x, W[pre + "norm1.weight"], eps)
        q = (y @ W[pre + "attn.to_q.weight"].t() + W[pre + "attn.to_q.bias"]).reshape(-1, heads, hd)
        k = (y @ W[pre + "attn.to_k.weight"].t() + W[pre + "attn.to_k.bias"]).reshape(-1, heads, hd)
        v = (y @ W[pre + "attn.to_v.weight"].t() + W[pre + "attn.to_v.bias"]).reshape(-1, heads, hd)
        q = apply_rope(rms_norm(q, None, eps), cos, sin)
        k = apply_rope(rms_norm(k, None, eps), cos, sin)
        att = torch.softmax(torch.einsum("shd,thd->hst", q, k) / math.sqrt(hd), dim=-1)
        o = torch.einsum("hst,thd->shd", att, v).reshape(-1, heads * hd)
        o = o @ W[pre + "attn.to_out.0.weight"].t() + W[pre + "attn.to_out.0.bias"]
        x = x + o * W[pre + "scale1"]
        y = rms_norm(x, W[pre + "norm2.weight"], eps)
        f = y @ W[pre + "ff.net.0.proj.weight"].t() + W[pre + "ff.net.0.proj.bias"]
        val, gate = f.chunk(2, dim=-1)
        f = (val * F.silu(gate)) @ W[pre + "ff.net.2.weight"].t() + W[pre + "ff.net.2.bias"]
        x = x + f * W[pre + "scale2"]
    x = F.layer_norm(x, (dim,), W["decoder.norm_out.weight"], W["decoder.norm_out.bias"], eps)
    x = x @ W["decoder.proj_out.weight"].t() + W["decoder.proj_out.bias"]
    x = x[:n].reshape(t, h, w, 3, pt, p, p).permute(3, 0, 4, 1, 5, 2, 6)
    return x.reshape(3, t * pt, h * p, w * p)


def blend(a, b, extent, dim):
    extent = min(a.shape[dim], b.shape[dim], extent)
    if extent == 0:
        return b
    k = torch.arange(extent, dtype=torch.float32, device=a.device)
    shape = [1] * a.ndim
    shape[dim] = extent
    wa, wb = (1 - k / extent).view(shape), (k / extent).view(shape)
    out = a.narrow(dim, a.shape[dim] - extent, extent) * wa + b.narrow(dim, 0, extent) * wb
    if extent == b.shape[dim]:
        return out
    return torch.cat([out, b.narrow(dim, extent, b.shape[dim] - extent)], dim=dim)



def stitch_tiles(tiles, yo, xo):
    """Each tile blended with the unblended tile above (dim H), then the one to its left (dim W); overlaps
    cropped on the right / bottom; rows concatenated."""
    rows = []
    for i, row in enumerate(tiles):
        out = []
        for j, tl in enumerate(row):
            if i > 0:
                tl = blend(tiles[i - 1][j], tl, yo[i - 1], dim=-2)
            if j > 0:
                tl = blend(row[j - 1], tl, xo[j - 1], dim=-1)
            if i < len(tiles) - 1:
                tl = tl[..., : tl.shape[-2] - yo[i], :]
            if j < len(row) - 1:
                tl = tl[..., : tl.shape[-1] - xo[j]]
            out.append(tl)
        rows.append(torch.cat(out, dim=-1))
    return torch.cat(rows, dim=-2)

def decode_clip_tiled(z, W, cfg, tile, min_overlap):
    p = cfg["_patch"]
    H, Wd = z.shape[-2] * p, z.shape[-1] * p
    ys, yl, yo = split_tiles(H, tile, min_overlap, p)
    xs, xl, xo = split_tiles(Wd, tile, min_overlap, p)
    tiles = [[vit_decode(z[:, :, y // p:(y + ly) // p, x // p:(x + lx) // p], W, cfg) for x, lx in zip(xs, xl)]
             for y, ly in zip(ys, yl)]
    return stitch_tiles(tiles, yo, xo)


def decode_video(latents, W, cfg, tile=256, min_overlap=64):
    """latents [1, 24, T, h, w] normalized -> decoder sample [1, 3, F, H, W] (ImageNet space, unclamped)."""
    mean = torch.tensor(cfg["latents_mean"], dtype=torch.float32, device=latents.device).view(-1, 1, 1, 1)
    std = torch.tensor(cfg["latents_std"], dtype=torch.float32, device=latents.device).view(-1, 1, 1, 1)
    z = latents[0] * std + mean
    pt = cfg["_patch_t"]
    plan = clip_plan(z.shape[1], cfg["clip_length"], pt, cfg["token_drop"])
    pre_pad, chunk, tok_ov, frame_ov = temporal_geometry(cfg["clip_length"], pt, cfg["token_drop"])
    if plan["pad_tokens"]:
        z = torch.cat([z, z[:, -1:].repeat(1, plan["pad_tokens"], 1, 1)], dim=1)
    chunk_frames = chunk * pt
    pieces, overlap = [], None
    for start, length in plan["clips"]:
        clip = decode_clip_tiled(z[:, start:start + length], W, cfg, tile, min_overlap)
        for j in range(int(cfg["token_drop"] > 0) + 1):
            c = clip[:, j * chunk_frames:(j + 1) * chunk_frames][:, pre_pad:]
            if j == 0:
                if overlap is not None:
                    c = blend(overlap, c, frame_ov, dim=1)
                pieces.append(c)
            else:
                overlap = c
    if overlap is not None:
        pieces.append(overlap)
    out = torch.cat(pieces, dim=1)
    if plan["trim_frames"]:
        out = out[:, : out.shape[1] - plan["trim_frames"]]
    return out[None]


def to_pixels(sample):
    m = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1, 1)
    s = torch.tensor(IMAGENET_STD).view(1, 3, 1, 1, 1)
    return (sample * s + m).clamp(0, 1)


# ---------------------------------------------------------------------------------------------------------
# Video: causal 3-D CNN encoder (§9.1)
# ---------------------------------------------------------------------------------------------------------
def causal_conv3d(x, w, b, stride=(1, 1, 1), spatial_pad=1, temporal_pad=2, mode="reflect"):
    """Spatial padding (symmetric, `mode`), then `temporal_pad` zero frames in front, then an unpadded conv."""
    if spatial_pad > 0:
        x = F.pad(x, (spatial_pad,) * 4 + (0, 0), mode=mode)
    if temporal_pad > 0:
        x = F.pad(x, (0, 0, 0, 0, temporal_pad, 0))
    return F.conv3d(x, w, b, stride=stride)


def frame_group_norm(x, weight, bias, groups, eps):
    """GroupNorm with the time axis folded into the batch: statistics per (b, t, group)."""
    b, c, t, h, w = x.shape
    y = x.permute(0, 2, 1, 3, 4).reshape(b * t, c, h, w)
    y = F.group_norm(y, groups, weight, bias, eps)
    return y.reshape(b, t, c, h, w).permute(0, 2, 1, 3, 4).contiguous()


def encoder_forward(x, W, cfg):
    """x [B, 3, T, H, W] ImageNet-normalized pixels -> moments [B, 2*latent, T', H/16, W/16] (quant_conv applied)."""
    groups, eps, mode = cfg["norm_num_groups"], cfg["norm_eps"], cfg.get("spatial_padding_mode", "reflect")

    def conv(h, name, **kw):
        return causal_conv3d(h, W[name + ".weight"], W[name + ".bias"], mode=mode, **kw)

    def gn_silu(h, name):
        return F.silu(frame_group_norm(h, W[name + ".weight"], W[name + ".bias"], groups, eps))

    h = conv(x, "encoder.conv_in")
    for i, _ in enumerate(cfg["block_out_channels"]):
        for j in range(cfg["layers_per_block"]):
            pre = f"encoder.down_blocks.{i}.resnets.{j}."
            r = h
            h = conv(gn_silu(h, pre + "norm1"), pre + "conv1")
            h = conv(gn_silu(h, pre + "norm2"), pre + "conv2")
            if pre + "conv_shortcut.weight" in W:
                r = causal_conv3d(r, W[pre + "conv_shortcut.weight"], W[pre + "conv_shortcut.bias"],
                                  spatial_pad=0, temporal_pad=0)
            h = r + h
        st, ss = cfg["temporal_downsample_factors"][i], cfg["spatial_downsample_factors"][i]
        if st * ss > 1:
            if ss == 2:
                h = F.pad(h, (0, 1, 0, 1, 0, 0), mode=mode)
            h = conv(h, f"encoder.down_blocks.{i}.downsamplers.0.conv", stride=(st, ss, ss), spatial_pad=0)
    h = conv(gn_silu(h, "encoder.norm_out"), "encoder.conv_out")
    return causal_conv3d(h, W["quant_conv.weight"], W["quant_conv.bias"], spatial_pad=0, temporal_pad=0)


def encode_clip(x, W, cfg, tile=256, min_overlap=64, tiling=True):
    """One temporal clip [B, 3, T, H, W] -> moments; spatial tiles in pixel space blended in latent space."""
    if not tiling:
        return encoder_forward(x, W, cfg)
    ratio = cfg["_patch"]
    ys, yl, yo = split_tiles(x.shape[-2], tile, min_overlap, ratio)
    xs, xl, xo = split_tiles(x.shape[-1], tile, min_overlap, ratio)
    tiles = [[encoder_forward(x[..., y:y + ly, xx:xx + lx], W, cfg) for xx, lx in zip(xs, xl)]
             for y, ly in zip(ys, yl)]
    yo = [o // ratio for o in yo]
    xo = [o // ratio for o in xo]
    return stitch_tiles(tiles, yo, xo)


def encode_moments(x, W, cfg, tile=256, min_overlap=64, tiling=True):
    """x [B, 3, F, H, W] -> moments: one frame directly; else 17-frame clips (last frame repeated), token_drop."""
    clip = cfg["clip_length"]
    if x.shape[2] == 1:
        return encode_clip(x, W, cfg, tile, min_overlap, tiling)
    if x.shape[2] % clip:
        x = torch.cat([x, x[:, :, -1:].repeat(1, 1, (-x.shape[2]) % clip, 1, 1)], dim=2)
    m = torch.cat([encode_clip(x[:, :, i:i + clip], W, cfg, tile, min_overlap, tiling)
                   for i in range(0, x.shape[2], clip)], dim=2)
    if cfg["token_drop"] > 0:
        m = m[:, :, : m.shape[2] - cfg["token_drop"]]
    return m


def posterior(moments):
    """DiagonalGaussianDistribution: (mean, std) with logvar clamped to [-30, 20]."""
    mean, logvar = moments.chunk(2, dim=1)
    logvar = logvar.clamp(-30.0, 20.0)
    return mean, torch.exp(0.5 * logvar)


def normalize_pixels(rgb8):
    """u8 [F, H, W, 3] -> [1, 3, F, H, W] fp32: /255 then ImageNet mean/std."""
    m = torch.tensor(IMAGENET_MEAN, dtype=torch.float32).view(1, -1, 1, 1, 1)
    s = torch.tensor(IMAGENET_STD, dtype=torch.float32).view(1, -1, 1, 1, 1)
    x = rgb8.permute(3, 0, 1, 2)[None].to(torch.float32).div(255.0)
    return (x - m) / s


def encode_keyframe(rgb8, W, cfg, tile=256, min_overlap=64, seed=42):
    """u8 [H, W, 3] -> normalized conditioning latent [1, C, 1, h, w] (spec §3 step 4).

    The posterior is sampled with a CPU generator seeded `seed` (torch.randn over the mean's shape, fp32),
    rounded to fp16 and back, then normalized per channel with latents_mean / latents_std.
    """
    moments = encode_clip(normalize_pixels(rgb8[None]), W, cfg, tile, min_overlap)
    mean, std = posterior(moments)
    eps = torch.randn(mean.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float32)
    z = (mean + std * eps).to(torch.float16).float()
    lm = torch.tensor(cfg["latents_mean"], dtype=torch.float32).view(1, -1, 1, 1, 1)
    ls = torch.tensor(cfg["latents_std"], dtype=torch.float32).view(1, -1, 1, 1, 1)
    return (z - lm) / ls


# ---------------------------------------------------------------------------------------------------------
# Audio: BigVGAN
# ---------------------------------------------------------------------------------------------------------
def kaiser_sinc_filter(cutoff, half_width, kernel_size):
    half = kernel_size // 2
    att = 2.285 * (half - 1) * math.pi * (4 * half_width) + 7.95
    if att > 50.0:
        beta = 0.1102 * (att - 8.7)
    elif att >= 21.0:
        beta = 0.5842 * (att - 21) ** 0.4 + 0.07886 * (att - 21.0)
    else:
        beta = 0.0
    window = torch.kaiser_window(kernel_size, beta=beta, periodic=False)
    if kernel_size % 2 == 0:
        time = torch.arange(-half, half) + 0.5
    else:
        time = torch.arange(kernel_size) - half
    f = 2 * cutoff * window * torch.sinc(2 * cutoff * time)
    return f / f.sum()


def snake_beta(x, log_alpha, log_beta):
    a = torch.exp(log_alpha).view(1, -1, 1)
    b = torch.exp(log_beta).view(1, -1, 1)
    return x + (b + 1e-9).reciprocal() * torch.sin(a * x).pow(2)


def alias_free_snake_beta(x, log_alpha, log_beta, ratio=2, kernel=12):
    c = x.shape[1]
    f = kaiser_sinc_filter(0.5 / ratio, 0.6 / ratio, kernel).to(x.device).view(1, 1, -1).expand(c, 1, kernel)
    pad = kernel // ratio - 1
    pl = pad * ratio + (kernel - ratio) // 2
    pr = pad * ratio + (kernel - ratio + 1) // 2
    u = ratio * F.conv_transpose1d(F.pad(x, (pad, pad), mode="replicate"), f, stride=ratio, groups=c)
    u = u[..., pl:-pr]
    s = snake_beta(u, log_alpha, log_beta)
    s = F.pad(s, (kernel // 2 - 1, kernel // 2), mode="replicate")
    return F.conv1d(s, f, stride=ratio, groups=c)


def fold_weight_norm(g, v):
    norm = v.reshape(v.shape[0], -1).norm(dim=1).view(-1, *([1] * (v.ndim - 1)))
    return g * v / norm


def wn(W, name):
    return fold_weight_norm(W[name + ".weight_g"], W[name + ".weight_v"])


def decode_audio(latents, W, cfg):
    """latents [2, 32, A] normalized -> waveform [2, 1, A * prod(rates)] in [-1, 1]."""
    mean = torch.tensor(cfg["latents_mean"], dtype=torch.float32, device=latents.device).view(1, -1, 1)
    std = torch.tensor(cfg["latents_std"], dtype=torch.float32, device=latents.device).view(1, -1, 1)
    x = latents * std + mean
    x = F.conv1d(x, W["dec_in_proj.weight"], W["dec_in_proj.bias"])
    x = F.conv1d(x, wn(W, "decoder.conv_pre"), W["decoder.conv_pre.bias"], padding=3)
    ks, ds = cfg["resblock_kernel_sizes"], cfg["resblock_dilation_sizes"]
    for i, (rate, kernel) in enumerate(zip(cfg["decoder_rates"], cfg["decoder_kernel_sizes"])):
        name = f"decoder.ups.{i}.0"
        x = F.conv_transpose1d(x, wn(W, name), W[name + ".bias"], stride=rate, padding=(kernel - rate) // 2)
        acc = None
        for j, (k, dil) in enumerate(zip(ks, ds)):
            pre = f"decoder.resblocks.{i * len(ks) + j}."
            h = x
            for m, d in enumerate(dil):
                a1, a2 = pre + f"activations.{2 * m}.act.", pre + f"activations.{2 * m + 1}.act."
                r = alias_free_snake_beta(h, W[a1 + "alpha"], W[a1 + "beta"])
                r = F.conv1d(r, wn(W, pre + f"convs1.{m}"), W[pre + f"convs1.{m}.bias"], dilation=d,
                             padding=(k * d - d) // 2)
                r = alias_free_snake_beta(r, W[a2 + "alpha"], W[a2 + "beta"])
                r = F.conv1d(r, wn(W, pre + f"convs2.{m}"), W[pre + f"convs2.{m}.bias"], padding=(k - 1) // 2)
                h = h + r
            acc = h if acc is None else acc + h
        x = acc / len(ks)
    x = alias_free_snake_beta(x, W["decoder.activation_post.act.alpha"], W["decoder.activation_post.act.beta"])
    x = F.conv1d(x, wn(W, "decoder.conv_post"), None, padding=3)
    return x.clamp(-1.0, 1.0)


# ---------------------------------------------------------------------------------------------------------
# Audio: DAC encoder + pre_block (posterior mean)
# ---------------------------------------------------------------------------------------------------------
def snake(x, alpha):
    """DAC Snake, alpha [1, C, 1] in linear space: x + sin(alpha x)^2 / (alpha + 1e-9)."""
    return x + (alpha + 1e-9).reciprocal() * torch.sin(alpha * x).pow(2)


def dac_encoder(x, W, cfg):
    """x [B, 1, L] (L a multiple of prod(encoder_rates)) -> [B, latent_dim, L / hop]."""
    x = F.conv1d(x, wn(W, "encoder.block.0"), W["encoder.block.0.bias"], padding=3)
    rates = cfg["encoder_rates"]
    for i, s in enumerate(rates):
        pre = f"encoder.block.{i + 1}.block."
        for u, d in enumerate((1, 3, 9)):
            up = pre + f"{u}.block."
            r = snake(x, W[up + "0.alpha"])
            r = F.conv1d(r, wn(W, up + "1"), W[up + "1.bias"], dilation=d, padding=3 * d)
            r = snake(r, W[up + "2.alpha"])
            r = F.conv1d(r, wn(W, up + "3"), W[up + "3.bias"])
            crop = (x.shape[-1] - r.shape[-1]) // 2
            if crop > 0:
                x = x[..., crop:-crop]
            x = x + r
        x = snake(x, W[pre + "3.alpha"])
        x = F.conv1d(x, wn(W, pre + "4"), W[pre + "4.bias"], stride=s, padding=math.ceil(s / 2))
    n = len(rates)
    x = snake(x, W[f"encoder.block.{n + 1}.alpha"])
    return F.conv1d(x, wn(W, f"encoder.block.{n + 2}"), W[f"encoder.block.{n + 2}.bias"], padding=1)


def _ln(x, W, name):
    return F.layer_norm(x, (x.shape[-1],), W[name + ".weight"], W[name + ".bias"], 1e-5)


def causal_attention_mean_heads(x, W, heads, out_dim):
    """x [B, A, D] -> [B, A, out_dim]: fused qkv (+ q / zero k / v biases), causal softmax attention per head,
    the mean over the heads, adaptive average pooling of the head dim to out_dim, then attn.proj."""
    b, a, d = x.shape
    hd = d // heads
    bias = torch.cat([W["pre_block.attn.q_bias"], W["pre_block.attn.zero_k_bias"], W["pre_block.attn.v_bias"]])
    qkv = F.linear(x, W["pre_block.attn.qkv.weight"], bias).reshape(b, a, 3, heads, hd).permute(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]  # [B, H, A, hd]
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
    scores = scores.masked_fill(torch.ones(a, a, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
    o = (scores.softmax(dim=-1) @ v).transpose(1, 2)  # [B, A, H, hd]
    o = o.mean(dim=2)
    o = F.adaptive_avg_pool1d(o, out_dim)
    return F.linear(o, W["pre_block.attn.proj.weight"], W["pre_block.attn.proj.bias"])


def audio_pre_block(x, W, cfg):
    """x [B, A, latent_dim] -> [B, A, latent_channels]."""
    out_dim = cfg["latent_channels"]
    y = F.linear(_ln(x, W, "pre_block.norm3"), W["pre_block.proj.weight"], W["pre_block.proj.bias"])
    y = y + causal_attention_mean_heads(_ln(x, W, "pre_block.norm1"), W, cfg["num_attention_heads"], out_dim)
    m = _ln(_ln(y, W, "pre_block.norm2"), W, "pre_block.mlp.norm")
    m = F.gelu(F.linear(m, W["pre_block.mlp.w0.weight"], W["pre_block.mlp.w0.bias"]), approximate="tanh") * F.linear(
        m, W["pre_block.mlp.w1.weight"], W["pre_block.mlp.w1.bias"])
    return y + F.linear(m, W["pre_block.mlp.w2.weight"], W["pre_block.mlp.w2.bias"])


def encode_audio_mean(wave, W, cfg):
    """wave [B, N] (each row a mono item) -> posterior mean [B, latent_channels, ceil(N / hop)]."""
    hop = math.prod(cfg["encoder_rates"])
    n = wave.shape[-1]
    x = F.pad(wave[:, None], (0, math.ceil(n / hop) * hop - n))
    h = dac_encoder(x, W, cfg)
    y = audio_pre_block(h.transpose(1, 2), W, cfg).transpose(1, 2)
    return F.conv1d(y, W["mean_proj.weight"], W["mean_proj.bias"])


def reference_audio_rows(stereo, W, cfg):
    """stereo [2, N] -> normalized channel-major rows [2 * A, latent_channels] (ref2va's clean audio rows)."""
    z = encode_audio_mean(stereo, W, cfg).float().transpose(1, 2)  # [2, A, C]
    mean = torch.tensor(cfg["latents_mean"]).view(1, 1, -1)
    std = torch.tensor(cfg["latents_std"]).view(1, 1, -1)
    return ((z - mean) / std).reshape(-1, cfg["latent_channels"])
