/* The v2 protocol codec and the router, without a server: requests parsed
 * into tensors (flat, nested, binary), every kind of bad body answered 400
 * with a message that encodes as JSON, responses whose values read back
 * (NaN/Inf strings, -0.0, UINT64 max, FP16), the status map, and every
 * route matched, refused (404/405/414) or matched for HEAD. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <grpc/status.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fp16.h"
#include "server/protocol.h"
#include "server/router.h"

/* x[batch, 2] FP32 and k[batch, 1] INT64 in; y[batch, 2] FP32 out. */
static pr_proto_model_t model(void) {
  pr_proto_model_t m = {.n_inputs = 2, .n_outputs = 1, .max_batch = 4};
  m.inputs[0] =
      (pr_tensor_info_t){.name = "x", .dtype = PR_DTYPE_FLOAT, .rank = 2, .dims = {-1, 2}};
  m.inputs[1] =
      (pr_tensor_info_t){.name = "k", .dtype = PR_DTYPE_INT64, .rank = 2, .dims = {-1, 1}};
  m.outputs[0] =
      (pr_tensor_info_t){.name = "y", .dtype = PR_DTYPE_FLOAT, .rank = 2, .dims = {-1, 2}};
  return m;
}

/* Parses body (NUL-terminated; json_len 0: all of it); returns the HTTP status. */
static int parse(const char *body, size_t len, size_t json_len, pr_request_t **r,
                 pr_proto_infer_t *q, char *err) {
  pr_proto_model_t m = model();
  *r = pr__request_new();
  return pr__proto_http_status(
      pr__proto_parse_infer(&m, body, len, json_len ? json_len : len, 0, *r, q, err, 256));
}

static void test_parse_flat_nested_binary(void **s) {
  pr_request_t *r;
  pr_proto_infer_t q;
  char err[256];
  const char *flat =
      "{\"id\":\"a\",\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[2,2],"
      "\"data\":[1,2,3,4]},{\"name\":\"k\",\"datatype\":\"INT64\",\"shape\":[2,1],"
      "\"data\":[[-9223372036854775808],[7]]}]}";
  assert_int_equal(parse(flat, strlen(flat), 0, &r, &q, err), 200);
  assert_int_equal(r->rows, 2);
  assert_string_equal(q.id, "a");
  assert_true(((float *)r->inputs[0].data)[3] == 4.0f);
  assert_true(((int64_t *)r->inputs[1].data)[0] == INT64_MIN);
  pr__proto_infer_clear(&q);
  pr__request_free(r);
  /* binary: x from the bytes after the JSON header */
  char body[512];
  const char *hdr =
      "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,2],"
      "\"parameters\":{\"binary_data_size\":8}},{\"name\":\"k\",\"datatype\":"
      "\"INT64\",\"shape\":[1,1],\"data\":[3]}],\"outputs\":[{\"name\":\"y\","
      "\"parameters\":{\"binary_data\":true}}]}";
  float xs[2] = {NAN, -0.0f};
  size_t hl = strlen(hdr);
  memcpy(body, hdr, hl);
  memcpy(body + hl, xs, sizeof xs);
  assert_int_equal(parse(body, hl + sizeof xs, hl, &r, &q, err), 200);
  float got[2]; /* binary inputs are views into the body, at any alignment */
  memcpy(got, r->inputs[0].data, sizeof got);
  assert_true(isnan(got[0]) && signbit(got[1]));
  assert_true(q.binary[0] && q.n_outputs == 1);
  pr__proto_infer_clear(&q);
  pr__request_free(r);
}

static void test_parse_errors(void **s) {
  static const char *const bad[] = {
      "",
      "[]",
      "{\"inputs\":[]}",
      "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,2],\"data\":[1,2]}]}",
      "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP64\",\"shape\":[1,2],\"data\":[1,2]},"
      "{\"name\":\"k\",\"datatype\":\"INT64\",\"shape\":[1,1],\"data\":[1]}]}",
      "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[5,2],\"data\":[1,2]}]}",
      "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,2],\"data\":[[1],[2]]},"
      "{\"name\":\"k\",\"datatype\":\"INT64\",\"shape\":[1,1],\"data\":[1]}]}",
      "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,2],\"data\":[1,\"2\"]},"
      "{\"name\":\"k\",\"datatype\":\"INT64\",\"shape\":[1,1],\"data\":[1]}]}",
      "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,2],\"data\":[1,2]},"
      "{\"name\":\"k\",\"datatype\":\"INT64\",\"shape\":[1,1],\"data\":[1.5]}]}",
      "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,2],\"data\":[1,2]},"
      "{\"name\":\"k\",\"datatype\":\"INT64\",\"shape\":[1,1],\"data\":[9223372036854775808]}]}",
      "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,2],\"data\":[1,2]},"
      "{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,2],\"data\":[1,2]}]}",
      "{\"inputs\":[],\"inputs\":[]}",
      "{\"inputs\":[{\"name\":\"\xff\",\"datatype\":\"FP32\",\"shape\":[1,2],\"data\":[1,2]}]}",
      "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,2],\"data\":[1e39,2]},"
      "{\"name\":\"k\",\"datatype\":\"INT64\",\"shape\":[1,1],\"data\":[1]}]}",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    pr_request_t *r;
    pr_proto_infer_t q;
    char err[256] = "";
    int st = parse(bad[i], strlen(bad[i]), 0, &r, &q, err);
    if (st != 400) fprintf(stderr, "body %zu: status %d\n", i, st);
    assert_int_equal(st, 400);
    assert_true(err[0]);
    char *e = pr__proto_error(err);
    json_error_t je;
    json_t *o = json_loads(e, 0, &je);
    assert_non_null(o);
    assert_string_equal(json_string_value(json_object_get(o, "error")), err);
    json_decref(o);
    free(e);
    pr__proto_infer_clear(&q);
    pr__request_free(r);
  }
}

static void test_response_values(void **s) {
  pr_proto_model_t m = {.n_inputs = 1, .n_outputs = 3, .max_batch = 1};
  m.outputs[0] = (pr_tensor_info_t){.name = "f", .dtype = PR_DTYPE_FLOAT, .rank = 2};
  m.outputs[1] = (pr_tensor_info_t){.name = "u", .dtype = PR_DTYPE_UINT64, .rank = 2};
  m.outputs[2] = (pr_tensor_info_t){.name = "h", .dtype = PR_DTYPE_FLOAT16, .rank = 2};
  pr_request_t *r = pr__request_new();
  float f[4] = {NAN, INFINITY, -0.0f, 0.1f};
  uint64_t u[1] = {UINT64_MAX};
  uint16_t h[1] = {pr__float_to_half(-0.6298828125f)};
  void *data[3] = {f, u, h};
  int64_t cols[3] = {4, 1, 1};
  for (int o = 0; o < 3; o++) {
    pr_tensor_t *t = &r->outputs[o];
    t->dtype = m.outputs[o].dtype;
    t->rank = 2;
    t->dims[0] = 1;
    t->dims[1] = cols[o];
    t->data = malloc(pr_dtype_size(t->dtype) * (size_t)cols[o]);
    memcpy(t->data, data[o], pr_dtype_size(t->dtype) * (size_t)cols[o]);
  }
  pr_proto_infer_t q = {.id = strdup("\xc3\xa9t\xc3\xa9")};
  char *out;
  size_t len, jl;
  assert_int_equal(pr__proto_infer_response(&m, "m", "1", r, &q, &out, &len, &jl), PR_OK);
  assert_int_equal(jl, 0);
  json_error_t je;
  json_t *o = json_loadb(out, len, JSON_DECODE_INT_AS_REAL, &je); /* UINT64 max */
  assert_non_null(o);
  assert_string_equal(json_string_value(json_object_get(o, "id")), "\xc3\xa9t\xc3\xa9");
  json_t *outs = json_object_get(o, "outputs");
  json_t *fd = json_object_get(json_array_get(outs, 0), "data");
  assert_string_equal(json_string_value(json_array_get(fd, 0)), "NaN");
  assert_string_equal(json_string_value(json_array_get(fd, 1)), "Infinity");
  assert_true(json_is_real(json_array_get(fd, 2)) &&
              signbit(json_real_value(json_array_get(fd, 2))));
  assert_true((float)json_real_value(json_array_get(fd, 3)) == 0.1f);
  /* UINT64 max is past jansson's integers: check the text */
  assert_non_null(strstr(out, "18446744073709551615"));
  json_t *hd = json_object_get(json_array_get(outs, 2), "data");
  assert_true(pr__float_to_half((float)json_number_value(json_array_get(hd, 0))) == h[0]);
  json_decref(o);
  free(out);
  pr__proto_infer_clear(&q);
  pr__request_free(r);
}

static void test_status_map_and_error(void **s) {
  assert_int_equal(pr__proto_http_status(PR_OK), 200);
  assert_int_equal(pr__proto_http_status(PR_ERR_INVALID), 400);
  assert_int_equal(pr__proto_http_status(PR_ERR_UNSUPPORTED), 400);
  assert_int_equal(pr__proto_http_status(PR_ERR_NOT_FOUND), 404);
  assert_int_equal(pr__proto_http_status(PR_ERR_BUSY), 503);
  assert_int_equal(pr__proto_http_status(PR_ERR_TIMEOUT), 504);
  assert_int_equal(pr__proto_http_status(PR_ERR_NOMEM), 500);
  assert_int_equal(pr__proto_http_status(PR_ERR_INTERNAL), 500);
  assert_int_equal(pr__proto_http_status(PR_ERR_IO), 500);
  assert_int_equal(pr__proto_http_status(PR_ERR_METHOD), 405);
  assert_int_equal(pr__proto_http_status(PR_ERR_TOO_LARGE), 413);
  assert_int_equal(pr__proto_http_status(PR_ERR_URI_TOO_LONG), 414);
  assert_int_equal(pr__proto_http_status(PR_ERR_CODING), 501);
  assert_int_equal(pr__proto_http_status(PR_ERR_UNAUTHORIZED), 401);
  assert_int_equal(pr__proto_http_status(PR_ERR_FORBIDDEN), 403);
  /* and gRPC's codes, beside them */
  static const struct {
    pr_status_t st;
    grpc_status_code code;
  } grpc_map[] = {
      {PR_OK, GRPC_STATUS_OK},
      {PR_ERR_INVALID, GRPC_STATUS_INVALID_ARGUMENT},
      {PR_ERR_UNSUPPORTED, GRPC_STATUS_INVALID_ARGUMENT},
      {PR_ERR_NOT_FOUND, GRPC_STATUS_NOT_FOUND},
      {PR_ERR_BUSY, GRPC_STATUS_UNAVAILABLE},
      {PR_ERR_TIMEOUT, GRPC_STATUS_DEADLINE_EXCEEDED},
      {PR_ERR_NOMEM, GRPC_STATUS_RESOURCE_EXHAUSTED},
      {PR_ERR_INTERNAL, GRPC_STATUS_INTERNAL},
      {PR_ERR_IO, GRPC_STATUS_INTERNAL},
      {PR_ERR_METHOD, GRPC_STATUS_UNIMPLEMENTED},
      {PR_ERR_TOO_LARGE, GRPC_STATUS_RESOURCE_EXHAUSTED},
      {PR_ERR_URI_TOO_LONG, GRPC_STATUS_INVALID_ARGUMENT},
      {PR_ERR_CODING, GRPC_STATUS_UNIMPLEMENTED},
      {PR_ERR_UNAUTHORIZED, GRPC_STATUS_UNAUTHENTICATED},
      {PR_ERR_FORBIDDEN, GRPC_STATUS_PERMISSION_DENIED},
      {-999, GRPC_STATUS_INTERNAL},
  };
  for (size_t i = 0; i < sizeof grpc_map / sizeof grpc_map[0]; i++)
    assert_int_equal(pr__proto_grpc_status(grpc_map[i].st), grpc_map[i].code);
  /* bytes that are not UTF-8, and a character cut by the end: valid JSON */
  char *e = pr__proto_error("name \xff\xfe \xc3");
  json_error_t je;
  json_t *o = json_loads(e, 0, &je);
  assert_non_null(o);
  assert_string_equal(json_string_value(json_object_get(o, "error")), "name ?? ?");
  json_decref(o);
  free(e);
}

/* The HTTP status of matching method and path. */
static int route(const char *method, const char *path, pr_route_t *r) {
  return pr__proto_http_status(pr__route_match(pr__http_routes, PR_ROUTE_COUNT, method, path, r));
}

static void test_router(void **s) {
  pr_route_t r;
  assert_int_equal(route("POST", "/v2/models/m/versions/3/infer", &r), 200);
  assert_int_equal(r.id, PR_ROUTE_INFER);
  assert_string_equal(r.model, "m");
  assert_string_equal(r.version, "3");
  assert_int_equal(route("POST", "//v2//models/m/infer/", &r), 200);
  assert_null(r.version);
  assert_int_equal(route("HEAD", "/v2/health/live", &r), 200);
  assert_int_equal(r.id, PR_ROUTE_LIVE);
  assert_int_equal(route("GET", "/v2/models/m/infer", &r), 405);
  assert_int_equal(route("DELETE", "/v2/models/m", &r), 405);
  assert_int_equal(route("GET", "/v2/nothing", &r), 404);
  assert_int_equal(route("GET", "/a/b/c/d/e/f/g/h/i", &r), 404);
  assert_int_equal(route("GET", "/metrics", &r), 200);
  assert_int_equal(r.id, PR_ROUTE_METRICS);
  assert_int_equal(route("POST", "/v2/models/m/plan", &r), 200);
  assert_int_equal(r.id, PR_ROUTE_PLAN_POST);
  char long_path[4096];
  memset(long_path, 'a', sizeof long_path - 1);
  long_path[0] = '/';
  long_path[sizeof long_path - 1] = 0;
  assert_int_equal(route("GET", long_path, &r), 414);
  assert_true((pr__http_routes[PR_ROUTE_INFER].flags & PR_ROUTE_TENSORS) &&
              !(pr__http_routes[PR_ROUTE_PLAN_POST].flags & PR_ROUTE_TENSORS));
  /* a literal segment before a capture, whatever the rows' order */
  assert_int_equal(route("GET", "/v2/models/stats", &r), 200);
  assert_int_equal(r.id, PR_ROUTE_STATS_ALL);
  assert_int_equal(route("GET", "/v2/models/statsx", &r), 200);
  assert_int_equal(r.id, PR_ROUTE_MODEL_META);
  assert_int_equal(route("GET", "/v2/models/m/versions/2", &r), 200);
  assert_int_equal(r.id, PR_ROUTE_MODEL_META);
  assert_string_equal(r.version, "2");
  assert_int_equal(route("GET", "/v2/models/m/versions", &r), 404); /* the group is whole or none */
  assert_int_equal(route("HEAD", "/v2/models/m/plan", &r), 200);
  assert_int_equal(r.id, PR_ROUTE_PLAN_GET);
  assert_int_equal(route("HEAD", "/v2/repository/index", &r), 405); /* HEAD only where GET */
  /* a table of its own: rows in any order, the bracketed part optional */
  static const pr_route_row_t rows[] = {
      {"GET", "/a/{m}[/b/{v}]", PR_ACCESS_OPEN, 0, NULL},
      {"GET", "/a/x", PR_ACCESS_READ, 0, NULL},
      {"PUT", "/c", PR_ACCESS_ADMIN, 0, NULL},
  };
  assert_int_equal(pr__route_match(rows, 3, "GET", "/a/x", &r), PR_OK);
  assert_int_equal(r.id, 1);
  assert_ptr_equal(r.row, &rows[1]);
  assert_int_equal(pr__route_match(rows, 3, "GET", "/a/y/b/7", &r), PR_OK);
  assert_int_equal(r.id, 0);
  assert_string_equal(r.model, "y");
  assert_string_equal(r.version, "7");
  assert_int_equal(pr__route_match(rows, 3, "HEAD", "/a/y", &r), PR_ERR_METHOD);
  assert_int_equal(pr__route_match(rows, 3, "GET", "/c", &r), PR_ERR_METHOD);
  assert_int_equal(pr__route_match(rows, 3, "PUT", "/c", &r), PR_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_flat_nested_binary),
      cmocka_unit_test(test_parse_errors),
      cmocka_unit_test(test_response_values),
      cmocka_unit_test(test_status_map_and_error),
      cmocka_unit_test(test_router),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
