#!/usr/bin/env bash
# Overload: ResNet-50 served by 2 single-thread instances (about 26 requests/s
# here) under an open-loop load of about 4x that. The server must answer 503
# to what it cannot queue, serve the rest, keep its memory flat, and recover
# once the load stops. usage: overload.sh PACKRAT MODELS_DIR
set -u
PACKRAT=$1
MODELS=$(cd "$2" && pwd)
. "$(dirname "$0")/lib.sh"
mkdir -p "$tmp/repo/resnet50/1"
ln -s "$MODELS/resnet50/model.onnx" "$tmp/repo/resnet50/1/model.onnx"
echo '{"max_batch_size": 1, "plan": "1x1,1x1", "queue_capacity": 8, "max_queue_delay_us": 0}' > "$tmp/repo/resnet50/config.json"
start_server "$tmp/repo"
rss() { awk '/VmRSS/ {print $2}' "/proc/$srv/status"; }
"$PACKRAT" bench --url "$URL" --model resnet50 --concurrency 1 --duration 2 >/dev/null # warm
rss0=$(rss)
"$PACKRAT" bench --url "$URL" --model resnet50 --rate 100 --duration 8 --json > "$tmp/load.out"
rss1=$(rss)
tail -1 "$tmp/load.out" > "$tmp/load.json"
cat "$tmp/load.out" | head -3
echo "server RSS before $rss0 kB, after $rss1 kB"
check "some requests rejected with 503" "/usr/bin/python3 -c \"import json; d=json.load(open('$tmp/load.json')); exit(0 if d['status_counts']['5xx']>0 else 1)\""
check "the rest served" "/usr/bin/python3 -c \"import json; d=json.load(open('$tmp/load.json')); exit(0 if d['requests']-d['errors']>=50 else 1)\""
check "no transport errors or 4xx" "/usr/bin/python3 -c \"import json; d=json.load(open('$tmp/load.json')); c=d['status_counts']; exit(0 if c['transport']==0 and c['4xx']==0 else 1)\""
check "memory flat (within 25%)" "[ \$((rss1 * 100)) -le \$((rss0 * 125)) ]"
sleep 1
"$PACKRAT" bench --url "$URL" --model resnet50 --concurrency 1 --duration 2 --json > "$tmp/after.out"
check "recovers after the load" "/usr/bin/python3 -c \"import json; d=json.loads(open('$tmp/after.out').read().splitlines()[-1]); exit(0 if d['errors']==0 and d['requests']>=5 and d['p99_ms']<1000 else 1)\""
check "still alive" "kill -0 $srv"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
