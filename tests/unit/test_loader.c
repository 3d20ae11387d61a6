/* Model loading: valid models, and every kind of bad input is an error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine/onnx_prescan.h"
#include "model_builder.h"
#include "onnx.pb-c.h"
#include "packrat/engine.h"

static void relu_model(void **data, size_t *len, int opset, const char *op) {
  mb_t *b = mb_new(opset);
  int64_t dims[2] = {-1, 4};
  mb_input(b, "x", PR_DTYPE_FLOAT, 2, dims);
  const char *in[] = {"x", NULL}, *out[] = {"y", NULL};
  mb_node(b, op, "act0", in, out);
  mb_output(b, "y");
  mb_finish(b, data, len);
}

static void test_valid_model_metadata(void **state) {
  void *data;
  size_t len;
  relu_model(&data, &len, 13, "Relu");
  pr_model_t *m;
  char err[256];
  assert_int_equal(pr_engine_model_load_memory(data, len, NULL, &m, err, sizeof err), PR_OK);
  assert_int_equal(pr_engine_model_num_inputs(m), 1);
  assert_int_equal(pr_engine_model_num_outputs(m), 1);
  pr_tensor_info_t info;
  assert_int_equal(pr_engine_model_input(m, 0, &info), PR_OK);
  assert_string_equal(info.name, "x");
  assert_int_equal(info.dtype, PR_DTYPE_FLOAT);
  assert_int_equal(info.rank, 2);
  assert_true(info.dims[0] < 0);
  assert_string_equal(info.dim_names[0], "batch");
  assert_int_equal(info.dims[1], 4);
  assert_int_equal(pr_engine_model_input(m, 1, &info), PR_ERR_INVALID);
  assert_int_equal(strlen(pr_engine_model_sha256(m)), 64);
  pr_engine_model_destroy(m);
  free(data);
}

static void test_garbage_is_invalid(void **state) {
  unsigned char junk[64];
  for (int i = 0; i < 64; i++) junk[i] = (unsigned char)(i * 37 + 11);
  pr_model_t *m = (pr_model_t *)0x1;
  char err[256] = "";
  pr_status_t st = pr_engine_model_load_memory(junk, sizeof junk, NULL, &m, err, sizeof err);
  assert_true(st < 0);
  assert_null(m);
  assert_true(strlen(err) > 0);
}

static void test_every_truncation_fails_cleanly(void **state) {
  void *data;
  size_t len;
  relu_model(&data, &len, 13, "Relu");
  for (size_t cut = 0; cut < len; cut++) {
    pr_model_t *m = NULL;
    char err[256];
    pr_status_t st = pr_engine_model_load_memory(data, cut, NULL, &m, err, sizeof err);
    /* a prefix may still parse as a smaller valid message; it must never crash */
    if (st == PR_OK)
      pr_engine_model_destroy(m);
    else
      assert_null(m);
  }
  free(data);
}

static void test_unsupported_op_names_node(void **state) {
  void *data;
  size_t len;
  relu_model(&data, &len, 13, "FancyOp");
  pr_model_t *m;
  char err[256];
  assert_int_equal(pr_engine_model_load_memory(data, len, NULL, &m, err, sizeof err),
                   PR_ERR_UNSUPPORTED);
  assert_non_null(strstr(err, "act0"));
  assert_non_null(strstr(err, "FancyOp"));
  free(data);
}

static void test_unknown_attribute_rejected(void **state) {
  mb_t *b = mb_new(13);
  int64_t dims[2] = {2, 4};
  mb_input(b, "x", PR_DTYPE_FLOAT, 2, dims);
  const char *in[] = {"x", NULL}, *out[] = {"y", NULL};
  int n = mb_node(b, "Relu", "r", in, out);
  mb_attr_int(b, n, "bogus", 3);
  mb_output(b, "y");
  void *data;
  size_t len;
  mb_finish(b, &data, &len);
  pr_model_t *m;
  char err[256];
  assert_int_equal(pr_engine_model_load_memory(data, len, NULL, &m, err, sizeof err),
                   PR_ERR_UNSUPPORTED);
  assert_non_null(strstr(err, "bogus"));
  free(data);
}

/* Opsets 1 to PR_MAX_OPSET load when every node's operator version is
 * implemented (Relu's opset-5 version is); a version that is not is refused
 * naming the node, the operator and the opset; an opset past the last is
 * refused naming it. */
static void test_opset_range(void **state) {
  void *data;
  size_t len;
  pr_model_t *m;
  char err[256];
  relu_model(&data, &len, 5, "Relu");
  assert_int_equal(pr_engine_model_load_memory(data, len, NULL, &m, err, sizeof err), PR_OK);
  pr_engine_model_destroy(m);
  free(data);
  relu_model(&data, &len, 5, "Add");
  assert_int_equal(pr_engine_model_load_memory(data, len, NULL, &m, err, sizeof err),
                   PR_ERR_UNSUPPORTED);
  assert_non_null(strstr(err, "act0"));
  assert_non_null(strstr(err, "Add"));
  assert_non_null(strstr(err, "opset 5"));
  free(data);
  relu_model(&data, &len, PR_MAX_OPSET + 1, "Relu");
  assert_int_equal(pr_engine_model_load_memory(data, len, NULL, &m, err, sizeof err),
                   PR_ERR_UNSUPPORTED);
  char want[32];
  snprintf(want, sizeof want, "opset %d", PR_MAX_OPSET + 1);
  assert_non_null(strstr(err, want));
  free(data);
}

static void test_undefined_input_rejected(void **state) {
  mb_t *b = mb_new(13);
  int64_t dims[1] = {4};
  mb_input(b, "x", PR_DTYPE_FLOAT, 1, dims);
  const char *in[] = {"nowhere", NULL}, *out[] = {"y", NULL};
  mb_node(b, "Relu", "r", in, out);
  mb_output(b, "y");
  void *data;
  size_t len;
  mb_finish(b, &data, &len);
  pr_model_t *m;
  char err[256];
  assert_int_equal(pr_engine_model_load_memory(data, len, NULL, &m, err, sizeof err),
                   PR_ERR_INVALID);
  assert_non_null(strstr(err, "nowhere"));
  free(data);
}

static void test_raw_data_size_mismatch(void **state) {
  mb_t *b = mb_new(13);
  int64_t dims[1] = {4}, wdims[1] = {8};
  float w[4] = {1, 2, 3, 4};
  mb_input(b, "x", PR_DTYPE_FLOAT, 1, dims);
  mb_init(b, "w", PR_DTYPE_FLOAT, 1, wdims, w, sizeof w); /* says 8, holds 4 */
  const char *in[] = {"x", "w", NULL}, *out[] = {"y", NULL};
  mb_node(b, "Add", "a", in, out);
  mb_output(b, "y");
  void *data;
  size_t len;
  mb_finish(b, &data, &len);
  pr_model_t *m;
  char err[256];
  assert_int_equal(pr_engine_model_load_memory(data, len, NULL, &m, err, sizeof err),
                   PR_ERR_INVALID);
  assert_non_null(strstr(err, "raw_data"));
  free(data);
}

static void test_input_with_initializer_is_constant(void **state) {
  mb_t *b = mb_new(13);
  int64_t dims[1] = {4};
  float w[4] = {1, 2, 3, 4};
  mb_input(b, "x", PR_DTYPE_FLOAT, 1, dims);
  mb_input(b, "w", PR_DTYPE_FLOAT, 1, dims);
  mb_init(b, "w", PR_DTYPE_FLOAT, 1, dims, w, sizeof w);
  const char *in[] = {"x", "w", NULL}, *out[] = {"y", NULL};
  mb_node(b, "Add", "a", in, out);
  mb_output(b, "y");
  void *data;
  size_t len;
  mb_finish(b, &data, &len);
  pr_model_t *m;
  char err[256];
  assert_int_equal(pr_engine_model_load_memory(data, len, NULL, &m, err, sizeof err), PR_OK);
  assert_int_equal(pr_engine_model_num_inputs(m), 1);
  pr_engine_model_destroy(m);
  free(data);
}

/* An initializer stored in an external file next to the model. */
static void test_external_data(void **state) {
  char dir[] = "/tmp/pr_ext_XXXXXX";
  assert_non_null(mkdtemp(dir));
  char path[128];
  float w[4] = {1, 2, 3, 4};
  snprintf(path, sizeof path, "%s/weights.bin", dir);
  FILE *f = fopen(path, "wb");
  fwrite("pad!", 1, 4, f); /* the tensor starts at offset 4 */
  fwrite(w, sizeof w, 1, f);
  fclose(f);
  mb_t *b = mb_new(13);
  int64_t dims[1] = {4};
  mb_input(b, "x", PR_DTYPE_FLOAT, 1, dims);
  mb_init_external(b, "w", PR_DTYPE_FLOAT, 1, dims, "weights.bin", 4, sizeof w);
  mb_node(b, "Add", "a", (const char *[]){"x", "w", NULL}, (const char *[]){"y", NULL});
  mb_output(b, "y");
  void *data;
  size_t len;
  mb_finish(b, &data, &len);
  snprintf(path, sizeof path, "%s/model.onnx", dir);
  f = fopen(path, "wb");
  fwrite(data, 1, len, f);
  fclose(f);
  free(data);
  pr_model_t *m;
  char err[256];
  assert_int_equal(pr_engine_model_load_file(path, &m, err, sizeof err), PR_OK);
  pr_session_options_t opt = pr_session_options_default();
  pr_session_t *s;
  assert_int_equal(pr_engine_session_create(m, &opt, &s, err, sizeof err), PR_OK);
  float x[4] = {10, 20, 30, 40};
  pr_tensor_t in = {.dtype = PR_DTYPE_FLOAT, .rank = 1, .dims = {4}, .data = x}, out;
  assert_int_equal(pr_engine_session_run(s, &in, 1, &out, 1, err, sizeof err), PR_OK);
  for (int i = 0; i < 4; i++) assert_float_equal(((float *)out.data)[i], x[i] + w[i], 0);
  pr_engine_session_destroy(s);
  pr_engine_model_destroy(m);
  /* a location that leaves the model's folder is refused */
  b = mb_new(13);
  mb_input(b, "x", PR_DTYPE_FLOAT, 1, dims);
  mb_init_external(b, "w", PR_DTYPE_FLOAT, 1, dims, "../weights.bin", 4, sizeof w);
  mb_node(b, "Add", "a", (const char *[]){"x", "w", NULL}, (const char *[]){"y", NULL});
  mb_output(b, "y");
  mb_finish(b, &data, &len);
  assert_int_equal(pr_engine_model_load_memory(data, len, dir, &m, err, sizeof err),
                   PR_ERR_INVALID);
  assert_non_null(strstr(err, "external"));
  free(data);
  snprintf(path, sizeof path, "%s/weights.bin", dir);
  unlink(path);
  snprintf(path, sizeof path, "%s/model.onnx", dir);
  unlink(path);
  rmdir(dir);
}

static void write_file(const char *dir, const char *name, const void *data, size_t len) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  fwrite(data, 1, len, f);
  fclose(f);
}

/* Loads model.onnx from dir with initializer w [4] in external file
 * `location`; returns the status, the message in err. */
static pr_status_t load_external_at(const char *dir, const char *location, char *err,
                                    size_t err_len) {
  mb_t *b = mb_new(13);
  int64_t dims[1] = {4};
  mb_input(b, "x", PR_DTYPE_FLOAT, 1, dims);
  mb_init_external(b, "w", PR_DTYPE_FLOAT, 1, dims, location, 0, 16);
  mb_node(b, "Add", "a", (const char *[]){"x", "w", NULL}, (const char *[]){"y", NULL});
  mb_output(b, "y");
  void *data;
  size_t len;
  mb_finish(b, &data, &len);
  write_file(dir, "model.onnx", data, len);
  free(data);
  char path[256];
  snprintf(path, sizeof path, "%s/model.onnx", dir);
  pr_model_t *m = NULL;
  err[0] = 0;
  pr_status_t st = pr_engine_model_load_file(path, &m, err, err_len);
  pr_engine_model_destroy(m);
  return st;
}

/* External data stays inside the model's folder: symlinks that leave it,
 * absolute locations and '..' components are refused, naming the location;
 * files (and symlinks) inside it load. */
static void test_external_data_confined(void **state) {
  char dir[] = "/tmp/pr_ext_XXXXXX", outside[] = "/tmp/pr_out_XXXXXX";
  assert_non_null(mkdtemp(dir));
  assert_non_null(mkdtemp(outside));
  float w[4] = {1, 2, 3, 4};
  char path[256], target[256], err[512];
  write_file(outside, "secret.bin", w, sizeof w);
  snprintf(path, sizeof path, "%s/sub", dir);
  assert_int_equal(mkdir(path, 0700), 0);
  write_file(dir, "sub/real.bin", w, sizeof w);
  write_file(dir, "a..b.bin", w, sizeof w); /* '..' inside a name is no component */
  /* link.bin -> the file outside, out -> the folder outside, in.bin -> sub/real.bin */
  snprintf(target, sizeof target, "%s/secret.bin", outside);
  snprintf(path, sizeof path, "%s/link.bin", dir);
  assert_int_equal(symlink(target, path), 0);
  snprintf(path, sizeof path, "%s/out", dir);
  assert_int_equal(symlink(outside, path), 0);
  snprintf(path, sizeof path, "%s/in.bin", dir);
  assert_int_equal(symlink("sub/real.bin", path), 0);

  const char *refused[] = {"link.bin", "out/secret.bin", target, "../x.bin", "sub/../a..b.bin"};
  for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
    pr_status_t st = load_external_at(dir, refused[i], err, sizeof err);
    if (st != PR_ERR_INVALID) fail_msg("'%s' gave %d: %s", refused[i], st, err);
    if (!strstr(err, refused[i])) fail_msg("'%s': message does not name it: %s", refused[i], err);
  }
  const char *loads[] = {"sub/real.bin", "in.bin", "a..b.bin", "./sub//real.bin"};
  for (size_t i = 0; i < sizeof loads / sizeof *loads; i++)
    if (load_external_at(dir, loads[i], err, sizeof err)) fail_msg("'%s': %s", loads[i], err);
  /* a location that is not a regular file is refused */
  assert_int_equal(load_external_at(dir, "sub", err, sizeof err), PR_ERR_INVALID);

  const char *files[] = {"link.bin", "out", "in.bin", "sub/real.bin", "a..b.bin", "model.onnx"};
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, files[i]);
    unlink(path);
  }
  snprintf(path, sizeof path, "%s/sub", dir);
  rmdir(path);
  rmdir(dir);
  unlink(target);
  rmdir(outside);
}

static void test_missing_file(void **state) {
  pr_model_t *m;
  char err[256];
  assert_int_equal(pr_engine_model_load_file("/nonexistent/model.onnx", &m, err, sizeof err),
                   PR_ERR_IO);
  assert_non_null(strstr(err, "/nonexistent/model.onnx"));
}

/* Found by fuzz_loader: a STRINGS attribute holding an empty string (its
 * bytes a NULL pointer) was searched for NUL bytes with memchr(NULL, 0, 0),
 * undefined behaviour (UBSan). The model loads; its Transpose, whose
 * perm is given as strings, is refused when compiled, naming perm. */
static void test_empty_string_in_strings_attribute(void **state) {
  (void)state;
  static const uint8_t model[] = {
      0x08, 0x07, 0x12, 0x0c, 0x62, 0x61, 0x63, 0x6b, 0x65, 0x6e, 0x64, 0x2d, 0x74, 0x65, 0x73,
      0x74, 0x3a, 0x91, 0x01, 0x0a, 0x2e, 0x0a, 0x04, 0x64, 0x61, 0x74, 0x61, 0x12, 0x0a, 0x74,
      0x72, 0x61, 0x6e, 0x73, 0x70, 0x6f, 0x73, 0x65, 0x64, 0x22, 0x09, 0x54, 0x72, 0x61, 0x6e,
      0x73, 0x70, 0x6f, 0x73, 0x65, 0x2a, 0x0f, 0x0a, 0x04, 0x70, 0x65, 0x72, 0x6d, 0x40, 0x02,
      0x4a, 0x00, 0x40, 0x01, 0xa0, 0x01, 0x08, 0x12, 0x21, 0x74, 0x65, 0x73, 0x74, 0x5f, 0x74,
      0x72, 0x61, 0x6e, 0x73, 0x70, 0x6f, 0x73, 0x65, 0x5f, 0x61, 0x6c, 0x6c, 0x5f, 0x70, 0x65,
      0x72, 0x6d, 0x75, 0x74, 0x61, 0x74, 0x69, 0x6f, 0x6e, 0x73, 0x5f, 0x34, 0x5a, 0x1a, 0x0a,
      0x04, 0x64, 0x61, 0x74, 0x61, 0x12, 0x12, 0x0a, 0x10, 0x08, 0x01, 0x12, 0x0c, 0x0a, 0x02,
      0x08, 0x02, 0x0a, 0x02, 0x08, 0x03, 0x0a, 0x02, 0x08, 0x04, 0x62, 0x20, 0x0a, 0x0a, 0x74,
      0x72, 0x61, 0x6e, 0x73, 0x70, 0x6f, 0x73, 0x65, 0x64, 0x12, 0x12, 0x0a, 0x10, 0x08, 0x01,
      0x12, 0x0c, 0x0a, 0x02, 0x08, 0x04, 0x0a, 0x02, 0x08, 0x02, 0x0a, 0x02, 0x08, 0x03, 0x42,
      0x04, 0x0a, 0x00, 0x10, 0x0d};
  pr_model_t *m = NULL;
  char err[256] = "";
  assert_int_equal(pr_engine_model_load_memory(model, sizeof model, NULL, &m, err, sizeof err),
                   PR_OK);
  pr_session_options_t opt = pr_session_options_default();
  pr_session_t *s = NULL;
  assert_int_not_equal(pr_engine_session_create(m, &opt, &s, err, sizeof err), PR_OK);
  assert_null(s);
  assert_non_null(strstr(err, "perm"));
  pr_engine_model_destroy(m);
}

/* ---- nesting depth: the wire-format pre-scan before protobuf-c ---- */

/* Protobuf wire bytes written back to front, so that a message nested n
 * deep costs O(n) to build: a field's contents first, then its length and
 * tag in front of them. */
typedef struct {
  uint8_t *buf;
  size_t cap, at; /* the bytes written are buf[at, cap) */
} rev_t;

static void rev_init(rev_t *r, size_t cap) {
  r->buf = malloc(cap);
  assert_non_null(r->buf);
  r->cap = r->at = cap;
}
static size_t rev_len(const rev_t *r) {
  return r->cap - r->at;
}
static void rev_bytes(rev_t *r, const void *p, size_t n) {
  assert_true(n <= r->at);
  r->at -= n;
  memcpy(r->buf + r->at, p, n);
}
static void rev_varint(rev_t *r, uint64_t v) {
  uint8_t tmp[10];
  size_t n = 0;
  do {
    tmp[n] = (uint8_t)(v & 0x7f);
    v >>= 7;
    if (v) tmp[n] |= 0x80;
    n++;
  } while (v);
  rev_bytes(r, tmp, n);
}
/* the last `len` bytes written become field `field` (length-delimited) */
static void rev_wrap(rev_t *r, int field, size_t len) {
  rev_varint(r, len);
  rev_varint(r, (uint64_t)field << 3 | 2);
}
static void rev_string(rev_t *r, int field, const char *s) {
  size_t m = rev_len(r);
  rev_bytes(r, s, strlen(s));
  rev_wrap(r, field, rev_len(r) - m);
}
static void rev_int(rev_t *r, int field, uint64_t v) {
  rev_varint(r, v);
  rev_varint(r, (uint64_t)field << 3);
}
/* ModelProto around the GraphProto of the last `graph` bytes: graph (7),
 * opset_import (8) version 13, ir_version (1) 8. */
static void rev_model(rev_t *r, size_t graph) {
  rev_wrap(r, 7, graph);
  size_t m = rev_len(r);
  rev_int(r, 2, 13);
  rev_wrap(r, 8, rev_len(r) - m);
  rev_int(r, 1, 8);
}
/* The bytes as a malloc'd buffer (*len); frees r. */
static uint8_t *rev_take(rev_t *r, size_t *len) {
  *len = rev_len(r);
  uint8_t *out = malloc(*len);
  assert_non_null(out);
  memcpy(out, r->buf + r->at, *len);
  free(r->buf);
  return out;
}

/* A model whose graph input x has a type of `levels` sequences nested in
 * one another around a float tensor type (with an empty shape when
 * `shape`): Model 1, Graph 2, ValueInfo 3, TypeProto 4, then Sequence and
 * TypeProto for each level, then the tensor type (and its shape): messages
 * nest 5 + 2 levels + shape deep. */
static uint8_t *deep_type_model(int levels, bool shape, size_t *len) {
  rev_t r;
  rev_init(&r, 64 + (size_t)levels * 16);
  size_t m = rev_len(&r);
  if (shape) rev_wrap(&r, 2, 0);    /* TypeProto.Tensor.shape: empty */
  rev_int(&r, 1, 1);                /* elem_type FLOAT */
  rev_wrap(&r, 1, rev_len(&r) - m); /* TypeProto.tensor_type */
  for (int i = 0; i < levels; i++) {
    rev_wrap(&r, 1, rev_len(&r) - m); /* Sequence.elem_type: TypeProto */
    rev_wrap(&r, 4, rev_len(&r) - m); /* TypeProto.sequence_type */
  }
  rev_wrap(&r, 2, rev_len(&r) - m);  /* ValueInfoProto.type */
  rev_string(&r, 1, "x");            /* ValueInfoProto.name */
  rev_wrap(&r, 11, rev_len(&r) - m); /* GraphProto.input */
  rev_model(&r, rev_len(&r));
  return rev_take(&r, len);
}

/* A model of If nodes nested `levels` deep: each then_branch holds the
 * next If (Graph, Node, Attribute: 3 message levels each). */
static uint8_t *deep_if_model(int levels, size_t *len) {
  rev_t r;
  rev_init(&r, 64 + (size_t)levels * 64);
  rev_string(&r, 2, "g"); /* the innermost graph: a name only */
  for (int i = 0; i < levels; i++) {
    size_t g = rev_len(&r);
    rev_wrap(&r, 6, g);               /* AttributeProto.g */
    rev_int(&r, 20, 5);               /* type GRAPH */
    rev_string(&r, 1, "then_branch"); /* name */
    rev_wrap(&r, 5, rev_len(&r));     /* NodeProto.attribute */
    rev_string(&r, 4, "If");
    rev_string(&r, 2, "y");
    rev_string(&r, 1, "c");
    rev_wrap(&r, 1, rev_len(&r)); /* GraphProto.node */
  }
  /* the outermost graph's input c: a bool scalar */
  size_t m = rev_len(&r);
  rev_wrap(&r, 2, 0);               /* TypeProto.Tensor.shape: a scalar */
  rev_int(&r, 1, 9);                /* elem_type BOOL */
  rev_wrap(&r, 1, rev_len(&r) - m); /* TypeProto.tensor_type */
  rev_wrap(&r, 2, rev_len(&r) - m); /* ValueInfoProto.type */
  rev_string(&r, 1, "c");
  rev_wrap(&r, 11, rev_len(&r) - m); /* GraphProto.input */
  rev_model(&r, rev_len(&r));
  return rev_take(&r, len);
}

static pr_status_t load_bytes(const uint8_t *data, size_t len, char *err, size_t err_len) {
  pr_model_t *m = NULL;
  err[0] = 0;
  pr_status_t st = pr_engine_model_load_memory(data, len, NULL, &m, err, err_len);
  if (st == PR_OK)
    pr_engine_model_destroy(m);
  else
    assert_null(m);
  return st;
}

/* protobuf-c 1.4.1 recursed once per nested message: a TypeProto nested
 * 100,000 deep (about 1 MB) overflowed the stack (SIGSEGV) inside
 * onnx__model_proto__unpack. The pre-scan refuses it, naming the bound. */
static void test_deep_type_refused(void **state) {
  (void)state;
  size_t len;
  uint8_t *data = deep_type_model(100000, false, &len);
  char err[256];
  assert_int_equal(load_bytes(data, len, err, sizeof err), PR_ERR_INVALID);
  char want[80];
  snprintf(want, sizeof want, "model nests messages deeper than %d levels", PR_PRESCAN_MAX_DEPTH);
  if (!strstr(err, want)) fail_msg("message: %s", err);
  free(data);
}

/* If subgraphs nested 30,000 deep (90,000 message levels): refused before
 * unpacking, not after (the loader's own bound of 8 subgraph levels runs
 * on what protobuf-c unpacked). */
static void test_deep_if_refused(void **state) {
  (void)state;
  size_t len;
  uint8_t *data = deep_if_model(30000, &len);
  char err[256];
  assert_int_equal(load_bytes(data, len, err, sizeof err), PR_ERR_INVALID);
  if (!strstr(err, "deeper than")) fail_msg("message: %s", err);
  free(data);
  /* 9 levels pass the scan (29 message levels) and meet the loader's bound */
  data = deep_if_model(9, &len);
  assert_int_equal(
      pr_engine__proto_prescan(data, len, &onnx__model_proto__descriptor, PR_PRESCAN_MAX_DEPTH,
                               PR_PRESCAN_MAX_ITEMS, err, sizeof err),
      PR_OK);
  assert_int_not_equal(load_bytes(data, len, err, sizeof err), PR_OK);
  if (!strstr(err, "subgraphs nested deeper than 8")) fail_msg("message: %s", err);
  free(data);
}

/* Exactly PR_PRESCAN_MAX_DEPTH levels pass the scan (the load then fails
 * for what the model is: a sequence-typed input); one more is refused. */
static void test_depth_bound_exact(void **state) {
  (void)state;
  int levels = (PR_PRESCAN_MAX_DEPTH - 5) / 2;
  bool shape = (PR_PRESCAN_MAX_DEPTH - 5) % 2;
  size_t len;
  char err[256];
  uint8_t *data = deep_type_model(levels, shape, &len); /* PR_PRESCAN_MAX_DEPTH deep */
  assert_int_equal(
      pr_engine__proto_prescan(data, len, &onnx__model_proto__descriptor, PR_PRESCAN_MAX_DEPTH,
                               PR_PRESCAN_MAX_ITEMS, err, sizeof err),
      PR_OK);
  assert_int_not_equal(load_bytes(data, len, err, sizeof err), PR_OK);
  if (strstr(err, "deeper than") || !strstr(err, "only tensor types")) fail_msg("message: %s", err);
  free(data);
  data = deep_type_model(levels + shape, !shape, &len); /* one level more */
  assert_int_equal(load_bytes(data, len, err, sizeof err), PR_ERR_INVALID);
  if (!strstr(err, "deeper than")) fail_msg("message: %s", err);
  /* the bound is the caller's: one level less refuses, the message count too */
  assert_int_equal(
      pr_engine__proto_prescan(data, len, &onnx__model_proto__descriptor, PR_PRESCAN_MAX_DEPTH + 1,
                               PR_PRESCAN_MAX_ITEMS, err, sizeof err),
      PR_OK);
  assert_int_equal(pr_engine__proto_prescan(data, len, &onnx__model_proto__descriptor,
                                            PR_PRESCAN_MAX_DEPTH + 1, 50, err, sizeof err),
                   PR_ERR_INVALID);
  if (!strstr(err, "more than 50 messages, strings")) fail_msg("message: %s", err);
  free(data);
  /* a real model passes: the relu model of these tests */
  void *relu;
  relu_model(&relu, &len, 13, "Relu");
  assert_int_equal(
      pr_engine__proto_prescan(relu, len, &onnx__model_proto__descriptor, PR_PRESCAN_MAX_DEPTH,
                               PR_PRESCAN_MAX_ITEMS, err, sizeof err),
      PR_OK);
  free(relu);
}

/* The items protobuf-c allocates one by one are counted: 2 bytes of file
 * (an empty string, an empty message, an unknown field) cost tens of bytes
 * unpacked, so a small file of them could cost gigabytes. */
static void test_item_budget(void **state) {
  (void)state;
  for (int kind = 0; kind < 3; kind++) {
    rev_t r;
    rev_init(&r, 4096);
    size_t m = rev_len(&r);
    for (int i = 0; i < 1000; i++) {
      if (kind == 0)
        rev_wrap(&r, 1, 0); /* NodeProto.input: "" */
      else if (kind == 1)
        rev_wrap(&r, 5, 0); /* NodeProto.attribute: an empty message */
      else
        rev_int(&r, 100, 1); /* field 100: unknown to NodeProto */
    }
    rev_wrap(&r, 1, rev_len(&r) - m); /* GraphProto.node */
    rev_model(&r, rev_len(&r));
    size_t len;
    uint8_t *data = rev_take(&r, &len);
    char err[256];
    assert_int_equal(pr_engine__proto_prescan(data, len, &onnx__model_proto__descriptor,
                                              PR_PRESCAN_MAX_DEPTH, 2000, err, sizeof err),
                     PR_OK);
    assert_int_equal(pr_engine__proto_prescan(data, len, &onnx__model_proto__descriptor,
                                              PR_PRESCAN_MAX_DEPTH, 999, err, sizeof err),
                     PR_ERR_INVALID);
    if (!strstr(err, "more than 999 messages, strings and unknown fields"))
      fail_msg("kind %d: %s", kind, err);
    free(data);
  }
}

/* Malformed wire data is refused by the scan (and never read past its
 * end: ASan checks every case at its exact length). */
static void test_malformed_wire_refused(void **state) {
  (void)state;
  static const struct {
    const char *what;
    uint8_t bytes[16];
    size_t len;
  } cases[] = {
      {"varint cut short", {0x08, 0x80}, 2},
      {"varint of 11 bytes",
       {0x08, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01},
       12},
      {"tag cut short", {0x80}, 1},
      {"tag of 6 bytes", {0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0x00}, 7},
      {"field number 0", {0x00, 0x01}, 2},
      {"length past the end", {0x3a, 0x05, 0x00}, 3},
      {"length cut short", {0x3a, 0x80}, 2},
      {"length of 6 bytes", {0x3a, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, 7},
      {"nested field past its message", {0x3a, 0x02, 0x0a, 0x05, 0x00, 0x00, 0x00, 0x00}, 8},
      {"fixed64 cut short", {0x09, 0x00, 0x00, 0x00}, 4},
      {"fixed32 cut short", {0x0d, 0x00, 0x00}, 3},
      {"group", {0x0b, 0x0c}, 2},
      {"wire type 7", {0x0f}, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    uint8_t *copy = malloc(cases[i].len); /* exact size: ASan sees an over-read */
    memcpy(copy, cases[i].bytes, cases[i].len);
    char err[256] = "";
    pr_status_t st =
        pr_engine__proto_prescan(copy, cases[i].len, &onnx__model_proto__descriptor,
                                 PR_PRESCAN_MAX_DEPTH, PR_PRESCAN_MAX_ITEMS, err, sizeof err);
    if (st != PR_ERR_INVALID || !strstr(err, "malformed"))
      fail_msg("%s: status %d, '%s'", cases[i].what, st, err);
    if (load_bytes(copy, cases[i].len, err, sizeof err) != PR_ERR_INVALID)
      fail_msg("%s: loaded", cases[i].what);
    free(copy);
  }
  /* unknown fields of every wire type are skipped, as protobuf-c skips them */
  static const uint8_t unknown[] = {0xf8, 0x07, 0x01,                           /* 127: varint */
                                    0xf9, 0x07, 1,    2,    3,   4, 5, 6, 7, 8, /* 127: fixed64 */
                                    0xfd, 0x07, 1,    2,    3,   4,             /* 127: fixed32 */
                                    0xfa, 0x07, 0x02, 0x0a, 0x00};              /* 127: bytes */
  char err[256];
  assert_int_equal(
      pr_engine__proto_prescan(unknown, sizeof unknown, &onnx__model_proto__descriptor,
                               PR_PRESCAN_MAX_DEPTH, PR_PRESCAN_MAX_ITEMS, err, sizeof err),
      PR_OK);
  Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, sizeof unknown, unknown);
  assert_non_null(mp);
  onnx__model_proto__free_unpacked(mp, NULL);
}

/* ---- allocations sized by the file: checked against it first ---- */

static long max_rss_kb(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

/* Loads a model from dir whose initializer w declares 16384 x 16384 floats
 * (1 GiB) in external file `location` (offset, length as given: NULL
 * leaves it out). */
static pr_status_t load_huge_external(const char *dir, const char *location, const char *offset,
                                      char *err, size_t err_len) {
  mb_t *b = mb_new(13);
  int64_t dims[2] = {16384, 16384};
  mb_input(b, "x", PR_DTYPE_FLOAT, 2, dims);
  mb_init_external(b, "w", PR_DTYPE_FLOAT, 2, dims, location, 0, 16384L * 16384 * 4);
  mb_node(b, "Add", "a", (const char *[]){"x", "w", NULL}, (const char *[]){"y", NULL});
  mb_output(b, "y");
  void *data;
  size_t len;
  mb_finish(b, &data, &len);
  Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, len, data);
  free(data);
  assert_non_null(mp);
  if (offset) { /* the builder's offset is a number: rewrite it as text */
    Onnx__TensorProto *tp = mp->graph->initializer[0];
    for (size_t i = 0; i < tp->n_external_data; i++)
      if (!strcmp(tp->external_data[i]->key, "offset")) {
        free(tp->external_data[i]->value);
        tp->external_data[i]->value = strdup(offset);
      }
  }
  len = onnx__model_proto__get_packed_size(mp);
  data = malloc(len);
  onnx__model_proto__pack(mp, data);
  onnx__model_proto__free_unpacked(mp, NULL);
  pr_model_t *m = NULL;
  err[0] = 0;
  pr_status_t st = pr_engine_model_load_memory(data, len, dir, &m, err, err_len);
  free(data);
  pr_engine_model_destroy(m);
  return st;
}

/* An external initializer declaring 1 GiB was refused only after the
 * loader allocated and zeroed that GiB: now the file's real size (and
 * where it is, and what it is) is checked first. Resident memory must not
 * grow by anything like the declared size. A FIFO must not block. */
static void test_external_size_checked_first(void **state) {
  (void)state;
  char dir[] = "/tmp/pr_big_XXXXXX", path[256], err[512];
  assert_non_null(mkdtemp(dir));
  float w[4] = {1, 2, 3, 4};
  write_file(dir, "small.bin", w, sizeof w);
  snprintf(path, sizeof path, "%s/fifo", dir);
  assert_int_equal(mkfifo(path, 0600), 0);
  long before = max_rss_kb();
  struct {
    const char *location, *offset, *says;
  } cases[] = {
      {"../../outside.bin", NULL, "refused"}, /* outside the folder */
      {"small.bin", NULL, "holds 16 bytes"},  /* the file is too short */
      {"small.bin", "8", "holds 16 bytes"},   /* and past an offset */
      {"small.bin", "99999999999", "holds 16 bytes"},
      {"small.bin", "12abc", "offset/length invalid"},
      {"small.bin", "-4", "offset/length invalid"},
      {"fifo", NULL, "not a regular file"}, /* opened without blocking, refused */
      {"missing.bin", NULL, "missing.bin"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    time_t t0 = time(NULL);
    pr_status_t st = load_huge_external(dir, cases[i].location, cases[i].offset, err, sizeof err);
    if (st == PR_OK || !strstr(err, cases[i].says))
      fail_msg("'%s' offset %s: %d '%s'", cases[i].location,
               cases[i].offset ? cases[i].offset : "-", st, err);
    assert_true(time(NULL) - t0 < 5);
  }
  long grew_mb = (max_rss_kb() - before) / 1024;
  if (grew_mb > 128) fail_msg("resident memory grew by %ld MB", grew_mb);
  unlink(path);
  snprintf(path, sizeof path, "%s/small.bin", dir);
  unlink(path);
  rmdir(dir);
}

/* raw_data and the typed fields are checked against the shape before the
 * tensor's buffer is allocated: both directions of a mismatch refused. */
static void test_inline_data_checked_first(void **state) {
  (void)state;
  int64_t big[2] = {16384, 16384}, four[1] = {4};
  float w[5] = {1, 2, 3, 4, 5};
  struct {
    int rank;
    const int64_t *dims;
    size_t bytes;
  } cases[] = {{2, big, 16}, {1, four, 12}, {1, four, 20}};
  long before = max_rss_kb();
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    mb_t *b = mb_new(13);
    mb_input(b, "x", PR_DTYPE_FLOAT, 1, four);
    mb_init(b, "w", PR_DTYPE_FLOAT, cases[i].rank, cases[i].dims, w, cases[i].bytes);
    mb_node(b, "Add", "a", (const char *[]){"x", "w", NULL}, (const char *[]){"y", NULL});
    mb_output(b, "y");
    char err[256];
    assert_null(mb_load(b, err, sizeof err));
    if (!strstr(err, "raw_data has")) fail_msg("case %zu: %s", i, err);
  }
  long grew_mb = (max_rss_kb() - before) / 1024;
  if (grew_mb > 128) fail_msg("resident memory grew by %ld MB", grew_mb);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_valid_model_metadata),
      cmocka_unit_test(test_garbage_is_invalid),
      cmocka_unit_test(test_every_truncation_fails_cleanly),
      cmocka_unit_test(test_unsupported_op_names_node),
      cmocka_unit_test(test_unknown_attribute_rejected),
      cmocka_unit_test(test_opset_range),
      cmocka_unit_test(test_undefined_input_rejected),
      cmocka_unit_test(test_raw_data_size_mismatch),
      cmocka_unit_test(test_input_with_initializer_is_constant),
      cmocka_unit_test(test_external_data),
      cmocka_unit_test(test_external_data_confined),
      cmocka_unit_test(test_missing_file),
      cmocka_unit_test(test_empty_string_in_strings_attribute),
      cmocka_unit_test(test_deep_type_refused),
      cmocka_unit_test(test_deep_if_refused),
      cmocka_unit_test(test_depth_bound_exact),
      cmocka_unit_test(test_item_budget),
      cmocka_unit_test(test_malformed_wire_refused),
      cmocka_unit_test(test_external_size_checked_first),
      cmocka_unit_test(test_inline_data_checked_first),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
