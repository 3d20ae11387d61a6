"""Helpers shared by the bench scripts."""
import datetime
import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_json(cmd, env=None):
    """Runs cmd (in env, or this environment); returns the JSON object on the last line of its stdout."""
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {r.stderr.strip()[-500:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def cpu_name():
    """The CPU's model name and its widest vector ISA (AVX-512 or AVX2)."""
    name, isa = "unknown CPU", "no AVX2"
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name") and name == "unknown CPU":
            name = line.split(":", 1)[1].strip()
        if line.startswith("flags"):
            flags = line.split()
            isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else isa
    return f"{name} ({isa})"


def utc_stamp():
    return datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC")


def add_paths(ap):
    """The options every bench script takes: --build, --models-dir, --out."""
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--models-dir", default=os.environ.get("PACKRAT_MODELS", os.path.join(ROOT, "models")))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))


def write_results(out, name, stamp, machine, rows, lines):
    """Writes out/NAME.json (date, machine, rows) and out/NAME.md (lines), and prints the table."""
    with open(os.path.join(out, f"{name}.json"), "w") as f:
        json.dump({"date": stamp, "machine": machine, "rows": rows}, f, indent=1)
    with open(os.path.join(out, f"{name}.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


# The benchmarked models' inputs past the batch axis (transformers: sequence
# 128 token ids of their vocabulary).
SHAPES = {"resnet50": (3, 224, 224), "inception_v3": (3, 299, 299), "ocr_rec": (3, 48, 320), "bert": (128,),
          "gpt2": (128,), "bert_opset17": (128,), "gpt2_opset17": (128,)}
VOCAB = {"bert": 30522, "gpt2": 50257, "bert_opset17": 30522, "gpt2_opset17": 50257}


def sample_input(model, rows, seed):
    """A seeded input of `rows` rows for a model of SHAPES."""
    import numpy as np
    rng = np.random.default_rng(seed)
    if model in VOCAB:
        return rng.integers(0, VOCAB[model], (rows, *SHAPES[model]), dtype=np.int64)
    return rng.standard_normal((rows, *SHAPES[model]), dtype=np.float32)
