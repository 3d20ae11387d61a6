#!/usr/bin/env bash
# Online reconfiguration on a real model: ResNet-50 served with plans prepared
# for batches 1, 2 and 4, pinned to batch 1's plan and handed back to the
# autoscaler, under an open-loop load that rises then falls. The plan must go
# up under the rise (where the profile says a larger batch serves more;
# elsewhere hold), and come back down after it where batch 1's plan runs
# other instances than the plan it went up to (on the same instances a light
# load runs alike whatever the batch, and the autoscaler moves down only to a
# batch that serves within 5% as much); no request may fail or be lost, and
# every response must equal the model's output for its input. The autoscaler
# never lowers capacity while a backlog is queued, so the plan comes down
# only once the burst's backlog has drained (on a slow machine, after the
# load ended: the test waits for it).
# usage: reconfigure.sh PACKRAT MODELS_DIR
set -u
PACKRAT=$1
MODELS=$(cd "$2" && pwd)
. "$(dirname "$0")/lib.sh"
export PACKRAT_CACHE=$tmp/cache
mkdir -p "$tmp/repo/resnet50/1"
ln -s "$MODELS/resnet50/model.onnx" "$tmp/repo/resnet50/1/model.onnx"
echo '{"max_batch_size": 4, "queue_capacity": 1024, "request_timeout_ms": 300000, "estimator": "rate", "max_queue_delay_us": 2000}' \
  > "$tmp/repo/resnet50/config.json"
start_server "$tmp/repo" 180 # profiling ResNet-50 first
grep "plans prepared" "$tmp/log"
curl -sf "$URL/v2/models/resnet50/plan" > "$tmp/plan.json"
one=$(/usr/bin/python3 -c "import json; print([p['plan'] for p in json.load(open('$tmp/plan.json'))['prepared'] if p['batch'] == 1][0])")
check "batch 1's plan pinned" "curl -sf -d '{\"plan\": \"$one\"}' '$URL/v2/models/resnet50/plan' > /dev/null"
check "handed back to the autoscaler" "curl -sf -d '{\"plan\": \"auto\"}' '$URL/v2/models/resnet50/plan' > /dev/null"
D=$MODELS/resnet50/test_data_set_0
"$PACKRAT" bench --url "$URL" --model resnet50 --input "$D/input_0.pb" --expect "$D/output_0.pb" \
  --schedule 3:6,45:10,3:16 --json > "$tmp/out"
sed -n '1,5p' "$tmp/out"
tail -1 "$tmp/out" > "$tmp/res.json"
grep reconfigured "$tmp/log"
J() { /usr/bin/python3 -c "import json; d=json.load(open('$tmp/res.json')); exit(0 if ($1) else 1)"; }
check "every request answered, none failed" "J \"d['errors']==0 and d['requests']>=150 and d['status_counts']['2xx']==d['requests']\""
check "every response matches the model's output" "J \"d['mismatches']==0\""
# the autoscaler's switches (from the log): A -> B, each plan's batch and instances
moves() {
  /usr/bin/python3 - "$tmp/log" "$1" <<'PY'
import re, sys
def batch(p): return sum(int(i.split('x')[1]) for i in p.split(','))
def inst(p): return [i.split('x')[0] for i in p.split(',')]
ms = re.findall(r'reconfigured (\S+) -> (\S+) \(autoscaler', open(sys.argv[1]).read())
up = [m for m in ms if batch(m[1]) > batch(m[0])]
down = [m for m in ms if batch(m[1]) < batch(m[0])]
top = max(up, key=lambda m: batch(m[1]))[1] if up else None
last = ms[-1][1] if ms else None
# down: the last plan serves a smaller batch than the highest it rose to, or
# runs the instances of the plan it rose from
ok = {'up': len(up) >= 1,
      'down_when_other': top is None or inst(top) == inst(up[0][0]) or batch(last) < batch(top)
      or inst(last) == inst(up[0][0])}[sys.argv[2]]
sys.exit(0 if ok else 1)
PY
}
# the rise must raise the plan where a larger batch's plan serves more than
# batch 1's. Until a plan has run, the autoscaler rates it by the profile
# scaled by the live plan's measured / predicted (load_latencies): the
# prepared plans' predicted latencies order them as it does. Where every
# larger batch serves 5% less or worse (PR_EST_GAIN; seen: ResNet-50 on a
# 2-core Xeon, 0.99x; here 0.93x to 1.06x from one profile to the next), it
# must hold batch 1's plan; in the band between, an overload may take the
# largest batch within 5% of the most (estimator.c), so either is right.
gain=$(/usr/bin/python3 -c "
import json
p = {q['batch']: q['batch'] / q['predicted_latency_ms'] for q in json.load(open('$tmp/plan.json'))['prepared']}
print('%.3f' % (max(v for b, v in p.items() if b > 1) / p[1]))")
echo "the profile's gain of batching: ${gain}x batch 1's requests/s"
if /usr/bin/python3 -c "exit(0 if $gain > 1.0 else 1)"; then
  check "the plan went up under the rise" "moves up"
elif /usr/bin/python3 -c "exit(0 if $gain * 1.05 < 1.0 else 1)"; then
  check "the plan held under the rise (no larger batch serves more here)" "! moves up"
else
  echo "a larger batch serves within 5% of batch 1 here: up or held are both the design"
fi
check "each switch logged with the model's name" \
  "[ \$(grep -c 'reconfigured' '$tmp/log') = \$(grep -c 'model resnet50 v1: reconfigured' '$tmp/log') ]"
# a slower machine drains the burst's backlog later than the last phase ends:
# the autoscaler samples the queue without traffic too, so wait for it (60 s)
for _ in $(seq 60); do moves down_when_other && break; sleep 1; done
grep reconfigured "$tmp/log" | tail -n +3
check "the plan came down after it, where its instances differ" "moves down_when_other"
curl -s "$URL/metrics" | grep -E '^packrat_reconfigurations_total|^packrat_reconfiguration_duration_seconds_(sum|count)'
check "switches take under 50 ms" "[ \$(grep -o 'in [0-9.]* ms' '$tmp/log' | awk '{ if (\$2 >= 50) bad=1 } END { print bad+0 }') = 0 ]"
# the busy-polling client (bench/serve.py's): same answers, refused off a REST closed loop
"$PACKRAT" bench --url "$URL" --model resnet50 --input "$D/input_0.pb" --expect "$D/output_0.pb" \
  --concurrency 1 --busy-poll --duration 2 --json > "$tmp/poll.out"
tail -1 "$tmp/poll.out" > "$tmp/res.json"
check "a busy-polling closed loop: every request answered and matching" \
  "J \"d['errors']==0 and d['requests']>=5 and d['mismatches']==0\""
check "--busy-poll refused with an open loop" \
  "! '$PACKRAT' bench --url '$URL' --model resnet50 --rate 5 --busy-poll 2>/dev/null"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
