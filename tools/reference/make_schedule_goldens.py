#!/usr/bin/env python3
"""Sigma-grid and linspace goldens as the official pipeline computes them on torch 2.x, with numpy only
(torch2_numerics.py re-implements the kernels; check_torch2_numerics.py verifies them against torch on the GPU
machine). Writes, into tests/data/pipeline/:

  schedule.safetensors  sigmas_{video,audio}_N{n} and timesteps_{video,audio}_N{n} (MiniMaxH3Scheduler with
                        shift 12 / 3) for n = 2..64, 100, 250, and one Euler update (euler_x, euler_v: numpy
                        default_rng(5) normals; euler_out_step{7,48} on the n = 50 video grid)
  linspace.safetensors  torch.linspace(start, end, n) in fp32 on the CPU: fused_{case} (AVX2 / AVX-512 builds,
                        one fma per element) and unfused_{case} (ATEN_CPU_CAPABILITY=default), for the cases
                        in CASES (the sampler's linspace(1, 0, n), and wide and negative ranges)

    /usr/bin/python3 tools/reference/make_schedule_goldens.py
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import safetensors_io as sio  # noqa: E402
import torch2_numerics as tn  # noqa: E402

OUT = os.path.join(HERE, "..", "..", "tests", "data", "pipeline")
GRID_POINTS = list(range(2, 65)) + [100, 250]
# name -> (start, end, steps)
CASES = {"u1to0_n16": (1.0, 0.0, 16), "u1to0_n50": (1.0, 0.0, 50), "u1to0_n1000": (1.0, 0.0, 1000),
         "s0to47_n17": (0.0, 47.0, 17), "s0to47_n63": (0.0, 47.0, 63), "neg_n33": (-3.25, 7.5, 33),
         "one": (2.5, 9.0, 1), "two": (2.5, 9.0, 2)}


def main():
    sch = {}
    for n in GRID_POINTS:
        for shift, tag in ((12.0, "video"), (3.0, "audio")):
            s, t = tn.schedule(n, shift)
            sch[f"sigmas_{tag}_N{n}"] = s
            sch[f"timesteps_{tag}_N{n}"] = t
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(257).astype(np.float32) * np.float32(1.7)).astype(np.float32)
    v = rng.standard_normal(257).astype(np.float32)
    s, t = tn.schedule(50, 12.0)
    sch["euler_x"], sch["euler_v"] = x, v
    sch["euler_out_step7"] = tn.euler(x, v, t[7], s[7], s[8])
    sch["euler_out_step48"] = tn.euler(x, v, t[48], s[48], s[49])
    meta = {"source": "tools/reference/make_schedule_goldens.py (numpy re-implementation of torch 2.x)"}
    sio.save(os.path.join(OUT, "schedule.safetensors"), sch, meta)

    lin = {}
    for name, (a, b, n) in CASES.items():
        lin[f"fused_{name}"] = tn.linspace_f32(a, b, n, fused=True)
        lin[f"unfused_{name}"] = tn.linspace_f32(a, b, n, fused=False)
    meta["cases"] = ";".join(f"{k}={a},{b},{n}" for k, (a, b, n) in CASES.items())
    sio.save(os.path.join(OUT, "linspace.safetensors"), lin, meta)


if __name__ == "__main__":
    main()
