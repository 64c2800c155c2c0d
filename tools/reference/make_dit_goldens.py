"""Generate DiT golden files for the C++ engine from tiny random weights.

    /usr/bin/python3 tools/reference/make_dit_goldens.py --out tests/data/dit

Per config X in {A, B}, writes tests/data/dit/X/:
  diffusers/{config.json, diffusion_pytorch_model.safetensors}   tiny weights, diffusers layout
  original/{config.json, model.safetensors}                      same weights, original layout
  inputs.safetensors        hidden_states f32 [Nv,96], audio_hidden_states f32 [Na,32],
                            encoder_hidden_states f32 [L,text_dim] (values bf16-exact), timestep f32 [M],
                            timestep_indices/token_tags/video_indices/audio_indices/text_indices i64,
                            position_ids f64 [S,3]
  outputs_fp32.safetensors  sample, audio_sample + intermediates, all f32 (mode "fp32")
  outputs_bf16.safetensors  sample, audio_sample, temb in f32; other intermediates stored as BF16
                            (they are bf16 values by construction) (mode "bf16")
and tests/data/dit/manifest.json (layouts, configs, fp32-vs-bf16 max differences).
Both weight layouts are run through the reference and must agree bit-for-bit (asserted).
Packed layout per spec §5: [text | keyframe rows | audio L | audio R | target video].
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import h3_dit  # noqa: E402
import make_tiny_weights as mtw  # noqa: E402
import safetensors_io as sio  # noqa: E402

CONFIGS = {
    "A": {"num_attention_heads": 2, "attention_head_dim": 32, "hidden_size": 64, "num_layers": 2,
          "num_refiner_layers": 1, "ffn_dim": 96, "text_dim": 48, "freq_dim": 256,
          "time_embed_hidden_dim": 64, "time_embed_dim": 32, "rope_freq_dim": 4,
          "in_channels": 24, "audio_in_channels": 32},
    "B": {"num_attention_heads": 4, "attention_head_dim": 16, "hidden_size": 64, "num_layers": 3,
          "num_refiner_layers": 2, "ffn_dim": 80, "text_dim": 48, "freq_dim": 256,
          "time_embed_hidden_dim": 64, "time_embed_dim": 32, "rope_freq_dim": 2,
          "in_channels": 24, "audio_in_channels": 32},
}
LAYOUTS = {
    # t2va mid-trajectory: t_v != t_a -> M = 2
    "A": dict(L=7, A=5, T=2, h=4, w=6, keyframe=False, vision_rows=(), t_v=0.3, t_a=0.55, seed=1),
    # fl2va: a "first" keyframe block (6 rows, tag 0, t = 0.999), 3 vision-token rows inside the text
    # segment tagged 0 (§5.2) -> M = 3, all three tags
    "B": dict(L=7, A=5, T=2, h=4, w=6, keyframe=True, vision_rows=(1, 2, 3), t_v=0.25, t_a=0.6, seed=2),
}


def spatial_grid(d, s):
    """§5.3: numpy linspace(left, left+ratio, d/2, endpoint=False) * 32, ratio = d/s."""
    ratio = d / s
    left = (1.0 - ratio) / 2.0
    return np.linspace(left, left + ratio, d // 2, endpoint=False) * 32.0


def build_layout(L, A, T, h, w, keyframe, vision_rows, t_v, t_a):
    s = float(np.sqrt(h * w))
    hg, wg = spatial_grid(h, s), spatial_grid(w, s)
    per_frame = [(hh, ww) for hh in hg for ww in wg]  # row-major over (h/2, w/2)
    pos, tags, row_t = [], [], []
    text_idx, video_idx, audio_idx = [], [], []
    for i in range(L):  # text rows
        text_idx.append(len(pos))
        pos.append((float(i), 0.0, 0.0))
        tags.append(0 if i in vision_rows else 1)
        row_t.append(t_v)
    if keyframe:  # "first" keyframe: t = L, target grid, t = max(t_v, 0.999)
        for hh, ww in per_frame:
            video_idx.append(len(pos))
            pos.append((float(L), hh, ww))
            tags.append(0)
            row_t.append(max(t_v, 0.999))
    for wpin in (wg[0], wg[-1]):  # audio L channel, then R channel
        for a in range(A):
            audio_idx.append(len(pos))
            pos.append((float(L + a), 0.0, float(wpin)))
            tags.append(2)
            row_t.append(t_a)
    p = (1, 4, 4, 4, 4)
    t = float(L)
    for k in range(T):  # target video frames
        for hh, ww in per_frame:
            video_idx.append(len(pos))
            pos.append((t, hh, ww))
            tags.append(0)
            row_t.append(t_v)
        t += (5.0 / 3.0) * p[k % 5]
    uniq = sorted(set(np.float32(x).item() for x in row_t))
    ti = [uniq.index(np.float32(x).item()) for x in row_t]
    return {
        "timestep": torch.tensor(uniq, dtype=torch.float32),
        "timestep_indices": torch.tensor(ti, dtype=torch.int64),
        "token_tags": torch.tensor(tags, dtype=torch.int64),
        "position_ids": torch.tensor(pos, dtype=torch.float64),
        "video_indices": torch.tensor(video_idx, dtype=torch.int64),
        "audio_indices": torch.tensor(audio_idx, dtype=torch.int64),
        "text_indices": torch.tensor(text_idx, dtype=torch.int64),
    }


def make_inputs(cfg, lay):
    inp = build_layout(**{k: lay[k] for k in ("L", "A", "T", "h", "w", "keyframe", "vision_rows", "t_v", "t_a")})
    g = torch.Generator().manual_seed(1000 + lay["seed"])
    nv, na, L = len(inp["video_indices"]), len(inp["audio_indices"]), len(inp["text_indices"])
    vdim = cfg["in_channels"] * int(np.prod(cfg["patch_size"]))
    inp["hidden_states"] = torch.randn(nv, vdim, generator=g)
    inp["audio_hidden_states"] = torch.randn(na, cfg["audio_in_channels"], generator=g)
    # the conditioner emits bf16: keep the values bf16-exact so every port reads the same numbers
    inp["encoder_hidden_states"] = torch.randn(L, cfg["text_dim"], generator=g).to(torch.bfloat16).float()
    return inp


def run(W, cfg, inp, mode):
    rec = {}
    v, a = h3_dit.forward(W, cfg, *[inp[n] for n in h3_dit.INPUT_NAMES], mode=mode, record=rec)
    rec["sample"], rec["audio_sample"] = v, a
    return rec


def selftest(tmp):
    """safetensors round trip (incl. bf16 + sharded index) and layout conversion round trip."""
    cfg = mtw.full_config(CONFIGS["B"])
    W = mtw.make_weights(cfg, 7)
    sio.save_sharded(tmp, W, max_bytes=20000)
    W2, md = sio.load(tmp)
    assert set(W2) == set(W) and int(md["total_size"]) > 0
    for n in W:
        assert W2[n].dtype == W[n].dtype and torch.equal(W2[n].float(), W[n].float()), n
    orig = h3_dit.diffusers_to_original(W, cfg)
    back = h3_dit.original_to_diffusers(orig, h3_dit.diffusers_config_to_original(cfg))
    assert set(back) == set(W)
    for n in W:
        assert torch.equal(back[n].float(), W[n].float()), n
    # interleave sanity: head 1's q rows in the original are rows [3*hd, 4*hd)
    hd = cfg["attention_head_dim"]
    q = W["transformer_blocks.0.attn.to_q.weight"]
    assert torch.equal(orig["blocks.0.attn.qkv_proj.weight"][3 * hd:4 * hd].float(), q[hd:2 * hd].float())
    f1 = W["transformer_blocks.0.ff.net.0.proj.weight"]
    assert torch.equal(orig["blocks.0.mlp.fc1.weight"][: cfg["ffn_dim"]].float(), f1[cfg["ffn_dim"]:].float())
    print("selftest ok")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="tests/data/dit")
    ap.add_argument("--configs", default="A,B")
    a = ap.parse_args()
    torch.set_num_threads(1)  # deterministic fp32 reductions on CPU
    with tempfile.TemporaryDirectory() as tmp:
        selftest(tmp)
    os.makedirs(a.out, exist_ok=True)
    manifest = {"generator": "tools/reference/make_dit_goldens.py", "torch": torch.__version__, "configs": {}}
    for name in a.configs.split(","):
        cfg = mtw.full_config(CONFIGS[name])
        lay = LAYOUTS[name]
        d = os.path.join(a.out, name)
        if os.path.isdir(d):
            shutil.rmtree(d)
        W = mtw.make_weights(cfg, seed=lay["seed"])
        mtw.write_model(d, cfg, W, original=True)
        inp = make_inputs(cfg, lay)
        sio.save(os.path.join(d, "inputs.safetensors"), inp)
        # reload both layouts from disk, exactly as a consumer would
        Wd, cd = h3_dit.load_model_dir(os.path.join(d, "diffusers"))
        Wo, co = h3_dit.load_model_dir(os.path.join(d, "original"))
        assert cd == co or all(cd[k] == co[k] for k in cd if k != "_class_name"), (cd, co)
        outs = {}
        for mode in ("fp32", "bf16"):
            r = run(Wd, cd, inp, mode)
            r2 = run(Wo, co, inp, mode)
            for n in r:
                assert torch.equal(r[n], r2[n]), f"{name}/{mode}: layouts disagree on {n}"
            outs[mode] = r
            save = {}
            for n, t in r.items():
                if mode == "bf16" and n not in ("sample", "audio_sample", "temb"):
                    tb = t.to(torch.bfloat16)
                    assert torch.equal(tb.float(), t), n  # bf16-exact by construction
                    save[n] = tb
                else:
                    save[n] = t
            sio.save(os.path.join(d, f"outputs_{mode}.safetensors"), save, {"mode": mode, "config": name})
        diffs = {}
        for n in outs["fp32"]:
            x, y = outs["fp32"][n], outs["bf16"][n]
            diffs[n] = {"max_abs_diff": (x - y).abs().max().item(), "max_abs_fp32": x.abs().max().item(),
                        "rms_fp32": x.pow(2).mean().sqrt().item(),
                        "rel_rms_diff": ((x - y).pow(2).mean().sqrt() / x.pow(2).mean().sqrt()).item()}
        S = len(inp["token_tags"])
        manifest["configs"][name] = {
            "config": cfg, "seq_len": S, "Nv": len(inp["video_indices"]), "Na": len(inp["audio_indices"]),
            "L": len(inp["text_indices"]), "timestep": inp["timestep"].tolist(),
            "layout": {k: (list(v) if isinstance(v, tuple) else v) for k, v in lay.items()},
            "fp32_vs_bf16": diffs,
        }
        print(f"[{name}] S={S} M={len(inp['timestep'])} tags={inp['token_tags'].tolist()}")
        for n in ("refiner_out", "temb", f"blocks.{cfg['num_layers'] - 1}.out", "final_norm_out",
                  "sample", "audio_sample"):
            dd = diffs[n]
            print(f"   {n:22s} max|d| {dd['max_abs_diff']:.3e}  max|x| {dd['max_abs_fp32']:.3f}"
                  f"  rel_rms {dd['rel_rms_diff']:.3e}")
    with open(os.path.join(a.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    total = 0
    for root, _, files in os.walk(a.out):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    print(f"total golden bytes: {total}")


if __name__ == "__main__":
    main()
