"""Generate the decoder goldens for the C++ engine from tiny random weights (spec §9, §10).

    /usr/bin/python3 tools/reference/make_vae_goldens.py --out tests/data/vae

Writes tests/data/vae/:
  video/{config.json, diffusion_pytorch_model.safetensors}   tiny AutoencoderKLMiniMaxH3 decoder (official names;
                                                              patch 4x4, temporal x4, 2 blocks of 2x16 heads)
  video_io.safetensors   latents [1,24,9,6,8] (normalized), sample [1,3,30,24,32] (tile 16 px, min overlap 4:
                         2 clips x 2x3 tiles, padded latents trimmed), pixels (de-normalized + clamped),
                         clip_latents [1,24,2,2,3] + clip_sample [3,8,8,12] (one untiled decoder call)
  audio/{config.json, diffusion_pytorch_model.safetensors}   tiny AutoencoderKLMiniMaxH3Audio decoder
                                                              (weight_g/weight_v, filter buffers, rates 8,10,10)
  audio_io.safetensors   latents [2,32,5] (normalized), waveform [2,1,4000]
  filters.safetensors    kaiser_up [12] (cutoff .25, half-width .3), act_x [1,3,20], act_alpha/beta [3],
                         snake_y [1,3,20], alias_free_y [1,3,20]
  layout.json            official tile/clip layout: 768x1344 and 768x768 (+ a few latent counts)
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


def video_config():
    g = torch.Generator().manual_seed(7)
    return {
        "_class_name": "AutoencoderKLMiniMaxH3",
        "in_channels": 3, "out_channels": 3, "latent_channels": 24,
        "block_out_channels": [8, 8, 8, 8, 8, 8], "layers_per_block": 1,
        "spatial_downsample_factors": [2, 2, 1, 1, 1, 1],
        "temporal_downsample_factors": [1, 2, 2, 1, 1, 1],
        "norm_num_groups": 4, "norm_eps": 1e-6, "spatial_padding_mode": "reflect",
        "decoder_num_layers": 2, "decoder_num_attention_heads": 2, "decoder_attention_head_dim": 16,
        "decoder_num_register_tokens": 4, "decoder_ffn_mult": 4, "decoder_rope_theta": 100.0,
        "decoder_rope_dim_ratio": 0.75, "decoder_norm_eps": 1e-5, "clip_length": 17, "token_drop": 3,
        "latents_mean": [round(float(v), 6) for v in uni(g, (24,), -1, 1)],
        "latents_std": [round(float(v), 6) for v in uni(g, (24,), 0.5, 2)],
    }


def video_weights(cfg, seed=1):
    g = torch.Generator().manual_seed(seed)
    dim = cfg["decoder_num_attention_heads"] * cfg["decoder_attention_head_dim"]
    c = cfg["latent_channels"]
    ff = dim * cfg["decoder_ffn_mult"]
    p = 1
    for f in cfg["spatial_downsample_factors"]:
        p *= f
    pt = 1
    for f in cfg["temporal_downsample_factors"]:
        pt *= f
    W = {}

    def lin(name, o, i):
        W[name + ".weight"] = uni(g, (o, i), -1, 1) / i ** 0.5
        W[name + ".bias"] = uni(g, (o,), -0.1, 0.1)

    W["post_quant_conv.weight"] = (uni(g, (c, c), -1, 1) / c ** 0.5).view(c, c, 1, 1, 1)
    W["post_quant_conv.bias"] = uni(g, (c,), -0.1, 0.1)
    lin("decoder.proj_in", dim, c)
    W["decoder.register_tokens"] = uni(g, (1, cfg["decoder_num_register_tokens"], dim), -1, 1)
    for i in range(cfg["decoder_num_layers"]):
        pre = f"decoder.transformer_blocks.{i}."
        W[pre + "norm1.weight"] = uni(g, (dim,), 0.8, 1.2)
        for n in ("to_q", "to_k", "to_v"):
            lin(pre + "attn." + n, dim, dim)
        lin(pre + "attn.to_out.0", dim, dim)
        W[pre + "scale1"] = uni(g, (dim,), 0.1, 0.5)
        W[pre + "norm2.weight"] = uni(g, (dim,), 0.8, 1.2)
        lin(pre + "ff.net.0.proj", 2 * ff, dim)
        lin(pre + "ff.net.2", dim, ff)
        W[pre + "scale2"] = uni(g, (dim,), 0.1, 0.5)
    W["decoder.norm_out.weight"] = uni(g, (dim,), 0.8, 1.2)
    W["decoder.norm_out.bias"] = uni(g, (dim,), -0.1, 0.1)
    lin("decoder.proj_out", 3 * pt * p * p, dim)
    return W, p, pt


def audio_config():
    g = torch.Generator().manual_seed(9)
    return {
        "_class_name": "AutoencoderKLMiniMaxH3Audio",
        "encoder_dim": 64, "encoder_rates": [2, 4, 4, 5, 5], "latent_dim": 16, "latent_channels": 32,
        "decoder_dim": 16, "decoder_rates": [8, 10, 10], "decoder_kernel_sizes": [16, 20, 20],
        "num_attention_heads": 8, "resblock_kernel_sizes": [3, 7, 11],
        "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]], "sampling_rate": 32000,
        "latents_mean": [round(float(v), 6) for v in uni(g, (32,), -0.5, 0.5)],
        "latents_std": [round(float(v), 6) for v in uni(g, (32,), 0.5, 2)],
    }


def audio_weights(cfg, seed=2):
    g = torch.Generator().manual_seed(seed)
    W = {}

    def wn(name, shape, bias_n, gain=(0.3, 0.6)):
        # weight_g has dim 0 of weight_v (in_channels for the transposed convolutions).
        W[name + ".weight_v"] = uni(g, shape, -1, 1)
        W[name + ".weight_g"] = uni(g, (shape[0], 1, 1), *gain)
        if bias_n:
            W[name + ".bias"] = uni(g, (bias_n,), -0.1, 0.1)

    lat, ld, dd = cfg["latent_channels"], cfg["latent_dim"], cfg["decoder_dim"]
    W["dec_in_proj.weight"] = uni(g, (ld, lat, 1), -1, 1) / lat ** 0.5
    W["dec_in_proj.bias"] = uni(g, (ld,), -0.1, 0.1)
    wn("decoder.conv_pre", (dd, ld, 7), dd)
    up = ref.kaiser_sinc_filter(0.25, 0.3, 12).view(1, 1, 12)
    ks, ds = cfg["resblock_kernel_sizes"], cfg["resblock_dilation_sizes"]
    ch = dd
    for i, k in enumerate(cfg["decoder_kernel_sizes"]):
        wn(f"decoder.ups.{i}.0", (ch, ch // 2, k), ch // 2)
        ch //= 2
        for j, (kk, dil) in enumerate(zip(ks, ds)):
            pre = f"decoder.resblocks.{i * len(ks) + j}."
            for m in range(len(dil)):
                wn(pre + f"convs1.{m}", (ch, ch, kk), ch)
                wn(pre + f"convs2.{m}", (ch, ch, kk), ch)
            for a in range(2 * len(dil)):
                W[pre + f"activations.{a}.act.alpha"] = uni(g, (ch,), -0.5, 0.5)
                W[pre + f"activations.{a}.act.beta"] = uni(g, (ch,), -0.5, 0.5)
                W[pre + f"activations.{a}.upsample.filter"] = up.clone()
                W[pre + f"activations.{a}.downsample.lowpass.filter"] = up.clone()
    W["decoder.activation_post.act.alpha"] = uni(g, (ch,), -0.5, 0.5)
    W["decoder.activation_post.act.beta"] = uni(g, (ch,), -0.5, 0.5)
    W["decoder.activation_post.upsample.filter"] = up.clone()
    W["decoder.activation_post.downsample.lowpass.filter"] = up.clone()
    wn("decoder.conv_post", (1, ch, 7), 0, gain=(4.0, 4.0))
    return W


def layout():
    out = []
    for (hh, ww) in [(768, 1344), (768, 768)]:
        ys, _, yo = ref.split_tiles(hh, 256, 64, 16)
        xs, _, xo = ref.split_tiles(ww, 256, 64, 16)
        out.append({"height": hh, "width": ww, "y_starts": ys, "y_overlaps": yo, "x_starts": xs,
                    "x_overlaps": xo})
    plans = []
    for t in [3, 7, 9, 32, 37, 38, 102]:
        p = ref.clip_plan(t)
        plans.append({"latents": t, "pad_tokens": p["pad_tokens"], "num_chunks": p["num_chunks"],
                      "clip_starts": [c[0] for c in p["clips"]], "clip_length": p["clips"][0][1],
                      "frame_pre_padding": p["frame_pre_padding"], "frame_overlap": p["frame_overlap"],
                      "trim_frames": p["trim_frames"], "frames": p["frames"]})
    return {"tile": 256, "min_overlap": 64, "ratio": 16, "tiles": out, "clips": plans}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    torch.set_grad_enabled(False)
    os.makedirs(os.path.join(a.out, "video"), exist_ok=True)
    os.makedirs(os.path.join(a.out, "audio"), exist_ok=True)

    vcfg = video_config()
    VW, p, pt = video_weights(vcfg)
    vcfg_run = dict(vcfg, _patch=p, _patch_t=pt)
    g = torch.Generator().manual_seed(3)
    lat = torch.randn((1, 24, 9, 6, 8), generator=g)
    sample = ref.decode_video(lat, VW, vcfg_run, tile=16, min_overlap=4)
    assert sample.shape == (1, 3, 30, 24, 32), sample.shape
    clip_lat = torch.randn((1, 24, 2, 2, 3), generator=g)
    mean = torch.tensor(vcfg["latents_mean"]).view(-1, 1, 1, 1)
    std = torch.tensor(vcfg["latents_std"]).view(-1, 1, 1, 1)
    clip_sample = ref.vit_decode(clip_lat[0] * std + mean, VW, vcfg_run)
    with open(os.path.join(a.out, "video", "config.json"), "w") as f:
        json.dump(vcfg, f, indent=2)
    safetensors_io.save(os.path.join(a.out, "video", "diffusion_pytorch_model.safetensors"), VW)
    safetensors_io.save(os.path.join(a.out, "video_io.safetensors"),
                        {"latents": lat, "sample": sample, "pixels": ref.to_pixels(sample),
                         "clip_latents": clip_lat, "clip_sample": clip_sample.contiguous()})

    acfg = audio_config()
    AW = audio_weights(acfg)
    alat = torch.randn((2, 32, 5), generator=g)
    wave = ref.decode_audio(alat, AW, acfg)
    assert wave.shape == (2, 1, 4000), wave.shape
    with open(os.path.join(a.out, "audio", "config.json"), "w") as f:
        json.dump(acfg, f, indent=2)
    safetensors_io.save(os.path.join(a.out, "audio", "diffusion_pytorch_model.safetensors"), AW)
    safetensors_io.save(os.path.join(a.out, "audio_io.safetensors"), {"latents": alat, "waveform": wave})

    x = torch.randn((1, 3, 20), generator=g) * 2
    al, be = torch.randn((3,), generator=g) * 0.5, torch.randn((3,), generator=g) * 0.5
    safetensors_io.save(os.path.join(a.out, "filters.safetensors"), {
        "kaiser_up": ref.kaiser_sinc_filter(0.25, 0.3, 12), "act_x": x, "act_alpha": al, "act_beta": be,
        "snake_y": ref.snake_beta(x, al, be), "alias_free_y": ref.alias_free_snake_beta(x, al, be)})

    with open(os.path.join(a.out, "layout.json"), "w") as f:
        json.dump(layout(), f, indent=1)
    print("video sample range", float(sample.min()), float(sample.max()),
          "audio range", float(wave.min()), float(wave.max()), "clipped",
          float((wave.abs() >= 1).float().mean()))


if __name__ == "__main__":
    main()
