"""torchaudio's sinc resampler re-implemented with plain torch ops, and the goldens for the C++ resampler.

    /usr/bin/python3 tools/reference/audio_resample_reference.py --out tests/data/audio_resample
    python3 tools/reference/audio_resample_reference.py --check-torchaudio   # where torchaudio is installed

Written from reading torchaudio's `functional.functional._get_sinc_resample_kernel` /
`_apply_sinc_resample_kernel` and `transforms.Resample` (no torchaudio needed; the torch ops are the ones
torchaudio runs, in the same order and dtypes, so on the same torch build the results are torchaudio's):

  * rates reduced by their gcd; base = min(orig, new) · rolloff; width = ceil(lowpass_filter_width · orig / base);
  * kernel [new, 1, 2·width + orig]: t = (−j / new + (i − width) / orig) · base, clamped to ±width_lp;
    hann window cos²(t·π / width_lp / 2); sinc(π·t) (1 at 0); times window · base / orig;
  * signal zero-padded (width, width + orig), conv1d with stride orig, phases interleaved, cut to
    ceil(new · N / orig).

The kernel's precision is the one thing the two public entry points do differently:
  * `transforms.Resample(orig, new)` (dtype=None; what the diffusers MiniMax-H3 pipeline calls): the index grid
    in float64, but `arange(0, -new, -1)` is int64 and `/ new` makes it float32 first; everything after in float64,
    the kernel cached as float32 ("transform");
  * `functional.resample(waveform, ...)` passes waveform.dtype: for float32 input the whole kernel is computed in
    float32 ("functional").

Goldens (tests/data/audio_resample/goldens.safetensors): for each of 44100, 48000, 16000, 22050 → 32000:
  in_<orig>            [2, N] f32 formula waveform (N odd, ~30 ms)
  transform_<orig>     [2, ceil(32000·N/orig)] f32 (transforms.Resample)
  functional_<orig>    [2, ceil(32000·N/orig)] f32 (functional.resample on f32)
  kernel_<orig>        the transform's [new, 2·width + orig] kernel (f32), for the 48000 and 16000 cases
  kernel_rows_44100, kernel_rows_44100_functional   phases 0, 1, 160, 319 of the 44100 kernels [4, 459]
plus conv_error.json: max |torch's fp32 conv − the same conv accumulated in float64| per case (the part of the
golden a C++ float64 accumulation cannot reproduce bit for bit).
"""
import argparse
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

RATES = (44100, 48000, 16000, 22050)
NEW_RATE = 32000
KERNEL_ROWS = (0, 1, 160, 319)


def sinc_kernel(orig, new, lowpass_filter_width=6, rolloff=0.99, dtype=None):
    """The sinc_interp_hann kernel, [new/gcd, 1, 2·width + orig/gcd], and width. dtype None: the transform's
    precision (float64 math, float32 result); torch.float32: functional.resample on float32 input."""
    g = math.gcd(orig, new)
    orig, new = orig // g, new // g
    base = min(orig, new) * rolloff
    width = math.ceil(lowpass_filter_width * orig / base)
    grid_dtype = torch.float64 if dtype is None else dtype
    idx = torch.arange(-width, width + orig, dtype=grid_dtype)[None, None] / orig
    # dtype None: an int64 arange; dividing it by an int gives float32 before the float64 grid is added.
    t = torch.arange(0, -new, -1, dtype=dtype)[:, None, None] / new + idx
    t = t * base
    t = t.clamp(-lowpass_filter_width, lowpass_filter_width)
    window = torch.cos(t * math.pi / lowpass_filter_width / 2) ** 2
    t = t * math.pi
    scale = base / orig
    k = torch.where(t == 0, torch.tensor(1.0).to(t), t.sin() / t)
    k = k * (window * scale)
    if dtype is None:
        k = k.to(torch.float32)
    return k, width


def apply_kernel(waveform, orig, new, kernel, width):
    g = math.gcd(orig, new)
    orig, new = orig // g, new // g
    n, length = waveform.shape
    x = F.pad(waveform, (width, width + orig))
    y = F.conv1d(x[:, None], kernel, stride=orig)  # [n, new, L]: phase j of output block l
    y = y.transpose(1, 2).reshape(n, -1)
    return y[..., : math.ceil(new * length / orig)]


def resample(waveform, orig, new, variant="transform"):
    if orig == new:
        return waveform
    k, width = sinc_kernel(orig, new, dtype=None if variant == "transform" else waveform.dtype)
    return apply_kernel(waveform, orig, new, k, width)


def formula_waveform(rate, n):
    i = torch.arange(n, dtype=torch.float64)
    s = i / rate
    left = (0.45 * torch.sin(2 * math.pi * 440.0 * s) + 0.25 * torch.sin(2 * math.pi * 0.41 * rate * s)
            + 0.2 * torch.sin(i * i * 7e-4))
    right = 0.6 * torch.cos(2 * math.pi * 1234.5 * s + 0.3) * torch.exp(-3.0 * s) + 0.3 * torch.sin(i * 0.9)
    w = torch.stack([left, right]).float()
    w[:, n // 2] = 0.95  # a click: broadband
    return w


def check_against_torchaudio():
    """Where torchaudio is installed: this re-implementation against the real thing, on the golden inputs."""
    import torchaudio

    print("torch", torch.__version__, "torchaudio", torchaudio.__version__)
    worst = 0.0
    for orig in RATES:
        x = formula_waveform(orig, (orig * 3) // 100 + 7)
        for variant, real in (("transform", torchaudio.transforms.Resample(orig, NEW_RATE)(x)),
                              ("functional", torchaudio.functional.resample(x, orig, NEW_RATE))):
            ours = resample(x, orig, NEW_RATE, variant)
            d = float((ours - real).abs().max())
            worst = max(worst, d)
            print(f"{orig} -> {NEW_RATE} {variant}: max |ours - torchaudio| = {d:.3g}, shapes {tuple(ours.shape)} "
                  f"{tuple(real.shape)}")
        k_ours, _ = sinc_kernel(orig, NEW_RATE)
        k_real = torchaudio.transforms.Resample(orig, NEW_RATE).kernel
        print(f"   transform kernel bit-identical: {torch.equal(k_ours, k_real)}")
    return worst


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--check-torchaudio", action="store_true", help="compare with an installed torchaudio")
    a = ap.parse_args()
    torch.set_grad_enabled(False)
    torch.set_num_threads(1)
    if a.check_torchaudio:
        check_against_torchaudio()
        return
    os.makedirs(a.out, exist_ok=True)
    out, conv_err = {}, {}
    for orig in RATES:
        n = (orig * 3) // 100 + 7  # ~30 ms, odd
        x = formula_waveform(orig, n)
        out[f"in_{orig}"] = x
        yt = resample(x, orig, NEW_RATE, "transform")
        yf = resample(x, orig, NEW_RATE, "functional")
        assert yt.shape == (2, math.ceil(NEW_RATE * n / orig)), yt.shape
        out[f"transform_{orig}"] = yt
        out[f"functional_{orig}"] = yf
        k, width = sinc_kernel(orig, NEW_RATE)
        if orig in (48000, 16000):
            out[f"kernel_{orig}"] = k[:, 0, :].contiguous()
        if orig == 44100:  # phases 0, 1, 160, 319 of both precisions (the whole kernels are 320 x 459)
            rows = torch.tensor(KERNEL_ROWS)
            out["kernel_rows_44100"] = k[rows, 0, :].contiguous()
            kf, _ = sinc_kernel(orig, NEW_RATE, dtype=torch.float32)
            out["kernel_rows_44100_functional"] = kf[rows, 0, :].contiguous()
        exact = apply_kernel(x.double(), orig, NEW_RATE, k.double(), width)
        conv_err[str(orig)] = {
            "transform_vs_float64_conv": float((yt.double() - exact).abs().max()),
            "transform_vs_functional": float((yt - yf).abs().max()),
            "kernel_taps": int(k.shape[-1]), "phases": int(k.shape[0]), "width": width,
        }
        print(orig, "->", NEW_RATE, "N", n, "out", tuple(yt.shape), conv_err[str(orig)])
    safetensors_io.save(os.path.join(a.out, "goldens.safetensors"), out)
    with open(os.path.join(a.out, "conv_error.json"), "w") as f:
        json.dump(conv_err, f, indent=2)


if __name__ == "__main__":
    main()
