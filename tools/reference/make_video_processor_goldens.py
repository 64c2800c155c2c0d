#!/usr/bin/env python3
"""Qwen3-VL video-processor goldens for tests/test_ref_conditioner.cpp (VideoProcessor.MatchesTransformers), from
transformers itself.

Run where transformers, torch and torchvision are installed (the GPU machine's python3), from the repo root:

    python3 tools/reference/make_video_processor_goldens.py --out tests/data/vision

Loads the video processor through AutoVideoProcessor from the official processor/video_preprocessor_config.json
(copied below; it names Qwen3VLVideoProcessor) and calls it the way diffusers' MiniMaxH3Ref2VATextEncoderStep
does: videos=[np.stack(frames)], do_sample_frames=False, return_tensors="pt". Frames are the formula
frame(k, w, h) below (frame index k). Cases:
  - official config: 5×32×64 (kept: the video of tests/data/vision/ref2va.safetensors), 3×50×70 (→ 64×64),
    4×100×150 (→ 96×160), 2×20×50 (a side below 32: scaled up first), 6×300×200, 1×64×64 (rejected) ->
    grid_thw, FNV-1a 64 of the float32 pixel_values_videos bytes, the first and the last row;
  - the same with cap_pixels_per_frame=True where this transformers has it: 2×720×1280 (capped → 640×1152);
  - a small config (patch 4, merge 2, temporal 2, min 64, max 4096 pixels over the clip): 3×24×16 (kept),
    5×23×17 (resized), 2×40×7 -> the whole pixel_values_videos.
Writes video_processor_goldens.safetensors and video_processor_goldens.json (versions, the class, whether
cap_pixels_per_frame exists, per case the sizes and either the outputs or the error).
"""
import argparse
import json
import os
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

OFFICIAL = {
    "size": {"longest_edge": 25165824, "shortest_edge": 4096},
    "patch_size": 16,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "processor_class": "Qwen3VLProcessor",
    "video_processor_type": "Qwen3VLVideoProcessor",
}
SMALL = dict(OFFICIAL, patch_size=4, size={"longest_edge": 4096, "shortest_edge": 64})

OFFICIAL_CASES = [(5, 32, 64), (3, 50, 70), (4, 100, 150), (2, 20, 50), (6, 300, 200), (1, 64, 64)]
CAP_CASES = [(2, 720, 1280)]
SMALL_CASES = [(3, 24, 16), (5, 23, 17), (2, 40, 7)]


def frame(k, w, h):
    y, x, c = np.meshgrid(np.arange(h), np.arange(w), np.arange(3), indexing="ij")
    return (((x * 37 + y * 91 + c * 53 + k * 17) ^ ((x * y * 7) >> 2) ^ (c * 11)) & 255).astype(np.uint8)


def fnv1a64(data: bytes) -> str:
    a = np.frombuffer(data, dtype=np.uint8)
    h = 0xCBF29CE484222325
    for b in a.tolist():
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def load(cfg):
    from transformers import AutoVideoProcessor

    d = tempfile.mkdtemp()
    with open(os.path.join(d, "video_preprocessor_config.json"), "w") as f:
        json.dump(cfg, f)
    return AutoVideoProcessor.from_pretrained(d)


def run(proc, t, h, w, **kw):
    video = np.stack([frame(k, w, h) for k in range(t)])
    out = proc(videos=[video], do_sample_frames=False, return_tensors="pt", **kw)
    return out["pixel_values_videos"].float().numpy(), out["video_grid_thw"][0].tolist()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    import torchvision
    import transformers

    doc = {"versions": {"transformers": transformers.__version__, "torch": torch.__version__,
                        "torchvision": torchvision.__version__,
                        "cpu_capability": torch.backends.cpu.get_cpu_capability()}}
    tensors = {}
    proc = load(OFFICIAL)
    doc["official_class"] = type(proc).__name__
    doc["has_cap_pixels_per_frame"] = hasattr(proc, "cap_pixels_per_frame")
    doc["official_config"] = {"patch_size": 16, "temporal_patch_size": 2, "merge_size": 2, "min_pixels": 4096,
                              "max_pixels": 25165824}
    doc["small_config"] = {"patch_size": 4, "temporal_patch_size": 2, "merge_size": 2, "min_pixels": 64,
                           "max_pixels": 4096}

    def case(p, key, t, h, w, full, **kw):
        entry = {"frames": t, "height": h, "width": w}
        try:
            pv, grid = run(p, t, h, w, **kw)
        except Exception as e:  # noqa: BLE001
            entry["error"] = f"{type(e).__name__}: {e}"
            return entry
        name = f"{key}/{t}x{h}x{w}"
        entry.update(grid_thw=grid, rows=pv.shape[0], cols=pv.shape[1], fnv1a64=fnv1a64(pv.astype("<f4").tobytes()))
        if full:
            tensors[name] = torch.from_numpy(pv.copy())
        else:
            tensors[name + "/head"] = torch.from_numpy(pv[:1].copy())
            tensors[name + "/tail"] = torch.from_numpy(pv[-1:].copy())
        return entry

    doc["official"] = [case(proc, "official", t, h, w, False) for t, h, w in OFFICIAL_CASES]
    if doc["has_cap_pixels_per_frame"]:
        doc["official_cap"] = [case(proc, "official_cap", t, h, w, False, cap_pixels_per_frame=True)
                               for t, h, w in CAP_CASES]
    small = load(SMALL)
    doc["small"] = [case(small, "small", t, h, w, True) for t, h, w in SMALL_CASES]

    safetensors_io.save(os.path.join(args.out, "video_processor_goldens.safetensors"), tensors,
                        {"generator": "tools/reference/make_video_processor_goldens.py"})
    with open(os.path.join(args.out, "video_processor_goldens.json"), "w") as f:
        json.dump(doc, f, indent=1)
    print(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
