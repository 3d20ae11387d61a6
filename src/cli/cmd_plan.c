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

/* ---- flags ---- */

typedef struct {
  const char *model_path, *profile_path, *plot;
  int batch, cores;
  bool json;
  pr_cli_dims_t dims;
} plan_args_t;

/* Returns -1 to go on, else the exit status. */
static int parse_args(plan_args_t *a, int argc, char **argv) {
  *a = (plan_args_t){0};
  for (int i = 1; i < argc; i++) {
    const char *f = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(f, "--help") || !strcmp(f, "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(f, "--batch")) {
      a->batch = (int)pr_cli_parse_long(f, val, 1, 1 << 20), i++;
    } else if (!strcmp(f, "--cores")) {
      a->cores = (int)pr_cli_parse_long(f, val, 1, 4096), i++;
    } else if (!strcmp(f, "--profile")) {
      if (!val) return fprintf(stderr, "packrat plan: --profile needs a value\n"), 2;
      a->profile_path = val, i++;
    } else if (!strcmp(f, "--plot")) {
      if (!val) return fprintf(stderr, "packrat plan: --plot needs a value\n"), 2;
      a->plot = val, i++;
    } else if (!strcmp(f, "--json")) {
      a->json = true;
    } else if (!strcmp(f, "--dim")) {
      pr_cli_parse_dim(f, val, &a->dims), i++;
    } else if (f[0] == '-' || a->model_path) {
      fprintf(stderr, "packrat plan: unexpected argument '%s'\n", f);
      usage(stderr);
      return 2;
    } else {
      a->model_path = f;
    }
  }
  if (!a->batch || !!a->model_path == !!a->profile_path) {
    fprintf(stderr, "packrat plan: give --batch and one of MODEL.onnx or --profile FILE\n");
    usage(stderr);
    return 2;
  }
  return -1;
}

/* ---- the profile ---- */

/* The profile from --profile FILE, or the model's (cached or measured);
 * false after a message. */
static bool get_profile(const plan_args_t *a, pr_profile_t *p) {
  char err[1024], cache[4096];
  if (a->profile_path) {
    if (pr_profile_load(a->profile_path, p, err, sizeof err)) {
      fprintf(stderr, "packrat plan: %s\n", err);
      return false;
    }
    if (p->n_suspicious)
      fprintf(stderr,
              "packrat plan: warning: %d points of %s are suspicious (see 'packrat profile "
              "--check %s'); the plan may be off\n",
              p->n_suspicious, a->profile_path, a->profile_path);
    return true;
  }
  pr_model_t *m;
  if (pr_engine_model_load_file(a->model_path, &m, err, sizeof err)) {
    fprintf(stderr, "packrat plan: %s\n", err);
    return false;
  }
  pr_cli_profile_opts_t o = {.cores = a->cores,
                             .max_batch = a->batch < 16 ? 16 : a->batch,
                             .read_cache = true,
                             .write_cache = true,
                             .quiet = false,
                             .dims = &a->dims};
  int rc = pr_cli_get_profile(m, a->model_path, &o, p, cache, sizeof cache);
  pr_engine_model_destroy(m);
  return rc == 0;
}

/* ---- the report ---- */

typedef struct {
  int batch, cores;
  double fat_ms, solve_ms; /* fat_ms < 0: the profile has no T-thread point */
  int cpus[4096], n_cpus;
} plan_report_t;

/* The CPU of core k of the plan (k itself past the machine's list). */
static int plan_cpu(const plan_report_t *rep, int k) {
  return k < rep->n_cpus ? rep->cpus[k] : k;
}

static void print_plan(const plan_report_t *rep, const pr_profile_t *p, const pr_plan_t *plan) {
  printf("plan for batch %d on %d cores (%s): %d instance%s, latency %.2f ms", rep->batch,
         rep->cores, p->model, plan->n_instances, plan->n_instances > 1 ? "s" : "",
         plan->latency_ms);
  if (rep->fat_ms >= 0)
    printf(" vs %.2f ms for one %d-thread instance (%.2fx)", rep->fat_ms, rep->cores,
           rep->fat_ms / plan->latency_ms);
  printf("; solved in %.3f ms\n", rep->solve_ms);
  printf("  %-9s %-8s %-7s %-12s %s\n", "instance", "threads", "batch", "latency ms", "cpus");
  for (int i = 0; i < plan->n_instances; i++) {
    const pr_plan_instance_t *in = &plan->instances[i];
    printf("  %-9d %-8d %-7d %-12.2f", i, in->threads, in->batch, in->latency_ms);
    for (int c = 0; c < in->threads; c++)
      printf("%s%d", c ? "," : "", plan_cpu(rep, in->first_core + c));
    printf("\n");
  }
}

static void print_json(const plan_report_t *rep, const pr_plan_t *plan) {
  json_t *insts = json_array();
  for (int i = 0; i < plan->n_instances; i++) {
    const pr_plan_instance_t *in = &plan->instances[i];
    json_t *cl = json_array();
    for (int c = 0; c < in->threads; c++)
      json_array_append_new(cl, json_integer(plan_cpu(rep, in->first_core + c)));
    json_array_append_new(insts, json_pack("{s:i, s:i, s:o, s:f}", "threads", in->threads, "batch",
                                           in->batch, "cores", cl, "latency_ms", in->latency_ms));
  }
  json_t *o = json_pack("{s:i, s:i, s:f, s:o, s:f, s:o}", "batch", rep->batch, "cores", rep->cores,
                        "latency_ms", plan->latency_ms, "fat_latency_ms",
                        rep->fat_ms >= 0 ? json_real(rep->fat_ms) : json_null(), "solve_ms",
                        rep->solve_ms, "instances", insts);
  char *s = json_dumps(o, JSON_COMPACT);
  printf("%s\n", s);
  free(s);
  json_decref(o);
}

/* Solves and reports; the exit status. */
static int plan_and_report(const plan_args_t *a, const pr_profile_t *p) {
  plan_report_t *rep = malloc(sizeof *rep);
  pr_plan_t *plan = malloc(sizeof *plan);
  if (!rep || !plan) {
    fprintf(stderr, "packrat plan: out of memory\n");
    free(rep);
    free(plan);
    return 1;
  }
  rep->batch = a->batch;
  rep->cores = a->cores ? a->cores : p->cores;
  double t0 = pr_now();
  pr_status_t st = pr_plan_optimize(p, a->batch, rep->cores, plan);
  rep->solve_ms = (pr_now() - t0) * 1e3;
  if (st) {
    fprintf(stderr, "packrat plan: %s\n",
            st == PR_ERR_NOT_FOUND
                ? "no combination of profiled points makes this batch on these cores"
                : "invalid batch or core count");
  } else {
    rep->fat_ms = pr_profile_latency(p, rep->cores, a->batch);
    rep->n_cpus = pr_topology_cpu_order(rep->cpus, 4096);
    print_plan(rep, p, plan);
    if (a->plot) write_svg(a->plot, p, plan, rep->cores);
    if (a->json) print_json(rep, plan);
  }
  free(plan);
  free(rep);
  return st ? 1 : 0;
}

int pr_cli_plan(int argc, char **argv) {
  plan_args_t a;
  int rc = parse_args(&a, argc, argv);
  if (rc >= 0) return rc;
  pr_profile_t p;
  if (!get_profile(&a, &p)) return 1;
  rc = plan_and_report(&a, &p);
  pr_profile_free(&p);
  return rc;
}
