#!/usr/bin/python3
"""Export the models packrat is measured on, with reference data.

Each model goes to OUT/<name>/model.onnx (opset 13, dynamic batch axis,
random weights from a fixed seed) with PyTorch's own outputs in the ONNX
test-data layout: test_data_set_K/input_0.pb and output_0.pb, one data set
per batch size in BATCHES. Runs with Debian's python3-torch and
python3-torchvision (/usr/bin/python3). A model whose files are already there
and were made by this same script version is left alone.

usage: tools/export_models.py [--out DIR] [--models resnet50,inception_v3]
"""
import argparse
import hashlib
import os
import sys

import numpy as np
import torch
import torchvision
from onnx import numpy_helper

BATCHES = [1, 8]
SEED = 0


def cnn(name):
    torch.manual_seed(SEED)
    if name == "resnet50":
        return torchvision.models.resnet50(weights=None), (3, 224, 224)
    if name == "inception_v3":
        m = torchvision.models.inception_v3(weights=None, aux_logits=False, init_weights=True)
        return m, (3, 299, 299)
    raise KeyError(name)


MODELS = {"resnet50": cnn, "inception_v3": cnn}


def script_stamp():
    with open(__file__, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16] + " torch " + torch.__version__


def write_pb(path, array, name):
    t = numpy_helper.from_array(np.ascontiguousarray(array), name)
    with open(path, "wb") as f:
        f.write(t.SerializeToString())


def export(name, out_dir):
    d = os.path.join(out_dir, name)
    stamp_path = os.path.join(d, "STAMP")
    stamp = script_stamp()
    if os.path.exists(stamp_path) and open(stamp_path).read() == stamp:
        print(f"{name}: up to date in {d}")
        return
    os.makedirs(d, exist_ok=True)
    model, shape = MODELS[name](name)
    model.eval()
    torch.manual_seed(SEED + 1)
    example = torch.randn(1, *shape)
    path = os.path.join(d, "model.onnx")
    with torch.no_grad():
        torch.onnx.export(model, example, path, opset_version=13, input_names=["input"],
                          output_names=["output"],
                          dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}},
                          do_constant_folding=True)
    for k, b in enumerate(BATCHES):
        sd = os.path.join(d, f"test_data_set_{k}")
        os.makedirs(sd, exist_ok=True)
        g = torch.Generator().manual_seed(SEED + 100 + b)
        x = torch.randn(b, *shape, generator=g)
        with torch.no_grad():
            y = model(x)
        write_pb(os.path.join(sd, "input_0.pb"), x.numpy(), "input")
        write_pb(os.path.join(sd, "output_0.pb"), y.numpy(), "output")
    with open(stamp_path, "w") as f:
        f.write(stamp)
    print(f"{name}: exported to {d} ({os.path.getsize(path) / 1e6:.1f} MB)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.environ.get("PACKRAT_MODELS", "models"))
    ap.add_argument("--models", default=",".join(MODELS))
    args = ap.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)
    for name in args.models.split(","):
        if name not in MODELS:
            sys.exit(f"unknown model {name}; known: {', '.join(MODELS)}")
        export(name, args.out)


if __name__ == "__main__":
    main()
