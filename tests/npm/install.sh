#!/usr/bin/env bash
# Installs the npm test peers (tests/npm/package.json: ONNX Runtime, a
# protobuf decoder, real models exported by other tools) into DEST/node_modules
# from the lock file, without install scripts. usage: install.sh DEST
set -euo pipefail
src=$(cd "$(dirname "$0")" && pwd)
dest=$1
mkdir -p "$dest"
if ! cmp -s "$src/package-lock.json" "$dest/package-lock.json" || [ ! -d "$dest/node_modules" ]; then
  cp "$src/package.json" "$src/package-lock.json" "$dest/"
  (cd "$dest" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
fi
test -f "$dest/node_modules/onnxruntime-node/package.json"
