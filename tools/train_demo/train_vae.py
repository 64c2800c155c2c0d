"""Train the demo's video VAE (causal 3-D CNN encoder + ViT decoder) or its audio VAE (DAC encoder + BigVGAN
decoder) on procedural clips, with the project's reference forward passes (tools/reference/vae_reference.py).

    nice -n 10 /usr/bin/python3 tools/train_demo/train_vae.py video --work build/train_demo --steps 1500
    nice -n 10 /usr/bin/python3 tools/train_demo/train_vae.py audio --work build/train_demo --steps 1500

Video: a step is a batch of 22-frame windows (17 + 5: the engine's T = 5n+2 latents for n = 1) of a random clip,
encoded the way the engine encodes it (a 17-frame clip -> 5 latents, then the first 2 latents of the next clip,
which by causality need only its first 5 frames), a posterior sample, the ViT decoder over the 7-latent clip
(the engine's decode clip: 28 frames, of which [3, 20) are the 17 frames of the chunk and [23, 28) the 5 the
next chunk cross-fades with). Loss: L1 + MSE in [0, 1] pixel space, each pixel weighted 1 + --foreground-gain
where the shape is (so that a small shape on a plain background is not lost to it), + 1e-4 * KL.
Audio: a step is 2 half-second mono windows (L or R channel of a random clip, most around a bounce), encoded
to the posterior mean (as the engine encodes references), decoded from mean + 0.1 * std(mean) * noise. Loss: L1
on the waveform + multi-resolution spectral convergence + 1e-3 * mean(z^2).
"""
import argparse
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import demo_arch  # noqa: E402
import demo_data as dd  # noqa: E402
import train_common as tc  # noqa: E402
from demo_arch import vr  # noqa: E402

WINDOW = 22  # frames


# ---- video ---------------------------------------------------------------------------------------------------
def video_window(rng):
    """(22 frames u8 [22, H, W, 3] of a random clip, its scene)."""
    scene = dd.SCENES[int(rng.integers(len(dd.SCENES)))]
    seed = int(rng.integers(1 << 30))
    start = int(rng.integers(0, dd.FRAMES - WINDOW + 1))
    return dd.make_clip(scene, seed, frame_range=(start, start + WINDOW)).frames, scene


def encode_window(x, W, cfg):
    """x [B, 3, 22, H, W] ImageNet-normalized -> moments [B, 48, 7, H/16, W/16] (what encode_moments gives)."""
    a = vr.encoder_forward(x[:, :, :17], W, cfg)
    b = vr.encoder_forward(x[:, :, 17:22], W, cfg)
    return torch.cat([a, b], dim=2)


def vit_decode_batch(z, W, cfg):
    """vae_reference.vit_decode over a batch: z [B, 24, t, h, w] -> [B, 3, t*pt, h*p, w*p] (the same
    operations, with a leading batch axis; checked against vit_decode by check_window_encoding)."""
    B, c, t, h, w = z.shape
    heads, hd = cfg["decoder_num_attention_heads"], cfg["decoder_attention_head_dim"]
    eps = cfg["decoder_norm_eps"]
    p, pt = cfg["_patch"], cfg["_patch_t"]
    nreg = cfg["decoder_num_register_tokens"]
    x = z.reshape(B, c, -1).transpose(1, 2)  # [B, n, c], tokens (t, y, x)
    x = x @ W["post_quant_conv.weight"].reshape(c, c).t() + W["post_quant_conv.bias"]
    x = x @ W["decoder.proj_in.weight"].t() + W["decoder.proj_in.bias"]
    n, dim = x.shape[1], x.shape[2]
    extra = torch.cat([W["decoder.register_tokens"].reshape(nreg, dim), x.new_zeros(1, dim)], dim=0)
    x = torch.cat([x, extra[None].expand(B, -1, -1)], dim=1)
    cos, sin = vr.rope_tables(t, h, w, nreg + 1, hd, cfg["decoder_rope_dim_ratio"], cfg["decoder_rope_theta"])
    cos, sin = cos.to(x.device), sin.to(x.device)

    def heads_of(y):
        return y.reshape(B, -1, heads, hd)

    for i in range(cfg["decoder_num_layers"]):
        pre = f"decoder.transformer_blocks.{i}."
        y = vr.rms_norm(x, W[pre + "norm1.weight"], eps)
        q = heads_of(y @ W[pre + "attn.to_q.weight"].t() + W[pre + "attn.to_q.bias"])
        k = heads_of(y @ W[pre + "attn.to_k.weight"].t() + W[pre + "attn.to_k.bias"])
        v = heads_of(y @ W[pre + "attn.to_v.weight"].t() + W[pre + "attn.to_v.bias"])
        q = vr.apply_rope(vr.rms_norm(q, None, eps), cos, sin)
        k = vr.apply_rope(vr.rms_norm(k, None, eps), cos, sin)
        att = torch.softmax(torch.einsum("bshd,bthd->bhst", q, k) / math.sqrt(hd), dim=-1)
        o = torch.einsum("bhst,bthd->bshd", att, v).reshape(B, -1, heads * hd)
        o = o @ W[pre + "attn.to_out.0.weight"].t() + W[pre + "attn.to_out.0.bias"]
        x = x + o * W[pre + "scale1"]
        y = vr.rms_norm(x, W[pre + "norm2.weight"], eps)
        f = y @ W[pre + "ff.net.0.proj.weight"].t() + W[pre + "ff.net.0.proj.bias"]
        val, gate = f.chunk(2, dim=-1)
        f = (val * F.silu(gate)) @ W[pre + "ff.net.2.weight"].t() + W[pre + "ff.net.2.bias"]
        x = x + f * W[pre + "scale2"]
    x = F.layer_norm(x, (dim,), W["decoder.norm_out.weight"], W["decoder.norm_out.bias"], eps)
    x = x @ W["decoder.proj_out.weight"].t() + W["decoder.proj_out.bias"]
    x = x[:, :n].reshape(B, t, h, w, 3, pt, p, p).permute(0, 4, 1, 5, 2, 6, 3, 7)
    return x.reshape(B, 3, t * pt, h * p, w * p)


def decode_window(z, W, cfg):
    """z [B, 24, 7, h, w] raw latents -> [B, 3, 22, H, W]: the decode clip's kept frames, in order."""
    out = vit_decode_batch(z, W, cfg)  # [B, 3, 28, H, W]
    return torch.cat([out[:, :, 3:20], out[:, :, 23:28]], dim=2)


def to_unit(x):
    m = torch.tensor(vr.IMAGENET_MEAN, device=x.device).view(-1, 1, 1, 1)
    s = torch.tensor(vr.IMAGENET_STD, device=x.device).view(-1, 1, 1, 1)
    return x * s + m


class ClipBank:
    """Every scene's whole clips for seeds 0..seeds-1, rendered once and kept on the device as u8
    [N, F, H, W, 3] with their background colours; a step's windows are slices of them (no rendering per step)."""

    def __init__(self, seeds, device):
        clips = [(dd.make_clip(sc, s).frames, dd.BACKGROUNDS[sc.background]) for s in range(seeds) for sc in dd.SCENES]
        self.frames = torch.from_numpy(np.stack([f for f, _ in clips])).to(device)
        self.background = torch.tensor([b for _, b in clips], dtype=torch.int32, device=device)  # [N, 3]

    def windows(self, rng, n):
        """(u8 [n, 22, H, W, 3], background [n, 3]) of random clips at random start frames."""
        idx = rng.integers(self.frames.shape[0], size=n)
        start = rng.integers(0, self.frames.shape[1] - WINDOW + 1, size=n)
        frames = torch.stack([self.frames[int(i), int(s):int(s) + WINDOW] for i, s in zip(idx, start)])
        return frames, self.background[torch.as_tensor(idx, device=self.frames.device)]


def normalize_batch(frames):
    """u8 [B, F, H, W, 3] -> [B, 3, F, H, W] ImageNet-normalized (vae_reference.normalize_pixels per item)."""
    m = torch.tensor(vr.IMAGENET_MEAN, dtype=torch.float32, device=frames.device).view(1, -1, 1, 1, 1)
    s = torch.tensor(vr.IMAGENET_STD, dtype=torch.float32, device=frames.device).view(1, -1, 1, 1, 1)
    return (frames.permute(0, 4, 1, 2, 3).to(torch.float32).div(255.0) - m) / s


def foreground_weight(frames, background, gain):
    """[B, 1, 22, H, W]: 1 + gain where a pixel differs from its clip's background colour (the shape, one
    pixel wider), so that the few shape pixels weigh in the loss against the many background ones."""
    fg = ((frames.to(torch.int32) - background.view(-1, 1, 1, 1, 3)).abs().sum(-1) > 24).float()[:, None]
    fg = F.max_pool3d(fg, (1, 3, 3), stride=1, padding=(0, 1, 1))
    return 1.0 + gain * fg


def check_window_encoding(W, cfg):
    """The window encoding equals the reference's encode_moments on the same 22 frames, and the batched
    decode equals vit_decode item by item."""
    with torch.no_grad():
        frames = torch.from_numpy(video_window(np.random.default_rng(5))[0])
        x = vr.normalize_pixels(frames)
        assert (normalize_batch(frames[None]) - x).abs().max().item() < 1e-6, "normalize_batch vs normalize_pixels"
        ref = vr.encode_moments(x, W, cfg)
        got = encode_window(x, W, cfg)
        d = (ref - got).abs().max().item()
        assert ref.shape == got.shape and d < 1e-5, f"window encoding differs from encode_moments ({d})"
        z = torch.randn((2,) + tuple(ref.shape[1:]), generator=torch.Generator().manual_seed(3))[:, :24]
        batched = vit_decode_batch(z, W, cfg)
        d = max((batched[b] - vr.vit_decode(z[b], W, cfg)).abs().max().item() for b in range(2))
    assert d < 1e-4, f"batched decode differs from vit_decode ({d})"


def train_video(a, device):
    cfg = demo_arch.reference_video_cfg(demo_arch.VIDEO_VAE_CONFIG)
    W = demo_arch.params(demo_arch.init_video_vae(cfg, torch.Generator().manual_seed(a.seed)))
    check_window_encoding(W, cfg)
    tc.set_fast(a.fast)
    W = {n: t.detach().to(device).requires_grad_(True) for n, t in W.items()}
    bank = ClipBank(a.bank_seeds, device)
    print(f"video_vae: {bank.frames.shape[0]} clips rendered ({bank.frames.numel() / 2**30:.2f} GiB)", flush=True)
    init = tc.init_from(W, a.init) if a.init else {}
    tr = tc.Trainer(a.work, "video_vae", W, lambda n: True, a.lr)
    while tr.progress(a.steps, a.max_seconds) < 1:
        rng, gen = tc.step_rng(a.seed, tr.step, stream=1)
        frames, background = bank.windows(rng, a.batch)  # [B, 22, H, W, 3] on the device
        weight = foreground_weight(frames, background, a.foreground_gain)
        lr = tc.lr_at(tr.step, a.steps, a.lr, min(50, a.steps // 4 + 1), progress=tr.progress(a.steps, a.max_seconds))
        x = normalize_batch(frames)  # [B, 3, 22, H, W]
        mean, std = vr.posterior(encode_window(x, W, cfg))
        eps = torch.randn(mean.shape, generator=gen).to(device)
        y = decode_window(mean + std * eps, W, cfg)
        p, t = to_unit(y), to_unit(x)
        err = p - t
        l1 = (err.abs() * weight).mean() / weight.mean()
        l2 = (err.pow(2) * weight).mean() / weight.mean()
        kl = 0.5 * (mean.pow(2) + std.pow(2) - 1 - 2 * torch.log(std)).mean()
        total = l1 + l2 + 1e-4 * kl
        gn = tr.update(total, lr)
        last = tr.progress(a.steps, a.max_seconds) >= 1
        if tr.step % a.log_every == 0 or last:
            with torch.no_grad():
                mse = err.pow(2).mean().item()
                fg = (weight > 1).float()
                fg_mse = (err.pow(2) * fg).sum().item() / max(3 * fg.sum().item(), 1.0)
            tr.log(loss=round(total.item(), 5), lr=round(lr, 6), grad_norm=round(gn, 3), l1=round(l1.item(), 5),
                   psnr=round(-10 * np.log10(max(mse, 1e-12)), 2),
                   shape_psnr=round(-10 * np.log10(max(fg_mse, 1e-12)), 2), kl=round(kl.item(), 3),
                   z_rms=round(mean.detach().pow(2).mean().sqrt().item(), 3), std_mean=round(std.detach().mean().item(), 4))
        if tr.step % a.save_every == 0 or last:
            tr.save()
    tc.set_fast(False)
    mean, std = video_latent_stats(tr.final_weights(), cfg, a.stats_clips, a.seed, device)
    return tr.finish(tc.machine_description(a.device),
                     dict(final_loss=round(total.item(), 5), latents_mean=mean, latents_std=std, **init))


def video_latent_stats(W, cfg, clips, seed, device):
    """Per-channel mean and std of the posterior means of `clips` whole procedural clips (the config's
    latents_mean / latents_std: the DiT sees (z - mean) / std)."""
    zs = []
    with torch.no_grad():
        for i in range(clips):
            c = dd.make_clip(dd.Scene.from_index(i * 37 + seed), 10_000 + i)
            x = vr.normalize_pixels(torch.from_numpy(c.frames)).to(device)
            mean, _ = vr.posterior(vr.encode_moments(x, W, cfg))
            zs.append(mean[0].reshape(cfg["latent_channels"], -1))  # [C, T*h*w]
    z = torch.cat(zs, dim=1)
    return [round(v, 6) for v in z.mean(1).tolist()], [round(max(v, 1e-3), 6) for v in z.std(1).tolist()]


# ---- audio ---------------------------------------------------------------------------------------------------
AUDIO_WINDOW = 16000  # half a second = 20 latents


def audio_windows(rng, n):
    out = np.zeros((n, AUDIO_WINDOW), dtype=np.float32)
    for i in range(n):
        scene = dd.SCENES[int(rng.integers(len(dd.SCENES)))]
        audio, bounces = dd.clip_audio(scene, int(rng.integers(1 << 30)))
        ch = int(rng.integers(2))
        total = audio.shape[1]
        if bounces and rng.random() < 0.7:
            tb = int(bounces[int(rng.integers(len(bounces)))][0] * dd.SAMPLE_RATE)
            start = tb - int(rng.uniform(0.03, 0.35) * dd.SAMPLE_RATE)
        else:
            start = int(rng.integers(0, total - AUDIO_WINDOW))
        start = int(np.clip(start, 0, total - AUDIO_WINDOW)) // 800 * 800  # on the latent grid
        out[i] = audio[ch, start:start + AUDIO_WINDOW]
    return torch.from_numpy(out)


def stft_loss(p, t):
    """Multi-resolution spectral convergence, ||St - Sp|| / ||St|| over four FFT sizes (scale-aware: silence
    where the target sounds costs 1, sound where it is silent costs its energy). A log-magnitude term is left
    out: with it the decoder went silent (the cheapest way to match the many silent frames' logs) and stayed so."""
    loss = 0.0
    for n_fft in (256, 512, 1024, 2048):
        win = torch.hann_window(n_fft, device=p.device)
        sp = torch.stft(p, n_fft, hop_length=n_fft // 4, window=win, return_complex=True).abs()
        st = torch.stft(t, n_fft, hop_length=n_fft // 4, window=win, return_complex=True).abs()
        loss = loss + (st - sp).pow(2).sum().sqrt() / st.pow(2).sum().sqrt().clamp_min(1e-6)
    return loss / 4


def train_audio(a, device):
    cfg = dict(demo_arch.AUDIO_VAE_CONFIG)
    W = demo_arch.params(demo_arch.init_audio_vae(cfg, torch.Generator().manual_seed(a.seed + 1), a.audio_init_gain),
                         demo_arch.audio_trainable)
    W = {n: (t.detach().to(device).requires_grad_(True) if t.requires_grad else t.to(device)) for n, t in W.items()}
    tr = tc.Trainer(a.work, "audio_vae", W, demo_arch.audio_trainable, a.lr)
    tc.set_fast(a.fast)
    while tr.progress(a.steps, a.max_seconds) < 1:
        rng, gen = tc.step_rng(a.seed, tr.step, stream=2)
        wave = audio_windows(rng, a.batch).to(device)
        lr = tc.lr_at(tr.step, a.steps, a.lr, min(50, a.steps // 4 + 1), progress=tr.progress(a.steps, a.max_seconds))
        z = vr.encode_audio_mean(wave, W, cfg)  # [B, 32, 40]
        # decoder noise at a tenth of the latents' own scale (a fixed 0.1 drowned latents the encoder had shrunk
        # and taught the decoder to ignore them: it then made silence)
        zn = z + 0.1 * z.detach().std() * torch.randn(z.shape, generator=gen).to(device)
        y = vr.decode_audio(zn, W, cfg)[:, 0]  # [B, N]
        l1 = (y - wave).abs().mean()
        ls = stft_loss(y, wave)
        reg = z.pow(2).mean()
        loss = a.audio_l1 * l1 + ls + 1e-3 * reg
        gn = tr.update(loss, lr)
        last = tr.progress(a.steps, a.max_seconds) >= 1
        if tr.step % a.log_every == 0 or last:
            snr = 10 * torch.log10(wave.pow(2).sum() / (y - wave).pow(2).sum().clamp_min(1e-12)).item()
            tr.log(loss=round(loss.item(), 5), lr=round(lr, 6), grad_norm=round(gn, 3), l1=round(l1.item(), 5),
                   stft=round(ls.item(), 4), snr_db=round(snr, 2), z_rms=round(reg.sqrt().item(), 3),
                   rms_ratio=round((y.pow(2).mean() / wave.pow(2).mean().clamp_min(1e-12)).sqrt().item(), 3))
        if tr.step % a.save_every == 0 or last:
            tr.save()
    tc.set_fast(False)
    mean, std = audio_latent_stats(tr.final_weights(), cfg, a.stats_clips, a.seed, device)
    return tr.finish(tc.machine_description(a.device),
                     dict(final_loss=round(loss.item(), 5), latents_mean=mean, latents_std=std))


def audio_latent_stats(W, cfg, clips, seed, device):
    """Per-channel mean and std of the posterior means of `clips` whole soundtracks (both channels)."""
    zs = []
    with torch.no_grad():
        for i in range(clips):
            audio, _ = dd.clip_audio(dd.Scene.from_index(i * 37 + seed), 10_000 + i)
            z = vr.encode_audio_mean(torch.from_numpy(audio).to(device), W, cfg)  # [2, C, A]
            zs.append(z.transpose(0, 1).reshape(cfg["latent_channels"], -1))
    z = torch.cat(zs, dim=1)
    return [round(v, 6) for v in z.mean(1).tolist()], [round(max(v, 1e-3), 6) for v in z.std(1).tolist()]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("which", choices=("video", "audio"))
    ap.add_argument("--work", default="build/train_demo")
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--max-seconds", type=float, default=0.0,
                    help="also end the stage after this many wall seconds (the schedule follows the sooner)")
    ap.add_argument("--stats-clips", type=int, default=16, help="whole clips the latent statistics come from")
    ap.add_argument("--batch", type=int, default=None)
    ap.add_argument("--lr", type=float, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--init", default="", help="video: start from these final weights of an earlier run")
    ap.add_argument("--bank-seeds", type=int, default=6, help="video: clips per scene kept for training")
    ap.add_argument("--foreground-gain", type=float, default=5.0,
                    help="video: the loss weight of the shape's pixels is 1 + this (the background's is 1)")
    ap.add_argument("--audio-init-gain", type=float, default=math.sqrt(3.0),
                    help="audio: the weight-norm gains' start, times ||v|| (1 shrinks the signal at every conv)")
    ap.add_argument("--audio-l1", type=float, default=1.0, help="audio: the waveform L1 term's weight")
    ap.add_argument("--fast", action="store_true", help="TF32 matmuls and convolutions, cuDNN autotune (CUDA)")
    ap.add_argument("--log-every", type=int, default=20)
    ap.add_argument("--save-every", type=int, default=100)
    a = ap.parse_args()
    device = tc.setup_torch(a.device, a.threads)
    if a.which == "video":
        a.batch = a.batch or 1
        a.lr = a.lr or 2e-3
        train_video(a, device)
    else:
        a.batch = a.batch or 4
        a.lr = a.lr or 2e-3
        train_audio(a, device)


if __name__ == "__main__":
    main()
