#!/usr/bin/env bash
# End-to-end checks of the operator-facing commands on the tiny mlp of
# make_models.py (light: runs in the ASan build too): --version, profiling
# progress (CLI and server), profile reuse and the cache never narrowed,
# the plan and profile plots, and `packrat infer` against a served model
# (.npy, .pb, JSON, --top-k, errors).
# usage: cliops.sh PACKRAT
set -u
PACKRAT=$(realpath "$1")
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
PY=/usr/bin/python3
# run_ok: a packrat command that must succeed, its output kept in $tmp/out
# and $tmp/err for the checks after it (which write elsewhere)
run_ok() { local name=$1; shift; CHECK_OUT=$tmp/out CHECK_ERR=$tmp/err check_cmd "$name" "$@"; }
export PACKRAT_CACHE=$tmp/cache
mkdir -p "$tmp/repo/mlp/1" "$tmp/gen"
$PY "$HERE/make_models.py" "$tmp/gen" >/dev/null || { echo "cannot make the mlp model"; exit 1; }
cp "$tmp/gen/mlp.onnx" "$tmp/repo/mlp/1/model.onnx"
echo '{"max_batch_size": 2}' >"$tmp/repo/mlp/config.json"
# intdiv (four inputs a, b, c, d: q = a / b) for infer's files in order
mkdir -p "$tmp/repo/intdiv/1"
cp "$tmp/gen/intdiv.onnx" "$tmp/repo/intdiv/1/model.onnx"
echo '{"max_batch_size": 2, "plan": "1x2"}' >"$tmp/repo/intdiv/config.json"
M=$tmp/repo/mlp/1/model.onnx
svg_ok() { # FILE PYTHON-CONDITION-ON-root-AND-text
  $PY -c "
import sys, xml.etree.ElementTree as ET
root = ET.parse('$1').getroot(); text = open('$1').read()
assert root.tag == '{http://www.w3.org/2000/svg}svg', root.tag
assert $2"
}
cache_sum() { cat "$tmp"/cache/*.json | sha256sum; ls -l --time-style=full-iso "$tmp"/cache; }

# --version
run_ok "--version" "$PACKRAT" --version
check_cmd "--version names packrat and oneDNN" grep -Eq "^packrat [0-9]+\.[0-9]+\.[0-9]+" "$tmp/out"
check_cmd "--version names oneDNN" grep -Eq "^oneDNN [0-9]+\.[0-9]+\.[0-9]+" "$tmp/out"
cp "$tmp/out" "$tmp/version"
check_cmd "packrat version says the same" sh -c "'$PACKRAT' version | cmp -s - '$tmp/version'"
check_cmd "help lists infer and version" sh -c "'$PACKRAT' --help | grep -q '^  infer' && '$PACKRAT' --help | grep -q '^  version'"

# packrat run on ONNX node tests whose inputs hold a zero-size dimension
# (ONNX Runtime passes them): once refused with "batch must be
# 1..1048576, got 0", now run through the engine, outputs as expected
NODE=/usr/share/libonnx-testdata/data/node
same_outputs() { # TEST OUT_DIR: every output_K.pb of the test equals OUT_DIR's
  $PY -c "
import glob, os, sys, numpy as np, onnx
from onnx import numpy_helper
want = sorted(glob.glob('$NODE/$1/test_data_set_0/output_*.pb'))
assert want, 'no outputs'
for w in want:
    a = numpy_helper.to_array(onnx.load_tensor(w))
    b = numpy_helper.to_array(onnx.load_tensor(os.path.join('$2', os.path.basename(w))))
    assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b), (w, a, b)
"
}
for t in test_reshape_allowzero_reordered test_split_zero_size_splits test_triu_zero; do
  run_ok "run $t (a zero-size dimension)" "$PACKRAT" run "$NODE/$t/model.onnx" \
    --input-dir "$NODE/$t/test_data_set_0" --output-dir "$tmp/$t"
  check_cmd "run $t: outputs as the node test's" same_outputs "$t" "$tmp/$t"
done

# profile: progress with an estimate of the time left, cached, plotted
run_ok "profile --plot" "$PACKRAT" profile "$M" --cores 1 --max-batch 2 --plot "$tmp/profile.svg"
check_cmd "profile logs progress and the time left" \
  grep -Eq "profiled 2/2 points \(100%\), [0-9.]+ s elapsed, about [0-9]+ s left" "$tmp/err"
check_cmd "profile is cached" test "$(ls "$tmp/cache" | wc -l)" = 1
check_cmd "profile plot is well-formed SVG with a line per thread count" svg_ok "$tmp/profile.svg" \
  "len(root.findall('.//{http://www.w3.org/2000/svg}polyline')) == 1 and 'log scale' in text and 'co-running' in text"

# a plan that the cached profile covers: reused, the cache untouched
cache_sum >"$tmp/sum1"
sleep 1
run_ok "plan --batch 2 from the cache" "$PACKRAT" plan "$M" --batch 2 --cores 1
check_cmd "plan says it reused the cached profile" grep -q "reusing the cached profile" "$tmp/err"
check_cmd "plan did not profile" sh -c "! grep -q 'profiled' '$tmp/err'"
cache_sum >"$tmp/sum2"
check_cmd "the cache file is unchanged" cmp -s "$tmp/sum1" "$tmp/sum2"

# a plan that needs more: only the missing batches measured, merged
run_ok "plan --batch 4 --plot" "$PACKRAT" plan "$M" --batch 4 --cores 1 --plot "$tmp/plan.svg"
check_cmd "plan measures only the missing batches" grep -q "lacks batches 3,4 on threads 1..1: measuring only those (2 points)" "$tmp/err"
check_cmd "the completion logs its progress" grep -q "profiled 2/2 points" "$tmp/err"
batches() { $PY -c "
import glob, json; d = json.load(open(glob.glob('$tmp/cache/*.json')[0]))
print(sorted({p['batch'] for p in d['points']}))"; }
check "the cache now holds batches 1..4" '[ "$(batches)" = "[1, 2, 3, 4]" ]'
check_cmd "plan plot: plan, fat instance, co-running note" svg_ok "$tmp/plan.svg" \
  "\"class='plan'\" in text and \"class='fat'\" in text and 'one 1-thread instance at batch 4' in text and 'co-running' in text"

# --reprofile with a narrower grid: measured again, nothing cached is lost
run_ok "profile --reprofile --max-batch 1" "$PACKRAT" profile "$M" --cores 1 --max-batch 1 --reprofile
check_cmd "--reprofile measures" grep -q "profiling on 1 cores, batches up to 1" "$tmp/err"
check "--reprofile keeps the wider cache" '[ "$(batches)" = "[1, 2, 3, 4]" ]'
check_cmd "and says it merged" grep -q "merged with the points already cached" "$tmp/err"
check_cmd "profile prints the grid asked for" test "$(grep -c '^  threads' "$tmp/out")" = 1

# two commands profiling at once (the narrower may finish last): the cache keeps both
(PACKRAT_CACHE=$tmp/cache3 "$PACKRAT" profile "$M" --cores 1 --max-batch 16 >/dev/null 2>&1 &
 PACKRAT_CACHE=$tmp/cache3 "$PACKRAT" profile "$M" --cores 1 --max-batch 1 >/dev/null 2>&1; wait)
check "profiling at once: the cache holds the wider grid" \
  '[ "$($PY -c "import glob, json; print(sorted({p[\"batch\"] for p in json.load(open(glob.glob(\"$tmp/cache3/*.json\")[0]))[\"points\"]}))")" = "[1, 2, 3, 4, 5, 6, 7, 8, 16]" ]'

# plot of a profile with an outlier: the axis fits the plan, the outlier is marked
$PY - "$tmp" <<'PY'
import json, sys
pts = [{"threads": t, "batch": b, "latency_ms": 1.0 * b / t + 0.2, "isolated_ms": 1.0 * b / t + 0.2}
       for t in (1, 2) for b in (1, 2, 4, 8)]
pts[3]["latency_ms"] = pts[3]["isolated_ms"] = 7400.0  # threads 1 batch 8
json.dump({"model": "m <&>", "model_sha256": "0" * 64, "cpu": "c", "cores": 2, "points": pts},
          open(sys.argv[1] + "/outlier.json", "w"))
PY
run_ok "plan --plot of a profile with an outlier" "$PACKRAT" plan --profile "$tmp/outlier.json" --batch 2 --plot "$tmp/outlier.svg"
check_cmd "the outlier is marked, the axis ends low" svg_ok "$tmp/outlier.svg" \
  "\"class='clipped'\" in text and '3 points above 2.5 ms' in text and '7400.000 ms' in text"
expect_status "--plot into a missing folder fails" 1 "$PACKRAT" plan --profile "$tmp/outlier.json" --batch 2 --plot "$tmp/none/x.svg"
check_cmd "profile --help tells where the cache is and of --reprofile" sh -c \
  "'$PACKRAT' profile --help | grep -q PACKRAT_CACHE && '$PACKRAT' profile --help | grep -q -- --reprofile"

# the server logs its profiling progress (a fresh cache, so it profiles)
PACKRAT_CACHE=$tmp/cache2 start_server "$tmp/repo" 120 --cores 0
check_cmd "the server logs profiling progress and the time left" \
  grep -Eq "model mlp: profiled [0-9]+/[0-9]+ points .* elapsed, about [0-9]+ s left" "$tmp/log"
# the config route says the batch the policy plans from: 1 when unset (not 0)
check "config: min_batch_size unset reads 1" \
  '[ "$(curl -s "$URL/v2/models/mlp/config" | $PY -c "import json, sys; print(json.load(sys.stdin)[\"min_batch_size\"])")" = 1 ]'

# packrat infer: every input format, --top-k, the errors
$PY - "$tmp" <<'PY'
import json, sys
import numpy as np
from onnx import numpy_helper
tmp = sys.argv[1]
x = np.array([[1, 2, 3, 4], [0.5, -1, 2, 0]], np.float32)
np.save(f"{tmp}/x.npy", x)
open(f"{tmp}/x.pb", "wb").write(numpy_helper.from_array(x, "x").SerializeToString())
json.dump(x[0].tolist(), open(f"{tmp}/x.json", "w"))
json.dump({"shape": [2, 4], "datatype": "FP32", "data": x.ravel().tolist()}, open(f"{tmp}/t.json", "w"))
json.dump([[1, 2], [3]], open(f"{tmp}/ragged.json", "w"))
np.save(f"{tmp}/wrong.npy", np.zeros((2, 5), np.float32))
open(f"{tmp}/bad.npy", "wb").write(b"\x93NUMPY garbage")
w = json.load(open(f"{tmp}/gen/mlp.json"))
y = np.maximum(x @ np.array(w["W"], np.float32) + np.array(w["b"], np.float32), 0)
np.save(f"{tmp}/y.npy", y)
np.save(f"{tmp}/not_y.npy", y + 1)
for k, v in dict(a=[[6, 8]], b=[[3, 2]], c=[[9, 4]], d=[[3, 4]]).items():
    np.save(f"{tmp}/{k}.npy", np.array(v, np.int64 if k in "ab" else np.int32))
PY
rows_match() { # OUT-FILE ROWS: the printed rows equal relu(x W + b)
  $PY -c "
import numpy as np, re
y = np.load('$tmp/y.npy')[:$2]
rows = [list(map(float, l.split(':')[1].split())) for l in open('$1') if l.startswith('  row')]
assert np.allclose(np.array(rows), y, atol=1e-4), (rows, y)"
}
run_ok "infer .npy" "$PACKRAT" infer --url "$URL" --model mlp --input "$tmp/x.npy"
check_cmd "prints name, datatype and shape" grep -q "^y FP32 \[2, 3\]" "$tmp/out"
check_cmd "infer .npy: the values" rows_match "$tmp/out" 2
run_ok "infer x=FILE.pb" "$PACKRAT" infer --url "$URL/" --model mlp --input "x=$tmp/x.pb"
check_cmd "infer .pb: the values" rows_match "$tmp/out" 2
run_ok "infer nested JSON array (batch axis added)" "$PACKRAT" infer --url "$URL" --model mlp --input "$tmp/x.json"
check_cmd "infer JSON array: shape [1, 3]" grep -q "^y FP32 \[1, 3\]" "$tmp/out"
check_cmd "infer JSON array: the values" rows_match "$tmp/out" 1
run_ok "infer JSON tensor object" "$PACKRAT" infer --url "$URL" --model mlp --input "$tmp/t.json" --model-version 1
check_cmd "infer JSON tensor: the values" rows_match "$tmp/out" 2
run_ok "infer --top-k 2" "$PACKRAT" infer --url "$URL" --model mlp --input "$tmp/x.npy" --top-k 2
check_cmd "--top-k: index (score) of the 2 largest per row" $PY -c "
import numpy as np, re
y = np.load('$tmp/y.npy')
rows = [l for l in open('$tmp/out') if l.startswith('  row')]
assert len(rows) == 2, rows
for r, line in enumerate(rows):
    got = [(int(i), float(s)) for i, s in re.findall(r'(\d+) \(([-0-9.e+]+)\)', line)]
    assert len(got) == 2, line
    order = sorted(range(3), key=lambda c: (-y[r][c], c))[:2]
    assert [i for i, _ in got] == order and np.allclose([s for _, s in got], y[r][order], atol=1e-4), (line, y[r])"
EXPECT_MESSAGE=1
expect_status "infer: unknown model, 404 printed" 1 "$PACKRAT" infer --url "$URL" --model nope --input "$tmp/x.npy"
check_cmd "the server's error is printed" grep -q "the server answered 404: unknown model" "$tmp/err"
expect_status "infer: wrong shape, the server's 400 printed" 1 "$PACKRAT" infer --url "$URL" --model mlp --input "$tmp/wrong.npy"
check_cmd "the 400 and its reason" grep -q "the server answered 400: .*x" "$tmp/err"
port=$($PY -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
expect_status "infer: unreachable server" 1 "$PACKRAT" infer --url "http://127.0.0.1:$port" --model mlp --input "$tmp/x.npy"
check_cmd "says it cannot reach it" grep -q "cannot reach http://127.0.0.1:$port" "$tmp/err"
expect_status "infer: corrupt .npy" 1 "$PACKRAT" infer --url "$URL" --model mlp --input "$tmp/bad.npy"
expect_status "infer: missing file" 1 "$PACKRAT" infer --url "$URL" --model mlp --input "$tmp/none.npy"
expect_status "infer: ragged JSON" 1 "$PACKRAT" infer --url "$URL" --model mlp --input "$tmp/ragged.json"
check_cmd "says it is ragged" grep -q "not all of one length" "$tmp/err"
echo '{"inputs": []}' >"$tmp/nodata.json"
expect_status "infer: JSON without data" 1 "$PACKRAT" infer --url "$URL" --model mlp --input "$tmp/nodata.json"
check_cmd "says what it needs" grep -q "needs an array of numbers" "$tmp/err"
echo '{"shape": [3, 4], "data": [1, 2, 3, 4]}' >"$tmp/badshape.json"
expect_status "infer: JSON shape that does not match its data" 1 "$PACKRAT" infer --url "$URL" --model mlp --input "$tmp/badshape.json"
expect_status "infer: more files than inputs" 1 "$PACKRAT" infer --url "$URL" --model mlp --input "$tmp/x.npy" --input "$tmp/x.npy"
expect_status "infer: more files after one --input than inputs" 1 "$PACKRAT" infer --url "$URL" --model mlp --input "$tmp/x.npy" "$tmp/x.npy"
expect_status "infer: --input without a file" 2 "$PACKRAT" infer --url "$URL" --model mlp --input --top-k 1
expect_status "infer: no --input" 2 "$PACKRAT" infer --url "$URL" --model mlp
expect_status "infer: --top-k 0" 2 "$PACKRAT" infer --url "$URL" --model mlp --input "$tmp/x.npy" --top-k 0
check_cmd "infer --help" sh -c "'$PACKRAT' infer --help | grep -q -- '--top-k K'"
# several files after one --input (docs/cli.md: --input [NAME=]FILE...), to
# the model's inputs in order; unnamed ones fill the inputs not named
q_is() { grep -A1 "^q INT64 \[1, 2\]" "$tmp/out" | grep -q "row 0: $1\$"; }
run_ok "infer --input A B C D" "$PACKRAT" infer --url "$URL" --model intdiv \
  --input "$tmp/a.npy" "$tmp/b.npy" "$tmp/c.npy" "$tmp/d.npy"
check "the files went to a, b, c, d in order (q = a / b)" 'q_is "2 4"'
run_ok "infer --input A B --input C D" "$PACKRAT" infer --url "$URL" --model intdiv \
  --input "$tmp/a.npy" "$tmp/b.npy" --input "$tmp/c.npy" --top-k 1 --input "$tmp/d.npy"
check "two --input lists and a flag between them: the same" 'grep -q "^q INT64 \[1, 2\]" "$tmp/out"'
run_ok "infer --input d=D A B C" "$PACKRAT" infer --url "$URL" --model intdiv \
  --input "d=$tmp/d.npy" "$tmp/a.npy" "$tmp/b.npy" "$tmp/c.npy"
check "unnamed files fill the inputs not named, in order" 'q_is "2 4"'
run_ok "infer --input b=A a=B C D" "$PACKRAT" infer --url "$URL" --model intdiv \
  --input "b=$tmp/a.npy" "a=$tmp/b.npy" "$tmp/c.npy" "$tmp/d.npy"
check "named files go by name (q = b / a)" 'q_is "0 0"'
expect_status "infer: an input given twice" 1 "$PACKRAT" infer --url "$URL" --model intdiv \
  --input "a=$tmp/a.npy" "$tmp/b.npy" "$tmp/c.npy" "$tmp/d.npy" "a=$tmp/a.npy"
check_cmd "says which" grep -q "input a is given twice" "$tmp/err"

# packrat bench --schedule: each phase's arrivals at its own rate from its
# own start (a slow phase's long gap once ran on into the next, which then
# began seconds late or sent nothing)
run_ok "bench --schedule, a slow phase before a fast one" "$PACKRAT" bench --url "$URL" --model mlp \
  --schedule 0.05:2,100:2,0.05:1 --json
check_cmd "the fast phase sends at its rate from its start" $PY -c "
import json
d = json.loads(open('$tmp/out').read().splitlines()[-1])
n = [p['requests'] for p in d['phases']]
assert 140 <= n[1] <= 260 and n[0] <= 2 and d['errors'] == 0, n
"
# packrat bench's error total is the sum of its errors by status, printed
# and in the JSON (a 200 whose output mismatched, or a request with no
# answer, was once counted in no class: 78419 errors beside 2xx 26)
bench_counts_agree() { # OUT-FILE
  $PY -c "
import json, re
lines = open('$1').read().splitlines()
d = json.loads(lines[-1])
e = d['errors']
by = [l for l in lines if l.startswith('errors by status:')]
assert e > 0 and len(by) == 1, (e, by)
assert sum(map(int, re.findall(r'(?:[2-5]xx|transport) (\d+)', by[0]))) == e, (e, by[0])
assert sum(d['error_counts'].values()) == e, (e, d['error_counts'])
assert sum(d['status_counts'].values()) == d['requests'], d
"
}
run_ok "bench --expect a wrong answer (closed loop)" "$PACKRAT" bench --url "$URL" --model mlp \
  --concurrency 2 --duration 1 --input "$tmp/x.npy" --expect "$tmp/not_y.npy" --json
check_cmd "mismatches: the errors equal their by-status counts (2xx)" bench_counts_agree "$tmp/out"
check_cmd "every answer a mismatch, counted under 2xx" $PY -c "
import json
d = json.loads(open('$tmp/out').read().splitlines()[-1])
assert d['errors'] == d['requests'] == d['mismatches'] == d['error_counts']['2xx'] > 0, d"
run_ok "bench, a 400 for every request (open loop)" "$PACKRAT" bench --url "$URL" --model mlp \
  --rate 50 --duration 1 --input "$tmp/wrong.npy" --json
check_cmd "400s: the errors equal their by-status counts (4xx)" bench_counts_agree "$tmp/out"
run_ok "bench --expect the right answer" "$PACKRAT" bench --url "$URL" --model mlp \
  --concurrency 2 --duration 1 --input "$tmp/x.npy" --expect "$tmp/y.npy" --json
check_cmd "no errors, every answer a 2xx" $PY -c "
import json
d = json.loads(open('$tmp/out').read().splitlines()[-1])
assert d['errors'] == d['mismatches'] == 0 and d['status_counts']['2xx'] == d['requests'] > 0, d"
# no answer at all, the server gone mid-run: transport errors (a closed loop
# that meets refused connections counts tens of thousands a second)
"$PACKRAT" bench --url "$URL" --model mlp --concurrency 2 --duration 4 --json \
  >"$tmp/gone.out" 2>"$tmp/gone.err" &
bench_pid=$!
sleep 1.5
kill "$srv"; wait "$srv"; srv=
wait "$bench_pid"
check "bench against a server gone mid-run finishes" "[ $? = 0 ]"
check_cmd "transport errors: the errors equal their by-status counts" bench_counts_agree "$tmp/gone.out"
check_cmd "answers before, transport errors after" $PY -c "
import json
d = json.loads(open('$tmp/gone.out').read().splitlines()[-1])
assert d['error_counts']['transport'] > 0 and d['requests'] - d['errors'] == d['status_counts']['2xx'] > 0, d"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
