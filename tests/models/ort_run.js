// Runs one model through ONNX Runtime (npm onnxruntime-node, CPU) on inputs
// given as .npy files (float32, float16, int64) and writes each output as raw
// little-endian data plus a JSON index of names, types and shapes.
// usage: node ort_run.js MODEL.onnx OUT_DIR NAME=IN.npy...
'use strict';
const fs = require('fs');
const path = require('path');
const modules = process.env.NODE_MODULES || path.join(__dirname, '..', 'npm', 'node_modules');
const ort = require(path.join(modules, 'onnxruntime-node'));

function readNpy(file) {
  const buf = fs.readFileSync(file);
  const major = buf[6];
  const hlen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const hoff = major === 1 ? 10 : 12;
  const header = buf.toString('latin1', hoff, hoff + hlen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').filter(s => s.trim()).map(Number);
  const data = buf.subarray(hoff + hlen);
  const ab = data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength);
  if (descr === '<f4') return new ort.Tensor('float32', new Float32Array(ab), shape);
  if (descr === '<f2') return new ort.Tensor('float16', new Uint16Array(ab), shape);
  if (descr === '<i8') return new ort.Tensor('int64', new BigInt64Array(ab), shape);
  throw new Error(`${file}: npy type ${descr}`);
}

async function main() {
  const [model, out, ...ins] = process.argv.slice(2);
  const session = await ort.InferenceSession.create(model, {intraOpNumThreads: 1, logSeverityLevel: 3});
  const feeds = {};
  for (const arg of ins) {
    const eq = arg.lastIndexOf('=');
    feeds[arg.slice(0, eq)] = readNpy(arg.slice(eq + 1));
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
