#!/usr/bin/python3
"""PyTorch timing (Debian python3-torch): the torchvision model rebuilt with
the export's seed, TorchScript traced, frozen and optimized for inference.
usage: torch_run.py MODEL_NAME INPUT.npy THREADS REPEAT  -> one JSON line"""
import json
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import export_models  # noqa: E402


def main():
    name, inp, threads, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    torch.set_num_threads(threads)
    model, _ = export_models.MODELS[name](name)
    model.eval()
    x = torch.from_numpy(np.load(inp))
    with torch.no_grad():
        traced = torch.jit.trace(model, x)
        frozen = torch.jit.optimize_for_inference(torch.jit.freeze(traced))
        for _ in range(2):
            frozen(x)
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            frozen(x)
            times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    n = len(times)
    median = times[n // 2] if n % 2 else 0.5 * (times[n // 2 - 1] + times[n // 2])
    print(json.dumps({"median_ms": median, "min_ms": times[0]}))


if __name__ == "__main__":
    main()
