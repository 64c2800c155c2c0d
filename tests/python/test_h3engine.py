"""The h3engine module on the tiny CPU checkpoint: shapes and dtypes, the MP4 it writes, progress calls,
determinism and a warm engine, cancellation (Engine.cancel() from another thread, a raising callback, Ctrl-C),
the GIL released while it runs, and errors that name the field.

Run by ctest (python_h3engine) with PYTHONPATH=<build>/python, H3_ENGINE=<h3-engine> and H3_TEST_WORK. Under
pytest when it is installed; otherwise its own runner prints "python tests: N passed, 0 failed".
"""
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np

import h3engine

WORK = os.environ.get("H3_TEST_WORK", "/tmp/h3engine_test")
TINY = os.path.join(WORK, "tiny")
SMALL = dict(size="64x32", seconds=4, steps=2, seed=7)  # 107 frames at 24 fps (17n+5 above 96)


def _tiny():
    if not os.path.isdir(TINY):
        os.makedirs(WORK, exist_ok=True)
        subprocess.run([os.environ["H3_ENGINE"], "make-tiny", TINY, "--seed", "1"], check=True,
                       stdout=subprocess.DEVNULL)
    return TINY


_ENGINE = None


def _engine():
    global _ENGINE
    if _ENGINE is None:
        _ENGINE = h3engine.Engine(_tiny(), device="cpu")
    return _ENGINE


def _raises(exc_type, fn, *args, **kw):
    try:
        fn(*args, **kw)
    except exc_type as e:
        return e
    raise AssertionError(f"expected {exc_type.__name__}")


def test_generate_shapes_progress_and_mp4():
    e = _engine()
    events = []
    out = os.path.join(WORK, "a.mp4")
    r = e.generate(prompt="a red fox in the snow", output=out, progress=events.append, **SMALL)
    assert r.frames.dtype == np.uint8 and r.frames.shape == (107, 32, 64, 3), (r.frames.dtype, r.frames.shape)
    assert r.audio.dtype == np.float32 and r.audio.ndim == 2 and r.audio.shape[0] == 2, r.audio.shape
    assert r.sample_rate > 0 and r.audio.shape[1] > r.sample_rate * 4 // 2
    assert np.isfinite(r.audio).all() and r.frames.std() > 0
    assert (r.width, r.height, r.num_frames, r.seed, r.steps, r.task) == (64, 32, 107, 7, 2, "t2va")
    assert r.written == [out] and open(out, "rb").read(12)[4:8] == b"ftyp"
    assert "denoise_seconds" in r.metrics or "stages" in r.metrics or r.metrics, r.metrics
    stages = [p["stage"] for p in events]
    assert "denoise" in stages and stages[-1] == "mux", stages
    denoise = [p for p in events if p["stage"] == "denoise"]
    assert denoise[-1]["step"] == denoise[-1]["total"] == 1, denoise
    assert events[-1]["percent"] == 100, events[-1]
    steps = [p["percent"] for p in denoise]
    assert all(a <= b for a, b in zip(steps, steps[1:])) and 5 <= steps[0] and steps[-1] <= 90, steps


def test_same_seed_same_frames_warm_engine():
    e = _engine()
    a = e.generate(random_prompt_embeds=5, **SMALL)
    loads = dict(e.component_loads)
    b = e.generate(random_prompt_embeds=5, **SMALL)
    assert np.array_equal(a.frames, b.frames) and np.array_equal(a.audio, b.audio)
    assert e.component_loads["vae_decoder"] == loads["vae_decoder"] == 1, e.component_loads
    assert e.component_loads["transformer"] == loads["transformer"] == 1, e.component_loads
    lat = [os.path.join(WORK, f"seed{s}.safetensors") for s in (7, 8)]
    for path, seed in zip(lat, (7, 8)):  # latents only: nothing decoded
        c = e.generate(random_prompt_embeds=5, save_latents=path, return_media=False, **dict(SMALL, seed=seed))
        assert c.frames is None and c.written == [path]
    assert open(lat[0], "rb").read() != open(lat[1], "rb").read()


def test_warm_up_then_generate():
    e = h3engine.Engine(_tiny(), device="cpu", dtype="fp32")
    out = os.path.join(WORK, "warm_never_written.mp4")
    w = e.warm_up(random_prompt_embeds=5, output=out, **SMALL)
    assert not os.path.exists(out), "a warm-up writes nothing"
    assert w["seconds"] > 0 and len(w["step_seconds"]) == 1, w
    assert w["metrics"]["first_forward"]["workspace_allocations"] > 0, w["metrics"]["first_forward"]
    assert w["metrics"]["decode_seconds"] > 0, "an MP4 job decodes: so does its warm-up"
    r = e.generate(random_prompt_embeds=5, **SMALL)
    first = r.metrics["first_forward"]
    assert first["workspace_allocations"] == 0 and first["gemm_tunings"] == 0, first
    err = _raises(ValueError, e.warm_up, random_prompt_embeds=5, sizes="64x32")
    assert err.field == "sizes", err.field


def test_first_frame_array_and_path_errors():
    e = _engine()
    img = np.zeros((32, 64, 3), np.uint8)
    img[:, :32] = 255
    r = e.generate(random_prompt_embeds=5, first_frame=img, **SMALL)
    assert r.task == "fl2va" and r.frames.shape == (107, 32, 64, 3)
    err = _raises(FileNotFoundError, e.generate, random_prompt_embeds=5, first_frame="/nonexistent/k.png",
                  **SMALL)
    assert "k.png" in str(err) and err.field == "first_frame", (str(err), err.field)
    err = _raises(ValueError, e.generate, random_prompt_embeds=5, first_frame=np.zeros((4, 4), np.uint8),
                  **SMALL)
    assert err.field == "first_frame"


def test_bad_fields_name_the_field():
    e = _engine()
    for kw, field, text in [(dict(size="100x64"), "size", "multiple of 32"),
                            (dict(seconds=2), "seconds", "seconds"),
                            (dict(steps=1), "num_inference_steps", "steps"),
                            (dict(cache="bogus"), "cache", "cache"),
                            (dict(seed="x"), "seed", "seed")]:
        args = dict(SMALL)
        args.update(kw)
        err = _raises(ValueError, e.generate, random_prompt_embeds=5, **args)
        assert err.field == field and text in str(err), (kw, err.field, str(err))
    err = _raises(ValueError, e.generate, **SMALL)  # no prompt
    assert err.field == "prompt", err.field
    _raises(TypeError, e.generate, random_prompt_embeds=5, sizes="64x32")
    err = _raises(FileNotFoundError, h3engine.Engine, os.path.join(WORK, "no_such_checkpoint"))
    err = _raises(ValueError, h3engine.Engine, _tiny(), device="tpu")
    assert err.field == "device"


def test_vae_precision_bf16_and_a_bad_value():
    # a bad value names the option; bf16 blocks decode the same latents a little differently than exact
    # (fp32 blocks on the CPU): the raw frames >= 60 dB PSNR apart (measured 72.0), the placement naming bf16
    err = _raises(ValueError, h3engine.Engine, _tiny(), device="cpu", vae_precision="bf17")
    assert err.field == "vae_precision" and "exact, bf16 or fp8" in str(err), (err.field, str(err))
    err = _raises(ValueError, h3engine.Engine, _tiny(), device="cpu", dtype="fp16", vae_precision="bf16")
    assert err.field == "vae_precision" and "GPUs without bf16" in str(err), (err.field, str(err))
    bf16 = h3engine.Engine(_tiny(), device="cpu", vae_precision="bf16")
    a = _engine().generate(random_prompt_embeds=5, **SMALL)
    b = bf16.generate(random_prompt_embeds=5, **SMALL)
    assert a.frames.shape == b.frames.shape, (a.frames.shape, b.frames.shape)
    mse = float(np.mean((a.frames.astype(np.float64) - b.frames.astype(np.float64)) ** 2))
    assert mse > 0, "identical frames: the bf16 blocks did not run"
    psnr = 10 * np.log10(255.0 ** 2 / mse)
    print(f"vae_precision bf16 vs exact, raw frames: PSNR {psnr:.2f} dB")
    assert psnr >= 60, psnr
    assert "vae_decoder resident cpu bf16" in b.metrics["placement"], b.metrics["placement"]
    assert b.metrics["kernels"]["decode"]["gemm"].get("cpu-bf16", 0) > 0, b.metrics["kernels"]
    np.testing.assert_array_equal(a.audio, b.audio)  # the audio decoder is not the video decoder's precision


def test_cancel_from_another_thread():
    e = _engine()
    seen = []

    def progress(p):
        seen.append(p)
        if p["stage"] == "denoise" and p["step"] == 1:
            threading.Thread(target=e.cancel).start()

    err = _raises(h3engine.Cancelled, e.generate, random_prompt_embeds=5, progress=progress,
                  **dict(SMALL, steps=400))
    assert isinstance(err, RuntimeError)
    steps = [p["step"] for p in seen if p["stage"] == "denoise"]
    assert max(steps) < 399, max(steps)
    assert not e.busy
    r = e.generate(random_prompt_embeds=5, **SMALL)  # the engine keeps working
    assert r.frames.shape[0] == 107


def test_raising_callback_cancels_and_propagates():
    e = _engine()

    def progress(p):
        if p["stage"] == "denoise" and p["step"] == 2:
            raise KeyboardInterrupt

    _raises(KeyboardInterrupt, e.generate, random_prompt_embeds=5, progress=progress, **dict(SMALL, steps=400))
    assert not e.busy


def test_ctrl_c_and_gil_released():
    e = _engine()
    ticks = [0]
    started = threading.Event()
    stop = threading.Event()

    def spin():  # runs Python code while generate() waits: the GIL is free
        while not stop.is_set():
            ticks[0] += 1
            time.sleep(0.001)

    def progress(p):
        if p["stage"] == "denoise" and not started.is_set():
            started.set()
            # SIGINT to this process while the job runs, from another thread
            threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()

    t = threading.Thread(target=spin)
    t.start()
    t0 = time.monotonic()
    try:
        _raises(KeyboardInterrupt, e.generate, random_prompt_embeds=5, progress=progress,
                **dict(SMALL, steps=1000))
    finally:
        stop.set()
        t.join()
    assert time.monotonic() - t0 < 60
    assert ticks[0] > 50, ticks[0]
    assert not e.busy


def test_checkpoint_defaults_outputs_and_loads():
    # a checkpoint's h3_defaults.json applies to what the call leaves out; the output's missing folders are
    # created before anything runs; the progress announces each component a job loads
    d = os.path.join(WORK, "tiny_defaults")
    if not os.path.isdir(d):
        subprocess.run([os.environ["H3_ENGINE"], "make-tiny", d, "--seed", "1"], check=True,
                       stdout=subprocess.DEVNULL)
    with open(os.path.join(d, "h3_defaults.json"), "w") as f:
        f.write('{"size": "64x32", "frames": 107, "num_inference_steps": 2}')
    e = h3engine.Engine(d, device="cpu")
    events = []
    out = os.path.join(WORK, "new_folder", "sub", "d.wav")
    r = e.generate(prompt="a red fox", seed=3, output=out, return_media=False, progress=events.append)
    assert (r.width, r.height, r.num_frames, r.steps) == (64, 32, 107, 2), (r.width, r.height, r.num_frames, r.steps)
    assert r.written == [out] and os.path.getsize(out) > 0
    loads = [p.get("component") for p in events if p["stage"] == "load"]
    assert loads and all(loads), loads  # what this engine's plan keeps per job (the resident DiT is loaded)
    _raises(ValueError, e.generate, prompt="x", output=os.path.join(out, "x.mp4"))  # under a file


def _main():
    tests = [(k, v) for k, v in sorted(globals().items()) if k.startswith("test_") and callable(v)]
    passed = failed = 0
    for name, fn in tests:
        t0 = time.monotonic()
        try:
            fn()
            passed += 1
            print(f"ok   {name} ({time.monotonic() - t0:.1f} s)", flush=True)
        except BaseException as e:  # noqa: BLE001 - report every failure, KeyboardInterrupt included
            failed += 1
            print(f"FAIL {name}: {type(e).__name__}: {e}", flush=True)
    print(f"python tests: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        import pytest  # noqa: F401
    except ImportError:
        sys.exit(_main())
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider"]))
