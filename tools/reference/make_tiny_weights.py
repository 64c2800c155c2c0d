"""Random tiny MiniMax-H3 DiT weights (diffusers naming, + optional original layout).

Writes <out>/diffusers/{config.json, diffusion_pytorch_model.safetensors} (a save_pretrained-like
transformer folder) and, with --original, <out>/original/{config.json, model.safetensors} with original
key names, per-head-interleaved qkv_proj, [gate; value] mlp.fc1 and an fp32 rope.inv_freq (spec §2.3).

dtypes follow the release (§2.3): fp32 for proj_in, audio_proj_in, time_embedder.*, proj_out,
audio_proj_out; bf16 for everything else.  Scales keep activations O(1): Linear weights ~ N(0, 1/fan_in)
(out-projections halved), RMSNorm weights 1 + 0.1 N(0,1), AdaLN weight 0.6/sqrt(fan_in) and bias 0.15 N(0,1)
(+0.5 on the two gate chunks) so that (1 + scale) ~ 1 +- 0.3 and gates ~ 0.5 +- 0.3; final-layer AdaLN weight
0.3/sqrt(fan_in), bias 0.1 N(0,1).
"""
import argparse
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import h3_dit  # noqa: E402
import safetensors_io as sio  # noqa: E402

DEFAULT_TINY = {
    "num_attention_heads": 2, "attention_head_dim": 32, "hidden_size": 64, "num_layers": 2,
    "num_refiner_layers": 1, "ffn_dim": 96, "in_channels": 24, "audio_in_channels": 32,
    "patch_size": [1, 2, 2], "text_dim": 48, "freq_dim": 256, "time_embed_hidden_dim": 64,
    "time_embed_dim": 32, "rope_freq_dim": 4, "rope_theta": 10000.0, "norm_eps": 1e-5,
    "qk_norm_eps": 1e-5, "final_norm_eps": 1e-5,
}


def full_config(cfg):
    c = {"_class_name": "MiniMaxH3Transformer3DModel"}
    c.update(DEFAULT_TINY)
    c.update(cfg)
    assert 6 * c["rope_freq_dim"] <= c["attention_head_dim"]
    return c


def make_weights(cfg, seed=0):
    g = torch.Generator().manual_seed(seed)
    hid, heads, hd = cfg["hidden_size"], cfg["num_attention_heads"], cfg["attention_head_dim"]
    inner, ffn, ted = heads * hd, cfg["ffn_dim"], cfg["time_embed_dim"]
    vdim = cfg["in_channels"] * math.prod(cfg["patch_size"])
    W = {}

    def rn(*shape, std=1.0, mean=0.0):
        return torch.randn(*shape, generator=g, dtype=torch.float32) * std + mean

    def lin(name, out_f, in_f, bias=True, gain=1.0, bias_std=0.02):
        W[name + ".weight"] = rn(out_f, in_f, std=gain / math.sqrt(in_f))
        if bias:
            W[name + ".bias"] = rn(out_f, std=bias_std)

    def norm(name, n):
        W[name + ".weight"] = rn(n, std=0.1, mean=1.0)

    lin("proj_in", hid, vdim)
    lin("audio_proj_in", hid, cfg["audio_in_channels"])
    lin("context_embedder", hid, cfg["text_dim"])
    lin("time_embedder.linear_1", cfg["time_embed_hidden_dim"], cfg["freq_dim"], bias_std=0.1)
    lin("time_embedder.linear_2", ted, cfg["time_embed_hidden_dim"], bias_std=0.1)

    def block(pre, adaln):
        norm(pre + "norm1", hid)
        lin(pre + "attn.to_q", inner, hid, bias=False)
        lin(pre + "attn.to_k", inner, hid, bias=False)
        lin(pre + "attn.to_v", inner, hid, bias=False)
        norm(pre + "attn.norm_q", hd)
        norm(pre + "attn.norm_k", hd)
        lin(pre + "attn.to_out.0", hid, inner, bias=False, gain=0.5)
        norm(pre + "norm2", hid)
        lin(pre + "ff.net.0.proj", 2 * ffn, hid, bias=False)
        lin(pre + "ff.net.2", hid, ffn, bias=False, gain=0.5)
        if adaln:
            lin(pre + "adaln_proj.linear", 18 * hid, ted, gain=0.6, bias_std=0.15)
            # gates (chunks 2 and 5 of each modality row) centred on 0.5 so blocks visibly contribute
            b = W[pre + "adaln_proj.linear.bias"].view(3, 6, hid)
            b[:, 2] += 0.5
            b[:, 5] += 0.5

    for i in range(cfg["num_refiner_layers"]):
        block(f"token_refiner.refiner_blocks.{i}.", False)
    norm("token_refiner.final_norm", hid)
    for i in range(cfg["num_layers"]):
        block(f"transformer_blocks.{i}.", True)
    norm("norm_out.norm", hid)
    lin("norm_out.linear", 2 * hid, ted, gain=0.3, bias_std=0.1)
    lin("proj_out", vdim, hid)
    lin("audio_proj_out", cfg["audio_in_channels"], hid)
    return {n: (t if h3_dit.is_fp32_island(n) else t.to(torch.bfloat16)) for n, t in W.items()}


def write_model(out_dir, cfg, weights, original=True):
    d = os.path.join(out_dir, "diffusers")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    sio.save(os.path.join(d, "diffusion_pytorch_model.safetensors"), weights, {"format": "pt"})
    if original:
        o = os.path.join(out_dir, "original")
        os.makedirs(o, exist_ok=True)
        with open(os.path.join(o, "config.json"), "w") as f:
            json.dump(h3_dit.diffusers_config_to_original(cfg), f, indent=2)
        sio.save(os.path.join(o, "model.safetensors"), h3_dit.diffusers_to_original(weights, cfg),
                 {"format": "pt"})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--config", help="JSON (file or inline) overriding the tiny diffusers config")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--original", action="store_true", help="also write the original layout")
    a = ap.parse_args()
    over = {}
    if a.config:
        over = json.load(open(a.config)) if os.path.exists(a.config) else json.loads(a.config)
    cfg = full_config(over)
    write_model(a.out, cfg, make_weights(cfg, a.seed), a.original)
    print("wrote", a.out)


if __name__ == "__main__":
    main()
