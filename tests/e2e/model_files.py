#!/usr/bin/python3
"""Model files and request data the engine must refuse, against the real
server (issue 43):

- deep: ONNX files nesting messages far past any real model (a TypeProto
  10,000 deep, If subgraphs 3,000 deep) crashed the server (SIGSEGV inside
  protobuf-c) at the startup scan and on POST .../load. Now the server
  becomes ready, the other models serve, the deep ones are UNAVAILABLE with
  the reason, and loading one by hand is a 400 that changes nothing else.
- external: a 131-byte model whose external initializer declares
  16384 x 16384 floats and points outside its folder was refused only
  after allocating and zeroing 1 GiB; now the server's peak resident
  memory stays small.
- indices: INT64 ids outside an embedding table (Gather) gave a 200 and a
  plausible answer; now a 400 naming the node and the index, the requests
  batched with it still answered, and the next valid request a 200.

usage: model_files.py PACKRAT
"""
import json
import os
import sys
import tempfile
import threading

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "fuzz"))
sys.path.insert(0, HERE)
import deep_seeds  # noqa: E402  (tests/fuzz/deep_seeds.py: the deep files' bytes)
import hostile as h  # noqa: E402  (its Server and harness)

check = h.check


# ---- models ----

def save(model, path):
    model.ir_version = 8
    os.makedirs(os.path.dirname(path), exist_ok=True)
    onnx.save(model, path)


def relu_model(path):
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "relu",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


TABLE = np.arange(50000 * 4, dtype=np.float32).reshape(50000, 4)


def embed_model(path):
    """ids [batch, 3] (INT64) -> Gather_3 from a 50000 x 4 table -> [batch, 3, 4]."""
    g = helper.make_graph(
        [helper.make_node("Gather", ["table", "ids"], ["y"], name="Gather_3", axis=0)], "embed",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3, 4])],
        [numpy_helper.from_array(TABLE, "table")])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


def huge_external_model(path):
    """A model of about 120 bytes: y = x + W, W 16384 x 16384 floats in an
    external file outside the model's folder."""
    w = TensorProto(name="W", data_type=TensorProto.FLOAT, dims=[16384, 16384],
                    data_location=TensorProto.EXTERNAL)
    w.external_data.add(key="location", value="../../outside.bin")
    g = helper.make_graph([helper.make_node("Add", ["x", "W"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16384, 16384])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    return os.path.getsize(path)


def write_bytes(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def index_of(s):
    st, d = s.json("POST", "/v2/repository/index")
    return {e["name"]: e for e in d} if st == 200 and isinstance(d, list) else {}


def relu_serves(s, when):
    st, d = s.json("POST", "/v2/models/relu/infer",
                   {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4],
                                "data": [-1, 2, -3, 4]}]})
    check(f"relu still serves {when}", st == 200 and d["outputs"][0]["data"] == [0, 2, 0, 4],
          f"{st} {d}")


def embed_body(ids):
    return {"inputs": [{"name": "ids", "datatype": "INT64", "shape": [len(ids) // 3, 3],
                        "data": ids}]}


def embed_expected(ids):
    return [float(v) for i in ids for v in TABLE[i]]


# ---- the tests ----

def t_deep(packrat):
    repo = tempfile.mkdtemp(dir=h.TMP)
    relu_model(f"{repo}/relu/1/model.onnx")
    write_bytes(f"{repo}/deep_type/1/model.onnx", deep_seeds.deep_type(10000))
    write_bytes(f"{repo}/deep_if/1/model.onnx", deep_seeds.deep_if(3000))
    s = h.Server(packrat, repo)
    check("deep files at startup: the server becomes ready", s.port is not None and s.alive(),
          s.text()[-800:])
    if not s.port:
        return
    relu_serves(s, "beside the deep files")
    idx = index_of(s)
    for name in ("deep_type", "deep_if"):
        e = idx.get(name, {})
        check(f"{name}: UNAVAILABLE in the index", e.get("state") == "UNAVAILABLE", str(e))
        check(f"{name}: the reason names the nesting bound",
              "nests messages deeper than 100 levels" in e.get("reason", ""), str(e))
        st, _, _ = s.request("GET", f"/v2/models/{name}/ready")
        check(f"{name}: not ready", st != 200, str(st))
        st, d = s.json("POST", f"/v2/repository/models/{name}/load")
        check(f"{name}: POST load is a 400 naming the bound",
              st == 400 and d and "deeper than 100 levels" in d.get("error", ""), f"{st} {d}")
    # a deep file dropped in after startup, then loaded by hand
    write_bytes(f"{repo}/late/1/model.onnx", deep_seeds.deep_type(100000))
    st, d = s.json("POST", "/v2/repository/models/late/load")
    check("a deep file loaded after startup: 400 naming the bound",
          st == 400 and d and "deeper than 100 levels" in d.get("error", ""), f"{st} {d}")
    check("the server is still up after the loads", s.alive(), s.text()[-800:])
    relu_serves(s, "after the deep loads")
    check("SIGTERM exits 0", s.stop())


def t_external(packrat):
    repo = tempfile.mkdtemp(dir=h.TMP)
    relu_model(f"{repo}/relu/1/model.onnx")
    size = huge_external_model(f"{repo}/huge/1/model.onnx")
    with open(f"{h.TMP}/outside.bin", "wb") as f:  # what the location would reach
        f.write(b"\0" * 16)
    print(f"the external-data model is {size} bytes")
    s = h.Server(packrat, repo)
    check("external 1 GiB declared: the server becomes ready", s.port is not None,
          s.text()[-800:])
    if not s.port:
        return
    e = index_of(s).get("huge", {})
    check("huge: UNAVAILABLE", e.get("state") == "UNAVAILABLE", str(e))
    check("huge: the reason names the location", "outside.bin" in e.get("reason", ""), str(e))
    for _ in range(3):
        st, d = s.json("POST", "/v2/repository/models/huge/load")
    check("huge: POST load refused", st == 400 and d and "outside.bin" in d.get("error", ""),
          f"{st} {d}")
    peak_mb = s.rss_kb("VmHWM") // 1024
    print(f"peak resident memory {peak_mb} MB")
    check("peak resident memory stays far below the declared 1 GiB", peak_mb < 600, f"{peak_mb} MB")
    relu_serves(s, "after the external-data model")
    check("SIGTERM exits 0", s.stop())


def t_indices(packrat):
    repo = tempfile.mkdtemp(dir=h.TMP)
    embed_model(f"{repo}/embed/1/model.onnx")
    # one instance of batch 8 waiting up to 300 ms to fill: concurrent
    # requests share a run
    with open(f"{repo}/embed/config.json", "w") as f:
        json.dump({"max_batch_size": 8, "plan": "1x8", "autoscale": False,
                   "max_queue_delay_us": 300000}, f)
    s = h.Server(packrat, repo)
    check("embed: the server becomes ready", s.port is not None, s.text()[-800:])
    if not s.port:
        return
    good = [1, 2, 49999]
    st, d = s.json("POST", "/v2/models/embed/infer", embed_body(good))
    check("ids inside the table: 200", st == 200 and d["outputs"][0]["data"]
          == embed_expected(good), f"{st} {str(d)[:200]}")
    st, d = s.json("POST", "/v2/models/embed/infer", embed_body([1, 2, 70000]))
    want = "node 'Gather_3' (Gather): index 70000 out of range [-50000, 49999]"
    check("an id past the table: 400 naming the node and the index",
          st == 400 and d and want in d.get("error", ""), f"{st} {d}")
    st, d = s.json("POST", "/v2/models/embed/infer", embed_body([-50001, 0, 0]))
    check("an id before the table: 400",
          st == 400 and d and "index -50001 out of range [-50000, 49999]" in d.get("error", ""),
          f"{st} {d}")
    st, d = s.json("POST", "/v2/models/embed/infer", embed_body([-1, 0, 7]))
    check("then valid ids (negative counting from the end): 200", st == 200 and
          d["outputs"][0]["data"] == embed_expected([49999, 0, 7]), f"{st} {str(d)[:200]}")
    # a bad request batched with good ones: only it fails
    results = {}

    def send(i, ids):
        results[i] = (ids, *s.json("POST", "/v2/models/embed/infer", embed_body(ids)))

    for round_ in range(3):
        results.clear()
        reqs = [[i, i + 1, i + 2] for i in range(5)] + [[0, 100000, 0]]
        ts = [threading.Thread(target=send, args=(i, ids)) for i, ids in enumerate(reqs)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        ok = all(results[i][1] == 200 and results[i][2]["outputs"][0]["data"]
                 == embed_expected(results[i][0]) for i in range(5))
        bad = results[5][1] == 400 and "index 100000" in results[5][2].get("error", "")
        check(f"round {round_ + 1}: the valid requests batched with a bad one answered", ok,
              str({i: (r[1], str(r[2])[:120]) for i, r in results.items()}))
        check(f"round {round_ + 1}: the bad one 400", bad, str(results[5]))
    st, _, _ = s.request("GET", "/metrics")
    check("the server is still up", s.alive() and st == 200)
    check("SIGTERM exits 0", s.stop())


TESTS = {"deep": t_deep, "external": t_external, "indices": t_indices}

if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)

    def run(which=sys.argv[2:] or list(TESTS)):
        for name in which:
            print(f"---- {name}", flush=True)
            TESTS[name](os.path.abspath(sys.argv[1]))

    h.harness("packrat-model-files-", run)
