#!/usr/bin/env python3
"""The vision tower's interpolated position embedding as transformers 5.x computes it (torch2_numerics.pos_embed:
vision_utils.get_vision_interpolation_indices_and_weights, bilinear with aligned corners, then
`(pos_embed(indices) * weights[:, :, None]).sum(1)` in fp32), with numpy only, on the golden tiny checkpoint's
8x8 table (tests/data/vision/text_encoder, bf16). Writes tests/data/vision/pos_embed.safetensors:

  grids [G, 3] i64 (t, h, w in patches), pos [sum t*h*w, hidden] f32 (the fp32 sum; the tower adds it after one
  rounding to its dtype), and linspace_rows: how many patch rows take another position than the torch.linspace
  grid that transformers < 5.16 used (documentation; the grids are picked so that some do).

    /usr/bin/python3 tools/reference/make_vision_pos_goldens.py
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import safetensors_io as sio  # noqa: E402
import torch2_numerics as tn  # noqa: E402

DATA = os.path.join(HERE, "..", "..", "tests", "data", "vision")
MERGE = 2
GRIDS = [(1, 8, 12), (1, 6, 4), (2, 4, 4), (1, 16, 20), (1, 2, 4), (1, 12, 14)]


def main():
    shard = os.path.join(DATA, "text_encoder", "model-00002-of-00002.safetensors")
    table = sio.load_numpy(shard)[0]["model.visual.pos_embed.weight"]
    side = int(round(np.sqrt(table.shape[0])))
    assert side * side == table.shape[0]
    pos = tn.pos_embed(table, GRIDS, MERGE, side)
    changed = 0
    for _, h, w in GRIDS:
        for n in (h, w):
            src = (np.arange(n).astype(np.float32) * np.float32(side - 1)) / np.float32(max(n - 1, 1))
            changed += int((src != tn.linspace_f32(0.0, side - 1, n)).sum())
    assert changed > 0, "no grid where the closed form and linspace differ: pick other grids"
    sio.save(os.path.join(DATA, "pos_embed.safetensors"),
             {"grids": np.array(GRIDS, np.int64), "pos": pos, "linspace_rows": np.array([changed], np.int64)},
             {"source": "tools/reference/make_vision_pos_goldens.py (numpy re-implementation of transformers 5.x)"})


if __name__ == "__main__":
    main()
