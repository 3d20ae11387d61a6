/* Tensor files: .npy and TensorProto round trips, and bad files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "packrat/engine.h"

static char dir[64];

static int setup(void **state) {
  snprintf(dir, sizeof dir, "/tmp/pr_tensor_io_XXXXXX");
  return mkdtemp(dir) ? 0 : -1;
}

static void roundtrip(pr_dtype_t dt, int npy) {
  float f[6] = {1.5f, -2, 3, 4, 5, 6.25f};
  int64_t i64[6] = {1, -2, 3, 1LL << 40, 5, 6};
  pr_tensor_t t = {.dtype = dt,
                   .rank = 2,
                   .dims = {2, 3},
                   .data = dt == PR_DTYPE_FLOAT ? (void *)f : (void *)i64};
  char path[128];
  snprintf(path, sizeof path, "%s/t.%s", dir, npy ? "npy" : "pb");
  assert_int_equal(
      npy ? pr_engine_tensor_write_npy(path, &t) : pr_engine_tensor_write_pb(path, &t, "tname"),
      PR_OK);
  pr_tensor_t r;
  char *name = NULL, err[256];
  assert_int_equal(pr_engine_tensor_read_file(path, &r, &name, err, sizeof err), PR_OK);
  assert_int_equal(r.dtype, dt);
  assert_int_equal(r.rank, 2);
  assert_int_equal(r.dims[0], 2);
  assert_int_equal(r.dims[1], 3);
  assert_memory_equal(r.data, t.data, 6 * pr_dtype_size(dt));
  if (!npy) assert_string_equal(name, "tname");
  free(name);
  pr_engine_tensor_free(&r);
  unlink(path);
}

static void test_npy_float(void **s) {
  roundtrip(PR_DTYPE_FLOAT, 1);
}
static void test_npy_int64(void **s) {
  roundtrip(PR_DTYPE_INT64, 1);
}
static void test_pb_float(void **s) {
  roundtrip(PR_DTYPE_FLOAT, 0);
}
static void test_pb_int64(void **s) {
  roundtrip(PR_DTYPE_INT64, 0);
}

static void test_bad_npy(void **s) {
  char path[128];
  snprintf(path, sizeof path, "%s/bad.npy", dir);
  FILE *f = fopen(path, "wb");
  const char hdr[] = "\x93NUMPY\x01\x00\x20\x00{'descr': '<f4', 'shape': (4,)}";
  fwrite(hdr, 1, sizeof hdr - 1, f);
  fclose(f);
  pr_tensor_t r;
  char err[256];
  assert_int_equal(pr_engine_tensor_read_file(path, &r, NULL, err, sizeof err), PR_ERR_INVALID);
  unlink(path);
}

static void test_missing(void **s) {
  pr_tensor_t r;
  char err[256];
  assert_int_equal(pr_engine_tensor_read_file("/nonexistent.pb", &r, NULL, err, sizeof err),
                   PR_ERR_IO);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_npy_float), cmocka_unit_test(test_npy_int64),
      cmocka_unit_test(test_pb_float),  cmocka_unit_test(test_pb_int64),
      cmocka_unit_test(test_bad_npy),   cmocka_unit_test(test_missing),
  };
  int rc = cmocka_run_group_tests(tests, setup, NULL);
  rmdir(dir);
  return rc;
}
