/* packrat profile: measure latency[t][b] of a model and write it as JSON. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/profile_util.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: packrat profile MODEL.onnx [options]\n"
          "\n"
          "Measures one instance's latency for every thread count 1..T and batch sizes\n"
          "1..8, then powers of two up to B, each on its own pinned cores.\n"
          "\n"
          "  --cores T        thread counts 1..T (default: every physical core)\n"
          "  --max-batch B    largest batch of the grid (default 16)\n"
          "  --out FILE       write the profile JSON here (default: the profile cache)\n"
          "  --no-cache       measure even when a cached profile fits\n"
          "  --dim NAME=N     value of the model's named symbolic dimension NAME (repeatable)\n");
}

int pr_cli_profile(int argc, char **argv) {
  const char *model_path = NULL, *out_path = NULL;
  pr_cli_dims_t dims = {0};
  pr_cli_profile_opts_t o = {
      .max_batch = 16, .read_cache = true, .write_cache = true, .dims = &dims};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "--cores")) {
      o.cores = (int)pr_cli_parse_long(a, val, 1, 4096), i++;
    } else if (!strcmp(a, "--max-batch")) {
      o.max_batch = (int)pr_cli_parse_long(a, val, 1, 1 << 16), i++;
    } else if (!strcmp(a, "--out")) {
      if (!val) return fprintf(stderr, "packrat profile: --out needs a value\n"), 2;
      out_path = val, i++;
    } else if (!strcmp(a, "--no-cache")) {
      o.read_cache = false;
    } else if (!strcmp(a, "--dim")) {
      pr_cli_parse_dim(a, val, &dims), i++;
    } else if (a[0] == '-' || model_path) {
      fprintf(stderr, "packrat profile: unexpected argument '%s'\n", a);
      usage(stderr);
      return 2;
    } else {
      model_path = a;
    }
  }
  if (!model_path) {
    usage(stderr);
    return 2;
  }
  char err[1024], cache[4096];
  pr_model_t *m;
  if (pr_engine_model_load_file(model_path, &m, err, sizeof err)) {
    fprintf(stderr, "packrat profile: %s\n", err);
    return 1;
  }
  pr_profile_t p;
  int rc = pr_cli_get_profile(m, model_path, &o, &p, cache, sizeof cache);
  if (rc == 0) {
    const char *dst = out_path ? out_path : cache;
    if (out_path && pr_profile_save(&p, out_path, err, sizeof err)) {
      fprintf(stderr, "packrat profile: %s\n", err);
      rc = 1;
    } else {
      printf("profile of %s: %d points on %d cores (%s) -> %s\n", model_path, p.n_points, p.cores,
             p.cpu, dst);
      for (int i = 0; i < p.n_points; i++)
        printf("  threads %2d batch %4d: %9.2f ms (p90 %.2f)\n", p.points[i].threads,
               p.points[i].batch, p.points[i].latency_ms, p.points[i].p90_ms);
    }
    pr_profile_free(&p);
  }
  pr_engine_model_destroy(m);
  return rc ? 1 : 0;
}
