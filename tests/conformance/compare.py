#!/usr/bin/python3
"""Compares the packrat conformance runner's results with ONNX Runtime's.

usage: compare.py NODE_TEST_DIR ORT.json PACKRAT.json PASSING.txt [--misses FILE] [--update]

Training tests (models importing ai.onnx.preview.training) are left out of
every count. Prints how many node tests ONNX Runtime passes and how many of
those packrat passes. Fails when a test listed in PASSING.txt (one name a
line) no longer passes; names tests that pass now but are not listed
(--update rewrites the list). --misses writes, for each test ONNX Runtime
passes and packrat does not, packrat's reason.
"""
import argparse
import json
import os
import sys

import onnx


def is_training(model_path):
    model = onnx.load(model_path, load_external_data=False)
    return any(o.domain == "ai.onnx.preview.training" for o in model.opset_import)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("node_dir")
    ap.add_argument("ort_json")
    ap.add_argument("packrat_json")
    ap.add_argument("passing")
    ap.add_argument("--misses")
    ap.add_argument("--update", action="store_true")
    a = ap.parse_args()
    with open(a.ort_json) as f:
        ort = json.load(f)
    with open(a.packrat_json) as f:
        pr = json.load(f)
    names = sorted(n for n in ort if not is_training(os.path.join(a.node_dir, n, "model.onnx")))
    ort_pass = [n for n in names if ort[n]["pass"]]
    pr_pass = {n for n in names if pr.get(n, {}).get("pass")}
    both = [n for n in ort_pass if n in pr_pass]
    share = 100.0 * len(both) / max(1, len(ort_pass))
    print(f"node tests (training left out): {len(names)}")
    print(f"ONNX Runtime passes {len(ort_pass)}; packrat passes {len(pr_pass)}, "
          f"{len(both)} of ONNX Runtime's ({share:.1f}%)")
    if a.misses:
        with open(a.misses, "w") as f:
            for n in ort_pass:
                if n not in pr_pass:
                    why = pr.get(n, {}).get("why", "not run")
                    f.write(f"{n}\t{why}\n")
        print(f"misses with reasons: {a.misses}")
    if a.update:
        with open(a.passing, "w") as f:
            f.write("".join(n + "\n" for n in sorted(pr_pass)))
        print(f"{a.passing}: {len(pr_pass)} tests")
        return 0
    with open(a.passing) as f:
        listed = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    lost = [n for n in listed if n not in pr_pass]
    new = sorted(pr_pass - set(listed))
    for n in lost:
        print(f"REGRESSION {n}: {pr.get(n, {}).get('why', 'not run')}")
    if new:
        print(f"{len(new)} tests pass that {os.path.basename(a.passing)} does not list "
              f"(rerun with --update): {' '.join(new[:20])}{' ...' if len(new) > 20 else ''}")
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
