#!/usr/bin/env bash
# The main job on a fresh machine: install dependencies, build, export the
# default model (ResNet-50) and run it, auto-configured for this machine.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)"
export PACKRAT_MODELS=${PACKRAT_MODELS:-$PWD/models}
/usr/bin/python3 tools/export_models.py --out "$PACKRAT_MODELS" --models resnet50
exec ./build/packrat run "$PACKRAT_MODELS/resnet50/model.onnx" --threads "$(nproc)" --repeat 20 "$@"
