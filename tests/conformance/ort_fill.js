// Writes ONNX Runtime's outputs as the expected outputs of node tests that
// have only inputs (types_sweep.py), and removes the tests ONNX Runtime
// refuses (an element type it does not implement for the operator).
//
// usage: node ort_fill.js TEST_DIR ONNX_PROTO
//   NODE_MODULES: where onnxruntime-node and protobufjs are (tests/npm)
'use strict';
const fs = require('fs');
const path = require('path');
const modules = process.env.NODE_MODULES || path.join(__dirname, '..', 'npm', 'node_modules');
const ort = require(path.join(modules, 'onnxruntime-node'));
const protobuf = require(path.join(modules, 'protobufjs'));

// ort type -> TensorProto.DataType
const DATA_TYPE = {
  float32: 1, uint8: 2, int8: 3, uint16: 4, int16: 5, int32: 6, int64: 7,
  bool: 9, float16: 10, float64: 11, uint32: 12, uint64: 13,
};
// TensorProto.DataType -> ort type and typed array
const ORT_TYPE = {
  1: ['float32', Float32Array], 2: ['uint8', Uint8Array], 3: ['int8', Int8Array],
  4: ['uint16', Uint16Array], 5: ['int16', Int16Array], 6: ['int32', Int32Array],
  7: ['int64', BigInt64Array], 9: ['bool', Uint8Array], 10: ['float16', Uint16Array],
  11: ['float64', Float64Array], 12: ['uint32', Uint32Array], 13: ['uint64', BigUint64Array],
};

function toTensor(tp) {
  const [type, Arr] = ORT_TYPE[tp.dataType] || [];
  if (!type) throw new Error(`input type ${tp.dataType}`);
  const raw = Buffer.from(tp.rawData);
  const copy = new ArrayBuffer(raw.length);
  new Uint8Array(copy).set(raw);
  return new ort.Tensor(type, new Arr(copy), tp.dims.map(Number));
}

function toProto(TensorProto, name, t) {
  const dataType = DATA_TYPE[t.type];
  if (!dataType) throw new Error(`output type ${t.type}`);
  const d = t.data;
  const rawData = Buffer.from(d.buffer, d.byteOffset, d.byteLength);
  return TensorProto.encode(TensorProto.create({name, dims: t.dims, dataType, rawData})).finish();
}

// The model's graph outputs get the element type and shape ONNX Runtime
// gave them (types_sweep.py leaves them untyped where ONNX 1.12 cannot infer
// them), so every model is a valid ONNX file.
function typeOutputs(dir, ModelProto, outs) {
  const file = path.join(dir, 'model.onnx');
  const model = ModelProto.decode(fs.readFileSync(file));
  for (const o of model.graph.output) {
    const t = outs[o.name];
    o.type = {tensorType: {elemType: DATA_TYPE[t.type],
                           shape: {dim: t.dims.map(d => ({dimValue: d}))}}};
  }
  fs.writeFileSync(file, ModelProto.encode(model).finish());
}

async function fill(dir, TensorProto, ModelProto) {
  const session = await ort.InferenceSession.create(path.join(dir, 'model.onnx'), {
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
    logSeverityLevel: 4,
  });
  const sdir = path.join(dir, 'test_data_set_0');
  const feeds = {};
  session.inputNames.forEach((name, k) => {
    feeds[name] = toTensor(TensorProto.decode(fs.readFileSync(path.join(sdir, `input_${k}.pb`))));
  });
  const out = await session.run(feeds);
  typeOutputs(dir, ModelProto, out);
  session.outputNames.forEach((name, k) => {
    fs.writeFileSync(path.join(sdir, `output_${k}.pb`), toProto(TensorProto, name, out[name]));
  });
}

async function main() {
  const [root, proto] = process.argv.slice(2);
  if (!proto) {
    console.error('usage: node ort_fill.js TEST_DIR ONNX_PROTO');
    process.exit(2);
  }
  const root_ = protobuf.loadSync(proto);
  const TensorProto = root_.lookupType('onnx.TensorProto');
  const ModelProto = root_.lookupType('onnx.ModelProto');
  const names = fs.readdirSync(root).filter(n => n.startsWith('test_')).sort();
  let kept = 0;
  for (const name of names) {
    try {
      await fill(path.join(root, name), TensorProto, ModelProto);
      kept++;
    } catch (e) {
      fs.rmSync(path.join(root, name), {recursive: true, force: true});
    }
  }
  console.log(`ONNX Runtime ran ${kept} of ${names.length} cases (the rest it refuses)`);
}
main().catch(e => {
  console.error(e);
  process.exit(1);
});
