#!/usr/bin/env bash
# h3-engine bench load (issue #45: cold start) on the CPU with the tiny DiT's widths and 2 blocks: the
# checkpoint it writes is the official sharded layout (several shards, an index whose weight_map names every
# tensor and whose total_size is their bytes, a config the engine opens), the JSON report (the sequential
# read, cold and warm fresh processes with their open / load / first-forward seconds and the ratio to the
# read), the second run reusing the checkpoint, and the usage errors.
source "$(dirname "$0")/lib/common.sh" "$@"
make_tiny "$WORK/tiny" --seed 1
BENCH=("$H3" bench load --dir "$WORK/ckpt" --config "$WORK/tiny/transformer/config.json" --blocks 2
       --shard-mib 0.25 --device cpu --dtype fp32 --json)
"${BENCH[@]}" > "$WORK/a.json" 2> "$WORK/a.err" || { cat "$WORK/a.err"; fail "bench load exited $?"; }
python3 - "$WORK/a.json" "$WORK/ckpt/transformer" <<'PY' || fail "report"
import json, os, struct, sys
j = json.load(open(sys.argv[1]))
d = sys.argv[2]
assert j["bench"] == "load" and j["blocks"] == 2 and j["written"] is True, j
shards = sorted(f for f in os.listdir(d) if f.endswith(".safetensors"))
assert j["shards"] == len(shards) >= 2, (j["shards"], shards)
assert all(f == f"diffusion_pytorch_model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
           for i, f in enumerate(shards)), shards
assert j["bytes"] == sum(os.path.getsize(os.path.join(d, f)) for f in shards), j["bytes"]
index = json.load(open(os.path.join(d, "diffusion_pytorch_model.safetensors.index.json")))
names, data = set(), 0
for f in shards:
    raw = open(os.path.join(d, f), "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    for k, v in header.items():
        if k == "__metadata__":
            continue
        assert index["weight_map"][k] == f, (k, f)
        names.add(k)
        data += v["data_offsets"][1] - v["data_offsets"][0]
assert set(index["weight_map"]) == names, "the weight_map names exactly the shards' tensors"
assert index["metadata"]["total_size"] == data, (index["metadata"], data)
assert "transformer_blocks.1.attn.to_q.weight" in names and "transformer_blocks.2.attn.to_q.weight" not in names
cfg = json.load(open(os.path.join(d, "config.json")))
assert cfg["num_layers"] == 2, cfg
r = j["sequential_read"]
assert r["bytes"] == j["bytes"] and r["seconds"] > 0 and r["bytes_per_second"] > 0, r
for run in ("cold", "warm"):
    x = j[run]
    for k in ("open_seconds", "load_seconds", "first_forward_seconds", "open_to_first_forward_seconds",
              "process_seconds", "ratio_to_sequential_read"):
        assert x[k] > 0, (run, k, x)
    assert x["open_to_first_forward_seconds"] <= x["process_seconds"], x
    assert abs(x["open_seconds"] + x["load_seconds"] + x["first_forward_seconds"]
               - x["open_to_first_forward_seconds"]) < 0.05, x
    assert 0 <= x["page_cache_resident_before"] <= 1, x
    assert x["meets_goal"] == (x["ratio_to_sequential_read"] <= j["goal_ratio"] == 1.3), x
assert j["warm"]["page_cache_resident_before"] > 0.9, "the cold run left the shards cached"
print("bench load ok:", j["bytes"], "bytes,", j["shards"], "shards, cold ratio",
      round(j["cold"]["ratio_to_sequential_read"], 2))
PY
# again: the checkpoint is reused, not written
"${BENCH[@]}" > "$WORK/b.json" 2> "$WORK/b.err" || { cat "$WORK/b.err"; fail "second run"; }
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['written'] is False and 'write_seconds' not in j" \
  "$WORK/b.json" || fail "the second run rewrote the checkpoint"
# usage errors
expect_rc 2 "$H3" bench load --dir "$WORK/x" --blocks 0 --device cpu
expect_err "blocks"
expect_rc 2 "$H3" bench load --device cpu
expect_err "dir"
echo "bench load ok"
