# Sourced by scripts/device_check.sh (H3_STAGE=custom H3_CUSTOM=scripts/device_load_decode.sh
# H3_TARGETS=h3-engine): issue #45's cold start and decode on one GPU — `bench load` (a random DiT of
# H3_LD_BLOCKS full-width blocks in the official sharded layout on the local disk, a fresh process from open
# to the first forward, cold and warm page cache, against the disk's sequential read rate) and `bench vae`
# (the 5 s 1344x768 video decode to RGB8 frames and the audio decode), twice each.
echo "== bench load --blocks ${H3_LD_BLOCKS:-16} ($SECONDS s)"
df -h /tmp | tail -1
timeout 300 $H3 bench load --dir /tmp/h3-load --blocks "${H3_LD_BLOCKS:-16}" --device cuda --json \
  > "$OUT/ld_load.json" 2> "$OUT/ld_load.err"; echo "rc=$?"; tail -3 "$OUT/ld_load.err"
python3 -c "import json; print(json.dumps(json.load(open('$OUT/ld_load.json')))[:1500])" 2>&1 | tail -2
for i in 1 2; do
  echo "== bench vae (decode, 1344x768x124) run $i ($SECONDS s)"
  timeout 120 $H3 bench vae --random-weights --json > "$OUT/ld_vae_$i.json" 2> "$OUT/ld_vae_$i.err"
  echo "rc=$?"; python3 -c "import json; j=json.load(open('$OUT/ld_vae_$i.json')); print({k: v for k, v in j.items() if not isinstance(v, (dict, list))})" 2>&1 | tail -1
done
