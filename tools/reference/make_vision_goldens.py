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


def image(i, h, w):
    y = torch.arange(h).view(h, 1, 1)
    x = torch.arange(w).view(1, w, 1)
    c = torch.arange(3).view(1, 1, 3)
    return ((y * 7 + x * 13 + c * 71 + i * 29 + (x * y) % 17) % 256).to(torch.uint8)


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
        vrows = (ids_t == IMAGE_PAD).nonzero().view(-1)
        hidden = h3_text.forward(tw, tcfg, ids_t, mode="fp32", positions=pos,
                                 mrope_section=tcfg["rope_scaling"]["mrope_section"],
                                 vision=dict(rows=vrows, embeds=emb, deepstack=ds))
        st.save(os.path.join(a.out, f"cond{k}.safetensors"),
                {"ids": ids_t, "tags": torch.tensor(tags, dtype=torch.int64), "positions": pos.contiguous(),
                 "hidden": hidden.contiguous()})
        print(f"cond{k}: L={len(ids)} vision rows {len(vrows)} max pos {int(pos.max())} "
              f"max|hidden|={hidden.abs().max():.3f}")


if __name__ == "__main__":
    main()
