"""The demo model's architectures: configs in the official config.json keys and the official tensor names and
shapes of every component, so that the trained weights load through the engine's normal path.

The forward passes are the project's references (tools/reference/h3_dit.py, vae_reference.py): this file only
says what the demo's sizes are and builds trainable parameter dicts with those names.
"""
import json
import math
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REF = os.path.join(HERE, "..", "reference")
sys.path.insert(0, REF)
sys.path.insert(0, HERE)

import h3_dit  # noqa: E402
import make_tiny_weights  # noqa: E402
import safetensors_io as sio  # noqa: E402
import vae_reference as vr  # noqa: E402

# ---- the DiT (transformer/ and transformer_ref/) -------------------------------------------------------------
# text_dim 64: the hidden size of make-tiny's Qwen3-VL conditioner, the demo's text encoder.
DIT_CONFIG = dict(make_tiny_weights.DEFAULT_TINY)
DIT_CONFIG.update({
    "num_attention_heads": 2, "attention_head_dim": 32, "hidden_size": 128, "num_layers": 4,
    "num_refiner_layers": 1, "ffn_dim": 256, "text_dim": 64, "time_embed_hidden_dim": 128,
    "time_embed_dim": 64, "rope_freq_dim": 4,
})
DIT_CONFIG = make_tiny_weights.full_config(DIT_CONFIG)

# ---- the video VAE (vae/) --------------------------------------------------------------------------------------
# Official factors (16x spatial, 4x temporal, 24 latent channels, 17-frame clips, token_drop 3); small widths
# (2.3 MB encoder + 4.3 MB decoder in fp32).
VIDEO_VAE_CONFIG = {
    "_class_name": "AutoencoderKLMiniMaxH3",
    "in_channels": 3, "out_channels": 3, "latent_channels": 24,
    "block_out_channels": [8, 8, 16, 32, 64, 64], "layers_per_block": 1,
    "spatial_downsample_factors": [2, 2, 2, 2, 1, 1], "temporal_downsample_factors": [1, 2, 2, 1, 1, 1],
    "norm_num_groups": 4, "norm_eps": 1e-6, "spatial_padding_mode": "reflect",
    "decoder_num_layers": 3, "decoder_num_attention_heads": 2, "decoder_attention_head_dim": 64,
    "decoder_num_register_tokens": 4, "decoder_ffn_mult": 2, "decoder_rope_theta": 100.0,
    "decoder_rope_dim_ratio": 0.75, "decoder_norm_eps": 1e-5,
    "clip_length": 17, "token_drop": 3,
    "latents_mean": [0.0] * 24, "latents_std": [1.0] * 24,  # replaced by the trained encoder's statistics
}

# ---- the audio VAE (audio_vae/) --------------------------------------------------------------------------------
# Official hop (800 samples at 32 kHz: 40 latents/s) and 32 latent channels; three upsampling stages.
AUDIO_VAE_CONFIG = {
    "_class_name": "AutoencoderKLMiniMaxH3Audio",
    "encoder_dim": 4, "encoder_rates": [2, 4, 4, 5, 5], "latent_dim": 64, "latent_channels": 32,
    "decoder_dim": 32, "decoder_rates": [8, 10, 10], "decoder_kernel_sizes": [16, 20, 20],
    "num_attention_heads": 2, "resblock_kernel_sizes": [3, 7, 11],
    "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]], "sampling_rate": 32000,
    "latents_mean": [0.0] * 32, "latents_std": [1.0] * 32,
}


def reference_video_cfg(cfg):
    """The dict vae_reference.py reads (the config plus the derived patch sizes)."""
    c = dict(cfg)
    c["_patch"] = math.prod(cfg["spatial_downsample_factors"])
    c["_patch_t"] = math.prod(cfg["temporal_downsample_factors"])
    return c


# ---- tensor inventories (the engine's names and shapes) ---------------------------------------------------------
def video_decoder_tensors(c):
    d = c["decoder_num_attention_heads"] * c["decoder_attention_head_dim"]
    lc, ff = c["latent_channels"], d * c["decoder_ffn_mult"]
    patch = math.prod(c["spatial_downsample_factors"])
    pt = math.prod(c["temporal_downsample_factors"])
    t = [("post_quant_conv.weight", [lc, lc, 1, 1, 1]), ("post_quant_conv.bias", [lc]),
         ("decoder.proj_in.weight", [d, lc]), ("decoder.proj_in.bias", [d]),
         ("decoder.register_tokens", [1, c["decoder_num_register_tokens"], d])]
    for i in range(c["decoder_num_layers"]):
        p = f"decoder.transformer_blocks.{i}."
        for n in ("to_q", "to_k", "to_v", "to_out.0"):
            t += [(p + f"attn.{n}.weight", [d, d]), (p + f"attn.{n}.bias", [d])]
        t += [(p + "norm1.weight", [d]), (p + "norm2.weight", [d]), (p + "scale1", [d]), (p + "scale2", [d]),
              (p + "ff.net.0.proj.weight", [2 * ff, d]), (p + "ff.net.0.proj.bias", [2 * ff]),
              (p + "ff.net.2.weight", [d, ff]), (p + "ff.net.2.bias", [d])]
    out = c["out_channels"] * pt * patch * patch
    t += [("decoder.norm_out.weight", [d]), ("decoder.norm_out.bias", [d]),
          ("decoder.proj_out.weight", [out, d]), ("decoder.proj_out.bias", [out])]
    return t


def video_encoder_tensors(c):
    t = []

    def conv(name, o, i, k):
        t.extend([(name + ".weight", [o, i, k, k, k]), (name + ".bias", [o])])

    def norm(name, ch):
        t.extend([(name + ".weight", [ch]), (name + ".bias", [ch])])

    ch = c["block_out_channels"]
    conv("encoder.conv_in", ch[0], c["in_channels"], 3)
    cin = ch[0]
    for i in range(len(ch)):
        for j in range(c["layers_per_block"]):
            p = f"encoder.down_blocks.{i}.resnets.{j}."
            norm(p + "norm1", cin)
            conv(p + "conv1", ch[i], cin, 3)
            norm(p + "norm2", ch[i])
            conv(p + "conv2", ch[i], ch[i], 3)
            if cin != ch[i]:
                conv(p + "conv_shortcut", ch[i], cin, 1)
            cin = ch[i]
        if c["temporal_downsample_factors"][i] * c["spatial_downsample_factors"][i] > 1:
            conv(f"encoder.down_blocks.{i}.downsamplers.0.conv", ch[i], ch[i], 3)
    norm("encoder.norm_out", cin)
    conv("encoder.conv_out", 2 * c["latent_channels"], cin, 3)
    conv("quant_conv", 2 * c["latent_channels"], 2 * c["latent_channels"], 1)
    return t


def audio_decoder_tensors(c):
    t = []

    def conv(n, a, b, k, bias_n):
        if bias_n > 0:
            t.append((n + ".bias", [bias_n]))
        t.extend([(n + ".weight_g", [a, 1, 1]), (n + ".weight_v", [a, b, k])])

    def act(n, ch):
        t.extend([(n + ".act.alpha", [ch]), (n + ".act.beta", [ch]),
                  (n + ".downsample.lowpass.filter", [1, 1, 12]), (n + ".upsample.filter", [1, 1, 12])])

    t.extend([("dec_in_proj.weight", [c["latent_dim"], c["latent_channels"], 1]), ("dec_in_proj.bias", [c["latent_dim"]])])
    conv("decoder.conv_pre", c["decoder_dim"], c["latent_dim"], 7, c["decoder_dim"])
    ch = c["decoder_dim"]
    nk = len(c["resblock_kernel_sizes"])
    for i, k_up in enumerate(c["decoder_kernel_sizes"]):
        conv(f"decoder.ups.{i}.0", ch, ch // 2, k_up, ch // 2)
        ch //= 2
        for j, k in enumerate(c["resblock_kernel_sizes"]):
            pre = f"decoder.resblocks.{i * nk + j}."
            dil = c["resblock_dilation_sizes"][j]
            for m in range(len(dil)):
                conv(pre + f"convs1.{m}", ch, ch, k, ch)
                conv(pre + f"convs2.{m}", ch, ch, k, ch)
            for a in range(2 * len(dil)):
                act(pre + f"activations.{a}", ch)
    act("decoder.activation_post", ch)
    conv("decoder.conv_post", 1, ch, 7, 0)
    return t


def audio_encoder_tensors(c):
    t = []

    def conv(n, o, i, k):
        t.extend([(n + ".bias", [o]), (n + ".weight_g", [o, 1, 1]), (n + ".weight_v", [o, i, k])])

    def snake(n, ch):
        t.append((n + ".alpha", [1, ch, 1]))

    d = c["encoder_dim"]
    conv("encoder.block.0", d, 1, 7)
    for i, s in enumerate(c["encoder_rates"]):
        pre = f"encoder.block.{i + 1}.block."
        for u in range(3):
            up = pre + f"{u}.block."
            snake(up + "0", d)
            conv(up + "1", d, d, 7)
            snake(up + "2", d)
            conv(up + "3", d, d, 1)
        snake(pre + "3", d)
        conv(pre + "4", 2 * d, d, 2 * s)
        d *= 2
    last = len(c["encoder_rates"]) + 1
    snake(f"encoder.block.{last}", d)
    conv(f"encoder.block.{last + 1}", c["latent_dim"], d, 3)
    dm, o = c["latent_dim"], c["latent_channels"]

    def norm(n, dim):
        t.extend([(n + ".weight", [dim]), (n + ".bias", [dim])])

    def lin(n, out, inp):
        t.extend([(n + ".weight", [out, inp]), (n + ".bias", [out])])

    norm("pre_block.norm1", dm)
    t.extend([("pre_block.attn.qkv.weight", [3 * dm, dm]), ("pre_block.attn.q_bias", [dm]),
              ("pre_block.attn.v_bias", [dm]), ("pre_block.attn.zero_k_bias", [dm])])
    lin("pre_block.attn.proj", o, o)
    lin("pre_block.proj", o, dm)
    norm("pre_block.norm3", dm)
    norm("pre_block.norm2", o)
    norm("pre_block.mlp.norm", o)
    lin("pre_block.mlp.w0", 2 * o, o)
    lin("pre_block.mlp.w1", 2 * o, o)
    lin("pre_block.mlp.w2", o, 2 * o)
    t.extend([("mean_proj.weight", [o, o, 1]), ("mean_proj.bias", [o]),
              ("logs_proj.weight", [o, o, 1]), ("logs_proj.bias", [o])])
    return t


# ---- initialization ---------------------------------------------------------------------------------------------
def _fan_in(shape):
    return max(1, math.prod(shape[1:])) if len(shape) > 1 else 1


def init_video_vae(c, gen):
    """PyTorch-default-like init (uniform ±1/sqrt(fan_in)); norms at 1, biases 0, layer scales 0.1."""
    W = {}
    for name, shape in video_decoder_tensors(c) + video_encoder_tensors(c):
        if name.endswith(("norm1.weight", "norm2.weight")) or name in ("decoder.norm_out.weight",) or (
                len(shape) == 1 and name.startswith("encoder.") and name.endswith(".weight")):
            t = torch.ones(shape)
        elif name.endswith(("scale1", "scale2")):
            t = torch.full(shape, 0.1)
        elif name == "decoder.register_tokens":
            t = torch.randn(shape, generator=gen) * 0.02
        elif name.endswith(".bias") or name.endswith("norm_out.bias"):
            t = torch.zeros(shape)
        else:
            b = 1.0 / math.sqrt(_fan_in(shape))
            t = (torch.rand(shape, generator=gen) * 2 - 1) * b
        W[name] = t
    return W


def init_audio_vae(c, gen, gain=1.0):
    """Weight-norm pairs: v uniform ±1/sqrt(fan_in), g = gain·||v|| per output (so W = gain·v at start: gain
    sqrt(3) keeps the signal's variance through each convolution, where 1 shrinks it threefold); Snake alphas
    (linear space, encoder) at 1; SnakeBeta log-alpha/beta (decoder) at 0; the Kaiser filters exact."""
    W = {}
    filt = vr.kaiser_sinc_filter(0.25, 0.3, 12).view(1, 1, 12)
    for name, shape in audio_decoder_tensors(c) + audio_encoder_tensors(c):
        if name.endswith(".filter"):
            t = filt.clone()
        elif name.endswith(".weight_g"):
            t = None  # filled from weight_v below
        elif name.endswith(("act.alpha", "act.beta")):
            t = torch.zeros(shape)
        elif name.endswith(".alpha"):
            t = torch.ones(shape)
        elif name.endswith(("zero_k_bias", "q_bias", "v_bias")) or name.endswith(".bias"):
            t = torch.zeros(shape)
        elif len(shape) == 1:  # LayerNorm gains
            t = torch.ones(shape)
        else:
            b = 1.0 / math.sqrt(_fan_in(shape))
            t = (torch.rand(shape, generator=gen) * 2 - 1) * b
        W[name] = t
    for name in list(W):
        if name.endswith(".weight_g"):
            v = W[name[:-2] + "_v"]
            W[name] = gain * v.reshape(v.shape[0], -1).norm(dim=1).view(-1, 1, 1).clone()
    return W


def init_dit(cfg, seed):
    """make_tiny_weights' init (the project's), in fp32, with the output heads and the gates' biases scaled down
    so that training starts near the identity (AdaLN-zero-like)."""
    W = {n: t.float() for n, t in make_tiny_weights.make_weights(cfg, seed).items()}
    hid = cfg["hidden_size"]
    for i in range(cfg["num_layers"]):
        b = W[f"transformer_blocks.{i}.adaln_proj.linear.bias"].view(3, 6, hid)
        b[:, 2] = 0.1 * torch.randn(3, hid, generator=torch.Generator().manual_seed(seed + i))
        b[:, 5] = 0.1 * torch.randn(3, hid, generator=torch.Generator().manual_seed(seed + 100 + i))
    for n in ("proj_out.weight", "audio_proj_out.weight"):
        W[n] *= 0.1
    return W


def params(W, trainable=lambda name: True):
    """Tensors -> leaf tensors requiring grad (fp32); buffers (filters, zero biases) stay constant."""
    out = {}
    for n, t in W.items():
        t = t.detach().float().clone()
        if trainable(n):
            t.requires_grad_(True)
        out[n] = t
    return out


def audio_trainable(name):
    return not (name.endswith(".filter") or name.endswith("zero_k_bias") or name.startswith("logs_proj."))


# ---- files --------------------------------------------------------------------------------------------------
def write_json(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")


def save_state(path, tensors, meta):
    """A training checkpoint (fp32 tensors + JSON metadata in the safetensors header)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    sio.save(tmp, {n: t.detach().float().contiguous() for n, t in tensors.items()}, {"meta": json.dumps(meta)})
    os.replace(tmp, path)


def load_state(path):
    t, md = sio.load_file(path)
    return t, json.loads(md.get("meta", "{}"))


# ---- trained components (the outputs of train_vae.py in a work dir) ------------------------------------------
def _stage_summary(work, name):
    path = os.path.join(work, name + ".summary.json")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} is missing: run train_vae.py {name.split('_')[0]} --work {work} first")
    with open(path) as f:
        return json.load(f)


def trained_vae_config(work, which):
    """The config.json of the trained `which` (video|audio) VAE: the demo's sizes and the latent statistics
    measured at the end of its training."""
    s = _stage_summary(work, which + "_vae")
    cfg = dict(VIDEO_VAE_CONFIG if which == "video" else AUDIO_VAE_CONFIG)
    cfg["latents_mean"], cfg["latents_std"] = s["latents_mean"], s["latents_std"]
    return cfg


def trained_vae(work, which, device="cpu"):
    """(weights on `device`, the reference's config dict) of the trained `which` VAE."""
    cfg = trained_vae_config(work, which)
    W, _ = load_state(os.path.join(work, which + "_vae.done.safetensors"))
    W = {n: t.to(device) for n, t in W.items()}
    return W, (reference_video_cfg(cfg) if which == "video" else cfg)
