/* Cast, Range, ReduceMean/ReduceSum/ReduceMax and Slice. */
#include <math.h>
#include <string.h>

#include "base/fp16.h"
#include "base/util.h"
#include "engine/ops/intmath.h"
#include "engine/ops/ops.h"

static void destroy_free(void *p) {
  free(p);
}

/* ---- Cast ---- */

static bool castable(pr_dtype_t t) {
  switch (t) {
    case PR_DTYPE_FLOAT:
    case PR_DTYPE_DOUBLE:
    case PR_DTYPE_FLOAT16:
    case PR_DTYPE_INT64:
    case PR_DTYPE_INT32:
    case PR_DTYPE_INT16:
    case PR_DTYPE_INT8:
    case PR_DTYPE_UINT8:
    case PR_DTYPE_UINT16:
    case PR_DTYPE_UINT32:
    case PR_DTYPE_UINT64:
    case PR_DTYPE_BOOL: return true;
    default: return false;
  }
}

static pr_status_t infer_cast(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr_in(c, n, 0);
  pr_dtype_t to = (pr_dtype_t)pr_attr_int(n->m, "to", 0);
  if (!castable(a->dtype) || !castable(to))
    return pr_fail(c, n, PR_ERR_UNSUPPORTED, "cast from %s to %s", pr_dtype_name(a->dtype),
                   pr_dtype_name(to));
  pr_value_set_shape(pr_out(c, n, 0), to, a->rank, a->dims);
  return PR_OK;
}

double pr_load_double(const void *p, pr_dtype_t t, int64_t i) {
  switch (t) {
    case PR_DTYPE_FLOAT: return ((const float *)p)[i];
    case PR_DTYPE_DOUBLE: return ((const double *)p)[i];
    case PR_DTYPE_FLOAT16: return pr_half_to_float(((const uint16_t *)p)[i]);
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

int64_t pr_load_int64(const void *p, pr_dtype_t t, int64_t i) {
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

/* Integers convert to integers by keeping the low bits (two's complement
 * wrap, as numpy); floats to integers saturate to the target's range and NaN
 * gives 0 (ONNX leaves both undefined, C makes the second undefined). */
static void run_cast(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *a = &x->v[n->in[0]], *o = &x->v[n->out[0]];
  int64_t len = pr_value_numel(a);
  const void *in = a->ptr;
  void *out = o->ptr;
  if (a->dtype == o->dtype) {
    pr_copy(out, in, o->nbytes, x->threads);
    return;
  }
  /* integers go through int64 to keep every bit; floats through double */
  bool from_float =
      a->dtype == PR_DTYPE_FLOAT || a->dtype == PR_DTYPE_DOUBLE || a->dtype == PR_DTYPE_FLOAT16;
  for (int64_t i = 0; i < len; i++) {
    int64_t iv = 0;
    double d = 0;
    if (from_float) {
      d = pr_load_double(in, a->dtype, i);
    } else {
      iv = pr_load_int64(in, a->dtype, i);
      d = a->dtype == PR_DTYPE_UINT64 ? (double)(uint64_t)iv : (double)iv;
    }
    switch (o->dtype) {
      case PR_DTYPE_FLOAT: ((float *)out)[i] = (float)d; break;
      case PR_DTYPE_DOUBLE: ((double *)out)[i] = d; break;
      case PR_DTYPE_FLOAT16: ((uint16_t *)out)[i] = pr_float_to_half((float)d); break;
      case PR_DTYPE_INT64: ((int64_t *)out)[i] = from_float ? pr_sat_i64(d) : iv; break;
      case PR_DTYPE_UINT64: ((uint64_t *)out)[i] = from_float ? pr_sat_u64(d) : (uint64_t)iv; break;
      case PR_DTYPE_INT32:
        ((int32_t *)out)[i] = (int32_t)(from_float ? pr_sat_int(d, INT32_MIN, INT32_MAX) : iv);
        break;
      case PR_DTYPE_UINT32:
        ((uint32_t *)out)[i] = (uint32_t)(from_float ? pr_sat_int(d, 0, UINT32_MAX) : iv);
        break;
      case PR_DTYPE_INT16:
        ((int16_t *)out)[i] = (int16_t)(from_float ? pr_sat_int(d, INT16_MIN, INT16_MAX) : iv);
        break;
      case PR_DTYPE_UINT16:
        ((uint16_t *)out)[i] = (uint16_t)(from_float ? pr_sat_int(d, 0, UINT16_MAX) : iv);
        break;
      case PR_DTYPE_INT8:
        ((int8_t *)out)[i] = (int8_t)(from_float ? pr_sat_int(d, INT8_MIN, INT8_MAX) : iv);
        break;
      case PR_DTYPE_UINT8:
        ((uint8_t *)out)[i] = (uint8_t)(from_float ? pr_sat_int(d, 0, UINT8_MAX) : iv);
        break;
      case PR_DTYPE_BOOL: ((uint8_t *)out)[i] = from_float ? d != 0 : iv != 0; break;
      default: break;
    }
  }
}

const pr_op_t pr_op_cast = {.name = "Cast",
                            .attrs = "to,saturate",
                            .min_opset = 6,
                            .max_inputs = 1,
                            .infer = infer_cast,
                            .run = run_cast};

/* ---- Range: folded (its length depends on the values) ---- */

/* Elements of an int64 Range, counted exactly (a double rounds values near
 * the ends, and the count it gave could run past the limit and overflow). */
static int64_t range_len_i64(int64_t start, int64_t limit, int64_t delta) {
  if (delta > 0 ? limit <= start : limit >= start) return 0;
  uint64_t span = delta > 0 ? (uint64_t)limit - (uint64_t)start : (uint64_t)start - (uint64_t)limit;
  uint64_t step = delta > 0 ? (uint64_t)delta : (uint64_t)0 - (uint64_t)delta;
  uint64_t len = (span - 1) / step + 1;
  return len > INT64_MAX ? INT64_MAX : (int64_t)len;
}

static pr_status_t infer_range(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *s = pr_in(c, n, 0), *l = pr_in(c, n, 1), *d = pr_in(c, n, 2);
  if (!s || !l || !d || !s->is_const || !l->is_const || !d->is_const)
    return pr_fail(c, n, PR_ERR_UNSUPPORTED,
                   "start, limit and delta must be known when the session is made");
  if (s->dtype != l->dtype || s->dtype != d->dtype || pr_value_numel(s) != 1 ||
      pr_value_numel(l) != 1 || pr_value_numel(d) != 1)
    return pr_fail(c, n, PR_ERR_INVALID, "start, limit and delta must be scalars of one type");
  int64_t len;
  if (s->dtype == PR_DTYPE_INT64) {
    int64_t delta = *(const int64_t *)d->data;
    if (delta == 0) return pr_fail(c, n, PR_ERR_INVALID, "delta is zero");
    len = range_len_i64(*(const int64_t *)s->data, *(const int64_t *)l->data, delta);
  } else {
    switch (s->dtype) {
      case PR_DTYPE_FLOAT:
      case PR_DTYPE_DOUBLE:
      case PR_DTYPE_INT32:
      case PR_DTYPE_INT16: break;
      default: return pr_fail(c, n, PR_ERR_UNSUPPORTED, "Range of %s", pr_dtype_name(s->dtype));
    }
    double start = pr_load_double(s->data, s->dtype, 0),
           limit = pr_load_double(l->data, l->dtype, 0),
           delta = pr_load_double(d->data, d->dtype, 0);
    if (delta == 0) return pr_fail(c, n, PR_ERR_INVALID, "delta is zero");
    double cnt = ceil((limit - start) / delta); /* exact for 32-bit integers */
    len = !(cnt > 0) ? 0 : cnt > (1 << 28) ? INT64_MAX : (int64_t)cnt; /* NaN: 0 */
  }
  if (len > (1 << 28)) return pr_fail(c, n, PR_ERR_INVALID, "range too long");
  pr_value_set_shape(pr_out(c, n, 0), s->dtype, 1, &len);
  return PR_OK;
}

static void run_range(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *s = &x->v[n->in[0]], *d = &x->v[n->in[2]], *o = &x->v[n->out[0]];
  int64_t len = o->dims[0];
  for (int64_t i = 0; i < len; i++) switch (o->dtype) {
      case PR_DTYPE_INT64: /* start + i * delta stays in range; wrapping keeps it defined */
        ((int64_t *)o->ptr)[i] =
            pr_i64_add(*(const int64_t *)s->ptr, pr_i64_mul(i, *(const int64_t *)d->ptr));
        break;
      case PR_DTYPE_INT32:
        ((int32_t *)o->ptr)[i] = (int32_t)(*(const int32_t *)s->ptr + i * *(const int32_t *)d->ptr);
        break;
      case PR_DTYPE_INT16:
        ((int16_t *)o->ptr)[i] = (int16_t)(*(const int16_t *)s->ptr + i * *(const int16_t *)d->ptr);
        break;
      case PR_DTYPE_FLOAT:
        ((float *)o->ptr)[i] = *(const float *)s->ptr + (float)i * *(const float *)d->ptr;
        break;
      default:
        ((double *)o->ptr)[i] = *(const double *)s->ptr + (double)i * *(const double *)d->ptr;
        break;
    }
}

const pr_op_t pr_op_range = {.name = "Range",
                             .attrs = "",
                             .min_opset = 11,
                             .max_inputs = 3,
                             .infer = infer_range,
                             .run = run_range};

/* ---- ReduceMean / ReduceSum / ReduceMax ---- */

typedef enum { R_MEAN, R_SUM, R_MAX } reduce_kind_t;

typedef struct {
  reduce_kind_t kind;
  bool reduce[PR_MAX_RANK];
  int64_t ostride[PR_MAX_RANK]; /* output element stride of each input axis (0: reduced) */
  /* contiguous block fast path: outer x red x inner */
  bool block;
  int64_t outer, red, inner;
} reduce_state_t;

static pr_status_t reduce_axes(pr_compile_t *c, pr_node_t *n, const pr_value_t *a, bool *reduce) {
  int64_t axes[PR_MAX_RANK];
  int na = -1;
  bool from_input = !strcmp(n->op->name, "ReduceSum") ? c->opset >= 13 : c->opset >= 18;
  if (from_input) {
    pr_value_t *av = pr_in(c, n, 1);
    if (!av || pr_value_numel(av) == 0)
      na = 0;
    else if ((na = pr_const_ints(av, axes, PR_MAX_RANK)) < 0)
      return pr_fail(c, n, PR_ERR_UNSUPPORTED, "axes must be constant");
  } else {
    const int64_t *v;
    na = pr_attr_ints(n->m, "axes", &v);
    if (na > PR_MAX_RANK) return pr_fail(c, n, PR_ERR_INVALID, "too many axes");
    for (int i = 0; i < na; i++) axes[i] = v[i];
  }
  for (int k = 0; k < a->rank; k++) reduce[k] = false;
  if (na == 0) {
    bool noop = pr_attr_int(n->m, "noop_with_empty_axes", 0) != 0;
    for (int k = 0; k < a->rank; k++) reduce[k] = !noop;
    return PR_OK;
  }
  for (int i = 0; i < na; i++) {
    int ax = pr_axis(axes[i], a->rank);
    if (ax < 0) return pr_fail(c, n, PR_ERR_INVALID, "axis %lld out of range", (long long)axes[i]);
    reduce[ax] = true;
  }
  return PR_OK;
}

static pr_status_t infer_reduce(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr_in(c, n, 0);
  if (a->dtype != PR_DTYPE_FLOAT && a->dtype != PR_DTYPE_INT32 && a->dtype != PR_DTYPE_INT64)
    return pr_fail(c, n, PR_ERR_UNSUPPORTED, "element type %s (FLOAT, INT32, INT64 are)",
                   pr_dtype_name(a->dtype));
  bool reduce[PR_MAX_RANK];
  pr_status_t st = reduce_axes(c, n, a, reduce);
  if (st) return st;
  bool keep = pr_attr_int(n->m, "keepdims", 1) != 0;
  int64_t d[PR_MAX_RANK];
  int r = 0;
  for (int k = 0; k < a->rank; k++) {
    if (!reduce[k])
      d[r++] = a->dims[k];
    else if (keep)
      d[r++] = 1;
  }
  pr_value_set_shape(pr_out(c, n, 0), a->dtype, r, d);
  return PR_OK;
}

static pr_status_t prepare_reduce(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr_in(c, n, 0);
  reduce_state_t *s = calloc(1, sizeof *s);
  if (!s) return PR_ERR_NOMEM;
  n->state = s;
  s->kind = !strcmp(n->op->name, "ReduceMean")  ? R_MEAN
            : !strcmp(n->op->name, "ReduceSum") ? R_SUM
                                                : R_MAX;
  pr_status_t st = reduce_axes(c, n, a, s->reduce);
  if (st) return st;
  int first = -1, last = -1;
  for (int k = 0; k < a->rank; k++)
    if (s->reduce[k] && a->dims[k] != 1) {
      if (first < 0) first = k;
      last = k;
    }
  int64_t e = 1;
  for (int k = a->rank - 1; k >= 0; k--) {
    s->ostride[k] = s->reduce[k] ? 0 : e;
    if (!s->reduce[k]) e *= a->dims[k];
  }
  s->block = true;
  for (int k = first; first >= 0 && k <= last; k++) s->block &= s->reduce[k] || a->dims[k] == 1;
  s->outer = s->red = s->inner = 1;
  for (int k = 0; k < a->rank; k++) {
    if (first < 0 || k < first)
      s->outer *= a->dims[k];
    else if (k <= last)
      s->red *= a->dims[k];
    else
      s->inner *= a->dims[k];
  }
  return PR_OK;
}

/* Integer reductions, accumulated in the element type (as numpy's sum of
 * that type) and wrapping on overflow (intmath.h); the mean is that sum
 * divided by the count, truncated toward zero. */
// clang-format off
#define REDUCE_INT(T, ADD)                                                                        \
  static void reduce_##T(const reduce_state_t *s, const pr_value_t *a, const pr_value_t *o) {    \
    const T *in = a->ptr;                                                                         \
    T *out = o->ptr;                                                                              \
    int64_t on = pr_value_numel(o), len = pr_value_numel(a), count = len / (on ? on : 1);         \
    for (int64_t i = 0; i < on; i++) out[i] = 0;                                                  \
    for (int64_t i = 0; i < len; i++) {                                                           \
      int64_t rem = i, off = 0, first = 1;                                                        \
      for (int k = a->rank - 1; k >= 0; k--) {                                                    \
        int64_t idx = rem % a->dims[k];                                                           \
        off += idx * s->ostride[k];                                                               \
        if (s->reduce[k] && idx) first = 0;                                                       \
        rem /= a->dims[k];                                                                        \
      }                                                                                           \
      if (s->kind == R_MAX) /* the first value of each output starts its max */                  \
        out[off] = first || in[i] > out[off] ? in[i] : out[off];                                  \
      else                                                                                        \
        out[off] = ADD(out[off], in[i]);                                                          \
    }                                                                                             \
    if (s->kind == R_MEAN && count)                                                               \
      for (int64_t i = 0; i < on; i++) out[i] = (T)((int64_t)out[i] / count);                     \
  }
REDUCE_INT(int32_t, pr_i32_add)
REDUCE_INT(int64_t, pr_i64_add)
// clang-format on

static void run_reduce(pr_exec_t *x, pr_node_t *n) {
  const reduce_state_t *s = n->state;
  const pr_value_t *a = &x->v[n->in[0]], *o = &x->v[n->out[0]];
  if (a->dtype != PR_DTYPE_FLOAT) {
    if (a->dtype == PR_DTYPE_INT32)
      reduce_int32_t(s, a, o);
    else
      reduce_int64_t(s, a, o);
    return;
  }
  const float *in = a->ptr;
  float *out = o->ptr;
  if (s->block) {
    int64_t outer = s->outer, red = s->red, inner = s->inner;
#pragma omp parallel for num_threads(x->threads) if (outer * red * inner > 16384)
    for (int64_t i = 0; i < outer; i++) {
      float *po = out + i * inner;
      const float *pi = in + i * red * inner;
      for (int64_t j = 0; j < inner; j++) po[j] = s->kind == R_MAX ? -INFINITY : 0.f;
      for (int64_t r = 0; r < red; r++)
        for (int64_t j = 0; j < inner; j++) {
          float v = pi[r * inner + j];
          po[j] = s->kind == R_MAX ? (v > po[j] ? v : po[j]) : po[j] + v;
        }
      if (s->kind == R_MEAN)
        for (int64_t j = 0; j < inner; j++) po[j] /= (float)red;
    }
    return;
  }
  /* general axes: every input element lands in its output element */
  int64_t on = pr_value_numel(o), count = pr_value_numel(a) / (on ? on : 1);
  for (int64_t i = 0; i < on; i++) out[i] = s->kind == R_MAX ? -INFINITY : 0.f;
  int64_t len = pr_value_numel(a);
  for (int64_t i = 0; i < len; i++) {
    int64_t rem = i, off = 0;
    for (int k = a->rank - 1; k >= 0; k--) {
      off += (rem % a->dims[k]) * s->ostride[k];
      rem /= a->dims[k];
    }
    out[off] = s->kind == R_MAX ? fmaxf(out[off], in[i]) : out[off] + in[i];
  }
  if (s->kind == R_MEAN)
    for (int64_t i = 0; i < on; i++) out[i] /= (float)count;
}

#define REDUCE_OP(sym, oname)                                                 \
  const pr_op_t pr_op_##sym = {.name = oname,                                 \
                               .attrs = "axes,keepdims,noop_with_empty_axes", \
                               .min_opset = 1,                                \
                               .max_inputs = 2,                               \
                               .infer = infer_reduce,                         \
                               .prepare = prepare_reduce,                     \
                               .run = run_reduce,                             \
                               .destroy = destroy_free};
REDUCE_OP(reduce_mean, "ReduceMean")
REDUCE_OP(reduce_sum, "ReduceSum")
REDUCE_OP(reduce_max, "ReduceMax")

/* ---- Slice ---- */

typedef struct {
  int rank;
  int64_t start[PR_MAX_RANK], step[PR_MAX_RANK];
} slice_state_t;

static pr_status_t slice_params(pr_compile_t *c, pr_node_t *n, slice_state_t *s,
                                int64_t *out_dims) {
  pr_value_t *a = pr_in(c, n, 0);
  int64_t starts[PR_MAX_RANK], ends[PR_MAX_RANK], axes[PR_MAX_RANK], steps[PR_MAX_RANK];
  int ns, ne, na = -1, nt = -1;
  if (c->opset < 10) {
    const int64_t *v;
    ns = pr_attr_ints(n->m, "starts", &v);
    for (int i = 0; i < ns && i < PR_MAX_RANK; i++) starts[i] = v[i];
    ne = pr_attr_ints(n->m, "ends", &v);
    for (int i = 0; i < ne && i < PR_MAX_RANK; i++) ends[i] = v[i];
    if (pr_attr_find(n->m, "axes")) {
      na = pr_attr_ints(n->m, "axes", &v);
      for (int i = 0; i < na && i < PR_MAX_RANK; i++) axes[i] = v[i];
    }
  } else {
    ns = pr_const_ints(pr_in(c, n, 1), starts, PR_MAX_RANK);
    ne = pr_const_ints(pr_in(c, n, 2), ends, PR_MAX_RANK);
    if (pr_in(c, n, 3)) na = pr_const_ints(pr_in(c, n, 3), axes, PR_MAX_RANK);
    if (pr_in(c, n, 4)) nt = pr_const_ints(pr_in(c, n, 4), steps, PR_MAX_RANK);
    if (ns < 0 || ne < 0 || (pr_in(c, n, 3) && na < 0) || (pr_in(c, n, 4) && nt < 0))
      return pr_fail(c, n, PR_ERR_UNSUPPORTED, "starts, ends, axes and steps must be constant");
  }
  if (ns != ne || ns > a->rank || (na >= 0 && na != ns) || (nt >= 0 && nt != ns))
    return pr_fail(c, n, PR_ERR_INVALID, "starts, ends, axes and steps must have one length");
  s->rank = a->rank;
  for (int k = 0; k < a->rank; k++) s->start[k] = 0, s->step[k] = 1, out_dims[k] = a->dims[k];
  bool seen[PR_MAX_RANK] = {0};
  for (int i = 0; i < ns; i++) {
    int ax = na >= 0 ? pr_axis(axes[i], a->rank) : i;
    if (ax < 0 || seen[ax]) return pr_fail(c, n, PR_ERR_INVALID, "bad or repeated axis");
    seen[ax] = true;
    int64_t dim = a->dims[ax], step = nt >= 0 ? steps[i] : 1, st = starts[i], en = ends[i];
    if (step == 0) return pr_fail(c, n, PR_ERR_INVALID, "step is zero");
    if (st < 0) st += dim;
    if (en < 0) en += dim;
    if (step > 0) {
      st = st < 0 ? 0 : st > dim ? dim : st;
      en = en < 0 ? 0 : en > dim ? dim : en;
      /* (n - 1) / step + 1 elements, in unsigned: a step near INT64_MAX must not overflow */
      out_dims[ax] = en > st ? (int64_t)((uint64_t)(en - st - 1) / (uint64_t)step + 1) : 0;
    } else {
      st = st < 0 ? -1 : st > dim - 1 ? dim - 1 : st;
      en = en < -1 ? -1 : en > dim - 1 ? dim - 1 : en;
      out_dims[ax] =
          st > en ? (int64_t)((uint64_t)(st - en - 1) / ((uint64_t)0 - (uint64_t)step) + 1) : 0;
    }
    s->start[ax] = st;
    s->step[ax] = step;
  }
  return PR_OK;
}

static pr_status_t infer_slice(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr_in(c, n, 0);
  slice_state_t s;
  int64_t d[PR_MAX_RANK];
  pr_status_t st = slice_params(c, n, &s, d);
  if (st) return st;
  pr_value_set_shape(pr_out(c, n, 0), a->dtype, a->rank, d);
  return PR_OK;
}

static pr_status_t prepare_slice(pr_compile_t *c, pr_node_t *n) {
  slice_state_t *s = calloc(1, sizeof *s);
  if (!s) return PR_ERR_NOMEM;
  n->state = s;
  int64_t d[PR_MAX_RANK];
  return slice_params(c, n, s, d);
}

static void run_slice(pr_exec_t *x, pr_node_t *n) {
  const slice_state_t *s = n->state;
  const pr_value_t *a = &x->v[n->in[0]], *o = &x->v[n->out[0]];
  size_t es = pr_dtype_size(a->dtype);
  int r = a->rank;
  if (!o->nbytes) return;
  int64_t in_st[PR_MAX_RANK], e = 1;
  for (int k = r - 1; k >= 0; k--) in_st[k] = e, e *= a->dims[k];
  int64_t inner = r ? o->dims[r - 1] : 1, rows = pr_value_numel(o) / (inner ? inner : 1);
  const char *in = a->ptr;
  char *out = o->ptr;
#pragma omp parallel for num_threads(x->threads) if (rows * inner > 65536)
  for (int64_t row = 0; row < rows; row++) {
    int64_t rem = row, off = 0;
    for (int k = r - 2; k >= 0; k--) {
      off += (s->start[k] + (rem % o->dims[k]) * s->step[k]) * in_st[k];
      rem /= o->dims[k];
    }
    char *po = out + row * inner * (int64_t)es;
    if (r == 0) {
      memcpy(po, in, es);
    } else if (s->step[r - 1] == 1) {
      memcpy(po, in + (off + s->start[r - 1]) * (int64_t)es, (size_t)inner * es);
    } else {
      for (int64_t j = 0; j < inner; j++)
        memcpy(po + j * (int64_t)es,
               in + (off + s->start[r - 1] + j * s->step[r - 1]) * (int64_t)es, es);
    }
  }
}

const pr_op_t pr_op_slice = {.name = "Slice",
                             .attrs = "starts,ends,axes",
                             .min_opset = 1,
                             .max_inputs = 5,
                             .infer = infer_slice,
                             .prepare = prepare_slice,
                             .run = run_slice,
                             .destroy = destroy_free};
