"""ONNX Runtime beside packrat in the many-core kit (bench/manycore.py): the
median latency of MODEL at each batch on T intra-op threads (one session,
sequential execution), 1 warm-up and 5 timed runs. Prints one JSON object
{batch: ms}; {} when onnxruntime is not installed.
usage: manycore_ort.py MODEL.onnx T B1,B2,... [--sequence N]"""
import json
import statistics
import sys
import time

try:
    import numpy as np
    import onnxruntime as ort
except ImportError:
    print("{}")
    sys.exit(0)

path, T, batches = sys.argv[1], int(sys.argv[2]), [int(b) for b in sys.argv[3].split(",")]
seq = int(sys.argv[sys.argv.index("--sequence") + 1]) if "--sequence" in sys.argv else None
so = ort.SessionOptions()
so.intra_op_num_threads = T
so.inter_op_num_threads = 1
so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
inp = s.get_inputs()[0]
rng = np.random.default_rng(0)
out = {}
for b in batches:
    shape = [b] + [d if isinstance(d, int) else seq for d in inp.shape[1:]]
    if "int64" in inp.type:
        x = rng.integers(0, 1000, shape, dtype=np.int64)
    else:
        x = rng.standard_normal(shape, dtype=np.float32)
    s.run(None, {inp.name: x})
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        s.run(None, {inp.name: x})
        times.append((time.perf_counter() - t0) * 1e3)
    out[b] = statistics.median(times)
print(json.dumps(out))
