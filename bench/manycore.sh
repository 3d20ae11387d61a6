#!/bin/sh
# The many-core kit: the Packrat effect measured on this machine's cores in
# a hard time budget (default 9 minutes), results in OUT (manycore.json,
# manycore.md). Needs a python3 with PyTorch, torchvision, onnx and numpy
# (onnxruntime optional: the engine comparison); it takes python3 from
# PATH, or $PYTHON. packrat: the bundle (scripts/bundle.sh bundle) where
# there is one, else build/packrat, else --packrat PATH.
# usage: bench/manycore.sh OUT [--quick] [--budget S] [--packrat P] ... (--help: all)
here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON:-python3}
if ! command -v "$py" >/dev/null 2>&1; then
  echo "manycore.sh: no $py on PATH: install Python 3 with PyTorch, or set PYTHON=/path/to/python3" >&2
  exit 2
fi
if ! missing=$("$py" -c '
import importlib.util, sys
print(" ".join(m for m in ("torch", "torchvision", "onnx", "numpy") if importlib.util.find_spec(m) is None))
sys.exit(0)'); then
  echo "manycore.sh: $py does not run" >&2
  exit 2
fi
if [ -n "$missing" ]; then
  echo "manycore.sh: $(command -v "$py") lacks $missing: the kit exports its models with PyTorch" \
    "(pip install torch torchvision onnx numpy, or on Debian apt-get install python3-torch" \
    "python3-torchvision python3-onnx), or set PYTHON to a python3 that has them" >&2
  exit 2
fi
exec "$py" -B "$here/manycore.py" "$@"
