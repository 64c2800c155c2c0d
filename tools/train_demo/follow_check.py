"""Does the demo model follow its captions? Generates one clip per chosen scene through the engine (t2va, CPU)
and reads off each clip the shape's colour, the background and the motion over the first 8 frames (the shape's
centroid, tools/train_demo/clip_stats.py's), against the caption. numpy only.

    /usr/bin/python3 tools/train_demo/follow_check.py --engine build/src/cli/h3-engine [--model models/h3-demo] \\
        [--scenes 0,5,14,...] [--seed 1] [--steps 30] [--work DIR]
"""
import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clip_stats  # noqa: E402
import demo_data as dd  # noqa: E402

DEFAULT_SCENES = "0,5,14,23,30,41,50,59,66,77,83,95"  # every colour, shape, direction and background


def check(engine, model, scene, seed, steps, work):
    sc = dd.Scene.from_index(scene)
    frames = os.path.join(work, f"scene{scene}") + os.sep
    cmd = [engine, "generate", "--prompt", sc.caption(), "--seed", str(seed), "--steps", str(steps),
           "--device", "cpu", "--progress", "none", "--output", frames]
    if model:
        cmd += ["--model", model, "--size", f"{dd.WIDTH}x{dd.HEIGHT}", "--frames", str(dd.FRAMES)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"generate failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr.strip()}")
    f0, f8 = (clip_stats.frame_stats(os.path.join(frames, f"frame_{k:05d}.png")) for k in (0, 8))
    dx, dy = dd.DIRECTIONS[sc.direction]
    expected = dd.SPEED * 8
    along = None
    if "centroid" in f0 and "centroid" in f8:
        along = (f8["centroid"][0] - f0["centroid"][0]) * dx + (f8["centroid"][1] - f0["centroid"][1]) * dy
    return dict(caption=sc.caption(), colour=f0.get("colour"), background=f0["background"],
                along=None if along is None else round(along, 1), expected=round(expected, 1),
                colour_ok=f0.get("colour") == sc.colour, background_ok=f0["background"] == sc.background,
                motion_ok=along is not None and along > 0.5 * expected)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--engine", required=True)
    ap.add_argument("--model", default="", help="checkpoint (default: generate's embedded demo model)")
    ap.add_argument("--scenes", default=DEFAULT_SCENES)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--work", default="")
    a = ap.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="h3-follow-")
    rows = [check(a.engine, a.model, int(s), a.seed, a.steps, work) for s in a.scenes.split(",")]
    print("| caption | colour | background | moved along (px, frames 0-8) |")
    print("|---|---|---|---|")
    for r in rows:
        mark = lambda ok: "" if ok else " ✗"  # noqa: E731
        print(f"| {r['caption']} | {r['colour']}{mark(r['colour_ok'])} | {r['background']}{mark(r['background_ok'])} "
              f"| {r['along']} of {r['expected']}{mark(r['motion_ok'])} |")
    n = len(rows)
    print(f"\ncolour {sum(r['colour_ok'] for r in rows)}/{n}, background {sum(r['background_ok'] for r in rows)}/{n}, "
          f"motion {sum(r['motion_ok'] for r in rows)}/{n} (more than half the training speed's "
          f"{dd.SPEED * 8:.1f} px along the caption's direction); seed {a.seed}, {a.steps} steps; clips in {work}")


if __name__ == "__main__":
    main()
