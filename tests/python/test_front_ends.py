"""One job through every front end gives the same latents: `h3-engine generate`, `h3-engine serve` (POST
/v1/videos/sync with output_format latents) and h3engine.Engine, each with layerwise residency, int8 weights
and a run-time LoRA adapter on the tiny CPU checkpoint — byte-identical noise and latents tensors. A bad field
gets the same name from the server (`param`) and Python (ValueError.field), and the CLI names its flag.

Run by ctest (python_front_ends) with PYTHONPATH=<build>/python, H3_ENGINE=<h3-engine> and H3_TEST_WORK.
"""
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request

import h3engine

H3 = os.environ["H3_ENGINE"]
WORK = os.environ.get("H3_TEST_WORK", "/tmp/h3_front_ends")
JOB = dict(prompt="a red fox in the snow", size="64x32", seconds=4, num_inference_steps=3, seed=11)
ENGINE = dict(residency="layerwise", weight_dtype="int8")
SCALE = 0.75


def tensors(path):
    """name → (dtype, shape, raw bytes) of a safetensors file."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    return {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in header.items() if k != "__metadata__"}


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    tiny, loras = os.path.join(WORK, "tiny"), os.path.join(WORK, "loras")
    os.makedirs(loras)
    lora = os.path.join(loras, "turbo.safetensors")
    subprocess.run([H3, "make-tiny", tiny, "--seed", "1", "--lora", lora], check=True, stdout=subprocess.DEVNULL)
    out = {k: os.path.join(WORK, k + ".safetensors") for k in ("cli", "server", "python")}

    # ---- the CLI
    cli = [H3, "generate", "--model", tiny, "--prompt", JOB["prompt"], "--size", JOB["size"], "--seconds", "4",
           "--steps", str(JOB["num_inference_steps"]), "--seed", str(JOB["seed"]), "--residency", "layerwise",
           "--weight-dtype", "int8", "--lora", f"{lora}:{SCALE}", "--lora-mode", "runtime"]
    subprocess.run(cli + ["--save-latents", out["cli"]], check=True, stderr=subprocess.DEVNULL)
    bad = subprocess.run(cli + ["--save-latents", out["cli"] + ".x", "--steps", "1"], capture_output=True, text=True)
    assert bad.returncode == 2 and "--steps" in bad.stderr, (bad.returncode, bad.stderr)

    # ---- the server
    port = free_port()
    srv = subprocess.Popen([H3, "serve", "--model", tiny, "--port", str(port), "--output-dir",
                            os.path.join(WORK, "videos"), "--lora-dir", loras, "--residency", "layerwise",
                            "--weight-dtype", "int8"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(600):
            try:
                urllib.request.urlopen(url + "/health", timeout=2)
                break
            except OSError:
                assert srv.poll() is None, srv.stderr.read().decode()
                time.sleep(0.1)
        body = dict(JOB, lora=[{"path": "turbo.safetensors", "scale": SCALE}], output_format="latents")
        status, data = post(url + "/v1/videos/sync", body)
        assert status == 200, (status, data[:400])
        with open(out["server"], "wb") as f:
            f.write(data)
        status, data = post(url + "/v1/videos", dict(body, num_inference_steps=1))
        assert status == 400, (status, data)
        server_param = json.loads(data)["error"]["param"]
    finally:
        srv.terminate()
        srv.wait(timeout=60)

    # ---- Python
    e = h3engine.Engine(tiny, device="cpu", lora=[(lora, SCALE)], **ENGINE)
    e.generate(save_latents=out["python"], return_media=False, **JOB)
    try:
        e.generate(save_latents=out["python"] + ".x", return_media=False, **dict(JOB, num_inference_steps=1))
        raise AssertionError("1 step accepted")
    except ValueError as err:
        python_field = err.field
    assert python_field == server_param == "num_inference_steps", (python_field, server_param)

    # ---- the same bytes
    ref = tensors(out["cli"])
    assert {"video_latents", "audio_latents", "video_noise", "audio_noise"} <= set(ref), sorted(ref)
    for name in ("server", "python"):
        got = tensors(out[name])
        for k in ("video_noise", "audio_noise", "video_latents", "audio_latents"):
            assert got[k] == ref[k], f"{name}: {k} differs from the CLI's"
    # the adapter changed something (the test would pass trivially if every front end ignored it)
    subprocess.run(cli[:-4] + ["--save-latents", out["cli"] + ".nolora"], check=True, stderr=subprocess.DEVNULL)
    assert tensors(out["cli"] + ".nolora")["video_latents"] != ref["video_latents"], "the LoRA had no effect"
    print("front ends: CLI, server and Python latents identical (layerwise + int8 + LoRA)")


if __name__ == "__main__":
    sys.exit(main())
