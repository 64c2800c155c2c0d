"""Statistics of one generated demo clip (PNG frames + a WAV), for the golden test (tests/cli/demo_model.sh):
per sampled frame its channel means, the shape's centroid and pixel count (pixels far from the frame's border
colour), the background and shape colours named after demo_data's palette; the soundtrack's RMS in 0.1 s
windows and the loudest window's peak frequency. numpy only (no torch: it runs in CI).

    python3 tools/train_demo/clip_stats.py FRAMES_DIR AUDIO.wav --json OUT.json
    python3 tools/train_demo/clip_stats.py FRAMES_DIR AUDIO.wav --golden GOLDEN.json [--update]
"""
import argparse
import json
import os
import sys
import wave

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import demo_data as dd  # noqa: E402
from png_io import read_png  # noqa: E402

FRAMES = (0, 4, 8, 16, 32, 48, 64, 96, 106)
WINDOW_S = 0.1
# how far a statistic may move from the golden before the test says the clip changed
TOL = dict(mean=1.5, centroid=1.5, count_rel=0.15, count_abs=6, rms_rel=0.10, rms_abs=0.004, freq_hz=12.0)


def nearest(palette, rgb):
    return min(palette, key=lambda n: float(np.abs(np.array(palette[n], dtype=np.float64) - rgb).sum()))


def frame_stats(path):
    img = read_png(path).astype(np.float64)
    border = np.concatenate([img[0], img[-1], img[:, 0], img[:, -1]])
    bg = np.median(border, axis=0)
    mask = np.abs(img - bg).sum(-1) > 90
    ys, xs = np.nonzero(mask)
    s = dict(mean=[round(float(v), 3) for v in img.reshape(-1, 3).mean(0)], count=int(mask.sum()),
             background=nearest(dd.BACKGROUNDS, bg))
    if len(xs) >= 10:
        s["centroid"] = [round(float(xs.mean()), 3), round(float(ys.mean()), 3)]
        s["colour"] = nearest(dd.COLOURS, img[mask].mean(0))
    return s


def audio_stats(path):
    with wave.open(path) as w:
        rate, ch, width, n = w.getframerate(), w.getnchannels(), w.getsampwidth(), w.getnframes()
        raw = w.readframes(n)
    if width != 2:
        raise SystemExit(f"{path}: expected 16-bit PCM, got {8 * width}-bit")
    x = np.frombuffer(raw, dtype="<i2").reshape(-1, ch).astype(np.float64).mean(1) / 32768.0
    hop = int(rate * WINDOW_S)
    rms = [float(np.sqrt((x[i:i + hop] ** 2).mean())) for i in range(0, len(x) - hop + 1, hop)]
    loud = int(np.argmax(rms))
    seg = x[loud * hop: loud * hop + 4096]
    spec = np.abs(np.fft.rfft(seg * np.hanning(len(seg))))
    freq = float(np.fft.rfftfreq(len(seg), 1.0 / rate)[int(np.argmax(spec))])
    return dict(rate=rate, rms=[round(v, 5) for v in rms], loudest_window=loud, peak_hz=round(freq, 1))


def clip_stats(frames_dir, wav):
    return dict(frames={str(k): frame_stats(os.path.join(frames_dir, f"frame_{k:05d}.png")) for k in FRAMES},
                audio=audio_stats(wav))


def differences(got, want):
    """Every statistic of `got` that moved from `want` by more than TOL, as readable lines."""
    out = []
    for k, w in want["frames"].items():
        g = got["frames"].get(k)
        if g is None:
            out.append(f"frame {k}: missing")
            continue
        for c in range(3):
            if abs(g["mean"][c] - w["mean"][c]) > TOL["mean"]:
                out.append(f"frame {k}: channel {c} mean {g['mean'][c]} vs {w['mean'][c]}")
        if abs(g["count"] - w["count"]) > max(TOL["count_abs"], TOL["count_rel"] * w["count"]):
            out.append(f"frame {k}: shape pixels {g['count']} vs {w['count']}")
        for key in ("background", "colour"):
            if g.get(key) != w.get(key):
                out.append(f"frame {k}: {key} {g.get(key)} vs {w.get(key)}")
        if ("centroid" in g) != ("centroid" in w):
            out.append(f"frame {k}: shape found {'centroid' in g} vs {'centroid' in w}")
        elif "centroid" in w and max(abs(a - b) for a, b in zip(g["centroid"], w["centroid"])) > TOL["centroid"]:
            out.append(f"frame {k}: centroid {g['centroid']} vs {w['centroid']}")
    ga, wa = got["audio"], want["audio"]
    if len(ga["rms"]) != len(wa["rms"]):
        out.append(f"audio: {len(ga['rms'])} windows vs {len(wa['rms'])}")
    else:
        for i, (a, b) in enumerate(zip(ga["rms"], wa["rms"])):
            if abs(a - b) > TOL["rms_abs"] + TOL["rms_rel"] * b:
                out.append(f"audio window {i} ({i * WINDOW_S:.1f} s): RMS {a} vs {b}")
    if abs(ga["peak_hz"] - wa["peak_hz"]) > TOL["freq_hz"]:
        out.append(f"audio: peak {ga['peak_hz']} Hz vs {wa['peak_hz']} Hz")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("frames")
    ap.add_argument("wav")
    ap.add_argument("--json", help="write the statistics here")
    ap.add_argument("--golden", help="compare with this golden (exit 1 when a statistic moved)")
    ap.add_argument("--update", action="store_true", help="with --golden: rewrite it from this clip")
    a = ap.parse_args()
    s = clip_stats(a.frames, a.wav)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(s, f, indent=1)
    if a.golden:
        if a.update:
            with open(a.golden, "w") as f:
                json.dump(s, f, indent=1)
                f.write("\n")
            print(f"clip_stats: wrote {a.golden}")
            return
        with open(a.golden) as f:
            diff = differences(s, json.load(f))
        if diff:
            print("clip_stats: the clip differs from " + a.golden + ":\n  " + "\n  ".join(diff))
            sys.exit(1)
        print(f"clip_stats: the clip matches {a.golden} ({len(s['frames'])} frames, {len(s['audio']['rms'])} audio windows)")


if __name__ == "__main__":
    main()
