#!/usr/bin/env bash
# End-to-end checks of `packrat profile` that need no exported model (the
# tiny mlp of make_models.py): a cache folder that cannot be made is a
# warning that touches no other file, --check on good and suspicious
# profiles, and `packrat plan` warning about a suspicious profile.
# usage: profile.sh PACKRAT
set -u
PACKRAT=$(realpath "$1")
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
snapshot() { (cd "$1" && find . -type f -exec sha256sum {} + | sort; find . | sort); }

mkdir -p "$tmp/repo/mlp" "$tmp/work"
/usr/bin/python3 "$HERE/make_models.py" "$tmp/repo/mlp" || { echo "cannot make the mlp model"; exit 1; }
echo '{"max_batch_size": 2}' >"$tmp/repo/mlp/config.json"
M=$tmp/repo/mlp/mlp.onnx

# the cache folder would be under a regular file (root ignores permissions)
snapshot "$tmp/repo" >"$tmp/before"
for start in first next; do
  (cd "$tmp/work" && PACKRAT_CACHE="$tmp/repo/mlp/config.json/cache" \
    "$PACKRAT" profile "$M" --cores 1 --max-batch 2) >"$tmp/p.out" 2>"$tmp/p.err"
  rc=$?
  check_cmd "unwritable cache, $start start: the profile succeeds" test "$rc" = 0
  check_cmd "unwritable cache, $start start: a warning" grep -q "warn .*not cached" "$tmp/p.err"
  check_cmd "unwritable cache, $start start: says not cached" grep -q -- "-> (not cached)" "$tmp/p.out"
done
snapshot "$tmp/repo" >"$tmp/after"
check_cmd "no file of the model's folder touched" cmp -s "$tmp/before" "$tmp/after"
check_cmd "nothing written in the working folder" test -z "$(ls -A "$tmp/work")"

# a writable cache: the profile is cached (or, on a busy machine, not, with a warning)
(cd "$tmp/work" && PACKRAT_CACHE="$tmp/cache" "$PACKRAT" profile "$M" --cores 1 --max-batch 2) \
  >"$tmp/p.out" 2>"$tmp/p.err"
check_cmd "profile with a writable cache" test $? = 0
cached=$(grep -o -- '-> [^ ]*' "$tmp/p.out" | cut -c4-)
if [ "$cached" != "(not" ]; then
  check_cmd "the cache file exists" test -s "$cached"
  check_cmd "the cache holds nothing else" test "$(ls -A "$tmp/cache" | wc -l)" = 1
  expect_status "--check of the cached profile is good" 0 "$PACKRAT" profile --check "$cached"
  check_cmd "the points record their runs" /usr/bin/python3 -c "
import json; d=json.load(open('$cached'))
assert d['tolerance'] > 0 and d['suspicious'] == 0, d
assert all(p['runs'] >= 3 and p['spread'] >= 0 and p['remeasured'] in (0, 1) for p in d['points']), d"
else
  check_cmd "not cached only when suspicious" grep -q "not caching it" "$tmp/p.err"
fi

# --check on profiles made by hand
/usr/bin/python3 - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
def profile(points):
    return {"model": "m", "model_sha256": "0" * 64, "cpu": "c", "cores": 2, "version": "packrat",
            "tolerance": 0.05, "points": points}
def pt(t, b, ms, p90=None, remeasured=0):
    return {"threads": t, "batch": b, "latency_ms": ms, "p90_ms": p90 or ms * 1.02,
            "isolated_ms": ms, "runs": 10, "spread": 0.01, "remeasured": remeasured}
good = [pt(t, b, 1.0 * b / t + 0.2) for t in (1, 2) for b in (1, 2, 4)]
busy = [p if (p["threads"], p["batch"]) != (2, 4) else pt(2, 4, 5.88, 29.4) for p in good]
real = [p if p["threads"] != 2 else pt(2, p["batch"], 1.3 * (p["batch"] + 0.2), remeasured=1)
        for p in good]
for name, pts in (("good", good), ("busy", busy), ("real", real)):
    json.dump(profile(pts), open(f"{tmp}/{name}.json", "w"))
PY
expect_status "--check good profile: 0" 0 "$PACKRAT" profile --check "$tmp/good.json"
check_cmd "--check says good" grep -q ": good: 0 of 6 points" "$tmp/out"
expect_status "--check busy profile: 1" 1 "$PACKRAT" profile --check "$tmp/busy.json"
check_cmd "--check names the point and why" grep -q \
  "threads  2 batch    4: median 5.880 ms, p90 29.400 ms: p90 5.0x the median.*slower than 1 thread (4.200 ms) by 40%" \
  "$tmp/out"
expect_status "--check reproduced inversion: 0" 0 "$PACKRAT" profile --check "$tmp/real.json"
check_cmd "--check counts the re-measured points" grep -q "3 re-measured and reproduced" "$tmp/out"
expect_status "--check missing file: 1" 1 "$PACKRAT" profile --check "$tmp/none.json"
expect_status "--check without a file: 2" 2 "$PACKRAT" profile --check
expect_status "plan from a suspicious profile works" 0 "$PACKRAT" plan --profile "$tmp/busy.json" --batch 2
check_cmd "and warns" grep -q "warning: 1 points of .* are suspicious" "$tmp/err"
check_cmd "--help tells of --check" sh -c "'$PACKRAT' profile --help | grep -q -- '--check FILE'"

# --batches: exactly those batch sizes (sorted, once each); --point-budget bounds a point's runs
PACKRAT_CACHE="$tmp/cache-b" "$PACKRAT" profile "$M" --cores 1 --batches 4,1,2,1 --point-budget 0.02 \
  --out "$tmp/b.json" >"$tmp/p.out" 2>"$tmp/p.err"
check_cmd "--batches --point-budget: the profile succeeds" test $? = 0
check_cmd "--batches: exactly batches 1, 2, 4 at 1 thread, at least 3 runs each" /usr/bin/python3 -c "
import json; d=json.load(open('$tmp/b.json'))
assert sorted((p['threads'], p['batch']) for p in d['points']) == [(1, 1), (1, 2), (1, 4)], d
assert all(p['runs'] >= 3 for p in d['points']), d"
expect_status "--batches 0: 2" 2 "$PACKRAT" profile "$M" --batches 0
expect_status "--batches 1,,2: 2" 2 "$PACKRAT" profile "$M" --batches 1,,2
expect_status "--point-budget 0: 2" 2 "$PACKRAT" profile "$M" --point-budget 0
expect_status "--point-budget x: 2" 2 "$PACKRAT" profile "$M" --point-budget x
check_cmd "--help tells of --batches" sh -c "'$PACKRAT' profile --help | grep -q -- '--batches LIST'"

# several --plan: measured side by side in one process, one entry per plan
expect_status "run with two plans: 0" 0 "$PACKRAT" run "$M" --batch 2 --plan 1x2 --plan 1x1,1x1 \
  --repeat 4 --json
check_cmd "two plans side by side, each timed, the fastest marked" /usr/bin/python3 -c "
import json; d=json.loads(open('$tmp/out').read().strip().splitlines()[-1])
assert d['batch'] == 2 and d['repeat'] == 4, d
assert [(p['plan'], p['instances'], p['threads']) for p in d['plans']] == [('1x2', 1, 1), ('1x1,1x1', 2, 2)], d
assert all(0 < p['min_ms'] <= p['median_ms'] <= p['p90_ms'] for p in d['plans']), d
text = open('$tmp/out').read()
assert text.count('(fastest)') == 1, text"
expect_status "a plan of another batch among several: 1" 1 "$PACKRAT" run "$M" --batch 2 --plan 1x2 --plan 1x1
check_cmd "names the plan" grep -q "1x1: the plan's batches add up to 1, the batch is 2" "$tmp/err"
expect_status "several plans and --output-dir: 2" 2 "$PACKRAT" run "$M" --batch 2 --plan 1x2 --plan 1x1,1x1 \
  --output-dir "$tmp/o"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
