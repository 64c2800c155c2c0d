#!/usr/bin/env python3
"""Cross-check h3_text.forward (fp32) against transformers' Qwen3-VL text model on a tiny random config.

Needs transformers with Qwen3-VL (>= 4.57). Prints the max relative difference of hidden_states[n] for a
few layer counts; exits 1 above 1e-4.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import h3_text  # noqa: E402


def main():
    from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLTextConfig
    from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLTextModel

    cfg = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=4, num_attention_heads=4,
               num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6, rope_theta=5000000.0, vocab_size=300,
               max_position_embeddings=4096)
    rope = {"rope_type": "default", "mrope_section": [4, 2, 2], "mrope_interleaved": True,
            "rope_theta": 5000000.0}
    try:
        hf_cfg = Qwen3VLTextConfig(**cfg, rope_scaling=rope)
    except TypeError:
        hf_cfg = Qwen3VLTextConfig(**cfg, rope_parameters=rope)
    hf_cfg._attn_implementation = "eager"
    model = Qwen3VLTextModel(hf_cfg).eval().float()
    w = h3_text.random_weights(cfg, seed=7)
    sd = {k[len(h3_text.P):]: v.float() for k, v in w.items()}
    missing, unexpected = model.load_state_dict(sd, strict=False)
    print("missing", missing, "unexpected", unexpected)
    ids = torch.randint(0, 300, (23,), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        out = model(input_ids=ids[None], output_hidden_states=True)
    worst = 0.0
    for n in (1, 2, 3):
        ref = h3_text.forward(w, cfg, ids, mode="fp32", n_used=n)
        hf = out.hidden_states[n][0].float()
        rel = ((ref - hf).abs().max() / hf.abs().max()).item()
        worst = max(worst, rel)
        print(f"hidden_states[{n}] max rel diff {rel:.3e}")
    sys.exit(0 if worst < 1e-4 else 1)


if __name__ == "__main__":
    main()
