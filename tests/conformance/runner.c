/* ONNX backend node-test runner.
 *
 * usage: conformance DIR [--threads T] [--filter SUBSTRING] [--verbose] [--json FILE]
 *        conformance --ops   (the engine's operators: "NAME MIN_OPSET MAX_OPSET" a line)
 *
 * For every DIR/<test>/model.onnx and each test_data_set_*: feed input_K.pb,
 * compare with output_K.pb (rtol 1e-3, atol 1e-7 as ONNX's backend tests;
 * integers exactly, 64-bit ones too). A test may widen that in a file
 * DIR/<test>/tolerance, "STEPS ATOL SHARE": integer outputs may differ by
 * STEPS, float ones by ATOL more, in at most SHARE of the elements (at
 * least one) (quant_sweep.py's QDQ graphs: one quantization step).
 * A test with a file DIR/<test>/expect_error passes only when compiling or
 * running it fails with PR_ERR_INVALID and an error containing that file's
 * first line (extra_ops.py's indices out of range: ONNX Runtime fails those
 * runs too); its outputs are placeholders.
 * A model the engine rejects as unsupported (PR_ERR_UNSUPPORTED, at load or
 * compile) is left out and listed with the engine's reason. Prints
 * "N passed, M failed, K skipped" and exits non-zero on any failure. --json
 * writes {"test": {"pass": bool, "left_out": bool, "why": "..."}} for the
 * comparison with ONNX Runtime (compare.py). */
#include <dirent.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "base/fp16.h"
#include "packrat/engine.h"

#define MAX_IO 32

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static bool exists(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0;
}

/* How far an output may be from the expected one (the tolerance file). */
typedef struct {
  int steps;
  double atol, share;
} tolerance_t;

static double elem(const pr_tensor_t *t, int64_t i) {
  switch (t->dtype) {
    case PR_DTYPE_FLOAT: return ((const float *)t->data)[i];
    case PR_DTYPE_DOUBLE: return ((const double *)t->data)[i];
    case PR_DTYPE_FLOAT16: return pr__half_to_float(((const uint16_t *)t->data)[i]);
    case PR_DTYPE_INT64: return (double)((const int64_t *)t->data)[i];
    case PR_DTYPE_INT32: return ((const int32_t *)t->data)[i];
    case PR_DTYPE_INT16: return ((const int16_t *)t->data)[i];
    case PR_DTYPE_UINT16: return ((const uint16_t *)t->data)[i];
    case PR_DTYPE_INT8: return ((const int8_t *)t->data)[i];
    case PR_DTYPE_UINT8:
    case PR_DTYPE_BOOL: return ((const uint8_t *)t->data)[i];
    case PR_DTYPE_UINT32: return ((const uint32_t *)t->data)[i];
    case PR_DTYPE_UINT64: return (double)((const uint64_t *)t->data)[i];
    default: return NAN;
  }
}

/* |got - want| of 64-bit integers, exactly (a double cannot tell 2^53 + 1
 * from 2^53), saturated to UINT64_MAX. */
static uint64_t int_distance(const pr_tensor_t *got, const pr_tensor_t *want, int64_t i) {
  if (want->dtype == PR_DTYPE_UINT64) {
    uint64_t g = ((const uint64_t *)got->data)[i], w = ((const uint64_t *)want->data)[i];
    return g > w ? g - w : w - g;
  }
  if (want->dtype == PR_DTYPE_INT64) {
    int64_t g = ((const int64_t *)got->data)[i], w = ((const int64_t *)want->data)[i];
    return g > w ? (uint64_t)g - (uint64_t)w : (uint64_t)w - (uint64_t)g;
  }
  double d = fabs(elem(got, i) - elem(want, i));
  return d != d || d >= 1.8e19 ? UINT64_MAX : (uint64_t)d;
}

/* Element i of t as text: 64-bit integers exactly, the rest as doubles. */
static const char *elem_text(const pr_tensor_t *t, int64_t i, char *buf, size_t len) {
  if (t->dtype == PR_DTYPE_UINT64)
    snprintf(buf, len, "%llu", (unsigned long long)((const uint64_t *)t->data)[i]);
  else if (t->dtype == PR_DTYPE_INT64)
    snprintf(buf, len, "%lld", (long long)((const int64_t *)t->data)[i]);
  else
    snprintf(buf, len, "%.17g", elem(t, i));
  return buf;
}

/* 0 when equal within tolerance; else writes why into msg. */
static int compare(const pr_tensor_t *got, const pr_tensor_t *want, const tolerance_t *tol,
                   char *msg, size_t len) {
  if (got->dtype != want->dtype) {
    snprintf(msg, len, "type %s, expected %s", pr_dtype_name(got->dtype),
             pr_dtype_name(want->dtype));
    return 1;
  }
  bool shape_ok = got->rank == want->rank;
  for (int k = 0; shape_ok && k < got->rank; k++) shape_ok = got->dims[k] == want->dims[k];
  if (!shape_ok) {
    snprintf(msg, len, "shape differs (rank %d vs %d)", got->rank, want->rank);
    return 1;
  }
  bool is_float = want->dtype == PR_DTYPE_FLOAT || want->dtype == PR_DTYPE_DOUBLE ||
                  want->dtype == PR_DTYPE_FLOAT16;
  int64_t n = pr_tensor_numel(want), off = 0, first = -1;
  int64_t most = (int64_t)(tol->share * (double)n);
  if (most < 1) most = 1;
  for (int64_t i = 0; i < n; i++) {
    double g = elem(got, i), w = elem(want, i);
    if (isnan(w) && isnan(g)) continue;
    uint64_t dist = is_float ? 0 : int_distance(got, want, i);
    bool exact = is_float ? fabs(g - w) <= 1e-7 + 1e-3 * fabs(w) || g == w : dist == 0;
    bool near =
        is_float ? fabs(g - w) <= tol->atol + 1e-7 + 1e-3 * fabs(w) : dist <= (uint64_t)tol->steps;
    if (exact) continue;
    if (near && ++off <= most) {
      if (first < 0) first = i;
      continue;
    }
    if (near) i = first; /* too many near misses: name the first */
    char g_text[32], w_text[32];
    snprintf(msg, len, "element %lld: got %s, expected %s%s", (long long)i,
             elem_text(got, i, g_text, sizeof g_text), elem_text(want, i, w_text, sizeof w_text),
             near ? " (one of too many within the tolerance)" : "");
    return 1;
  }
  return 0;
}

/* The test's tolerance file, if it has one (else exact). */
static void read_tolerance(const char *dir, tolerance_t *tol) {
  char path[4096];
  memset(tol, 0, sizeof *tol);
  snprintf(path, sizeof path, "%s/tolerance", dir);
  FILE *f = fopen(path, "r");
  if (!f) return;
  /* STEPS ATOL SHARE; anything else (a negative, a share past 1) is exact */
  if (fscanf(f, "%d %lf %lf", &tol->steps, &tol->atol, &tol->share) != 3 || tol->steps < 0 ||
      !(tol->atol >= 0) || !(tol->share >= 0 && tol->share <= 1))
    memset(tol, 0, sizeof *tol);
  fclose(f);
}

/* The first line of the test's expect_error file into text ("" when it has
 * none). */
static void read_expect_error(const char *dir, char *text, size_t len) {
  char path[4096];
  text[0] = 0;
  snprintf(path, sizeof path, "%s/expect_error", dir);
  FILE *f = fopen(path, "r");
  if (!f) return;
  if (!fgets(text, (int)len, f)) text[0] = 0;
  text[strcspn(text, "\n")] = 0;
  fclose(f);
}

/* A test that expects an error: 0 when st and err are it, else 1 with why. */
static int expected_error(const char *want, pr_status_t st, const char *err, char *why,
                          size_t why_len) {
  if (st == PR_ERR_INVALID && strstr(err, want)) return 0;
  if (st)
    snprintf(why, why_len, "expected the error '%s', got %d: %s", want, st, err);
  else
    snprintf(why, why_len, "expected the error '%s', the run succeeded", want);
  return 1;
}

/* Returns 0 pass, 1 fail, 2 left out. */
static int run_test(const char *dir, int threads, char *why, size_t why_len) {
  char path[4096], err[1024], want_error[512];
  snprintf(path, sizeof path, "%s/model.onnx", dir);
  pr_model_t *m;
  tolerance_t tol;
  read_tolerance(dir, &tol);
  read_expect_error(dir, want_error, sizeof want_error);
  pr_status_t st = pr_engine_model_load_file(path, &m, err, sizeof err);
  if (st) {
    snprintf(why, why_len, "%s", err);
    return st == PR_ERR_UNSUPPORTED ? 2 : 1;
  }
  int n_in = pr_engine_model_num_inputs(m), n_out = pr_engine_model_num_outputs(m);
  int result = 0;
  if (n_in > MAX_IO || n_out > MAX_IO) {
    snprintf(why, why_len, "too many inputs/outputs");
    pr_engine_model_destroy(m);
    return 1;
  }
  for (int set = 0; result == 0; set++) {
    char sdir[4096];
    snprintf(sdir, sizeof sdir, "%s/test_data_set_%d", dir, set);
    if (!exists(sdir)) {
      if (set == 0) {
        snprintf(why, why_len, "no test_data_set_0");
        result = 1;
      }
      break;
    }
    pr_tensor_t in[MAX_IO], want[MAX_IO], got[MAX_IO];
    pr_tensor_info_t shapes[MAX_IO];
    memset(in, 0, sizeof in);
    memset(want, 0, sizeof want);
    int read_ok = 1;
    for (int i = 0; i < n_in && read_ok; i++) {
      snprintf(path, sizeof path, "%s/input_%d.pb", sdir, i);
      if (pr_engine_tensor_read_file(path, &in[i], NULL, err, sizeof err)) {
        snprintf(why, why_len, "input %d: %s", i, err);
        read_ok = 0;
        break;
      }
      memset(&shapes[i], 0, sizeof shapes[i]);
      shapes[i].rank = in[i].rank;
      shapes[i].dtype = in[i].dtype;
      memcpy(shapes[i].dims, in[i].dims, sizeof shapes[i].dims);
    }
    for (int i = 0; i < n_out && read_ok; i++) {
      snprintf(path, sizeof path, "%s/output_%d.pb", sdir, i);
      if (pr_engine_tensor_read_file(path, &want[i], NULL, err, sizeof err)) {
        snprintf(why, why_len, "output %d: %s", i, err);
        read_ok = 0;
      }
    }
    if (!read_ok) {
      /* test data the engine cannot represent (e.g. string tensors) */
      result = 2;
    } else {
      pr_session_options_t opt = pr_session_options_default();
      opt.threads = threads;
      opt.input_shapes = shapes;
      pr_session_t *s = NULL;
      st = pr_engine_session_create(m, &opt, &s, err, sizeof err);
      if (st == PR_ERR_UNSUPPORTED && n_in > 1 && strstr(err, "constant")) {
        /* inputs that decide shapes or attributes (Reshape's shape, Pad's
         * pads, Clip's bounds...): fix every input after the first */
        const void *vals[MAX_IO] = {0};
        for (int i = 1; i < n_in; i++) vals[i] = in[i].data;
        opt.input_values = vals;
        st = pr_engine_session_create(m, &opt, &s, err, sizeof err);
      }
      if (st == PR_ERR_UNSUPPORTED && strstr(err, "constant")) {
        /* the first input decides a shape too (ConstantOfShape, Range...): fix them all */
        const void *vals[MAX_IO] = {0};
        for (int i = 0; i < n_in; i++) vals[i] = in[i].data;
        opt.input_values = vals;
        st = pr_engine_session_create(m, &opt, &s, err, sizeof err);
      }
      if (want_error[0]) {
        if (!st) st = pr_engine_session_run(s, in, n_in, got, n_out, err, sizeof err);
        result = expected_error(want_error, st, err, why, why_len);
      } else if (st) {
        snprintf(why, why_len, "%s", err);
        result = st == PR_ERR_UNSUPPORTED ? 2 : 1;
      } else if ((st = pr_engine_session_run(s, in, n_in, got, n_out, err, sizeof err))) {
        snprintf(why, why_len, "run: %s", err);
        result = 1;
      } else {
        for (int i = 0; i < n_out && !result; i++) {
          char msg[512];
          if (compare(&got[i], &want[i], &tol, msg, sizeof msg)) {
            snprintf(why, why_len, "data set %d output %d: %s", set, i, msg);
            result = 1;
          }
        }
      }
      pr_engine_session_destroy(s);
    }
    for (int i = 0; i < MAX_IO; i++) pr_engine_tensor_free(&in[i]), pr_engine_tensor_free(&want[i]);
  }
  pr_engine_model_destroy(m);
  return result;
}

static int list_ops(void) {
  for (int i = 0; i < pr_engine_op_count(); i++) {
    const char *name;
    int lo;
    if (pr_engine_op(i, &name, &lo)) return 1;
    printf("%s %d %d\n", name, lo, PR_MAX_OPSET);
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 2 && !strcmp(argv[1], "--ops")) return list_ops();
  if (argc < 2) {
    fprintf(
        stderr,
        "usage: conformance DIR [--threads T] [--filter SUBSTRING] [--verbose] [--json FILE]\n");
    return 2;
  }
  const char *root = argv[1], *filter = NULL, *json_path = NULL;
  int threads = 1, verbose = 0;
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc)
      threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--filter") && i + 1 < argc)
      filter = argv[++i];
    else if (!strcmp(argv[i], "--verbose"))
      verbose = 1;
    else if (!strcmp(argv[i], "--json") && i + 1 < argc)
      json_path = argv[++i];
    else {
      fprintf(stderr, "conformance: unknown argument '%s'\n", argv[i]);
      return 2;
    }
  }
  json_t *report = json_object();
  DIR *d = opendir(root);
  if (!d) {
    fprintf(stderr, "conformance: cannot open %s\n", root);
    return 2;
  }
  char **names = NULL;
  size_t n = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (strncmp(e->d_name, "test_", 5) || (filter && !strstr(e->d_name, filter))) continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 256;
      names = realloc(names, cap * sizeof *names);
    }
    names[n++] = strdup(e->d_name);
  }
  closedir(d);
  qsort(names, n, sizeof *names, cmp_str);
  int passed = 0, failed = 0, skipped = 0;
  for (size_t i = 0; i < n; i++) {
    char dir[4096], why[1200] = "";
    snprintf(dir, sizeof dir, "%s/%s", root, names[i]);
    int r = run_test(dir, threads, why, sizeof why);
    if (r == 0) {
      passed++;
      if (verbose) printf("PASS %s\n", names[i]);
    } else if (r == 1) {
      failed++;
      printf("FAIL %s: %s\n", names[i], why);
    } else {
      skipped++;
      printf("LEFT OUT %s: %s\n", names[i], why);
    }
    json_object_set_new(
        report, names[i],
        json_pack("{s:b, s:b, s:s}", "pass", r == 0, "left_out", r == 2, "why", why));
    free(names[i]);
  }
  free(names);
  printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  if (json_path && json_dump_file(report, json_path, JSON_INDENT(1) | JSON_SORT_KEYS)) {
    fprintf(stderr, "conformance: cannot write %s\n", json_path);
    failed++;
  }
  json_decref(report);
  return failed ? 1 : 0;
}
