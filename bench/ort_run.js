// ONNX Runtime (npm onnxruntime-node, CPU) timing for one model, thread
// count and input: warm-up, then REPEAT timed runs; prints one JSON line.
// usage: node ort_run.js MODEL.onnx INPUT.npy THREADS REPEAT
'use strict';
const fs = require('fs');
const npy = require(require('path').join(__dirname, '..', 'tools', 'npy.js'));
const ort = require('onnxruntime-node');


async function main() {
  const [model, input, threads, repeat] = process.argv.slice(2);
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: Number(threads),
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  const feeds = {[session.inputNames[0]]: npy.readNpy(ort, input)};
  for (let i = 0; i < 2; i++) await session.run(feeds);
  const times = [];
  for (let i = 0; i < Number(repeat); i++) {
    const t0 = process.hrtime.bigint();
    await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  times.sort((a, b) => a - b);
  const n = times.length;
  const median = n % 2 ? times[(n - 1) / 2] : (times[n / 2 - 1] + times[n / 2]) / 2;
  console.log(JSON.stringify({median_ms: median, min_ms: times[0]}));
}
main().catch(e => { console.error(e.message); process.exit(1); });
