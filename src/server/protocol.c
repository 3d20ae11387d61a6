/* v2 protocol codec. */
#include "server/protocol.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

static const struct {
  const char *name;
  pr_dtype_t dt;
} types[] = {{"BOOL", PR_DTYPE_BOOL},     {"UINT8", PR_DTYPE_UINT8},   {"UINT16", PR_DTYPE_UINT16},
             {"UINT32", PR_DTYPE_UINT32}, {"UINT64", PR_DTYPE_UINT64}, {"INT8", PR_DTYPE_INT8},
             {"INT16", PR_DTYPE_INT16},   {"INT32", PR_DTYPE_INT32},   {"INT64", PR_DTYPE_INT64},
             {"FP16", PR_DTYPE_FLOAT16},  {"FP32", PR_DTYPE_FLOAT},    {"FP64", PR_DTYPE_DOUBLE}};

const char *pr_proto_datatype(pr_dtype_t dt) {
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
    if (types[i].dt == dt) return types[i].name;
  return "BYTES";
}

pr_dtype_t pr_proto_dtype(const char *name) {
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
    if (!strcmp(types[i].name, name)) return types[i].dt;
  return PR_DTYPE_UNDEFINED;
}

char *pr_proto_error(const char *msg) {
  json_t *o = json_pack("{s:s}", "error", msg);
  char *s = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  return s;
}

#define FAIL(...)                        \
  do {                                   \
    snprintf(err, err_len, __VA_ARGS__); \
    goto bad;                            \
  } while (0)

/* Stores one JSON number into element i of t; 0 or -1 when not representable. */
static int store(pr_tensor_t *t, int64_t i, const json_t *v) {
  if (t->dtype == PR_DTYPE_BOOL) {
    if (!json_is_boolean(v)) return -1;
    ((uint8_t *)t->data)[i] = json_is_true(v);
    return 0;
  }
  if (!json_is_number(v)) return -1;
  double d = json_number_value(v);
  bool is_int = json_is_integer(v);
  json_int_t n = is_int ? json_integer_value(v) : 0;
  switch (t->dtype) {
    case PR_DTYPE_FLOAT: ((float *)t->data)[i] = (float)d; return 0;
    case PR_DTYPE_DOUBLE: ((double *)t->data)[i] = d; return 0;
#define INT_CASE(DT, T, LO, HI)                     \
  case DT:                                          \
    if (!is_int || n < (LO) || n > (HI)) return -1; \
    ((T *)t->data)[i] = (T)n;                       \
    return 0;
      INT_CASE(PR_DTYPE_INT64, int64_t, INT64_MIN, INT64_MAX)
      INT_CASE(PR_DTYPE_INT32, int32_t, INT32_MIN, INT32_MAX)
      INT_CASE(PR_DTYPE_INT16, int16_t, INT16_MIN, INT16_MAX)
      INT_CASE(PR_DTYPE_INT8, int8_t, INT8_MIN, INT8_MAX)
      INT_CASE(PR_DTYPE_UINT8, uint8_t, 0, UINT8_MAX)
      INT_CASE(PR_DTYPE_UINT16, uint16_t, 0, UINT16_MAX)
      INT_CASE(PR_DTYPE_UINT32, uint32_t, 0, (json_int_t)UINT32_MAX)
      INT_CASE(PR_DTYPE_UINT64, uint64_t, 0, INT64_MAX)
#undef INT_CASE
    default: return -1;
  }
}

/* Flat or nested arrays, row-major; returns elements stored or -1. */
static int64_t fill(pr_tensor_t *t, const json_t *data, int64_t at, int64_t numel, int depth) {
  if (!json_is_array(data)) return -1;
  if (depth > PR_MAX_RANK) return -1;
  size_t i;
  json_t *v;
  int64_t pos = at;
  json_array_foreach(data, i, v) {
    if (json_is_array(v)) {
      int64_t got = fill(t, v, pos, numel, depth + 1);
      if (got < 0) return -1;
      pos += got;
    } else {
      if (pos >= numel || store(t, pos, v) < 0) return -1;
      pos++;
    }
  }
  return pos - at;
}

int pr_proto_parse_infer(const pr_proto_model_t *m, const char *body, size_t len, size_t json_len,
                         pr_request_t *r, pr_proto_infer_t *q, char *err, size_t err_len) {
  memset(q, 0, sizeof *q);
  json_error_t je;
  if (json_len > len) {
    snprintf(err, err_len, "Inference-Header-Content-Length %zu exceeds the body (%zu)", json_len,
             len);
    return 400;
  }
  json_t *root = json_loadb(body, json_len, JSON_REJECT_DUPLICATES, &je);
  bool got[PR_SCHED_MAX_IO] = {0};
  size_t bin_off = json_len;
  if (!root) {
    snprintf(err, err_len, "malformed JSON: %s (line %d, column %d)", je.text, je.line, je.column);
    return 400;
  }
  if (!json_is_object(root)) FAIL("the request body must be a JSON object");
  json_t *id = json_object_get(root, "id");
  if (id) {
    if (!json_is_string(id)) FAIL("'id' must be a string");
    snprintf(q->id, sizeof q->id, "%s", json_string_value(id));
    q->has_id = true;
  }
  bool all_binary = false;
  json_t *params = json_object_get(root, "parameters");
  if (params && json_is_object(params))
    all_binary = json_is_true(json_object_get(params, "binary_data_output"));
  json_t *inputs = json_object_get(root, "inputs");
  if (!json_is_array(inputs) || json_array_size(inputs) == 0)
    FAIL("'inputs' must be a non-empty array");
  r->rows = -1;
  size_t i;
  json_t *in;
  json_array_foreach(inputs, i, in) {
    const char *name = json_string_value(json_object_get(in, "name"));
    const char *dt = json_string_value(json_object_get(in, "datatype"));
    json_t *shape = json_object_get(in, "shape");
    if (!name || !dt || !json_is_array(shape))
      FAIL("input %zu needs 'name', 'datatype' and 'shape'", i);
    int k = -1;
    for (int j = 0; j < m->n_inputs; j++)
      if (!strcmp(m->inputs[j].name, name)) k = j;
    if (k < 0) FAIL("model has no input '%s'", name);
    if (got[k]) FAIL("input '%s' given twice", name);
    got[k] = true;
    const pr_tensor_info_t *want = &m->inputs[k];
    if (pr_proto_dtype(dt) != want->dtype)
      FAIL("input '%s': datatype %s, model expects %s", name, dt, pr_proto_datatype(want->dtype));
    if ((int)json_array_size(shape) != want->rank)
      FAIL("input '%s': shape has %zu dimensions, model expects %d", name, json_array_size(shape),
           want->rank);
    pr_tensor_t *t = &r->inputs[k];
    t->dtype = want->dtype;
    t->rank = want->rank;
    size_t numel = 1;
    for (int d = 0; d < want->rank; d++) {
      json_t *dv = json_array_get(shape, (size_t)d);
      if (!json_is_integer(dv) || json_integer_value(dv) < 0)
        FAIL("input '%s': shape must hold non-negative integers", name);
      int64_t v = json_integer_value(dv);
      if (d == 0) {
        if (v < 1 || v > m->max_batch)
          FAIL("input '%s': batch %lld outside 1..%d", name, (long long)v, m->max_batch);
      } else if (want->dims[d] >= 0 && v != want->dims[d]) {
        FAIL("input '%s': dimension %d is %lld, model expects %lld", name, d, (long long)v,
             (long long)want->dims[d]);
      }
      t->dims[d] = v;
      if (pr_mul_size(numel, (size_t)v, &numel)) FAIL("input '%s' too large", name);
    }
    if (r->rows >= 0 && t->dims[0] != r->rows) FAIL("inputs disagree on the batch size");
    r->rows = (int)t->dims[0];
    size_t nbytes;
    if (pr_mul_size(numel, pr_dtype_size(t->dtype), &nbytes)) FAIL("input '%s' too large", name);
    if (!(t->data = pr_aligned_alloc(nbytes))) FAIL("out of memory");
    json_t *ip = json_object_get(in, "parameters");
    json_t *bsize = ip ? json_object_get(ip, "binary_data_size") : NULL;
    json_t *data = json_object_get(in, "data");
    if (bsize) {
      if (!json_is_integer(bsize) || (size_t)json_integer_value(bsize) != nbytes)
        FAIL("input '%s': binary_data_size must be %zu for this shape", name, nbytes);
      if (len - bin_off < nbytes)
        FAIL("input '%s': binary data shorter than binary_data_size", name);
      memcpy(t->data, body + bin_off, nbytes);
      bin_off += nbytes;
    } else {
      if (!data) FAIL("input '%s' has no 'data'", name);
      int64_t n = fill(t, data, 0, (int64_t)numel, 0);
      if (n < 0)
        FAIL("input '%s': 'data' must hold %s values that fit the datatype, as many as the shape",
             name, dt);
      if ((size_t)n != numel)
        FAIL("input '%s': 'data' has %lld values, the shape needs %zu", name, (long long)n, numel);
    }
  }
  if (bin_off != len) FAIL("%zu bytes of binary data left over", len - bin_off);
  for (int k = 0; k < m->n_inputs; k++)
    if (!got[k]) FAIL("missing input '%s'", m->inputs[k].name);
  for (int o = 0; o < m->n_outputs; o++) q->binary[o] = all_binary;
  json_t *outs = json_object_get(root, "outputs");
  if (outs) {
    if (!json_is_array(outs)) FAIL("'outputs' must be an array");
    json_t *o;
    json_array_foreach(outs, i, o) {
      const char *name = json_string_value(json_object_get(o, "name"));
      int k = -1;
      for (int j = 0; name && j < m->n_outputs; j++)
        if (!strcmp(m->outputs[j].name, name)) k = j;
      if (k < 0) FAIL("model has no output '%s'", name ? name : "(unnamed)");
      if (q->n_outputs == PR_SCHED_MAX_IO) FAIL("too many outputs requested");
      q->outputs[q->n_outputs++] = k;
      json_t *op = json_object_get(o, "parameters");
      json_t *bd = op ? json_object_get(op, "binary_data") : NULL;
      if (bd) q->binary[k] = json_is_true(bd);
    }
  }
  json_decref(root);
  return 200;
bad:
  json_decref(root);
  return 400;
}

static json_t *tensor_data(const pr_tensor_t *t) {
  int64_t n = pr_tensor_numel(t);
  json_t *a = json_array();
  for (int64_t i = 0; i < n; i++) {
    json_t *v;
    switch (t->dtype) {
      case PR_DTYPE_FLOAT: {
        float f = ((float *)t->data)[i];
        v = isfinite(f) ? json_real(f) : json_null();
        break;
      }
      case PR_DTYPE_DOUBLE: v = json_real(((double *)t->data)[i]); break;
      case PR_DTYPE_INT64: v = json_integer(((int64_t *)t->data)[i]); break;
      case PR_DTYPE_INT32: v = json_integer(((int32_t *)t->data)[i]); break;
      case PR_DTYPE_BOOL: v = json_boolean(((uint8_t *)t->data)[i]); break;
      case PR_DTYPE_UINT8: v = json_integer(((uint8_t *)t->data)[i]); break;
      case PR_DTYPE_INT8: v = json_integer(((int8_t *)t->data)[i]); break;
      default: v = json_null(); break;
    }
    json_array_append_new(a, v);
  }
  return a;
}

int pr_proto_infer_response(const pr_proto_model_t *m, const char *model_name, const char *version,
                            const pr_request_t *r, const pr_proto_infer_t *q, char **out,
                            size_t *out_len, size_t *json_len) {
  json_t *outs = json_array();
  int list[PR_SCHED_MAX_IO], n = 0;
  if (q->n_outputs) {
    memcpy(list, q->outputs, sizeof(int) * (size_t)q->n_outputs);
    n = q->n_outputs;
  } else {
    for (int o = 0; o < m->n_outputs; o++) list[n++] = o;
  }
  size_t bin_total = 0;
  for (int i = 0; i < n; i++) {
    int o = list[i];
    const pr_tensor_t *t = &r->outputs[o];
    json_t *shape = json_array();
    for (int d = 0; d < t->rank; d++) json_array_append_new(shape, json_integer(t->dims[d]));
    json_t *jo = json_pack("{s:s, s:s, s:o}", "name", m->outputs[o].name, "datatype",
                           pr_proto_datatype(t->dtype), "shape", shape);
    size_t nbytes = (size_t)pr_tensor_numel(t) * pr_dtype_size(t->dtype);
    if (q->binary[o]) {
      json_object_set_new(jo, "parameters",
                          json_pack("{s:I}", "binary_data_size", (json_int_t)nbytes));
      bin_total += nbytes;
    } else {
      json_object_set_new(jo, "data", tensor_data(t));
    }
    json_array_append_new(outs, jo);
  }
  json_t *root = json_pack("{s:s, s:s, s:o}", "model_name", model_name, "model_version", version,
                           "outputs", outs);
  if (q->has_id) json_object_set_new(root, "id", json_string(q->id));
  char *js = json_dumps(root, JSON_COMPACT);
  json_decref(root);
  if (!js) return 500;
  size_t jl = strlen(js);
  if (!bin_total) {
    *out = js;
    *out_len = jl;
    *json_len = 0;
    return 200;
  }
  char *buf = malloc(jl + bin_total);
  if (!buf) {
    free(js);
    return 500;
  }
  memcpy(buf, js, jl);
  free(js);
  size_t off = jl;
  for (int i = 0; i < n; i++) {
    int o = list[i];
    if (!q->binary[o]) continue;
    const pr_tensor_t *t = &r->outputs[o];
    size_t nbytes = (size_t)pr_tensor_numel(t) * pr_dtype_size(t->dtype);
    memcpy(buf + off, t->data, nbytes);
    off += nbytes;
  }
  *out = buf;
  *out_len = off;
  *json_len = jl;
  return 200;
}
