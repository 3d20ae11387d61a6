#!/usr/bin/env bash
# End-to-end tests of packrat serve: the real server on a loopback port, every
# endpoint checked with curl, good and bad requests, still serving after each
# bad one, a real exported model compared with PyTorch, graceful SIGTERM.
# usage: server.sh PACKRAT MODELS_DIR
set -u
PACKRAT=$1
MODELS=$(cd "$2" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
export PACKRAT_CACHE=$tmp/cache

ok() { passed=$((passed + 1)); echo "PASS $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; [ -f "$tmp/body" ] && head -c 400 "$tmp/body" && echo; }
# req NAME EXPECTED_STATUS METHOD PATH [curl args...]: the body lands in $tmp/body
req() {
  local name=$1 want=$2 method=$3 path=$4; shift 4
  local got
  got=$(curl -s -o "$tmp/body" -w '%{http_code}' -X "$method" "$@" "$BASE$path")
  if [ "$got" = "$want" ]; then ok "$name ($got)"; else bad "$name: status $got, wanted $want"; fi
}
jcheck() { # NAME PYTHON-EXPR over d = the JSON body
  if /usr/bin/python3 -c "import json,sys; d=json.load(open('$tmp/body')); sys.exit(0 if ($2) else 1)" 2>/dev/null; then ok "$1"; else bad "$1"; fi
}
still_serving() { req "still serving after: $1" 200 POST /v2/models/mlp/infer -d @"$tmp/good.json"; }

# repository: mlp as a versioned model with config, mlp_bare as DIR/<model>.onnx, resnet50 with a fixed plan
repo=$tmp/repo
mkdir -p "$repo/mlp/1" "$repo/mlp/2" "$repo/resnet50/1"
/usr/bin/python3 "$here/make_models.py" "$tmp" || { echo "cannot make test models"; exit 1; }
cp "$tmp/mlp.onnx" "$repo/mlp/1/model.onnx"
cp "$tmp/mlp.onnx" "$repo/mlp/2/model.onnx"
cp "$tmp/mlp.onnx" "$repo/mlp_bare.onnx"
echo '{"max_batch_size": 4, "max_queue_delay_us": 1000, "queue_capacity": 64}' > "$repo/mlp/config.json"
ln -s "$MODELS/resnet50/model.onnx" "$repo/resnet50/1/model.onnx"
echo '{"max_batch_size": 8, "plan": "1x4,1x4"}' > "$repo/resnet50/config.json"

start_server "$repo" 60 --max-body-mb 8
BASE=$URL
echo "server at $BASE"

req "live" 200 GET /v2/health/live; jcheck "live body" "d['live'] is True"
req "ready" 200 GET /v2/health/ready
req "server metadata" 200 GET /v2; jcheck "extensions" "'binary_tensor_data' in d['extensions'] and d['name']=='packrat'"
req "model metadata" 200 GET /v2/models/mlp
jcheck "model metadata body" "d['versions']==['2'] and d['inputs'][0]=={'name':'x','datatype':'FP32','shape':[-1,4]} and d['outputs'][0]['shape']==[-1,3]"
req "version metadata" 200 GET /v2/models/mlp/versions/2
req "unknown version" 404 GET /v2/models/mlp/versions/7; jcheck "error body" "'error' in d"
req "model ready" 200 GET /v2/models/mlp/ready; jcheck "ready body" "d['ready'] is True"
req "version ready" 200 GET /v2/models/mlp/versions/2/ready
req "bare model" 200 GET /v2/models/mlp_bare/versions/1
req "unknown model" 404 GET /v2/models/nope; jcheck "unknown model error" "'error' in d"

echo '{"id": "req-1", "inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}' > "$tmp/good.json"
expect() { # python expression of y for inputs X (list of rows)
  /usr/bin/python3 -c "
import json, numpy as np
m = json.load(open('$tmp/mlp.json')); W = np.array(m['W'], np.float32); b = np.array(m['b'], np.float32)
X = np.array($1, np.float32); print(json.dumps(np.maximum(X @ W + b, 0).ravel().tolist()))"
}
req "infer JSON batch 1" 200 POST /v2/models/mlp/infer -d @"$tmp/good.json"
want=$(expect "[[1,2,3,4]]")
jcheck "infer result" "d['id']=='req-1' and d['model_name']=='mlp' and d['outputs'][0]['shape']==[1,3] and d['outputs'][0]['datatype']=='FP32' and all(abs(a-b)<1e-5 for a,b in zip(d['outputs'][0]['data'], $want))"
req "infer nested batch 3" 200 POST /v2/models/mlp/versions/2/infer \
  -d '{"inputs": [{"name": "x", "shape": [3, 4], "datatype": "FP32", "data": [[1,0,0,0],[0,1,0,0],[0.5,-1,2,3]]}], "outputs": [{"name": "y"}]}'
want=$(expect "[[1,0,0,0],[0,1,0,0],[0.5,-1,2,3]]")
jcheck "batch 3 result" "d['outputs'][0]['shape']==[3,3] and all(abs(a-b)<1e-5 for a,b in zip(d['outputs'][0]['data'], $want)) and 'id' not in d"
# binary extension, request and response
/usr/bin/python3 - "$tmp" <<'PY'
import json, struct, sys
t = sys.argv[1]
hdr = json.dumps({"inputs": [{"name": "x", "shape": [2, 4], "datatype": "FP32", "parameters": {"binary_data_size": 32}}],
                  "outputs": [{"name": "y", "parameters": {"binary_data": True}}]}).encode()
open(f"{t}/bin.req", "wb").write(hdr + struct.pack("<8f", 1, 2, 3, 4, -1, -2, 0.5, 8))
open(f"{t}/bin.len", "w").write(str(len(hdr)))
PY
code=$(curl -s -D "$tmp/headers" -o "$tmp/bin.out" -w '%{http_code}' -X POST -H "Inference-Header-Content-Length: $(cat "$tmp/bin.len")" \
  -H "Content-Type: application/octet-stream" --data-binary @"$tmp/bin.req" "$BASE/v2/models/mlp/infer")
want=$(expect "[[1,2,3,4],[-1,-2,0.5,8]]")
if [ "$code" = 200 ] && /usr/bin/python3 - "$tmp" "$want" <<'PY'
import json, struct, sys, re
t, want = sys.argv[1], json.loads(sys.argv[2])
h = open(f"{t}/headers").read()
n = int(re.search(r"Inference-Header-Content-Length: (\d+)", h, re.I).group(1))
body = open(f"{t}/bin.out", "rb").read()
meta = json.loads(body[:n]); o = meta["outputs"][0]
assert o["parameters"]["binary_data_size"] == 24 and o["shape"] == [2, 3] and "data" not in o
vals = struct.unpack("<6f", body[n:n + 24]); assert len(body) == n + 24
assert all(abs(a - b) < 1e-5 for a, b in zip(vals, want))
PY
then ok "binary infer"; else bad "binary infer ($code)"; fi

# bad requests: each answered with its status and {"error": ...}, and the server goes on
req "malformed JSON" 400 POST /v2/models/mlp/infer -d '{"inputs": [' ; jcheck "malformed error" "'JSON' in d['error']"; still_serving "malformed JSON"
req "wrong shape" 400 POST /v2/models/mlp/infer -d '{"inputs": [{"name": "x", "shape": [1, 5], "datatype": "FP32", "data": [1,2,3,4,5]}]}'; jcheck "shape error" "'dimension 1' in d['error']"; still_serving "wrong shape"
req "wrong datatype" 400 POST /v2/models/mlp/infer -d '{"inputs": [{"name": "x", "shape": [1, 4], "datatype": "INT64", "data": [1,2,3,4]}]}'; jcheck "datatype error" "'FP32' in d['error']"; still_serving "wrong datatype"
req "missing input" 400 POST /v2/models/mlp/infer -d '{"inputs": [{"name": "z", "shape": [1, 4], "datatype": "FP32", "data": [1,2,3,4]}]}'; still_serving "missing input"
req "too few values" 400 POST /v2/models/mlp/infer -d '{"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1,2,3]}]}'; still_serving "too few values"
req "batch over max" 400 POST /v2/models/mlp/infer -d '{"inputs": [{"name": "x", "shape": [5, 4], "datatype": "FP32", "data": [[0,0,0,0],[0,0,0,0],[0,0,0,0],[0,0,0,0],[0,0,0,0]]}]}'; still_serving "batch over max"
req "bad binary size" 400 POST /v2/models/mlp/infer -H "Inference-Header-Content-Length: 5" -d '{"inp'; still_serving "bad binary size"
req "unknown output" 400 POST /v2/models/mlp/infer -d '{"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1,2,3,4]}], "outputs": [{"name": "nope"}]}'; still_serving "unknown output"
req "infer unknown model" 404 POST /v2/models/nope/infer -d @"$tmp/good.json"
head -c 9000000 /dev/zero > "$tmp/big"
req "body over the limit" 413 POST /v2/models/mlp/infer --data-binary @"$tmp/big"; jcheck "413 body" "'error' in d"; still_serving "body over the limit"
req "wrong method" 405 GET /v2/models/mlp/infer; still_serving "wrong method"

# statistics, plan, metrics
req "stats" 200 GET /v2/models/mlp/stats; jcheck "stats body" "(lambda s: s['inference_stats']['success']['count']>=10 and s['execution_count']>=1 and s['inference_stats']['compute_infer']['ns']>0 and s['packrat']['compute_time_ms_total']>0)(d['model_stats'][0])"
req "plan" 200 GET /v2/models/mlp/plan; jcheck "plan body" "sum(i['batch'] for i in d['instances'])==d['batch'] and d['batch'] in (1, 2, 4) and all(len(i['cores'])==i['threads'] for i in d['instances'])" # the autoscaler may have left batch 4 on a slow machine
req "metrics" 200 GET /metrics
# the instances share one copy of the weights in the kernels' layouts
wbytes=$(sed -n 's/^packrat_model_shared_weight_bytes{model="mlp",version="2"} //p' "$tmp/body")
if [ -n "$wbytes" ] && [ "$wbytes" -gt 0 ]; then ok "shared weight bytes $wbytes"; else bad "shared weight bytes: '$wbytes'"; fi
if grep -q 'packrat_requests_total{model="mlp",version="2",outcome="success"}' "$tmp/body" && grep -q packrat_batch_size_bucket "$tmp/body" && grep -q packrat_plan_instances "$tmp/body"; then ok "metrics content"; else bad "metrics content"; fi
if command -v promtool >/dev/null; then
  if promtool check metrics < "$tmp/body" >/dev/null 2>&1; then ok "promtool check metrics"; else bad "promtool check metrics"; promtool check metrics < "$tmp/body"; fi
else bad "promtool not installed"; fi

# plans: prepared per batch size, pinned by hand, handed back to the autoscaler
req "plan prepared" 200 GET /v2/models/mlp/plan; jcheck "prepared plans" "sorted(p['batch'] for p in d['prepared'])==[1,2,4] and d['autoscale'] is True"
req "set plan by hand" 200 POST /v2/models/mlp/plan -d '{"plan": "1x1"}'; jcheck "plan pinned" "d['autoscale'] is False and d['instances'][0]['batch']==1 and d['batch']==1"
still_serving "set plan"
req "bad plan" 400 POST /v2/models/mlp/plan -d '{"plan": "1x"}'; jcheck "bad plan error" "'THREADSxBATCH' in d['error']"
req "plan over max batch" 400 POST /v2/models/mlp/plan -d '{"plan": "1x9"}'
req "plan body not JSON" 400 POST /v2/models/mlp/plan -d 'plan'
req "back to auto" 200 POST /v2/models/mlp/plan -d '{"plan": "auto"}'; jcheck "auto again" "d['autoscale'] is True"
still_serving "plan changes"
curl -s "$BASE/metrics" > "$tmp/body"
if grep -q 'packrat_reconfigurations_total{model="mlp",version="2"} [1-9]' "$tmp/body"; then ok "reconfiguration counted"; else bad "reconfiguration counted"; fi

# repository extension
req "repository index" 200 POST /v2/repository/index; jcheck "index body" "{m['name'] for m in d}=={'mlp','mlp_bare','resnet50'} and all(m['state']=='READY' for m in d)"
req "unload" 200 POST /v2/repository/models/mlp_bare/unload
req "unloaded not ready" 503 GET /v2/models/mlp_bare/ready
req "infer unloaded" 503 POST /v2/models/mlp_bare/infer -d @"$tmp/good.json"
req "load" 200 POST /v2/repository/models/mlp_bare/load
req "infer reloaded" 200 POST /v2/models/mlp_bare/infer -d @"$tmp/good.json"
req "load unknown" 404 POST /v2/repository/models/nope/load

# a real exported model: ResNet-50, batch 8 in binary, against PyTorch's output
/usr/bin/python3 - "$tmp" "$MODELS/resnet50/test_data_set_1" <<'PY'
import json, sys
import onnx
from onnx import numpy_helper
t, d = sys.argv[1], sys.argv[2]
x = numpy_helper.to_array(onnx.load_tensor(f"{d}/input_0.pb"))
hdr = json.dumps({"inputs": [{"name": "input", "shape": list(x.shape), "datatype": "FP32",
                              "parameters": {"binary_data_size": x.nbytes}}],
                  "parameters": {"binary_data_output": True}}).encode()
open(f"{t}/r50.req", "wb").write(hdr + x.tobytes())
open(f"{t}/r50.len", "w").write(str(len(hdr)))
PY
code=$(curl -s -D "$tmp/headers" -o "$tmp/r50.out" -w '%{http_code}' -X POST -H "Inference-Header-Content-Length: $(cat "$tmp/r50.len")" \
  --data-binary @"$tmp/r50.req" "$BASE/v2/models/resnet50/infer")
if [ "$code" = 200 ] && /usr/bin/python3 - "$tmp" "$MODELS/resnet50/test_data_set_1" <<'PY'
import json, re, sys
import numpy as np, onnx
from onnx import numpy_helper
t, d = sys.argv[1], sys.argv[2]
n = int(re.search(r"Inference-Header-Content-Length: (\d+)", open(f"{t}/headers").read(), re.I).group(1))
body = open(f"{t}/r50.out", "rb").read()
y = np.frombuffer(body[n:], np.float32).reshape(8, 1000)
ref = numpy_helper.to_array(onnx.load_tensor(f"{d}/output_0.pb"))
assert np.abs(y - ref).max() <= 1e-4 * np.abs(ref).max()
PY
then ok "resnet50 batch 8 matches PyTorch"; else bad "resnet50 batch 8 ($code)"; fi

# graceful stop: requests in flight when SIGTERM arrives are all answered
for i in 1 2 3; do
  curl -s -o "$tmp/inflight$i" -w '%{http_code}' -X POST -H "Inference-Header-Content-Length: $(cat "$tmp/r50.len")" \
    --data-binary @"$tmp/r50.req" "$BASE/v2/models/resnet50/infer" > "$tmp/inflight$i.code" &
done
sleep 0.3
kill -TERM "$srv"
wait "$srv"; rc=$?
srv=
wait
codes=$(for f in "$tmp"/inflight*.code; do printf "%s " "$(cat "$f")"; done)
if [ "$rc" = 0 ] && [ "$codes" = "200 200 200 " ]; then ok "SIGTERM answers in-flight requests and exits 0"; else bad "SIGTERM: exit $rc, in-flight codes $codes"; fi

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
