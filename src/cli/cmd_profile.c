/* packrat profile: measure latency[t][b] of a model and write it as JSON,
 * or check the quality of a saved profile (--check). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/plot.h"
#include "cli/profile_util.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: packrat profile MODEL.onnx [options]\n"
          "       packrat profile --check FILE\n"
          "\n"
          "Measures one instance's latency for every thread count 1..T and batch sizes\n"
          "1..8, then powers of two up to B, each on its own pinned cores. A point is\n"
          "timed until the middle half of its runs lies within %.0f%% (or %.0f us) of\n"
          "their median (at least %d runs, at most %d, and at most about 3 s unless 3\n"
          "runs take longer). Suspicious points (p90 above %.1fx the median, runs that\n"
          "do not settle, more threads slower than fewer beyond that tolerance) are\n"
          "measured again; a profile whose re-measure does not reproduce them is used\n"
          "but not cached.\n"
          "\n"
          "  --cores T        thread counts 1..T (default: every physical core)\n"
          "  --max-batch B    largest batch of the grid (default 16)\n"
          "  --batches LIST   exactly these batch sizes instead of the grid (e.g. 1,2,4,8,16:\n"
          "                   plans for other batches combine them), at most 64\n"
          "  --point-budget S time budget of one point in seconds, the sum of its timed runs\n"
          "                   (default 3; at least 3 runs are timed whatever it is)\n"
          "  --out FILE       also write the profile JSON here\n"
          "  --reprofile      measure again even when a cached profile covers the grid\n"
          "                   (--no-cache is the same); the cache keeps the cached points\n"
          "                   that are not measured again, never fewer\n"
          "  --plot FILE.svg  draw latency[t][b] (log scales) into an SVG file\n"
          "  --dim NAME=N     value of the model's named symbolic dimension NAME (repeatable)\n"
          "  --precision P    fp32 (default) or bf16 (CPUs with native bf16; cached apart)\n"
          "  --check FILE     print the quality of a saved or cached profile (each suspicious\n"
          "                   point: threads, batch, median, p90, why); exit status 0 when\n"
          "                   it is good, 1 when it is suspicious or cannot be read\n"
          "\n"
          "Profiles are cached in $PACKRAT_CACHE, else $XDG_CACHE_HOME/packrat, else\n"
          "~/.cache/packrat, one file per model hash, CPU, core count, --dim values and\n"
          "packrat version. A cached profile that covers threads 1..T and the batch grid\n"
          "is reused (the server's too); one that covers part of it is completed by\n"
          "measuring only the batches it lacks. Progress and an estimate of the time\n"
          "left go to stderr.\n",
          100 * PR_PROFILE_TOLERANCE, 1e3 * PR_PROFILE_FLOOR_MS, PR_PROFILE_MIN_RUNS,
          PR_PROFILE_MAX_RUNS, PR_PROFILE_P90_LIMIT);
}

/* --check FILE: 0 good, 1 suspicious or unreadable */
static int check_profile(const char *path) {
  char err[1024];
  pr_profile_t p;
  if (pr_profile_load(path, &p, err, sizeof err)) {
    fprintf(stderr, "packrat profile: %s\n", err);
    return 1;
  }
  int n = pr_profile_assess(&p, p.tolerance, NULL, 0), remeasured = 0;
  for (int i = 0; i < p.n_points; i++) remeasured += p.points[i].remeasured > 0;
  pr_profile_issue_t *issues = n ? calloc((size_t)n, sizeof *issues) : NULL;
  if (n && !issues) {
    fprintf(stderr, "packrat profile: out of memory\n");
    pr_profile_free(&p);
    return 1;
  }
  pr_profile_assess(&p, p.tolerance, issues, n);
  printf(
      "%s: %s: %d of %d points suspicious (tolerance %.0f%%, p90 limit %.1fx the median, "
      "%d re-measured and reproduced)\n",
      path, n ? "suspicious" : "good", n, p.n_points, 100 * p.tolerance, PR_PROFILE_P90_LIMIT,
      remeasured);
  for (int i = 0; i < n; i++) {
    char why[512];
    pr_profile_issue_text(&issues[i], p.tolerance, why, sizeof why);
    printf("  threads %2d batch %4d: median %.3f ms, p90 %.3f ms: %s\n", issues[i].threads,
           issues[i].batch, issues[i].median_ms, issues[i].p90_ms, why);
  }
  free(issues);
  pr_profile_free(&p);
  return n ? 1 : 0;
}

/* Keeps the points of p on the grid asked for (batches[], or max_batch's
 * grid when n_batches is 0): a cached profile may cover more. */
static void only_grid(pr_profile_t *p, int max_batch, const int *batches, int n_batches) {
  int grid[64], n_grid = n_batches, n = 0;
  if (n_batches)
    memcpy(grid, batches, (size_t)n_batches * sizeof *grid);
  else
    n_grid = pr_profile_grid(max_batch, NULL, 0, grid, 64);
  for (int i = 0; i < p->n_points; i++)
    for (int g = 0; g < n_grid; g++)
      if (p->points[i].batch == grid[g]) {
        p->points[n++] = p->points[i];
        break;
      }
  p->n_points = n;
}

int pr__cli_profile(int argc, char **argv) {
  const char *model_path = NULL, *out_path = NULL, *check_path = NULL, *plot_path = NULL;
  pr_cli_dims_t dims = {0};
  int batches[64];
  pr_cli_profile_opts_t o = {
      .max_batch = 16, .read_cache = true, .write_cache = true, .dims = &dims};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "--cores")) {
      o.cores = (int)pr__cli_parse_long(a, val, 1, 4096), i++;
    } else if (!strcmp(a, "--max-batch")) {
      o.max_batch = (int)pr__cli_parse_long(a, val, 1, 1 << 16), i++;
    } else if (!strcmp(a, "--batches")) {
      o.n_batches = pr__cli_parse_batches(a, val, batches, 64), o.batches = batches, i++;
    } else if (!strcmp(a, "--point-budget")) {
      o.point_s = pr__cli_parse_double(a, val, 0.001, 3600), i++;
    } else if (!strcmp(a, "--out")) {
      if (!val) return fprintf(stderr, "packrat profile: --out needs a value\n"), 2;
      out_path = val, i++;
    } else if (!strcmp(a, "--check")) {
      if (!val) return fprintf(stderr, "packrat profile: --check needs a file\n"), 2;
      check_path = val, i++;
    } else if (!strcmp(a, "--plot")) {
      if (!val) return fprintf(stderr, "packrat profile: --plot needs a file\n"), 2;
      plot_path = val, i++;
    } else if (!strcmp(a, "--no-cache") || !strcmp(a, "--reprofile")) {
      o.read_cache = false;
    } else if (!strcmp(a, "--dim")) {
      pr__cli_parse_dim(a, val, &dims), i++;
    } else if (!strcmp(a, "--precision")) {
      o.precision = pr__cli_parse_precision(a, val), i++;
    } else if (a[0] == '-' || model_path) {
      fprintf(stderr, "packrat profile: unexpected argument '%s'\n", a);
      usage(stderr);
      return 2;
    } else {
      model_path = a;
    }
  }
  if (check_path && model_path) {
    fprintf(stderr, "packrat profile: give MODEL.onnx or --check FILE, not both\n");
    return 2;
  }
  if (check_path) return check_profile(check_path);
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
  int rc = pr__cli_get_profile(m, model_path, &o, &p, cache, sizeof cache);
  if (rc == 0) {
    only_grid(&p, o.max_batch, o.batches, o.n_batches);
    pr_cli_plot_opts_t po = {.threads = p.cores, .log_y = true};
    if (plot_path && !pr__cli_plot_svg(plot_path, &p, &po, err, sizeof err)) {
      fprintf(stderr, "packrat profile: %s\n", err);
      rc = 1;
    } else if (out_path && pr_profile_save(&p, out_path, err, sizeof err)) {
      fprintf(stderr, "packrat profile: %s\n", err);
      rc = 1;
    } else {
      /* "-> FILE": where the profile is; a suspicious one is in no cache */
      const char *dst = out_path ? out_path : cache;
      printf("profile of %s: %d points on %d cores (%s) -> %s%s\n", model_path, p.n_points, p.cores,
             p.cpu, dst[0] ? dst : "(not cached)",
             p.n_suspicious ? " (suspicious: see the warning)" : "");
      for (int i = 0; i < p.n_points; i++)
        printf("  threads %2d batch %4d: %9.3f ms (p90 %.3f, %d runs%s)\n", p.points[i].threads,
               p.points[i].batch, p.points[i].latency_ms, p.points[i].p90_ms, p.points[i].runs,
               p.points[i].remeasured > 0   ? ", re-measured"
               : p.points[i].remeasured < 0 ? ", not reproduced"
                                            : "");
    }
    pr_profile_free(&p);
  }
  pr_engine_model_destroy(m);
  return rc ? 1 : 0;
}
