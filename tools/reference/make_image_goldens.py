#!/usr/bin/python3
"""Image input and keyframe-preparation goldens for tests/test_image.cpp (PIL 9.4 + numpy, /usr/bin/python3).

Writes into tests/data/images/:
  - small test images written by PIL (PNG in every PIL mode the loader meets, 16-bit PNGs written by hand,
    JPEG 4:2:0 / 4:4:4 / progressive / gray / CMYK / with EXIF orientations in both byte orders, WebP lossless,
    lossless with alpha, lossy and with EXIF), each a few KB;
  - goldens.safetensors (U8 unless noted):
      decode/<file>      what the reference's loader gives: ImageOps.exif_transpose(Image.open(f)).convert("RGB")
      resize/<case>      Image.resize((w, h), filter) of the formula image pattern(sw, sh) (see below)
      keyframe/<case>    the reference's fl2va keyframe preparation (MiniMaxH3ResizeStep arithmetic) of pattern
                         images onto small explicit canvases
  - goldens.json: the resize/keyframe cases (sizes, filters, canvases, cover plans), the canvas rule for
    keyframe sizes, smart_resize for many sizes, and keyframe preparations on the default (768-short-edge)
    canvas given as an FNV-1a 64 hash of the RGB bytes plus a few pixels.

pattern(w, h)[y, x, c] = ((x*37 + y*91 + c*53) ^ ((x*y*7) >> 2) ^ (c*11)) & 255 — tests/test_image.cpp computes the
same pixels. Deterministic: a second run writes identical files.
"""

import argparse
import io
import json
import math
import os
import struct
import sys
import zlib

import numpy as np
from PIL import Image, ImageOps, PngImagePlugin

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

FILTERS = {
    "box": Image.BOX,
    "bilinear": Image.BILINEAR,
    "hamming": Image.HAMMING,
    "bicubic": Image.BICUBIC,
    "lanczos": Image.LANCZOS,
}


def pattern(w, h):
    y, x, c = np.meshgrid(np.arange(h), np.arange(w), np.arange(3), indexing="ij")
    v = ((x * 37 + y * 91 + c * 53) ^ ((x * y * 7) >> 2) ^ (c * 11)) & 255
    return v.astype(np.uint8)


def fnv1a64(data: bytes) -> str:
    h = 0xCBF29CE484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


# ---- the reference's geometry, re-stated -----------------------------------------------------------------
def resolve_canvas_size(aw, ah):
    """diffusers resolve_canvas_size(width, height) -> (height, width)."""
    ratio = aw / ah
    if not 0.25 <= ratio <= 4:
        return None
    if ratio >= 1:
        w, h = 768 * ratio, 768.0
    else:
        w, h = 768.0, 768 / ratio
    if w * h > 768 * 1344:
        s = (768 * 1344 / (w * h)) ** 0.5
        w, h = w * s, h * s
    return max(32, round(h / 32) * 32), max(32, round(w / 32) * 32)


def cover_plan(w0, h0, W, H):
    scale = max(W / w0, H / h0)
    rw, rh = max(W, round(w0 * scale)), max(H, round(h0 * scale))
    return rw, rh, max(0, (rw - W) // 2), max(0, (rh - H) // 2)


def prepare_keyframes(images, height=None, width=None):
    """MiniMaxH3ResizeStep: the first keyframe in packed order stretched, the second cover-cropped."""
    if height is None:
        height, width = resolve_canvas_size(*images[0].size)
    out = []
    for i, im in enumerate(images):
        if im.size == (width, height):
            out.append(im)
        elif i == 0:
            out.append(im.resize((width, height), Image.LANCZOS))  # VaeImageProcessor resize_mode="default"
        else:
            rw, rh, left, top = cover_plan(im.size[0], im.size[1], width, height)
            out.append(im.resize((rw, rh), Image.LANCZOS).crop((left, top, left + width, top + height)))
    return (height, width), out


def smart_resize(height, width, factor=32, min_pixels=65536, max_pixels=16777216):
    if max(height, width) / min(height, width) > 200:
        return None
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


# ---- EXIF blocks and a minimal PNG writer (16-bit modes PIL cannot write) -------------------------------
def exif_block(orientation, big_endian):
    if big_endian:
        tiff = b"MM\x00*" + struct.pack(">I", 8) + struct.pack(">H", 1)
        tiff += struct.pack(">HHI", 0x0112, 3, 1) + struct.pack(">HH", orientation, 0) + struct.pack(">I", 0)
    else:
        # Two entries, Orientation second, so the parser has to walk the IFD.
        tiff = b"II*\x00" + struct.pack("<I", 8) + struct.pack("<H", 2)
        tiff += struct.pack("<HHI", 0x010F, 2, 4) + b"H3\x00\x00"  # Make, ASCII "H3"
        tiff += struct.pack("<HHI", 0x0112, 3, 1) + struct.pack("<HH", orientation, 0) + struct.pack("<I", 0)
    return b"Exif\x00\x00" + tiff


def png_chunk(tag, data):
    return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)


def write_png16(path, arr16, color_type):
    h, w = arr16.shape[:2]
    raw = b"".join(b"\x00" + arr16[y].astype(">u2").tobytes() for y in range(h))
    data = b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 16, color_type, 0, 0, 0))
    data += png_chunk(b"IDAT", zlib.compress(raw, 9)) + png_chunk(b"IEND", b"")
    with open(path, "wb") as f:
        f.write(data)


def make_test_images(d):
    """Writes the decoder inputs; returns their file names."""
    files = []

    def save(name, im, fmt, **kw):
        im.save(os.path.join(d, name), fmt, **kw)
        files.append(name)

    base = Image.fromarray(pattern(23, 17))
    # PNG, every mode PIL's loader hands to convert("RGB").
    save("png_rgb.png", base, "PNG")
    alpha = Image.fromarray(((np.arange(23 * 17).reshape(17, 23) * 13) % 256).astype(np.uint8))
    rgba = base.copy()
    rgba.putalpha(alpha)
    save("png_rgba.png", rgba, "PNG")
    save("png_l.png", base.convert("L"), "PNG")
    la = base.convert("L")
    la.putalpha(alpha)
    save("png_la.png", la, "PNG")
    pal = base.quantize(colors=40)
    save("png_p.png", pal, "PNG", transparency=3)
    save("png_p4.png", base.quantize(colors=12), "PNG", bits=4)
    save("png_1bit.png", base.convert("L").point(lambda v: 255 if v > 127 else 0).convert("1"), "PNG")
    g16 = ((pattern(19, 11)[..., 0].astype(np.int32) * 7) % 1021).astype(np.uint16)  # values up to 1020
    Image.fromarray(g16, "I;16").save(os.path.join(d, "png_i16.png"), "PNG")
    files.append("png_i16.png")
    p16 = pattern(13, 9).astype(np.uint16) * 257 + np.arange(13, dtype=np.uint16)[None, :, None]
    write_png16(os.path.join(d, "png_rgb16.png"), p16, 2)
    files.append("png_rgb16.png")
    a16 = np.concatenate([p16, (p16[..., :1] ^ 0x5A5A)], axis=2)
    write_png16(os.path.join(d, "png_rgba16.png"), a16, 6)
    files.append("png_rgba16.png")
    # EXIF orientation 1..8 through PNG eXIf (lossless, so every transpose is checked exactly).
    small = Image.fromarray(pattern(7, 4))
    for o in range(1, 9):
        save(f"png_exif{o}.png", small, "PNG", exif=exif_block(o, big_endian=(o % 2 == 0)))
    info = PngImagePlugin.PngInfo()
    info.add_itxt("XML:com.adobe.xmp", '<x:xmpmeta><rdf:Description tiff:Orientation="8"/></x:xmpmeta>')
    save("png_xmp8.png", small, "PNG", pnginfo=info)
    # JPEG: libjpeg's defaults on both sides.
    jbase = Image.fromarray(pattern(37, 29))
    save("jpeg_420.jpg", jbase, "JPEG", quality=90)
    save("jpeg_444.jpg", jbase, "JPEG", quality=95, subsampling=0)
    save("jpeg_progressive.jpg", jbase, "JPEG", quality=85, progressive=True)
    save("jpeg_gray.jpg", jbase.convert("L"), "JPEG", quality=90)
    save("jpeg_cmyk.jpg", jbase.convert("CMYK"), "JPEG", quality=90)
    save("jpeg_exif6.jpg", jbase, "JPEG", quality=90, exif=exif_block(6, big_endian=False))
    save("jpeg_exif3.jpg", jbase, "JPEG", quality=90, exif=exif_block(3, big_endian=True))
    # WebP.
    save("webp_lossless.webp", base, "WEBP", lossless=True)
    save("webp_alpha.webp", rgba, "WEBP", lossless=True, exact=True)
    save("webp_lossy.webp", jbase, "WEBP", quality=80)
    save("webp_exif5.webp", small, "WEBP", lossless=True, exif=exif_block(5, big_endian=False))
    return files


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "../../tests/data/images"))
    args = ap.parse_args()
    d = os.path.abspath(args.out)
    os.makedirs(d, exist_ok=True)
    tensors = {}
    doc = {"pil_version": Image.__version__}

    files = make_test_images(d)
    decode = []
    for name in files:
        with Image.open(os.path.join(d, name)) as im:
            mode = im.mode
            rgb = np.asarray(ImageOps.exif_transpose(im).convert("RGB"))
        tensors[f"decode/{name}"] = rgb
        decode.append({"file": name, "mode": mode, "height": rgb.shape[0], "width": rgb.shape[1]})
    doc["decode"] = decode

    resize = []
    cases = [
        ("down", 97, 61, 40, 26, "lanczos"),
        ("up", 23, 17, 64, 48, "lanczos"),
        ("mixed", 50, 30, 77, 19, "lanczos"),
        ("vertical_only", 64, 40, 64, 21, "lanczos"),
        ("horizontal_only", 64, 40, 100, 40, "lanczos"),
        ("strong_down", 300, 200, 32, 32, "lanczos"),
        ("near_one", 61, 47, 59, 48, "lanczos"),
        ("bicubic", 97, 61, 40, 70, "bicubic"),
        ("bilinear", 97, 61, 33, 26, "bilinear"),
        ("hamming", 47, 61, 90, 26, "hamming"),
        ("box", 97, 61, 40, 26, "box"),
    ]
    for name, sw, sh, w, h, flt in cases:
        out = np.asarray(Image.fromarray(pattern(sw, sh)).resize((w, h), FILTERS[flt]))
        tensors[f"resize/{name}"] = out
        resize.append({"name": name, "src_width": sw, "src_height": sh, "width": w, "height": h, "filter": flt})
    doc["resize"] = resize

    keyframes = []
    kf_cases = [
        # name, first (w,h) or None, last (w,h) or None, canvas (H, W)
        ("stretch_and_cover", (120, 90), (50, 70), (64, 96)),
        ("portrait_canvas", (120, 90), (120, 90), (96, 64)),
        ("last_only", None, (33, 47), (64, 64)),
        ("same_size", (96, 64), (97, 63), (64, 96)),
        ("cover_exact_aspect", (48, 32), (144, 96), (64, 96)),
    ]
    for name, first, last, (H, W) in kf_cases:
        ims = [Image.fromarray(pattern(*s)) for s in (first, last) if s is not None]
        _, out = prepare_keyframes(ims, H, W)
        for i, im in enumerate(out):
            tensors[f"keyframe/{name}/{i}"] = np.asarray(im)
        plans = [list(cover_plan(s[0], s[1], W, H)) for s in (first, last) if s is not None]
        keyframes.append({"name": name, "first": first, "last": last, "height": H, "width": W, "cover": plans})
    doc["keyframes"] = keyframes

    # Default canvas from the first keyframe: big outputs, so a hash and a few pixels.
    default = []
    for first, last in [((40, 30), (30, 40)), ((64, 16), None), ((17, 33), (100, 7))]:
        ims = [Image.fromarray(pattern(*s)) for s in (first, last) if s is not None]
        (H, W), out = prepare_keyframes(ims)
        entry = {"first": first, "last": last, "height": H, "width": W, "images": []}
        for im in out:
            a = np.asarray(im)
            probes = [[0, 0], [H // 2, W // 3], [H - 1, W - 1], [H // 5, W - 7]]
            entry["images"].append(
                {"fnv1a64": fnv1a64(a.tobytes()), "probes": [[y, x, a[y, x].tolist()] for y, x in probes]}
            )
        default.append(entry)
    doc["default_canvas"] = default

    sizes = [(13, 7), (16, 9), (4, 3), (1, 1), (3, 4), (9, 16), (21, 9), (4, 1), (1, 4), (1000, 249), (250, 1001),
             (1920, 1080), (1080, 1920), (4032, 3024), (3024, 4032), (769, 431), (333, 333), (7, 5)]
    doc["canvas_for_keyframe"] = [
        {"width": w, "height": h, "canvas": None if resolve_canvas_size(w, h) is None
         else {"height": resolve_canvas_size(w, h)[0], "width": resolve_canvas_size(w, h)[1]}}
        for w, h in sizes
    ]
    sr = []
    for h, w in [(768, 1344), (1344, 768), (64, 64), (100, 37), (37, 100), (10, 10), (5000, 5000), (4096, 4096),
                 (4097, 4096), (8000, 6000), (255, 257), (15, 2999), (512, 2016), (2000, 11), (300, 301)]:
        r = smart_resize(h, w)
        sr.append({"height": h, "width": w, "resized": None if r is None else list(r)})
    doc["smart_resize"] = sr

    safetensors_io.save(os.path.join(d, "goldens.safetensors"),
                        {k: __import__("torch").from_numpy(np.array(v, copy=True)) for k, v in tensors.items()},
                        {"generator": "tools/reference/make_image_goldens.py", "pil": Image.__version__})
    with open(os.path.join(d, "goldens.json"), "w") as f:
        json.dump(doc, f, indent=1)
    total = sum(os.path.getsize(os.path.join(d, n)) for n in os.listdir(d))
    print(f"wrote {len(files)} images, {len(tensors)} golden arrays, {total} bytes in {d}")


if __name__ == "__main__":
    main()
