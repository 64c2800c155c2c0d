"""The DiT's conditioning: the tiny random Qwen3-VL conditioner of `h3-engine make-tiny --seed N` (fixed seed)
run by the engine itself (`h3-engine encode`) on every caption the DiT trains on, presented exactly as
`generate` presents it at the demo's geometry:

  t2va    the caption alone                                         (one per scene)
  fl2va   the caption with the clip's first frame as keyframe       (one per scene and fl2va clip seed)
  ref2va  reference_caption(scene) with reference_image(scene)      (one per scene)

    nice -n 10 /usr/bin/python3 tools/train_demo/conditioning.py --engine build/src/cli/h3-engine \\
        --work build/train_demo --scenes 96 --fl2va-seeds 2

Writes <work>/tiny/ (the make-tiny checkpoint: text encoder, tokenizer and schedulers the export reuses) and
<work>/conditioning.safetensors: `<task>.<scene>[.<seed>].embeds` f32 [L, text_dim] and `.tags` i64 [L]
(1 text, 0 vision rows), with the request of every entry in the metadata.
"""
import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import demo_arch  # noqa: E402,F401  (puts tools/reference on the path)
import demo_data as dd  # noqa: E402
import safetensors_io as sio  # noqa: E402
from png_io import write_png  # noqa: E402

TINY_SEED = 0  # the conditioner's seed: fixed, so the text encoder of every demo checkpoint is the same
SIZE = f"{dd.WIDTH}x{dd.HEIGHT}"
# ref2va: the reference image keeps its own size (its short edge is the canvas height); `generate` must be
# given the same --reference-image-edge (export.py writes it into the checkpoint's README).
REFERENCE_IMAGE_EDGE = dd.HEIGHT


def encode_requests(scenes, fl2va_seeds, work):
    """(name, argv after `encode --model M`) for every conditioning entry; writes the images they name."""
    img = os.path.join(work, "conditioning_images")
    os.makedirs(img, exist_ok=True)
    out = []
    for i in scenes:
        sc = dd.Scene.from_index(i)
        out.append((f"t2va.{i}", ["--prompt", sc.caption()]))
        for s in fl2va_seeds:
            path = os.path.join(img, f"first_{i}_{s}.png")
            write_png(path, dd.make_clip(sc, s, frame_range=(0, 1)).frames[0])
            out.append((f"fl2va.{i}.{s}", ["--prompt", sc.caption(), "--first-frame", path, "--size", SIZE]))
        path = os.path.join(img, f"reference_{i}.png")
        write_png(path, dd.reference_image(sc))
        out.append((f"ref2va.{i}", ["--prompt", dd.reference_caption(sc), "--reference", path,
                                    "--reference-image-edge", str(REFERENCE_IMAGE_EDGE),
                                    "--frames", str(dd.FRAMES)]))
    return out


def run_encode(engine, tiny, tmp, name, args):
    path = os.path.join(tmp, name + ".safetensors")
    cmd = [engine, "encode", "--model", tiny, "--output", path, "--device", "cpu"] + args
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip() or r.stdout.strip()}")
    t, _ = sio.load_file(path)
    os.remove(path)
    return name, t["prompt_embeds"].float(), t["prompt_tags"].long()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--engine", required=True, help="the h3-engine binary")
    ap.add_argument("--work", default="build/train_demo")
    ap.add_argument("--scenes", type=int, default=len(dd.SCENES), help="the first N scenes (all: 96)")
    ap.add_argument("--fl2va-seeds", type=int, default=2, help="fl2va clips per scene (clip seeds 0..N-1)")
    ap.add_argument("--jobs", type=int, default=max(1, min(8, (os.cpu_count() or 2) // 2)))
    a = ap.parse_args()
    t0 = time.time()
    tiny = os.path.join(a.work, "tiny")
    if not os.path.exists(os.path.join(tiny, "model_index.json")):
        subprocess.run([a.engine, "make-tiny", tiny, "--seed", str(TINY_SEED)], check=True, capture_output=True)
    reqs = encode_requests(range(a.scenes), range(a.fl2va_seeds), a.work)
    tmp = os.path.join(a.work, "conditioning_tmp")
    os.makedirs(tmp, exist_ok=True)
    tensors, index = {}, {}
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        for name, emb, tags in pool.map(lambda r: run_encode(a.engine, tiny, tmp, *r), reqs):
            tensors[name + ".embeds"] = emb.contiguous()
            tensors[name + ".tags"] = tags.contiguous()
    for name, args in reqs:
        index[name] = args
    os.rmdir(tmp)
    meta = {"requests": json.dumps(index), "tiny_seed": str(TINY_SEED), "scenes": str(a.scenes),
            "fl2va_seeds": str(a.fl2va_seeds)}
    sio.save(os.path.join(a.work, "conditioning.safetensors"), tensors, meta)
    summary = dict(stage="conditioning", entries=len(reqs), wall_seconds=round(time.time() - t0, 1),
                   max_rows=max(t.shape[0] for n, t in tensors.items() if n.endswith(".embeds")))
    with open(os.path.join(a.work, "conditioning.summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
