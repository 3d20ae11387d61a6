/* Model loading: valid models, and every kind of bad input is an error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model_builder.h"
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
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
