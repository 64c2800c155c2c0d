"""Generate the video VAE encoder goldens for the C++ engine from tiny random weights (spec §3 step 4, §9.1).

    /usr/bin/python3 tools/reference/make_vae_encoder_goldens.py --out tests/data/vae

Writes tests/data/vae/:
  encoder/{config.json, diffusion_pytorch_model.safetensors}   tiny AutoencoderKLMiniMaxH3 encoder (official names:
        encoder.*, quant_conv.*; 4 levels of 4,8,8,8 channels, 2 ResNet blocks each, GroupNorm(2), spatial
        x4 (2,2,1,1), temporal x4 (2,2,1,1); logvar channel 0 pushed below -30 so the clamp matters; fp16
        values stored as F16, the loader widens them to fp32)
  encoder_io.safetensors
        frame_rgb [1,16,24,3] u8       one frame, untiled (tile 256 > frame): frame_mean/frame_std [1,24,1,4,6],
                                        frame_latent [1,24,1,4,6] (the keyframe recipe: seed 42, fp16, normalized)
        tiled_rgb [1,28,44,3] u8       one frame, tile 16 / min overlap 8 (3x5 tiles, overlaps 12,8 / 12,8,8,8):
                                        tiled_mean/tiled_std [1,24,1,7,11], tiled_latent [1,24,1,7,11]
        clip_rgb [22,8,8,3] u8         22 frames (padded to 34, 2 clips, token_drop 3), untiled:
                                        clip_mean/clip_std [1,24,7,2,2]
        clip_tiled_rgb [22,12,20,3] u8 22 frames, tile 16 / min overlap 8 (1x2 tiles):
                                        clip_tiled_mean/clip_tiled_std [1,24,7,3,5]
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402
import vae_reference as ref  # noqa: E402


def uni(g, shape, lo, hi):
    return torch.rand(shape, generator=g, dtype=torch.float32) * (hi - lo) + lo


def encoder_config():
    g = torch.Generator().manual_seed(17)
    return {
        "_class_name": "AutoencoderKLMiniMaxH3",
        "in_channels": 3, "out_channels": 3, "latent_channels": 24,
        "block_out_channels": [4, 8, 8, 8], "layers_per_block": 2,
        "spatial_downsample_factors": [2, 2, 1, 1],
        "temporal_downsample_factors": [2, 2, 1, 1],
        "norm_num_groups": 2, "norm_eps": 1e-6, "spatial_padding_mode": "reflect",
        "decoder_num_layers": 2, "decoder_num_attention_heads": 2, "decoder_attention_head_dim": 16,
        "decoder_num_register_tokens": 4, "decoder_ffn_mult": 4, "decoder_rope_theta": 100.0,
        "decoder_rope_dim_ratio": 0.75, "decoder_norm_eps": 1e-5, "clip_length": 17, "token_drop": 3,
        "latents_mean": [round(float(v), 6) for v in uni(g, (24,), -1, 1)],
        "latents_std": [round(float(v), 6) for v in uni(g, (24,), 0.5, 2)],
    }


def encoder_weights(cfg, seed=5):
    g = torch.Generator().manual_seed(seed)
    W = {}

    def conv(name, o, i, k):
        fan = i * k ** 3
        W[name + ".weight"] = uni(g, (o, i, k, k, k), -1, 1) * (1.5 / fan ** 0.5)
        W[name + ".bias"] = uni(g, (o,), -0.1, 0.1)

    def norm(name, c):
        W[name + ".weight"] = uni(g, (c,), 0.8, 1.2)
        W[name + ".bias"] = uni(g, (c,), -0.1, 0.1)

    ch = cfg["block_out_channels"]
    conv("encoder.conv_in", ch[0], cfg["in_channels"], 3)
    cin = ch[0]
    for i, c in enumerate(ch):
        for j in range(cfg["layers_per_block"]):
            pre = f"encoder.down_blocks.{i}.resnets.{j}."
            norm(pre + "norm1", cin)
            conv(pre + "conv1", c, cin, 3)
            norm(pre + "norm2", c)
            conv(pre + "conv2", c, c, 3)
            if cin != c:
                conv(pre + "conv_shortcut", c, cin, 1)
            cin = c
        if cfg["temporal_downsample_factors"][i] * cfg["spatial_downsample_factors"][i] > 1:
            conv(f"encoder.down_blocks.{i}.downsamplers.0.conv", c, c, 3)
    norm("encoder.norm_out", cin)
    lc2 = 2 * cfg["latent_channels"]
    conv("encoder.conv_out", lc2, cin, 3)
    conv("quant_conv", lc2, lc2, 1)
    W["quant_conv.bias"][cfg["latent_channels"]] = -45.0  # logvar channel 0 -> clamped to -30
    return {k: v.half() for k, v in W.items()}  # stored as F16 (small files); the reference runs their fp32 values


def rgb(g, shape):
    return torch.randint(0, 256, shape, generator=g, dtype=torch.int64).to(torch.uint8)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    torch.set_grad_enabled(False)
    torch.set_num_threads(1)
    os.makedirs(os.path.join(a.out, "encoder"), exist_ok=True)
    cfg = encoder_config()
    W16 = encoder_weights(cfg)
    W = {k: v.float() for k, v in W16.items()}
    p = 1
    for f in cfg["spatial_downsample_factors"]:
        p *= f
    run = dict(cfg, _patch=p)
    g = torch.Generator().manual_seed(23)
    out = {}

    frame = rgb(g, (1, 16, 24, 3))
    mean, std = ref.posterior(ref.encode_moments(ref.normalize_pixels(frame), W, run))
    assert mean.shape == (1, 24, 1, 4, 6), mean.shape
    out.update(frame_rgb=frame, frame_mean=mean, frame_std=std,
               frame_latent=ref.encode_keyframe(frame[0], W, run))

    tiled = rgb(g, (1, 28, 44, 3))
    assert ref.split_tiles(28, 16, 8, p)[2] == [12, 8] and ref.split_tiles(44, 16, 8, p)[2] == [12, 8, 8, 8]
    mean, std = ref.posterior(ref.encode_moments(ref.normalize_pixels(tiled), W, run, tile=16, min_overlap=8))
    assert mean.shape == (1, 24, 1, 7, 11), mean.shape
    untiled, _ = ref.posterior(ref.encode_moments(ref.normalize_pixels(tiled), W, run, tiling=False))
    assert float((untiled - mean).abs().max()) > 1e-3, "tiling must change the result"
    out.update(tiled_rgb=tiled, tiled_mean=mean, tiled_std=std,
               tiled_latent=ref.encode_keyframe(tiled[0], W, run, tile=16, min_overlap=8))

    clip = rgb(g, (22, 8, 8, 3))
    mean, std = ref.posterior(ref.encode_moments(ref.normalize_pixels(clip), W, run))
    assert mean.shape == (1, 24, 7, 2, 2), mean.shape
    out.update(clip_rgb=clip, clip_mean=mean, clip_std=std)

    clip_t = rgb(g, (22, 12, 20, 3))
    mean, std = ref.posterior(ref.encode_moments(ref.normalize_pixels(clip_t), W, run, tile=16, min_overlap=8))
    assert mean.shape == (1, 24, 7, 3, 5), mean.shape
    out.update(clip_tiled_rgb=clip_t, clip_tiled_mean=mean, clip_tiled_std=std)

    with open(os.path.join(a.out, "encoder", "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    safetensors_io.save(os.path.join(a.out, "encoder", "diffusion_pytorch_model.safetensors"), W16)
    safetensors_io.save(os.path.join(a.out, "encoder_io.safetensors"),
                        {k: v.contiguous() for k, v in out.items()})
    print("frame mean range", float(out["frame_mean"].min()), float(out["frame_mean"].max()),
          "std range", float(out["frame_std"].min()), float(out["frame_std"].max()),
          "latent range", float(out["frame_latent"].min()), float(out["frame_latent"].max()))


if __name__ == "__main__":
    main()
