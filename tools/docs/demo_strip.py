#!/usr/bin/env python3
"""Writes docs/demo_frames.png, the README's picture: every 8th frame (0, 8, ..., 56) of the embedded demo
model's clip for the README's prompt (seed 1, 30 steps, its native 128x64, 107 frames), side by side with a
2-pixel white gap, through the h3engine module (the same flow as `generate`).

usage: PYTHONPATH=build/python python3 tools/docs/demo_strip.py [OUT.png]
"""
import struct
import sys
import zlib
from pathlib import Path

import numpy as np

import h3engine

ROOT = Path(__file__).resolve().parent.parent.parent
PROMPT = "a blue square bounces to the right on a light background"
FRAMES = range(0, 64, 8)
GAP = 2


def write_png(path, rgb):
    """An 8-bit RGB PNG (no filter) from a uint8 [H, W, 3] array."""
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[y].tobytes() for y in range(h))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")
    Path(path).write_bytes(png)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "docs" / "demo_frames.png")
    engine = h3engine.Engine(str(ROOT / "models" / "h3-demo"), device="cpu")
    r = engine.generate(prompt=PROMPT, size="128x64", frames=107, steps=30, seed=1)
    frames = r.frames  # uint8 [F, H, W, 3]
    _, h, w, _ = frames.shape
    strip = np.full((h, len(FRAMES) * (w + GAP) - GAP, 3), 255, dtype=np.uint8)
    for k, f in enumerate(FRAMES):
        strip[:, k * (w + GAP):k * (w + GAP) + w] = frames[f]
    write_png(out, strip)
    print(f"{out}: frames {list(FRAMES)} of {frames.shape[0]}, {strip.shape[1]}x{strip.shape[0]}")


if __name__ == "__main__":
    main()
