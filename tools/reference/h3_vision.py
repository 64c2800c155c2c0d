"""Independent PyTorch reference of the H3 conditioner's Qwen3-VL vision tower, DeepStack and MRoPE positions.

Written from /work/shared/spec/h3-model.md §8.1/§8.2 and the semantics of transformers' Qwen3-VL modeling code
(read for understanding only). fp32 only. Needs torch (1.13 or 2.x).

Vision tower (weights `model.visual.*`, config = text_encoder/config.json's `vision_config`):
  x = pixel_rows @ W_patch^T + b          W_patch = Conv3d weight [hidden, C, T, P, P] flattened (kernel = stride)
  x = x + pos                              learned table [side², hidden] bilinearly interpolated to each image's
                                           (h, w) patch grid as transformers 5.x vision_utils does (bilinear,
                                           aligned corners): src = i·(side-1) / max(n-1, 1) (fp32), taps floor
                                           and floor+1 clipped, per-axis weights (1 - |src - floor - o|), taps
                                           00, 01, 10, 11 weighted h_a·w_b and summed from 0 in that order; rows
                                           in merge-window order, repeated per frame
  per block:  x += proj(attn(LN1(x)));  x += fc2(gelu_tanh(fc1(LN2(x))))      LayerNorm eps 1e-6
              attn: q, k, v = split(qkv(x)) per head; 2-D rotary: inv_j = 1/10000^(2j/(D/2)), j < D/4;
              angles [row·inv, col·inv], duplicated → cos/sin over D, rotate-half; softmax(q k^T/√D) v within
              each frame of each image (non-causal)
              after block k in deepstack_visual_indexes: deepstack_j = merger_j(x) with postshuffle norm
  merger (main): fc2(gelu_erf(fc1(view(LN(x), [N/4, 4·hidden]))))
  merger (deepstack): fc2(gelu_erf(fc1(LN(view(x, [N/4, 4·hidden])))))
Row order of the patch rows (the Qwen2-VL processor): per image and frame, merge windows in raster order, the
m×m patches of a window in raster order; columns (channel, temporal, py, px).

Video processor (transformers' Qwen3VLVideoProcessor, do_sample_frames=False, read for understanding only):
video_smart_resize over the clip (t̄·h̄·w̄ against min/max pixels, β from T·h·w, sides < factor scaled up first,
fewer than temporal_patch frames rejected); frames normalised like images; the frame count padded to a multiple of
temporal_patch with the last frame; rows (t, h/m, w/m, m, m) × columns (channel, temporal, py, px). The tower
runs on a video grid (t, h, w) as on t frames: attention within each frame, positions and rotary repeated per
frame. Resizing is not reproduced here (torch 1.13 has no uint8 antialiased bicubic): video_patchify asserts the
frames keep their size; make_video_processor_goldens.py checks the resize against transformers itself.

ref2va presentation (diffusers build_ref2va_presentation): per reference "<Audio j>: " when it has audio, an
image "<Picture i>: " + image block, a video "<Video k>: " + per merged frame pair f"<{ts:.1f} seconds>" + a
<|video_pad|> block; then the prompt; every label tokenized on its own. Positions: rope_index (transformers 5.x
get_rope_index over mm_token_type_ids: runs of text / image / video tokens, video grids split per frame).

Language stack with vision (h3_text.forward with positions/vision): the vision embeddings replace the
<|image_pad|> / <|video_pad|> embedding rows (image features fill the image rows, video features the video rows,
DeepStack features joined by position); after decoder layer j < len(deepstack) the rows get + deepstack_j; RoPE angle for
frequency j uses the h position when j%3==1 and j < 3·sec[1], w when j%3==2 and j < 3·sec[2], else t
(interleaved MRoPE); positions from get_rope_index (mrope_positions below).
"""
import math

import torch

V = "model.visual."


def _ln(x, w, b, eps=1e-6):
    mu = x.mean(-1, keepdim=True)
    var = (x - mu).pow(2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * w + b


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


def gelu_erf(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def merge_order(h, w, m):
    """(row, col) of every patch in merge-window order."""
    rows, cols = [], []
    for bh in range(h // m):
        for bw in range(w // m):
            for ih in range(m):
                for iw in range(m):
                    rows.append(bh * m + ih)
                    cols.append(bw * m + iw)
    return torch.tensor(rows), torch.tensor(cols)


def _interp_axis(n, side):
    """transformers 5.x _interpolation_axis_taps_weights(mode="bilinear", align_corners=True) for n positions."""
    index = torch.arange(n).to(torch.float32)
    src = index * (side - 1) / torch.clamp(torch.full((n,), n) - 1, min=1)
    floor = torch.floor(src)
    offsets = torch.arange(0, 2)
    taps = (floor.long()[:, None] + offsets).clamp(0, side - 1)
    weights = (1 - (src[:, None] - floor[:, None] - offsets).abs()).clamp(min=0)
    return taps, weights


def pos_embedding(table, grids, m):
    side = int(round(math.sqrt(table.shape[0])))
    out = []
    for t, h, w in grids:
        ht, hw = _interp_axis(h, side)
        wt, ww = _interp_axis(w, side)
        r, c = merge_order(h, w, m)
        idx = (ht[r][:, :, None] * side + wt[c][:, None, :]).reshape(-1, 4)
        wts = (hw[r][:, :, None] * ww[c][:, None, :]).reshape(-1, 4)
        pe = (table[idx] * wts[:, :, None]).sum(1)
        out.append(pe.repeat(t, 1))
    return torch.cat(out)


def rotary(grids, head_dim, m):
    dim = head_dim // 2
    inv = 1.0 / (10000.0 ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    rows, cols = [], []
    for t, h, w in grids:
        r, c = merge_order(h, w, m)
        rows.append(r.repeat(t))
        cols.append(c.repeat(t))
    r = torch.cat(rows).float()
    c = torch.cat(cols).float()
    freqs = torch.cat([r[:, None] * inv[None], c[:, None] * inv[None]], dim=-1)
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos(), emb.sin()


def _rope(x, cos, sin):
    half = x.shape[-1] // 2
    rot = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos[:, None, :] + rot * sin[:, None, :]


def merger(W, p, x, unit, postshuffle):
    n, hs = x.shape
    if postshuffle:
        x = _ln(x.reshape(n // unit, unit * hs), W[p + "norm.weight"], W[p + "norm.bias"])
    else:
        x = _ln(x, W[p + "norm.weight"], W[p + "norm.bias"]).reshape(n // unit, unit * hs)
    x = gelu_erf(x @ W[p + "linear_fc1.weight"].t() + W[p + "linear_fc1.bias"])
    return x @ W[p + "linear_fc2.weight"].t() + W[p + "linear_fc2.bias"]


def vision_forward(weights, vcfg, pixel_rows, grids, record=None):
    """pixel_rows [N, C·T·P·P], grids [(t, h, w)] in patches → (embeds [N/4, out], [deepstack_j])."""
    W = {k: v.to(torch.float32) for k, v in weights.items() if k.startswith(V)}
    hs, nh = vcfg["hidden_size"], vcfg["num_heads"]
    D = hs // nh
    m = vcfg["spatial_merge_size"]
    unit = m * m
    x = pixel_rows.to(torch.float32) @ W[V + "patch_embed.proj.weight"].reshape(hs, -1).t() + W[
        V + "patch_embed.proj.bias"]
    x = x + pos_embedding(W[V + "pos_embed.weight"], grids, m)
    cos, sin = rotary(grids, D, m)
    seqs = []
    r = 0
    for t, h, w in grids:
        for _ in range(t):
            seqs.append((r, r + h * w))
            r += h * w
    N = x.shape[0]
    ds = []
    for i in range(vcfg["depth"]):
        p = f"{V}blocks.{i}."
        y = _ln(x, W[p + "norm1.weight"], W[p + "norm1.bias"])
        qkv = (y @ W[p + "attn.qkv.weight"].t() + W[p + "attn.qkv.bias"]).reshape(N, 3, nh, D)
        q, k, v = _rope(qkv[:, 0], cos, sin), _rope(qkv[:, 1], cos, sin), qkv[:, 2]
        a = torch.empty(N, nh, D)
        for s0, s1 in seqs:
            s = torch.einsum("qhd,khd->hqk", q[s0:s1], k[s0:s1]) / math.sqrt(D)
            a[s0:s1] = torch.einsum("hqk,khd->qhd", s.softmax(-1), v[s0:s1])
        x = x + a.reshape(N, hs) @ W[p + "attn.proj.weight"].t() + W[p + "attn.proj.bias"]
        y = _ln(x, W[p + "norm2.weight"], W[p + "norm2.bias"])
        y = gelu_tanh(y @ W[p + "mlp.linear_fc1.weight"].t() + W[p + "mlp.linear_fc1.bias"])
        x = x + y @ W[p + "mlp.linear_fc2.weight"].t() + W[p + "mlp.linear_fc2.bias"]
        if record is not None:
            record[f"blocks.{i}.out"] = x.clone()
        if i in vcfg["deepstack_visual_indexes"]:
            j = vcfg["deepstack_visual_indexes"].index(i)
            ds.append(merger(W, f"{V}deepstack_merger_list.{j}.", x, unit, True))
    return merger(W, V + "merger.", x, unit, False), ds


def patchify(img_u8, patch, temporal, m):
    """HWC uint8 image (H, W multiples of patch·m) → processor rows [N, 3·T·P·P] f32, grid (1, H/P, W/P)."""
    x = (img_u8.to(torch.float32) - 127.5) / 127.5
    x = x.permute(2, 0, 1)[None].repeat(temporal, 1, 1, 1)  # [T, C, H, W]
    T, C, H, Wd = x.shape
    gh, gw = H // patch, Wd // patch
    x = x.reshape(1, T, C, gh // m, m, patch, gw // m, m, patch).permute(0, 3, 6, 4, 7, 2, 1, 5, 8)
    return x.reshape(gh * gw, C * T * patch * patch), (1, gh, gw)


def mrope_positions(ids, image_token_id, llm_grids):
    """get_rope_index for one sequence → LongTensor [3, L]."""
    ids = list(ids)
    parts, st, nxt = [], 0, 0
    for t, h, w in llm_grids:
        ed = ids.index(image_token_id, st)
        n = ed - st
        parts.append(torch.arange(n).view(1, -1).expand(3, -1) + nxt)
        s0 = nxt + n
        ti = torch.arange(t).view(-1, 1).expand(-1, h * w).reshape(-1)
        hi = torch.arange(h).view(1, -1, 1).expand(t, -1, w).reshape(-1)
        wi = torch.arange(w).view(1, 1, -1).expand(t, h, -1).reshape(-1)
        blk = torch.stack([ti, hi, wi]) + s0
        parts.append(blk)
        nxt = int(blk.max()) + 1
        st = ed + t * h * w
    if st < len(ids):
        parts.append(torch.arange(len(ids) - st).view(1, -1).expand(3, -1) + nxt)
    return torch.cat(parts, dim=1)


def rope_index(ids, image_token_id, video_token_id, image_grids, video_grids):
    """transformers 5.x get_rope_index for one sequence (mm_token_type_ids: image 1, video 2, else 0), grids in
    merged tokens → LongTensor [3, L]."""
    blocks = [(1, h, w) for t, h, w in video_grids for _ in range(t)]
    grids = {1: iter(image_grids), 2: iter(blocks)}
    types = [1 if i == image_token_id else 2 if i == video_token_id else 0 for i in ids]
    parts, cur, st = [], 0, 0
    while st < len(ids):
        ed = st
        while ed < len(ids) and types[ed] == types[st]:
            ed += 1
        if types[st] == 0:
            parts.append(torch.arange(ed - st).view(1, -1).expand(3, -1) + cur)
            cur += ed - st
        else:
            t, h, w = next(grids[types[st]])
            assert t * h * w == ed - st, (t, h, w, ed - st)
            ti = torch.arange(t).view(-1, 1, 1).expand(t, h, w).reshape(-1)
            hi = torch.arange(h).view(1, -1, 1).expand(t, h, w).reshape(-1)
            wi = torch.arange(w).view(1, 1, -1).expand(t, h, w).reshape(-1)
            parts.append(torch.stack([ti, hi, wi]) + cur)
            cur += max(h, w)
        st = ed
    assert next(grids[1], None) is None and next(grids[2], None) is None, "grids left over"
    return torch.cat(parts, dim=1)


def video_smart_resize(num_frames, height, width, temporal_factor, factor, min_pixels, max_pixels):
    """Qwen3VLVideoProcessor's smart_resize → (h̄, w̄)."""
    if num_frames < temporal_factor:
        raise ValueError(f"t:{num_frames} must be larger than temporal_factor:{temporal_factor}")
    if height < factor or width < factor:
        scale = max(factor / height, factor / width)
        height = int(height * scale)
        width = int(width * scale)
    if max(height, width) / min(height, width) > 200:
        raise ValueError("aspect ratio above 200")
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    t_bar = round(num_frames / temporal_factor) * temporal_factor
    if t_bar * h_bar * w_bar > max_pixels:
        beta = math.sqrt((num_frames * height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif t_bar * h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (num_frames * height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def video_max_pixels(num_frames, min_pixels, max_pixels, factor, cap_pixels_per_frame):
    """The max_pixels the video processor's resize uses (cap_pixels_per_frame: qwen-vl-utils' per-frame cap)."""
    if not cap_pixels_per_frame:
        return max_pixels
    per_frame = max(min(768 * factor * factor, max_pixels // num_frames), int(min_pixels * 1.05))
    return per_frame * num_frames


def video_patchify(frames_u8, patch, temporal, m, min_pixels, max_pixels):
    """[T, H, W, 3] uint8 frames (a size video_smart_resize keeps) → rows [N, 3·T·P·P] f32, grid (t, H/P, W/P)."""
    T, H, Wd, _ = frames_u8.shape
    assert video_smart_resize(T, H, Wd, temporal, patch * m, min_pixels, max_pixels) == (H, Wd), \
        "video_patchify does not resize"
    x = (frames_u8.to(torch.float32) - 127.5) / 127.5
    x = x.permute(0, 3, 1, 2)  # [T, C, H, W]
    pad = -T % temporal
    if pad:
        x = torch.cat([x, x[-1:].expand(pad, -1, -1, -1)])
    gt, gh, gw = x.shape[0] // temporal, H // patch, Wd // patch
    x = x.reshape(gt, temporal, 3, gh // m, m, patch, gw // m, m, patch).permute(0, 3, 6, 4, 7, 2, 1, 5, 8)
    return x.reshape(gt * gh * gw, 3 * temporal * patch * patch), (gt, gh, gw)


def block_timestamps(num_frames, fps=2.0, temporal=2):
    """diffusers sample_reference_video_frames' labels for `num_frames` 2 fps frames: pairs merged (the last
    frame repeated when odd), each labelled with the mean of its two timestamps."""
    ts = [i / fps for i in range(num_frames)]
    ts += [ts[-1]] * (-len(ts) % temporal)
    return [(ts[i] + ts[i + temporal - 1]) / 2 for i in range(0, len(ts), temporal)]


def ref2va_presentation(encode, prompt, refs, image_counts, video_block_counts, tok):
    """refs: [dict(kind, has_audio, timestamps)]; encode(str) → ids; tok: dict of vision_start, vision_end,
    image_pad, video_pad ids → (ids, tags)."""
    ids, tags = [], []

    def text(v):
        t = encode(v)
        ids.extend(t)
        tags.extend([1] * len(t))

    def block(pad, n):
        ids.extend([tok["vision_start"]] + [tok[pad]] * n + [tok["vision_end"]])
        tags.extend([0] * (n + 2))

    counts = {"image": 0, "video": 0, "audio": 0}
    for r in refs:
        if r["has_audio"]:
            counts["audio"] += 1
            text(f"<Audio {counts['audio']}>: ")
        if r["kind"] == "image":
            counts["image"] += 1
            text(f"<Picture {counts['image']}>: ")
            block("image_pad", image_counts[counts["image"] - 1])
        elif r["kind"] == "video":
            counts["video"] += 1
            text(f"<Video {counts['video']}>: ")
            for ts in r["timestamps"]:
                text(f"<{ts:.1f} seconds>")
                block("video_pad", video_block_counts[counts["video"] - 1])
    text(prompt)
    return ids, tags


def mrope_tables(positions, head_dim, theta, section):
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).to(torch.float32) / head_dim))
    freqs = positions.to(torch.float32)[:, :, None] * inv[None, None, :]  # [3, L, D/2]
    f = freqs[0].clone()
    for dim, off in ((1, 1), (2, 2)):
        idx = slice(off, section[dim] * 3, 3)
        f[..., idx] = freqs[dim, ..., idx]
    emb = torch.cat([f, f], dim=-1)
    return emb.cos(), emb.sin()


def random_vision_weights(vcfg, seed):
    """Random bf16 weights with official names (norm weights around 1)."""
    g = torch.Generator().manual_seed(seed)
    hs, F, o = vcfg["hidden_size"], vcfg["intermediate_size"], vcfg["out_hidden_size"]
    C, T, P, m = vcfg["in_channels"], vcfg["temporal_patch_size"], vcfg["patch_size"], vcfg["spatial_merge_size"]
    mh = hs * m * m

    def u(*shape, scale, offset=0.0):
        return (offset + (torch.rand(*shape, generator=g) * 2 - 1) * scale).to(torch.bfloat16)

    w = {V + "patch_embed.proj.weight": u(hs, C, T, P, P, scale=1 / math.sqrt(C * T * P * P)),
         V + "patch_embed.proj.bias": u(hs, scale=0.1),
         V + "pos_embed.weight": u(vcfg["num_position_embeddings"], hs, scale=0.5)}
    for i in range(vcfg["depth"]):
        p = f"{V}blocks.{i}."
        for n in ("norm1", "norm2"):
            w[p + n + ".weight"] = u(hs, scale=0.2, offset=1.0)
            w[p + n + ".bias"] = u(hs, scale=0.1)
        w[p + "attn.qkv.weight"] = u(3 * hs, hs, scale=1 / math.sqrt(hs))
        w[p + "attn.qkv.bias"] = u(3 * hs, scale=0.1)
        w[p + "attn.proj.weight"] = u(hs, hs, scale=1 / math.sqrt(hs))
        w[p + "attn.proj.bias"] = u(hs, scale=0.1)
        w[p + "mlp.linear_fc1.weight"] = u(F, hs, scale=1 / math.sqrt(hs))
        w[p + "mlp.linear_fc1.bias"] = u(F, scale=0.1)
        w[p + "mlp.linear_fc2.weight"] = u(hs, F, scale=1 / math.sqrt(F))
        w[p + "mlp.linear_fc2.bias"] = u(hs, scale=0.1)

    def merger(p, norm):
        w[p + "norm.weight"] = u(norm, scale=0.2, offset=1.0)
        w[p + "norm.bias"] = u(norm, scale=0.1)
        w[p + "linear_fc1.weight"] = u(mh, mh, scale=1 / math.sqrt(mh))
        w[p + "linear_fc1.bias"] = u(mh, scale=0.1)
        w[p + "linear_fc2.weight"] = u(o, mh, scale=1 / math.sqrt(mh))
        w[p + "linear_fc2.bias"] = u(o, scale=0.1)

    merger(V + "merger.", hs)
    for j in range(len(vcfg["deepstack_visual_indexes"])):
        merger(f"{V}deepstack_merger_list.{j}.", mh)
    return w
