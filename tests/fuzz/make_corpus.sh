#!/usr/bin/env bash
# Writes the seed corpus of every fuzz target into OUT/<target>/ (loader: the
# ONNX node-test models under 4 KiB, tests/fuzz/seeds.py's transformer
# block and tests/fuzz/deep_seeds.py's deeply nested files; infer, config: tests/fuzz/server_seeds.py; grpc_infer:
# tests/fuzz/grpc_seeds.py; randgraph: seeded random
# byte strings, each of them a graph). Seeds are made here,
# never committed. --ctest: start from an empty OUT, and give the loader only
# every 8th node-test model so that its seeds run well inside CTest's 30 s.
# usage: tests/fuzz/make_corpus.sh [--ctest] OUT
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
step=1
if [ "${1:-}" = --ctest ]; then
  step=8
  shift
  rm -rf "$1"
fi
out=$1
mkdir -p "$out/loader"
i=0
for d in /usr/share/libonnx-testdata/data/node/*/; do
  f=$d/model.onnx
  [ -f "$f" ] && [ "$(stat -c %s "$f")" -lt 4096 ] || continue
  if [ $((i++ % step)) = 0 ]; then cp "$f" "$out/loader/$(basename "$d").onnx"; fi
done
/usr/bin/python3 "$here/seeds.py" "$out/loader"
/usr/bin/python3 "$here/deep_seeds.py" "$out/loader"
/usr/bin/python3 "$here/server_seeds.py" "$out"
/usr/bin/python3 "$here/grpc_seeds.py" "$out/grpc_infer"
mkdir -p "$out/randgraph"
/usr/bin/python3 - "$out/randgraph" <<'EOF'
import random, sys
r = random.Random(1)
for i in range(32):
    with open(f"{sys.argv[1]}/seed{i:02d}", "wb") as f:
        f.write(bytes(r.getrandbits(8) for _ in range(256)))
EOF
