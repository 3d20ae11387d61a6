// Runs one model through ONNX Runtime (npm onnxruntime-node, CPU) on inputs
// given as .npy files (float32, float16, int64) and writes each output as raw
// little-endian data plus a JSON index of names, types and shapes.
// usage: node ort_run.js MODEL.onnx OUT_DIR NAME=IN.npy...
'use strict';
const fs = require('fs');
const path = require('path');
const modules = process.env.NODE_MODULES || path.join(__dirname, '..', 'npm', 'node_modules');
const npy = require(require('path').join(__dirname, '..', '..', 'tools', 'npy.js'));
const ort = require(path.join(modules, 'onnxruntime-node'));


async function main() {
  const [model, out, ...ins] = process.argv.slice(2);
  const session = await ort.InferenceSession.create(model, {intraOpNumThreads: 1, logSeverityLevel: 3});
  const feeds = {};
  for (const arg of ins) {
    const eq = arg.lastIndexOf('=');
    feeds[arg.slice(0, eq)] = npy.readNpy(ort, arg.slice(eq + 1));
  }
  const res = await session.run(feeds);
  const index = [];
  session.outputNames.forEach((name, k) => {
    const t = res[name];
    const d = t.data;
    fs.writeFileSync(path.join(out, `ort_${k}.bin`), Buffer.from(d.buffer, d.byteOffset, d.byteLength));
    index.push({name, type: t.type, dims: t.dims});
  });
  fs.writeFileSync(path.join(out, 'ort.json'), JSON.stringify(index));
}
main().catch(e => {
  console.error(String(e.message || e));
  process.exit(1);
});
