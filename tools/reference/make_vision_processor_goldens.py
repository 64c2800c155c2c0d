#!/usr/bin/env python3
"""Qwen2-VL/Qwen3-VL image-processor goldens for tests/test_image.cpp, from transformers itself.

Run where transformers, torch and torchvision are installed (the GPU machine's python3), from the repo root:

    python3 tools/reference/make_vision_processor_goldens.py --out tests/data/images

Loads the image processor through AutoImageProcessor from the official processor/preprocessor_config.json
(copied below; it names Qwen2VLImageProcessorFast), records which class that gives, and runs it on the
formula images pattern(w, h) of make_image_goldens.py:
  - official config, a 256x256 image (smart_resize keeps it: no resampling) and a 96x64 image (below min_pixels:
    upscaled by the torchvision resize) -> grid_thw, FNV-1a 64 of the float32 pixel_values bytes, a few rows;
  - a small config (patch 4, merge 2, temporal 2, min 64, max 4096 pixels): 24x16 (kept) and 23x17 (resized to
    24x16) -> the whole pixel_values;
  - torch.nn.functional.interpolate(uint8, bicubic, antialias=True) and torchvision's v2 resize on small
    uint8 images (the resize the fast processor runs) -> the resized images.
Writes processor_goldens.safetensors and processor_goldens.json.
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
    "size": {"longest_edge": 16777216, "shortest_edge": 65536},
    "patch_size": 16,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "processor_class": "Qwen3VLProcessor",
    "image_processor_type": "Qwen2VLImageProcessorFast",
}


def pattern(w, h):
    y, x, c = np.meshgrid(np.arange(h), np.arange(w), np.arange(3), indexing="ij")
    return (((x * 37 + y * 91 + c * 53) ^ ((x * y * 7) >> 2) ^ (c * 11)) & 255).astype(np.uint8)


def fnv1a64(data: bytes) -> str:
    a = np.frombuffer(data, dtype=np.uint8)
    h = 0xCBF29CE484222325
    for b in a.tolist():
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def load(cfg, **kw):
    from transformers import AutoImageProcessor

    d = tempfile.mkdtemp()
    with open(os.path.join(d, "preprocessor_config.json"), "w") as f:
        json.dump(cfg, f)
    return AutoImageProcessor.from_pretrained(d, **kw)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    import PIL
    import torchvision
    import transformers
    from PIL import Image

    doc = {"versions": {"transformers": transformers.__version__, "torch": torch.__version__,
                        "torchvision": torchvision.__version__, "pillow": PIL.__version__,
                        "cpu_capability": torch.backends.cpu.get_cpu_capability()}}
    tensors = {}
    proc = load(OFFICIAL)
    doc["official_class"] = type(proc).__name__
    try:
        slow = load(OFFICIAL, use_fast=False)
        doc["slow_class"] = type(slow).__name__
    except Exception as e:  # noqa: BLE001
        slow = None
        doc["slow_class"] = f"unavailable: {e}"

    def run(p, w, h):
        out = p(images=[Image.fromarray(pattern(w, h))], return_tensors="pt")
        return out["pixel_values"].float().numpy(), out["image_grid_thw"][0].tolist()

    cases = []
    for w, h in [(256, 256), (96, 64)]:
        pv, grid = run(proc, w, h)
        entry = {"width": w, "height": h, "grid_thw": grid, "rows": pv.shape[0], "cols": pv.shape[1],
                 "fnv1a64": fnv1a64(pv.astype("<f4").tobytes())}
        tensors[f"official/{w}x{h}/head"] = torch.from_numpy(pv[:3].copy())
        tensors[f"official/{w}x{h}/tail"] = torch.from_numpy(pv[-2:].copy())
        if slow is not None:
            spv, _ = run(slow, w, h)
            entry["slow_max_abs_diff"] = float(np.abs(spv - pv).max()) if spv.shape == pv.shape else "shape"
        cases.append(entry)
    doc["official"] = cases

    small_cfg = dict(OFFICIAL, patch_size=4, size={"longest_edge": 4096, "shortest_edge": 64})
    small = load(small_cfg)
    doc["small_config"] = {"patch_size": 4, "temporal_patch_size": 2, "merge_size": 2, "min_pixels": 64,
                           "max_pixels": 4096}
    sc = []
    for w, h in [(24, 16), (23, 17), (40, 7)]:
        pv, grid = run(small, w, h)
        tensors[f"small/{w}x{h}"] = torch.from_numpy(pv.copy())
        sc.append({"width": w, "height": h, "grid_thw": grid})
    doc["small"] = sc

    from torchvision.transforms.v2 import functional as F

    rs = []
    for (sw, sh), (w, h) in [((37, 23), (13, 29)), ((20, 15), (57, 41)), ((64, 48), (32, 32)), ((30, 30), (30, 17))]:
        src = torch.from_numpy(pattern(sw, sh)).permute(2, 0, 1).contiguous()
        a = torch.nn.functional.interpolate(src[None], size=(h, w), mode="bicubic", antialias=True,
                                            align_corners=False)[0]
        b = F.resize(src, [h, w], interpolation=F.InterpolationMode.BICUBIC, antialias=True)
        tensors[f"torch_resize/{sw}x{sh}_{w}x{h}"] = a.permute(1, 2, 0).contiguous()
        rs.append({"src_width": sw, "src_height": sh, "width": w, "height": h,
                   "torchvision_equal": bool(torch.equal(a, b)), "dtype": str(a.dtype)})
    doc["torch_resize"] = rs

    safetensors_io.save(os.path.join(args.out, "processor_goldens.safetensors"), tensors,
                        {"generator": "tools/reference/make_vision_processor_goldens.py"})
    with open(os.path.join(args.out, "processor_goldens.json"), "w") as f:
        json.dump(doc, f, indent=1)
    print(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
