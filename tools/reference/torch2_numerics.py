"""numpy re-implementations of the torch 2.x / transformers 5.x float32 computations the engine reproduces bit
for bit, for goldens made without torch (python here has numpy only). Every value is rounded exactly as the torch
op rounds it: fp32 ops in numpy are IEEE per operation, and the one fused multiply-add (torch.linspace on an
AVX2 / AVX-512 CPU) is evaluated exactly with fractions and rounded once.

  - torch.linspace(start, end, steps, dtype=float32) on the CPU, torch 2.x
    (aten/src/ATen/native/cpu/RangeFactoriesKernel.cpp, scalar since pytorch#89048, torch 2.0):
        step = fp32((end - start) / (steps - 1))
        i <  steps // 2: start + step * i                 -> fma(step, i, start)
        i >= steps // 2: end - step * (steps - 1 - i)     -> fma(-step, steps - 1 - i, end)
    ATen's cpu/ kernels are compiled once per capability with GCC in GNU mode (-ffp-contract=fast); the AVX2
    and AVX-512 builds add -mfma, so each element is one fma (`fused=True`); the DEFAULT build
    (ATEN_CPU_CAPABILITY=default) rounds the product first (`fused=False`).
  - MiniMaxH3Scheduler.set_timesteps (diffusers): base = torch.linspace(1, 0, n) on the CPU in fp32,
    sigma = s * base / (1 + (s - 1) * base) (four separate fp32 ops), unique_consecutive, timesteps = 1 - sigma.
  - transformers 5.x vision_utils.get_vision_interpolation_indices_and_weights(mode="bilinear",
    align_corners=True) and Qwen3VLVisionModel.forward's `(pos_embed(idx) * w[:, :, None]).sum(1)`.
"""
from fractions import Fraction

import numpy as np

F32 = np.float32


def round_f32(value):
    """The float32 nearest to the rational `value`, ties to even."""
    x = F32(float(value))  # within one ulp of the answer (the double rounding can miss by one)
    best = None
    for c in (np.nextafter(x, F32(-np.inf)), x, np.nextafter(x, F32(np.inf))):
        d = abs(Fraction(float(c)) - value)
        odd = int(np.array(c, dtype=F32).view(np.uint32)) & 1
        if best is None or (d, odd) < best[0]:
            best = ((d, odd), c)
    return F32(best[1])


def fma_f32(a, b, c):
    """fp32 fma(a, b, c): a·b + c exact, rounded once."""
    return round_f32(Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c)))


def linspace_f32(start, end, steps, fused=True):
    """torch 2.x torch.linspace(start, end, steps, dtype=torch.float32) on the CPU."""
    if steps <= 0:
        return np.zeros(0, F32)
    start, end = F32(start), F32(end)
    if steps == 1:
        return np.array([start], F32)
    step = F32(end - start) / F32(steps - 1)
    half = steps // 2
    out = np.empty(steps, F32)
    for i in range(steps):
        if i < half:
            k = F32(i)
            out[i] = fma_f32(step, k, start) if fused else F32(start + F32(step * k))
        else:
            k = F32(steps - 1 - i)
            out[i] = fma_f32(-step, k, end) if fused else F32(end - F32(step * k))
    return out


def schedule(n, shift):
    """MiniMaxH3Scheduler.set_timesteps(n) with `shift`: (sigmas, timesteps) in fp32."""
    base = linspace_f32(1.0, 0.0, n)
    s = F32(shift)
    sig = (s * base) / (F32(1.0) + (F32(shift - 1.0) * base))
    keep = np.ones(sig.shape, bool)
    keep[1:] = sig[1:] != sig[:-1]
    sig = sig[keep].astype(F32)
    return sig, (F32(1.0) - sig[:-1]).astype(F32)


def euler(x, v, t, sigma, sigma_next):
    """MiniMaxH3Scheduler.step on fp32 samples: x0 from the timestep, ratio from the grid."""
    sig_t = F32(1.0) - F32(t)
    x0 = x + sig_t * v
    r = F32(sigma_next) / F32(sigma)
    return (r * x + (F32(1.0) - r) * x0).astype(F32)


def interp_axis(size, side):
    """Per-axis taps and weights of get_vision_interpolation_indices_and_weights (bilinear, align_corners):
    src = i·(side−1) / max(size−1, 1) in fp32 (a correctly rounded division, not linspace), floor, the taps
    floor and floor+1 clamped to the table, weights (1 − |src − floor − o|).clamp(min=0) for o = 0, 1."""
    idx = np.arange(size).astype(F32)
    src = (idx * F32(side - 1)) / F32(max(size - 1, 1))
    floor = np.floor(src).astype(F32)
    taps = np.stack([np.clip(floor.astype(np.int64) + o, 0, side - 1) for o in (0, 1)], axis=1)
    frac = (src - floor).astype(F32)
    w = np.stack([np.maximum(F32(1.0) - np.abs((frac - F32(o)).astype(F32)), F32(0.0)) for o in (0, 1)], axis=1)
    return taps, w.astype(F32)


def merge_order(h, w, m):
    """(row, col) of every patch of an h x w grid in spatial-merge-block order."""
    rows, cols = [], []
    for bh in range(h // m):
        for bw in range(w // m):
            for ih in range(m):
                for iw in range(m):
                    rows.append(bh * m + ih)
                    cols.append(bw * m + iw)
    return np.array(rows), np.array(cols)


def pos_embed(table, grids, merge, side):
    """Qwen3VLVisionModel's interpolated position embedding, transformers 5.x: indices/weights [N, 4] in tap
    order (h0,w0), (h0,w1), (h1,w0), (h1,w1); the table rows (the checkpoint's dtype, here given as fp32
    values) times the fp32 weights in fp32; summed over the 4 taps in fp32 from 0, in that order. The caller
    casts the result to the tower's dtype once (`pos_embeds.to(hidden_states.dtype)`)."""
    out = []
    for t, h, w in grids:
        th, wh = interp_axis(h, side)
        tw, ww = interp_axis(w, side)
        r, c = merge_order(h, w, merge)
        acc = np.zeros((len(r), table.shape[1]), F32)
        for a in (0, 1):
            for b in (0, 1):
                wt = (wh[r, a] * ww[c, b]).astype(F32)
                rows = table[th[r, a] * side + tw[c, b]].astype(F32)
                acc = (acc + (rows * wt[:, None]).astype(F32)).astype(F32)
        out.append(np.tile(acc, (t, 1)))
    return np.concatenate(out).astype(F32)
