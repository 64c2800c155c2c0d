"""The exported demo checkpoint through the engine: `inspect` must report it clean, and the engine's fp32
denoise (`generate --save-latents`) must equal the project's Python reference pipeline
(tools/reference/make_pipeline_goldens.denoise + h3_dit.forward, and vae_reference.encode_keyframe for the
fl2va keyframe) on the same conditioner rows and seed — so the engine runs exactly the model that trained.
Then `generate` writes one MP4 per task (t2va, fl2va, ref2va) at the demo's native size, `decode` its
latents to PNG frames, and the shape's centroid over the first 9 frames says whether it moves the way the
caption says (reported, not a failure: a smoke-trained model does not).

    /usr/bin/python3 tools/train_demo/verify_engine.py --engine build/src/cli/h3-engine --model DIR --out DIR
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import conditioning  # noqa: E402
import demo_arch  # noqa: E402
import demo_data as dd  # noqa: E402
import h3_dit  # noqa: E402
import make_pipeline_goldens as mpg  # noqa: E402
import safetensors_io as sio  # noqa: E402
from demo_arch import vr  # noqa: E402
from png_io import read_png, write_png  # noqa: E402

GEOMETRY = ["--size", conditioning.SIZE, "--frames", str(dd.FRAMES)]


def engine(cmd, what):
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{what} failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr.strip()}")
    return (r.stdout + r.stderr).strip(), time.time() - t0


def compare(a, model, out, task, scene, seed, steps, keyframe=None):
    """The engine's fp32 latents vs the reference's for one request; returns the worst relative difference."""
    sc = dd.Scene.from_index(scene)
    pe = os.path.join(out, f"embeds_{task}.safetensors")
    lat = os.path.join(out, f"latents_{task}.safetensors")
    kf = ["--first-frame", keyframe] if keyframe else []
    engine([a.engine, "encode", "--model", model, "--prompt", sc.caption(), "--output", pe] + kf +
           (["--size", conditioning.SIZE] if keyframe else []), "encode")
    engine([a.engine, "generate", "--model", model, "--prompt-embeds", pe, "--steps", str(steps), "--seed",
            str(seed), "--dtype", "fp32", "--device", "cpu", "--save-latents", lat] + GEOMETRY + kf, "generate")
    W, cfg = h3_dit.load_model_dir(os.path.join(model, "transformer"))
    W = h3_dit.prepare_weights(W, "fp32")
    e, _ = sio.load_file(pe)
    g = mpg.geometry(dd.WIDTH, dd.HEIGHT, dd.FRAMES)
    kl = []
    if keyframe:
        with open(os.path.join(model, "vae", "config.json")) as f:
            vcfg = demo_arch.reference_video_cfg(json.load(f))
        Wv, _ = sio.load_file(os.path.join(model, "vae", "diffusion_pytorch_model.safetensors"))
        kl = [vr.encode_keyframe(torch.from_numpy(read_png(keyframe)), {n: t.float() for n, t in Wv.items()}, vcfg)]
    ref = mpg.denoise(W, cfg, e["prompt_embeds"].float(), e["prompt_tags"].tolist(), g,
                      ["first"] if keyframe else [], kl, seed, steps)
    got, _ = sio.load_file(lat)
    worst = 0.0
    for k in ("video_latents", "audio_latents"):
        r, x = ref[k].float(), got[k].float().reshape(ref[k].shape)
        worst = max(worst, ((r - x).abs().max() / r.abs().max()).item())
    return worst


def decode_check(model, latents_file, frames_dir):
    """The engine's decode (PNG frames) against vae_reference.decode_video of the same latents: the largest
    pixel difference in 8-bit levels (rounding alone gives at most 1)."""
    with open(os.path.join(model, "vae", "config.json")) as f:
        vcfg = demo_arch.reference_video_cfg(json.load(f))
    Wv, _ = sio.load_file(os.path.join(model, "vae", "diffusion_pytorch_model.safetensors"))
    lat, _ = sio.load_file(latents_file)
    z = lat["video_latents"].float()
    z = z.reshape((1,) + tuple(z.shape[-4:]))
    with torch.no_grad():
        ref = vr.to_pixels(vr.decode_video(z, {n: t.float() for n, t in Wv.items()}, vcfg))[0]  # [3, F, H, W]
    ref8 = (ref * 255).round().permute(1, 2, 3, 0).numpy()
    worst = 0.0
    for k in range(ref8.shape[0]):
        got = read_png(os.path.join(frames_dir, f"frame_{k:05d}.png")).astype(np.float64)
        worst = max(worst, float(np.abs(got - ref8[k]).max()))
    return worst


def shape_track(frames_dir, frames):
    """The shape's centroid (x, y) in each of the first `frames` PNG frames: the pixels far from the frame's
    border colour (the background). None where fewer than 10 pixels stand out."""
    out = []
    for k in range(frames):
        img = read_png(os.path.join(frames_dir, f"frame_{k:05d}.png")).astype(np.int32)
        border = np.concatenate([img[0], img[-1], img[:, 0], img[:, -1]])
        mask = np.abs(img - np.median(border, axis=0)).sum(-1) > 90
        ys, xs = np.nonzero(mask)
        out.append((float(xs.mean()), float(ys.mean())) if len(xs) >= 10 else None)
    return out


def motion(frames_dir, scene, frames=9):
    """Does the generated shape move the way the caption says over the first frames (before a wall can turn
    it)? Returns the measured and the expected displacement in pixels."""
    track = shape_track(frames_dir, frames)
    dx, dy = dd.DIRECTIONS[scene.direction]
    expected = dd.SPEED * (frames - 1)
    if track[0] is None or track[-1] is None:
        return dict(found=sum(t is not None for t in track), of=frames, follows=False)
    mx, my = track[-1][0] - track[0][0], track[-1][1] - track[0][1]
    along = mx * dx + my * dy
    return dict(dx=round(mx, 1), dy=round(my, 1), along=round(along, 1), expected=round(expected, 1),
                follows=bool(along > 0.5 * expected))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--engine", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=16, help="sampling steps of the MP4s")
    ap.add_argument("--check-steps", type=int, default=4, help="sampling steps of the engine-vs-reference check")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--device", default="cpu", help="where the MP4s are generated and decoded (the check: CPU)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    t0 = time.time()
    text, _ = engine([a.engine, "inspect", a.model], "inspect")
    print(text, flush=True)
    if "missing" in text.lower() or "unexpected" in text.lower():
        raise SystemExit("inspect reports a problem with the exported checkpoint")
    scene, seed = 17, 3
    sc = dd.Scene.from_index(scene)
    first = os.path.join(a.out, "first_frame.png")
    write_png(first, dd.make_clip(sc, seed, frame_range=(0, 1)).frames[0])
    reference = os.path.join(a.out, "reference.png")
    write_png(reference, dd.reference_image(sc))
    checks = {"t2va": compare(a, a.model, a.out, "t2va", scene, seed, a.check_steps),
              "fl2va": compare(a, a.model, a.out, "fl2va", scene, seed, a.check_steps, first)}
    print(json.dumps({"engine_vs_reference_relative": checks}), flush=True)
    bad = {k: v for k, v in checks.items() if not v < a.tol}
    if bad:
        raise SystemExit(f"the engine's denoise differs from the reference's: {bad} (tolerance {a.tol})")
    runs = {"t2va": ["--prompt", sc.caption()],
            "fl2va": ["--prompt", sc.caption(), "--first-frame", first],
            "ref2va": ["--prompt", dd.reference_caption(sc), "--reference", reference, "--reference-image-edge",
                       str(conditioning.REFERENCE_IMAGE_EDGE)]}
    seconds, moves = {}, {}
    for task, args in runs.items():
        mp4 = os.path.join(a.out, f"{task}.mp4")
        lat = os.path.join(a.out, f"{task}.latents.safetensors")
        log, seconds[task] = engine([a.engine, "generate", "--model", a.model, "--steps", str(a.steps), "--seed",
                                     "1", "--device", a.device, "--output", mp4, "--save-latents", lat] + GEOMETRY + args,
                                    "generate " + task)
        print(f"{task}: {log.splitlines()[-1]}", flush=True)
        frames = os.path.join(a.out, f"{task}_frames") + os.sep
        engine([a.engine, "decode", "--model", a.model, "--latents", lat, "--output", frames, "--device", a.device],
               "decode " + task)
        moves[task] = motion(frames, sc)
        if task == "t2va":
            levels = decode_check(a.model, lat, frames)
            print(json.dumps({"engine_decode_vs_reference_max_levels": levels}), flush=True)
            if levels > 2:
                raise SystemExit(f"the engine's video decode differs from the reference's by {levels} levels")
    print(json.dumps({"motion": {"caption": sc.caption(), **moves}}), flush=True)
    print(json.dumps(dict(stage="verify", generate_seconds={k: round(v, 1) for k, v in seconds.items()},
                          follows_caption={k: v["follows"] for k, v in moves.items()},
                          wall_seconds=round(time.time() - t0, 1))), flush=True)


if __name__ == "__main__":
    main()
