"""Write the trained demo model as a checkpoint root in the official diffusers layout (what
`h3-engine make-tiny` writes, src/model/tiny/tiny_checkpoint.cpp), which the engine loads like any other:

  model_index.json, scheduler/, audio_scheduler/    from <work>/tiny (make-tiny --seed 0: shifts 12 and 3)
  text_encoder/, tokenizer/                         the same tiny random Qwen3-VL conditioner the DiT trained on
  transformer/, transformer_ref/                    the trained DiT (both: one DiT learned t2va, fl2va and
                                                    ref2va), config.json + 2 shards + index; bf16 with the
                                                    release's fp32 islands (proj_in, audio_proj_in,
                                                    time_embedder, proj_out, audio_proj_out)
  vae/, audio_vae/                                  the trained VAEs, fp32 as the release keeps them, with the
                                                    measured latents_mean / latents_std in config.json
  train_demo.json                                   what trained it (stage summaries, example prompts)
  h3_defaults.json                                  the request defaults the engine reads (native size,
                                                    frames, steps, reference edge) and the captions' words

    /usr/bin/python3 tools/train_demo/export.py --work build/train_demo --out build/train_demo/model
"""
import argparse
import json
import os
import shutil
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import conditioning  # noqa: E402
import demo_arch  # noqa: E402
import demo_data as dd  # noqa: E402
import h3_dit  # noqa: E402
import safetensors_io as sio  # noqa: E402

MAX_BYTES = 20 * 1000 * 1000  # issue 23: the demo checkpoint is at most 20 MB
COPIED = ("model_index.json", "scheduler", "audio_scheduler", "text_encoder", "tokenizer")


def dit_tensors(W):
    """Release dtypes: fp32 islands stay fp32, the rest bf16."""
    return {n: (t.float() if h3_dit.is_fp32_island(n) else t.to(torch.bfloat16)).contiguous() for n, t in W.items()}


def two_shards(tensors):
    """The shard size that splits `tensors` (in save_sharded's name order) into two files, like make-tiny."""
    sizes = [tensors[n].numel() * tensors[n].element_size() for n in sorted(tensors)]
    cum = 0
    for b in sizes:
        cum += b
        if 2 * cum >= sum(sizes):
            return cum


def check_names(W, expected, what):
    got = {n: list(t.shape) for n, t in W.items()}
    want = dict(expected)
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    bad = sorted(n for n in set(want) & set(got) if want[n] != got[n])
    if missing or extra or bad:
        raise ValueError(f"{what}: missing {missing[:5]}, unexpected {extra[:5]}, wrong shapes {bad[:5]}")


def folder_bytes(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", default="build/train_demo")
    ap.add_argument("--out", default=None, help="the checkpoint root (default <work>/model)")
    a = ap.parse_args()
    out = a.out or os.path.join(a.work, "model")
    tiny = os.path.join(a.work, "tiny")
    if not os.path.exists(os.path.join(tiny, "model_index.json")):
        raise FileNotFoundError(f"{tiny} is missing: conditioning.py writes it (make-tiny)")
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(out)
    for name in COPIED:
        src = os.path.join(tiny, name)
        (shutil.copytree if os.path.isdir(src) else shutil.copy)(src, os.path.join(out, name))
    with open(os.path.join(out, "model_index.json")) as f:
        index = json.load(f)
    for v in index.values():
        if isinstance(v, list) and len(v) == 3 and isinstance(v[2], dict):
            v[2]["pretrained_model_name_or_path"] = "h3-engine/train-demo"
    demo_arch.write_json(os.path.join(out, "model_index.json"), index)

    # the DiT, in both DiT folders
    W, dit_meta = demo_arch.load_state(os.path.join(a.work, "dit.done.safetensors"))
    cfg = dict(demo_arch.DIT_CONFIG, _diffusers_version="0.36.0.dev0")
    expected = {n: list(t.shape) for n, t in demo_arch.init_dit(demo_arch.DIT_CONFIG, 0).items()}
    check_names(W, expected.items(), "dit.done.safetensors")
    for folder in ("transformer", "transformer_ref"):
        d = os.path.join(out, folder)
        os.makedirs(d)
        demo_arch.write_json(os.path.join(d, "config.json"), cfg)
        t = dit_tensors(W)
        sio.save_sharded(d, t, "diffusion_pytorch_model", max_bytes=two_shards(t))

    # the VAEs
    summaries = {"dit": dit_meta}
    for which, inventory in (("video", lambda c: demo_arch.video_decoder_tensors(c) + demo_arch.video_encoder_tensors(c)),
                             ("audio", lambda c: demo_arch.audio_decoder_tensors(c) + demo_arch.audio_encoder_tensors(c))):
        cfg_v = demo_arch.trained_vae_config(a.work, which)
        Wv, meta = demo_arch.load_state(os.path.join(a.work, which + "_vae.done.safetensors"))
        check_names(Wv, inventory(demo_arch.reference_video_cfg(cfg_v) if which == "video" else cfg_v),
                    which + "_vae.done.safetensors")
        d = os.path.join(out, "vae" if which == "video" else "audio_vae")
        os.makedirs(d)
        demo_arch.write_json(os.path.join(d, "config.json"), cfg_v)
        sio.save(os.path.join(d, "diffusion_pytorch_model.safetensors"),
                 {n: t.float().contiguous() for n, t in Wv.items()}, {"format": "pt"})
        summaries[which + "_vae"] = {k: v for k, v in meta.items() if k not in ("latents_mean", "latents_std")}
    for name in ("conditioning", "latents"):
        p = os.path.join(a.work, name + ".summary.json")
        if os.path.exists(p):
            with open(p) as f:
                summaries[name] = json.load(f)
    summaries["dit"] = {k: v for k, v in summaries["dit"].items() if k != "config"}
    demo_arch.write_json(os.path.join(out, "train_demo.json"), {
        "what": "a tiny demo model in the MiniMax-H3 architecture trained on procedural clips "
                "(tools/train_demo); not MiniMax-H3",
        "example_prompts": [dd.Scene.from_index(i).caption() for i in (0, 17, 50)],
        "stages": summaries,
    })
    demo_arch.write_json(os.path.join(out, "h3_defaults.json"), {
        "what": "the demo model's native request defaults and its captions' words (read by h3-engine)",
        "size": f"{dd.WIDTH}x{dd.HEIGHT}",
        "frames": dd.FRAMES,
        "num_inference_steps": dd.STEPS,
        "reference_image_edge": conditioning.REFERENCE_IMAGE_EDGE,
        "vocabulary": dd.caption_vocabulary(),
    })
    total = folder_bytes(out)
    print(json.dumps(dict(stage="export", out=out, bytes=total)), flush=True)
    if total > MAX_BYTES:
        raise SystemExit(f"export: {out} holds {total} bytes, over the {MAX_BYTES}-byte demo budget")


if __name__ == "__main__":
    main()
