#!/usr/bin/python3
"""The operator table of docs/engine.md: each operator the engine implements, the
opsets it loads in, and the element types in which it passes node tests.

The types of an operator are those of the node tests that pass and hold that
operator alone (the element type of its first input, or of its output when
it has no input; X's for Where): ONNX's backend node tests listed in
passing.txt (ONNX's expected outputs, which ONNX Runtime passes too), the
sweep of every operator in every type (types_sweep.py, ONNX Runtime's
outputs, listed in passing_types.txt), and the extra node tests
(extra_ops.py, numpy's outputs, all of which pass). So a type appears only where a passing
test of that operator in that type exists.

usage: op_table.py OPS_LIST [--tests DIR PASSING]... [--all-pass DIR]...
                   [--write FILE | --check FILE]
  OPS_LIST: `conformance --ops` output (NAME MIN_OPSET MAX_OPSET a line)
  --write rewrites the table between the markers in FILE (docs/engine.md),
  --check fails when FILE's table differs; else the table is printed.
"""
import argparse
import os
import sys

import onnx

BEGIN = "<!-- operator table: tools/op_table.py -->"
END = "<!-- end of operator table -->"
SHORT = {
    onnx.TensorProto.FLOAT: "float", onnx.TensorProto.DOUBLE: "double",
    onnx.TensorProto.FLOAT16: "float16", onnx.TensorProto.INT8: "int8",
    onnx.TensorProto.INT16: "int16", onnx.TensorProto.INT32: "int32",
    onnx.TensorProto.INT64: "int64", onnx.TensorProto.UINT8: "uint8",
    onnx.TensorProto.UINT16: "uint16", onnx.TensorProto.UINT32: "uint32",
    onnx.TensorProto.UINT64: "uint64", onnx.TensorProto.BOOL: "bool",
    onnx.TensorProto.STRING: "string",
}
ORDER = list(SHORT.values())
# operators whose type parameter is their output's (the inputs are sizes)
OUTPUT_TYPED = ("ConstantOfShape", "HannWindow", "HammingWindow", "BlackmanWindow",
                "MelWeightMatrix")


def elem_type(graph, name):
    for v in list(graph.input) + list(graph.output) + list(graph.value_info):
        if v.name == name:
            return v.type.tensor_type.elem_type
    for t in graph.initializer:
        if t.name == name:
            return t.data_type
    return 0


def test_type(model_path):
    """(op, element type name) of a one-node test model, else None."""
    g = onnx.load(model_path, load_external_data=False).graph
    if len(g.node) != 1 or g.node[0].domain not in ("", "ai.onnx"):
        return None
    node = g.node[0]
    if node.op_type in OUTPUT_TYPED or not node.input:
        first = node.output[0]
    else:
        first = node.input[1 if node.op_type == "Where" else 0]
    t = SHORT.get(elem_type(g, first))
    return (node.op_type, t) if t else None


def collect(types, root, names):
    for name in names:
        path = os.path.join(root, name, "model.onnx")
        if os.path.exists(path):
            found = test_type(path)
            if found:
                types.setdefault(found[0], set()).add(found[1])


def table(ops, types):
    rows = ["| operator | opsets | element types (with a passing node test) |",
            "|---|---|---|"]
    for name, lo, hi in sorted(ops):
        got = sorted(types.get(name, ()), key=ORDER.index)
        rows.append(f"| {name} | {lo}–{hi} | {', '.join(got) if got else '(no single-op test)'} |")
    return "\n".join(rows) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ops_list")
    ap.add_argument("--tests", nargs=2, action="append", default=[], metavar=("DIR", "PASSING"))
    ap.add_argument("--all-pass", action="append", default=[], metavar="DIR")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--write")
    mode.add_argument("--check")
    a = ap.parse_args()
    with open(a.ops_list) as f:
        ops = [(p[0], int(p[1]), int(p[2])) for p in (line.split() for line in f) if len(p) == 3]
    types = {}
    for root, passing in a.tests:
        with open(passing) as f:
            collect(types, root, [n.strip() for n in f if n.strip() and not n.startswith("#")])
    for root in a.all_pass:
        collect(types, root, sorted(os.listdir(root)))
    text = table(ops, types)
    path = a.write or a.check
    if not path:
        sys.stdout.write(text)
        return 0
    with open(path) as f:
        doc = f.read()
    if BEGIN not in doc or END not in doc:
        print(f"{path}: no operator table markers", file=sys.stderr)
        return 1
    head, rest = doc.split(BEGIN, 1)
    old, tail = rest.split(END, 1)
    if a.check:
        if old.strip() != text.strip():
            print(f"{path}: the operator table is out of date; rerun tools/op_table.py --write",
                  file=sys.stderr)
            return 1
        print(f"{path}: operator table up to date ({len(ops)} operators)")
        return 0
    with open(path, "w") as f:
        f.write(head + BEGIN + "\n" + text + END + tail)
    return 0


if __name__ == "__main__":
    sys.exit(main())
