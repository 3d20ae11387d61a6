#!/usr/bin/env bash
# The main job on a fresh machine: install dependencies, build, export the
# default model (ResNet-50), and serve it auto-configured: profiled on this
# machine's cores (cached), planned, on pinned instances. Ctrl-C stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
# configure quietly, but a failing configure shows why; packrat alone is
# built (the tests need what only scripts/install-deps.sh --test installs)
log=$(mktemp)
if ! cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$log" 2>&1; then
  cat "$log" >&2
  rm -f "$log"
  echo "run-main.sh: configuring the build failed (above)" >&2
  exit 1
fi
rm -f "$log"
cmake --build build --target packrat -j "$(nproc)"
export PACKRAT_MODELS=${PACKRAT_MODELS:-$PWD/models}
/usr/bin/python3 tools/export_models.py --out "$PACKRAT_MODELS" --models resnet50
repo=$PACKRAT_MODELS/repository
mkdir -p "$repo/resnet50/1"
ln -sf "$PACKRAT_MODELS/resnet50/model.onnx" "$repo/resnet50/1/model.onnx"
[ -f "$repo/resnet50/config.json" ] || echo '{"max_batch_size": 8, "max_queue_delay_us": 5000}' > "$repo/resnet50/config.json"
echo "serving $repo; try: build/packrat bench --url http://127.0.0.1:8000 --model resnet50 --concurrency 4"
exec ./build/packrat serve --model-repository "$repo" "$@"
