/* v2 protocol codec. See protocol.h for the two-pass design. */
#include "server/protocol.h"

#include <assert.h>
#include <errno.h>
#include <grpc/status.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_parse.h>

#include "base/fp16.h"
#include "base/text.h"
#include "base/util.h"

/* ---- request parsing ---- */

/* Where a JSON value sits in an infer request. */
typedef enum {
  C_SKIP, /* not ours: any value, ignored */
  C_ROOT,
  C_ID,
  C_PARAMS,   /* root "parameters" */
  C_BDO,      /* parameters.binary_data_output */
  C_PRIORITY, /* parameters.priority */
  C_TIMEOUT,  /* parameters.timeout (microseconds) */
  C_INPUTS,   /* "inputs" array */
  C_INPUT,    /* one input object */
  C_IN_NAME,
  C_IN_DTYPE,
  C_IN_SHAPE,
  C_IN_DIM,
  C_IN_PARAMS,
  C_IN_BSIZE, /* inputs[i].parameters.binary_data_size */
  C_IN_DATA,  /* inputs[i].data */
  C_DATA,     /* any value inside "data" */
  C_OUTPUTS,
  C_OUTPUT,
  C_OUT_NAME,
  C_OUT_PARAMS,
  C_OUT_BD, /* outputs[j].parameters.binary_data */
} ctx_t;

/* Object keys that mean something here; each may appear once per object. */
static const char *const keys[] = {
    "id",          "parameters", "inputs", "outputs",          "name",
    "datatype",    "shape",      "data",   "binary_data_size", "binary_data_output",
    "binary_data", "priority",   "timeout"};
enum {
  K_ID,
  K_PARAMS,
  K_INPUTS,
  K_OUTPUTS,
  K_NAME,
  K_DTYPE,
  K_SHAPE,
  K_DATA,
  K_BSIZE,
  K_BDO,
  K_BD,
  K_PRIORITY,
  K_TIMEOUT,
  K_COUNT,
  K_OTHER = K_COUNT
};

#define MAX_DEPTH (PR_MAX_RANK + 8)

typedef struct {
  ctx_t ctx;
  bool array;
  int key;       /* objects: the current key (K_*) */
  unsigned seen; /* objects: keys met so far (bit per K_*) */
  int64_t count; /* arrays: elements so far */
} frame_t;

typedef struct {
  char *name, dtype[16];
  int rank;
  int64_t dims[PR_MAX_RANK];
  bool has_data, has_bsize;
  int64_t bsize;
  int k; /* model input index, after pass 1 */
} in_t;

typedef struct {
  char *name;
  bool has_bd, bd;
} out_t;

typedef struct {
  const pr_proto_model_t *m;
  int pass;
  frame_t stack[MAX_DEPTH];
  int depth;
  char *err;
  size_t err_len;
  bool failed;
  pr_proto_infer_t *q;
  bool all_binary;
  in_t in[PR_SCHED_MAX_IO];
  int n_in;
  out_t out[PR_SCHED_MAX_IO];
  int n_out;
  size_t max_values;       /* values the JSON text can still hold (all inputs together) */
  size_t max_bytes, bytes; /* tensor bytes allowed (0: any) and taken */
  pr_status_t status;      /* of a failure: PR_ERR_INVALID, or PR_ERR_BUSY over max_bytes
                            * or out of memory */
  /* pass 2: the "data" being streamed */
  pr_request_t *r;
  pr_tensor_t *t;
  int64_t pos, numel;
  int mode;  /* 0 undecided, 1 flat, 2 nested */
  int level; /* arrays of "data" open, minus one */
  const in_t *cur;
  int in_seen;
} parser_t;

static int fail(parser_t *p, const char *fmt, ...) {
  if (!p->failed) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err, p->err_len, fmt, ap);
    va_end(ap);
    p->failed = true;
  }
  return 0; /* yajl: cancel */
}

/* The context of the value that comes next. */
static ctx_t where(const parser_t *p) {
  if (p->depth == 0) return C_ROOT;
  const frame_t *f = &p->stack[p->depth - 1];
  switch (f->ctx) {
    case C_ROOT:
      return f->key == K_ID        ? C_ID
             : f->key == K_PARAMS  ? C_PARAMS
             : f->key == K_INPUTS  ? C_INPUTS
             : f->key == K_OUTPUTS ? C_OUTPUTS
                                   : C_SKIP;
    case C_PARAMS:
      return f->key == K_BDO        ? C_BDO
             : f->key == K_PRIORITY ? C_PRIORITY
             : f->key == K_TIMEOUT  ? C_TIMEOUT
                                    : C_SKIP;
    case C_INPUTS: return C_INPUT;
    case C_OUTPUTS: return C_OUTPUT;
    case C_INPUT:
      return f->key == K_NAME     ? C_IN_NAME
             : f->key == K_DTYPE  ? C_IN_DTYPE
             : f->key == K_SHAPE  ? C_IN_SHAPE
             : f->key == K_PARAMS ? C_IN_PARAMS
             : f->key == K_DATA   ? C_IN_DATA
                                  : C_SKIP;
    case C_OUTPUT:
      return f->key == K_NAME ? C_OUT_NAME : f->key == K_PARAMS ? C_OUT_PARAMS : C_SKIP;
    case C_IN_SHAPE: return C_IN_DIM;
    case C_IN_PARAMS: return f->key == K_BSIZE ? C_IN_BSIZE : C_SKIP;
    case C_OUT_PARAMS: return f->key == K_BD ? C_OUT_BD : C_SKIP;
    case C_IN_DATA:
    case C_DATA: return C_DATA;
    default: return C_SKIP;
  }
}

static const char *what(ctx_t c) {
  switch (c) {
    case C_ROOT: return "the request body";
    case C_ID: return "'id'";
    case C_PARAMS: return "'parameters'";
    case C_BDO: return "'binary_data_output'";
    case C_PRIORITY: return "'priority'";
    case C_TIMEOUT: return "'timeout'";
    case C_INPUTS: return "'inputs'";
    case C_INPUT: return "each input";
    case C_IN_NAME: return "an input's 'name'";
    case C_IN_DTYPE: return "an input's 'datatype'";
    case C_IN_SHAPE: return "an input's 'shape'";
    case C_IN_DIM: return "each dimension of 'shape'";
    case C_IN_PARAMS: return "an input's 'parameters'";
    case C_IN_BSIZE: return "'binary_data_size'";
    case C_IN_DATA: return "'data'";
    case C_OUTPUTS: return "'outputs'";
    case C_OUTPUT: return "each output";
    case C_OUT_NAME: return "an output's 'name'";
    case C_OUT_PARAMS: return "an output's 'parameters'";
    case C_OUT_BD: return "'binary_data'";
    default: return "a value";
  }
}

/* Counts the value in its parent array. */
static void next_value(parser_t *p) {
  if (p->depth && p->stack[p->depth - 1].array) p->stack[p->depth - 1].count++;
}

static int push(parser_t *p, ctx_t c, bool array) {
  if (p->depth == MAX_DEPTH) return fail(p, "the request nests deeper than %d levels", MAX_DEPTH);
  p->stack[p->depth++] = (frame_t){.ctx = c, .array = array, .key = K_OTHER};
  return 1;
}

/* Parses an integer written by JSON (no fraction or exponent). */
static bool parse_int(const char *s, size_t l, int64_t *v) {
  char buf[32];
  if (l == 0 || l >= sizeof buf || memchr(s, '.', l) || memchr(s, 'e', l) || memchr(s, 'E', l))
    return false;
  memcpy(buf, s, l);
  buf[l] = 0;
  errno = 0;
  long long x = strtoll(buf, NULL, 10);
  if (errno) return false;
  *v = x;
  return true;
}

/* ---- pass 2: one data value into element p->pos of p->t ---- */

static int data_fail(parser_t *p, const char *why) {
  return fail(p, "input '%s': %s", p->cur->name, why);
}

static int store_float(parser_t *p, double d) {
  void *at = p->t->data;
  switch (p->t->dtype) {
    case PR_DTYPE_FLOAT: ((float *)at)[p->pos] = (float)d; break;
    case PR_DTYPE_DOUBLE: ((double *)at)[p->pos] = d; break;
    case PR_DTYPE_FLOAT16: ((uint16_t *)at)[p->pos] = pr__double_to_half(d); break;
    default: return data_fail(p, "'data' holds a value that does not fit the datatype");
  }
  p->pos++;
  return 1;
}

static int store_number(parser_t *p, const char *s, size_t l) {
  pr_dtype_t dt = p->t->dtype;
  char buf[64];
  if (dt == PR_DTYPE_FLOAT || dt == PR_DTYPE_DOUBLE || dt == PR_DTYPE_FLOAT16) {
    /* a long number (many digits or zeros) is read whole, from a copy */
    char *text = l < sizeof buf ? buf : malloc(l + 1);
    if (!text) return fail(p, "out of memory");
    memcpy(text, s, l);
    text[l] = 0;
    int rc;
    if (dt == PR_DTYPE_FLOAT) {
      errno = 0;
      float f = strtof(text, NULL); /* rounded once, to float */
      rc = isfinite(f) ? (((float *)p->t->data)[p->pos++] = f, 1) : -1;
    } else {
      double d = strtod(text, NULL);
      if (!isfinite(d) || (dt == PR_DTYPE_FLOAT16 && fabs(d) > 65519.0))
        rc = -1; /* 65520 and up round to infinity in half precision */
      else
        rc = store_float(p, d);
    }
    if (text != buf) free(text);
    if (rc < 0) return data_fail(p, "'data' holds a number out of the datatype's range");
    return rc;
  }
  if (dt == PR_DTYPE_BOOL) return data_fail(p, "'data' of a BOOL input must hold true or false");
  if (memchr(s, '.', l) || memchr(s, 'e', l) || memchr(s, 'E', l))
    return data_fail(p, "'data' of an integer input must hold integers");
  if (l >= sizeof buf) /* JSON has no leading zeros: 64 digits are out of any range */
    return data_fail(p, "'data' holds an integer out of the datatype's range");
  memcpy(buf, s, l);
  buf[l] = 0;
  void *at = p->t->data;
  errno = 0;
  if (dt == PR_DTYPE_UINT64 || dt == PR_DTYPE_UINT32 || dt == PR_DTYPE_UINT16 ||
      dt == PR_DTYPE_UINT8) {
    unsigned long long u = strtoull(buf, NULL, 10);
    unsigned long long hi = dt == PR_DTYPE_UINT64   ? UINT64_MAX
                            : dt == PR_DTYPE_UINT32 ? UINT32_MAX
                            : dt == PR_DTYPE_UINT16 ? UINT16_MAX
                                                    : UINT8_MAX;
    if (errno || buf[0] == '-' || u > hi)
      return data_fail(p, "'data' holds an integer out of the datatype's range");
    if (dt == PR_DTYPE_UINT64) ((uint64_t *)at)[p->pos] = u;
    if (dt == PR_DTYPE_UINT32) ((uint32_t *)at)[p->pos] = (uint32_t)u;
    if (dt == PR_DTYPE_UINT16) ((uint16_t *)at)[p->pos] = (uint16_t)u;
    if (dt == PR_DTYPE_UINT8) ((uint8_t *)at)[p->pos] = (uint8_t)u;
  } else {
    long long v = strtoll(buf, NULL, 10);
    long long lo = dt == PR_DTYPE_INT64   ? INT64_MIN
                   : dt == PR_DTYPE_INT32 ? INT32_MIN
                   : dt == PR_DTYPE_INT16 ? INT16_MIN
                                          : INT8_MIN;
    long long hi = dt == PR_DTYPE_INT64   ? INT64_MAX
                   : dt == PR_DTYPE_INT32 ? INT32_MAX
                   : dt == PR_DTYPE_INT16 ? INT16_MAX
                                          : INT8_MAX;
    if (errno || v < lo || v > hi)
      return data_fail(p, "'data' holds an integer out of the datatype's range");
    if (dt == PR_DTYPE_INT64) ((int64_t *)at)[p->pos] = v;
    if (dt == PR_DTYPE_INT32) ((int32_t *)at)[p->pos] = (int32_t)v;
    if (dt == PR_DTYPE_INT16) ((int16_t *)at)[p->pos] = (int16_t)v;
    if (dt == PR_DTYPE_INT8) ((int8_t *)at)[p->pos] = (int8_t)v;
  }
  p->pos++;
  return 1;
}

/* A scalar inside "data": flat data has them at level 0 only, nested data at
 * the innermost level only. */
static int data_scalar(parser_t *p) {
  if (p->mode == 0) p->mode = p->level == 0 ? 1 : 2;
  int want = p->mode == 1 ? 0 : p->t->rank - 1;
  if (p->level != want || p->pos >= p->numel)
    return data_fail(p, "'data' does not match the shape (flat, or nested as the shape says)");
  return 1;
}

/* ---- yajl callbacks ---- */

/* Counts a scalar in its parent; pass 2 reads nothing but "data" (pass 1
 * checked the rest), so everything else is skipped there. */
static int on_scalar(parser_t *p, ctx_t *c) {
  *c = where(p);
  next_value(p);
  if (p->failed) return 0;
  if (p->pass == 2 && *c != C_DATA) *c = C_SKIP;
  if (*c == C_DATA && p->pass == 2) return data_scalar(p);
  return 1;
}

static int cb_null(void *ctx) {
  parser_t *p = ctx;
  ctx_t c;
  if (!on_scalar(p, &c)) return 0;
  if (c == C_SKIP || (c == C_DATA && p->pass == 1)) return 1;
  if (c == C_DATA) return data_fail(p, "'data' holds null");
  return fail(p, "%s must not be null", what(c));
}

static int cb_bool(void *ctx, int b) {
  parser_t *p = ctx;
  ctx_t c;
  if (!on_scalar(p, &c)) return 0;
  switch (c) {
    case C_SKIP: return 1;
    case C_BDO: p->all_binary = b; return 1;
    case C_OUT_BD:
      p->out[p->n_out - 1].has_bd = true;
      p->out[p->n_out - 1].bd = b;
      return 1;
    case C_DATA:
      if (p->pass == 1) return 1;
      if (p->t->dtype != PR_DTYPE_BOOL) return data_fail(p, "'data' holds a boolean");
      ((uint8_t *)p->t->data)[p->pos++] = (uint8_t)(b != 0);
      return 1;
    default: return fail(p, "%s must not be a boolean", what(c));
  }
}

static int cb_number(void *ctx, const char *s, size_t l) {
  parser_t *p = ctx;
  ctx_t c;
  if (!on_scalar(p, &c)) return 0;
  int64_t v;
  switch (c) {
    case C_SKIP: return 1;
    case C_IN_DIM: {
      in_t *in = &p->in[p->n_in - 1];
      if (in->rank == PR_MAX_RANK)
        return fail(p, "a shape has more than %d dimensions", PR_MAX_RANK);
      if (!parse_int(s, l, &v) || v < 0) return fail(p, "'shape' must hold non-negative integers");
      in->dims[in->rank++] = v;
      return 1;
    }
    case C_IN_BSIZE: {
      in_t *in = &p->in[p->n_in - 1];
      if (!parse_int(s, l, &v) || v < 0)
        return fail(p, "'binary_data_size' must be a non-negative integer");
      in->has_bsize = true;
      in->bsize = v;
      return 1;
    }
    case C_PRIORITY:
      if (!parse_int(s, l, &v) || v < 0 || v > INT_MAX) return fail(p, "%s", PR_PRIORITY_RANGE);
      p->q->priority = (int)v;
      return 1;
    case C_TIMEOUT:
      if (!parse_int(s, l, &v) || v < 0)
        return fail(p, "'timeout' must be a non-negative integer (microseconds)");
      p->q->timeout_us = v;
      return 1;
    case C_DATA: return p->pass == 1 ? 1 : store_number(p, s, l);
    default: return fail(p, "%s must not be a number", what(c));
  }
}

static char *dup_text(const unsigned char *s, size_t l) {
  char *d = malloc(l + 1);
  if (d) memcpy(d, s, l), d[l] = 0;
  return d;
}

/* Pass 1 keeps a copy of the text in *dst (pass 2 finds it there). */
static int keep_text(parser_t *p, char **dst, const unsigned char *s, size_t l) {
  if (p->pass == 2) return 1;
  if (!(*dst = dup_text(s, l))) return fail(p, "out of memory");
  return 1;
}

static int cb_string(void *ctx, const unsigned char *s, size_t l) {
  parser_t *p = ctx;
  ctx_t c;
  if (!on_scalar(p, &c)) return 0;
  if (c != C_SKIP && c != C_DATA && (memchr(s, 0, l) || !pr__utf8_valid((const char *)s, l)))
    return fail(p, "%s must be valid UTF-8 without NUL characters", what(c));
  switch (c) {
    case C_SKIP: return 1;
    case C_ID: return keep_text(p, &p->q->id, s, l);
    case C_IN_NAME: return keep_text(p, &p->in[p->n_in - 1].name, s, l);
    case C_IN_DTYPE: {
      char *d = p->in[p->n_in - 1].dtype;
      size_t n = l < 15 ? l : 15;
      memcpy(d, s, n);
      d[n] = 0;
      if (l > 15) d[0] = '?'; /* no datatype is that long */
      return 1;
    }
    case C_OUT_NAME: return keep_text(p, &p->out[p->n_out - 1].name, s, l);
    case C_DATA: {
      if (p->pass == 1) return 1;
      double d = 0;
      if (l == 3 && !memcmp(s, "NaN", 3))
        d = NAN;
      else if (l == 8 && !memcmp(s, "Infinity", 8))
        d = INFINITY;
      else if (l == 9 && !memcmp(s, "-Infinity", 9))
        d = -INFINITY;
      else
        return data_fail(p,
                         "'data' holds a string other than \"NaN\", \"Infinity\", \"-Infinity\"");
      return store_float(p, d);
    }
    default: return fail(p, "%s must not be a string", what(c));
  }
}

static int cb_start(parser_t *p, bool array) {
  ctx_t c = where(p);
  next_value(p);
  if (p->failed) return 0;
  bool want_array = c == C_INPUTS || c == C_OUTPUTS || c == C_IN_SHAPE || c == C_IN_DATA;
  bool want_object = c == C_ROOT || c == C_PARAMS || c == C_INPUT || c == C_OUTPUT ||
                     c == C_IN_PARAMS || c == C_OUT_PARAMS;
  if ((want_array && !array) || (want_object && array) ||
      (!want_array && !want_object && c != C_SKIP && c != C_DATA))
    return fail(p, "%s must be %s", what(c),
                want_array                                                          ? "an array"
                : want_object                                                       ? "an object"
                : c == C_IN_DIM || c == C_IN_BSIZE                                  ? "an integer"
                : c == C_ID || c == C_IN_NAME || c == C_IN_DTYPE || c == C_OUT_NAME ? "a string"
                                                                                    : "a boolean");
  if (c == C_INPUT) {
    if (p->pass == 1) {
      if (p->n_in == PR_SCHED_MAX_IO) return fail(p, "more than %d inputs", PR_SCHED_MAX_IO);
      p->in[p->n_in++] = (in_t){.k = -1};
    } else {
      p->cur = &p->in[p->in_seen++];
    }
  }
  if (c == C_OUTPUT && p->pass == 1) {
    if (p->n_out == PR_SCHED_MAX_IO) return fail(p, "too many outputs requested");
    p->out[p->n_out++] = (out_t){0};
  }
  if (c == C_IN_SHAPE && p->pass == 1) p->in[p->n_in - 1].rank = 0;
  if (c == C_DATA && !array) return fail(p, "'data' must hold numbers, booleans or arrays");
  if (c == C_IN_DATA && p->pass == 1) p->in[p->n_in - 1].has_data = true;
  if (c == C_IN_DATA && p->pass == 2) {
    p->t = &p->r->inputs[p->cur->k];
    p->numel = pr_tensor_numel(p->t);
    p->pos = 0;
    p->mode = 0;
    p->level = 0;
  }
  return push(p, c, array);
}

static int cb_start_map(void *ctx) {
  return cb_start(ctx, false);
}

static int cb_start_array(void *ctx) {
  parser_t *p = ctx;
  ctx_t c = where(p);
  if (p->pass == 2 && c == C_DATA) {
    /* a nested level of "data" */
    if (p->mode == 0) p->mode = 2;
    if (p->mode != 2 || p->level + 1 >= p->t->rank)
      return next_value(p), data_fail(p,
                                      "'data' does not match the shape (flat, or nested as the "
                                      "shape says)");
    next_value(p);
    p->level++;
    return push(p, C_DATA, true);
  }
  return cb_start(p, true);
}

static int cb_map_key(void *ctx, const unsigned char *s, size_t l) {
  parser_t *p = ctx;
  frame_t *f = &p->stack[p->depth - 1];
  f->key = K_OTHER;
  for (int k = 0; k < K_COUNT; k++)
    if (strlen(keys[k]) == l && !memcmp(keys[k], s, l)) f->key = k;
  if (f->ctx == C_SKIP || f->key == K_OTHER) return 1;
  if (f->seen & (1u << f->key)) return fail(p, "duplicate key '%s'", keys[f->key]);
  f->seen |= 1u << f->key;
  return 1;
}

static int cb_end(void *ctx) {
  parser_t *p = ctx;
  frame_t *f = &p->stack[--p->depth];
  if (p->pass == 2 && (f->ctx == C_IN_DATA || f->ctx == C_DATA)) {
    /* nested data: every level holds exactly its dimension */
    if (p->mode == 2 && f->count != p->t->dims[p->level])
      return data_fail(p, "'data' does not match the shape (flat, or nested as the shape says)");
    if (f->ctx == C_DATA) p->level--;
    if (f->ctx == C_IN_DATA && p->pos != p->numel)
      return fail(p, "input '%s': 'data' has %lld values, the shape needs %lld", p->cur->name,
                  (long long)p->pos, (long long)p->numel);
  }
  return 1;
}

static const yajl_callbacks callbacks = {
    .yajl_null = cb_null,
    .yajl_boolean = cb_bool,
    .yajl_number = cb_number,
    .yajl_string = cb_string,
    .yajl_start_map = cb_start_map,
    .yajl_map_key = cb_map_key,
    .yajl_end_map = cb_end,
    .yajl_start_array = cb_start_array,
    .yajl_end_array = cb_end,
};

/* One pass of yajl over the JSON text; 0 or -1 with p->err set. */
static int run_pass(parser_t *p, const char *text, size_t len) {
  p->depth = 0;
  yajl_handle h = yajl_alloc(&callbacks, NULL, p);
  if (!h) return fail(p, "out of memory"), -1;
  yajl_status st = yajl_parse(h, (const unsigned char *)text, len);
  if (st == yajl_status_ok) st = yajl_complete_parse(h);
  if (st != yajl_status_ok && !p->failed) {
    unsigned char *e = yajl_get_error(h, 0, (const unsigned char *)text, len);
    char msg[128];
    snprintf(msg, sizeof msg, "%s", e ? (const char *)e : "parse error");
    msg[strcspn(msg, "\n")] = 0;
    if (e) yajl_free_error(h, e);
    fail(p, "malformed JSON: %s (at byte %zu)", msg, yajl_get_bytes_consumed(h));
  }
  yajl_free(h);
  return p->failed ? -1 : 0;
}

/* Checks pass 1's view of input i against the model and sizes its tensor. */
static int check_input(parser_t *p, int i, pr_request_t *r) {
  in_t *in = &p->in[i];
  if (!in->name || !in->dtype[0] || !in->rank)
    return fail(p, "input %d needs 'name', 'datatype' and a non-empty 'shape'", i), -1;
  const char *name = in->name;
  size_t numel, nbytes;
  if (pr__proto_input_check(p->m, name, in->dtype, in->rank, in->dims, r, &in->k, &numel, &nbytes,
                            p->err, p->err_len))
    return p->failed = true, -1;
  if (in->has_bsize && in->has_data)
    return fail(p, "input '%s' has both 'data' and binary_data_size", name), -1;
  if (!in->has_bsize && !in->has_data) return fail(p, "input '%s' has no 'data'", name), -1;
  if (in->has_bsize && (uint64_t)in->bsize != nbytes)
    return fail(p, "input '%s': binary_data_size must be %zu for this shape", name, nbytes), -1;
  /* JSON numbers take at least two bytes each ("0,"): a short body cannot
   * fill large tensors, so refuse before allocating them */
  if (in->has_data && numel > 0 && numel - 1 > p->max_values)
    return fail(p, "input '%s': 'data' has fewer values than the shape needs", name), -1;
  if (in->has_data) p->max_values -= numel ? numel - 1 : 0;
  /* binary tensors are views into the body (take_inputs), except BOOL,
   * whose bytes are normalized into a copy */
  if (!in->has_data && r->inputs[in->k].dtype != PR_DTYPE_BOOL) return 0;
  pr_status_t st =
      pr__proto_input_alloc(r, in->k, nbytes, p->max_bytes, &p->bytes, p->err, p->err_len);
  if (st) p->status = st, p->failed = true;
  return st ? -1 : 0;
}

/* Checks and sizes every input (check_input) and takes the binary ones from
 * the bytes after the JSON header: views into the body (r->borrowed), BOOL
 * copied with every non-zero byte made 1; -1 with the message set. */
static int take_inputs(parser_t *p, const char *body, size_t len, size_t json_len,
                       pr_request_t *r) {
  const pr_proto_model_t *m = p->m;
  if (p->n_in == 0) return fail(p, "'inputs' must be a non-empty array"), -1;
  r->rows = -1;
  p->max_values = json_len / 2;
  size_t bin_off = json_len;
  for (int i = 0; i < p->n_in; i++) {
    if (check_input(p, i, r)) return -1;
    in_t *in = &p->in[i];
    if (!in->has_bsize) continue;
    size_t nbytes = (size_t)in->bsize;
    if (len - bin_off < nbytes)
      return fail(p, "input '%s': binary data shorter than binary_data_size", in->name), -1;
    pr_tensor_t *t = &r->inputs[in->k];
    if (t->dtype == PR_DTYPE_BOOL) { /* one byte each: any non-zero is true */
      for (size_t b = 0; b < nbytes; b++) ((uint8_t *)t->data)[b] = body[bin_off + b] != 0;
    } else {
      assert(!t->data);
      t->data = (void *)(body + bin_off); /* read only: the scheduler copies rows out */
      r->borrowed |= 1u << in->k;
    }
    bin_off += nbytes;
  }
  if (bin_off != len) return fail(p, "%zu bytes of binary data left over", len - bin_off), -1;
  if (pr__proto_inputs_complete(m, r, p->err, p->err_len)) return p->failed = true, -1;
  return 0;
}

/* The requested outputs (none: all) and which of them answer in binary into
 * q; -1 with the message set. */
static int take_outputs(parser_t *p, pr_proto_infer_t *q) {
  const pr_proto_model_t *m = p->m;
  for (int o = 0; o < m->n_outputs; o++) q->binary[o] = p->all_binary;
  for (int j = 0; j < p->n_out; j++) {
    int k;
    if (pr__proto_output_take(m, p->out[j].name, q, &k, p->err, p->err_len))
      return p->failed = true, -1;
    if (p->out[j].has_bd) q->binary[k] = p->out[j].bd;
  }
  return 0;
}

/* Pass 1 (everything but "data"), the checks against the model, then pass 2
 * ("data" into the tensors) when any input has it; -1 with the message set. */
static int parse_body(parser_t *p, const char *body, size_t len, size_t json_len, pr_request_t *r,
                      pr_proto_infer_t *q) {
  if (run_pass(p, body, json_len) || take_inputs(p, body, len, json_len, r) || take_outputs(p, q))
    return -1;
  bool any_data = false;
  for (int i = 0; i < p->n_in; i++) any_data |= p->in[i].has_data;
  if (!any_data) return 0;
  p->pass = 2;
  p->r = r;
  return run_pass(p, body, json_len);
}

pr_status_t pr__proto_parse_infer(const pr_proto_model_t *m, const char *body, size_t len,
                                  size_t json_len, size_t max_bytes, pr_request_t *r,
                                  pr_proto_infer_t *q, char *err, size_t err_len) {
  memset(q, 0, sizeof *q);
  if (json_len > len) {
    snprintf(err, err_len, "Inference-Header-Content-Length %zu exceeds the body (%zu)", json_len,
             len);
    return PR_ERR_INVALID;
  }
  parser_t *p = calloc(1, sizeof *p);
  if (!p) {
    snprintf(err, err_len, "out of memory; retry later");
    return PR_ERR_BUSY;
  }
  p->m = m;
  p->q = q;
  p->err = err;
  p->err_len = err_len;
  p->pass = 1;
  p->max_bytes = max_bytes;
  p->status = PR_ERR_INVALID;
  pr_status_t st = parse_body(p, body, len, json_len, r, q) ? p->status : PR_OK;
  for (int i = 0; i < p->n_in; i++) free(p->in[i].name);
  for (int j = 0; j < p->n_out; j++) free(p->out[j].name);
  free(p);
  return st;
}

void pr__proto_infer_clear(pr_proto_infer_t *q) {
  free(q->id);
  q->id = NULL;
}

/* ---- responses ---- */

#define GEN_OK(x) ((x) == yajl_gen_status_ok)

static bool gen_text(yajl_gen g, const char *s) {
  return GEN_OK(yajl_gen_string(g, (const unsigned char *)s, strlen(s)));
}

static bool gen_float(yajl_gen g, double d, const char *fmt) {
  if (isnan(d)) return gen_text(g, "NaN");
  if (isinf(d)) return gen_text(g, d > 0 ? "Infinity" : "-Infinity");
  /* "-0" reads back as the integer 0: keep the sign */
  if (d == 0 && signbit(d)) return GEN_OK(yajl_gen_number(g, "-0.0", 4));
  char num[40];
  int n = snprintf(num, sizeof num, fmt, d);
  return GEN_OK(yajl_gen_number(g, num, (size_t)n));
}

static bool gen_int(yajl_gen g, long long v) {
  char num[24];
  int n = snprintf(num, sizeof num, "%lld", v);
  return GEN_OK(yajl_gen_number(g, num, (size_t)n));
}

static bool gen_uint(yajl_gen g, unsigned long long v) {
  char num[24];
  int n = snprintf(num, sizeof num, "%llu", v);
  return GEN_OK(yajl_gen_number(g, num, (size_t)n));
}

/* Every element of t as a flat JSON array. */
static bool gen_data(yajl_gen g, const pr_tensor_t *t) {
  int64_t n = pr_tensor_numel(t);
  const void *d = t->data;
  bool ok = GEN_OK(yajl_gen_array_open(g));
  for (int64_t i = 0; ok && i < n; i++) {
    switch (t->dtype) {
      case PR_DTYPE_FLOAT: ok = gen_float(g, ((const float *)d)[i], "%.9g"); break;
      case PR_DTYPE_DOUBLE: ok = gen_float(g, ((const double *)d)[i], "%.17g"); break;
      case PR_DTYPE_FLOAT16:
        ok = gen_float(g, pr__half_to_float(((const uint16_t *)d)[i]), "%.9g");
        break;
      case PR_DTYPE_BOOL: ok = GEN_OK(yajl_gen_bool(g, ((const uint8_t *)d)[i] != 0)); break;
      case PR_DTYPE_INT8: ok = gen_int(g, ((const int8_t *)d)[i]); break;
      case PR_DTYPE_INT16: ok = gen_int(g, ((const int16_t *)d)[i]); break;
      case PR_DTYPE_INT32: ok = gen_int(g, ((const int32_t *)d)[i]); break;
      case PR_DTYPE_INT64: ok = gen_int(g, ((const int64_t *)d)[i]); break;
      case PR_DTYPE_UINT8: ok = gen_uint(g, ((const uint8_t *)d)[i]); break;
      case PR_DTYPE_UINT16: ok = gen_uint(g, ((const uint16_t *)d)[i]); break;
      case PR_DTYPE_UINT32: ok = gen_uint(g, ((const uint32_t *)d)[i]); break;
      case PR_DTYPE_UINT64: ok = gen_uint(g, ((const uint64_t *)d)[i]); break;
      default: ok = false; break; /* the server refuses models with other output types */
    }
  }
  return ok && GEN_OK(yajl_gen_array_close(g));
}

static size_t tensor_bytes(const pr_tensor_t *t) {
  return (size_t)pr_tensor_numel(t) * pr_dtype_size(t->dtype);
}

pr_status_t pr__proto_infer_response(const pr_proto_model_t *m, const char *model_name,
                                     const char *version, const pr_request_t *r,
                                     const pr_proto_infer_t *q, char **out, size_t *out_len,
                                     size_t *json_len) {
  int list[PR_SCHED_MAX_IO], n = 0;
  if (q->n_outputs) {
    memcpy(list, q->outputs, sizeof(int) * (size_t)q->n_outputs);
    n = q->n_outputs;
  } else {
    for (int o = 0; o < m->n_outputs; o++) list[n++] = o;
  }
  yajl_gen g = yajl_gen_alloc(NULL);
  if (!g) return PR_ERR_NOMEM;
  yajl_gen_config(g, yajl_gen_validate_utf8, 1);
  size_t bin_total = 0;
  bool ok = GEN_OK(yajl_gen_map_open(g)) && gen_text(g, "model_name") && gen_text(g, model_name) &&
            gen_text(g, "model_version") && gen_text(g, version);
  if (ok && q->id) ok = gen_text(g, "id") && gen_text(g, q->id);
  ok = ok && gen_text(g, "outputs") && GEN_OK(yajl_gen_array_open(g));
  for (int i = 0; ok && i < n; i++) {
    int o = list[i];
    const pr_tensor_t *t = &r->outputs[o];
    ok = GEN_OK(yajl_gen_map_open(g)) && gen_text(g, "name") && gen_text(g, m->outputs[o].name) &&
         gen_text(g, "datatype") && gen_text(g, pr__proto_datatype(t->dtype)) &&
         gen_text(g, "shape") && GEN_OK(yajl_gen_array_open(g));
    for (int d = 0; ok && d < t->rank; d++) ok = gen_int(g, t->dims[d]);
    ok = ok && GEN_OK(yajl_gen_array_close(g));
    if (ok && q->binary[o]) {
      ok = gen_text(g, "parameters") && GEN_OK(yajl_gen_map_open(g)) &&
           gen_text(g, "binary_data_size") && gen_uint(g, tensor_bytes(t)) &&
           GEN_OK(yajl_gen_map_close(g));
      bin_total += tensor_bytes(t);
    } else if (ok) {
      ok = gen_text(g, "data") && gen_data(g, t);
    }
    ok = ok && GEN_OK(yajl_gen_map_close(g));
  }
  ok = ok && GEN_OK(yajl_gen_array_close(g)) && GEN_OK(yajl_gen_map_close(g));
  const unsigned char *js;
  size_t jl = 0;
  char *buf = NULL;
  if (ok && GEN_OK(yajl_gen_get_buf(g, &js, &jl))) buf = malloc(jl + bin_total + 1);
  if (buf) {
    memcpy(buf, js, jl);
    size_t off = jl;
    for (int i = 0; i < n; i++) {
      int o = list[i];
      if (!q->binary[o]) continue;
      memcpy(buf + off, r->outputs[o].data, tensor_bytes(&r->outputs[o]));
      off += tensor_bytes(&r->outputs[o]);
    }
    buf[off] = 0;
    *out = buf;
    *out_len = off;
    *json_len = bin_total ? jl : 0;
  }
  yajl_gen_free(g);
  return !ok ? PR_ERR_INTERNAL : buf ? PR_OK : PR_ERR_NOMEM;
}

int pr__proto_http_status(pr_status_t st) {
  switch (st) {
    case PR_OK: return 200;
    case PR_ERR_INVALID:
    case PR_ERR_UNSUPPORTED: return 400;
    case PR_ERR_UNAUTHORIZED: return 401;
    case PR_ERR_FORBIDDEN: return 403;
    case PR_ERR_NOT_FOUND: return 404;
    case PR_ERR_METHOD: return 405;
    case PR_ERR_TOO_LARGE: return 413;
    case PR_ERR_URI_TOO_LONG: return 414;
    case PR_ERR_CANCELLED: return 499; /* nginx's: the client closed the request */
    case PR_ERR_CODING: return 501;
    case PR_ERR_BUSY:
    case PR_ERR_MODEL_UNAVAILABLE: return 503;
    case PR_ERR_TIMEOUT: return 504;
    default: return 500; /* PR_ERR_IO, PR_ERR_NOMEM, PR_ERR_INTERNAL */
  }
}

int pr__proto_grpc_status(pr_status_t st) {
  switch (st) {
    case PR_OK: return GRPC_STATUS_OK;
    case PR_ERR_INVALID:
    case PR_ERR_UNSUPPORTED:
    case PR_ERR_URI_TOO_LONG: return GRPC_STATUS_INVALID_ARGUMENT;
    case PR_ERR_UNAUTHORIZED: return GRPC_STATUS_UNAUTHENTICATED;
    case PR_ERR_FORBIDDEN: return GRPC_STATUS_PERMISSION_DENIED;
    case PR_ERR_NOT_FOUND: return GRPC_STATUS_NOT_FOUND;
    case PR_ERR_METHOD:
    case PR_ERR_CODING: return GRPC_STATUS_UNIMPLEMENTED;
    case PR_ERR_TOO_LARGE:
    case PR_ERR_NOMEM: return GRPC_STATUS_RESOURCE_EXHAUSTED;
    case PR_ERR_BUSY: return GRPC_STATUS_UNAVAILABLE;
    case PR_ERR_MODEL_UNAVAILABLE: return GRPC_STATUS_FAILED_PRECONDITION;
    case PR_ERR_TIMEOUT: return GRPC_STATUS_DEADLINE_EXCEEDED;
    case PR_ERR_CANCELLED: return GRPC_STATUS_CANCELLED;
    default: return GRPC_STATUS_INTERNAL; /* PR_ERR_IO, PR_ERR_INTERNAL */
  }
}

char *pr__proto_error(const char *msg) {
  char clean[1024];
  pr__utf8_sanitize(msg ? msg : "", clean, sizeof clean);
  char *out = NULL;
  yajl_gen g = yajl_gen_alloc(NULL);
  const unsigned char *js;
  size_t jl;
  if (g && GEN_OK(yajl_gen_map_open(g)) && gen_text(g, "error") && gen_text(g, clean) &&
      GEN_OK(yajl_gen_map_close(g)) && GEN_OK(yajl_gen_get_buf(g, &js, &jl)))
    out = dup_text(js, jl);
  if (g) yajl_gen_free(g);
  return out;
}
