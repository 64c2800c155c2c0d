#!/usr/bin/env bash
# h3-engine compare: two tiny generations with the same seed are identical (PSNR inf, SSIM 1, SNR inf), a
# third with another seed differs (finite PSNR); MP4, WAV and latents; --json parses and --output writes the
# same document; kind / shape mismatches and missing files are clear errors with the right exit code.
source "$(dirname "$0")/lib/common.sh" "$@"
expect_out() { grep -q -- "$1" "$WORK/out.txt" || { cat "$WORK/out.txt"; fail "stdout lacks '$1'"; }; }
# json_check EXPR...: python asserts over j = the JSON on stdout
json_check() {
  python3 - "$WORK/out.txt" "$@" <<'PY' || { cat "$WORK/out.txt"; fail "json check: ${*}"; }
import json, math, sys
j = json.load(open(sys.argv[1]))
for expr in sys.argv[2:]:
    assert eval(expr, {"j": j, "math": math}), expr
PY
}

expect_rc 0 "$H3" make-tiny "$WORK/tiny" --seed 1
GEN=("$H3" generate --model "$WORK/tiny" --random-prompt-embeds 5 --size 64x32 --frames 107 --steps 2 --progress none)
expect_rc 0 "${GEN[@]}" --seed 5 --output "$WORK/s5a.mp4" --save-latents "$WORK/s5a.st"
expect_rc 0 "${GEN[@]}" --seed 5 --output "$WORK/s5b.mp4" --save-latents "$WORK/s5b.st"
expect_rc 0 "${GEN[@]}" --seed 6 --output "$WORK/s6.mp4" --save-latents "$WORK/s6.st"

# ---- MP4, same seed: identical video and audio
expect_rc 0 "$H3" compare "$WORK/s5a.mp4" "$WORK/s5b.mp4"
expect_out "compare video"; expect_out "107 frames 64x32"; expect_out "PSNR inf dB: every frame is identical"; expect_out "SSIM mean 1.000000"
expect_rc 0 "$H3" compare "$WORK/s5a.mp4" "$WORK/s5b.mp4" --json
json_check 'j["kind"] == "video" and j["latents"] is None and j["warnings"] == []' \
  'j["video"]["frames"] == 107 and j["video"]["width"] == 64 and j["video"]["height"] == 32' \
  'j["video"]["psnr_per_frame"] == ["inf"] * 107 and j["video"]["ssim_per_frame"] == [1.0] * 107' \
  'j["video"]["psnr_mean"] == "inf" and j["video"]["ssim_mean"] == 1.0 and j["video"]["identical_frames"] == 107' \
  'j["audio"]["channels"] == 2 and j["audio"]["sample_rate"] == 32000 and j["audio"]["overall"]["snr_db"] == "inf"' \
  'j["audio"]["overall"]["rmse"] == 0 and j["audio"]["overall"]["rms_ratio"] == 1.0'

# ---- MP4, other seed: finite PSNR, SSIM < 1; --output writes the same JSON as --json prints
expect_rc 0 "$H3" compare "$WORK/s5a.mp4" "$WORK/s6.mp4" --json --output "$WORK/r.json"
cmp -s "$WORK/out.txt" "$WORK/r.json" || fail "--output differs from the --json document"
json_check 'all(isinstance(p, float) and math.isfinite(p) for p in j["video"]["psnr_per_frame"])' \
  'isinstance(j["video"]["psnr_mean"], float) and j["video"]["psnr_mean"] < 60' \
  'j["video"]["ssim_mean"] < 1 and j["video"]["identical_frames"] == 0' \
  'len(j["video"]["ssim_per_frame"]) == 107 and j["video"]["psnr_min"] <= j["video"]["psnr_mean"]' \
  'math.isfinite(j["audio"]["overall"]["snr_db"]) and j["audio"]["overall"]["cosine"] < 1' \
  'len(j["audio"]["per_channel"]) == 2'
expect_rc 0 "$H3" compare "$WORK/s5a.mp4" "$WORK/s6.mp4" --output "$WORK/r2.json"
expect_out "PSNR mean"; expect_out "audio: 2 ch at 32000 Hz"
python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$WORK/r2.json" || fail "r2.json does not parse"

# ---- latents
expect_rc 0 "$H3" compare "$WORK/s5a.st" "$WORK/s5b.st" --json
json_check 'j["kind"] == "latents" and j["video"] is None' \
  'sorted(t["name"] for t in j["latents"]["tensors"]) == ["audio_latents", "audio_noise", "video_latents", "video_noise"]' \
  'all(t["snr_db"] == "inf" and t["max_abs_diff"] == 0 and t["rel_rms"] == 0 for t in j["latents"]["tensors"])'
expect_rc 0 "$H3" compare "$WORK/s5a.st" "$WORK/s6.st" --json
json_check 'all(math.isfinite(t["snr_db"]) and t["max_abs_diff"] > 0 and t["cosine"] < 0.9 for t in j["latents"]["tensors"])' \
  '[t["shape"] for t in j["latents"]["tensors"] if t["name"] == "video_latents"] == [[1, 24, 32, 2, 4]]'
expect_rc 0 "$H3" compare "$WORK/s5a.st" "$WORK/s6.st"
expect_out "video_latents \[1x24x32x2x4\]: cosine"

# ---- WAV (decoded from the saved latents)
for s in s5a s5b s6; do expect_rc 0 "$H3" decode --model "$WORK/tiny" --latents "$WORK/$s.st" --output "$WORK/$s.wav"; done
expect_rc 0 "$H3" compare "$WORK/s5a.wav" "$WORK/s5b.wav" --json
json_check 'j["kind"] == "audio" and j["audio"]["overall"]["snr_db"] == "inf" and j["audio"]["samples"] > 0'
expect_rc 0 "$H3" compare "$WORK/s5a.wav" "$WORK/s6.wav" --json
json_check 'math.isfinite(j["audio"]["overall"]["snr_db"]) and j["audio"]["overall"]["rmse"] > 0'

# ---- errors: kinds differ / shapes differ (2), missing or unreadable file (3), usage (2)
expect_rc 2 "$H3" compare "$WORK/s5a.mp4" "$WORK/s5a.wav"
expect_err "different kinds (video vs audio)"; expect_err "s5a.mp4"; expect_err "s5a.wav"
python3 - "$WORK/s5a.st" "$WORK/small.st" <<'PY' || fail "writing small.st"
import json, struct, sys
b = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n]); v = h["video_latents"]; s, e = v["data_offsets"]
data = b[8 + n + s:8 + n + s + (e - s) // 2]  # the first 16 of 32 latent frames
hdr = json.dumps({"video_latents": {"dtype": "F32", "shape": [1, 24, 16, 2, 4], "data_offsets": [0, len(data)]}}).encode()
hdr += b" " * ((8 - len(hdr) % 8) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(hdr)) + hdr + data)
PY
expect_rc 2 "$H3" compare "$WORK/s5a.st" "$WORK/small.st"
expect_err "tensor 'video_latents' has shape \[1, 24, 32, 2, 4\] vs \[1, 24, 16, 2, 4\]"
expect_rc 3 "$H3" compare "$WORK/s5a.mp4" "$WORK/none.mp4"
expect_err "none.mp4' does not exist"
echo "not a video" > "$WORK/junk.mp4"
expect_rc 3 "$H3" compare "$WORK/s5a.mp4" "$WORK/junk.mp4"
expect_err "junk.mp4"
expect_rc 2 "$H3" compare "$WORK/s5a.mp4"
echo "compare: all checks passed"
