// ONNX TensorProto <-> onnxruntime-node tensors, shared by the conformance
// scripts (ort_node.js, ort_fill.js).
'use strict';

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

// A TensorProto (raw data or the typed field) as an ort.Tensor.
function toTensor(ort, tp) {
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

// ort type -> TensorProto.DataType
const DATA_TYPE = Object.fromEntries(
    Object.entries(TYPES).filter(([, t]) => t[1]).map(([code, t]) => [t[0], Number(code)]));

module.exports = {TYPES, DATA_TYPE, toTensor};
