/* Model fidelity: packrat's outputs against PyTorch's reference outputs.
 *
 * usage: fidelity MODEL_DIR [--threads 1,2] [--tolerance 1e-4]
 *
 * For each MODEL_DIR/test_data_set_K and each thread count, runs the model on
 * input_*.pb and checks max|got - ref| <= tolerance * max|ref| for every
 * output. Prints one line per check and "N passed, M failed". */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "packrat/engine.h"

#define MAX_IO 16

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: fidelity MODEL_DIR [--threads 1,2] [--tolerance 1e-4]\n");
    return 2;
  }
  const char *dir = argv[1];
  char threads_arg[64] = "1,2";
  double tol = 1e-4;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--threads"))
      snprintf(threads_arg, sizeof threads_arg, "%s", argv[i + 1]);
    else if (!strcmp(argv[i], "--tolerance"))
      tol = atof(argv[i + 1]);
  }
  int thread_list[16], n_threads = 0;
  for (char *p = strtok(threads_arg, ","); p && n_threads < 16; p = strtok(NULL, ","))
    thread_list[n_threads++] = atoi(p);
  char path[4096], err[1024];
  snprintf(path, sizeof path, "%s/model.onnx", dir);
  pr_model_t *m;
  if (pr_engine_model_load_file(path, &m, err, sizeof err)) {
    printf("FAIL load %s: %s\n0 passed, 1 failed\n", path, err);
    return 1;
  }
  int n_in = pr_engine_model_num_inputs(m), n_out = pr_engine_model_num_outputs(m);
  int passed = 0, failed = 0;
  for (int set = 0;; set++) {
    char sdir[4096];
    struct stat sb;
    snprintf(sdir, sizeof sdir, "%s/test_data_set_%d", dir, set);
    if (stat(sdir, &sb) != 0) {
      if (set == 0) {
        printf("FAIL %s: no test data sets\n", dir);
        failed++;
      }
      break;
    }
    pr_tensor_t in[MAX_IO] = {0}, ref[MAX_IO] = {0}, got[MAX_IO];
    pr_tensor_info_t shapes[MAX_IO] = {0};
    bool ok = n_in <= MAX_IO && n_out <= MAX_IO;
    for (int i = 0; ok && i < n_in; i++) {
      snprintf(path, sizeof path, "%s/input_%d.pb", sdir, i);
      ok = pr_engine_tensor_read_file(path, &in[i], NULL, err, sizeof err) == PR_OK;
      shapes[i].rank = in[i].rank;
      shapes[i].dtype = in[i].dtype;
      memcpy(shapes[i].dims, in[i].dims, sizeof shapes[i].dims);
    }
    for (int i = 0; ok && i < n_out; i++) {
      snprintf(path, sizeof path, "%s/output_%d.pb", sdir, i);
      ok = pr_engine_tensor_read_file(path, &ref[i], NULL, err, sizeof err) == PR_OK;
    }
    if (!ok) {
      printf("FAIL %s: %s\n", sdir, err);
      failed++;
      continue;
    }
    for (int t = 0; t < n_threads; t++) {
      pr_session_options_t opt = pr_session_options_default();
      opt.threads = thread_list[t];
      opt.input_shapes = shapes;
      pr_session_t *s;
      char shape[128] = "[]"; /* input 0's shape, e.g. [2, 64] */
      for (int k = 0, off = 0; n_in && k < in[0].rank && off < (int)sizeof shape - 24; k++)
        off += snprintf(shape + off, sizeof shape - (size_t)off, "%s%lld%s", k ? ", " : "[",
                        (long long)in[0].dims[k], k + 1 == in[0].rank ? "]" : "");
      if (pr_engine_session_create(m, &opt, &s, err, sizeof err) ||
          pr_engine_session_run(s, in, n_in, got, n_out, err, sizeof err)) {
        printf("FAIL %s input %s threads %d: %s\n", dir, shape, opt.threads, err);
        failed++;
        continue;
      }
      for (int o = 0; o < n_out; o++) {
        int64_t n = pr_tensor_numel(&ref[o]);
        bool shape_ok = got[o].rank == ref[o].rank && got[o].dtype == PR_DTYPE_FLOAT &&
                        ref[o].dtype == PR_DTYPE_FLOAT;
        for (int k = 0; shape_ok && k < ref[o].rank; k++)
          shape_ok = got[o].dims[k] == ref[o].dims[k];
        double max_diff = 0, max_ref = 0;
        for (int64_t i = 0; shape_ok && i < n; i++) {
          double g = ((float *)got[o].data)[i], r = ((float *)ref[o].data)[i];
          double d = fabs(g - r);
          if (!(d <= max_diff)) max_diff = d; /* NaN propagates as failure */
          if (fabs(r) > max_ref) max_ref = fabs(r);
        }
        bool pass = shape_ok && max_diff <= tol * max_ref;
        printf("%s %s input %s threads %d output %d: max|diff| %.3g, max|ref| %.3g (limit %.3g)\n",
               pass ? "PASS" : "FAIL", dir, shape, opt.threads, o, max_diff, max_ref,
               tol * max_ref);
        pass ? passed++ : failed++;
      }
      pr_engine_session_destroy(s);
    }
    for (int i = 0; i < MAX_IO; i++) pr_engine_tensor_free(&in[i]), pr_engine_tensor_free(&ref[i]);
  }
  pr_engine_model_destroy(m);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
