#!/usr/bin/env python3
"""Export the models packrat is measured on, with reference data.

Each model goes to OUT/<name>/model.onnx (opset 13, dynamic batch axis,
random weights from a fixed seed) with PyTorch's own outputs in the ONNX
test-data layout: test_data_set_K/input_0.pb and output_0.pb, one data set
per batch size in BATCHES. Runs with the python3 on PATH wherever it has
PyTorch, torchvision, onnx and numpy (Debian's python3-torch and
python3-torchvision, or a pip install; nothing is downloaded: the weights are
random). A model whose files are already there and were made by this same
script version and torch version is left alone.

small_cnn is a three-convolution network on 3x32x32 images (milliseconds
to export and to run: the many-core kit's --quick mode).

Also BERT-base and GPT-2 small written in plain PyTorch (token ids of length
128, int64, dynamic batch; opset 13 and, as *_opset17, opset 17), with data
sets at batch 1 and 4. Their sequence axis is dynamic too (named "sequence";
give it with `--dim sequence=N` where no input files fix it), and a third data
set at batch 2 has sequence length 64.

usage: tools/export_models.py [--out DIR] [--models resnet50,inception_v3,bert,gpt2,...]
"""
import argparse
import hashlib
import inspect
import os
import sys

try:
    import numpy as np
    import torch
    import torchvision
    from onnx import numpy_helper
except ImportError as e:
    sys.exit(f"export_models.py: {sys.executable} cannot import {e.name}: the exports need PyTorch, "
             "torchvision, onnx and numpy (Debian: apt-get install python3-torch python3-torchvision "
             "python3-onnx; elsewhere: pip install torch torchvision onnx)")

BATCHES = [1, 8]
SEED = 0


def cnn(name):
    torch.manual_seed(SEED)
    if name == "resnet50":
        return torchvision.models.resnet50(weights=None), (3, 224, 224)
    if name == "inception_v3":
        m = torchvision.models.inception_v3(weights=None, aux_logits=False, init_weights=True)
        return m, (3, 299, 299)
    if name == "small_cnn":  # the many-core kit's --quick model: the real export path in seconds
        c = torch.nn.Conv2d
        m = torch.nn.Sequential(c(3, 16, 3, padding=1), torch.nn.ReLU(), c(16, 32, 3, stride=2, padding=1),
                                torch.nn.ReLU(), c(32, 64, 3, stride=2, padding=1), torch.nn.ReLU(),
                                torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, 10))
        return m, (3, 32, 32)
    raise KeyError(name)


SEQ = 128


class Bert(torch.nn.Module):
    """BERT-base encoder in plain PyTorch: token + position embeddings,
    12 post-LayerNorm layers (hidden 768, 12 heads, FFN 3072, exact erf GELU)."""

    def __init__(self, vocab=30522, hidden=768, layers=12, heads=12, ffn=3072, max_pos=512):
        super().__init__()
        self.heads = heads
        self.tok = torch.nn.Embedding(vocab, hidden)
        self.pos = torch.nn.Embedding(max_pos, hidden)
        self.ln = torch.nn.LayerNorm(hidden, eps=1e-12)
        self.layers = torch.nn.ModuleList()
        for _ in range(layers):
            layer = torch.nn.Module()
            layer.qkv = torch.nn.Linear(hidden, 3 * hidden)
            layer.out = torch.nn.Linear(hidden, hidden)
            layer.ln1 = torch.nn.LayerNorm(hidden, eps=1e-12)
            layer.ff1 = torch.nn.Linear(hidden, ffn)
            layer.ff2 = torch.nn.Linear(ffn, hidden)
            layer.ln2 = torch.nn.LayerNorm(hidden, eps=1e-12)
            self.layers.append(layer)

    def forward(self, ids):
        b, s = ids.shape
        pos = torch.arange(s, device=ids.device).unsqueeze(0)
        x = self.ln(self.tok(ids) + self.pos(pos))
        h, d = self.heads, x.shape[-1] // self.heads
        for layer in self.layers:
            q, k, v = layer.qkv(x).split(x.shape[-1], dim=-1)
            q = q.view(b, s, h, d).transpose(1, 2)
            k = k.view(b, s, h, d).transpose(1, 2)
            v = v.view(b, s, h, d).transpose(1, 2)
            att = torch.softmax(q @ k.transpose(-1, -2) / d ** 0.5, dim=-1)
            ctx = (att @ v).transpose(1, 2).reshape(b, s, h * d)
            x = layer.ln1(x + layer.out(ctx))
            x = layer.ln2(x + layer.ff2(torch.nn.functional.gelu(layer.ff1(x))))
        return x


class Gpt2(torch.nn.Module):
    """GPT-2 small in plain PyTorch: 12 pre-LayerNorm layers (768, 12 heads),
    tanh GELU, additive causal mask, tied LM head; logits of the last position."""

    def __init__(self, vocab=50257, hidden=768, layers=12, heads=12, ctx=1024):
        super().__init__()
        self.heads = heads
        self.wte = torch.nn.Embedding(vocab, hidden)
        self.wpe = torch.nn.Embedding(ctx, hidden)
        mask = torch.triu(torch.full((ctx, ctx), float("-inf")), diagonal=1)
        self.register_buffer("mask", mask.view(1, 1, ctx, ctx), persistent=False)
        self.layers = torch.nn.ModuleList()
        for _ in range(layers):
            layer = torch.nn.Module()
            layer.ln1 = torch.nn.LayerNorm(hidden)
            layer.qkv = torch.nn.Linear(hidden, 3 * hidden)
            layer.out = torch.nn.Linear(hidden, hidden)
            layer.ln2 = torch.nn.LayerNorm(hidden)
            layer.ff1 = torch.nn.Linear(hidden, 4 * hidden)
            layer.ff2 = torch.nn.Linear(4 * hidden, hidden)
            self.layers.append(layer)
        self.lnf = torch.nn.LayerNorm(hidden)

    def forward(self, ids):
        b, s = ids.shape
        pos = torch.arange(s, device=ids.device).unsqueeze(0)
        x = self.wte(ids) + self.wpe(pos)
        h, d = self.heads, x.shape[-1] // self.heads
        for layer in self.layers:
            q, k, v = layer.qkv(layer.ln1(x)).split(x.shape[-1], dim=-1)
            q = q.view(b, s, h, d).transpose(1, 2)
            k = k.view(b, s, h, d).transpose(1, 2)
            v = v.view(b, s, h, d).transpose(1, 2)
            att = q @ k.transpose(-1, -2) / d ** 0.5 + self.mask[:, :, :s, :s]
            ctx = (torch.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(b, s, h * d)
            x = x + layer.out(ctx)
            x = x + layer.ff2(torch.nn.functional.gelu(layer.ff1(layer.ln2(x)), approximate="tanh"))
        x = self.lnf(x[:, -1, :])
        return x @ self.wte.weight.t()


def transformer(name):
    torch.manual_seed(SEED)
    model = Bert() if name.startswith("bert") else Gpt2()
    if name.startswith("gpt2"):
        for layer in model.layers:  # GPT-2's initialization scale keeps activations tame
            for lin in (layer.qkv, layer.out, layer.ff1, layer.ff2):
                torch.nn.init.normal_(lin.weight, std=0.02)
                torch.nn.init.zeros_(lin.bias)
        torch.nn.init.normal_(model.wte.weight, std=0.02)
        torch.nn.init.normal_(model.wpe.weight, std=0.01)
    return model, (SEQ,)


MODELS = {"resnet50": cnn, "inception_v3": cnn, "small_cnn": cnn, "bert": transformer, "bert_opset17": transformer,
          "gpt2": transformer, "gpt2_opset17": transformer}
TRANSFORMER_BATCHES = [1, 4]
SHORT_SEQ = (2, 64)  # the extra transformer data set: batch, sequence length


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
    is_text = MODELS[name] is transformer
    vocab = model.tok.num_embeddings if isinstance(model, Bert) else model.wte.num_embeddings if is_text else 0

    def make_input(b, g, seq=None):
        if is_text:
            return torch.randint(0, vocab, (b, seq or shape[0]), generator=g, dtype=torch.int64)
        return torch.randn(b, *shape, generator=g)

    example = make_input(1, torch.Generator().manual_seed(SEED + 1))
    path = os.path.join(d, "model.onnx")
    opset = 17 if name.endswith("opset17") else 13
    dynamic_axes = {"input": {0: "batch"}, "output": {0: "batch"}}
    if is_text:
        dynamic_axes["input"][1] = "sequence"
        if isinstance(model, Bert):  # the last hidden state keeps the sequence axis
            dynamic_axes["output"][1] = "sequence"
    kwargs = {}
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kwargs["dynamo"] = False  # the TorchScript exporter, as torch < 2.9 uses by default
    with torch.no_grad():
        torch.onnx.export(model, example, path, opset_version=opset, input_names=["input"],
                          output_names=["output"],
                          dynamic_axes=dynamic_axes,
                          do_constant_folding=True, **kwargs)
    sets = [(b, None) for b in (TRANSFORMER_BATCHES if is_text else BATCHES)]
    if is_text:
        sets.append(SHORT_SEQ)
    for k, (b, seq) in enumerate(sets):
        sd = os.path.join(d, f"test_data_set_{k}")
        os.makedirs(sd, exist_ok=True)
        g = torch.Generator().manual_seed(SEED + 100 + b)
        x = make_input(b, g, seq)
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
