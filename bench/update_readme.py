#!/usr/bin/python3
"""Copies the tables written by the bench scripts (bench/results/*.md) into
docs/benchmarks.md between the <!-- results --> markers, in a fixed order."""
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.path.join(ROOT, "docs", "benchmarks.md")
SECTIONS = [
    ("engine_peers.md", "### Engine: packrat vs ONNX Runtime vs PyTorch (CNNs)"),
    ("engine_peers_transformers.md", "### Engine: transformers (BERT-base, GPT-2 small; sequence 128)"),
    ("engine_avx2.md", "### Engine on AVX2: the capped proxy (packrat held to AVX2) against ONNX Runtime on an AVX2 machine"),
    ("engine_avx2_transformers.md", "### Engine on AVX2, transformers: the capped proxy"),
    ("scaling_avx2.md", "### Batch 1 on two threads: each operator's scaling (AVX2 cap)"),
    ("plans.md", "### Plans: fat instance vs packrat's plan vs the oracle"),
    ("manycore_2core.md", "### The many-core kit on 2 cores (bench/manycore.sh, the bundle in a bare root)"),
    ("optimizer.md", "### Optimizer: packrat's exact solver vs the paper's DP"),
    ("joint.md", "### Many models: sharing every core vs the best static split vs the joint plan"),
    ("serve.md", "### Server: overhead, and the fat instance vs packrat's plan under load"),
    ("adaptive.md", "### Online reconfiguration: adaptive vs static plans (ResNet-50)"),
    ("adaptive_bert.md", "### Online reconfiguration: adaptive vs static plans (BERT-base)"),
    ("adaptive_bursty.md", "### Online reconfiguration under bursts: each static plan's capacity, adaptive vs the best"),
    ("adaptive_bursty_aa.md", "### The bursty bench's resolution: the best static plan against a second copy of itself"),
    ("real_peers.md", "### Engine: models other tools exported, packrat vs ONNX Runtime"),
    ("quant_peers.md", "### int8: packrat vs ONNX Runtime on the same QDQ model, and vs packrat float32"),
    ("quant_avx2.md", "### int8 on AVX2 without VNNI (the capped proxy): 7-bit weights, packrat int8 vs float32"),
    ("bf16.md", "### bf16: packrat bf16 vs float32"),
    ("shapes.md", "### Serving many shapes: mixed lengths vs padded, a new shape's compile time, the full range"),
    ("carve_before_after.md", "### Refactor check: before and after the carve-up (engine and plans)"),
    ("session5_before_after.md", "### Regression check: the paper models before and after session 5 (engine and plans)"),
    ("sessions6_7_before_after.md",
     "### Regression check: the paper models before and after sessions 6 and 7 (dynamic shapes, quantization, "
     "protocols; engine and plans)"),
    ("issue31_before_after.md",
     "### Regression check: before and after the sched layer, the plan policy and the internal names (engine and plans)"),
]


def main():
    parts = []
    for name, title in SECTIONS:
        path = os.path.join(ROOT, "bench", "results", name)
        if os.path.exists(path):
            parts.append(f"{title}\n\n{open(path).read().strip()}\n")
    readme = open(TARGET).read()
    start, end = "<!-- results -->", "<!-- /results -->"
    i, j = readme.index(start), readme.index(end)
    readme = readme[:i + len(start)] + "\n" + "\n".join(parts) + readme[j:]
    open(TARGET, "w").write(readme)


if __name__ == "__main__":
    main()
