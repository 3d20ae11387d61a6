// Reads a NumPy .npy file (little-endian float32, float16 or int64) as an
// ONNX Runtime tensor of the given onnxruntime-node module: shared by
// bench/ort_run.js and tests/models/ort_run.js, which load ONNX Runtime from
// different npm folders.
'use strict';
const fs = require('fs');

const TYPES = {'<f4': ['float32', Float32Array], '<f2': ['float16', Uint16Array], '<i8': ['int64', BigInt64Array]};

function readNpy(ort, file) {
  const buf = fs.readFileSync(file);
  const major = buf[6];
  const hlen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const hoff = major === 1 ? 10 : 12;
  const header = buf.toString('latin1', hoff, hoff + hlen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').filter(s => s.trim()).map(Number);
  const data = buf.subarray(hoff + hlen);
  const ab = data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength);
  const t = TYPES[descr];
  if (!t) throw new Error(`${file}: npy type ${descr}`);
  return new ort.Tensor(t[0], new t[1](ab), shape);
}

module.exports = {readNpy};
