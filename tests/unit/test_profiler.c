/* The profiler's quality rules: pr_profile_assess on synthetic profiles, the
 * re-measure policy through the real measure path (latencies injected by the
 * measure_run hook), the profile file and the cache (atomic writes, a cache
 * folder that cannot be made or written is a warning and touches nothing),
 * and one real measurement of a tiny model. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model_builder.h"
#include "packrat/profiler.h"

#define SHA "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

/* ---- helpers ---- */

/* latency of a well-behaved model: more threads are faster */
static double base_ms(int t, int b) {
  return 0.2 + 1.0 * b / t;
}

/* A clean synthetic profile for t = 1..T, b = 1..B (caller frees). */
static pr_profile_t clean_profile(int T, int B) {
  pr_profile_t p = {.cores = T, .points = calloc((size_t)(T * B), sizeof(pr_profile_point_t))};
  assert_non_null(p.points);
  snprintf(p.model, sizeof p.model, "synthetic");
  snprintf(p.model_sha256, sizeof p.model_sha256, "%s", SHA);
  snprintf(p.cpu, sizeof p.cpu, "test cpu");
  snprintf(p.isa, sizeof p.isa, "%s", pr_engine_isa());
  for (int t = 1; t <= T; t++)
    for (int b = 1; b <= B; b++) {
      double m = base_ms(t, b);
      p.points[p.n_points++] = (pr_profile_point_t){.threads = t,
                                                    .batch = b,
                                                    .latency_ms = m,
                                                    .p90_ms = 1.05 * m,
                                                    .isolated_ms = m,
                                                    .runs = 10,
                                                    .spread = 0.01};
    }
  return p;
}

static pr_profile_point_t *point(pr_profile_t *p, int t, int b) {
  for (int i = 0; i < p->n_points; i++)
    if (p->points[i].threads == t && p->points[i].batch == b) return &p->points[i];
  fail_msg("no point t=%d b=%d", t, b);
  return NULL;
}

static void set_median(pr_profile_t *p, int t, int b, double m) {
  pr_profile_point_t *q = point(p, t, b);
  q->latency_ms = q->isolated_ms = m;
  q->p90_ms = 1.05 * m;
}

/* stderr into a file while f runs; returns what was written (caller frees) */
static char *capture_stderr(void (*f)(void *), void *arg) {
  fflush(stderr);
  FILE *tmp = tmpfile();
  assert_non_null(tmp);
  int saved = dup(2);
  dup2(fileno(tmp), 2);
  f(arg);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  fseek(tmp, 0, SEEK_END);
  long n = ftell(tmp);
  rewind(tmp);
  char *s = calloc((size_t)n + 1, 1);
  assert_non_null(s);
  assert_int_equal(fread(s, 1, (size_t)n, tmp), (size_t)n);
  fclose(tmp);
  return s;
}

static char tmp_dir[256];

static void make_tmp_dir(void) {
  snprintf(tmp_dir, sizeof tmp_dir, "/tmp/pr_test_profiler.XXXXXX");
  assert_non_null(mkdtemp(tmp_dir));
}

static int count_entries(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  closedir(d);
  return n;
}

static void remove_tree(const char *dir) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static char *read_text(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  static char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = 0;
  fclose(f);
  return buf;
}

/* ---- pr_profile_assess: the pure decision ---- */

static void test_assess_clean(void **s) {
  pr_profile_t p = clean_profile(4, 8);
  assert_int_equal(pr_profile_assess(&p, 0, NULL, 0), 0);
  /* more threads slower, but within the tolerance: not suspicious */
  set_median(&p, 2, 1, base_ms(1, 1) * 1.04);
  assert_int_equal(pr_profile_assess(&p, 0.05, NULL, 0), 0);
  /* the co-running factor scales latency_ms and p90_ms alike: no noise */
  pr_profile_point_t *q = point(&p, 1, 4);
  q->latency_ms = q->isolated_ms * 1.3;
  q->p90_ms = q->latency_ms * 1.2;
  assert_int_equal(pr_profile_assess(&p, 0, NULL, 0), 0);
  pr_profile_free(&p);
}

static void test_assess_noisy_p90(void **s) {
  pr_profile_t p = clean_profile(2, 4);
  point(&p, 2, 4)->p90_ms = 5 * point(&p, 2, 4)->isolated_ms;
  pr_profile_issue_t is[4];
  assert_int_equal(pr_profile_assess(&p, 0, is, 4), 1);
  assert_int_equal(is[0].threads, 2);
  assert_int_equal(is[0].batch, 4);
  assert_int_equal(is[0].why, PR_PROFILE_NOISY);
  assert_true(fabs(is[0].p90_ms / is[0].median_ms - 5) < 1e-9);
  char text[256];
  pr_profile_issue_text(&is[0], 0, text, sizeof text);
  assert_non_null(strstr(text, "p90 5.0x the median"));
  pr_profile_free(&p);
}

static void test_assess_unstable(void **s) {
  pr_profile_t p = clean_profile(2, 2);
  point(&p, 1, 2)->spread = 0.2;
  pr_profile_issue_t is[4];
  assert_int_equal(pr_profile_assess(&p, 0.05, is, 4), 1);
  assert_int_equal(is[0].why, PR_PROFILE_UNSTABLE);
  assert_int_equal(pr_profile_assess(&p, 0.25, NULL, 0), 0); /* a wider tolerance takes it */
  pr_profile_free(&p);
}

static void test_assess_inverted(void **s) {
  /* the issue's case: 2 threads slower than 1 at batch 4, p90 5x the median */
  pr_profile_t p = clean_profile(4, 8);
  double one = base_ms(1, 4);
  set_median(&p, 2, 4, one * 1.4);
  point(&p, 2, 4)->p90_ms = 5 * one * 1.4;
  pr_profile_issue_t is[8];
  int n = pr_profile_assess(&p, 0, is, 8);
  assert_int_equal(n, 1);
  assert_int_equal(is[0].threads, 2);
  assert_int_equal(is[0].batch, 4);
  assert_int_equal(is[0].why, PR_PROFILE_INVERTED | PR_PROFILE_NOISY);
  assert_int_equal(is[0].fewer_threads, 1);
  assert_true(fabs(is[0].fewer_ms - one) < 1e-9);
  char text[256];
  pr_profile_issue_text(&is[0], 0, text, sizeof text);
  assert_non_null(strstr(text, "slower than 1 thread"));
  assert_non_null(strstr(text, "by 40%"));
  /* issues beyond max are counted, not written */
  set_median(&p, 4, 8, base_ms(1, 8) * 2);
  assert_int_equal(pr_profile_assess(&p, 0, is, 1), 2);
  pr_profile_free(&p);
}

static void test_assess_floor(void **s) {
  /* microsecond latencies: differences under PR_PROFILE_FLOOR_MS are noise */
  pr_profile_t p = clean_profile(2, 1);
  set_median(&p, 1, 1, 0.002);
  set_median(&p, 2, 1, 0.004); /* 2x slower, by 2 us */
  point(&p, 1, 1)->p90_ms = 0.008;
  point(&p, 1, 1)->spread = 0.5;
  assert_int_equal(pr_profile_assess(&p, 0, NULL, 0), 0);
  set_median(&p, 2, 1, 0.002 + 2 * PR_PROFILE_FLOOR_MS); /* slower by 20 us: real */
  pr_profile_issue_t is[2];
  assert_int_equal(pr_profile_assess(&p, 0, is, 2), 1);
  assert_int_equal(is[0].why, PR_PROFILE_INVERTED);
  pr_profile_free(&p);
}

static void test_assess_small_model_reproduced(void **s) {
  /* a small model: every extra thread is slower, at every batch */
  pr_profile_t p = clean_profile(3, 2);
  for (int t = 1; t <= 3; t++)
    for (int b = 1; b <= 2; b++) set_median(&p, t, b, 0.1 * b * (1 + 0.3 * (t - 1)));
  assert_int_equal(pr_profile_assess(&p, 0, NULL, 0), 4); /* t = 2, 3 at b = 1, 2 */
  /* re-measured and reproduced: real, not suspicious */
  for (int i = 0; i < p.n_points; i++)
    if (p.points[i].threads > 1) p.points[i].remeasured = 1;
  assert_int_equal(pr_profile_assess(&p, 0, NULL, 0), 0);
  /* a re-measure that did not reproduce stays suspicious, whatever the values */
  point(&p, 3, 2)->remeasured = -1;
  point(&p, 1, 1)->remeasured = -1;
  pr_profile_issue_t is[4];
  assert_int_equal(pr_profile_assess(&p, 0, is, 4), 2);
  assert_int_equal(is[0].threads, 1);
  assert_int_equal(is[0].why, PR_PROFILE_NOT_REPRODUCED);
  assert_int_equal(is[1].why, PR_PROFILE_NOT_REPRODUCED | PR_PROFILE_INVERTED);
  pr_profile_free(&p);
}

/* ---- the re-measure policy, through pr_profile_measure ---- */

typedef enum {
  CLEAN,
  NOISY_THEN_CLEAN,         /* (2,4): outliers on the first pass, same median */
  NOISY_SHIFTED_THEN_CLEAN, /* (2,4): first pass 1.5x slower and noisy */
  SMALL_MODEL,              /* 2 threads really slower at every batch */
  BUSY_INVERSION,           /* (2,4): 2x 1 thread on the first pass, 0.55x after */
  BORDERLINE,               /* (2,4): 1.08x 1 thread, then 0.97x: within the tolerance */
  JITTERY,                  /* every point alternates 1.0 / 1.2: never settles */
  SLOW,                     /* every run 1 s */
  FAILING,
} scenario_t;

typedef struct {
  scenario_t scenario;
  int calls[2];        /* runs per pass */
  int pass1_points[8]; /* (t,b) re-measured: t*100+b, in order */
  int n_pass1;
} hook_t;

static double hook(void *ctx, int t, int b, int pass, int run) {
  hook_t *h = ctx;
  h->calls[pass]++;
  if (pass == 1 && run == 0 && h->n_pass1 < 8) h->pass1_points[h->n_pass1++] = t * 100 + b;
  double m = base_ms(t, b);
  bool hot = t == 2 && b == 4;
  switch (h->scenario) {
    case CLEAN: return m;
    case NOISY_THEN_CLEAN: return hot && pass == 0 && run % 4 == 3 ? 5 * m : m;
    case NOISY_SHIFTED_THEN_CLEAN:
      if (hot && pass == 0) return run % 4 == 3 ? 7.5 * m : 1.5 * m;
      return m;
    case SMALL_MODEL: return t == 2 ? 1.3 * base_ms(1, b) : base_ms(1, b);
    case BUSY_INVERSION:
      if (hot) return (pass == 0 ? 2.0 : 0.55) * base_ms(1, 4);
      return m;
    case BORDERLINE:
      if (hot) return (pass == 0 ? 1.08 : 0.97) * base_ms(1, 4);
      return m;
    case JITTERY: return run % 2 ? 1.2 * m : m;
    case SLOW: return 1000;
    case FAILING: return t == 2 ? -1 : m;
  }
  return m;
}

typedef struct {
  hook_t h;
  pr_profile_t p;
  pr_status_t st;
  char err[256];
  double max_point_s;
} measure_t;

static void do_measure(void *arg) {
  measure_t *m = arg;
  static const int cpus[2] = {0, 1};
  pr_profile_options_t o = {.max_threads = 2,
                            .max_batch = 4,
                            .cpus = cpus,
                            .n_cpus = 2,
                            .max_point_s = m->max_point_s,
                            .no_corun = true,
                            .measure_run = hook,
                            .measure_ctx = &m->h};
  m->st = pr_profile_measure(NULL, "synthetic", NULL, &o, &m->p, m->err, sizeof m->err);
  if (!m->st) snprintf(m->p.model_sha256, sizeof m->p.model_sha256, "%s", SHA);
}

/* Measures a scenario; returns its log (caller frees). */
static char *measure(measure_t *m, scenario_t sc) {
  memset(m, 0, sizeof *m);
  m->h.scenario = sc;
  return capture_stderr(do_measure, m);
}

/* the cache rule: saved exactly when the profile is good */
static bool caches(const pr_profile_t *p) {
  make_tmp_dir();
  setenv("PACKRAT_CACHE", tmp_dir, 1);
  char path[4096] = "x";
  pr_status_t st = pr_profile_cache_save(p, NULL, path, sizeof path);
  bool saved = st == PR_OK && path[0] && access(path, R_OK) == 0;
  assert_int_equal(count_entries(tmp_dir), saved ? 1 : 0);
  remove_tree(tmp_dir);
  unsetenv("PACKRAT_CACHE");
  return saved;
}

static void test_measure_clean(void **s) {
  measure_t m;
  char *log = measure(&m, CLEAN);
  assert_int_equal(m.st, PR_OK);
  assert_int_equal(m.p.n_points, 8); /* t 1..2 x b 1..4 */
  assert_int_equal(m.p.n_suspicious, 0);
  assert_int_equal(m.h.calls[1], 0); /* nothing re-measured */
  for (int i = 0; i < m.p.n_points; i++) {
    pr_profile_point_t *q = &m.p.points[i];
    assert_int_equal(q->runs, PR_PROFILE_MIN_RUNS); /* stable at once */
    assert_true(fabs(q->latency_ms - base_ms(q->threads, q->batch)) < 1e-12);
    assert_true(q->spread == 0 && q->remeasured == 0);
  }
  assert_null(strstr(log, "warn"));
  assert_true(caches(&m.p));
  free(log);
  pr_profile_free(&m.p);
}

static void test_measure_noisy_then_clean_is_cached(void **s) {
  measure_t m;
  char *log = measure(&m, NOISY_THEN_CLEAN);
  assert_int_equal(m.st, PR_OK);
  assert_int_equal(m.h.n_pass1, 1);
  assert_int_equal(m.h.pass1_points[0], 204);
  pr_profile_point_t *q = point(&m.p, 2, 4);
  assert_int_equal(q->remeasured, 1);
  assert_true(q->p90_ms == q->latency_ms); /* the clean values replaced the noisy ones */
  assert_int_equal(m.p.n_suspicious, 0);
  assert_null(strstr(log, "warn"));
  assert_true(caches(&m.p));
  free(log);
  pr_profile_free(&m.p);
}

static void test_measure_noisy_shifted_is_not_cached(void **s) {
  measure_t m;
  char *log = measure(&m, NOISY_SHIFTED_THEN_CLEAN);
  assert_int_equal(m.st, PR_OK);
  assert_int_equal(point(&m.p, 2, 4)->remeasured, -1); /* the median moved by 50% */
  assert_int_equal(m.p.n_suspicious, 1);
  assert_non_null(strstr(log, "warn"));
  assert_non_null(strstr(log, "not caching"));
  assert_false(caches(&m.p));
  free(log);
  pr_profile_free(&m.p);
}

static void test_measure_small_model_inversion_is_cached(void **s) {
  measure_t m;
  char *log = measure(&m, SMALL_MODEL);
  assert_int_equal(m.st, PR_OK);
  /* every (2,b) and its 1-thread partner measured again */
  assert_int_equal(m.h.n_pass1, 8);
  for (int b = 1; b <= 4; b++) {
    assert_int_equal(point(&m.p, 2, b)->remeasured, 1);
    assert_true(point(&m.p, 2, b)->latency_ms > point(&m.p, 1, b)->latency_ms);
  }
  assert_int_equal(m.p.n_suspicious, 0);
  assert_null(strstr(log, "warn"));
  assert_true(caches(&m.p));
  free(log);
  pr_profile_free(&m.p);
}

static void test_measure_busy_inversion_is_not_cached(void **s) {
  measure_t m;
  char *log = measure(&m, BUSY_INVERSION);
  assert_int_equal(m.st, PR_OK);
  assert_int_equal(m.h.n_pass1, 2); /* (1,4) and (2,4) */
  assert_int_equal(m.h.pass1_points[0], 104);
  assert_int_equal(m.h.pass1_points[1], 204);
  assert_int_equal(point(&m.p, 2, 4)->remeasured, -1);
  /* the re-measured values are the ones used */
  assert_true(fabs(point(&m.p, 2, 4)->latency_ms - 0.55 * base_ms(1, 4)) < 1e-12);
  assert_int_equal(m.p.n_suspicious, 1);
  assert_non_null(strstr(log, "warn"));
  assert_non_null(strstr(log, "threads 2 batch 4"));
  assert_non_null(strstr(log, "not caching"));
  assert_false(caches(&m.p));
  free(log);
  pr_profile_free(&m.p);
}

static void test_measure_borderline_inversion_is_cached(void **s) {
  measure_t m;
  char *log = measure(&m, BORDERLINE);
  assert_int_equal(m.st, PR_OK);
  assert_int_equal(m.h.n_pass1, 2);
  /* 2 threads now 3% faster: "not faster beyond the tolerance" still holds */
  assert_int_equal(point(&m.p, 2, 4)->remeasured, 1);
  assert_int_equal(m.p.n_suspicious, 0);
  assert_true(caches(&m.p));
  free(log);
  pr_profile_free(&m.p);
}

static void test_measure_jitter_reproduced_is_cached(void **s) {
  measure_t m;
  char *log = measure(&m, JITTERY);
  assert_int_equal(m.st, PR_OK);
  for (int i = 0; i < m.p.n_points; i++) {
    assert_int_equal(m.p.points[i].runs, PR_PROFILE_MAX_RUNS); /* never settled */
    assert_true(m.p.points[i].spread > PR_PROFILE_TOLERANCE);
    assert_int_equal(m.p.points[i].remeasured, 1); /* same median again: real */
  }
  assert_int_equal(m.p.n_suspicious, 0);
  assert_true(caches(&m.p));
  free(log);
  pr_profile_free(&m.p);
}

static void test_measure_budget(void **s) {
  measure_t m;
  memset(&m, 0, sizeof m);
  m.h.scenario = SLOW;
  m.max_point_s = 2.5;
  char *log = capture_stderr(do_measure, &m);
  assert_int_equal(m.st, PR_OK);
  for (int i = 0; i < m.p.n_points; i++) assert_int_equal(m.p.points[i].runs, 3);
  free(log);
  pr_profile_free(&m.p);
}

static void test_measure_failure(void **s) {
  measure_t m;
  char *log = measure(&m, FAILING);
  assert_int_equal(m.st, PR_ERR_INTERNAL);
  assert_non_null(strstr(m.err, "threads 2"));
  assert_int_equal(m.p.n_points, 0);
  assert_null(m.p.points);
  free(log);
}

/* ---- files and the cache ---- */

static void test_save_load_round_trip(void **s) {
  make_tmp_dir();
  pr_profile_t p = clean_profile(2, 4);
  p.tolerance = 0.07;
  point(&p, 2, 1)->remeasured = 1;
  point(&p, 2, 2)->runs = 33;
  point(&p, 2, 2)->spread = 0.03;
  char path[512], err[256];
  snprintf(path, sizeof path, "%s/p.json", tmp_dir);
  assert_int_equal(pr_profile_save(&p, path, err, sizeof err), PR_OK);
  assert_int_equal(count_entries(tmp_dir), 1); /* no temporary left */
  pr_profile_t q;
  assert_int_equal(pr_profile_load(path, &q, err, sizeof err), PR_OK);
  assert_int_equal(q.n_points, p.n_points);
  assert_true(fabs(q.tolerance - 0.07) < 1e-12);
  assert_int_equal(point(&q, 2, 1)->remeasured, 1);
  assert_int_equal(point(&q, 2, 2)->runs, 33);
  assert_true(fabs(point(&q, 2, 2)->spread - 0.03) < 1e-12);
  assert_int_equal(q.n_suspicious, 0);
  assert_true(pr_profile_matches(&q, SHA, "test cpu", 2, 4));
  /* measured with another instruction set: not reused, and cached apart */
  char here[4096], there[4096];
  setenv("PACKRAT_CACHE", tmp_dir, 1);
  assert_int_equal(pr_profile_cache_path(SHA, "test cpu", 2, NULL, here, sizeof here), PR_OK);
  snprintf(q.isa, sizeof q.isa, "%s", strcmp(pr_engine_isa(), "avx2") ? "avx2" : "avx512_core");
  assert_false(pr_profile_matches(&q, SHA, "test cpu", 2, 4));
  q.n_suspicious = 0;
  assert_int_equal(pr_profile_cache_save(&q, NULL, there, sizeof there), PR_OK);
  assert_string_not_equal(here, there);
  unlink(there);
  unsetenv("PACKRAT_CACHE");
  pr_profile_free(&q);
  /* a suspicious file: recomputed on load, and it does not match */
  set_median(&p, 2, 3, 10);
  assert_int_equal(pr_profile_save(&p, path, err, sizeof err), PR_OK);
  assert_int_equal(pr_profile_load(path, &q, err, sizeof err), PR_OK);
  assert_int_equal(q.n_suspicious, 1);
  assert_false(pr_profile_matches(&q, SHA, "test cpu", 2, 4));
  pr_profile_free(&q);
  /* an old file without the quality fields loads (zeros) */
  write_file(path,
             "{\"cores\": 1, \"points\": [{\"threads\": 1, \"batch\": 1, \"latency_ms\": 2}]}");
  assert_int_equal(pr_profile_load(path, &q, err, sizeof err), PR_OK);
  assert_int_equal(q.points[0].runs, 0);
  assert_int_equal(q.n_suspicious, 0);
  pr_profile_free(&q);
  /* bad quality fields are rejected */
  write_file(path,
             "{\"cores\": 1, \"points\": [{\"threads\": 1, \"batch\": 1, \"latency_ms\": 2, "
             "\"remeasured\": 7}]}");
  assert_int_equal(pr_profile_load(path, &q, err, sizeof err), PR_ERR_INVALID);
  pr_profile_free(&p);
  remove_tree(tmp_dir);
}

static void test_save_failures_leave_nothing(void **s) {
  make_tmp_dir();
  pr_profile_t p = clean_profile(1, 1);
  char cwd[1024], path[512], err[256];
  assert_non_null(getcwd(cwd, sizeof cwd));
  assert_int_equal(chdir(tmp_dir), 0);
  assert_int_equal(pr_profile_save(&p, "", err, sizeof err), PR_ERR_INVALID);
  assert_int_equal(count_entries(tmp_dir), 0); /* no ".tmp" in the working folder */
  assert_int_equal(chdir(cwd), 0);
  snprintf(path, sizeof path, "%s/missing/p.json", tmp_dir);
  assert_int_equal(pr_profile_save(&p, path, err, sizeof err), PR_ERR_IO);
  assert_int_equal(count_entries(tmp_dir), 0);
  pr_profile_free(&p);
  remove_tree(tmp_dir);
}

static void test_cache_path_failures_leave_path_empty(void **s) {
  make_tmp_dir();
  char file[512], env[600], path[4096];
  snprintf(file, sizeof file, "%s/config.json", tmp_dir);
  write_file(file, "{\"max_batch_size\": 8}");
  /* a folder under a regular file: root's permissions do not help here */
  snprintf(env, sizeof env, "%s/cache", file);
  setenv("PACKRAT_CACHE", env, 1);
  snprintf(path, sizeof path, "%s", file); /* a stale buffer */
  assert_int_not_equal(pr_profile_cache_path(SHA, "cpu", 2, NULL, path, sizeof path), PR_OK);
  assert_int_equal(path[0], 0);
  /* the cache "folder" is a regular file */
  setenv("PACKRAT_CACHE", file, 1);
  snprintf(path, sizeof path, "%s", file);
  assert_int_not_equal(pr_profile_cache_path(SHA, "cpu", 2, NULL, path, sizeof path), PR_OK);
  assert_int_equal(path[0], 0);
  /* a good folder, but the path does not fit; or no hash to name the file by */
  setenv("PACKRAT_CACHE", tmp_dir, 1);
  char small[24] = "stale";
  assert_int_not_equal(pr_profile_cache_path(SHA, "cpu", 2, NULL, small, sizeof small), PR_OK);
  assert_int_equal(small[0], 0);
  snprintf(path, sizeof path, "%s", file);
  assert_int_not_equal(pr_profile_cache_path("../../config", "cpu", 2, NULL, path, sizeof path),
                       PR_OK);
  assert_int_equal(path[0], 0);
  assert_int_equal(pr_profile_cache_path(SHA, "cpu", 2, NULL, path, sizeof path), PR_OK);
  assert_int_equal(strncmp(path, tmp_dir, strlen(tmp_dir)), 0);
  assert_non_null(strstr(path, "/profile-0123456789abcdef-2c-"));
  unsetenv("PACKRAT_CACHE");
  remove_tree(tmp_dir);
}

typedef struct {
  const pr_profile_t *p;
  pr_status_t st;
  char path[4096];
} cache_save_t;

static void do_cache_save(void *arg) {
  cache_save_t *c = arg;
  snprintf(c->path, sizeof c->path, "stale");
  c->st = pr_profile_cache_save(c->p, NULL, c->path, sizeof c->path);
}

static void test_unwritable_cache_is_a_warning(void **s) {
  make_tmp_dir();
  char file[512], env[600];
  snprintf(file, sizeof file, "%s/config.json", tmp_dir);
  const char *config = "{\"max_batch_size\": 8}";
  write_file(file, config);
  snprintf(env, sizeof env, "%s/cache", file);
  setenv("PACKRAT_CACHE", env, 1);
  pr_profile_t p = clean_profile(2, 2);
  cache_save_t c = {.p = &p};
  char *log = capture_stderr(do_cache_save, &c);
  assert_int_not_equal(c.st, PR_OK);
  assert_int_equal(c.path[0], 0);
  assert_non_null(strstr(log, "warn"));
  assert_non_null(strstr(log, "not cached"));
  free(log);
  /* nothing else touched */
  assert_int_equal(count_entries(tmp_dir), 1);
  assert_string_equal(read_text(file), config);
  /* a cache folder that exists but cannot take the file (a folder in its way) */
  char blocked[4096];
  setenv("PACKRAT_CACHE", tmp_dir, 1);
  assert_int_equal(pr_profile_cache_path(SHA, p.cpu, p.cores, NULL, blocked, sizeof blocked),
                   PR_OK);
  assert_int_equal(mkdir(blocked, 0755), 0);
  log = capture_stderr(do_cache_save, &c);
  assert_int_equal(c.st, PR_ERR_IO);
  assert_non_null(strstr(log, "not cached"));
  assert_int_equal(count_entries(tmp_dir), 2); /* config.json and the blocking folder */
  free(log);
  pr_profile_free(&p);
  unsetenv("PACKRAT_CACHE");
  remove_tree(tmp_dir);
}

/* ---- one real measurement ---- */

static void test_measure_real_engine(void **s) {
  mb_t *b = mb_new(13);
  int64_t xd[2] = {-1, 4};
  mb_input(b, "x", PR_DTYPE_FLOAT, 2, xd);
  mb_node(b, "Relu", "r", (const char *[]){"x", NULL}, (const char *[]){"y", NULL});
  mb_output(b, "y");
  void *data;
  size_t len;
  mb_finish(b, &data, &len);
  pr_model_t *model;
  char err[256];
  assert_int_equal(pr_engine_model_load_memory(data, len, NULL, &model, err, sizeof err), PR_OK);
  free(data);
  static const int cpus[1] = {0};
  pr_profile_options_t o = {
      .max_threads = 1, .max_batch = 2, .cpus = cpus, .n_cpus = 1, .no_corun = true};
  pr_profile_t p;
  assert_int_equal(pr_profile_measure(model, "relu", NULL, &o, &p, err, sizeof err), PR_OK);
  assert_int_equal(p.n_points, 2);
  for (int i = 0; i < p.n_points; i++) {
    assert_true(p.points[i].runs >= 3 && p.points[i].runs <= PR_PROFILE_MAX_RUNS);
    assert_true(p.points[i].latency_ms > 0 && p.points[i].p90_ms >= p.points[i].latency_ms);
    assert_true(p.points[i].spread >= 0);
  }
  assert_int_equal(strlen(p.model_sha256), 64);
  assert_true(p.tolerance == PR_PROFILE_TOLERANCE);
  pr_profile_free(&p);
  pr_engine_model_destroy(model);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_assess_clean),
      cmocka_unit_test(test_assess_noisy_p90),
      cmocka_unit_test(test_assess_unstable),
      cmocka_unit_test(test_assess_inverted),
      cmocka_unit_test(test_assess_floor),
      cmocka_unit_test(test_assess_small_model_reproduced),
      cmocka_unit_test(test_measure_clean),
      cmocka_unit_test(test_measure_noisy_then_clean_is_cached),
      cmocka_unit_test(test_measure_noisy_shifted_is_not_cached),
      cmocka_unit_test(test_measure_small_model_inversion_is_cached),
      cmocka_unit_test(test_measure_busy_inversion_is_not_cached),
      cmocka_unit_test(test_measure_borderline_inversion_is_cached),
      cmocka_unit_test(test_measure_jitter_reproduced_is_cached),
      cmocka_unit_test(test_measure_budget),
      cmocka_unit_test(test_measure_failure),
      cmocka_unit_test(test_save_load_round_trip),
      cmocka_unit_test(test_save_failures_leave_nothing),
      cmocka_unit_test(test_cache_path_failures_leave_path_empty),
      cmocka_unit_test(test_unwritable_cache_is_a_warning),
      cmocka_unit_test(test_measure_real_engine),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
