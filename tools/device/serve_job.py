"""One real server job (device check): submit to a running `h3-engine serve`, follow the SSE stream to its
final event, download the MP4. Standard library only (the GPU image has python3, maybe no curl).

usage: serve_job.py URL OUT.mp4 [JSON_BODY]
Prints the progress events seen and the final status; exit 1 unless the job completed and the file arrived.
"""
import json
import sys
import time
import urllib.request

url, out = sys.argv[1], sys.argv[2]
body = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {
    "prompt": "a red fox runs through snow", "size": "64x32", "seconds": 4, "num_inference_steps": 6,
    "seed": 7}

for _ in range(300):
    try:
        urllib.request.urlopen(url + "/health", timeout=2).read()
        break
    except OSError:
        time.sleep(0.2)
req = urllib.request.Request(url + "/v1/videos", data=json.dumps(body).encode(),
                             headers={"Content-Type": "application/json"}, method="POST")
video = json.load(urllib.request.urlopen(req, timeout=30))
print("submitted", video["id"], video["status"])
events, final = [], None
with urllib.request.urlopen(url + f"/v1/videos/{video['id']}/events", timeout=600) as stream:
    event = None
    for raw in stream:
        line = raw.decode().rstrip("\n")
        if line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data = json.loads(line[5:])
            events.append((event, data.get("progress")))
            if event in ("done", "failed", "cancelled"):
                final = (event, data)
                break
print("events:", len(events), "progress", [p for _, p in events][:3], "...", [p for _, p in events][-2:])
if not final or final[0] != "done":
    print("final:", final)
    sys.exit(1)
with urllib.request.urlopen(url + f"/v1/videos/{video['id']}/content", timeout=60) as r, open(out, "wb") as f:
    f.write(r.read())
print("downloaded", out, "metrics device", final[1].get("metrics", {}).get("device"))
