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

const {toTensor: tensorOf} = require(path.join(__dirname, 'ort_tensors.js'));
const toTensor = tp => tensorOf(ort, tp);

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
