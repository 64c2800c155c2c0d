"""Compare two latents files (as `generate --save-latents` writes them): per tensor, max abs difference,
relative RMS and cosine similarity. Used to check the CUDA path against the CPU path on the tiny model.

    python3 tools/reference/compare_latents.py A.safetensors B.safetensors [--max-rel-rms 1e-2]

Exits 1 when a tensor's relative RMS exceeds the bound or shapes differ.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--max-rel-rms", type=float, default=1e-2)
    args = ap.parse_args()
    a, _ = safetensors_io.load(args.a)
    b, _ = safetensors_io.load(args.b)
    bad = False
    for name in sorted(set(a) & set(b)):
        x, y = a[name].double(), b[name].double()
        if x.shape != y.shape:
            print(f"{name}: shapes differ {tuple(x.shape)} vs {tuple(y.shape)}")
            bad = True
            continue
        d = (x - y)
        rel = (d.norm() / max(y.norm().item(), 1e-300)).item()
        cos = (x.flatten() @ y.flatten() / max((x.norm() * y.norm()).item(), 1e-300)).item()
        print(f"{name}: max_abs {d.abs().max().item():.3e} rel_rms {rel:.3e} cosine {cos:.7f}")
        bad = bad or rel > args.max_rel_rms
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
