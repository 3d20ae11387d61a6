/* packrat plan: the best instance list for a batch, from a profile. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/topology.h"
#include "base/util.h"
#include "cli/args.h"
#include "cli/cli.h"
#include "cli/plot.h"
#include "cli/profile_util.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: packrat plan (MODEL.onnx | --profile FILE) --batch B [options]\n"
          "       packrat plan --profile A.json --profile B.json ... --batch B1,B2,... [options]\n"
          "\n"
          "Finds the instances <threads, batch> whose batches add up to B and threads to at\n"
          "most T that make the slowest instance as fast as possible (exact).\n"
          "\n"
          "  --batch B        requests per batch (required); with several profiles, one\n"
          "                   per profile in their order (or one for all)\n"
          "  --cores T        cores to use (default: the profile's, or every physical core)\n"
          "  --profile FILE   a profile from 'packrat profile --out' instead of a model;\n"
          "                   repeated: the joint plan, the cores divided among the\n"
          "                   models as the server divides them (each core to one\n"
          "                   model, the worst slowdown against each one's best alone\n"
          "                   as small as it can be, then their sum)\n"
          "  --weight W,...   with several profiles: each model's weight (default 1)\n"
          "  --target-ms L,...  with several profiles: each model's latency target, the\n"
          "                   reference its slowdown is measured against (0: its best\n"
          "                   alone on every core)\n"
          "  --json           print one JSON object as the last line\n"
          "  --dim NAME=N     value of the model's named symbolic dimension NAME (repeatable)\n"
          "  --precision P    fp32 (default) or bf16: the profile of sessions in that precision\n"
          "  --reprofile      measure the model again even when a cached profile covers it\n"
          "                   (the cached points it does not measure again are kept)\n"
          "  --plot FILE.svg  draw latency against batch per thread count with the plan's\n"
          "                   instances, its latency and the one-instance (all threads)\n"
          "                   latency it is compared with; the y axis ends at twice the\n"
          "                   larger of the two, points above it are marked on the edge;\n"
          "                   with several profiles, the cores coloured by model and\n"
          "                   instance\n"
          "\n"
          "With MODEL.onnx, the profile comes from the cache when a cached profile of\n"
          "this model, machine and core count covers threads 1..T and the batch grid up\n"
          "to B (every b <= 8, then powers of two, and B); a cached profile that covers\n"
          "part of it is completed by measuring only the batches it lacks. See\n"
          "'packrat profile --help' for where the cache is.\n");
}

/* ---- flags ---- */

#define MAX_JOINT 64

typedef struct {
  const char *model_path, *profile_path, *plot;
  int batch, cores, precision;
  bool json, reprofile;
  pr_cli_dims_t dims;
  /* several profiles: the joint plan */
  const char *profiles[MAX_JOINT];
  int n_profiles;
  double batches[MAX_JOINT], weights[MAX_JOINT], targets[MAX_JOINT];
  int n_batches, n_weights, n_targets;
} plan_args_t;

/* A comma-separated list of numbers in [min, max], in order; exits 2 with
 * a message when it is not one. Returns the count. */
static int parse_list(const char *flag, const char *val, double *out, double min, double max,
                      bool integers) {
  int n = 0;
  for (const char *p = val ? val : "";;) {
    char item[64];
    size_t len = strcspn(p, ",");
    if (len == 0 || len >= sizeof item || n == MAX_JOINT) {
      fprintf(stderr, "packrat plan: %s needs up to %d comma-separated numbers, got '%s'\n", flag,
              MAX_JOINT, val ? val : "");
      exit(2);
    }
    memcpy(item, p, len);
    item[len] = 0;
    out[n++] = integers ? (double)pr__cli_parse_long(flag, item, (long)min, (long)max)
                        : pr__cli_parse_double(flag, item, min, max);
    if (!p[len]) return n;
    p += len + 1;
  }
}

/* Returns -1 to go on, else the exit status. */
static int parse_args(plan_args_t *a, int argc, char **argv) {
  *a = (plan_args_t){0};
  for (int i = 1; i < argc; i++) {
    const char *f = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(f, "--help") || !strcmp(f, "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(f, "--batch")) {
      a->n_batches = parse_list(f, val, a->batches, 1, 1 << 20, true), i++;
      a->batch = (int)a->batches[0];
    } else if (!strcmp(f, "--weight")) {
      a->n_weights = parse_list(f, val, a->weights, 1e-3, 1000, false), i++;
    } else if (!strcmp(f, "--target-ms")) {
      a->n_targets = parse_list(f, val, a->targets, 0, 1e7, false), i++;
    } else if (!strcmp(f, "--cores")) {
      a->cores = (int)pr__cli_parse_long(f, val, 1, 4096), i++;
    } else if (!strcmp(f, "--profile")) {
      if (!val) return fprintf(stderr, "packrat plan: --profile needs a value\n"), 2;
      if (a->n_profiles == MAX_JOINT)
        return fprintf(stderr, "packrat plan: at most %d profiles\n", MAX_JOINT), 2;
      a->profile_path = a->profiles[a->n_profiles++] = val, i++;
    } else if (!strcmp(f, "--plot")) {
      if (!val) return fprintf(stderr, "packrat plan: --plot needs a value\n"), 2;
      a->plot = val, i++;
    } else if (!strcmp(f, "--json")) {
      a->json = true;
    } else if (!strcmp(f, "--reprofile")) {
      a->reprofile = true;
    } else if (!strcmp(f, "--dim")) {
      pr__cli_parse_dim(f, val, &a->dims), i++;
    } else if (!strcmp(f, "--precision")) {
      a->precision = pr__cli_parse_precision(f, val), i++;
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
  int np = a->n_profiles;
  if ((np < 2 && (a->n_batches > 1 || a->n_weights || a->n_targets)) ||
      (np >= 2 && ((a->n_batches != 1 && a->n_batches != np) ||
                   (a->n_weights && a->n_weights != np) || (a->n_targets && a->n_targets != np)))) {
    fprintf(stderr,
            "packrat plan: lists of batches, weights and targets go with several "
            "profiles, one value per profile (a single batch: the same for all)\n");
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
                             .max_batch = a->batch,
                             .read_cache = !a->reprofile,
                             .write_cache = true,
                             .dims = &a->dims,
                             .precision = a->precision};
  int rc = pr__cli_get_profile(m, a->model_path, &o, p, cache, sizeof cache);
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
  double t0 = pr__now();
  pr_status_t st = pr_plan_optimize(p, a->batch, rep->cores, plan);
  rep->solve_ms = (pr__now() - t0) * 1e3;
  if (st) {
    fprintf(stderr, "packrat plan: %s\n",
            st == PR_ERR_NOT_FOUND
                ? "no combination of profiled points makes this batch on these cores"
                : "invalid batch or core count");
  } else {
    rep->fat_ms = pr_profile_latency(p, rep->cores, a->batch);
    rep->n_cpus = pr__topology_cpu_order(rep->cpus, 4096);
    print_plan(rep, p, plan);
    char err[1024];
    pr_cli_plot_opts_t po = {.threads = rep->cores, .plan = plan, .fat_ms = rep->fat_ms};
    if (a->plot && !pr__cli_plot_svg(a->plot, p, &po, err, sizeof err)) {
      fprintf(stderr, "packrat plan: %s\n", err);
      st = PR_ERR_IO;
    }
    if (a->json) print_json(rep, plan);
  }
  free(plan);
  free(rep);
  return st ? 1 : 0;
}

/* ---- several profiles: the joint plan ---- */

/* Prints the joint plan of the profiles (and draws it); the exit status. */
static int joint_plan(const plan_args_t *a, pr_profile_t *ps) {
  int n = a->n_profiles, T = a->cores;
  for (int k = 0; !a->cores && k < n; k++)
    T = k ? (ps[k].cores < T ? ps[k].cores : T) : ps[k].cores;
  pr_joint_model_t jm[MAX_JOINT];
  pr_joint_share_t sh[MAX_JOINT];
  for (int k = 0; k < n; k++)
    jm[k] = (pr_joint_model_t){.profile = &ps[k],
                               .batch = (int)a->batches[a->n_batches == 1 ? 0 : k],
                               .weight = a->n_weights ? a->weights[k] : 1,
                               .target_ms = a->n_targets ? a->targets[k] : 0};
  char err[1024];
  double t0 = pr__now();
  pr_status_t st = pr_plan_joint(jm, n, T, sh, err, sizeof err);
  double solve_ms = (pr__now() - t0) * 1e3;
  if (st) {
    fprintf(stderr, "packrat plan: %s\n", err);
    return 1;
  }
  int cpus[4096], n_cpus = pr__topology_cpu_order(cpus, 4096);
  double worst = 0, sum = 0;
  for (int k = 0; k < n; k++) worst = sh[k].score > worst ? sh[k].score : worst, sum += sh[k].score;
  printf("joint plan of %d models on %d cores: worst slowdown %.2fx, sum %.2f; solved in %.3f ms\n",
         n, T, worst, sum, solve_ms);
  pr_plan_t *plans = calloc((size_t)n, sizeof *plans);
  json_t *models = json_array();
  for (int k = 0; k < n && plans; k++) {
    pr_plan_optimize(&ps[k], jm[k].batch, sh[k].cores, &plans[k]);
    pr_plan_offset(&plans[k], sh[k].first_core);
    printf("  %s: batch %d on cores %d..%d, %.3g ms (%.2fx its %s of %.3g ms)\n", ps[k].model,
           jm[k].batch, sh[k].first_core, sh[k].first_core + sh[k].cores - 1, sh[k].latency_ms,
           sh[k].score, jm[k].target_ms > 0 ? "target" : "best alone", sh[k].reference_ms);
    json_t *insts = json_array();
    for (int i = 0; i < plans[k].n_instances; i++) {
      const pr_plan_instance_t *in = &plans[k].instances[i];
      json_t *cl = json_array();
      printf("    instance %d: %d threads, batch %d, %.3g ms, cpus ", i, in->threads, in->batch,
             in->latency_ms);
      for (int c = 0; c < in->threads; c++) {
        int core = in->first_core + c, cpu = core < n_cpus ? cpus[core] : core;
        printf("%s%d", c ? "," : "", cpu);
        json_array_append_new(cl, json_integer(cpu));
      }
      printf("\n");
      json_array_append_new(
          insts, json_pack("{s:i, s:i, s:o, s:f}", "threads", in->threads, "batch", in->batch,
                           "cpus", cl, "latency_ms", in->latency_ms));
    }
    json_array_append_new(
        models, json_pack("{s:s, s:i, s:i, s:i, s:f, s:f, s:f, s:o}", "model", ps[k].model, "batch",
                          jm[k].batch, "first_core", sh[k].first_core, "cores", sh[k].cores,
                          "latency_ms", sh[k].latency_ms, "reference_ms", sh[k].reference_ms,
                          "score", sh[k].score, "instances", insts));
  }
  int rc = plans ? 0 : 1;
  if (plans && a->plot && !pr__cli_plot_joint_svg(a->plot, ps, plans, n, T, err, sizeof err)) {
    fprintf(stderr, "packrat plan: %s\n", err);
    rc = 1;
  }
  if (a->json) {
    json_t *o = json_pack("{s:i, s:f, s:f, s:f, s:o}", "cores", T, "worst_score", worst,
                          "score_sum", sum, "solve_ms", solve_ms, "models", models);
    char *text = json_dumps(o, JSON_COMPACT);
    printf("%s\n", text);
    free(text);
    json_decref(o);
  } else {
    json_decref(models);
  }
  free(plans);
  return rc;
}

int pr__cli_plan(int argc, char **argv) {
  plan_args_t a;
  int rc = parse_args(&a, argc, argv);
  if (rc >= 0) return rc;
  if (a.n_profiles >= 2) {
    pr_profile_t ps[MAX_JOINT];
    int loaded = 0;
    char err[1024];
    for (; loaded < a.n_profiles; loaded++)
      if (pr_profile_load(a.profiles[loaded], &ps[loaded], err, sizeof err)) {
        fprintf(stderr, "packrat plan: %s\n", err);
        break;
      }
    rc = loaded == a.n_profiles ? joint_plan(&a, ps) : 1;
    for (int k = 0; k < loaded; k++) pr_profile_free(&ps[k]);
    return rc;
  }
  pr_profile_t p;
  if (!get_profile(&a, &p)) return 1;
  rc = plan_and_report(&a, &p);
  pr_profile_free(&p);
  return rc;
}
