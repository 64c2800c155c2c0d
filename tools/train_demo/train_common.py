"""What every training stage shares: the device, the thread count, seeded per-step randomness, the learning-rate
schedule, the device-time clock and resumable checkpoints."""
import json
import math
import os
import platform
import time

import numpy as np
import torch

import demo_arch


def setup_torch(device, threads):
    """Exact fp32 (no TF32) on `device`; a training stage turns `set_fast` on after its start-up checks."""
    torch.set_num_threads(threads)
    set_fast(False)
    return torch.device(device)


def set_fast(on):
    """TF32 matmuls and convolutions and cuDNN's autotune (CUDA training steps), or exact fp32 (checks, latents)."""
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on
    torch.backends.cudnn.benchmark = on


def machine_description(device):
    if device.startswith("cuda") and torch.cuda.is_available():
        return f"{torch.cuda.get_device_name(0)} (torch {torch.__version__})"
    return f"{platform.processor() or platform.machine()} CPU, {torch.get_num_threads()} torch thread(s), " \
           f"torch {torch.__version__}"


def step_rng(seed, step, stream=0):
    """numpy and torch generators for one step: a resumed run draws what an uninterrupted one drew."""
    rng = np.random.default_rng([seed, stream, step])
    gen = torch.Generator().manual_seed(int(rng.integers(0, 2**62)))
    return rng, gen


def lr_at(step, total, peak, warmup, floor_ratio=0.1, progress=None):
    """Linear warmup over `warmup` steps, then a cosine from `peak` to `floor_ratio * peak` over the run's
    progress: step / total, or `progress` (in [0, 1]) when the run is bounded by time as well as steps."""
    if step < warmup:
        return peak * (step + 1) / warmup
    p = (step - warmup) / max(1, total - warmup) if progress is None else progress
    return peak * (floor_ratio + (1 - floor_ratio) * 0.5 * (1 + math.cos(math.pi * min(p, 1.0))))


class Clock:
    """Wall seconds and this process's CPU seconds, accumulated over resumed runs."""

    def __init__(self, wall=0.0, cpu=0.0):
        self.wall0, self.cpu0 = wall, cpu
        self.t0, self.c0 = time.time(), time.process_time()

    def wall(self):
        return self.wall0 + time.time() - self.t0

    def cpu(self):
        return self.cpu0 + time.process_time() - self.c0


class Trainer:
    """Parameters + Adam + resumable checkpoint `<work>/<name>.pt` + a JSON-lines log `<work>/<name>.log`."""

    def __init__(self, work, name, W, trainable, lr, weight_decay=0.0, ema=None):
        self.work, self.name = work, name
        os.makedirs(work, exist_ok=True)
        self.W = W
        self.train_names = [n for n in W if trainable(n)]
        self.opt = torch.optim.AdamW([W[n] for n in self.train_names], lr=lr, betas=(0.9, 0.99),
                                     weight_decay=weight_decay)
        self.ema = {n: W[n].detach().clone() for n in self.train_names} if ema else None
        self.ema_decay = ema
        self.step = 0
        self.clock = Clock()
        self.path = os.path.join(work, name + ".pt")
        if os.path.exists(self.path):
            try:  # torch >= 2.6 loads weights only by default; this file also holds the optimizer's state
                st = torch.load(self.path, map_location="cpu", weights_only=False)
            except TypeError:  # a torch without the argument
                st = torch.load(self.path, map_location="cpu")
            with torch.no_grad():
                for n, t in st["W"].items():
                    W[n].copy_(t.to(W[n].device))
            self.opt.load_state_dict(st["opt"])
            if self.ema is not None:
                self.ema = {n: t.to(W[n].device) for n, t in st["ema"].items()}
            self.step = st["step"]
            self.clock = Clock(st["wall"], st["cpu"])
            print(f"{name}: resumed at step {self.step}", flush=True)

    def progress(self, steps, max_seconds=0.0):
        """How far the run is, in [0, 1]: its steps, or its wall seconds where `max_seconds` > 0 bounds it
        sooner. A stage ends at 1 (train loops: `while tr.progress(...) < 1`)."""
        p = self.step / max(1, steps)
        if max_seconds and max_seconds > 0:
            p = max(p, self.clock.wall() / max_seconds)
        return min(p, 1.0)

    def update(self, loss, lr, clip=1.0):
        for g in self.opt.param_groups:
            g["lr"] = lr
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_([self.W[n] for n in self.train_names], clip)
        self.opt.step()
        if self.ema is not None:
            with torch.no_grad():
                d = min(self.ema_decay, (1 + self.step) / (10 + self.step))
                for n in self.train_names:
                    self.ema[n].mul_(d).add_(self.W[n].detach(), alpha=1 - d)
        self.step += 1
        return float(gn)

    def log(self, **fields):
        rec = dict(step=self.step, wall_s=round(self.clock.wall(), 1), cpu_s=round(self.clock.cpu(), 1), **fields)
        with open(os.path.join(self.work, self.name + ".log"), "a") as f:
            f.write(json.dumps(rec) + "\n")
        print(json.dumps(rec), flush=True)

    def save(self):
        st = dict(W={n: t.detach() for n, t in self.W.items()}, opt=self.opt.state_dict(), ema=self.ema,
                  step=self.step, wall=self.clock.wall(), cpu=self.clock.cpu())
        tmp = self.path + ".tmp"
        torch.save(st, tmp)
        os.replace(tmp, self.path)

    def final_weights(self):
        """EMA weights where kept, else the live ones; buffers as they are."""
        out = {n: t.detach().clone() for n, t in self.W.items()}
        if self.ema is not None:
            out.update({n: t.clone() for n, t in self.ema.items()})
        return out

    def finish(self, device_desc, extra=None):
        """Writes `<work>/<name>.done.safetensors` (final weights) + the device time, returns the summary."""
        summary = dict(stage=self.name, steps=self.step, wall_seconds=round(self.clock.wall(), 1),
                       cpu_seconds=round(self.clock.cpu(), 1), machine=device_desc, **(extra or {}))
        demo_arch.save_state(os.path.join(self.work, self.name + ".done.safetensors"), self.final_weights(), summary)
        with open(os.path.join(self.work, self.name + ".summary.json"), "w") as f:
            json.dump(summary, f, indent=2)
        print(json.dumps(summary), flush=True)
        return summary


def init_from(W, path):
    """Start from the final weights of an earlier run (`<stage>.done.safetensors`): every trainable tensor
    must be there with its shape. Returns the earlier run's summary (its steps and wall seconds). A stage
    that resumes from its own `<stage>.pt` afterwards overwrites these."""
    loaded, meta = demo_arch.load_state(path)
    missing = [n for n in W if n not in loaded]
    bad = [n for n in W if n in loaded and tuple(loaded[n].shape) != tuple(W[n].shape)]
    if missing or bad:
        raise SystemExit(f"{path}: does not fit this stage's weights (missing {missing[:3]}, mis-shaped {bad[:3]})")
    with torch.no_grad():
        for n, t in W.items():
            t.copy_(loaded[n].to(t.device, t.dtype))
    print(f"{os.path.basename(path)}: started from it ({meta.get('steps')} steps, {meta.get('wall_seconds')} s)",
          flush=True)
    return dict(init_from=os.path.abspath(path), init_steps=meta.get("steps"), init_wall_seconds=meta.get("wall_seconds"))
