"""Procedural clips for the demo model: one shape moving in a stated direction over a plain background,
bouncing off the canvas walls, each bounce making a tone; the caption says what happens.

Everything is a pure function of (caption attributes, seed): numpy only, deterministic on every machine.

    clip = make_clip(Scene.from_index(i), seed)   # i in [0, len(SCENES)), any integer seed
    clip.frames   uint8 [F, H, W, 3] at 24 fps        clip.audio  float32 [2, N] at 32 kHz (stereo)
    clip.caption  "a red ball bounces to the left on a dark background"
    clip.bounces  [(seconds, wall), ...]

fl2va examples use clip.frames[0] as the first keyframe (and optionally clip.frames[-1] as the last);
ref2va examples use `reference_image(scene)`: the shape alone, centred on its background, with the
caption `reference_caption(scene)` that names only the motion ("<Picture 1> bounces up on a dark background").
"""
import dataclasses
import itertools
import math

import numpy as np

FPS = 24
SAMPLE_RATE = 32000
WIDTH, HEIGHT = 128, 64
FRAMES = 107  # 17n+5 at 4.46 s: the engine's shortest clip (4 s, snapped up)
AUDIO_SAMPLES = 800 * round(FRAMES / FPS * 40)  # the audio VAE's hop times the engine's audio latent count

COLOURS = {"red": (225, 45, 40), "green": (40, 200, 70), "blue": (60, 110, 245), "yellow": (240, 215, 40)}
SHAPES = ("ball", "square", "triangle")
TONE_HZ = {"ball": 440.0, "square": 330.0, "triangle": 660.0}  # each shape has its own pitch
DIRECTIONS = {"left": (-1.0, 0.0), "right": (1.0, 0.0), "up": (0.0, -1.0), "down": (0.0, 1.0)}
BACKGROUNDS = {"dark": (24, 28, 44), "light": (196, 200, 206)}

RADIUS = 10.0          # px: the shape's half-size
SPEED = 2.4            # px per frame (±10 % per clip)
JITTER = (10.0, 6.0)   # px: the start point's offset from the centre (x, y), uniform
TONE_SECONDS = 0.35    # a bounce's tone: 3 ms attack, exponential decay (tau 90 ms), cut after this
TONE_TAU = 0.09
TONE_GAIN = 0.5


@dataclasses.dataclass(frozen=True)
class Scene:
    colour: str
    shape: str
    direction: str
    background: str

    @staticmethod
    def from_index(i):
        return SCENES[i % len(SCENES)]

    def motion(self):
        """"bounces to the left" / "bounces up"."""
        return f"bounces to the {self.direction}" if self.direction in ("left", "right") else f"bounces {self.direction}"

    def caption(self):
        return f"a {self.colour} {self.shape} {self.motion()} on a {self.background} background"


SCENES = tuple(Scene(c, s, d, b) for b, c, s, d in itertools.product(BACKGROUNDS, COLOURS, SHAPES, DIRECTIONS))


def reference_caption(scene):
    """The ref2va prompt: the object comes from the reference picture, the motion from the text."""
    return f"<Picture 1> {scene.motion()} on a {scene.background} background"


# The grid points the demo model is sampled with (its verify stage, scripts/setup.sh, h3_defaults.json).
STEPS = 30


def caption_vocabulary():
    """Every word of the t2va and ref2va captions (the "<Picture 1>" placeholder aside), sorted: what the demo
    model's prompts can say (the engine warns about other words, h3_defaults.json's `vocabulary`)."""
    words = set()
    for scene in SCENES:
        for text in (scene.caption(), reference_caption(scene).replace("<Picture 1>", "")):
            words.update(text.lower().split())
    return sorted(words)


@dataclasses.dataclass
class Clip:
    scene: Scene
    caption: str
    frames: np.ndarray  # uint8 [F, H, W, 3]
    audio: np.ndarray   # float32 [2, N]
    bounces: list       # [(seconds, wall)] wall in left|right|top|bottom
    start: tuple        # (x, y) px at frame 0
    speed: float        # px per frame


# ---- rendering -----------------------------------------------------------------------------------------
def _coverage(shape, cx, cy, width, height):
    """Anti-aliased coverage in [0, 1] of the shape centred at (cx, cy): clip(0.5 - signed distance)."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    dx, dy = x + 0.5 - cx, y + 0.5 - cy
    if shape == "ball":
        sd = np.hypot(dx, dy) - RADIUS
    elif shape == "square":
        h = RADIUS * 0.88
        sd = np.maximum(np.abs(dx), np.abs(dy)) - h
    elif shape == "triangle":  # equilateral, pointing up, centroid at (cx, cy)
        r = RADIUS * 1.15
        n = [(0.0, -1.0), (math.sin(math.radians(120)), -math.cos(math.radians(120))),
             (math.sin(math.radians(240)), -math.cos(math.radians(240)))]
        # inscribed radius r/2 from the centroid along each edge normal (edges face down, up-right, up-left)
        sd = np.max(np.stack([-(dx * a + dy * b) - r / 2 for a, b in n]), axis=0)
    else:
        raise ValueError(f"unknown shape {shape}")
    return np.clip(0.5 - sd, 0.0, 1.0)


def render_frame(scene, cx, cy, width=WIDTH, height=HEIGHT):
    bg = np.array(BACKGROUNDS[scene.background], dtype=np.float64)
    fg = np.array(COLOURS[scene.colour], dtype=np.float64)
    img = np.empty((height, width, 3), dtype=np.float64)
    img[:] = bg
    m = int(RADIUS * 1.3) + 2  # a box that holds every covered pixel
    x0, x1 = max(0, int(cx) - m), min(width, int(cx) + m + 1)
    y0, y1 = max(0, int(cy) - m), min(height, int(cy) + m + 1)
    a = _coverage(scene.shape, cx - x0, cy - y0, x1 - x0, y1 - y0)[..., None]
    img[y0:y1, x0:x1] = bg * (1 - a) + fg * a
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def reference_image(scene, width=WIDTH, height=HEIGHT):
    return render_frame(scene, width / 2, height / 2, width, height)


# ---- motion ----------------------------------------------------------------------------------------------
def _reflect(p, lo, hi):
    """A point moving freely at p folded into [lo, hi] (mirror at each wall)."""
    span = hi - lo
    q = np.mod(p - lo, 2 * span)
    return lo + np.where(q > span, 2 * span - q, q)


def _bounce_times(p0, v, lo, hi, t_end):
    """Times (frames) at which a point starting at p0 with velocity v hits lo or hi, and the wall hit."""
    out = []
    if v == 0:
        return out
    span = hi - lo
    # unfolded coordinate u = p0 + v t crosses lo + k*span for integer k; even k -> lo wall, odd -> hi wall
    u0 = p0 - lo
    k = math.floor(u0 / span) + (1 if v > 0 else 0)
    while True:
        t = (k * span - u0) / v
        if t > t_end:
            break
        if t > 0:
            out.append((t, "hi" if k % 2 else "lo"))
        k += 1 if v > 0 else -1
    return out


def trajectory(scene, rng, frames=FRAMES, width=WIDTH, height=HEIGHT):
    dx, dy = DIRECTIONS[scene.direction]
    speed = SPEED * rng.uniform(0.9, 1.1)
    x0 = width / 2 + rng.uniform(-JITTER[0], JITTER[0])
    y0 = height / 2 + rng.uniform(-JITTER[1], JITTER[1])
    t = np.arange(frames, dtype=np.float64)
    lo_x, hi_x = RADIUS, width - RADIUS
    lo_y, hi_y = RADIUS, height - RADIUS
    xs = _reflect(x0 + dx * speed * t, lo_x, hi_x)
    ys = _reflect(y0 + dy * speed * t, lo_y, hi_y)
    walls = []
    for tb, side in _bounce_times(x0, dx * speed, lo_x, hi_x, frames - 1):
        walls.append((tb / FPS, "left" if side == "lo" else "right"))
    for tb, side in _bounce_times(y0, dy * speed, lo_y, hi_y, frames - 1):
        walls.append((tb / FPS, "top" if side == "lo" else "bottom"))
    return xs, ys, sorted(walls), (x0, y0), speed


# ---- sound -----------------------------------------------------------------------------------------------
PAN = {"left": (1.0, 0.3), "right": (0.3, 1.0), "top": (0.8, 0.8), "bottom": (0.8, 0.8)}


def bounce_audio(scene, bounces, samples=AUDIO_SAMPLES, rate=SAMPLE_RATE):
    """Stereo float32 [2, samples]: a decaying tone at the shape's pitch per bounce, panned to the wall."""
    out = np.zeros((2, samples), dtype=np.float64)
    f = TONE_HZ[scene.shape]
    n = int(TONE_SECONDS * rate)
    tt = np.arange(n) / rate
    env = np.minimum(tt / 0.003, 1.0) * np.exp(-tt / TONE_TAU)
    tone = TONE_GAIN * env * (np.sin(2 * np.pi * f * tt) + 0.25 * np.sin(4 * np.pi * f * tt)) / 1.25
    for sec, wall in bounces:
        s = int(round(sec * rate))
        if s >= samples:
            continue
        m = min(n, samples - s)
        for c, gain in enumerate(PAN[wall]):
            out[c, s:s + m] += gain * tone[:m]
    return out.astype(np.float32)


def make_clip(scene, seed, frames=FRAMES, width=WIDTH, height=HEIGHT, samples=None, frame_range=None):
    """The clip of `scene` for `seed` (start point and speed come from the seed). `frame_range` (start, stop)
    renders only those frames (the motion and the sound are those of the whole clip)."""
    rng = np.random.default_rng([seed, SCENES.index(scene)])
    xs, ys, bounces, start, speed = trajectory(scene, rng, frames, width, height)
    lo, hi = frame_range or (0, frames)
    video = np.stack([render_frame(scene, x, y, width, height) for x, y in zip(xs[lo:hi], ys[lo:hi])])
    if samples is None:
        samples = 800 * round(frames / FPS * 40)
    return Clip(scene, scene.caption(), video, bounce_audio(scene, bounces, samples), bounces, start, speed)


def clip_audio(scene, seed, frames=FRAMES, samples=None):
    """The soundtrack of make_clip(scene, seed) alone (no frames rendered): (audio [2, N], bounces)."""
    rng = np.random.default_rng([seed, SCENES.index(scene)])
    _, _, bounces, _, _ = trajectory(scene, rng, frames)
    if samples is None:
        samples = 800 * round(frames / FPS * 40)
    return bounce_audio(scene, bounces, samples), bounces


def describe(clip):
    b = ", ".join(f"{t:.2f} s {w}" for t, w in clip.bounces)
    return f"{clip.caption}: start ({clip.start[0]:.1f}, {clip.start[1]:.1f}), {clip.speed:.2f} px/frame, bounces {b}"


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description="print a few clips' captions and bounces; write PNGs/WAV")
    ap.add_argument("--index", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", help="folder for frame PNGs (every 8th) and audio.wav")
    a = ap.parse_args()
    c = make_clip(Scene.from_index(a.index), a.seed)
    print(describe(c))
    if a.out:
        import os
        import wave
        from png_io import write_png
        os.makedirs(a.out, exist_ok=True)
        for i in range(0, len(c.frames), 8):
            write_png(os.path.join(a.out, f"frame_{i:03d}.png"), c.frames[i])
        pcm = (np.clip(c.audio.T, -1, 1) * 32767).astype("<i2")
        with wave.open(os.path.join(a.out, "audio.wav"), "wb") as w:
            w.setnchannels(2)
            w.setsampwidth(2)
            w.setframerate(SAMPLE_RATE)
            w.writeframes(pcm.tobytes())
