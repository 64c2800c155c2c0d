#!/usr/bin/env python3
"""Text-encoder goldens for tests/test_text_encoder.cpp from tools/reference/h3_text.py.

    /usr/bin/python3 tools/reference/make_text_goldens.py --out tests/data/text

Per tiny config X in {A, B}, writes tests/data/text/X/:
  text_encoder/{config.json, model.safetensors}  official names, bf16 weights (+ an unused final norm)
  inputs.safetensors                             ids i64 [L]
  outputs_fp32.safetensors, outputs_bf16.safetensors
      hidden [L, hidden] (= hidden_states[n_used]) and layers.{i}.out, all f32. bf16 uses the engine's
      contract (h3_text.forward swiglu_one_rounding=True: the fused swiglu op rounds up*SiLU(gate) once).
A: hidden 64, 3 layers, 4 q / 2 kv heads x 16, theta 5e6, L 23.  B: hidden 48 != heads*head_dim (2 x 32),
1 kv head (MQA), theta 1e4, 2 layers, L 41.  Deterministic (fixed seeds, CPU).
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import h3_text  # noqa: E402
import safetensors_io as st  # noqa: E402

CONFIGS = {
    "A": dict(cfg=dict(hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
                       num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6, rope_theta=5000000.0,
                       vocab_size=300), mrope=[4, 2, 2], L=23, seed=11),
    "B": dict(cfg=dict(hidden_size=48, intermediate_size=80, num_hidden_layers=2, num_attention_heads=2,
                       num_key_value_heads=1, head_dim=32, rms_norm_eps=1e-5, rope_theta=10000.0,
                       vocab_size=97), mrope=[8, 4, 4], L=41, seed=12),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    torch.set_num_threads(1)
    for name, spec in CONFIGS.items():
        cfg = spec["cfg"]
        d = os.path.join(a.out, name)
        os.makedirs(os.path.join(d, "text_encoder"), exist_ok=True)
        text_cfg = dict(cfg, model_type="qwen3_vl_text", hidden_act="silu", attention_bias=False,
                        rope_scaling={"mrope_interleaved": True, "mrope_section": spec["mrope"],
                                      "rope_type": "default"})
        with open(os.path.join(d, "text_encoder", "config.json"), "w") as f:
            json.dump({"architectures": ["Qwen3VLForConditionalGeneration"], "model_type": "qwen3_vl",
                       "text_config": text_cfg}, f, indent=2, sort_keys=True)
        w = h3_text.random_weights(cfg, spec["seed"])
        st.save(os.path.join(d, "text_encoder", "model.safetensors"), dict(sorted(w.items())))
        g = torch.Generator().manual_seed(spec["seed"] + 100)
        ids = torch.randint(0, cfg["vocab_size"], (spec["L"],), generator=g)
        st.save(os.path.join(d, "inputs.safetensors"), {"ids": ids.to(torch.int64)})
        for mode in ("fp32", "bf16"):
            rec = {}
            out = h3_text.forward(w, cfg, ids, mode=mode, record=rec, swiglu_one_rounding=True)
            tensors = {"hidden": out.float().contiguous()}
            tensors.update({k: v.float().contiguous() for k, v in rec.items()})
            st.save(os.path.join(d, f"outputs_{mode}.safetensors"), tensors)
        f32 = h3_text.forward(w, cfg, ids, mode="fp32")
        b16 = h3_text.forward(w, cfg, ids, mode="bf16", swiglu_one_rounding=True)
        eager = h3_text.forward(w, cfg, ids, mode="bf16")
        print(f"{name}: L={spec['L']} max|hidden|={f32.abs().max():.3f} fp32-vs-bf16 max abs "
              f"{(f32 - b16).abs().max():.4f} rel-rms {((f32 - b16).pow(2).mean() / f32.pow(2).mean()).sqrt():.4f}; "
              f"eager-vs-engine bf16 max abs {(eager - b16).abs().max():.4f}")


if __name__ == "__main__":
    main()
