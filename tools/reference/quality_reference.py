"""Golden numbers for `h3-engine compare` (src/pipeline/quality_metrics.*), from numpy written from the
definitions, following skimage's conventions:

  PSNR  10·log10(255² / MSE), MSE over every R, G, B value of the frame.
  SSIM  skimage.metrics.structural_similarity(a, b, gaussian_weights=True, sigma=1.5,
        use_sample_covariance=False, data_range=255, channel_axis=-1): per channel, scipy's gaussian_filter
        (truncate 3.5 → an 11-tap normalized kernel, mode 'nearest', axis 0 then axis 1) of x, y, x², y², xy
        in float64; population (co)variances; C1 = (0.01·255)², C2 = (0.03·255)²; the SSIM map cropped by 5
        pixels on every side and averaged; the channel means averaged.
  audio cosine ΣAB/√(ΣA²ΣB²), SNR 10·log10(ΣA²/Σ(A−B)²), RMSE, RMS ratio rms(B)/rms(A), rel-RMS.

The synthetic inputs are integer formulas that tests/test_compare.cpp generates too.

    /usr/bin/python3 tools/reference/quality_reference.py --out tests/data/compare/quality_golden.json
"""
import argparse
import json

import numpy as np

SIGMA, TRUNCATE, K1, K2, RANGE = 1.5, 3.5, 0.01, 0.03, 255.0


# ---- synthetic inputs (keep in sync with tests/test_compare.cpp)
def video_pair(case, frames, h, w):
    f, y, x, c = np.meshgrid(np.arange(frames), np.arange(h), np.arange(w), np.arange(3), indexing="ij")
    if case == "offset_noise":
        a = (x * x + 3 * x * y + 7 * y + 50 * c + 13 * f) % 256
        b = np.clip(a + (x * 5 + y * 11 + c * 3 + f * 7) % 17 - 8, 0, 255)
    elif case == "smooth_noise":
        a = (x * 4 + y * 6 + 40 * c + f * 5) % 256
        b = np.clip(a + (x * 7 + y * 13 + c * 5 + f * 3) % 29 - 14, 0, 255)
    elif case == "inverted":
        a = (x * 31 + y * 17 + c * 101 + ((x * y * 7) % 23) * 5 + f * 3) % 256
        b = 255 - a
    else:
        raise ValueError(case)
    return a.astype(np.uint8), b.astype(np.uint8)


CASES = ("offset_noise", "smooth_noise", "inverted")


def audio_pair(channels, n):
    c, i = np.meshgrid(np.arange(channels), np.arange(n), indexing="ij")
    a = (((i * 37 + c * 11) % 101) - 50) / 64.0
    b = a * 0.75 + (((i * 13 + c * 5) % 7) - 3) / 256.0
    return a.astype(np.float32), b.astype(np.float32)


# ---- metrics
def psnr(a, b):
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float("inf") if mse == 0 else float(10 * np.log10(RANGE * RANGE / mse))


def gaussian_kernel():
    r = int(TRUNCATE * SIGMA + 0.5)
    x = np.arange(-r, r + 1, dtype=np.float64)
    k = np.exp(-0.5 * x * x / (SIGMA * SIGMA))
    return k / k.sum(), r


def correlate1d_nearest(img, k, r, axis):
    pad = [(0, 0)] * img.ndim
    pad[axis] = (r, r)
    p = np.pad(img, pad, mode="edge")
    out = np.zeros_like(img)
    n = img.shape[axis]
    for t in range(2 * r + 1):
        out += k[t] * np.take(p, np.arange(t, t + n), axis=axis)
    return out


def gaussian_filter(img):
    k, r = gaussian_kernel()
    return correlate1d_nearest(correlate1d_nearest(img, k, r, 0), k, r, 1)


def ssim_channel(x, y):
    x = x.astype(np.float64)
    y = y.astype(np.float64)
    ux, uy = gaussian_filter(x), gaussian_filter(y)
    uxx, uyy, uxy = gaussian_filter(x * x), gaussian_filter(y * y), gaussian_filter(x * y)
    vx, vy, vxy = uxx - ux * ux, uyy - uy * uy, uxy - ux * uy
    c1, c2 = (K1 * RANGE) ** 2, (K2 * RANGE) ** 2
    s = ((2 * ux * uy + c1) * (2 * vxy + c2)) / ((ux ** 2 + uy ** 2 + c1) * (vx + vy + c2))
    _, r = gaussian_kernel()
    return float(s[r:-r, r:-r].mean(dtype=np.float64))


def ssim_rgb(a, b):
    ch = [ssim_channel(a[..., c], b[..., c]) for c in range(3)]
    return float(np.mean(ch)), ch


def signal(a, b):
    a = a.astype(np.float64).ravel()
    b = b.astype(np.float64).ravel()
    d = a - b
    aa, bb, dd = (a * a).sum(), (b * b).sum(), (d * d).sum()
    n = a.size
    return {
        "count": n,
        "cosine": float((a * b).sum() / np.sqrt(aa * bb)),
        "snr_db": float(10 * np.log10(aa / dd)),
        "rmse": float(np.sqrt(dd / n)),
        "rms_ratio": float(np.sqrt(bb / n) / np.sqrt(aa / n)),
        "rel_rms": float(np.sqrt(dd / aa)),
        "max_abs_diff": float(np.abs(d).max()),
    }


def self_test():
    # identical → SSIM exactly 1, PSNR inf; constant images → SSIM of the mean term alone
    a, _ = video_pair("offset_noise", 1, 16, 16)
    assert ssim_rgb(a[0], a[0])[0] == 1.0 and psnr(a[0], a[0]) == float("inf")
    x = np.full((16, 16, 3), 100, np.uint8)
    y = np.full((16, 16, 3), 110, np.uint8)
    c1 = (K1 * RANGE) ** 2
    want = (2 * 100 * 110 + c1) / (100 ** 2 + 110 ** 2 + c1)
    assert abs(ssim_rgb(x, y)[0] - want) < 1e-12, (ssim_rgb(x, y)[0], want)
    assert abs(psnr(x, y) - 20 * np.log10(255 / 10)) < 1e-12
    k, r = gaussian_kernel()
    assert r == 5 and k.size == 11
    try:  # cross-check against skimage where it is installed (Debian: python3-skimage)
        from skimage.metrics import structural_similarity
    except ImportError:
        print("skimage not installed: SSIM not cross-checked")
        return
    for case in CASES:
        a, b = video_pair(case, 2, 20, 24)
        for f in range(2):
            want = structural_similarity(a[f], b[f], gaussian_weights=True, sigma=SIGMA,
                                         use_sample_covariance=False, data_range=RANGE, channel_axis=-1)
            assert abs(ssim_rgb(a[f], b[f])[0] - want) < 1e-12, (case, f, want)
    print("SSIM matches skimage", __import__("skimage").__version__)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/data/compare/quality_golden.json")
    args = ap.parse_args()
    self_test()
    frames, h, w = 3, 20, 24
    out = {"video": {"frames": frames, "height": h, "width": w, "cases": {}}, "audio": {}}
    for case in CASES:
        a, b = video_pair(case, frames, h, w)
        per = [ssim_rgb(a[f], b[f]) for f in range(frames)]
        out["video"]["cases"][case] = {
            "psnr": [psnr(a[f], b[f]) for f in range(frames)],
            "ssim": [p[0] for p in per],
            "ssim_channels_frame0": per[0][1],
        }
    channels, n = 2, 1000
    a, b = audio_pair(channels, n)
    out["audio"] = {
        "channels": channels,
        "samples": n,
        "overall": signal(a, b),
        "per_channel": [signal(a[c], b[c]) for c in range(channels)],
    }
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()
