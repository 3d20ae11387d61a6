/* Helpers shared by the op files (common.c): axes, numpy broadcasting,
 * typed element loads, copies. */
#ifndef PR_ENGINE_OPS_COMMON_H
#define PR_ENGINE_OPS_COMMON_H

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/fp16.h"
#include "engine/graph.h"
#include "engine/ops/intmath.h"

/* Below this many elements one thread is faster than a parallel loop. */
#define PR_PAR_MIN 16384

/* Normalize axis into [0, rank); returns -1 when out of range. */
static inline int pr__axis(int64_t axis, int rank) {
  if (axis < -rank || axis >= (rank ? rank : 1)) return -1;
  return (int)(axis < 0 ? axis + rank : axis);
}

/* Numpy broadcast of two shapes into out; returns -1 when incompatible. */
int pr__broadcast_shape(int ra, const int64_t *a, int rb, const int64_t *b, int *ro, int64_t *o);

/* Output 0 of n: element type dtype, the shapes of a and b broadcast. */
pr_status_t pr__shape_broadcast(pr_compile_t *c, pr_node_t *n, const pr_value_t *a,
                                const pr_value_t *b, pr_dtype_t dtype);

/* Inputs from..n_in-1 of n, all of input from's element type, broadcast
 * together into out (rank *ro, dims od); fails naming the node. */
pr_status_t pr__broadcast_inputs(pr_compile_t *c, pr_node_t *n, int from, int *ro, int64_t *od);

/* Element strides of v broadcast to an output of rank r and dims d (0 on
 * broadcast axes), and the offset in v of output element i. */
static inline void pr__bcast_strides(const pr_value_t *v, int r, const int64_t *d, int64_t *st) {
  assert(v->rank <= r && r <= PR_MAX_RANK);
  int64_t e = 1;
  for (int k = r - 1; k >= 0; k--) {
    int kv = k - (r - v->rank);
    int64_t dv = kv >= 0 ? v->dims[kv] : 1;
    st[k] = dv == 1 && d[k] != 1 ? 0 : e;
    e *= dv;
  }
}
static inline int64_t pr__bcast_offset(int64_t i, int r, const int64_t *d, const int64_t *st) {
  int64_t off = 0;
  for (int k = r - 1; k >= 0; k--) {
    off += (i % d[k]) * st[k];
    i /= d[k];
  }
  return off;
}

/* FLOAT, DOUBLE or FLOAT16: the types the real-valued kernels take. */
static inline bool pr__is_real(pr_dtype_t t) {
  return t == PR_DTYPE_FLOAT || t == PR_DTYPE_DOUBLE || t == PR_DTYPE_FLOAT16;
}

/* The signed and unsigned integer types, 8 to 64 bits. */
static inline bool pr__is_integer(pr_dtype_t t) {
  switch (t) {
    case PR_DTYPE_INT8:
    case PR_DTYPE_INT16:
    case PR_DTYPE_INT32:
    case PR_DTYPE_INT64:
    case PR_DTYPE_UINT8:
    case PR_DTYPE_UINT16:
    case PR_DTYPE_UINT32:
    case PR_DTYPE_UINT64: return true;
    default: return false;
  }
}

/* Stores v as element i of a FLOAT, DOUBLE or FLOAT16 tensor (the inverse
 * of pr__load_double for those types). */
static inline void pr__store_real(void *p, pr_dtype_t t, int64_t i, double v) {
  if (t == PR_DTYPE_FLOAT)
    ((float *)p)[i] = (float)v;
  else if (t == PR_DTYPE_DOUBLE)
    ((double *)p)[i] = v;
  else
    ((uint16_t *)p)[i] = pr__float_to_half((float)v);
}

/* Stores v as element i of a numeric tensor of type t: floats rounded,
 * integers truncated toward zero and saturated to the type's range, NaN
 * to 0 (pr__sat_int). Bool and other types are not numeric: an assert. */
static inline void pr__store_double(void *p, pr_dtype_t t, int64_t i, double v) {
  switch (t) {
    case PR_DTYPE_FLOAT: ((float *)p)[i] = (float)v; break;
    case PR_DTYPE_DOUBLE: ((double *)p)[i] = v; break;
    case PR_DTYPE_FLOAT16: ((uint16_t *)p)[i] = pr__float_to_half((float)v); break;
    case PR_DTYPE_INT8: ((int8_t *)p)[i] = (int8_t)pr__sat_int(v, INT8_MIN, INT8_MAX); break;
    case PR_DTYPE_INT16: ((int16_t *)p)[i] = (int16_t)pr__sat_int(v, INT16_MIN, INT16_MAX); break;
    case PR_DTYPE_INT32: ((int32_t *)p)[i] = (int32_t)pr__sat_int(v, INT32_MIN, INT32_MAX); break;
    case PR_DTYPE_INT64: ((int64_t *)p)[i] = pr__sat_i64(v); break;
    case PR_DTYPE_UINT8: ((uint8_t *)p)[i] = (uint8_t)pr__sat_int(v, 0, UINT8_MAX); break;
    case PR_DTYPE_UINT16: ((uint16_t *)p)[i] = (uint16_t)pr__sat_int(v, 0, UINT16_MAX); break;
    case PR_DTYPE_UINT32: ((uint32_t *)p)[i] = (uint32_t)pr__sat_int(v, 0, UINT32_MAX); break;
    case PR_DTYPE_UINT64: ((uint64_t *)p)[i] = pr__sat_u64(v); break;
    default: assert(0 && "pr__store_double: element type");
  }
}

/* Element i of a tensor of type t as a double (integers, bool, floats,
 * float16). Inline: kernels call it per element. */
static inline double pr__load_double(const void *p, pr_dtype_t t, int64_t i) {
  switch (t) {
    case PR_DTYPE_FLOAT: return ((const float *)p)[i];
    case PR_DTYPE_DOUBLE: return ((const double *)p)[i];
    case PR_DTYPE_FLOAT16: return pr__half_to_float(((const uint16_t *)p)[i]);
    case PR_DTYPE_INT32: return ((const int32_t *)p)[i];
    case PR_DTYPE_INT16: return ((const int16_t *)p)[i];
    case PR_DTYPE_INT8: return ((const int8_t *)p)[i];
    case PR_DTYPE_UINT8:
    case PR_DTYPE_BOOL: return ((const uint8_t *)p)[i];
    case PR_DTYPE_UINT16: return ((const uint16_t *)p)[i];
    case PR_DTYPE_UINT32: return ((const uint32_t *)p)[i];
    case PR_DTYPE_INT64: return (double)((const int64_t *)p)[i];
    case PR_DTYPE_UINT64: return (double)((const uint64_t *)p)[i];
    default: return 0;
  }
}

/* Element i of a tensor of an integer type or bool as an int64 (UINT64
 * reinterpreted: values of 2^63 and more come out negative); 0 for others. */
static inline int64_t pr__load_int64(const void *p, pr_dtype_t t, int64_t i) {
  switch (t) {
    case PR_DTYPE_INT64:
    case PR_DTYPE_UINT64: return ((const int64_t *)p)[i];
    case PR_DTYPE_INT32: return ((const int32_t *)p)[i];
    case PR_DTYPE_INT16: return ((const int16_t *)p)[i];
    case PR_DTYPE_INT8: return ((const int8_t *)p)[i];
    case PR_DTYPE_UINT8:
    case PR_DTYPE_BOOL: return ((const uint8_t *)p)[i];
    case PR_DTYPE_UINT16: return ((const uint16_t *)p)[i];
    case PR_DTYPE_UINT32: return ((const uint32_t *)p)[i];
    default: return 0;
  }
}

/* Output 0 of n: input 0's element type and shape. */
pr_status_t pr__shape_same(pr_compile_t *c, pr_node_t *n);
/* Same rank and dims (element types not compared). */
bool pr__same_shape(const pr_value_t *a, const pr_value_t *b);

/* Parallel memcpy for large buffers. */
void pr__copy(void *dst, const void *src, size_t n, int threads);
/* Kernel of the view ops: output 0 = input 0, copied unless the buffers are
 * shared. */
void pr__run_copy(pr_exec_t *x, pr_node_t *n);

/* Run-time indices: count int32 or int64 values at idx (type t), index i
 * into an axis of lens[i % n_lens] elements (n_lens > 1: the positions of
 * GatherND's index tuples). True when every one lies in [-len, len - 1];
 * otherwise false, the first one outside reported through pr__run_fail
 * ("index 70000 out of range [-50000, 49999]"). */
bool pr__run_indices_ok(pr_exec_t *x, const pr_node_t *n, const void *idx, pr_dtype_t t,
                        int64_t count, const int64_t *lens, int n_lens);

#endif
