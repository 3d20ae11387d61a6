/* packrat plan: the best instance list for a batch, from a profile. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/topology.h"
#include "base/util.h"
#include "cli/args.h"
#include "cli/cli.h"
#include "cli/profile_util.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: packrat plan (MODEL.onnx | --profile FILE) --batch B [options]\n"
          "\n"
          "Finds the instances <threads, batch> whose batches add up to B and threads to at\n"
          "most T that make the slowest instance as fast as possible (exact).\n"
          "\n"
          "  --batch B        requests per batch (required)\n"
          "  --cores T        cores to use (default: the profile's, or every physical core)\n"
          "  --profile FILE   a profile from 'packrat profile --out' instead of a model\n"
          "  --json           print one JSON object as the last line\n"
          "  --dim NAME=N     value of the model's named symbolic dimension NAME (repeatable)\n"
          "  --plot FILE.svg  draw latency against batch per thread count, the plan marked\n");
}

static void write_svg(const char *path, const pr_profile_t *p, const pr_plan_t *plan, int T) {
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "packrat plan: cannot write %s\n", path);
    return;
  }
  double max_lat = 0;
  int max_b = 1;
  for (int i = 0; i < p->n_points; i++)
    if (p->points[i].threads <= T) {
      max_lat = fmax(max_lat, p->points[i].latency_ms);
      if (p->points[i].batch > max_b) max_b = p->points[i].batch;
    }
  const int W = 720, H = 480, L = 70, R = 150, TOP = 40, BOT = 50;
  double sx = (double)(W - L - R) / log2(max_b > 1 ? max_b : 2),
         sy = (double)(H - TOP - BOT) / (max_lat > 0 ? max_lat : 1);
#define X(b) (L + log2((double)(b)) * sx)
#define Y(l) (H - BOT - (l)*sy)
  fprintf(f,
          "<svg xmlns='http://www.w3.org/2000/svg' width='%d' height='%d' font-family='sans-serif' "
          "font-size='12'>\n",
          W, H);
  fprintf(f, "<rect width='100%%' height='100%%' fill='white'/>\n");
  fprintf(f,
          "<text x='%d' y='20' font-size='14'>%s: latency by batch (plan for B=%d on %d cores: "
          "%.2f ms)</text>\n",
          L, p->model, plan->batch, T, plan->latency_ms);
  fprintf(f, "<line x1='%d' y1='%d' x2='%d' y2='%d' stroke='black'/>\n", L, H - BOT, W - R,
          H - BOT);
  fprintf(f, "<line x1='%d' y1='%d' x2='%d' y2='%d' stroke='black'/>\n", L, TOP, L, H - BOT);
  for (int b = 1; b <= max_b; b *= 2)
    fprintf(f, "<text x='%.1f' y='%d' text-anchor='middle'>%d</text>\n", X(b), H - BOT + 16, b);
  fprintf(f, "<text x='%d' y='%d' text-anchor='middle'>batch (log scale)</text>\n", (W - R + L) / 2,
          H - 12);
  for (int k = 0; k <= 4; k++)
    fprintf(f, "<text x='%d' y='%.1f' text-anchor='end'>%.0f</text>\n", L - 6,
            Y(max_lat * k / 4) + 4, max_lat * k / 4);
  fprintf(f, "<text x='14' y='%d' transform='rotate(-90 14 %d)'>latency (ms)</text>\n", H / 2,
          H / 2);
  for (int t = 1; t <= T; t++) {
    double hue = 360.0 * (t - 1) / T;
    fprintf(f, "<polyline fill='none' stroke='hsl(%.0f,70%%,45%%)' stroke-width='1.5' points='",
            hue);
    for (int b = 1; b <= max_b; b++) {
      double l = pr_profile_latency(p, t, b);
      if (l >= 0) fprintf(f, "%.1f,%.1f ", X(b), Y(l));
    }
    fprintf(f, "'/>\n<text x='%d' y='%.1f' fill='hsl(%.0f,70%%,45%%)'>%d thread%s</text>\n",
            W - R + 8, TOP + 14.0 * (t - 1), hue, t, t > 1 ? "s" : "");
  }
  for (int i = 0; i < plan->n_instances; i++) {
    const pr_plan_instance_t *in = &plan->instances[i];
    fprintf(f, "<circle cx='%.1f' cy='%.1f' r='6' fill='none' stroke='black' stroke-width='2'/>\n",
            X(in->batch), Y(in->latency_ms));
  }
  fprintf(f, "</svg>\n");
  fclose(f);
#undef X
#undef Y
}

int pr_cli_plan(int argc, char **argv) {
  const char *model_path = NULL, *profile_path = NULL, *plot = NULL;
  int batch = 0, cores = 0;
  bool json = false;
  pr_cli_dims_t dims = {0};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "--batch")) {
      batch = (int)pr_cli_parse_long(a, val, 1, 1 << 20), i++;
    } else if (!strcmp(a, "--cores")) {
      cores = (int)pr_cli_parse_long(a, val, 1, 4096), i++;
    } else if (!strcmp(a, "--profile")) {
      if (!val) return fprintf(stderr, "packrat plan: --profile needs a value\n"), 2;
      profile_path = val, i++;
    } else if (!strcmp(a, "--plot")) {
      if (!val) return fprintf(stderr, "packrat plan: --plot needs a value\n"), 2;
      plot = val, i++;
    } else if (!strcmp(a, "--json")) {
      json = true;
    } else if (!strcmp(a, "--dim")) {
      pr_cli_parse_dim(a, val, &dims), i++;
    } else if (a[0] == '-' || model_path) {
      fprintf(stderr, "packrat plan: unexpected argument '%s'\n", a);
      usage(stderr);
      return 2;
    } else {
      model_path = a;
    }
  }
  if (!batch || !!model_path == !!profile_path) {
    fprintf(stderr, "packrat plan: give --batch and one of MODEL.onnx or --profile FILE\n");
    usage(stderr);
    return 2;
  }
  char err[1024], cache[4096];
  pr_profile_t p;
  if (profile_path) {
    if (pr_profile_load(profile_path, &p, err, sizeof err)) {
      fprintf(stderr, "packrat plan: %s\n", err);
      return 1;
    }
    if (p.n_suspicious)
      fprintf(stderr,
              "packrat plan: warning: %d points of %s are suspicious (see 'packrat profile "
              "--check %s'); the plan may be off\n",
              p.n_suspicious, profile_path, profile_path);
  } else {
    pr_model_t *m;
    if (pr_engine_model_load_file(model_path, &m, err, sizeof err)) {
      fprintf(stderr, "packrat plan: %s\n", err);
      return 1;
    }
    pr_cli_profile_opts_t o = {.cores = cores,
                               .max_batch = batch < 16 ? 16 : batch,
                               .read_cache = true,
                               .write_cache = true,
                               .quiet = false,
                               .dims = &dims};
    int rc = pr_cli_get_profile(m, model_path, &o, &p, cache, sizeof cache);
    pr_engine_model_destroy(m);
    if (rc) return 1;
  }
  int T = cores ? cores : p.cores;
  pr_plan_t *plan = malloc(sizeof *plan);
  double t0 = pr_now();
  pr_status_t st = pr_plan_optimize(&p, batch, T, plan);
  double solve_ms = (pr_now() - t0) * 1e3;
  if (st) {
    fprintf(stderr, "packrat plan: %s\n",
            st == PR_ERR_NOT_FOUND
                ? "no combination of profiled points makes this batch on these cores"
                : "invalid batch or core count");
    free(plan);
    pr_profile_free(&p);
    return 1;
  }
  double fat = pr_profile_latency(&p, T, batch);
  int cpus[4096];
  int n_cpus = pr_topology_cpu_order(cpus, 4096);
  printf("plan for batch %d on %d cores (%s): %d instance%s, latency %.2f ms", batch, T, p.model,
         plan->n_instances, plan->n_instances > 1 ? "s" : "", plan->latency_ms);
  if (fat >= 0)
    printf(" vs %.2f ms for one %d-thread instance (%.2fx)", fat, T, fat / plan->latency_ms);
  printf("; solved in %.3f ms\n", solve_ms);
  printf("  %-9s %-8s %-7s %-12s %s\n", "instance", "threads", "batch", "latency ms", "cpus");
  for (int i = 0; i < plan->n_instances; i++) {
    const pr_plan_instance_t *in = &plan->instances[i];
    printf("  %-9d %-8d %-7d %-12.2f", i, in->threads, in->batch, in->latency_ms);
    for (int c = 0; c < in->threads; c++)
      printf("%s%d", c ? "," : "",
             in->first_core + c < n_cpus ? cpus[in->first_core + c] : in->first_core + c);
    printf("\n");
  }
  if (plot) write_svg(plot, &p, plan, T);
  if (json) {
    json_t *insts = json_array();
    for (int i = 0; i < plan->n_instances; i++) {
      const pr_plan_instance_t *in = &plan->instances[i];
      json_t *cl = json_array();
      for (int c = 0; c < in->threads; c++)
        json_array_append_new(cl,
                              json_integer(in->first_core + c < n_cpus ? cpus[in->first_core + c]
                                                                       : in->first_core + c));
      json_array_append_new(
          insts, json_pack("{s:i, s:i, s:o, s:f}", "threads", in->threads, "batch", in->batch,
                           "cores", cl, "latency_ms", in->latency_ms));
    }
    json_t *o =
        json_pack("{s:i, s:i, s:f, s:o, s:f, s:o}", "batch", batch, "cores", T, "latency_ms",
                  plan->latency_ms, "fat_latency_ms", fat >= 0 ? json_real(fat) : json_null(),
                  "solve_ms", solve_ms, "instances", insts);
    char *s = json_dumps(o, JSON_COMPACT);
    printf("%s\n", s);
    free(s);
    json_decref(o);
  }
  free(plan);
  pr_profile_free(&p);
  return 0;
}
