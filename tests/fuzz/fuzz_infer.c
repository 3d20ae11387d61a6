/* libFuzzer target: arbitrary bytes as an infer request body, JSON or JSON
 * header plus binary tensor data (the v2 binary extension). Parsing must
 * either succeed with tensors that agree with the model, or fail with a 400
 * and a message; a parsed request is then answered (its outputs mirror its
 * inputs) and the response must be well formed and say exactly what the
 * tensors hold. Never a crash, leak or undefined behaviour.
 *
 * Only protocol.h's declared API is used, so the target outlives rewrites of
 * protocol.c.
 *
 * Input layout: byte 0 picks the model's inputs (bit i: input i of the table
 * below; 0: all of them), bytes 1-2 (little-endian v) the JSON header's
 * length: v = 0, the whole body is JSON; else json_len = (v - 1) % (len + 2),
 * so len + 1 (beyond the body) is reachable too. The body follows.
 * tests/fuzz/server_seeds.py writes seeds in this layout. FUZZ_VERBOSE=1 in
 * the environment prints each input's status and error. */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fp16.h"
#include "base/util.h"
#include "server/protocol.h"

/* Input i's output is "<output name>", same datatype and shape. "x" and
 * "input" are the e2e tests' mlp and ResNet-50 inputs ("input" at 4x4 instead
 * of 224x224, so that binary seeds stay small). */
static const struct {
  const char *input, *output;
  pr_dtype_t dtype;
  int rank;
  int64_t dims[4];
} io[] = {
    {"x", "y", PR_DTYPE_FLOAT, 2, {-1, 4}},
    {"input", "output", PR_DTYPE_FLOAT, 4, {-1, 3, 4, 4}},
    {"ids", "ids_out", PR_DTYPE_INT64, 2, {-1, 5}},
    {"mask", "mask_out", PR_DTYPE_BOOL, 2, {-1, 5}},
    {"pixels", "pixels_out", PR_DTYPE_UINT8, 3, {-1, 2, 3}},
    {"half", "half_out", PR_DTYPE_FLOAT16, 2, {-1, 3}},
    {"scores", "scores_out", PR_DTYPE_DOUBLE, 2, {-1, 2}},
};
#define N_IO ((int)(sizeof io / sizeof io[0]))
#define MAX_BATCH 8

#define CHECK(cond, ...)                          \
  do {                                            \
    if (!(cond)) {                                \
      fprintf(stderr, "fuzz_infer: %s: ", #cond); \
      fprintf(stderr, __VA_ARGS__);               \
      fprintf(stderr, "\n");                      \
      abort();                                    \
    }                                             \
  } while (0)

static void make_model(unsigned pick, pr_proto_model_t *m) {
  memset(m, 0, sizeof *m);
  m->max_batch = MAX_BATCH;
  for (int i = 0; i < N_IO; i++) {
    if (pick && !(pick & (1u << i))) continue;
    pr_tensor_info_t *in = &m->inputs[m->n_inputs++], *out = &m->outputs[m->n_outputs++];
    in->name = io[i].input;
    out->name = io[i].output;
    in->dtype = out->dtype = io[i].dtype;
    in->rank = out->rank = io[i].rank;
    memcpy(in->dims, io[i].dims, sizeof io[i].dims);
    memcpy(out->dims, io[i].dims, sizeof io[i].dims);
  }
}

static const char *str(const json_t *v) {
  const char *s = json_string_value(v);
  return s ? s : "";
}

static size_t nbytes_of(const pr_tensor_t *t) {
  return (size_t)pr_tensor_numel(t) * pr_dtype_size(t->dtype);
}

/* A parsed request agrees with the model. */
static void check_request(const pr_proto_model_t *m, const pr_request_t *r) {
  CHECK(r->rows >= 1 && r->rows <= m->max_batch, "rows %d", r->rows);
  for (int k = 0; k < m->n_inputs; k++) {
    const pr_tensor_t *t = &r->inputs[k];
    const pr_tensor_info_t *want = &m->inputs[k];
    CHECK(t->data && t->dtype == want->dtype && t->rank == want->rank, "input %d", k);
    CHECK(t->dims[0] == r->rows, "input %d: batch %lld", k, (long long)t->dims[0]);
    for (int d = 1; d < t->rank; d++)
      CHECK(t->dims[d] == want->dims[d], "input %d: dims[%d] %lld", k, d, (long long)t->dims[d]);
  }
}

static double half_to_double(uint16_t h) {
  int e = (h >> 10) & 31, f = h & 1023;
  double v = e ? ldexp(1024 + f, e - 25) : ldexp(f, -24);
  if (e == 31) v = f ? NAN : INFINITY;
  return h >> 15 ? -v : v;
}

/* Element e of t as JSON must read back as its value (non-finite floats as
 * the strings "NaN", "Infinity", "-Infinity"; FP16 as its value). */
static void check_element(const pr_tensor_t *t, int64_t e, const json_t *v, const char *name) {
  double want;
  switch (t->dtype) {
    case PR_DTYPE_FLOAT: want = ((const float *)t->data)[e]; break;
    case PR_DTYPE_DOUBLE: want = ((const double *)t->data)[e]; break;
    case PR_DTYPE_FLOAT16: want = half_to_double(((const uint16_t *)t->data)[e]); break;
    case PR_DTYPE_BOOL:
      CHECK(json_is_boolean(v) && json_is_true(v) == !!((const uint8_t *)t->data)[e],
            "output '%s'[%lld]: bool", name, (long long)e);
      return;
    case PR_DTYPE_INT64:
      CHECK(json_is_integer(v) && json_integer_value(v) == ((const int64_t *)t->data)[e],
            "output '%s'[%lld]: int64", name, (long long)e);
      return;
    case PR_DTYPE_UINT8:
      CHECK(json_is_integer(v) && json_integer_value(v) == ((const uint8_t *)t->data)[e],
            "output '%s'[%lld]: uint8", name, (long long)e);
      return;
    default: CHECK(0, "output '%s': unexpected dtype %d", name, (int)t->dtype);
  }
  if (!isfinite(want)) {
    const char *w = isnan(want) ? "NaN" : want > 0 ? "Infinity" : "-Infinity";
    CHECK(json_is_string(v) && !strcmp(json_string_value(v), w),
          "output '%s'[%lld]: non-finite value not \"%s\"", name, (long long)e, w);
    return;
  }
  /* values print with as many digits as read back to the same value of
   * their type: compare in the type */
  CHECK(json_is_number(v), "output '%s'[%lld]: not a number", name, (long long)e);
  double got = json_number_value(v);
  bool same = t->dtype == PR_DTYPE_DOUBLE ? got == want
              : t->dtype == PR_DTYPE_FLOAT
                  ? (float)got == (float)want
                  : pr__float_to_half((float)got) == ((const uint16_t *)t->data)[e];
  CHECK(same, "output '%s'[%lld]: %.17g read back as %.17g", name, (long long)e, want, got);
}

/* The response holds the requested outputs (all when none), in order, each
 * with its shape and its values in JSON or in the binary part. */
static void check_response(const pr_proto_model_t *m, const pr_request_t *r,
                           const pr_proto_infer_t *q, const char *out, size_t out_len,
                           size_t json_len) {
  CHECK(json_len <= out_len, "json_len %zu > %zu", json_len, out_len);
  json_error_t je;
  json_t *root = json_loadb(out, json_len ? json_len : out_len, 0, &je);
  CHECK(root, "response is not JSON: %s", je.text);
  CHECK(!strcmp(str(json_object_get(root, "model_name")), "fuzz") &&
            !strcmp(str(json_object_get(root, "model_version")), "1"),
        "model name/version");
  if (q->id)
    CHECK(json_is_string(json_object_get(root, "id")) &&
              !strcmp(str(json_object_get(root, "id")), q->id),
          "id not echoed (request id '%s')", q->id);
  json_t *outs = json_object_get(root, "outputs");
  int n = q->n_outputs ? q->n_outputs : m->n_outputs;
  CHECK(json_is_array(outs) && (int)json_array_size(outs) == n, "%d outputs", n);
  size_t bin_off = json_len ? json_len : out_len; /* binary outputs follow the header */
  for (int i = 0; i < n; i++) {
    int o = q->n_outputs ? q->outputs[i] : i;
    const pr_tensor_t *t = &r->outputs[o];
    const char *name = m->outputs[o].name;
    json_t *jo = json_array_get(outs, (size_t)i);
    CHECK(!strcmp(str(json_object_get(jo, "name")), name), "name of %d", i);
    CHECK(!strcmp(str(json_object_get(jo, "datatype")), pr__proto_datatype(t->dtype)),
          "output '%s': datatype", name);
    json_t *shape = json_object_get(jo, "shape");
    CHECK(json_is_array(shape) && (int)json_array_size(shape) == t->rank, "output '%s': rank",
          name);
    for (int d = 0; d < t->rank; d++)
      CHECK(json_integer_value(json_array_get(shape, (size_t)d)) == t->dims[d],
            "output '%s': dims[%d]", name, d);
    size_t nbytes = nbytes_of(t);
    json_t *data = json_object_get(jo, "data");
    if (q->binary[o]) {
      json_t *size = json_object_get(json_object_get(jo, "parameters"), "binary_data_size");
      CHECK(!data && json_is_integer(size) && (size_t)json_integer_value(size) == nbytes,
            "output '%s': binary_data_size", name);
      CHECK(out_len - bin_off >= nbytes && !memcmp(out + bin_off, t->data, nbytes),
            "output '%s': binary data", name);
      bin_off += nbytes;
    } else {
      int64_t numel = pr_tensor_numel(t);
      CHECK(json_is_array(data) && (int64_t)json_array_size(data) == numel,
            "output '%s': %zu values in 'data', shape has %lld", name,
            json_is_array(data) ? json_array_size(data) : 0, (long long)numel);
      for (int64_t e = 0; e < numel; e++)
        check_element(t, e, json_array_get(data, (size_t)e), name);
    }
  }
  CHECK(bin_off == out_len, "%zu bytes after the outputs", out_len - bin_off);
  json_decref(root);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 3) return 0;
  pr_proto_model_t m;
  make_model(data[0] & ((1u << N_IO) - 1), &m);
  unsigned v = data[1] | (unsigned)data[2] << 8;
  const char *body = (const char *)data + 3;
  size_t len = size - 3;
  size_t json_len = v ? (v - 1) % (len + 2) : len;

  pr_request_t *r = pr__request_new();
  pr_proto_infer_t q;
  char err[512];
  err[0] = '\0';
  int status = pr__proto_http_status(
      pr__proto_parse_infer(&m, body, len, json_len, (size_t)64 << 20, r, &q, err, sizeof err));
  if (getenv("FUZZ_VERBOSE")) /* say what each input did, when replaying inputs */
    fprintf(stderr, "fuzz_infer: %d %s\n", status, status == 200 ? "" : err);
  CHECK(status == 200 || status == 400 || status == 503, "status %d", status);
  if (status != 200) {
    CHECK(err[0] && memchr(err, '\0', sizeof err), "a 400 without a message");
    /* the server answers {"error": err} (pr__proto_error), which must not fail */
    char *reply = pr__proto_error(err);
    CHECK(reply, "pr__proto_error cannot encode the message '%s'", err);
    free(reply);
    pr__proto_infer_clear(&q);
    pr__request_free(r);
    return 0;
  }
  check_request(&m, r);
  for (int k = 0; k < m.n_outputs; k++) {
    pr_tensor_t *o = &r->outputs[k];
    *o = r->inputs[k];
    o->data = pr__aligned_alloc(nbytes_of(o));
    CHECK(o->data, "out of memory");
    memcpy(o->data, r->inputs[k].data, nbytes_of(o));
  }
  char *out = NULL;
  size_t out_len = 0, out_json_len = 0;
  status = pr__proto_http_status(
      pr__proto_infer_response(&m, "fuzz", "1", r, &q, &out, &out_len, &out_json_len));
  CHECK(status == 200 && out, "response status %d", status);
  check_response(&m, r, &q, out, out_len, out_json_len);
  free(out);
  pr__proto_infer_clear(&q);
  pr__request_free(r);
  return 0;
}
