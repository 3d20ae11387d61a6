#!/usr/bin/env bash
# Online reconfiguration on a real model: ResNet-50 served with plans prepared
# for batches 1, 2 and 4, under an open-loop load that rises then falls. The
# plan must change at least twice, no request may fail or be lost, and every
# response must equal the model's output for its input. The first phase is
# long enough for the autoscaler to come down to batch 1 although a window
# whose queue grows or waits holds it (a held move is made at the first
# window that does not hold it): it never lowers capacity while a backlog is
# queued, so the last phase comes down only once the burst's backlog has
# drained.
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
D=$MODELS/resnet50/test_data_set_0
"$PACKRAT" bench --url "$URL" --model resnet50 --input "$D/input_0.pb" --expect "$D/output_0.pb" \
  --schedule 3:12,45:10,3:16 --json > "$tmp/out"
sed -n '1,5p' "$tmp/out"
tail -1 "$tmp/out" > "$tmp/res.json"
grep reconfigured "$tmp/log"
J() { /usr/bin/python3 -c "import json; d=json.load(open('$tmp/res.json')); exit(0 if ($1) else 1)"; }
check "every request answered, none failed" "J \"d['errors']==0 and d['requests']>=200 and d['status_counts']['2xx']==d['requests']\""
check "every response matches the model's output" "J \"d['mismatches']==0\""
check "the plan changed at least twice" "J \"d['reconfigurations']>=2\""
check "switches logged" "[ \$(grep -c reconfigured '$tmp/log') -ge 2 ]"
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
