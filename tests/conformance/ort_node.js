// ONNX backend node tests through ONNX Runtime (npm onnxruntime-node, CPU):
// the reference the packrat runner's counts are compared with.
//
// usage: node ort_node.js NODE_TEST_DIR ONNX_PROTO OUT.json
//   NODE_MODULES: where onnxruntime-node and protobufjs are (tests/npm)
//
// For every DIR/test_*/model.onnx and each test_data_set_*: feed input_K.pb,
// compare with output_K.pb with the tolerance of the packrat runner (rtol
// 1e-3, atol 1e-7; integers exact, NaN equals NaN). Writes
// {"test_name": {"pass": bool, "why": "..."}} and prints the count.
'use strict';
const fs = require('fs');
const path = require('path');
const modules = process.env.NODE_MODULES || path.join(__dirname, '..', 'npm', 'node_modules');
const ort = require(path.join(modules, 'onnxruntime-node'));
const protobuf = require(path.join(modules, 'protobufjs'));

// TensorProto.DataType -> [ort type, typed array, the TensorProto field of its values]
const TYPES = {
  1: ['float32', Float32Array, 'floatData'],
  2: ['uint8', Uint8Array, 'int32Data'],
  3: ['int8', Int8Array, 'int32Data'],
  4: ['uint16', Uint16Array, 'int32Data'],
  5: ['int16', Int16Array, 'int32Data'],
  6: ['int32', Int32Array, 'int32Data'],
  7: ['int64', BigInt64Array, 'int64Data'],
  8: ['string', null, 'stringData'],
  9: ['bool', Uint8Array, 'int32Data'],
  10: ['float16', Uint16Array, 'int32Data'],
  11: ['float64', Float64Array, 'doubleData'],
  12: ['uint32', Uint32Array, 'uint64Data'],
  13: ['uint64', BigUint64Array, 'uint64Data'],
};

function toTensor(tp) {
  const t = TYPES[tp.dataType];
  if (!t) throw new Error(`tensor type ${tp.dataType}`);
  const [type, Arr, field] = t;
  const dims = tp.dims.map(Number);
  if (type === 'string') {
    const vals = tp.stringData.map(b => Buffer.from(b).toString('utf8'));
    return new ort.Tensor('string', vals, dims);
  }
  let data;
  if (tp.rawData && tp.rawData.length) {
    const raw = Buffer.from(tp.rawData);
    const copy = new ArrayBuffer(raw.length);
    new Uint8Array(copy).set(raw);
    data = new Arr(copy);
  } else {
    const src = tp[field] || [];
    data = new Arr(src.length);
    for (let i = 0; i < src.length; i++) {
      const v = src[i];
      data[i] = Arr === BigInt64Array || Arr === BigUint64Array ? BigInt(v.toString()) : Number(v);
    }
  }
  if (type === 'bool') return new ort.Tensor('bool', data, dims);
  return new ort.Tensor(type, data, dims);
}

function half(u) {
  const s = u & 0x8000 ? -1 : 1, e = (u >> 10) & 31, f = u & 1023;
  if (e === 0) return s * f * 2 ** -24;
  if (e === 31) return f ? NaN : s * Infinity;
  return s * (1 + f / 1024) * 2 ** (e - 15);
}

function values(t) {
  if (t.type === 'float16') return Array.from(t.data, half);
  return Array.from(t.data, v => (typeof v === 'bigint' ? v.toString() : v));
}

function compare(got, want) {
  if (got.type !== want.type) return `type ${got.type}, expected ${want.type}`;
  if (got.dims.length !== want.dims.length || got.dims.some((d, k) => d !== want.dims[k]))
    return `shape [${got.dims}], expected [${want.dims}]`;
  const g = values(got), w = values(want);
  const isFloat = ['float32', 'float64', 'float16'].includes(want.type);
  for (let i = 0; i < w.length; i++) {
    if (isFloat) {
      if (Number.isNaN(w[i]) && Number.isNaN(g[i])) continue;
      if (g[i] === w[i] || Math.abs(g[i] - w[i]) <= 1e-7 + 1e-3 * Math.abs(w[i])) continue;
    } else if (g[i] === w[i]) {
      continue;
    }
    return `element ${i}: got ${g[i]}, expected ${w[i]}`;
  }
  return null;
}

async function runTest(dir, TensorProto) {
  const session = await ort.InferenceSession.create(path.join(dir, 'model.onnx'), {
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    logSeverityLevel: 4,
  });
  const read = f => TensorProto.decode(fs.readFileSync(f));
  for (let set = 0; ; set++) {
    const sdir = path.join(dir, `test_data_set_${set}`);
    if (!fs.existsSync(sdir)) {
      if (set === 0) return 'no test_data_set_0';
      return null;
    }
    const feeds = {};
    for (let k = 0; fs.existsSync(path.join(sdir, `input_${k}.pb`)); k++) {
      const tp = read(path.join(sdir, `input_${k}.pb`));
      const name = session.inputNames.includes(tp.name) ? tp.name : session.inputNames[k];
      feeds[name] = toTensor(tp);
    }
    const out = await session.run(feeds);
    for (let k = 0; k < session.outputNames.length; k++) {
      const f = path.join(sdir, `output_${k}.pb`);
      if (!fs.existsSync(f)) return `no output_${k}.pb`;
      const why = compare(out[session.outputNames[k]], toTensor(read(f)));
      if (why) return `data set ${set} output ${k}: ${why}`;
    }
  }
}

async function main() {
  const [root, proto, outFile] = process.argv.slice(2);
  if (!outFile) {
    console.error('usage: node ort_node.js NODE_TEST_DIR ONNX_PROTO OUT.json');
    process.exit(2);
  }
  const TensorProto = protobuf.loadSync(proto).lookupType('onnx.TensorProto');
  const names = fs.readdirSync(root).filter(n => n.startsWith('test_')).sort();
  const results = {};
  let passed = 0;
  for (const name of names) {
    let why;
    try {
      why = await runTest(path.join(root, name), TensorProto);
    } catch (e) {
      why = String(e.message || e).split('\n')[0];
    }
    results[name] = why ? {pass: false, why} : {pass: true};
    if (!why) passed++;
  }
  fs.writeFileSync(outFile, JSON.stringify(results, null, 1) + '\n');
  console.log(`ONNX Runtime ${require(path.join(modules, 'onnxruntime-node', 'package.json')).version}: ` +
              `${passed} of ${names.length} node tests passed`);
}
main().catch(e => {
  console.error(e);
  process.exit(1);
});
