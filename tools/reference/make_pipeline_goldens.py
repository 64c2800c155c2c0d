"""Goldens for the sampling pipeline (issue 4), written from /work/shared/spec/h3-model.md §3, §4, §5, §7, §15.

The diffusers modular pipeline (before_denoise.py, denoise.py, scheduling_minimax_h3.py) was read to understand
the reference's arithmetic (float64 numpy grids, torch float32 schedule ops, draw order); no code was copied.
The DiT is tools/reference/h3_dit.py (fp32 mode).  Runs on torch 1.13 CPU + numpy:

    cd /work/main && /usr/bin/python3 tools/reference/make_pipeline_goldens.py --out tests/data/pipeline

Outputs (deterministic; torch's CPU RNG on an x86-64 machine with AVX2, torch's default dispatch there):
  geometry.json         canvas / frame / latent / audio tables and requests that must be rejected
  layout_*.safetensors  positions f64 [S,3], tags, video/audio/text indices i64, row timesteps for two steps
  (schedule.safetensors: make_schedule_goldens.py)
  noise_scalar.safetensors  torch.randn under ATEN_CPU_CAPABILITY=default (no AVX2: libm Box-Muller)
  noise.safetensors     torch.randn from fresh generators (small/scalar path, vector path, tails) and the
                        request-order draws (condition, video [1,24,T,h,w], audio rows [2A,32])
  e2e_{t2va,fl2va}.safetensors  a full tiny denoise on tests/data/dit/A/diffusers in fp32
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import h3_dit  # noqa: E402
import safetensors_io as sio  # noqa: E402

F32, F64 = torch.float32, torch.float64
VIDEO_TAG, TEXT_TAG, AUDIO_TAG = 0, 1, 2


# ---- §4 geometry -----------------------------------------------------------------------------------------
def canvas_from_aspect(aw, ah):
    r = aw / ah
    if not 0.25 <= r <= 4:
        raise ValueError("aspect")
    w0, h0 = (768 * r, 768.0) if r >= 1 else (768.0, 768 / r)
    if w0 * h0 > 768 * 1344:
        s = math.sqrt(768 * 1344 / (w0 * h0))
        w0, h0 = w0 * s, h0 * s
    return max(32, round(w0 / 32) * 32), max(32, round(h0 / 32) * 32)  # Python round = half-even


def align_frames(f):
    n = max(0, math.ceil((f - 5) / 17))
    return 17 * n + 5


def latent_frames(f):
    return (f - 5) // 17 * 5 + 2


def audio_latents(f):
    return round(f / 24 * 40)


def geometry(width, height, frames):
    F = align_frames(frames)
    return dict(width=width, height=height, frames=F, T=latent_frames(F), h=height // 16, w=width // 16,
                A=audio_latents(F))


# ---- §5 layout ---------------------------------------------------------------------------------------------
def spatial_grid(d, sqrt_area):
    ratio = d / sqrt_area
    left = (1.0 - ratio) / 2.0
    return np.linspace(left, left + ratio, d // 2, endpoint=False) * 32


SPANS = (1, 4, 4, 4, 4)


def layout(text_tags, g, anchors):
    L, T, h, w, A = len(text_tags), g["T"], g["h"], g["w"], g["A"]
    rpf = (h // 2) * (w // 2)
    K = len(anchors)
    S = L + K * rpf + 2 * A + T * rpf
    c0, a0 = L, L + K * rpf
    v0 = a0 + 2 * A
    pos = torch.zeros(S, 3, dtype=F64)
    pos[:L, 0] = torch.arange(L, dtype=F64)
    sa = np.sqrt(h * w)
    hg = torch.from_numpy(spatial_grid(h, sa))
    wg = torch.from_numpy(spatial_grid(w, sa))
    fh, fw = torch.meshgrid(hg, wg, indexing="ij")
    frame = torch.stack([fh.reshape(-1), fw.reshape(-1)], -1)
    for k, anchor in enumerate(anchors):
        if anchor == "first":
            t = float(L)
        else:  # the last pixel frame; the reference sums the spans with numpy (pairwise)
            spans = np.array([5.0 / 3.0 * SPANS[j % 5] for j in range(T)], dtype=np.float64)
            t = float(L) + float(spans.sum()) - 5.0 / 3.0
        rows = slice(c0 + k * rpf, c0 + (k + 1) * rpf)
        pos[rows, 0] = t
        pos[rows, 1:] = frame
    pos[a0:v0, 0] = (float(L) + torch.arange(A, dtype=F64)).repeat(2)
    pos[a0:a0 + A, 2] = float(wg[0])
    pos[a0 + A:v0, 2] = float(wg[-1])
    spans = torch.tensor([5.0 / 3.0 * SPANS[j % 5] for j in range(T)], dtype=F64)
    ft = float(L) + torch.cat([torch.zeros(1, dtype=F64), spans[:-1].cumsum(0)])
    vp = torch.empty(T, rpf, 3, dtype=F64)
    vp[:, :, 0] = ft[:, None]
    vp[:, :, 1:] = frame[None]
    pos[v0:] = vp.reshape(-1, 3)
    video_idx = torch.cat([torch.arange(c0, a0), torch.arange(v0, S)])
    audio_idx = torch.arange(a0, v0)
    text_idx = torch.arange(L)
    tags = torch.empty(S, dtype=torch.long)
    tags[text_idx] = torch.tensor(text_tags, dtype=torch.long)
    tags[audio_idx] = AUDIO_TAG
    tags[video_idx] = VIDEO_TAG
    return dict(position_ids=pos, token_tags=tags, video_indices=video_idx, audio_indices=audio_idx,
                text_indices=text_idx, condition_rows=K * rpf)


def frame_grid(h, w):
    sa = np.sqrt(h * w)
    hg = torch.from_numpy(spatial_grid(h, sa))
    wg = torch.from_numpy(spatial_grid(w, sa))
    fh, fw = torch.meshgrid(hg, wg, indexing="ij")
    return torch.stack([fh.reshape(-1), fw.reshape(-1)], -1), wg


def frame_times(T, origin):
    spans = torch.tensor([5.0 / 3.0 * SPANS[j % 5] for j in range(T)], dtype=F64)
    return origin + torch.cat([torch.zeros(1, dtype=F64), spans[:-1].cumsum(0)])


def ref2va_layout(text_tags, g, refs):
    """§5.4: [text | reference blocks in request order | target audio | target video] on one rotary clock.
    refs: dicts kind image|video|audio with T, h, w (latents) and A (audio latents per channel, 0 = none)."""
    L, T, h, w, A = len(text_tags), g["T"], g["h"], g["w"], g["A"]
    ref_v = sum(r["T"] * (r["h"] // 2) * (r["w"] // 2) for r in refs if r["kind"] != "audio")
    ref_a = sum(2 * r["A"] for r in refs)
    S = L + ref_v + ref_a + 2 * A + T * (h // 2) * (w // 2)
    pos = torch.zeros(S, 3, dtype=F64)
    pos[:L, 0] = torch.arange(L, dtype=F64)
    tframe, twg = frame_grid(h, w)

    def audio(rows_start, n, origin, wg):
        pos[rows_start:rows_start + 2 * n, 0] = (origin + torch.arange(n, dtype=F64)).repeat(2)
        pos[rows_start:rows_start + n, 2] = float(wg[0])
        pos[rows_start + n:rows_start + 2 * n, 2] = float(wg[-1])

    vid, aud = [], []
    cur, tau = L, float(L)
    for r in refs:
        if r["kind"] == "image":
            fr, _ = frame_grid(r["h"], r["w"])
            n = fr.shape[0]
            pos[cur:cur + n, 0] = tau
            pos[cur:cur + n, 1:] = fr
            vid.append(torch.arange(cur, cur + n))
            cur += n
            tau += 1.0
        elif r["kind"] == "audio":
            audio(cur, r["A"], tau, twg)
            aud.append(torch.arange(cur, cur + 2 * r["A"]))
            cur += 2 * r["A"]
            tau += float(r["A"])
        else:
            fr, wg = frame_grid(r["h"], r["w"])
            audio(cur, r["A"], tau, wg)
            aud.append(torch.arange(cur, cur + 2 * r["A"]))
            cur += 2 * r["A"]
            n = r["T"] * fr.shape[0]
            pos[cur:cur + n, 0] = frame_times(r["T"], tau).repeat_interleave(fr.shape[0])
            pos[cur:cur + n, 1:] = fr.repeat(r["T"], 1)
            vid.append(torch.arange(cur, cur + n))
            cur += n
            tau += max(float(r["A"]), sum(5.0 / 3.0 * SPANS[j % 5] for j in range(r["T"])))
    a0, v0 = cur, cur + 2 * A
    audio(a0, A, tau, twg)
    pos[v0:, 0] = frame_times(T, tau).repeat_interleave(tframe.shape[0])
    pos[v0:, 1:] = tframe.repeat(T, 1)
    video_idx = torch.cat(vid + [torch.arange(v0, S)])
    audio_idx = torch.cat(aud + [torch.arange(a0, v0)])
    text_idx = torch.arange(L)
    tags = torch.empty(S, dtype=torch.long)
    tags[text_idx] = torch.tensor(text_tags, dtype=torch.long)
    tags[audio_idx] = AUDIO_TAG
    tags[video_idx] = VIDEO_TAG
    return dict(position_ids=pos, token_tags=tags, video_indices=video_idx, audio_indices=audio_idx,
                text_indices=text_idx, condition_rows=ref_v, condition_audio_rows=ref_a)


def row_timesteps(lay, t_v, t_a):
    S = lay["token_tags"].numel()
    row = torch.full((S,), t_v, dtype=F32)
    row[lay["video_indices"][:lay["condition_rows"]]] = max(t_v, 0.999)
    row[lay["audio_indices"]] = t_a
    row[lay["audio_indices"][:lay.get("condition_audio_rows", 0)]] = 1.0
    return torch.unique(row, sorted=True, return_inverse=True)


# ---- §7 schedule -------------------------------------------------------------------------------------------
def schedule(n, shift):
    base = torch.linspace(1.0, 0.0, n, dtype=F32)
    sig = shift * base / (1 + (shift - 1) * base)
    sig = torch.unique_consecutive(sig)
    return sig, 1.0 - sig[:-1]


def euler(x, v, t, sigma, sigma_next):
    """The reference's fp32 update: x0 from the timestep, ratio from the grid."""
    sig_t = 1 - t
    x0 = x + sig_t * v
    r = sigma_next / sigma
    return r * x + (1.0 - r) * x0


# ---- §3 noise ----------------------------------------------------------------------------------------------
def patchify(z):
    b, c, t, h, w = z.shape
    z = z.reshape(b, c, t, 1, h // 2, 2, w // 2, 2).permute(0, 2, 4, 6, 1, 3, 5, 7)
    return z.reshape(-1, c * 4).contiguous()


def unpatchify(rows, c, t, h, w):
    z = rows.reshape(1, t, h // 2, w // 2, c, 1, 2, 2).permute(0, 4, 1, 5, 2, 6, 3, 7)
    return z.reshape(1, c, t, h, w).contiguous()


def draw_request_noise(seed, g, keyframe_latents):
    gen = torch.Generator("cpu").manual_seed(seed)
    conds = []
    for z in keyframe_latents:
        eps = torch.randn(z.shape, generator=gen, dtype=F32)
        t = torch.tensor(0.999, dtype=F32)
        conds.append(patchify(t * z + (1.0 - t) * eps))
    video = torch.randn((1, 24, g["T"], g["h"], g["w"]), generator=gen, dtype=F32)
    audio_rows = torch.randn((2 * g["A"], 32), generator=gen, dtype=F32)
    return conds, video, audio_rows


# ---- end to end ----------------------------------------------------------------------------------------------
def denoise(W, cfg, text, tags, g, anchors, keyframe_latents, seed, steps, record_steps=None):
    lay = layout(tags, g, anchors)
    conds, video_noise, audio_rows = draw_request_noise(seed, g, keyframe_latents)
    video_rows = torch.cat(conds + [patchify(video_noise)]) if conds else patchify(video_noise)
    audio_noise = audio_rows.reshape(2, g["A"], 32).permute(0, 2, 1).contiguous()
    sv, tv = schedule(steps, 12.0)
    sa, ta = schedule(steps, 3.0)
    assert len(sv) == len(sa)
    K = lay["condition_rows"]
    x_v, x_a = video_rows.clone(), audio_rows.clone()
    for i in range(len(tv)):
        ts, idx = row_timesteps(lay, float(tv[i]), float(ta[i]))
        v, va = h3_dit.forward(W, cfg, x_v, x_a, text, ts, idx, lay["token_tags"], lay["position_ids"],
                               lay["video_indices"], lay["audio_indices"], lay["text_indices"], mode="fp32",
                               prepared=True)
        x_v[K:] = euler(x_v[K:], v[K:].float(), tv[i], sv[i], sv[i + 1])
        x_a = euler(x_a, va.float(), ta[i], sa[i], sa[i + 1])
    video_latents = unpatchify(x_v[K:], 24, g["T"], g["h"], g["w"])
    audio_latents = x_a.reshape(2, g["A"], 32).permute(0, 2, 1).contiguous()
    return dict(video_noise=video_noise, video_latents=video_latents, audio_noise=audio_noise,
                audio_latents=audio_latents)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/data/pipeline")
    ap.add_argument("--dit", default="tests/data/dit/A/diffusers")
    ap.add_argument("--layouts-only", action="store_true", help="write only the layout_*.safetensors goldens")
    ap.add_argument("--scalar-noise", help=argparse.SUPPRESS)  # internal: run under ATEN_CPU_CAPABILITY=default
    a = ap.parse_args()
    torch.set_num_threads(1)
    if a.scalar_noise:
        nz = {f"randn_seed{seed}_n{n}": torch.randn(n, generator=torch.Generator().manual_seed(seed), dtype=F32)
              for seed, n in [(0, 5), (42, 17), (7, 100), (3, 4099)]}
        sio.save(a.scalar_noise, nz)
        return
    os.makedirs(a.out, exist_ok=True)

    # geometry
    geo = {"aspects": [], "sizes": [], "frames": [], "rejects": []}
    for aw, ah in [(16, 9), (9, 16), (1, 1), (4, 3), (3, 4), (21, 9), (2, 1), (4, 1), (1, 4), (5, 4), (7, 3)]:
        w, h = canvas_from_aspect(aw, ah)
        geo["aspects"].append(dict(aw=aw, ah=ah, width=w, height=h))
    for w, h in [(1344, 768), (768, 768), (768, 1344), (64, 32)]:
        geo["sizes"].append(dict(width=w, height=h))
    for f in [96, 107, 108, 124, 125, 192, 243, 294, 345]:
        gg = geometry(64, 64, f)
        geo["frames"].append(dict(request=f, frames=gg["frames"], T=gg["T"], A=gg["A"]))
    geo["rejects"] = [
        dict(size=[1000, 768], field="width"), dict(size=[1344, 770], field="height"),
        dict(size=[2048, 256], field="size"), dict(aspect=[5, 1], field="aspect"),
        dict(aspect=[1, 5], field="aspect"), dict(frames=90, field="frames"), dict(frames=346, field="frames"),
        dict(seconds=3.5, field="seconds"), dict(seconds=15.1, field="seconds"),
    ]
    with open(os.path.join(a.out, "geometry.json"), "w") as f:
        json.dump(geo, f, indent=1)

    # layouts: t2va (plain text) and fl2va (vision rows tagged video) with first / last / both keyframes
    cases = {
        "t2va": ([1] * 6, geometry(128, 64, 107), []),
        "fl2va_first": ([1, 0, 0, 0, 1, 1, 1], geometry(96, 64, 345), ["first"]),
        "fl2va_last": ([1, 0, 0, 0, 1, 1, 1], geometry(96, 64, 345), ["last"]),
        "fl2va_both": ([1, 0, 0, 1, 0, 0, 1, 1], geometry(64, 96, 243), ["first", "last"]),
    }
    refs_mixed = [dict(kind="image", T=1, h=8, w=14, A=0), dict(kind="video", T=17, h=6, w=10, A=30),
                  dict(kind="audio", T=0, h=0, w=0, A=20), dict(kind="video", T=7, h=4, w=8, A=0),
                  dict(kind="video", T=2, h=4, w=4, A=70), dict(kind="image", T=1, h=12, w=6, A=0)]
    cases["ref2va_mixed"] = ([1, 1, 0, 0, 0, 1, 0, 0, 1, 1], geometry(96, 64, 124), refs_mixed)
    for name, (tags, g, anchors) in cases.items():
        ref2va = name.startswith("ref2va")
        lay = ref2va_layout(tags, g, anchors) if ref2va else layout(tags, g, anchors)
        sv, tv = schedule(5, 12.0)
        sa, ta = schedule(5, 3.0)
        out = {k: v for k, v in lay.items() if k not in ("condition_rows", "condition_audio_rows")}
        out["text_tags"] = torch.tensor(tags, dtype=torch.long)
        for step in (0, 2):
            ts, idx = row_timesteps(lay, float(tv[step]), float(ta[step]))
            out[f"step{step}_timesteps"] = ts
            out[f"step{step}_timestep_indices"] = idx
        meta = {k: str(v) for k, v in g.items()}
        if ref2va:
            meta["anchors"] = ""
            meta["references"] = ";".join(f"{r['kind']},{r['T']},{r['h']},{r['w']},{r['A']}" for r in anchors)
        else:
            meta["anchors"] = ",".join(anchors)
        sio.save(os.path.join(a.out, f"layout_{name}.safetensors"), out, meta)
    if a.layouts_only:
        return

    # schedules: tests/data/pipeline/schedule.safetensors comes from make_schedule_goldens.py (numpy, the torch
    # 2.x linspace); torch 1.13's vectorized linspace gives another grid from 16 points on.

    # noise
    nz = {}
    for seed, n in [(0, 1), (0, 5), (1, 15), (42, 16), (42, 17), (7, 100), (2**40 + 5, 64), (3, 4099)]:
        nz[f"randn_seed{seed}_n{n}"] = torch.randn(n, generator=torch.Generator().manual_seed(seed), dtype=F32)
    gq = geometry(64, 32, 107)
    kf = [torch.randn(1, 24, 1, gq["h"], gq["w"], generator=torch.Generator().manual_seed(9))]
    conds, video, audio_rows = draw_request_noise(1234, gq, kf)
    nz["request_condition_rows"] = conds[0]
    nz["request_keyframe_latents"] = kf[0]
    nz["request_video_noise"] = video
    nz["request_audio_rows"] = audio_rows
    sio.save(os.path.join(a.out, "noise.safetensors"), nz, {"seed": "1234", "width": "64", "height": "32",
                                                             "frames": "107"})

    # torch's scalar (non-AVX2) normal kernel, as on CPUs without AVX2
    import subprocess
    env = dict(os.environ, ATEN_CPU_CAPABILITY="default")
    subprocess.run([sys.executable, os.path.abspath(__file__), "--scalar-noise",
                    os.path.join(a.out, "noise_scalar.safetensors")], env=env, check=True)

    # end to end on the DiT golden model A (text_dim 48), fp32
    Wraw, cfg = h3_dit.load_model_dir(a.dit)
    W = h3_dit.prepare_weights(Wraw, "fp32")
    ge = geometry(64, 32, 107)
    gtext = torch.Generator().manual_seed(77)
    text = torch.randn(6, cfg["text_dim"], generator=gtext).to(torch.bfloat16).to(F32)
    r = denoise(W, cfg, text, [1] * 6, ge, [], [], seed=2024, steps=4)
    r["prompt_embeds"] = text
    sio.save(os.path.join(a.out, "e2e_t2va.safetensors"), r,
             {"seed": "2024", "steps": "4", "width": "64", "height": "32", "frames": "107"})
    tags = [1, 0, 0, 1, 1, 1]
    kfl = [torch.randn(1, 24, 1, ge["h"], ge["w"], generator=gtext) for _ in range(2)]
    r = denoise(W, cfg, text, tags, ge, ["first", "last"], kfl, seed=99, steps=5)
    r["prompt_embeds"] = text
    r["prompt_tags"] = torch.tensor(tags, dtype=torch.int32)
    r["keyframe_first"], r["keyframe_last"] = kfl
    del r["video_noise"], r["audio_noise"]
    sio.save(os.path.join(a.out, "e2e_fl2va.safetensors"), r,
             {"seed": "99", "steps": "5", "width": "64", "height": "32", "frames": "107"})
    total = sum(os.path.getsize(os.path.join(a.out, f)) for f in os.listdir(a.out))
    print(f"wrote {a.out} ({total} bytes)")


if __name__ == "__main__":
    main()
