#!/usr/bin/python3
"""ONNX files that nest messages deeply, written as raw protobuf wire bytes
(the python protobuf library refuses to build what is this deep): a graph
input's TypeProto of sequences nested N deep, If nodes whose then_branch
holds the next If N deep, and files just under and over the loader's bound
(src/engine/onnx_prescan.h, PR_PRESCAN_MAX_DEPTH). protobuf-c 1.4.1
recursed once per level with no limit of its own: 10,000 TypeProto levels
(30 kB) or 3,000 If levels crashed the loader. Seeds for fuzz_loader
(make_corpus.sh) and the models of tests/e2e/model_files.py.

usage: deep_seeds.py OUT_DIR   (writes deep_*.onnx there)
"""
import os
import sys

MAX_DEPTH = 100  # PR_PRESCAN_MAX_DEPTH


def varint(n):
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def field(number, payload):
    """A length-delimited field."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def int_field(number, value):
    return varint(number << 3) + varint(value)


def nest(inner, levels, prefix):
    """inner wrapped `levels` times, each time in what prefix(n) puts in
    front of a message of n bytes (the bytes of the fields before it and its
    own tag and length): built front to back in linear time, not by copying
    the whole message once a level."""
    parts, n = [inner], len(inner)
    for _ in range(levels):
        p = prefix(n)
        parts.append(p)
        n += len(p)
    return b"".join(reversed(parts))


def header(number, n):
    """The tag and length of a length-delimited field of n bytes."""
    return varint(number << 3 | 2) + varint(n)


def model(graph):
    """ModelProto: ir_version 8, opset 13, the graph's bytes."""
    return int_field(1, 8) + field(8, int_field(2, 13)) + field(7, graph)


def deep_type(levels, shape=False):
    """A model whose input x is a sequence of sequences ... `levels` deep of
    float tensors: messages nest 5 + 2 * levels (+1 with a shape) deep."""
    t = field(1, (field(2, b"") if shape else b"") + int_field(1, 1))  # tensor_type

    def sequence(n):  # TypeProto.sequence_type { elem_type: the n bytes }
        inner = header(1, n)
        return header(4, len(inner) + n) + inner

    t = nest(t, levels, sequence)
    value_info = field(1, b"x") + field(2, t)
    return model(field(11, value_info))


def if_node(n):
    """A graph whose one node is an If whose then_branch is the n bytes."""
    attr = field(1, b"then_branch") + int_field(20, 5) + header(6, n)
    node = field(1, b"c") + field(2, b"y") + field(4, b"If") + header(5, len(attr) + n)
    return header(1, len(node) + len(attr) + n) + node + attr


def deep_if(levels):
    """If nodes nested `levels` deep through then_branch (3 message levels
    each); the outermost graph has the bool input c every If reads."""
    g = nest(field(2, b"g"), levels, if_node)
    c = field(1, b"c") + field(2, field(1, int_field(1, 9) + field(2, b"")))
    return model(g + field(11, c))


def deep_attr_tensor(levels):
    """Subgraphs `levels` deep whose innermost node carries a TENSOR
    attribute: the message levels of attributes and tensors together."""
    tensor = int_field(1, 1) + int_field(2, 1) + field(8, b"t") + field(9, b"\0\0\0\0")
    g = field(1, field(4, b"Constant") + field(2, b"k") +
              field(5, field(1, b"value") + int_field(20, 4) + field(5, tensor)))
    return model(nest(g, levels, if_node))


SEEDS = {
    "deep_type_10000": lambda: deep_type(10000),
    "deep_type_100000": lambda: deep_type(100000),
    "deep_if_3000": lambda: deep_if(3000),
    "deep_if_9": lambda: deep_if(9),  # under the scan's bound, over the loader's 8 subgraphs
    "deep_type_at_bound": lambda: deep_type((MAX_DEPTH - 5) // 2, (MAX_DEPTH - 5) % 2 == 1),
    "deep_type_over_bound": lambda: deep_type((MAX_DEPTH - 4) // 2, (MAX_DEPTH - 4) % 2 == 1),
    "deep_attr_tensor_30": lambda: deep_attr_tensor(30),  # 95 levels: under the bound
}


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, make in SEEDS.items():
        with open(os.path.join(out, name + ".onnx"), "wb") as f:
            f.write(make())


if __name__ == "__main__":
    main()
