#!/usr/bin/env bash
# bench/manycore.sh --quick (the many-core kit in CI): finishes inside its
# budget and writes manycore.json and manycore.md with fat, plan and oracle
# measured for every batch 1..4, the plan never slower than the oracle's
# best by construction checked against the sampled plans, and the server's
# open-loop phases; without torch it refuses with a clear message.
# usage: manycore.sh PACKRAT
set -u
PACKRAT=$(realpath "$1")
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
KIT=$HERE/../../bench/manycore.sh
start=$(date +%s)
PATH=/usr/bin:$PATH "$KIT" "$tmp/kit" --quick --packrat "$PACKRAT" >"$tmp/kit.out" 2>&1
rc=$?
took=$(($(date +%s) - start))
tail -30 "$tmp/kit.out"
check_cmd "the quick kit exits 0" test "$rc" = 0
check_cmd "the quick kit takes under 60 s ($took s)" test "$took" -lt 60
check_cmd "manycore.md holds the table" grep -q "| small_cnn | 4 |" "$tmp/kit/manycore.md"
check_cmd "manycore.json: batches 1..4, each with fat, plan and oracle side by side" /usr/bin/python3 -c "
import json; d = json.load(open('$tmp/kit/manycore.json'))
assert d['cores'] >= 1 and d['export_s'] > 0, d
row = d['models'][0]
assert row['model'] == 'small_cnn' and row['profile_points'] == d['cores'] * len(row['grid']), row
assert sorted(r['batch'] for r in row['batches']) == [1, 2, 3, 4], row['batches']
for r in row['batches']:
    s = r['sampled']
    assert r['plan'] in s and s[r['plan']] == r['plan_ms'] and r['fat_ms'] in s.values(), r
    assert r['oracle_ms'] == min(s.values()) and r['plan_over_oracle'] >= 1, r
    assert sorted(row['plans']) == ['1', '2', '3', '4'] and row['plans'][str(r['batch'])]['plan'] == r['plan'], row
srv = row['serve']
assert 'error' not in srv and len(srv['phases']) == 3 and all(p['requests'] > 0 for p in srv['phases']), srv
"
# a python3 without torch first on PATH: a clear refusal, nothing run
mkdir -p "$tmp/bin"
printf '#!/bin/sh\nexec /usr/bin/python3 -I -S "$@"\n' >"$tmp/bin/python3"
chmod +x "$tmp/bin/python3"
/usr/bin/python3 -I -S -c "import torch" 2>/dev/null && echo "note: /usr/bin/python3 -I -S still finds torch"
EXPECT_MESSAGE=1 PATH=$tmp/bin:/usr/bin:/bin expect_status "without torch: status 2" 2 "$KIT" "$tmp/out2" --quick --packrat "$PACKRAT"
check_cmd "without torch: says what is missing and how to get it" grep -q "lacks torch.*pip install torch" "$tmp/err"
check_cmd "without torch: nothing written" test ! -e "$tmp/out2"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
