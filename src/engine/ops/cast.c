/* Cast and CastLike: conversion between every numeric element type, bool
 * and float16. Size (the element count as an int64 scalar) is here too: an
 * op about a tensor's type and extent, no data moved. */
#include <string.h>

#include "base/fp16.h"
#include "base/util.h"
#include "engine/ops/intmath.h"
#include "engine/ops/ops.h"

static bool castable(pr_dtype_t t) {
  return pr__is_real(t) || pr__is_integer(t) || t == PR_DTYPE_BOOL;
}

static pr_status_t infer_cast(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr__in(c, n, 0), *like = pr__in(c, n, 1);
  if (!strcmp(n->op->name, "CastLike") && !like)
    return pr__fail(c, n, PR_ERR_INVALID, "needs the target_type input");
  /* CastLike: to the element type of input 1 (whose data is not read) */
  pr_dtype_t to = like ? like->dtype : (pr_dtype_t)pr__attr_int(n->m, "to", 0);
  if (!castable(a->dtype) || !castable(to))
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "cast from %s to %s", pr_dtype_name(a->dtype),
                    pr_dtype_name(to));
  pr__value_set_shape(pr__out(c, n, 0), to, a->rank, a->dims);
  return PR_OK;
}

/* Integers convert to integers by keeping the low bits (two's complement
 * wrap, as numpy); floats to integers as ONNX Runtime on x86 (truncation,
 * then the low bits; see intmath.h). ONNX leaves both undefined. */
static void run_cast(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *a = &x->v[n->in[0]], *o = &x->v[n->out[0]];
  int64_t len = pr__value_numel(a);
  const void *in = a->ptr;
  void *out = o->ptr;
  if (a->dtype == o->dtype) {
    pr__copy(out, in, o->nbytes, x->threads);
    return;
  }
  /* integers go through int64 to keep every bit; floats through double */
  bool from_float =
      a->dtype == PR_DTYPE_FLOAT || a->dtype == PR_DTYPE_DOUBLE || a->dtype == PR_DTYPE_FLOAT16;
  for (int64_t i = 0; i < len; i++) {
    int64_t iv = 0;
    double d = 0;
    if (from_float) {
      d = pr__load_double(in, a->dtype, i);
    } else {
      iv = pr__load_int64(in, a->dtype, i);
      d = a->dtype == PR_DTYPE_UINT64 ? (double)(uint64_t)iv : (double)iv;
    }
    switch (o->dtype) {
      case PR_DTYPE_FLOAT: ((float *)out)[i] = (float)d; break;
      case PR_DTYPE_DOUBLE: ((double *)out)[i] = d; break;
      case PR_DTYPE_FLOAT16: ((uint16_t *)out)[i] = pr__float_to_half((float)d); break;
      case PR_DTYPE_INT64: ((int64_t *)out)[i] = from_float ? pr__cast_i64(d) : iv; break;
      case PR_DTYPE_UINT64:
        ((uint64_t *)out)[i] = from_float ? pr__cast_u64(d) : (uint64_t)iv;
        break;
/* the low bits of the integer, or of the float truncated into WIDE */
#define TO_INT(T, WIDE) ((T *)out)[i] = (T)(from_float ? WIDE(d) : iv)
      case PR_DTYPE_INT32: TO_INT(int32_t, pr__cast_i32); break;
      case PR_DTYPE_UINT32: TO_INT(uint32_t, pr__cast_i64); break;
      case PR_DTYPE_INT16: TO_INT(int16_t, pr__cast_i32); break;
      case PR_DTYPE_UINT16: TO_INT(uint16_t, pr__cast_i32); break;
      case PR_DTYPE_INT8: TO_INT(int8_t, pr__cast_i32); break;
      case PR_DTYPE_UINT8: TO_INT(uint8_t, pr__cast_i32); break;
#undef TO_INT
      case PR_DTYPE_BOOL: ((uint8_t *)out)[i] = from_float ? d != 0 : iv != 0; break;
      default: break;
    }
  }
}

const pr_op_t pr__op_cast = {.name = "Cast",
                             .attrs = "to,saturate",
                             .min_opset = 6,
                             .max_inputs = 1,
                             .infer = infer_cast,
                             .run = run_cast};

const pr_op_t pr__op_cast_like = {.name = "CastLike",
                                  .attrs = "saturate",
                                  .min_opset = 15,
                                  .max_inputs = 2,
                                  .infer = infer_cast,
                                  .run = run_cast};

/* ---- Size: known at compile time, a constant like Shape's output ---- */

static pr_status_t infer_size(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr__in(c, n, 0), *o = pr__out(c, n, 0);
  int64_t cnt = pr__value_numel(a);
  pr__value_set_shape(o, PR_DTYPE_INT64, 0, NULL);
  o->data = pr__aligned_alloc(sizeof(int64_t));
  if (!o->data) return PR_ERR_NOMEM;
  *(int64_t *)o->data = cnt;
  o->owns_data = true;
  o->is_const = true;
  o->kind = o->is_graph_output ? PR_VAL_OUTPUT : PR_VAL_CONST;
  o->nbytes = sizeof(int64_t);
  n->dead = true;
  return PR_OK;
}

static void run_nothing(pr_exec_t *x, pr_node_t *n) {
  (void)x, (void)n;
}

const pr_op_t pr__op_size = {.name = "Size",
                             .attrs = "",
                             .min_opset = 1,
                             .max_inputs = 1,
                             .infer = infer_size,
                             .run = run_nothing};
