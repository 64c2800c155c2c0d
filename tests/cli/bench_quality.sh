#!/usr/bin/env bash
# h3-engine bench quality on the random tiny model (CPU, 64x32, 5 forwards; a t2va and the fl2va case): the table's
# structure, the lossless rerun exact against the reference (PSNR/SNR inf, SSIM/cosine 1, same work), a lossy
# setting (velocity reuse) finite with fewer block evaluations, a setting the tiny DiT cannot take listed as
# not applicable with the builder's reason, the --output JSON agreeing; bad names are usage errors.
source "$(dirname "$0")/lib/common.sh" "$@"

expect_rc 2 "$H3" bench quality --settings lossless,nope; expect_err "unknown name 'nope'"
expect_rc 2 "$H3" bench quality --cases ball,nope; expect_err "known: ball, square, keyframe"

expect_rc 0 "$H3" bench quality --work "$WORK/q" --size 64x32 --steps 6 --cases keyframe,ball \
  --settings velocity,lossless,dbcache-defaults --output "$WORK/q.json"
cp "$WORK/out.txt" "$WORK/table.md"
[ -d "$WORK/q/tiny/transformer" ] || fail "the default model was not written into --work"
python3 - "$WORK/table.md" "$WORK/q.json" <<'PY'
import json, math, sys
md = open(sys.argv[1]).read().splitlines()
def fail(m):
    print("FAIL:", m); print("\n".join(md)); sys.exit(1)
head = [i for i, l in enumerate(md) if l.startswith("| setting |")]
if len(head) != 1: fail("no table header")
h = head[0]
cols = [c.strip() for c in md[h].strip("|").split("|")]
want = ["setting", "flags", "PSNR dB", "min PSNR dB", "SSIM", "min SSIM", "audio SNR dB", "audio cos",
        "blocks", "work ×", "steps s", "wall ×"]
if cols != want: fail("columns %r" % cols)
if md[h + 1] != "|" + "---|" * len(want): fail("separator %r" % md[h + 1])
rows = {}
for l in md[h + 2:]:
    if not l.startswith("|"): break
    cells = [c.strip() for c in l.strip("|").split("|")]
    if len(cells) != len(want): fail("row %r has %d cells" % (l, len(cells)))
    rows[cells[0]] = dict(zip(want, cells))
if list(rows) != ["lossless", "dbcache-defaults", "velocity"]: fail("rows %r" % list(rows))
ref = [l for l in md if l.startswith("- reference: ")]
if not ref: fail("no reference line")
ref_blocks = int(ref[0].split()[2])
if ref_blocks != 20: fail("reference blocks %d, expected 2 cases x 5 forwards x 2 blocks" % ref_blocks)
L = rows["lossless"]
for k, v in [("PSNR dB", "inf"), ("min PSNR dB", "inf"), ("SSIM", "1.0000"), ("min SSIM", "1.0000"),
             ("audio SNR dB", "inf"), ("audio cos", "1.000000"), ("blocks", "20"), ("work ×", "1.000")]:
    if L[k] != v: fail("lossless %s = %s, expected %s" % (k, L[k], v))
V = rows["velocity"]
for k in ["PSNR dB", "min PSNR dB", "audio SNR dB"]:
    x = float(V[k])
    if not (math.isfinite(x) and x > 0): fail("velocity %s = %s is not a finite positive number" % (k, V[k]))
if not 0 < float(V["SSIM"]) <= 1: fail("velocity SSIM %s" % V["SSIM"])
if not int(V["blocks"]) < ref_blocks: fail("velocity ran %s blocks, the reference %d" % (V["blocks"], ref_blocks))
if abs(float(V["work ×"]) - ref_blocks / int(V["blocks"])) > 1e-3: fail("velocity work speedup %s" % V["work ×"])
if rows["dbcache-defaults"]["PSNR dB"] != "—": fail("dbcache-defaults was measured")
if not any("dbcache-defaults: not_applicable: " in l and "leaves no middle block" in l for l in md):
    fail("the not-applicable reason is missing")
j = json.load(open(sys.argv[2]))
s = {r["name"]: r for r in j["settings"]}
if j["bench"] != "quality" or not j["tiny"] or j["reference"]["blocks_executed"] != 20: fail("json header")
if [c.split(" ")[:2] for c in j["cases"]] != [["ball", "(t2va,"], ["keyframe", "(fl2va,"]]: fail("json cases %r" % j["cases"])
if s["lossless"]["video"]["psnr_db"] != "inf" or s["lossless"]["audio"]["snr_db"] != "inf": fail("json lossless")
if s["lossless"]["video"]["identical_frames"] != s["lossless"]["video"]["frames"] or s["lossless"]["video"]["frames"] != 214:
    fail("json lossless frames")
v = s["velocity"]
if not isinstance(v["video"]["psnr_db"], float) or abs(v["video"]["psnr_db"] - float(V["PSNR dB"])) > 0.006:
    fail("json velocity PSNR %r vs the table's %s" % (v["video"]["psnr_db"], V["PSNR dB"]))
if v["work"]["cache_hits"] < 2 or v["status"] != "measured": fail("json velocity work")
if [c["name"] for c in v["cases"]] != ["ball", "keyframe"] or not all(c["blocks_executed"] < 10 for c in v["cases"]):
    fail("json velocity cases")
if s["dbcache-defaults"]["status"] != "not_applicable" or "video" in s["dbcache-defaults"]: fail("json n/a row")
PY
[ $? -eq 0 ] || fail "bench quality output"
echo OK
