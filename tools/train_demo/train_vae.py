"""Train the demo's video VAE (causal 3-D CNN encoder + ViT decoder) or its audio VAE (DAC encoder + BigVGAN
decoder) on procedural clips, with the project's reference forward passes (tools/reference/vae_reference.py).

    nice -n 10 /usr/bin/python3 tools/train_demo/train_vae.py video --work build/train_demo --steps 1500
    nice -n 10 /usr/bin/python3 tools/train_demo/train_vae.py audio --work build/train_demo --steps 1500

Video: a step is one 22-frame window (17 + 5: the engine's T = 5n+2 latents for n = 1) of a random clip,
encoded the way the engine encodes it (a 17-frame clip -> 5 latents, then the first 2 latents of the next clip,
which by causality need only its first 5 frames), a posterior sample, the ViT decoder over the 7-latent clip
(the engine's decode clip: 28 frames, of which [3, 20) are the 17 frames of the chunk and [23, 28) the 5 the
next chunk cross-fades with). Loss: L1 + MSE in [0, 1] pixel space + 1e-4 * KL.
Audio: a step is 2 half-second mono windows (L or R channel of a random clip, most around a bounce), encoded
to the posterior mean (as the engine encodes references), decoded from mean + 0.1 * noise. Loss: L1 on the
waveform + a multi-resolution STFT loss (log and linear magnitudes) + 1e-3 * mean(z^2).
"""
import argparse
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
    scene = dd.SCENES[int(rng.integers(len(dd.SCENES)))]
    seed = int(rng.integers(1 << 30))
    start = int(rng.integers(0, dd.FRAMES - WINDOW + 1))
    return dd.make_clip(scene, seed, frame_range=(start, start + WINDOW)).frames


def encode_window(x, W, cfg):
    """x [B, 3, 22, H, W] ImageNet-normalized -> moments [B, 48, 7, H/16, W/16] (what encode_moments gives)."""
    a = vr.encoder_forward(x[:, :, :17], W, cfg)
    b = vr.encoder_forward(x[:, :, 17:22], W, cfg)
    return torch.cat([a, b], dim=2)


def decode_window(z, W, cfg):
    """z [24, 7, h, w] raw latents -> [3, 22, H, W]: the decode clip's kept frames, in order."""
    out = vr.vit_decode(z, W, cfg)  # [3, 28, H, W]
    return torch.cat([out[:, 3:20], out[:, 23:28]], dim=1)


def to_unit(x):
    m = torch.tensor(vr.IMAGENET_MEAN, device=x.device).view(-1, 1, 1, 1)
    s = torch.tensor(vr.IMAGENET_STD, device=x.device).view(-1, 1, 1, 1)
    return x * s + m


def check_window_encoding(W, cfg):
    """The window encoding equals the reference's encode_moments on the same 22 frames."""
    with torch.no_grad():
        x = vr.normalize_pixels(torch.from_numpy(video_window(np.random.default_rng(5))))
        ref = vr.encode_moments(x, W, cfg)
        got = encode_window(x, W, cfg)
        d = (ref - got).abs().max().item()
    assert ref.shape == got.shape and d < 1e-5, f"window encoding differs from encode_moments ({d})"


def train_video(a, device):
    cfg = demo_arch.reference_video_cfg(demo_arch.VIDEO_VAE_CONFIG)
    W = demo_arch.params(demo_arch.init_video_vae(cfg, torch.Generator().manual_seed(a.seed)))
    check_window_encoding(W, cfg)
    W = {n: t.detach().to(device).requires_grad_(True) for n, t in W.items()}
    tr = tc.Trainer(a.work, "video_vae", W, lambda n: True, a.lr)
    while tr.progress(a.steps, a.max_seconds) < 1:
        rng, gen = tc.step_rng(a.seed, tr.step, stream=1)
        frames = torch.from_numpy(np.stack([video_window(rng) for _ in range(a.batch)]))
        rec = {}
        lr = tc.lr_at(tr.step, a.steps, a.lr, min(50, a.steps // 4 + 1), progress=tr.progress(a.steps, a.max_seconds))
        total = 0.0
        for b in range(a.batch):
            x = vr.normalize_pixels(frames[b]).to(device)  # [1, 3, 22, H, W]
            mean, std = vr.posterior(encode_window(x, W, cfg))
            eps = torch.randn(mean.shape, generator=gen).to(device)
            z = mean + std * eps
            y = decode_window(z[0], W, cfg)
            p, t = to_unit(y), to_unit(x[0])
            l1 = (p - t).abs().mean()
            l2 = (p - t).pow(2).mean()
            kl = 0.5 * (mean.pow(2) + std.pow(2) - 1 - 2 * torch.log(std)).mean()
            loss = (l1 + l2 + 1e-4 * kl) / a.batch
            total = total + loss
            rec = dict(l1=l1.detach(), l2=l2.detach(), kl=kl.detach(), z_rms=mean.detach().pow(2).mean().sqrt(),
                       std_mean=std.detach().mean())  # of the last item; read (a device sync) when logged
        gn = tr.update(total, lr)
        last = tr.progress(a.steps, a.max_seconds) >= 1
        if tr.step % a.log_every == 0 or last:
            tr.log(loss=round(total.item(), 5), lr=round(lr, 6), grad_norm=round(gn, 3),
                   l1=round(rec["l1"].item(), 5), psnr=round(-10 * np.log10(max(rec["l2"].item(), 1e-12)), 2),
                   kl=round(rec["kl"].item(), 3), z_rms=round(rec["z_rms"].item(), 3),
                   std_mean=round(rec["std_mean"].item(), 4))
        if tr.step % a.save_every == 0 or last:
            tr.save()
    mean, std = video_latent_stats(tr.final_weights(), cfg, a.stats_clips, a.seed, device)
    return tr.finish(tc.machine_description(a.device),
                     dict(final_loss=round(total.item(), 5), latents_mean=mean, latents_std=std))


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
    loss = 0.0
    for n_fft in (256, 512, 1024, 2048):
        win = torch.hann_window(n_fft, device=p.device)
        sp = torch.stft(p, n_fft, hop_length=n_fft // 4, window=win, return_complex=True).abs()
        st = torch.stft(t, n_fft, hop_length=n_fft // 4, window=win, return_complex=True).abs()
        loss = loss + (torch.log(sp + 1e-3) - torch.log(st + 1e-3)).abs().mean() + (sp - st).abs().mean()
    return loss / 4


def train_audio(a, device):
    cfg = dict(demo_arch.AUDIO_VAE_CONFIG)
    W = demo_arch.params(demo_arch.init_audio_vae(cfg, torch.Generator().manual_seed(a.seed + 1)),
                         demo_arch.audio_trainable)
    W = {n: (t.detach().to(device).requires_grad_(True) if t.requires_grad else t.to(device)) for n, t in W.items()}
    tr = tc.Trainer(a.work, "audio_vae", W, demo_arch.audio_trainable, a.lr)
    while tr.progress(a.steps, a.max_seconds) < 1:
        rng, gen = tc.step_rng(a.seed, tr.step, stream=2)
        wave = audio_windows(rng, a.batch).to(device)
        lr = tc.lr_at(tr.step, a.steps, a.lr, min(50, a.steps // 4 + 1), progress=tr.progress(a.steps, a.max_seconds))
        z = vr.encode_audio_mean(wave, W, cfg)  # [B, 32, 40]
        zn = z + 0.1 * torch.randn(z.shape, generator=gen).to(device)
        y = vr.decode_audio(zn, W, cfg)[:, 0]  # [B, N]
        l1 = (y - wave).abs().mean()
        ls = stft_loss(y, wave)
        reg = z.pow(2).mean()
        loss = l1 + ls + 1e-3 * reg
        gn = tr.update(loss, lr)
        last = tr.progress(a.steps, a.max_seconds) >= 1
        if tr.step % a.log_every == 0 or last:
            snr = 10 * torch.log10(wave.pow(2).sum() / (y - wave).pow(2).sum().clamp_min(1e-12)).item()
            tr.log(loss=round(loss.item(), 5), lr=round(lr, 6), grad_norm=round(gn, 3), l1=round(l1.item(), 5),
                   stft=round(ls.item(), 4), snr_db=round(snr, 2), z_rms=round(reg.sqrt().item(), 3))
        if tr.step % a.save_every == 0 or last:
            tr.save()
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
