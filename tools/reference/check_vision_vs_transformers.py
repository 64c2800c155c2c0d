#!/usr/bin/env python3
"""Cross-check the vision goldens (tests/data/vision: h3_vision.py + h3_text.py) against transformers' own
Qwen3VLModel, on the golden tiny checkpoint (tests/data/vision/text_encoder + tests/data/text/A's LM shard).

Run where transformers (5.x, mm_token_type_ids) and torch are installed, from the repo root:

    python3 tools/reference/check_vision_vs_transformers.py

For cond2.safetensors (fl2va, 2 keyframes) and ref2va.safetensors (images + videos): feeds the golden ids,
mm_token_type_ids (image 1, video 2), pixel values and grids to Qwen3VLModel (fp32, eager attention) as diffusers
does, and compares
  - the 3-D positions the language model receives with the golden `positions` (exact);
  - the hidden state after the last decoder layer and its DeepStack addition (captured from
    _deepstack_process; the tiny LM has 3 layers, all with DeepStack) with the golden `hidden` (max rel diff).
Exits 1 on a position mismatch or a relative difference above 1e-4.
"""
import json
import os
import shutil
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import h3_vision  # noqa: E402
import make_vision_goldens as mvg  # noqa: E402
import safetensors_io as st  # noqa: E402

ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
DATA = os.path.join(ROOT, "tests", "data", "vision")


def checkpoint():
    d = tempfile.mkdtemp()
    for f in ("config.json", "model.safetensors.index.json", "model-00002-of-00002.safetensors"):
        shutil.copy(os.path.join(DATA, "text_encoder", f), d)
    shutil.copy(os.path.join(ROOT, "tests/data/text/A/text_encoder/model.safetensors"),
                os.path.join(d, "model-00001-of-00002.safetensors"))
    return d


def image_rows(kind):
    m = mvg.VCFG["spatial_merge_size"]
    rows, grids = [], []
    if kind == "cond2":
        for i in range(2):
            pr, g = h3_vision.patchify(mvg.image(i, *mvg.IMAGES[i]), 16, 2, m)
            rows.append(pr)
            grids.append(g)
    else:
        for i, (k, _, size) in enumerate(mvg.REFS):
            if k == "image":
                pr, g = h3_vision.patchify(mvg.image(10 + i, *size), 16, 2, m)
                rows.append(pr)
                grids.append(g)
    return torch.cat(rows), torch.tensor(grids)


def main():
    from transformers import Qwen3VLForConditionalGeneration
    import transformers

    print("transformers", transformers.__version__, "torch", torch.__version__)
    model = Qwen3VLForConditionalGeneration.from_pretrained(checkpoint(), torch_dtype=torch.float32,
                                                            attn_implementation="eager").eval()
    core = model.model
    lm = core.language_model
    captured = {}
    orig = lm._deepstack_process

    def deepstack(hidden, mask, embeds):
        out = orig(hidden, mask, embeds)
        captured.setdefault("ds", []).append(out.detach().clone())
        return out

    lm._deepstack_process = deepstack
    lm.rotary_emb.register_forward_hook(lambda mod, args, out: captured.__setitem__("pos", args[1].detach().clone()))

    worst, ok = 0.0, True
    for name in ("cond2", "ref2va"):
        g, _ = st.load(os.path.join(DATA, f"{name}.safetensors"))
        ids = g["ids"].long()[None]
        types = torch.zeros_like(ids)
        types[ids == mvg.IMAGE_PAD] = 1
        types[ids == mvg.VIDEO_PAD] = 2
        pv, grid = image_rows(name)
        kw = dict(pixel_values=pv, image_grid_thw=grid)
        if name == "ref2va":
            kw.update(pixel_values_videos=g["pixel_values_videos"].float(), video_grid_thw=g["video_grids"].long())
        captured.clear()
        with torch.no_grad():
            core(input_ids=ids, attention_mask=torch.ones_like(ids), mm_token_type_ids=types, use_cache=False,
                 output_hidden_states=True, **kw)
        pos = captured["pos"]
        if pos.shape[0] == 4:
            pos = pos[1:]
        pos_ok = torch.equal(pos[:, 0].long(), g["positions"].long())
        ok &= pos_ok
        hidden = captured["ds"][-1][0]
        rel = ((hidden - g["hidden"]).abs().max() / g["hidden"].abs().max()).item()
        worst = max(worst, rel)
        print(json.dumps({"golden": name, "positions_equal": pos_ok, "deepstack_calls": len(captured["ds"]),
                          "hidden_max_rel_diff": rel}))
    sys.exit(0 if ok and worst < 1e-4 else 1)


if __name__ == "__main__":
    main()
