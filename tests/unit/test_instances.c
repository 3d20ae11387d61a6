/* Pinned instances running a plan: same outputs as one session, bad plans
 * rejected. Also the profiler on a small model and profile files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/topology.h"
#include "model_builder.h"
#include "packrat/engine.h"
#include "packrat/profiler.h"
#include "runtime/instances.h"

/* x[batch, 64] -> MatMul(W[64, 16]) -> Add(b) -> Softmax -> y[batch, 16] */
static pr_model_t *small_model(void) {
  mb_t *b = mb_new(13);
  int64_t xd[2] = {-1, 64}, wd[2] = {64, 16}, bd[1] = {16};
  float w[64 * 16], bias[16];
  for (int i = 0; i < 64 * 16; i++) w[i] = (float)((i * 37) % 23) / 23.f - 0.5f;
  for (int i = 0; i < 16; i++) bias[i] = (float)i / 16.f;
  mb_input(b, "x", PR_DTYPE_FLOAT, 2, xd);
  mb_init(b, "w", PR_DTYPE_FLOAT, 2, wd, w, sizeof w);
  mb_init(b, "b", PR_DTYPE_FLOAT, 1, bd, bias, sizeof bias);
  mb_node(b, "MatMul", "mm", (const char *[]){"x", "w", NULL}, (const char *[]){"h", NULL});
  mb_node(b, "Add", "add", (const char *[]){"h", "b", NULL}, (const char *[]){"z", NULL});
  mb_node(b, "Softmax", "sm", (const char *[]){"z", NULL}, (const char *[]){"y", NULL});
  mb_output(b, "y");
  char err[256];
  pr_model_t *m = mb_load(b, err, sizeof err);
  if (!m) fail_msg("%s", err);
  return m;
}

/* Instances for plan's list (the runtime takes the three numbers of each). */
static pr_status_t create_for(pr_model_t *m, const pr_plan_t *plan, const int *cpus, int n_cpus,
                              const pr_session_options_t *base, pr_instances_t **x, char *err,
                              size_t len) {
  pr_instance_spec_t specs[8];
  assert_true(plan->n_instances <= 8);
  for (int k = 0; k < plan->n_instances; k++)
    specs[k] = (pr_instance_spec_t){plan->instances[k].threads, plan->instances[k].batch,
                                    plan->instances[k].first_core};
  return pr__instances_create(m, specs, plan->n_instances, cpus, n_cpus, base, x, err, len);
}

static void test_plan_matches_single_session(void **state) {
  pr_model_t *m = small_model();
  int cpus[256];
  int n_cpus = pr__topology_cpu_order(cpus, 256);
  assert_true(n_cpus >= 1);
  const int B = 7;
  float x[7 * 64];
  for (int i = 0; i < B * 64; i++) x[i] = (float)((i * 13) % 29) / 29.f;
  pr_tensor_t in = {.dtype = PR_DTYPE_FLOAT, .rank = 2, .dims = {B, 64}, .data = x}, out, ref;
  char err[512];
  pr_session_options_t opt = pr_session_options_default();
  opt.batch = B;
  pr_session_t *s;
  assert_int_equal(pr_engine_session_create(m, &opt, &s, err, sizeof err), PR_OK);
  assert_int_equal(pr_engine_session_run(s, &in, 1, &ref, 1, err, sizeof err), PR_OK);
  /* as many single-thread instances as there are CPUs (at most 3) */
  const char *specs[] = {"1x7", "1x3,1x4", "1x2,1x2,1x3"};
  for (int k = 0; k < 3 && k < n_cpus; k++) {
    pr_plan_t *plan = malloc(sizeof *plan);
    assert_int_equal(pr_plan_parse(specs[k], NULL, plan, err, sizeof err), PR_OK);
    pr_instances_t *x;
    pr_session_options_t base = pr_session_options_default();
    assert_int_equal(create_for(m, plan, cpus, n_cpus, &base, &x, err, sizeof err), PR_OK);
    for (int rep = 0; rep < 3; rep++) {
      assert_int_equal(pr__instances_run(x, &in, 1, &out, 1, err, sizeof err), PR_OK);
      assert_int_equal(out.dims[0], B);
      assert_int_equal(out.dims[1], 16);
      for (int i = 0; i < B * 16; i++)
        assert_true(fabsf(((float *)out.data)[i] - ((float *)ref.data)[i]) < 1e-6f);
    }
    pr_tensor_t wrong = in;
    wrong.dims[0] = B - 1;
    assert_int_equal(pr__instances_run(x, &wrong, 1, &out, 1, err, sizeof err), PR_ERR_INVALID);
    pr__instances_destroy(x);
    free(plan);
  }
  pr_engine_session_destroy(s);
  pr_engine_model_destroy(m);
}

static void test_bad_plans(void **state) {
  pr_model_t *m = small_model();
  int cpus[1] = {0};
  char err[512];
  pr_plan_t *plan = malloc(sizeof *plan);
  pr_instances_t *x = NULL;
  assert_int_equal(pr_plan_parse("2x4", NULL, plan, err, sizeof err), PR_OK);
  assert_int_equal(create_for(m, plan, cpus, 1, NULL, &x, err, sizeof err), PR_ERR_INVALID);
  assert_null(x);
  assert_non_null(strstr(err, "cores"));
  free(plan);
  pr_engine_model_destroy(m);
}

static void test_profile_measure_save_load(void **state) {
  pr_model_t *m = small_model();
  int cpus[256];
  int n_cpus = pr__topology_cpu_order(cpus, 256);
  int T = n_cpus >= 2 ? 2 : 1;
  pr_profile_options_t o = {
      .max_threads = T, .max_batch = 3, .cpus = cpus, .n_cpus = n_cpus, .max_point_s = 0.2};
  pr_profile_t p;
  char err[512];
  assert_int_equal(pr_profile_measure(m, "small", NULL, &o, &p, err, sizeof err), PR_OK);
  assert_int_equal(p.n_points, 3 * T);
  for (int i = 0; i < p.n_points; i++) {
    assert_true(p.points[i].latency_ms > 0);
    assert_true(p.points[i].p90_ms >= p.points[i].latency_ms);
  }
  /* a profile with points its remeasure did not confirm never matches (it is
   * not cached); whether a run this short on a busy machine has one is
   * chance, so the rest of the match is checked on a copy without them */
  const char *sha = pr_engine_model_sha256(m), *cpu = pr__topology_cpu_name();
  pr_profile_t confirmed = p;
  confirmed.n_suspicious = 0;
  assert_true(pr_profile_matches(&confirmed, sha, cpu, T, 3));
  assert_false(pr_profile_matches(&confirmed, sha, cpu, T, 4));
  assert_false(pr_profile_matches(&confirmed, sha, cpu, T + 1, 3));
  confirmed.n_suspicious = 1;
  assert_false(pr_profile_matches(&confirmed, sha, cpu, T, 3));
  char path[] = "/tmp/pr_profile_XXXXXX";
  int fd = mkstemp(path);
  close(fd);
  assert_int_equal(pr_profile_save(&p, path, err, sizeof err), PR_OK);
  pr_profile_t q;
  assert_int_equal(pr_profile_load(path, &q, err, sizeof err), PR_OK);
  assert_int_equal(q.n_points, p.n_points);
  assert_string_equal(q.model_sha256, p.model_sha256);
  for (int i = 0; i < p.n_points; i++)
    assert_true(fabs(q.points[i].latency_ms - p.points[i].latency_ms) < 1e-9);
  pr_profile_free(&q);
  FILE *f = fopen(path, "w");
  fputs("{\"cores\": 2, \"points\": [{\"threads\": 0, \"batch\": 1, \"latency_ms\": 3}]}", f);
  fclose(f);
  assert_int_equal(pr_profile_load(path, &q, err, sizeof err), PR_ERR_INVALID);
  unlink(path);
  pr_profile_free(&p);
  pr_engine_model_destroy(m);
}

static void test_grid(void **state) {
  int g[64];
  assert_int_equal(pr_profile_grid(16, NULL, 0, g, 64), 9);
  assert_int_equal(g[8], 16);
  int extra[2] = {12, 3};
  int n = pr_profile_grid(20, extra, 2, g, 64);
  assert_int_equal(n, 11); /* 1..8, 12, 16, 20 */
  for (int i = 1; i < n; i++) assert_true(g[i] > g[i - 1]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_plan_matches_single_session),
      cmocka_unit_test(test_bad_plans),
      cmocka_unit_test(test_profile_measure_save_load),
      cmocka_unit_test(test_grid),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
