#!/usr/bin/env python3
"""Soak test of `h3-engine serve` (not run in CI): starts a CPU server on loopback with the tiny checkpoint and
drives it with a bounded mix of valid, invalid and cancelled requests from a few client threads, for a given
time and request count. Reports the jobs by final status and the refusals by reason (from /metrics), responses
by request kind and HTTP status, transport errors, the slowest /health answer and the server's resident memory
over time (sampled every 5 s: start, peak, end; a line a minute). Exits non-zero when the server died, a
/health took over 1 s, or a request kind got an answer it must never get (a 5xx other than 503).

Usage: tools/soak/soak.py --binary build/src/cli/h3-engine [--minutes 20] [--max-requests 100000]
       [--clients 4] [--work /tmp/h3-soak]
Only 127.0.0.1 is ever contacted.
"""
import argparse
import collections
import gzip
import http.client
import io
import json
import math
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import struct
import time
import wave
import zlib

HOST = "127.0.0.1"


def tiny(prompt, steps=2, **extra):
    body = {"prompt": prompt, "size": "64x32", "seconds": 4, "num_inference_steps": steps}
    body.update(extra)
    return body


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.responses = collections.Counter()  # (kind, status)
        self.errors = collections.Counter()  # kind: transport errors
        self.submitted = []
        self.health_max_ms = 0.0
        self.health_count = 0
        self.rss = []  # (seconds, MiB)
        self.bad = []  # answers that must never happen

    def add(self, kind, status):
        with self.lock:
            self.responses[(kind, status)] += 1
            if status >= 500 and status != 503:
                self.bad.append((kind, status))


def request(method, path, body=None, headers=None, timeout=60, port=0):
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        data = r.read()
        return r.status, data
    finally:
        conn.close()


def multipart(parts):
    b = b""
    for name, filename, data in parts:
        b += b'--XyZ\r\nContent-Disposition: form-data; name="' + name.encode() + b'"'
        if filename:
            b += b'; filename="' + filename.encode() + b'"'
        b += b"\r\n\r\n" + data + b"\r\n"
    return b + b"--XyZ--\r\n"


def client_loop(port, stats, deadline, budget, seed):
    rng = random.Random(seed)
    kinds = ["valid", "valid", "valid", "cancel", "delete", "events", "reference", "invalid_field", "deep_json",
             "bad_utf8", "oversize", "gzip_bomb", "bad_multipart", "deep_lora", "list", "content_range",
             "unknown_route"]
    while time.time() < deadline:
        with stats.lock:
            if budget[0] <= 0:
                return
            budget[0] -= 1
        kind = rng.choice(kinds)
        try:
            if kind in ("valid", "cancel", "delete", "events"):
                steps = 10 if kind == "cancel" else 2
                st, data = request("POST", "/v1/videos", json.dumps(tiny(f"soak {kind} {rng.random()}", steps)),
                                   {"Content-Type": "application/json"}, port=port)
                stats.add(kind + ":submit", st)
                if st != 200:
                    continue
                vid = json.loads(data)["id"]
                with stats.lock:
                    stats.submitted.append(vid)
                if kind == "cancel":
                    time.sleep(rng.uniform(0, 0.5))
                    st, _ = request("POST", f"/v1/videos/{vid}/cancel", port=port)
                    stats.add("cancel", st)
                elif kind == "delete":
                    time.sleep(rng.uniform(0, 0.5))
                    st, _ = request("DELETE", f"/v1/videos/{vid}", port=port)
                    stats.add("delete", st)
                    with stats.lock:
                        stats.submitted.remove(vid)
                elif kind == "events":
                    # follow the stream for a few seconds, then go away (a client leaving mid-stream)
                    conn = http.client.HTTPConnection(HOST, port, timeout=3)
                    conn.request("GET", f"/v1/videos/{vid}/events")
                    r = conn.getresponse()
                    stats.add("events", r.status)
                    try:
                        while r.status == 200 and r.read1(4096):
                            pass
                    except (socket.timeout, TimeoutError):
                        pass
                    conn.close()
            elif kind == "reference":
                # ref2va with an uploaded image and a WAV (fresh temp files, the encoders, the vision tower)
                body = multipart([("prompt", "", b"soak reference"), ("size", "", b"64x32"), ("seconds", "", b"4"),
                                  ("num_inference_steps", "", b"2"), ("reference", "r.png", PNG),
                                  ("reference", "r.wav", WAV)])
                st, data = request("POST", "/v1/videos", body,
                                   {"Content-Type": "multipart/form-data; boundary=XyZ"}, port=port)
                stats.add("reference:submit", st)
                if st == 200:
                    with stats.lock:
                        stats.submitted.append(json.loads(data)["id"])
            elif kind == "deep_lora":
                body = multipart([("prompt", "", b"x"), ("lora", "", b"[" * 5000 + b"]" * 5000)])
                st, _ = request("POST", "/v1/videos", body,
                                {"Content-Type": "multipart/form-data; boundary=XyZ"}, port=port)
                stats.add(kind, st)
            elif kind == "invalid_field":
                st, _ = request("POST", "/v1/videos", json.dumps({"prompt": "x", "seconds": "soon"}),
                                {"Content-Type": "application/json"}, port=port)
                stats.add(kind, st)
            elif kind == "deep_json":
                st, _ = request("POST", "/v1/videos", '{"prompt": "x", "cache": ' + "[" * 10000 + "}",
                                {"Content-Type": "application/json"}, port=port)
                stats.add(kind, st)
            elif kind == "bad_utf8":
                st, _ = request("POST", "/v1/videos", b'{"prompt": "\xff\xfe"}',
                                {"Content-Type": "application/json"}, port=port)
                stats.add(kind, st)
            elif kind == "oversize":
                st, _ = request("POST", "/v1/videos", b" " * (4 << 20), {"Content-Type": "application/json"},
                                port=port)
                stats.add(kind, st)
            elif kind == "gzip_bomb":
                st, _ = request("POST", "/v1/videos", BOMB, {"Content-Type": "application/json",
                                                             "Content-Encoding": "gzip"}, port=port)
                stats.add(kind, st)
            elif kind == "bad_multipart":
                body = multipart([(b"prompt".decode(), "", b"x"), ("first_frame", "a.png", b"\x89PNG\r\n\x1a\n junk"),
                                  ("reference", "/tmp/../../etc/passwd", b"not media")])
                st, _ = request("POST", "/v1/videos", body,
                                {"Content-Type": "multipart/form-data; boundary=XyZ"}, port=port)
                stats.add(kind, st)
            elif kind == "list":
                st, _ = request("GET", "/v1/videos?limit=5&order=asc", port=port)
                stats.add(kind, st)
            elif kind == "content_range":
                with stats.lock:
                    vid = rng.choice(stats.submitted) if stats.submitted else None
                if vid:
                    st, _ = request("GET", f"/v1/videos/{vid}/content", headers={"Range": "bytes=0-99"}, port=port)
                    stats.add(kind, st)
            elif kind == "unknown_route":
                st, _ = request("GET", "/v1/nothing/here", port=port)
                stats.add(kind, st)
        except (OSError, http.client.HTTPException) as e:
            with stats.lock:
                stats.errors[kind + ":" + type(e).__name__] += 1


def health_loop(port, stats, stop):
    while not stop.is_set():
        t0 = time.time()
        try:
            st, _ = request("GET", "/health", timeout=5, port=port)
            ms = (time.time() - t0) * 1000
            with stats.lock:
                stats.health_max_ms = max(stats.health_max_ms, ms)
                stats.health_count += 1
                if st != 200 or ms > 1000:
                    stats.bad.append(("health", st, round(ms)))
        except OSError as e:
            with stats.lock:
                stats.bad.append(("health", type(e).__name__))
        stop.wait(0.5)


def rss_mib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return -1


BOMB = gzip.compress(b" " * (64 << 20), 9)


def png(w, h):
    """An 8-bit RGB PNG of a gradient, written with zlib (no imaging library needed)."""
    rows = []
    for y in range(h):
        pixels = [(x * 255 // (w - 1), y * 255 // (h - 1), (x ^ y) & 255) for x in range(w)]
        rows.append(b"\0" + bytes(c for p in pixels for c in p))
    raw = b"".join(rows)

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def wav(seconds, rate=16000):
    """A mono PCM16 tone."""
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(b"".join(struct.pack("<h", int(8000 * math.sin(0.05 * i))) for i in range(int(seconds * rate))))
    return buf.getvalue()


PNG = png(48, 32)
WAV = wav(1.0)


def metric_counts(port, name):
    """{label value: count} of one labelled counter in /metrics."""
    st, data = request("GET", "/metrics", port=port)
    out = {}
    if st != 200:
        return out
    for line in data.decode().splitlines():
        m = re.match(name + r'\{[a-z]+="([^"]*)"\} (\d+)', line)
        if m:
            out[m.group(1)] = int(m.group(2))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", required=True)
    ap.add_argument("--minutes", type=float, default=20)
    ap.add_argument("--max-requests", type=int, default=100000)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--work", default="/tmp/h3-soak")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    model = os.path.join(a.work, "tiny")
    if not os.path.exists(os.path.join(model, "model_index.json")):
        subprocess.run([a.binary, "make-tiny", model, "--seed", "1"], check=True, stdout=subprocess.DEVNULL)
    out = os.path.join(a.work, "out")
    subprocess.run(["rm", "-rf", out], check=True)
    log = open(os.path.join(a.work, "server.log"), "w")
    srv = subprocess.Popen([a.binary, "serve", "--model", model, "--device", "cpu", "--dtype", "fp32", "--host", HOST,
                            "--port", "0", "--output-dir", out, "--max-queue", "16", "--ttl", "120",
                            "--max-body-bytes", "1048576",
                            # small references keep a ref2va job seconds long (the model's 2048-edge image
                            # reference is minutes of VAE encoding and vision tower on a CPU)
                            "--reference-image-edge", "64", "--reference-video-edge", "64"], stdout=subprocess.PIPE, stderr=log, text=True)
    port = None
    for line in srv.stdout:
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if m:
            port = int(m.group(1))
            break
    if not port:
        print("soak: the server did not start; see", log.name)
        return 1
    stats = Stats()
    start = time.time()
    deadline = start + a.minutes * 60
    budget = [a.max_requests]
    stop = threading.Event()
    threads = [threading.Thread(target=client_loop, args=(port, stats, deadline, budget, i)) for i in range(a.clients)]
    hthread = threading.Thread(target=health_loop, args=(port, stats, stop))
    for t in threads + [hthread]:
        t.start()
    next_report = start
    next_sample = start
    rss_samples = []  # every 5 s: (seconds, MiB)
    while any(t.is_alive() for t in threads):
        time.sleep(1)
        if time.time() >= next_sample:
            rss_samples.append((round(time.time() - start), round(rss_mib(srv.pid), 1)))
            next_sample = time.time() + 5
        if time.time() >= next_report:
            mib = rss_mib(srv.pid)
            with stats.lock:
                stats.rss.append((round(time.time() - start), round(mib, 1)))
                done = sum(v for (k, s), v in stats.responses.items())
            print(f"soak: t={round(time.time() - start):5d}s rss={mib:7.1f} MiB responses={done} "
                  f"health_max={stats.health_max_ms:.0f} ms", flush=True)
            next_report = time.time() + 60
        if srv.poll() is not None:
            break
    stop.set()
    hthread.join()
    alive = srv.poll() is None
    # final statuses of the jobs still on record
    finals = collections.Counter()
    if alive:
        try:
            st, data = request("GET", "/v1/videos?limit=100", port=port)
            after = None
            while st == 200:
                page = json.loads(data)
                for v in page["data"]:
                    finals[v["status"]] += 1
                if not page["has_more"]:
                    break
                st, data = request("GET", f"/v1/videos?limit=100&after={page['last_id']}", port=port)
        except OSError:
            pass
        try:
            jobs_by_status = metric_counts(port, "h3_requests_total")
            rejected_by_reason = metric_counts(port, "h3_requests_rejected_total")
        except OSError:
            jobs_by_status, rejected_by_reason = {}, {}
        srv.send_signal(signal.SIGTERM)
        try:
            rc = srv.wait(timeout=60)
        except subprocess.TimeoutExpired:
            srv.kill()
            rc = "timeout"
    else:
        rc = srv.returncode
        jobs_by_status, rejected_by_reason = {}, {}
    rss_values = [m for _, m in rss_samples if m >= 0]
    report = {
        "seconds": round(time.time() - start),
        "server_alive_until_end": alive,
        "server_exit": rc,
        "jobs_by_final_status": jobs_by_status,
        "submissions_rejected_by_reason": rejected_by_reason,
        "jobs_on_record_by_status": dict(finals),
        "responses": {f"{k} {s}": v for (k, s), v in sorted(stats.responses.items())},
        "transport_errors": dict(stats.errors),
        "health_checks": stats.health_count,
        "health_max_ms": round(stats.health_max_ms, 1),
        "rss_mib": {"start": rss_values[0] if rss_values else None,
                    "peak": max(rss_values) if rss_values else None,
                    "end": rss_values[-1] if rss_values else None,
                    "samples": len(rss_values)},
        "rss_mib_over_time": stats.rss,
        "violations": stats.bad[:20],
    }
    print(json.dumps(report, indent=1))
    return 0 if alive and not stats.bad and rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
