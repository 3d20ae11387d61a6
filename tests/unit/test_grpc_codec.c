/* grpc_codec.c: protobuf ModelInferRequests into requests (raw and typed,
 * the same checks as JSON), and responses packed raw or typed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "grpc_service.pb-c.h"
#include "pb_counter.h"
#include "server/grpc_codec.h"

/* x: FP32 [-1, 2]; k: INT8 [-1, 1] -> y: FP32 [-1, 2] */
static pr_proto_model_t model(void) {
  pr_proto_model_t m = {.n_inputs = 2, .n_outputs = 1, .max_batch = 4};
  m.inputs[0] =
      (pr_tensor_info_t){.name = "x", .dtype = PR_DTYPE_FLOAT, .rank = 2, .dims = {-1, 2}};
  m.inputs[1] = (pr_tensor_info_t){.name = "k", .dtype = PR_DTYPE_INT8, .rank = 2, .dims = {-1, 1}};
  m.outputs[0] =
      (pr_tensor_info_t){.name = "y", .dtype = PR_DTYPE_FLOAT, .rank = 2, .dims = {-1, 2}};
  return m;
}

typedef struct {
  Inference__ModelInferRequest req;
  Inference__ModelInferRequest__InferInputTensor in[2], *list[2];
  Inference__InferTensorContents c[2];
  int64_t shape[2][2];
  ProtobufCBinaryData raw[2];
  float xs[4];
  int32_t ks[2];
  int8_t kraw[2];
} req_t;

/* Two rows of x and k, raw or typed. */
static void make(req_t *q, bool raw) {
  memset(q, 0, sizeof *q);
  inference__model_infer_request__init(&q->req);
  float xs[4] = {1.5f, -2.0f, 3.0f, 0.25f};
  memcpy(q->xs, xs, sizeof xs);
  q->ks[0] = -7, q->ks[1] = 100;
  q->kraw[0] = -7, q->kraw[1] = 100;
  const char *names[2] = {"x", "k"}, *types[2] = {"FP32", "INT8"};
  int64_t dims[2] = {2, 1};
  for (int i = 0; i < 2; i++) {
    inference__model_infer_request__infer_input_tensor__init(&q->in[i]);
    q->in[i].name = (char *)names[i];
    q->in[i].datatype = (char *)types[i];
    q->shape[i][0] = 2, q->shape[i][1] = dims[i];
    q->in[i].n_shape = 2;
    q->in[i].shape = q->shape[i];
    q->list[i] = &q->in[i];
    if (!raw) {
      inference__infer_tensor_contents__init(&q->c[i]);
      q->in[i].contents = &q->c[i];
    }
  }
  if (raw) {
    q->raw[0] = (ProtobufCBinaryData){sizeof q->xs, (uint8_t *)q->xs};
    q->raw[1] = (ProtobufCBinaryData){sizeof q->kraw, (uint8_t *)q->kraw};
    q->req.n_raw_input_contents = 2;
    q->req.raw_input_contents = q->raw;
  } else {
    q->c[0].n_fp32_contents = 4, q->c[0].fp32_contents = q->xs;
    q->c[1].n_int_contents = 2, q->c[1].int_contents = q->ks;
  }
  q->req.n_inputs = 2;
  q->req.inputs = q->list;
}

static pr_status_t decode(req_t *q, pr_request_t **r, pr_proto_infer_t *pq, bool *raw, char *err) {
  pr_proto_model_t m = model();
  *r = pr__request_new();
  return pr__grpc_decode_infer(&m, &q->req, 0, *r, pq, raw, err, 256);
}

static void test_raw_and_typed(void **s) {
  for (int typed = 0; typed < 2; typed++) {
    req_t q;
    make(&q, !typed);
    pr_request_t *r;
    pr_proto_infer_t pq;
    bool raw;
    char err[256] = "";
    assert_int_equal(decode(&q, &r, &pq, &raw, err), PR_OK);
    assert_int_equal(raw, !typed);
    assert_int_equal(r->rows, 2);
    assert_memory_equal(r->inputs[0].data, q.xs, sizeof q.xs);
    assert_int_equal(((int8_t *)r->inputs[1].data)[0], -7);
    assert_int_equal(((int8_t *)r->inputs[1].data)[1], 100);
    /* the answer: y = x, packed the way the request came */
    pr_proto_model_t m = model();
    r->outputs[0] = r->inputs[0];
    r->outputs[0].data = malloc(sizeof q.xs);
    memcpy(r->outputs[0].data, q.xs, sizeof q.xs);
    uint8_t *buf;
    size_t len;
    assert_int_equal(pr__grpc_encode_infer(&m, "m", "1", r, &pq, raw, &buf, &len), PR_OK);
    Inference__ModelInferResponse *resp = inference__model_infer_response__unpack(NULL, len, buf);
    assert_non_null(resp);
    assert_int_equal(resp->n_outputs, 1);
    assert_string_equal(resp->outputs[0]->name, "y");
    assert_string_equal(resp->outputs[0]->datatype, "FP32");
    if (raw)
      assert_memory_equal(resp->raw_output_contents[0].data, q.xs, sizeof q.xs);
    else
      assert_memory_equal(resp->outputs[0]->contents->fp32_contents, q.xs, sizeof q.xs);
    inference__model_infer_response__free_unpacked(resp, NULL);
    free(buf);
    pr__proto_infer_clear(&pq);
    pr__request_free(r);
  }
}

/* Each broken request is refused with PR_ERR_INVALID and a message. */
static void test_errors(void **s) {
  for (int c = 0; c < 8; c++) {
    req_t q;
    make(&q, c < 4);
    switch (c) {
      case 0: q.raw[0].len--; break;                 /* raw bytes short */
      case 1: q.req.n_raw_input_contents = 1; break; /* one entry for two inputs */
      case 2: q.in[1].datatype = "INT16"; break;     /* datatype */
      case 3: q.shape[0][1] = 3; break;              /* shape */
      case 4: q.ks[1] = 128; break;                  /* INT8 range */
      case 5: q.c[0].n_fp32_contents = 3; break;     /* values short */
      case 6: q.in[1].contents = NULL; break;        /* no data */
      case 7: q.req.n_inputs = 1; break;             /* missing input */
    }
    pr_request_t *r;
    pr_proto_infer_t pq;
    bool raw;
    char err[256] = "";
    assert_int_equal(decode(&q, &r, &pq, &raw, err), PR_ERR_INVALID);
    assert_true(err[0]);
    pr__proto_infer_clear(&pq);
    pr__request_free(r);
  }
}

/* Strings are checked on the wire: protobuf-c would cut "mlp\0x" to "mlp". */
static void test_strings_on_wire(void **s) {
  const ProtobufCMessageDescriptor *d = &inference__model_infer_request__descriptor;
  char err[160];
  req_t q;
  make(&q, true);
  q.req.model_name = "mlp";
  size_t len = inference__model_infer_request__get_packed_size(&q.req);
  uint8_t *buf = malloc(len);
  inference__model_infer_request__pack(&q.req, buf);
  size_t cost;
  assert_int_equal(pr__grpc_wire_check(d, buf, len, &cost, err, sizeof err),
                   0); /* raw bytes may hold NULs */
  free(buf);

  static const struct {
    const char *why, *field;
    uint8_t len, wire[16];
  } bad[] = {
      {"NUL in model_name", "ModelInferRequest.model_name", 7, {0x0a, 5, 'm', 'l', 'p', 0, 'x'}},
      {"invalid UTF-8 in an input's name",
       "InferInputTensor.name",
       7,
       {0x2a, 5, 0x0a, 3, 'x', 0xff, 'y'}},
      {"NUL in a parameter's string",
       "InferParameter.string_param",
       10,
       {0x22, 8, 0x0a, 1, 'k', 0x12, 3, 0x1a, 1, 0}},
      {"NUL in a requested output's name",
       "InferRequestedOutputTensor.name",
       6,
       {0x32, 4, 0x0a, 2, 'y', 0}},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    err[0] = 0;
    assert_int_equal(pr__grpc_wire_check(d, bad[i].wire, bad[i].len, &cost, err, sizeof err), 1);
    if (!strstr(err, bad[i].field)) fail_msg("%s: '%s'", bad[i].why, err);
  }
  /* what the check is for: unpacked, the first one names another model */
  Inference__ModelInferRequest *r = inference__model_infer_request__unpack(NULL, 7, bad[0].wire);
  assert_non_null(r);
  assert_string_equal(r->model_name, "mlp");
  inference__model_infer_request__free_unpacked(r, NULL);

  /* bytes that do not parse: refused as the unpack would refuse them */
  const uint8_t cut[] = {0x0a, 9, 'm'}, group[] = {0x0b, 0x0c};
  assert_int_equal(pr__grpc_wire_check(d, cut, sizeof cut, &cost, err, sizeof err), -1);
  assert_int_equal(pr__grpc_wire_check(d, group, sizeof group, &cost, err, sizeof err), -1);
  assert_null(inference__model_infer_request__unpack(NULL, sizeof cut, cut));
  assert_null(inference__model_infer_request__unpack(NULL, sizeof group, group));
}

/* Unpacks msg with the counting allocator: what it allocated in all. */
static size_t unpacked_bytes(const ProtobufCMessageDescriptor *d, const uint8_t *msg, size_t len) {
  pb_counted = 0;
  ProtobufCMessage *m = protobuf_c_message_unpack(d, &pb_counter, len, msg);
  assert_non_null(m);
  protobuf_c_message_free_unpacked(m, &pb_counter);
  return pb_counted;
}

/* len bytes of the entry e (elen bytes) again and again. */
static uint8_t *repeat(const uint8_t *e, size_t elen, size_t times, size_t *len) {
  uint8_t *b = malloc(elen * times);
  for (size_t i = 0; i < times; i++) memcpy(b + i * elen, e, elen);
  *len = elen * times;
  return b;
}

/* Every request type the service unpacks fits the wire check's field table
 * (a larger one would be refused as malformed, whatever it held). */
static void test_request_types_fit(void **s) {
  (void)s;
  const ProtobufCMessageDescriptor *ds[] = {
      &inference__server_live_request__descriptor,
      &inference__server_ready_request__descriptor,
      &inference__model_ready_request__descriptor,
      &inference__server_metadata_request__descriptor,
      &inference__model_metadata_request__descriptor,
      &inference__model_infer_request__descriptor,
      &inference__model_infer_request__infer_input_tensor__descriptor,
      &inference__model_infer_request__infer_requested_output_tensor__descriptor,
      &inference__model_infer_request__parameters_entry__descriptor,
      &inference__infer_parameter__descriptor,
      &inference__infer_tensor_contents__descriptor,
      &inference__model_config_request__descriptor,
      &inference__model_statistics_request__descriptor,
      &inference__repository_index_request__descriptor,
      &inference__repository_model_load_request__descriptor,
      &inference__repository_model_unload_request__descriptor};
  for (size_t i = 0; i < sizeof ds / sizeof ds[0]; i++) {
    if (ds[i]->n_fields > 64) fail_msg("%s has %u fields", ds[i]->name, ds[i]->n_fields);
    char err[160];
    size_t cost;
    assert_int_equal(pr__grpc_wire_check(ds[i], (const uint8_t *)"", 0, &cost, err, sizeof err), 0);
  }
}

/* The wire check's cost bounds what the unpack allocates, and the messages
 * that would unpack to far more than they hold are refused unread. */
static void test_decode_cost(void **s) {
  (void)s;
  const ProtobufCMessageDescriptor *d = &inference__model_infer_request__descriptor;
  char err[160];
  size_t cost, len;
  /* the two-input request, raw and typed, with parameters, outputs and an
   * unknown field */
  for (int raw = 0; raw < 2; raw++) {
    req_t q;
    make(&q, raw);
    q.req.model_name = "mlp";
    q.req.id = "request-1";
    Inference__InferParameter pv;
    inference__infer_parameter__init(&pv);
    pv.parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM;
    pv.string_param = "high";
    Inference__ModelInferRequest__ParametersEntry pe, *pes[1] = {&pe};
    inference__model_infer_request__parameters_entry__init(&pe);
    pe.key = "priority";
    pe.value = &pv;
    q.req.n_parameters = 1;
    q.req.parameters = pes;
    Inference__ModelInferRequest__InferRequestedOutputTensor o, *os[1] = {&o};
    inference__model_infer_request__infer_requested_output_tensor__init(&o);
    o.name = "y";
    q.req.n_outputs = 1;
    q.req.outputs = os;
    len = inference__model_infer_request__get_packed_size(&q.req);
    uint8_t *buf = malloc(len + 4);
    inference__model_infer_request__pack(&q.req, buf);
    const uint8_t unknown[] = {0xf8, 0x06, 0x05}; /* field 111, the varint 5 */
    memcpy(buf + len, unknown, 3);
    assert_int_equal(pr__grpc_wire_check(d, buf, len + 3, &cost, err, sizeof err), 0);
    size_t got = unpacked_bytes(d, buf, len + 3);
    if (got > cost)
      fail_msg("raw %d: the unpack took %zu bytes, the check said at most %zu", raw, got, cost);
    free(buf);
  }
  /* packed int64 zeros, the most a valid request expands (8 bytes a byte):
   * accepted, and the cost bounds it */
  {
    req_t q;
    make(&q, false);
    static int64_t zeros[100000];
    q.c[0].n_int64_contents = 100000;
    q.c[0].int64_contents = zeros;
    len = inference__model_infer_request__get_packed_size(&q.req);
    uint8_t *buf = malloc(len);
    inference__model_infer_request__pack(&q.req, buf);
    assert_int_equal(pr__grpc_wire_check(d, buf, len, &cost, err, sizeof err), 0);
    size_t got = unpacked_bytes(d, buf, len);
    assert_true(got <= cost);
    assert_true(got >= 8 * 100000);
    free(buf);
  }
  /* 1025 empty inputs (field 5, 2 bytes each): refused, naming the field;
   * 1024 of them: about 50 times their size to decode, refused too; 400
   * (within the check's 64 KiB allowance) unpack within the cost */
  const uint8_t empty_input[] = {0x2a, 0x00};
  uint8_t *buf = repeat(empty_input, 2, 1025, &len);
  assert_int_equal(pr__grpc_wire_check(d, buf, len, &cost, err, sizeof err), 1);
  assert_non_null(strstr(err, "ModelInferRequest.inputs holds more than 1024"));
  assert_int_equal(pr__grpc_wire_check(d, buf, len - 2, &cost, err, sizeof err), 1);
  assert_non_null(strstr(err, "more than 16 times"));
  assert_int_equal(pr__grpc_wire_check(d, buf, 800, &cost, err, sizeof err), 0);
  size_t got = unpacked_bytes(d, buf, 800);
  if (got > cost)
    fail_msg("400 empty inputs: the unpack took %zu bytes, the check said %zu", got, cost);
  free(buf);
  /* one input of 1025 empty parameters map entries (its field 4), and one
   * with its contents (field 5, not repeated: protobuf-c would merge the
   * copies) 1025 times: both refused, naming the field */
  const struct {
    uint8_t tag;
    const char *field;
  } nested[] = {{0x22, "InferInputTensor.parameters holds more than 1024"},
                {0x2a, "InferInputTensor.contents is given more than once"}};
  for (size_t i = 0; i < sizeof nested / sizeof nested[0]; i++) {
    uint8_t *entries = repeat((const uint8_t[]){nested[i].tag, 0x00}, 2, 1025, &len);
    uint8_t *input = malloc(len + 3);
    input[0] = 0x2a, input[1] = (uint8_t)(0x80 | (len & 0x7f)), input[2] = (uint8_t)(len >> 7);
    memcpy(input + 3, entries, len);
    assert_int_equal(pr__grpc_wire_check(d, input, len + 3, &cost, err, sizeof err), 1);
    if (!strstr(err, nested[i].field)) fail_msg("'%s' for '%s'", err, nested[i].field);
    free(entries);
    free(input);
  }
  /* 65 unknown fields in one message: refused; 64: the cost bounds them */
  buf = repeat((const uint8_t[]){0xf8, 0x06, 0x01}, 3, 65, &len);
  assert_int_equal(pr__grpc_wire_check(d, buf, len, &cost, err, sizeof err), 1);
  assert_non_null(strstr(err, "fields it does not define"));
  assert_int_equal(pr__grpc_wire_check(d, buf, len - 3, &cost, err, sizeof err), 0);
  assert_true(unpacked_bytes(d, buf, len - 3) <= cost);
  free(buf);
  /* model_name sent 100000 times (each "a", 3 bytes, is a 32-byte copy):
   * more than 16 times its size to decode, refused */
  buf = repeat((const uint8_t[]){0x0a, 0x01, 'a'}, 3, 100000, &len);
  assert_int_equal(pr__grpc_wire_check(d, buf, len, &cost, err, sizeof err), 1);
  assert_non_null(strstr(err, "more than 16 times"));
  free(buf);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_raw_and_typed), cmocka_unit_test(test_errors),
      cmocka_unit_test(test_strings_on_wire), cmocka_unit_test(test_decode_cost),
      cmocka_unit_test(test_request_types_fit)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
