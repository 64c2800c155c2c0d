"""The DiT's training latents: procedural clips encoded by the trained VAEs, exactly as the engine encodes
and normalizes them (tools/reference/vae_reference.py):

  video.<scene>.<seed>      f32 [24, T, h, w]  the clip's posterior mean, normalized (z - mean) / std
  audio.<scene>.<seed>      f32 [2, 32, A]     each channel's posterior mean, normalized
  first.<scene>.<seed>      f32 [24, 1, h, w]  the first frame as an fl2va keyframe (sampled with seed 42,
                                               fp16-rounded, normalized: the engine's keyframe recipe)
  reference.<scene>         f32 [24, 1, h, w]  reference_image(scene) encoded the same way (ref2va)

    nice -n 10 /usr/bin/python3 tools/train_demo/latents.py --work build/train_demo --scenes 96 --seeds 8 \\
        --fl2va-seeds 2
"""
import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import demo_arch  # noqa: E402
import demo_data as dd  # noqa: E402
import safetensors_io as sio  # noqa: E402
import train_common as tc  # noqa: E402
from demo_arch import vr  # noqa: E402


def normalized(z, cfg):
    m = torch.tensor(cfg["latents_mean"], device=z.device).view(-1, *([1] * (z.dim() - 1)))
    s = torch.tensor(cfg["latents_std"], device=z.device).view(-1, *([1] * (z.dim() - 1)))
    return (z - m) / s


def keyframe_latent(rgb8, W, cfg):
    """vae_reference.encode_keyframe on any device (the posterior noise drawn on the CPU, as the engine's)."""
    moments = vr.encode_clip(vr.normalize_pixels(torch.from_numpy(rgb8)[None]).to(next(iter(W.values())).device),
                             W, cfg)
    mean, std = vr.posterior(moments)
    eps = torch.randn(mean.shape, generator=torch.Generator().manual_seed(42), dtype=torch.float32)
    z = (mean + std * eps.to(mean.device)).to(torch.float16).float()
    return normalized(z[0], cfg)  # [C, 1, h, w]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", default="build/train_demo")
    ap.add_argument("--scenes", type=int, default=len(dd.SCENES))
    ap.add_argument("--seeds", type=int, default=8, help="clips per scene (clip seeds 0..N-1)")
    ap.add_argument("--fl2va-seeds", type=int, default=2, help="of which the first N also give fl2va keyframes")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    t0 = time.time()
    device = tc.setup_torch(a.device, a.threads)
    Wv, cv = demo_arch.trained_vae(a.work, "video", device)
    Wa, ca = demo_arch.trained_vae(a.work, "audio", device)
    out = {}
    with torch.no_grad():
        for i in range(a.scenes):
            sc = dd.Scene.from_index(i)
            for s in range(a.seeds):
                c = dd.make_clip(sc, s)
                x = vr.normalize_pixels(torch.from_numpy(c.frames)).to(device)
                mean, _ = vr.posterior(vr.encode_moments(x, Wv, cv))
                out[f"video.{i}.{s}"] = normalized(mean[0], cv).cpu()
                za = vr.encode_audio_mean(torch.from_numpy(c.audio).to(device), Wa, ca)  # [2, C, A]
                out[f"audio.{i}.{s}"] = normalized(za.transpose(0, 1), ca).transpose(0, 1).contiguous().cpu()
                if s < a.fl2va_seeds:
                    out[f"first.{i}.{s}"] = keyframe_latent(c.frames[0], Wv, cv).cpu()
            out[f"reference.{i}"] = keyframe_latent(dd.reference_image(sc), Wv, cv).cpu()
    v = torch.stack([t for n, t in out.items() if n.startswith("video.")])
    au = torch.stack([t for n, t in out.items() if n.startswith("audio.")])
    meta = dict(scenes=str(a.scenes), seeds=str(a.seeds), fl2va_seeds=str(a.fl2va_seeds))
    sio.save(os.path.join(a.work, "latents.safetensors"), out, meta)
    summary = dict(stage="latents", clips=a.scenes * a.seeds, video_shape=list(v.shape[1:]),
                   audio_shape=list(au.shape[1:]), video_rms=round(v.pow(2).mean().sqrt().item(), 4),
                   audio_rms=round(au.pow(2).mean().sqrt().item(), 4), wall_seconds=round(time.time() - t0, 1))
    with open(os.path.join(a.work, "latents.summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
