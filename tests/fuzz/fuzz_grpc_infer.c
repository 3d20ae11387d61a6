/* libFuzzer target: arbitrary bytes as a gRPC ModelInferRequest message
 * (grpc_codec.c's check on the wire: its strings, its counts and the bytes
 * unpacking it costs; protobuf-c's decoder, then grpc_codec.c's checks
 * against a model). The wire check refuses as malformed only what
 * protobuf-c refuses too, and what protobuf-c allocates for a message it
 * lets through is within the cost it said.
 * Decoding must either succeed with tensors that agree with the model, or
 * fail with INVALID_ARGUMENT (or UNAVAILABLE, over the byte bound) and a
 * message; a decoded request is then answered (its outputs mirror its
 * inputs), and the packed response must decode back to exactly those
 * tensors, raw or typed. Never a crash, leak or undefined behaviour.
 *
 * Input layout: byte 0 picks the model's inputs (bit i: input i of the
 * table below; 0: all of them); the message follows. tests/fuzz/grpc_seeds.py
 * writes seeds in this layout. */
#include <grpc/status.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../unit/pb_counter.h"
#include "base/util.h"
#include "grpc_service.pb-c.h"
#include "server/grpc_codec.h"

static const struct {
  const char *input, *output;
  pr_dtype_t dtype;
  int rank;
  int64_t dims[3];
} io[] = {
    {"x", "y", PR_DTYPE_FLOAT, 2, {-1, 4}},
    {"ids", "ids_out", PR_DTYPE_INT64, 2, {-1, 5}},
    {"mask", "mask_out", PR_DTYPE_BOOL, 2, {-1, 5}},
    {"pixels", "pixels_out", PR_DTYPE_UINT8, 3, {-1, 2, 3}},
    {"half", "half_out", PR_DTYPE_FLOAT16, 2, {-1, 3}},
    {"small", "small_out", PR_DTYPE_INT8, 2, {-1, 2}},
    {"scores", "scores_out", PR_DTYPE_DOUBLE, 2, {-1, 2}},
};
#define N_IO ((int)(sizeof io / sizeof io[0]))

#define CHECK(cond, ...)                               \
  do {                                                 \
    if (!(cond)) {                                     \
      fprintf(stderr, "fuzz_grpc_infer: %s: ", #cond); \
      fprintf(stderr, __VA_ARGS__);                    \
      fprintf(stderr, "\n");                           \
      abort();                                         \
    }                                                  \
  } while (0)

static void make_model(unsigned pick, pr_proto_model_t *m) {
  memset(m, 0, sizeof *m);
  m->max_batch = 8;
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

static size_t nbytes_of(const pr_tensor_t *t) {
  return (size_t)pr_tensor_numel(t) * pr_dtype_size(t->dtype);
}

/* Element e of typed contents c (of t's dtype) equals t's. */
static int typed_equal(const Inference__InferTensorContents *c, const pr_tensor_t *t) {
  size_t n = (size_t)pr_tensor_numel(t);
  const void *d = t->data;
  for (size_t e = 0; e < n; e++) switch (t->dtype) {
      case PR_DTYPE_FLOAT:
        if (e >= c->n_fp32_contents || memcmp(&c->fp32_contents[e], (const float *)d + e, 4))
          return 0;
        break;
      case PR_DTYPE_DOUBLE:
        if (e >= c->n_fp64_contents || memcmp(&c->fp64_contents[e], (const double *)d + e, 8))
          return 0;
        break;
      case PR_DTYPE_INT64:
        if (e >= c->n_int64_contents || c->int64_contents[e] != ((const int64_t *)d)[e]) return 0;
        break;
      case PR_DTYPE_BOOL:
        if (e >= c->n_bool_contents || !c->bool_contents[e] != !((const uint8_t *)d)[e]) return 0;
        break;
      case PR_DTYPE_UINT8:
        if (e >= c->n_uint_contents || c->uint_contents[e] != ((const uint8_t *)d)[e]) return 0;
        break;
      case PR_DTYPE_INT8:
        if (e >= c->n_int_contents || c->int_contents[e] != ((const int8_t *)d)[e]) return 0;
        break;
      default: return 0;
    }
  return 1;
}

/* The packed response decodes back to the outputs asked for, in order. */
static void check_response(const pr_proto_model_t *m, const pr_request_t *r,
                           const pr_proto_infer_t *q, const uint8_t *buf, size_t len) {
  Inference__ModelInferResponse *resp = inference__model_infer_response__unpack(NULL, len, buf);
  CHECK(resp, "the response does not decode");
  CHECK(!strcmp(resp->model_name, "fuzz") && !strcmp(resp->model_version, "1"), "name");
  CHECK(!strcmp(resp->id, q->id ? q->id : ""), "id");
  size_t n = (size_t)(q->n_outputs ? q->n_outputs : m->n_outputs);
  CHECK(resp->n_outputs == n, "%zu outputs, %zu asked for", resp->n_outputs, n);
  bool raw = resp->n_raw_output_contents > 0;
  CHECK(!raw || resp->n_raw_output_contents == n, "raw outputs");
  for (size_t i = 0; i < n; i++) {
    int o = q->n_outputs ? q->outputs[i] : (int)i;
    const pr_tensor_t *t = &r->outputs[o];
    const Inference__ModelInferResponse__InferOutputTensor *ot = resp->outputs[i];
    CHECK(!strcmp(ot->name, m->outputs[o].name), "output %zu name", i);
    CHECK(!strcmp(ot->datatype, pr__proto_datatype(t->dtype)), "output %zu datatype", i);
    CHECK(ot->n_shape == (size_t)t->rank && !memcmp(ot->shape, t->dims, 8 * ot->n_shape),
          "output %zu shape", i);
    if (raw)
      CHECK(resp->raw_output_contents[i].len == nbytes_of(t) &&
                !memcmp(resp->raw_output_contents[i].data, t->data, nbytes_of(t)),
            "output %zu raw bytes", i);
    else
      CHECK(ot->contents && typed_equal(ot->contents, t), "output %zu typed values", i);
  }
  inference__model_infer_response__free_unpacked(resp, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  pr_proto_model_t m;
  make_model(data[0] & ((1u << N_IO) - 1), &m);
  char why[160] = "";
  size_t cost;
  int wire = pr__grpc_wire_check(&inference__model_infer_request__descriptor, data + 1, size - 1,
                                 &cost, why, sizeof why);
  if (wire == 1) {
    CHECK(why[0], "a message refused on the wire without a reason");
    return 0; /* the server answers INVALID_ARGUMENT */
  }
  pb_counted = 0;
  Inference__ModelInferRequest *req =
      inference__model_infer_request__unpack(&pb_counter, size - 1, data + 1);
  if (wire == -1) { /* the server does not unpack it; protobuf-c must refuse it too */
    CHECK(!req, "the wire check called malformed a message protobuf-c unpacks");
    return 0; /* the server answers INVALID_ARGUMENT: malformed message */
  }
  CHECK(pb_counted <= cost, "the unpack took %zu bytes, the wire check said at most %zu",
        pb_counted, cost);
  if (!req) return 0; /* the server answers INVALID_ARGUMENT: malformed message */
  pr_request_t *r = pr__request_new();
  pr_proto_infer_t q;
  bool raw;
  char err[512] = "";
  pr_status_t st = pr__grpc_decode_infer(&m, req, (size_t)64 << 20, r, &q, &raw, err, sizeof err);
  int code = pr__proto_grpc_status(st);
  CHECK(code == GRPC_STATUS_OK || code == GRPC_STATUS_INVALID_ARGUMENT ||
            code == GRPC_STATUS_UNAVAILABLE,
        "status %d", code);
  if (code == GRPC_STATUS_OK) {
    for (int k = 0; k < m.n_inputs; k++) {
      const pr_tensor_t *t = &r->inputs[k];
      CHECK(t->data && t->dtype == m.inputs[k].dtype && t->dims[0] == r->rows, "input %d", k);
      pr_tensor_t *o = &r->outputs[k];
      *o = *t;
      o->data = pr__aligned_alloc(nbytes_of(o) ? nbytes_of(o) : 1);
      CHECK(o->data, "out of memory");
      memcpy(o->data, t->data, nbytes_of(o));
    }
    uint8_t *out = NULL;
    size_t out_len = 0;
    CHECK(pr__grpc_encode_infer(&m, "fuzz", "1", r, &q, raw, &out, &out_len) == PR_OK, "encode");
    check_response(&m, r, &q, out, out_len);
    free(out);
  } else {
    CHECK(err[0], "an error without a message");
  }
  pr__proto_infer_clear(&q);
  pr__request_free(r);
  inference__model_infer_request__free_unpacked(req, &pb_counter);
  return 0;
}
