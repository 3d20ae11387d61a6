/* The per-instance session cache (runtime/shape_cache.h): a session per
 * (input shapes, rows), compiled on a miss and run as any other; bounded by
 * count and by bytes, least recently used out; the entry just made stays
 * even alone over the byte bound; sizes warmed ahead count as neither hit
 * nor miss. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/topology.h"
#include "model_builder.h"
#include "packrat/engine.h"
#include "runtime/shape_cache.h"
#include "runtime/worker.h"

/* x[batch, d1, 4] -> Neg -> y */
static pr_model_t *neg_seq_model(void) {
  const int64_t xd[3] = {-1, -1, 4};
  char err[256];
  pr_model_t *m = mb_neg_model(3, xd, err, sizeof err);
  if (!m) fail_msg("%s", err);
  return m;
}

typedef struct {
  pr_model_t *model;
  pr_worker_t w;
  pr_shape_cache_stats_t stats;
} fixture_t;

static int setup(void **state) {
  fixture_t *f = calloc(1, sizeof *f);
  f->model = neg_seq_model();
  int cpus[1] = {0};
  char err[256];
  if (pr__worker_init(&f->w, 0, f->model, cpus, 1, NULL, err, sizeof err)) fail_msg("%s", err);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture_t *f = *state;
  pr__worker_join(&f->w);
  pr_engine_model_destroy(f->model);
  free(f);
  return 0;
}

/* The session for length len at rows (asserted to exist). */
static pr_worker_session_t *get(fixture_t *f, pr_shape_cache_t *c, int len, int rows) {
  pr_tensor_t shape = {.dtype = PR_DTYPE_FLOAT, .rank = 3, .dims = {1, len, 4}};
  double compile_s;
  pr_status_t st;
  pr_worker_session_t *z = pr__shape_cache_get(c, &f->w, &shape, rows, &compile_s, &st);
  if (!z) fail_msg("len %d rows %d: %d %s", len, rows, st, f->w.err);
  assert_int_equal(z->rows, rows);
  assert_int_equal(z->in[0].dims[1], len);
  return z;
}

static void counts(fixture_t *f, uint64_t hits, uint64_t misses, uint64_t evictions) {
  assert_int_equal(atomic_load(&f->stats.hits), hits);
  assert_int_equal(atomic_load(&f->stats.misses), misses);
  assert_int_equal(atomic_load(&f->stats.evictions), evictions);
}

static void test_count_bound_lru(void **state) {
  fixture_t *f = *state;
  assert_null(pr__shape_cache_create(0, 1, &f->stats));
  assert_null(pr__shape_cache_create(1, 0, &f->stats));
  pr__shape_cache_destroy(NULL, &f->w);
  pr_shape_cache_t *c = pr__shape_cache_create(2, (size_t)1 << 30, &f->stats);
  get(f, c, 2, 1);
  get(f, c, 3, 1);
  counts(f, 0, 2, 0);
  get(f, c, 2, 1); /* hit: 3 is now the least recently used */
  get(f, c, 2, 2); /* another rows: another session */
  counts(f, 1, 3, 1);
  assert_int_equal(pr__shape_cache_count(c), 2);
  get(f, c, 3, 1); /* evicted: compiled again, (2, 1) goes */
  counts(f, 1, 4, 2);
  get(f, c, 2, 2);
  counts(f, 2, 4, 2);
  /* a cached session runs as any other */
  pr_worker_session_t *z = get(f, c, 3, 1);
  for (int k = 0; k < 12; k++) ((float *)z->in[0].data)[k] = (float)k;
  pr_tensor_t out;
  char err[256];
  assert_int_equal(pr_engine_session_run(z->session, z->in, 1, &out, 1, err, sizeof err), PR_OK);
  assert_int_equal(out.dims[1], 3);
  for (int k = 0; k < 12; k++) assert_true(((float *)out.data)[k] == -(float)k);
  assert_true(atomic_load(&f->stats.compile_ns) > 0);
  pr__shape_cache_destroy(c, &f->w);
}

static void test_byte_bound(void **state) {
  fixture_t *f = *state;
  pr_shape_cache_t *c = pr__shape_cache_create(8, (size_t)1 << 30, NULL);
  get(f, c, 64, 4);
  size_t one = pr__shape_cache_bytes(c);
  assert_true(one >= 64 * 4 * 4 * sizeof(float)); /* its input buffer at least */
  pr__shape_cache_destroy(c, &f->w);
  c = pr__shape_cache_create(8, one + one / 2, &f->stats);
  get(f, c, 64, 4);
  get(f, c, 65, 4); /* two do not fit: the first goes */
  counts(f, 0, 2, 1);
  assert_int_equal(pr__shape_cache_count(c), 1);
  get(f, c, 1024, 4); /* alone over the bound: kept (the request runs on it) */
  counts(f, 0, 3, 2);
  assert_int_equal(pr__shape_cache_count(c), 1);
  assert_true(pr__shape_cache_bytes(c) > one + one / 2);
  pr__shape_cache_destroy(c, &f->w);
}

static void test_warm(void **state) {
  fixture_t *f = *state;
  pr_shape_cache_t *c = pr__shape_cache_create(4, (size_t)1 << 30, &f->stats);
  pr_tensor_t shape = {.dtype = PR_DTYPE_FLOAT, .rank = 3, .dims = {1, 16, 4}};
  assert_int_equal(pr__shape_cache_warm(c, &f->w, &shape, 2), PR_OK);
  assert_int_equal(pr__shape_cache_warm(c, &f->w, &shape, 2), PR_OK); /* there already */
  counts(f, 0, 0, 0);
  assert_int_equal(pr__shape_cache_count(c), 1);
  get(f, c, 16, 2);
  counts(f, 1, 0, 0);
  pr__shape_cache_destroy(c, &f->w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_count_bound_lru, setup, teardown),
      cmocka_unit_test_setup_teardown(test_byte_bound, setup, teardown),
      cmocka_unit_test_setup_teardown(test_warm, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
