// Writes ONNX Runtime's outputs as the expected outputs of node tests that
// have only inputs (types_sweep.py), and removes the tests ONNX Runtime
// refuses (an element type it does not implement for the operator), but
// for those whose generator wrote its own answer beside the inputs
// (test_data_set_0/reference_K.pb, quant_sweep.py's numpy): that becomes
// the expected output.
//
// usage: node ort_fill.js TEST_DIR ONNX_PROTO
//   NODE_MODULES: where onnxruntime-node and protobufjs are (tests/npm)
'use strict';
const fs = require('fs');
const path = require('path');
const modules = process.env.NODE_MODULES || path.join(__dirname, '..', 'npm', 'node_modules');
const ort = require(path.join(modules, 'onnxruntime-node'));
const protobuf = require(path.join(modules, 'protobufjs'));

const {DATA_TYPE, toTensor: tensorOf} = require(path.join(__dirname, 'ort_tensors.js'));
const toTensor = tp => tensorOf(ort, tp);

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

// A refused test's own answer (reference_K.pb) as its expected outputs, the
// model's outputs typed from it; false when it has none.
function useReference(dir, TensorProto, ModelProto) {
  const sdir = path.join(dir, 'test_data_set_0');
  const file = path.join(dir, 'model.onnx');
  const model = ModelProto.decode(fs.readFileSync(file));
  const refs = model.graph.output.map((o, k) => path.join(sdir, `reference_${k}.pb`));
  if (!refs.length || !refs.every(f => fs.existsSync(f))) return false;
  model.graph.output.forEach((o, k) => {
    const t = TensorProto.decode(fs.readFileSync(refs[k]));
    o.type = {tensorType: {elemType: t.dataType, shape: {dim: t.dims.map(d => ({dimValue: d}))}}};
    fs.renameSync(refs[k], path.join(sdir, `output_${k}.pb`));
  });
  fs.writeFileSync(file, ModelProto.encode(model).finish());
  return true;
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
  let kept = 0, referenced = 0;
  for (const name of names) {
    try {
      await fill(path.join(root, name), TensorProto, ModelProto);
      kept++;
    } catch (e) {
      if (useReference(path.join(root, name), TensorProto, ModelProto)) {
        referenced++;
        continue;
      }
      fs.rmSync(path.join(root, name), {recursive: true, force: true});
    }
  }
  console.log(`ONNX Runtime ran ${kept} of ${names.length} cases (the rest it refuses)` +
              (referenced ? `; ${referenced} it refuses keep their own reference answers` : ''));
}
main().catch(e => {
  console.error(e);
  process.exit(1);
});
