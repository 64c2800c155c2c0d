#!/usr/bin/env python3
"""Vision-tower / DeepStack / MRoPE / fl2va-presentation goldens for tests/test_vision.cpp (fp32), from
tools/reference/h3_vision.py and h3_text.py.

    /usr/bin/python3 tools/reference/make_vision_goldens.py --out tests/data/vision

The language stack reuses tests/data/text/A (its weights; run make_text_goldens.py first). Writes:
  text_encoder/config.json                       text_config of A + vision_config below + token ids of the
                                                 0-merge tiny tokenizer (vision_start 259, vision_end 260,
                                                 image_pad 262)
  text_encoder/model.safetensors.index.json      LM tensors → model-00001-of-00002.safetensors (the test copies
                                                 tests/data/text/A/text_encoder/model.safetensors there),
                                                 visual tensors → model-00002-of-00002.safetensors
  text_encoder/model-00002-of-00002.safetensors  the visual.* weights, bf16
  tower.safetensors        grids [3, 3] i64; embeds, deepstack.{j}, blocks.{i}.out f32. Input rows are
                           pixel[r, c] = ((131·r + 31·c) mod 255) / 127.5 − 1 (fp32), not stored.
  cond{1,2}.safetensors    fl2va presentation of 1 / 2 keyframes + PROMPT through the tokenizer written by
                           write_tiny_tokenizer(dir, 0) (ids = bytes): ids, tags, positions [3, L] i64, hidden
                           [L, 64] f32. Keyframe i is image(i) below, run through the Qwen2-VL processor (sizes are
                           multiples of 32 above min_pixels: no resize).
  ref2va.safetensors       the ref2va presentation (diffusers build_ref2va_presentation) of REFS + PROMPT:
                           an image reference, a video with a soundtrack (5 frames → 3 blocks, the last frame
                           repeated), an audio reference and a second video (4 frames → 2 blocks): ids, tags,
                           image_grids / video_grids [n, 3] i64 (in patches), pixel_values_videos [N, 1536] f32
                           (the video processor, official min/max pixels, no resize), positions [3, L] i64
                           (transformers 5.x get_rope_index), hidden [L, 64] f32 (tower once over the images,
                           once over the videos, features joined by position).
  video_resize.safetensors cases [n, 5] i64 (T, H, W, min, max) of the video processor's smart_resize (patch
                           16, merge 2, temporal 2) and sizes [n, 2] i64 (h̄, w̄); −1 where it rejects the clip;
                           cap_cases [m, 3] (T, H, W) and cap_sizes [m, 2] with the official min/max pixels and
                           cap_pixels_per_frame=True.
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import h3_text  # noqa: E402
import h3_vision  # noqa: E402
import safetensors_io as st  # noqa: E402

VCFG = dict(depth=4, hidden_size=16, intermediate_size=40, num_heads=2, in_channels=3, patch_size=16,
            temporal_patch_size=2, spatial_merge_size=2, out_hidden_size=64, num_position_embeddings=64,
            deepstack_visual_indexes=[0, 2, 3], hidden_act="gelu_pytorch_tanh", model_type="qwen3_vl")
TOWER_GRIDS = [(1, 8, 12), (1, 6, 4), (2, 4, 4)]
IMAGES = [(256, 256), (320, 256)]  # (height, width)
PROMPT = "a cat walks on the beach at sunset"
VISION_START, VISION_END, IMAGE_PAD = 259, 260, 262
VIDEO_PAD = 263
VIDEO_MIN_PIXELS, VIDEO_MAX_PIXELS = 4096, 25165824
# ref2va request: (kind, has_audio, size (h, w) or frames (T, h, w)).
REFS = [("image", False, (256, 256)), ("video", True, (5, 32, 64)), ("audio", True, None),
        ("video", False, (4, 64, 32))]
RESIZE_CASES = [(5, 32, 64, VIDEO_MIN_PIXELS, VIDEO_MAX_PIXELS), (4, 768, 1344, 4096, 25165824),
                (30, 768, 1344, 4096, 25165824), (3, 100, 150, 4096, 25165824), (2, 20, 50, 4096, 25165824),
                (9, 17, 33, 4096, 25165824), (6, 30, 6000, 4096, 25165824), (1, 64, 64, 4096, 25165824),
                (7, 1080, 1920, 4096, 16777216), (2, 40, 40, 65536, 16777216), (3, 15, 4000, 4096, 25165824)]
CAP_CASES = [(2, 720, 1280), (3, 96, 160)]


def image(i, h, w):
    y = torch.arange(h).view(h, 1, 1)
    x = torch.arange(w).view(1, w, 1)
    c = torch.arange(3).view(1, 1, 3)
    return ((y * 7 + x * 13 + c * 71 + i * 29 + (x * y) % 17) % 256).to(torch.uint8)


def frame(k, h, w):
    y = torch.arange(h).view(h, 1, 1)
    x = torch.arange(w).view(1, w, 1)
    c = torch.arange(3).view(1, 1, 3)
    return ((y * 5 + x * 11 + c * 67 + k * 37 + (x * y) % 13) % 256).to(torch.uint8)


def ref2va(vw, tw, tcfg, out):
    m = VCFG["spatial_merge_size"]
    refs, image_rows, image_grids, video_rows, video_grids = [], [], [], [], []
    for i, (kind, has_audio, size) in enumerate(REFS):
        r = dict(kind=kind, has_audio=has_audio)
        if kind == "image":
            pr, g = h3_vision.patchify(image(10 + i, *size), 16, 2, m)
            image_rows.append(pr)
            image_grids.append(g)
        elif kind == "video":
            T, h, w = size
            frames = torch.stack([frame(10 * i + k, h, w) for k in range(T)])
            pr, g = h3_vision.video_patchify(frames, 16, 2, m, VIDEO_MIN_PIXELS, VIDEO_MAX_PIXELS)
            video_rows.append(pr)
            video_grids.append(g)
            r["timestamps"] = h3_vision.block_timestamps(T)
            assert len(r["timestamps"]) == g[0]
        refs.append(r)
    image_counts = [t * h * w // (m * m) for t, h, w in image_grids]
    video_block_counts = [h * w // (m * m) for _, h, w in video_grids]
    tok = dict(vision_start=VISION_START, vision_end=VISION_END, image_pad=IMAGE_PAD, video_pad=VIDEO_PAD)
    ids, tags = h3_vision.ref2va_presentation(lambda v: list(v.encode()), PROMPT, refs, image_counts,
                                              video_block_counts, tok)
    ids_t = torch.tensor(ids, dtype=torch.int64)
    emb_i, ds_i = h3_vision.vision_forward(vw, VCFG, torch.cat(image_rows), image_grids)
    pv_videos = torch.cat(video_rows)
    emb_v, ds_v = h3_vision.vision_forward(vw, VCFG, pv_videos, video_grids)
    img_mask, vid_mask = ids_t == IMAGE_PAD, ids_t == VIDEO_PAD
    vis_mask = img_mask | vid_mask

    def join(a, b):
        j = a.new_zeros(int(vis_mask.sum()), a.shape[1])
        j[img_mask[vis_mask]] = a
        j[vid_mask[vis_mask]] = b
        return j

    llm = lambda gs: [(t, h // m, w // m) for t, h, w in gs]  # noqa: E731
    pos = h3_vision.rope_index(ids, IMAGE_PAD, VIDEO_PAD, llm(image_grids), llm(video_grids))
    hidden = h3_text.forward(tw, tcfg, ids_t, mode="fp32", positions=pos,
                             mrope_section=tcfg["rope_scaling"]["mrope_section"],
                             vision=dict(rows=vis_mask.nonzero().view(-1), embeds=join(emb_i, emb_v),
                                         deepstack=[join(a, b) for a, b in zip(ds_i, ds_v)]))
    st.save(os.path.join(out, "ref2va.safetensors"),
            {"ids": ids_t, "tags": torch.tensor(tags, dtype=torch.int64),
             "image_grids": torch.tensor(image_grids, dtype=torch.int64),
             "video_grids": torch.tensor(video_grids, dtype=torch.int64),
             "pixel_values_videos": pv_videos.contiguous(), "positions": pos.contiguous(),
             "hidden": hidden.contiguous()})
    print(f"ref2va: L={len(ids)} image rows {int(img_mask.sum())} video rows {int(vid_mask.sum())} "
          f"max pos {int(pos.max())} max|hidden|={hidden.abs().max():.3f}")
    print("  labels:", bytes(i for i, t in zip(ids, tags) if t == 1 and i < 256).decode())

    sizes = []
    for T, h, w, lo, hi in RESIZE_CASES:
        try:
            sizes.append(h3_vision.video_smart_resize(T, h, w, 2, 32, lo, hi))
        except ValueError:
            sizes.append((-1, -1))
    cap_sizes = [h3_vision.video_smart_resize(
        T, h, w, 2, 32, VIDEO_MIN_PIXELS, h3_vision.video_max_pixels(T, VIDEO_MIN_PIXELS, VIDEO_MAX_PIXELS, 32, True))
        for T, h, w in CAP_CASES]
    st.save(os.path.join(out, "video_resize.safetensors"),
            {"cases": torch.tensor(RESIZE_CASES, dtype=torch.int64), "sizes": torch.tensor(sizes, dtype=torch.int64),
             "cap_cases": torch.tensor(CAP_CASES, dtype=torch.int64),
             "cap_sizes": torch.tensor(cap_sizes, dtype=torch.int64)})
    print("video_resize:", list(zip(RESIZE_CASES, sizes)), list(zip(CAP_CASES, cap_sizes)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--text", default=os.path.join(os.path.dirname(__file__), "../../tests/data/text/A"))
    a = ap.parse_args()
    torch.set_num_threads(1)
    te = os.path.join(a.out, "text_encoder")
    os.makedirs(te, exist_ok=True)
    with open(os.path.join(a.text, "text_encoder", "config.json")) as f:
        root = json.load(f)
    root["vision_config"] = VCFG
    root.update(image_token_id=IMAGE_PAD, vision_start_token_id=VISION_START, vision_end_token_id=VISION_END,
                video_token_id=263)
    with open(os.path.join(te, "config.json"), "w") as f:
        json.dump(root, f, indent=2, sort_keys=True)
    tcfg = root["text_config"]
    tw, _ = st.load(os.path.join(a.text, "text_encoder", "model.safetensors"))
    vw = h3_vision.random_vision_weights(VCFG, 21)
    st.save(os.path.join(te, "model-00002-of-00002.safetensors"), dict(sorted(vw.items())))
    wmap = {k: "model-00001-of-00002.safetensors" for k in tw}
    wmap.update({k: "model-00002-of-00002.safetensors" for k in vw})
    with open(os.path.join(te, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": dict(sorted(wmap.items()))}, f, indent=2)

    # Tower alone.
    n = sum(t * h * w for t, h, w in TOWER_GRIDS)
    pd = 3 * 2 * 16 * 16
    r = torch.arange(n).view(n, 1)
    c = torch.arange(pd).view(1, pd)
    px = ((r * 131 + c * 31) % 255).to(torch.float32) / 127.5 - 1.0
    rec = {}
    emb, ds = h3_vision.vision_forward(vw, VCFG, px, TOWER_GRIDS, record=rec)
    out = {"grids": torch.tensor(TOWER_GRIDS, dtype=torch.int64), "embeds": emb.contiguous()}
    out.update({f"deepstack.{j}": d.contiguous() for j, d in enumerate(ds)})
    out.update({k: v.contiguous() for k, v in rec.items()})
    st.save(os.path.join(a.out, "tower.safetensors"), out)
    print(f"tower: N={n} max|embeds|={emb.abs().max():.3f}")

    # Conditioner presentation with 1 and 2 keyframes.
    m = VCFG["spatial_merge_size"]
    for k in (1, 2):
        ids, tags, rows, grids = [], [], [], []
        for i in range(k):
            label = list(f"<Picture {i + 1}>: ".encode())
            ids += label
            tags += [1] * len(label)
            img = image(i, *IMAGES[i])
            pr, g = h3_vision.patchify(img, 16, 2, m)
            rows.append(pr)
            grids.append(g)
            ntok = g[1] * g[2] // (m * m)
            ids += [VISION_START] + [IMAGE_PAD] * ntok + [VISION_END]
            tags += [0] * (ntok + 2)
        prompt = list(PROMPT.encode())
        ids += prompt
        tags += [1] * len(prompt)
        emb, ds = h3_vision.vision_forward(vw, VCFG, torch.cat(rows), grids)
        ids_t = torch.tensor(ids, dtype=torch.int64)
        llm_grids = [(t, h // m, w // m) for t, h, w in grids]
        pos = h3_vision.mrope_positions(ids, IMAGE_PAD, llm_grids)
        assert torch.equal(pos, h3_vision.rope_index(ids, IMAGE_PAD, VIDEO_PAD, llm_grids, []))
        vrows = (ids_t == IMAGE_PAD).nonzero().view(-1)
        hidden = h3_text.forward(tw, tcfg, ids_t, mode="fp32", positions=pos,
                                 mrope_section=tcfg["rope_scaling"]["mrope_section"],
                                 vision=dict(rows=vrows, embeds=emb, deepstack=ds))
        st.save(os.path.join(a.out, f"cond{k}.safetensors"),
                {"ids": ids_t, "tags": torch.tensor(tags, dtype=torch.int64), "positions": pos.contiguous(),
                 "hidden": hidden.contiguous()})
        print(f"cond{k}: L={len(ids)} vision rows {len(vrows)} max pos {int(pos.max())} "
              f"max|hidden|={hidden.abs().max():.3f}")

    ref2va(vw, tw, tcfg, a.out)


if __name__ == "__main__":
    main()
