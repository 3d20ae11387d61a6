#!/usr/bin/python3
"""Export torchvision models beyond the paper's four, with PyTorch's outputs.

The same layout as tools/export_models.py (OUT/<name>/model.onnx, opset 13
unless named, dynamic batch, random weights from a fixed seed, and
test_data_set_K at batch 1 and 2 in the ONNX test-data layout), for the zoo
check: DenseNet-121, MobileNetV3-Large, EfficientNet-B0, RegNetY-400MF,
ConvNeXt-Tiny and Swin-T. BatchNorm statistics are measured on random
images (calibrate) so that activations stay O(1) through the untrained nets. A model already exported by this same script
version is left alone.

usage: tools/export_zoo.py [--out DIR] [--models densenet121,...]
"""
import argparse
import hashlib
import os
import sys

import torch
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_models import SEED, write_pb  # noqa: E402

ZOO = {
    "densenet121": (torchvision.models.densenet121, 13),
    "mobilenet_v3_large": (torchvision.models.mobilenet_v3_large, 13),
    "efficientnet_b0": (torchvision.models.efficientnet_b0, 13),
    "regnet_y_400mf": (torchvision.models.regnet_y_400mf, 13),
    "convnext_tiny": (torchvision.models.convnext_tiny, 13),
    "swin_t": (torchvision.models.swin_t, 17),
}
BATCHES = [1, 2]
SHAPE = (3, 224, 224)


def stamp():
    with open(__file__, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16] + " torch " + torch.__version__


def calibrate(model):
    """BatchNorm statistics from random images: with untrained weights and
    fresh statistics the activations of deep BN nets fade to ~1e-10, which
    would make the comparison meaningless; measured statistics keep them O(1)."""
    bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    for m in bns:
        m.reset_running_stats()
        m.momentum = None  # cumulative average
    model.train()
    g = torch.Generator().manual_seed(SEED + 7)
    with torch.no_grad():
        for _ in range(2):
            model(torch.randn(8, *SHAPE, generator=g))
    model.eval()


def export(name, out_dir):
    d = os.path.join(out_dir, name)
    stamp_path = os.path.join(d, "STAMP")
    if os.path.exists(stamp_path) and open(stamp_path).read() == stamp():
        print(f"{name}: up to date in {d}")
        return
    os.makedirs(d, exist_ok=True)
    build, opset = ZOO[name]
    torch.manual_seed(SEED)
    model = build(weights=None).eval()
    calibrate(model)
    path = os.path.join(d, "model.onnx")
    example = torch.randn(1, *SHAPE, generator=torch.Generator().manual_seed(SEED + 1))
    with torch.no_grad():
        torch.onnx.export(model, example, path, opset_version=opset, input_names=["input"],
                          output_names=["output"],
                          dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}},
                          do_constant_folding=True)
    for k, b in enumerate(BATCHES):
        sd = os.path.join(d, f"test_data_set_{k}")
        os.makedirs(sd, exist_ok=True)
        x = torch.randn(b, *SHAPE, generator=torch.Generator().manual_seed(SEED + 100 + b))
        with torch.no_grad():
            y = model(x)
        write_pb(os.path.join(sd, "input_0.pb"), x.numpy(), "input")
        write_pb(os.path.join(sd, "output_0.pb"), y.numpy(), "output")
    with open(stamp_path, "w") as f:
        f.write(stamp())
    print(f"{name}: exported to {d} ({os.path.getsize(path) / 1e6:.1f} MB)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.environ.get("PACKRAT_MODELS", "models"))
    ap.add_argument("--models", default=",".join(ZOO))
    args = ap.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)
    for name in args.models.split(","):
        if name not in ZOO:
            sys.exit(f"unknown model {name}; known: {', '.join(ZOO)}")
        export(name, args.out)


if __name__ == "__main__":
    main()
