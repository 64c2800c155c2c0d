"""Train the demo DiT (the H3 transformer at demo_arch.DIT_CONFIG's size) on the latents of the trained VAEs
(latents.py) and the tiny conditioner's embeddings (conditioning.py), with H3's flow-matching objective:

  one u ~ U(0, 1) per example, shifted per modality like the sampler's grid (spec §7): sigma = s·u / (1 + (s-1)·u)
  with s = 12 for video and s = 3 for audio (the schedulers' shifts); x_sigma = (1 - sigma)·x0 + sigma·eps; the
  DiT is fed the timesteps t = 1 - sigma and predicts the data-ward velocity v = x0 - eps (so that
  x0 = x_sigma + sigma·v, the engine's Euler update); loss: MSE on the generated video rows + MSE on the audio
  rows. The packed layouts, tags, RoPE positions and row timesteps are the pipeline goldens' own
  (tools/reference/make_pipeline_goldens.py): t2va (caption only), fl2va (the clip's first frame as keyframe,
  condition rows 0.999·z + 0.001·eps at t = max(t_v, 0.999)), ref2va (reference_image(scene) as a picture
  reference, its own rows clean). One DiT learns all three tasks; export.py writes it as both transformer/
  (t2va, fl2va) and transformer_ref/ (ref2va).

    nice -n 10 /usr/bin/python3 tools/train_demo/train_dit.py --work build/train_demo --steps 4000 --batch 16

Writes <work>/dit.done.safetensors (EMA weights), dit.log (JSON lines), dit.summary.json.
"""
import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import demo_arch  # noqa: E402
import demo_data as dd  # noqa: E402
import dit_batch  # noqa: E402
import make_pipeline_goldens as mpg  # noqa: E402
import safetensors_io as sio  # noqa: E402
import train_common as tc  # noqa: E402

VIDEO_SHIFT, AUDIO_SHIFT = 12.0, 3.0  # scheduler/ and audio_scheduler/ shift (what make-tiny writes)
CONDITION_T = 0.999  # the pipeline's condition-row timestep floor and scale_noise mix (spec §3 step 5, §5.5)
TASKS = ("t2va", "fl2va", "ref2va")


def shifted(u, shift):
    return shift * u / (1 + (shift - 1) * u)


class Data:
    """Latents and conditioning on the device, and the packed layouts (cached per task and text rows)."""

    def __init__(self, work, device):
        lat, lmeta = sio.load_file(os.path.join(work, "latents.safetensors"))
        cond, cmeta = sio.load_file(os.path.join(work, "conditioning.safetensors"))
        self.scenes = min(int(lmeta["scenes"]), int(cmeta["scenes"]))
        self.seeds = int(lmeta["seeds"])
        self.fl2va_seeds = min(int(lmeta["fl2va_seeds"]), int(cmeta["fl2va_seeds"]))
        self.lat = {n: t.float().to(device) for n, t in lat.items()}
        # embeddings on the device; tags stay on the host (they key the layout cache)
        self.cond = {n: (t if n.endswith(".tags") else t.to(device)) for n, t in cond.items()}
        self.device = device
        self.geometry = mpg.geometry(dd.WIDTH, dd.HEIGHT, dd.FRAMES)
        _, C, T, h, w = (1,) + tuple(self.lat["video.0.0"].shape)
        g = self.geometry
        assert (T, h, w) == (g["T"], g["h"], g["w"]), f"latents {T}x{h}x{w} vs geometry {g}"
        assert self.lat["audio.0.0"].shape[-1] == g["A"], "audio latents vs geometry"
        self.layouts = {}

    def layout(self, task, tags):
        """(the layout on the host, its row tensors on the device), cached per task and text tags."""
        key = (task, tuple(tags.tolist()))
        if key not in self.layouts:
            t = tags.tolist()
            g = self.geometry
            if task == "ref2va":
                lay = mpg.ref2va_layout(t, g, [dict(kind="image", T=1, h=g["h"], w=g["w"], A=0)])
            else:
                lay = mpg.layout(t, g, ["first"] if task == "fl2va" else [])
            dev = {k: lay[k].to(self.device) for k in
                   ("token_tags", "position_ids", "video_indices", "audio_indices", "text_indices")}
            self.layouts[key] = (lay, dev)
        return self.layouts[key]

    def example(self, task, scene, seed, u, gen):
        """One training sequence (dit_batch's dict) + its targets and how many leading video rows condition."""
        dev = self.device
        name = {"t2va": f"t2va.{scene}", "fl2va": f"fl2va.{scene}.{seed}", "ref2va": f"ref2va.{scene}"}[task]
        c, tags = self.cond[name + ".embeds"], self.cond[name + ".tags"]
        lay, rows = self.layout(task, tags)
        x0v = mpg.patchify(self.lat[f"video.{scene}.{seed}"][None])
        x0a = self.lat[f"audio.{scene}.{seed}"].permute(0, 2, 1).reshape(-1, self.lat[f"audio.{scene}.{seed}"].shape[1])
        sv, sa = shifted(u, VIDEO_SHIFT), shifted(u, AUDIO_SHIFT)
        ev = torch.randn(x0v.shape, generator=gen).to(dev)
        ea = torch.randn(x0a.shape, generator=gen).to(dev)
        xv = (1 - sv) * x0v + sv * ev
        xa = (1 - sa) * x0a + sa * ea
        cond_rows = 0
        if task != "t2va":
            z = self.lat[f"first.{scene}.{seed}" if task == "fl2va" else f"reference.{scene}"][None]
            ec = torch.randn(z.shape, generator=gen).to(dev)
            zc = mpg.patchify(CONDITION_T * z + (1.0 - CONDITION_T) * ec)
            cond_rows = zc.shape[0]
            xv = torch.cat([zc, xv])
        assert cond_rows == lay["condition_rows"]
        ts, ti = mpg.row_timesteps(lay, float(np.float32(1 - sv)), float(np.float32(1 - sa)))
        seq = dict(xv=xv, xa=xa, c=c, ts=ts.to(dev), ti=ti.to(dev), tags=rows["token_tags"],
                   pos=rows["position_ids"], vid=rows["video_indices"], aid=rows["audio_indices"],
                   tid=rows["text_indices"])
        return seq, x0v - ev, x0a - ea, cond_rows

    def draw(self, rng, gen, batch, mix):
        out = []
        for _ in range(batch):
            task = TASKS[int(rng.choice(3, p=mix))]
            scene = int(rng.integers(self.scenes))
            seed = int(rng.integers(self.fl2va_seeds if task == "fl2va" else self.seeds))
            out.append((task,) + self.example(task, scene, seed, float(rng.random()), gen))
        return out


def losses(W, cfg, examples, per_task=True):
    """(total loss, per-task video and audio MSE, or {} without `per_task`: those read the device) of a batch."""
    seqs = [e[1] for e in examples]
    pv, pa = dit_batch.forward(W, cfg, seqs)
    tv, ta, pvs, pas, tasks = [], [], [], [], []
    i = j = 0
    for task, s, target_v, target_a, k in examples:
        nv, na = s["xv"].shape[0], s["xa"].shape[0]
        pvs.append(pv[i + k:i + nv])
        pas.append(pa[j:j + na])
        tv.append(target_v)
        ta.append(target_a)
        tasks.append(task)
        i += nv
        j += na
    lv = torch.cat([(p - t).pow(2).mean(1) for p, t in zip(pvs, tv)])
    la = torch.cat([(p - t).pow(2).mean(1) for p, t in zip(pas, ta)])
    total = lv.mean() + la.mean()
    per = {}
    for task in TASKS if per_task else ():
        sel = [n for n, t in enumerate(tasks) if t == task]
        if sel:
            per[task] = (round(float(torch.stack([(pvs[n] - tv[n]).pow(2).mean() for n in sel]).mean()), 4),
                         round(float(torch.stack([(pas[n] - ta[n]).pow(2).mean() for n in sel]).mean()), 4))
    return total, per


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", default="build/train_demo")
    ap.add_argument("--steps", type=int, default=4000)
    ap.add_argument("--max-seconds", type=float, default=0.0,
                    help="also end after this many wall seconds (the schedule follows the sooner)")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--mix", default="0.4,0.3,0.3", help="t2va,fl2va,ref2va fractions of the examples")
    ap.add_argument("--eval-batches", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--init", default="", help="start from these final weights of an earlier run")
    ap.add_argument("--fast", action="store_true", help="TF32 matmuls and convolutions for the training steps (CUDA)")
    ap.add_argument("--log-every", type=int, default=50)
    ap.add_argument("--save-every", type=int, default=500)
    a = ap.parse_args()
    device = tc.setup_torch(a.device, a.threads)
    mix = np.array([float(x) for x in a.mix.split(",")])
    mix = mix / mix.sum()
    cfg = demo_arch.DIT_CONFIG
    data = Data(a.work, device)
    W = {n: t.to(device).requires_grad_(True) for n, t in demo_arch.init_dit(cfg, a.seed + 2).items()}
    rng, gen = tc.step_rng(a.seed, 0, stream=9)
    probe = [e[1] for e in data.draw(rng, gen, 3, np.ones(3) / 3)]
    print(f"dit: batched forward vs h3_dit.forward: relative {dit_batch.check_against_reference(W, cfg, probe):.2e}",
          flush=True)
    init = tc.init_from(W, a.init) if a.init else {}
    tr = tc.Trainer(a.work, "dit", W, lambda n: True, a.lr, weight_decay=0.01, ema=0.999)
    tc.set_fast(a.fast)
    warm = min(200, a.steps // 10 + 1)
    while tr.progress(a.steps, a.max_seconds) < 1:
        rng, gen = tc.step_rng(a.seed, tr.step, stream=3)
        lr = tc.lr_at(tr.step, a.steps, a.lr, warm, progress=tr.progress(a.steps, a.max_seconds))
        log_now = (tr.step + 1) % a.log_every == 0
        loss, per = losses(W, cfg, data.draw(rng, gen, a.batch, mix), per_task=log_now)
        gn = tr.update(loss, lr)
        last = tr.progress(a.steps, a.max_seconds) >= 1
        if log_now or last:
            tr.log(loss=round(loss.item(), 5), lr=round(lr, 7), grad_norm=round(gn, 3),
                   **{k: dict(video=v[0], audio=v[1]) for k, v in per.items()})
        if tr.step % a.save_every == 0 or last:
            tr.save()
    tc.set_fast(False)
    # held-out noise draws (a stream training never uses) through the EMA weights, per task
    final = {n: t.to(device) for n, t in tr.final_weights().items()}
    ev = {}
    with torch.no_grad():
        for task, m in zip(TASKS, np.eye(3)):
            tot = []
            for k in range(a.eval_batches):
                rng, gen = tc.step_rng(a.seed, k, stream=7)
                tot.append(losses(final, cfg, data.draw(rng, gen, a.batch, m))[0].item())
            ev[task] = round(float(np.mean(tot)), 5)
    tr.finish(tc.machine_description(a.device),
              dict(final_loss=round(loss.item(), 5), eval_loss=ev, batch=a.batch, config=cfg, **init))


if __name__ == "__main__":
    main()
