#!/usr/bin/env python3
"""Check the numpy re-implementations of torch2_numerics.py, and the goldens made from them, against torch 2.x and
transformers 5.x themselves. Run on the GPU machine (torch 2.11, transformers 5.17), from the repo root:

    python3 tools/reference/check_torch2_numerics.py

  1. torch.linspace(start, end, n, dtype=float32) on the CPU against linspace_f32(fused=True) for the
     linspace.safetensors cases and a sweep (n = 1..600 over several ranges); the CUDA linspace is reported
     beside it (informative: the sigma grid is built on the CPU, diffusers' MiniMaxH3Scheduler says so).
  2. The MiniMaxH3Scheduler grid (the same torch expression diffusers evaluates) against schedule.safetensors,
     bit for bit, and one Euler update.
  3. transformers' own get_vision_interpolation_indices_and_weights (bilinear, align_corners) against
     interp_axis, and Qwen3VLVisionModel (the golden tiny tower, bf16, on CUDA as diffusers runs it): its
     `(pos_embed(idx) * w[:, :, None]).sum(1)` against pos_embed.safetensors (fp32, bit for bit), and the
     first block's input against patch_embed + bf16(golden) rounded to bf16 (the engine's order). The line of
     Qwen3VLVisionModel.forward that computes it is printed.
Prints one JSON line per check and exits 1 on any mismatch.
"""
import inspect
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import safetensors_io as sio  # noqa: E402
import torch2_numerics as tn  # noqa: E402

ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
PIPE = os.path.join(ROOT, "tests", "data", "pipeline")
VISION = os.path.join(ROOT, "tests", "data", "vision")
failures = []


def report(name, ok, **kw):
    print(json.dumps({"check": name, "ok": bool(ok), **kw}), flush=True)
    if not ok:
        failures.append(name)


def same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.tobytes() == b.tobytes()


def check_linspace():
    lin, meta = sio.load_numpy(os.path.join(PIPE, "linspace.safetensors"))
    bad = []
    for case in meta["cases"].split(";"):
        name, args = case.split("=")
        a, b, n = args.split(",")
        t = torch.linspace(float(a), float(b), int(n), dtype=torch.float32).numpy()
        if not same(t, lin[f"fused_{name}"]):
            bad.append(name)
    report("linspace golden cases (CPU)", not bad, mismatched=bad,
           cpu_capability=torch.backends.cpu.get_cpu_capability())
    sweep_bad, cuda_bad, cuda_ok = [], [], torch.cuda.is_available()
    for a, b in ((1.0, 0.0), (0.0, 47.0), (-3.25, 7.5), (0.0, 1.0), (10.0, -2.0)):
        for n in range(1, 601):
            want = tn.linspace_f32(a, b, n)
            if not same(torch.linspace(a, b, n, dtype=torch.float32).numpy(), want):
                sweep_bad.append((a, b, n))
            if cuda_ok and not same(torch.linspace(a, b, n, dtype=torch.float32, device="cuda").cpu().numpy(), want):
                cuda_bad.append((a, b, n))
    report("linspace sweep (CPU, one fma per element)", not sweep_bad, mismatched=sweep_bad[:10],
           count=len(sweep_bad))
    print(json.dumps({"info": "linspace sweep on CUDA vs the CPU form", "mismatched": len(cuda_bad),
                      "first": cuda_bad[:5]}), flush=True)


def check_schedule():
    g, _ = sio.load_numpy(os.path.join(PIPE, "schedule.safetensors"))
    bad = []
    for key in sorted(k for k in g if k.startswith("sigmas_")):
        tag, n = key.split("_")[1], int(key.split("_N")[1])
        shift = 12.0 if tag == "video" else 3.0
        base = torch.linspace(1.0, 0.0, n, dtype=torch.float32)
        sig = torch.unique_consecutive(shift * base / (1 + (shift - 1) * base))
        if not same(sig.numpy(), g[key]) or not same((1.0 - sig[:-1]).numpy(), g[f"timesteps_{tag}_N{n}"]):
            bad.append(key)
    x, v = torch.from_numpy(g["euler_x"]), torch.from_numpy(g["euler_v"])
    s = torch.from_numpy(g["sigmas_video_N50"])
    t = torch.from_numpy(g["timesteps_video_N50"])
    for step in (7, 48):
        x0 = x + (1 - t[step]) * v
        r = s[step + 1] / s[step]
        if not same((r * x + (1.0 - r) * x0).numpy(), g[f"euler_out_step{step}"]):
            bad.append(f"euler_out_step{step}")
    report("MiniMaxH3Scheduler grids and Euler step", not bad, mismatched=bad)


def check_vision():
    helper = None
    for module in ("transformers.vision_utils", "transformers.models.qwen3_vl.modeling_qwen3_vl"):
        try:
            helper = getattr(__import__(module, fromlist=["_"]), "get_vision_interpolation_indices_and_weights")
            break
        except (ImportError, AttributeError):
            continue
    if helper is None:
        report("transformers get_vision_interpolation_indices_and_weights", False,
               error="not found: a transformers before 5.16 interpolates on torch.linspace")
        return
    from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLVisionConfig
    from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLVisionModel

    src = inspect.getsource(Qwen3VLVisionModel.forward)
    print(json.dumps({"info": "Qwen3VLVisionModel.forward position lines",
                      "lines": [ln.strip() for ln in src.splitlines() if "pos_embed" in ln or "interp_" in ln]}),
          flush=True)
    golden, _ = sio.load_numpy(os.path.join(VISION, "pos_embed.safetensors"))
    grids = golden["grids"].tolist()
    with open(os.path.join(VISION, "text_encoder", "config.json")) as f:
        vcfg = json.load(f)["vision_config"]
    cfg = Qwen3VLVisionConfig(**vcfg)
    cfg._attn_implementation = "sdpa"
    side = int(cfg.num_position_embeddings ** 0.5)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    axis_bad = []
    for _, h, w in grids:
        grid = torch.tensor([[1, h, w]], device=dev)
        idx, wts = helper(grid, side, mode="bilinear", align_corners=True, spatial_merge_size=cfg.spatial_merge_size)
        th, wh = tn.interp_axis(h, side)
        tw, ww = tn.interp_axis(w, side)
        r, c = tn.merge_order(h, w, cfg.spatial_merge_size)
        want_w = np.stack([(wh[r, a] * ww[c, b]).astype(np.float32) for a in (0, 1) for b in (0, 1)], axis=1)
        want_i = np.stack([th[r, a] * side + tw[c, b] for a in (0, 1) for b in (0, 1)], axis=1)
        if not same(wts.float().cpu().numpy(), want_w) or not np.array_equal(idx.cpu().numpy(), want_i):
            axis_bad.append((h, w))
    report("get_vision_interpolation_indices_and_weights", not axis_bad, mismatched=axis_bad)

    weights, _ = sio.load(os.path.join(VISION, "text_encoder", "model-00002-of-00002.safetensors"))
    state = {k[len("model.visual."):]: v for k, v in weights.items() if k.startswith("model.visual.")}
    model = Qwen3VLVisionModel(cfg)
    missing, unexpected = model.load_state_dict(state, strict=False)
    model = model.to(dev, torch.bfloat16).eval()
    grid_thw = torch.tensor(grids, device=dev)
    n = int(sum(t * h * w for t, h, w in grids))
    idx, wts = helper(grid_thw, side, mode="bilinear", align_corners=True, spatial_merge_size=cfg.spatial_merge_size)
    with torch.no_grad():
        pos = (model.pos_embed(idx) * wts[:, :, None]).sum(1)
    report("pos embed sum (fp32, vs pos_embed.safetensors)", same(pos.float().cpu().numpy(), golden["pos"]),
           dtype=str(pos.dtype), missing=list(missing)[:3], unexpected=list(unexpected)[:3])
    captured = {}
    model.patch_embed.register_forward_hook(lambda m, a, out: captured.__setitem__("patch", out.detach().clone()))
    model.blocks[0].register_forward_pre_hook(
        lambda m, args, kwargs: captured.__setitem__("block0", args[0].detach().clone()), with_kwargs=True)
    gen = torch.Generator(device="cpu").manual_seed(3)
    pixels = torch.randn(n, 3 * cfg.temporal_patch_size * cfg.patch_size ** 2, generator=gen)
    with torch.no_grad():
        model(pixels.to(dev, torch.bfloat16), grid_thw=grid_thw)
    pe = torch.from_numpy(golden["pos"]).to(dev).to(torch.bfloat16)
    want = (captured["patch"].float() + pe.float()).to(torch.bfloat16)
    report("tower input = bf16(patch_embed + bf16(pos))", torch.equal(captured["block0"], want),
           dtype=str(captured["block0"].dtype))


def main():
    print(json.dumps({"torch": torch.__version__, "cuda": torch.cuda.is_available()}), flush=True)
    check_linspace()
    check_schedule()
    check_vision()
    print(json.dumps({"failures": failures}), flush=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
