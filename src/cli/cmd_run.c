/* packrat run: load a model, feed it inputs (files or random), run it,
 * report latency and optionally write the outputs. */
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "base/topology.h"
#include "base/util.h"
#include "cli/args.h"
#include "cli/cli.h"
#include "cli/profile_util.h"
#include "packrat/engine.h"
#include "runtime/instances.h"

#define MAX_INPUTS 64
#define MAX_PLANS 64

static void usage(FILE *f) {
  fprintf(f,
          "usage: packrat run MODEL.onnx [options]\n"
          "\n"
          "  --threads T         threads of the session (default 1)\n"
          "  --precision P       fp32 (default) or bf16 (convolutions and linear MatMuls in\n"
          "                      bf16 with fp32 accumulation; CPUs with native bf16 only)\n"
          "  --batch B           value of the symbolic batch dimension for generated inputs "
          "(default 1)\n"
          "  --dim NAME=N        value of the named symbolic dimension NAME for generated inputs\n"
          "                      (repeatable; e.g. --dim sequence=128)\n"
          "  --input NAME=FILE   input tensor from an ONNX TensorProto (.pb) or NumPy (.npy) file\n"
          "  --input-dir DIR     inputs from DIR/input_0.pb, input_1.pb, ... in graph-input order\n"
          "  --output-dir DIR    write output_K.pb and output_K.npy in graph-output order\n"
          "  --repeat N          timed runs after warm-up (default 1)\n"
          "  --warmup N          untimed runs first (default 1 with --repeat > 1, else 0)\n"
          "  --plan P            run the batch on several pinned instances: 'auto' (profile,\n"
          "                      cached, then the optimal plan), a plan JSON from 'packrat plan\n"
          "                      --json', or THREADSxBATCH,... (e.g. 1x4,1x4); repeat it to\n"
          "                      measure several plans side by side in this one process: every\n"
          "                      plan's instances are made first, then each of the --repeat\n"
          "                      rounds runs every plan once, in an order that rotates per round\n"
          "                      (at most %d plans, each adding up to --batch)\n"
          "  --profile-kernels   time every kernel and print the time per op type and the\n"
          "                      slowest kernels (a single session, not with --plan)\n"
          "  --json              print one JSON object as the last line\n"
          "\n"
          "Without inputs, random inputs of the model's shape are generated (integers 0 or 1).\n",
          MAX_PLANS);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void fill_random(pr_tensor_t *t, unsigned *seed) {
  int64_t n = pr_tensor_numel(t);
  for (int64_t i = 0; i < n; i++) {
    unsigned r = (*seed = *seed * 1103515245u + 12345u) >> 8;
    switch (t->dtype) {
      case PR_DTYPE_FLOAT: ((float *)t->data)[i] = (float)(r % 20000) / 10000.f - 1.f; break;
      case PR_DTYPE_DOUBLE: ((double *)t->data)[i] = (double)(r % 20000) / 10000.0 - 1.0; break;
      /* integers 0 or 1: ids inside any table of two rows or more (BERT's
       * token types), masks; an id out of range fails the run */
      case PR_DTYPE_INT64: ((int64_t *)t->data)[i] = r & 1; break;
      case PR_DTYPE_INT32: ((int32_t *)t->data)[i] = (int32_t)(r & 1); break;
      case PR_DTYPE_BOOL: ((uint8_t *)t->data)[i] = r & 1; break;
      default:
        memset((char *)t->data + i * (int64_t)pr_dtype_size(t->dtype), (int)(r % 100),
               pr_dtype_size(t->dtype));
        break;
    }
  }
}

static void shape_str(const pr_tensor_t *t, char *buf, size_t len) {
  size_t off = (size_t)snprintf(buf, len, "[");
  for (int k = 0; k < t->rank && off < len; k++)
    off += (size_t)snprintf(buf + off, len - off, "%s%lld", k ? ", " : "", (long long)t->dims[k]);
  if (off < len) snprintf(buf + off, len - off, "]");
}

/* Per op type: milliseconds per run, share, kernel count, GFLOP/s; then the
 * slowest kernels. Returns {op: ms per run} for --json. */
static json_t *print_kernel_profile(const pr_session_t *s) {
  enum { MAX_OPS = 128, TOP = 10 };
  struct {
    const char *op;
    double sec, flops;
    int n;
  } agg[MAX_OPS];
  int n_ops = 0, nk = pr_engine_session_num_kernels(s);
  double total = 0;
  int64_t runs = 1;
  int top[TOP];
  double top_sec[TOP];
  int n_top = 0;
  for (int i = 0; i < nk; i++) {
    pr_kernel_info_t k;
    pr_engine_session_kernel(s, i, &k);
    runs = k.runs > 0 ? k.runs : 1;
    total += k.seconds;
    int j = 0;
    while (j < n_ops && strcmp(agg[j].op, k.op)) j++;
    if (j == n_ops && n_ops < MAX_OPS) agg[n_ops++] = (typeof(agg[0])){k.op, 0, 0, 0};
    if (j < n_ops) agg[j].sec += k.seconds, agg[j].flops += k.flops, agg[j].n++;
    /* insertion into the top list, slowest first */
    int p = n_top < TOP ? n_top++ : TOP;
    while (p > 0 && top_sec[p - 1] < k.seconds) {
      if (p < TOP) top[p] = top[p - 1], top_sec[p] = top_sec[p - 1];
      p--;
    }
    if (p < TOP) top[p] = i, top_sec[p] = k.seconds;
  }
  for (int a = 1; a < n_ops; a++) /* by time, descending */
    for (int b = a; b > 0 && agg[b].sec > agg[b - 1].sec; b--) {
      typeof(agg[0]) t = agg[b];
      agg[b] = agg[b - 1], agg[b - 1] = t;
    }
  printf("kernel time per run (%lld runs, %d kernels, %.3f ms in kernels):\n", (long long)runs, nk,
         total * 1e3 / (double)runs);
  printf("  %-22s %10s %7s %7s %9s\n", "op", "ms", "share", "count", "GFLOP/s");
  json_t *o = json_object();
  for (int j = 0; j < n_ops; j++) {
    double ms = agg[j].sec * 1e3 / (double)runs;
    printf("  %-22s %10.3f %6.1f%% %7d", agg[j].op, ms, total > 0 ? 100 * agg[j].sec / total : 0,
           agg[j].n);
    if (agg[j].flops > 0 && agg[j].sec > 0)
      printf(" %9.1f", agg[j].flops * (double)runs / agg[j].sec / 1e9);
    printf("\n");
    json_object_set_new(o, agg[j].op, json_real(ms));
  }
  printf("slowest kernels:\n");
  for (int j = 0; j < n_top; j++) {
    pr_kernel_info_t k;
    pr_engine_session_kernel(s, top[j], &k);
    printf("  #%-4d %-14s %-40s %8.3f ms  %s\n", top[j], k.op, k.node,
           k.seconds * 1e3 / (double)runs, k.impl[0] ? k.impl : "packrat");
  }
  return o;
}

/* A session, or pinned instances running a plan: the same calls for both. */
typedef struct {
  pr_session_t *session;
  pr_instances_t *instances;
  pr_plan_t *plan;
} runner_t;

/* Reads a plan from `packrat plan --json` output (its last JSON line). */
static pr_status_t plan_from_file(const char *path, pr_plan_t *plan, char *err, size_t len) {
  FILE *f = fopen(path, "r");
  if (!f) return PR_ERR_NOT_FOUND;
  char line[65536], last[65536] = "";
  while (fgets(line, sizeof line, f))
    if (line[0] == '{') snprintf(last, sizeof last, "%s", line);
  fclose(f);
  json_error_t je;
  json_t *root = json_loads(last, 0, &je),
         *insts = root ? json_object_get(root, "instances") : NULL;
  if (!json_is_array(insts) || !json_array_size(insts)) {
    json_decref(root);
    pr__errf(err, len, "%s: no plan (expected the JSON line of 'packrat plan --json')", path);
    return PR_ERR_INVALID;
  }
  char spec[60000] = "";
  size_t off = 0, i;
  json_t *it;
  json_array_foreach(insts, i, it) {
    json_int_t t = json_integer_value(json_object_get(it, "threads"));
    json_int_t b = json_integer_value(json_object_get(it, "batch"));
    off += (size_t)snprintf(spec + off, sizeof spec - off, "%s%lldx%lld", i ? "," : "",
                            (long long)t, (long long)b);
    if (off >= sizeof spec) break;
  }
  json_decref(root);
  return pr_plan_parse(spec, NULL, plan, err, len);
}

/* The plan of --plan: 'auto' (the profile, cached, then the optimizer), a
 * plan JSON file, or THREADSxBATCH,... */
static pr_status_t resolve_plan(pr_plan_t *plan, pr_model_t *model, const char *model_path,
                                const pr_session_options_t *opt, const pr_cli_dims_t *dims,
                                const char *plan_arg, char *err, size_t len) {
  pr_status_t st;
  if (!strcmp(plan_arg, "auto")) {
    pr_cli_profile_opts_t po = {.max_batch = opt->batch < 16 ? 16 : (int)opt->batch,
                                .read_cache = true,
                                .write_cache = true,
                                .dims = dims,
                                .precision = opt->precision};
    pr_profile_t p;
    char cache[4096];
    if (pr__cli_get_profile(model, model_path, &po, &p, cache, sizeof cache)) {
      pr__errf(err, len, "no profile");
      return PR_ERR_INVALID;
    }
    st = pr_plan_optimize(&p, (int)opt->batch, p.cores, plan);
    pr_profile_free(&p);
    if (st) pr__errf(err, len, "no plan for batch %lld from the profile", (long long)opt->batch);
    return st;
  }
  if ((st = plan_from_file(plan_arg, plan, err, len)) == PR_ERR_NOT_FOUND)
    st = pr_plan_parse(plan_arg, NULL, plan, err, len);
  return st;
}

static pr_status_t runner_create(runner_t *r, pr_model_t *model, const char *model_path,
                                 pr_session_options_t *opt, const pr_cli_dims_t *dims,
                                 const char *plan_arg, char *err, size_t len) {
  if (!plan_arg) return pr_engine_session_create(model, opt, &r->session, err, len);
  r->plan = malloc(sizeof *r->plan);
  if (!r->plan) return PR_ERR_NOMEM;
  pr_status_t st = resolve_plan(r->plan, model, model_path, opt, dims, plan_arg, err, len);
  if (st) return st;
  if (r->plan->batch != opt->batch) {
    pr__errf(err, len, "the plan's batches add up to %d, the batch is %lld", r->plan->batch,
             (long long)opt->batch);
    return PR_ERR_INVALID;
  }
  int cpus[4096];
  int n_cpus = pr__topology_cpu_order(cpus, 4096);
  int n = r->plan->n_instances;
  pr_instance_spec_t *specs = calloc((size_t)(n > 0 ? n : 1), sizeof *specs);
  if (!specs) return PR_ERR_NOMEM;
  for (int k = 0; k < n; k++)
    specs[k] = (pr_instance_spec_t){.threads = r->plan->instances[k].threads,
                                    .batch = r->plan->instances[k].batch,
                                    .first_core = r->plan->instances[k].first_core};
  st = pr__instances_create(model, specs, n, cpus, n_cpus, opt, &r->instances, err, len);
  free(specs);
  return st;
}

static pr_status_t runner_run(runner_t *r, const pr_tensor_t *in, int n_in, pr_tensor_t *out,
                              int n_out, char *err, size_t len) {
  if (r->instances) return pr__instances_run(r->instances, in, n_in, out, n_out, err, len);
  return pr_engine_session_run(r->session, in, n_in, out, n_out, err, len);
}

static pr_status_t runner_input(runner_t *r, int i, pr_tensor_info_t *info) {
  if (r->instances) return pr__instances_input(r->instances, i, info);
  return pr_engine_session_input(r->session, i, info);
}

static void runner_destroy(runner_t *r) {
  pr__instances_destroy(r->instances);
  pr_engine_session_destroy(r->session);
  free(r->plan);
}

/* ---- flags ---- */

typedef struct {
  const char *model_path, *input_dir, *output_dir, *plan_arg; /* plan_arg: plans[0] or NULL */
  const char *plans[MAX_PLANS];
  int n_plans;
  const char *in_names[MAX_INPUTS], *in_files[MAX_INPUTS]; /* --input NAME=FILE (names owned) */
  int n_named, threads, repeat, warmup, precision;
  long batch;
  bool json, profile;
  pr_cli_dims_t dims;
} run_args_t;

/* A flag's string value; NULL (after a message) when there is none. */
static const char *string_value(const char *flag, const char *val) {
  if (!val) fprintf(stderr, "packrat run: %s needs a value\n", flag);
  return val;
}

/* --input NAME=FILE into a; false (after a message) when malformed. */
static bool add_named_input(run_args_t *a, const char *val) {
  const char *eq = val ? strchr(val, '=') : NULL;
  if (!eq || eq == val || !eq[1]) {
    fprintf(stderr, "packrat run: --input needs NAME=FILE\n");
    return false;
  }
  if (a->n_named == MAX_INPUTS) {
    fprintf(stderr, "packrat run: at most %d --input flags\n", MAX_INPUTS);
    return false;
  }
  a->in_names[a->n_named] = strndup(val, (size_t)(eq - val));
  a->in_files[a->n_named++] = eq + 1;
  return true;
}

/* One flag (argv[*i], value argv[*i + 1]); returns -1 to go on, else the
 * exit status. */
static int parse_flag(run_args_t *a, int argc, char **argv, int *i) {
  const char *f = argv[*i], *val = *i + 1 < argc ? argv[*i + 1] : NULL;
  bool takes_value = true;
  if (!strcmp(f, "--help") || !strcmp(f, "-h")) {
    usage(stdout);
    return 0;
  } else if (!strcmp(f, "--threads")) {
    a->threads = (int)pr__cli_parse_long(f, val, 1, 1024);
  } else if (!strcmp(f, "--batch")) {
    a->batch = pr__cli_parse_long(f, val, 1, 1 << 20);
  } else if (!strcmp(f, "--precision")) {
    a->precision = pr__cli_parse_precision(f, val);
  } else if (!strcmp(f, "--repeat")) {
    a->repeat = (int)pr__cli_parse_long(f, val, 1, 1000000);
  } else if (!strcmp(f, "--warmup")) {
    a->warmup = (int)pr__cli_parse_long(f, val, 0, 1000000);
  } else if (!strcmp(f, "--input")) {
    if (!add_named_input(a, val)) return 2;
  } else if (!strcmp(f, "--input-dir")) {
    if (!(a->input_dir = string_value(f, val))) return 2;
  } else if (!strcmp(f, "--output-dir")) {
    if (!(a->output_dir = string_value(f, val))) return 2;
  } else if (!strcmp(f, "--plan")) {
    if (a->n_plans == MAX_PLANS) {
      fprintf(stderr, "packrat run: at most %d --plan flags\n", MAX_PLANS);
      return 2;
    }
    if (!(a->plans[a->n_plans++] = string_value(f, val))) return 2;
  } else if (!strcmp(f, "--dim")) {
    pr__cli_parse_dim(f, val, &a->dims);
  } else {
    takes_value = false;
    if (!strcmp(f, "--json")) {
      a->json = true;
    } else if (!strcmp(f, "--profile-kernels")) {
      a->profile = true;
    } else {
      fprintf(stderr, "packrat run: unknown option '%s'\n", f);
      usage(stderr);
      return 2;
    }
  }
  *i += takes_value;
  return -1;
}

/* Returns -1 to go on, else the exit status. */
static int parse_args(run_args_t *a, int argc, char **argv) {
  *a = (run_args_t){.threads = 1, .repeat = 1, .warmup = -1, .batch = 1};
  for (int i = 1; i < argc; i++) {
    int rc;
    if (argv[i][0] == '-') {
      if ((rc = parse_flag(a, argc, argv, &i)) >= 0) return rc;
    } else if (!a->model_path) {
      a->model_path = argv[i];
    } else {
      fprintf(stderr, "packrat run: unexpected argument '%s'\n", argv[i]);
      return 2;
    }
  }
  if (!a->model_path) {
    usage(stderr);
    return 2;
  }
  a->plan_arg = a->n_plans ? a->plans[0] : NULL;
  if (a->n_plans > 1 && a->output_dir) {
    fprintf(stderr, "packrat run: --output-dir writes one plan's outputs; give one --plan\n");
    return 2;
  }
  if (a->profile && a->plan_arg) {
    fprintf(stderr, "packrat run: --profile-kernels profiles one session; drop --plan\n");
    return 2;
  }
  if (a->warmup < 0) a->warmup = a->repeat > 1 ? 1 : 0;
  return -1;
}

/* ---- inputs ---- */

/* The file of model input i: --input NAME=FILE, else DIR/input_i.pb (or .npy). */
static const char *input_file(const run_args_t *a, int i, const char *name, char *path,
                              size_t len) {
  for (int j = 0; j < a->n_named; j++)
    if (!strcmp(a->in_names[j], name)) return a->in_files[j];
  if (!a->input_dir) return NULL;
  snprintf(path, len, "%s/input_%d.pb", a->input_dir, i);
  struct stat sb;
  if (stat(path, &sb) != 0) snprintf(path, len, "%s/input_%d.npy", a->input_dir, i);
  return path;
}

/* Reads every input from its file, and their shapes into shapes; false after
 * a message. */
static bool read_inputs(const run_args_t *a, pr_model_t *model, pr_tensor_t *inputs,
                        pr_tensor_info_t *shapes) {
  int n_in = pr_engine_model_num_inputs(model);
  char err[1024], path[4096];
  for (int i = 0; i < n_in; i++) {
    pr_tensor_info_t info;
    pr_engine_model_input(model, i, &info);
    const char *file = input_file(a, i, info.name, path, sizeof path);
    if (!file) {
      fprintf(stderr, "packrat run: no file for input '%s'\n", info.name);
      return false;
    }
    if (pr_engine_tensor_read_file(file, &inputs[i], NULL, err, sizeof err)) {
      fprintf(stderr, "packrat run: input '%s': %s\n", info.name, err);
      return false;
    }
    shapes[i] =
        (pr_tensor_info_t){.name = info.name, .dtype = inputs[i].dtype, .rank = inputs[i].rank};
    memcpy(shapes[i].dims, inputs[i].dims, sizeof shapes[i].dims);
  }
  for (int j = 0; j < a->n_named; j++) {
    bool found = false;
    for (int i = 0; i < n_in; i++) {
      pr_tensor_info_t info;
      pr_engine_model_input(model, i, &info);
      found |= !strcmp(info.name, a->in_names[j]);
    }
    if (!found) {
      fprintf(stderr, "packrat run: model has no input '%s'\n", a->in_names[j]);
      return false;
    }
  }
  return true;
}

/* Random inputs in the runner's input shapes; false when out of memory. */
static bool random_inputs(runner_t *run, int n_in, pr_tensor_t *inputs) {
  unsigned seed = 12345;
  for (int i = 0; i < n_in; i++) {
    pr_tensor_info_t info;
    runner_input(run, i, &info);
    inputs[i].dtype = info.dtype;
    inputs[i].rank = info.rank;
    memcpy(inputs[i].dims, info.dims, sizeof info.dims);
    inputs[i].data =
        pr__aligned_alloc((size_t)pr_tensor_numel(&inputs[i]) * pr_dtype_size(info.dtype));
    if (!inputs[i].data) return false;
    fill_random(&inputs[i], &seed);
  }
  return true;
}

/* The session or plan_arg's instances, and the inputs (when make_inputs;
 * else inputs holds them already): from files (their shapes decide the
 * batch) or random. False after a message. */
static bool prepare(const run_args_t *a, pr_model_t *model, runner_t *run, pr_tensor_t *inputs,
                    const char *plan_arg, bool make_inputs) {
  int n_in = pr_engine_model_num_inputs(model);
  bool have_files = a->input_dir || a->n_named;
  pr_tensor_info_t shapes[MAX_INPUTS];
  if (have_files && make_inputs && !read_inputs(a, model, inputs, shapes)) return false;
  if (have_files && !make_inputs)
    for (int i = 0; i < n_in; i++) {
      pr_tensor_info_t info;
      pr_engine_model_input(model, i, &info);
      shapes[i] =
          (pr_tensor_info_t){.name = info.name, .dtype = inputs[i].dtype, .rank = inputs[i].rank};
      memcpy(shapes[i].dims, inputs[i].dims, sizeof shapes[i].dims);
    }
  pr_session_options_t opt = pr_session_options_default();
  opt.threads = a->threads;
  opt.profile_kernels = a->profile;
  opt.precision = a->precision;
  if (have_files) {
    opt.batch = n_in && inputs[0].rank ? inputs[0].dims[0] : 1;
    opt.input_shapes = shapes;
  } else {
    opt.batch = a->batch;
    pr__cli_dims_apply(&a->dims, &opt);
  }
  char err[1024];
  if (runner_create(run, model, a->model_path, &opt, &a->dims, plan_arg, err, sizeof err)) {
    fprintf(stderr, "packrat run: %s%s%s\n", a->n_plans > 1 ? plan_arg : "",
            a->n_plans > 1 ? ": " : "", err);
    return false;
  }
  return have_files || !make_inputs || random_inputs(run, n_in, inputs);
}

/* ---- running and reporting ---- */

/* Warm-up runs, then `repeat` timed runs into times (ms); false after a message. */
static bool time_runs(const run_args_t *a, runner_t *run, const pr_tensor_t *inputs, int n_in,
                      pr_tensor_t *outputs, int n_out, double *times) {
  char err[1024];
  for (int i = 0; i < a->warmup + a->repeat; i++) {
    if (i == a->warmup && run->session) pr_engine_session_kernel_reset(run->session);
    double t0 = pr__now();
    if (runner_run(run, inputs, n_in, outputs, n_out, err, sizeof err)) {
      fprintf(stderr, "packrat run: %s\n", err);
      return false;
    }
    if (i >= a->warmup) times[i - a->warmup] = (pr__now() - t0) * 1e3;
  }
  return true;
}

static bool write_outputs(const char *dir, pr_model_t *model, const pr_tensor_t *outputs,
                          int n_out) {
  mkdir(dir, 0755);
  for (int i = 0; i < n_out; i++) {
    pr_tensor_info_t info;
    pr_engine_model_output(model, i, &info);
    char path[4096];
    snprintf(path, sizeof path, "%s/output_%d.pb", dir, i);
    pr_status_t st = pr_engine_tensor_write_pb(path, &outputs[i], info.name);
    snprintf(path, sizeof path, "%s/output_%d.npy", dir, i);
    if (!st) st = pr_engine_tensor_write_npy(path, &outputs[i]);
    if (st) {
      fprintf(stderr, "packrat run: cannot write %s\n", path);
      return false;
    }
  }
  return true;
}

typedef struct {
  double median, p90, min, gflop;
  double prepare_ms; /* compiling the session (or the plan's instances) */
  int64_t batch;
  char plan[4096]; /* "" without a plan */
} run_summary_t;

static void summarize(const run_args_t *a, runner_t *run, int n_in, double *times,
                      run_summary_t *sum) {
  int repeat = a->repeat;
  qsort(times, (size_t)repeat, sizeof *times, cmp_double);
  sum->median = repeat % 2 ? times[repeat / 2] : 0.5 * (times[repeat / 2 - 1] + times[repeat / 2]);
  int p90 = (int)ceil(0.9 * repeat) - 1;
  sum->p90 = times[p90 < 0 ? 0 : p90];
  sum->min = times[0];
  pr_tensor_info_t in0;
  sum->batch = n_in && runner_input(run, 0, &in0) == PR_OK && in0.rank ? in0.dims[0] : a->batch;
  sum->gflop = run->session ? pr_engine_session_flops(run->session) / 1e9 : 0;
  sum->plan[0] = 0;
  if (run->plan) pr_plan_format(run->plan, sum->plan, sizeof sum->plan);
}

static void print_summary(const run_args_t *a, pr_model_t *model, const pr_tensor_t *outputs,
                          int n_out, const run_summary_t *sum) {
  for (int i = 0; i < n_out; i++) {
    pr_tensor_info_t info;
    pr_engine_model_output(model, i, &info);
    char sh[256];
    shape_str(&outputs[i], sh, sizeof sh);
    printf("output %d '%s': %s %s\n", i, info.name ? info.name : "",
           pr_dtype_name(outputs[i].dtype), sh);
  }
  if (sum->plan[0])
    printf("latency over %d runs (plan %s, batch %lld): ", a->repeat, sum->plan,
           (long long)sum->batch);
  else
    printf("latency over %d runs (threads %d, batch %lld): ", a->repeat, a->threads,
           (long long)sum->batch);
  printf("median %.3f ms, p90 %.3f ms, min %.3f ms", sum->median, sum->p90, sum->min);
  if (sum->gflop > 0) printf(", %.1f GFLOP/s", sum->gflop / (sum->median * 1e-3));
  printf("\nkernels: %s, linear MatMul on %s\n", pr_engine_isa(), pr_engine_matmul_kernel());
}

/* Resident memory (MiB): the peak and the current, -1 when unknown. */
static void memory_mb(double *max_rss, double *rss) {
  struct rusage ru;
  *max_rss = getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss / 1024.0 : -1;
  *rss = -1;
  long pages_total, pages_res;
  FILE *statm = fopen("/proc/self/statm", "r");
  if (statm && fscanf(statm, "%ld %ld", &pages_total, &pages_res) == 2)
    *rss = (double)pages_res * (double)sysconf(_SC_PAGESIZE) / 1048576.0;
  if (statm) fclose(statm);
}

static void print_json(const run_args_t *a, const runner_t *run, const run_summary_t *sum,
                       json_t *by_op) {
  json_t *o =
      json_pack("{s:s, s:i, s:I, s:i, s:f, s:f, s:f, s:f}", "model", a->model_path, "threads",
                a->threads, "batch", (json_int_t)sum->batch, "repeat", a->repeat, "median_ms",
                sum->median, "p90_ms", sum->p90, "min_ms", sum->min, "gflop", sum->gflop);
  double max_rss, rss;
  memory_mb(&max_rss, &rss);
  json_object_set_new(o, "prepare_ms", json_real(sum->prepare_ms));
  json_object_set_new(o, "isa", json_string(pr_engine_isa()));
  json_object_set_new(o, "precision", json_string(pr_precision_name(a->precision)));
  json_object_set_new(o, "matmul_kernel", json_string(pr_engine_matmul_kernel()));
  if (max_rss >= 0) json_object_set_new(o, "max_rss_mb", json_real(max_rss));
  if (rss >= 0) json_object_set_new(o, "rss_mb", json_real(rss));
  if (run->plan) {
    int total = 0;
    for (int k = 0; k < run->plan->n_instances; k++) total += run->plan->instances[k].threads;
    json_object_set_new(o, "plan", json_string(sum->plan));
    json_object_set_new(o, "instances", json_integer(run->plan->n_instances));
    json_object_set_new(o, "threads", json_integer(total));
  }
  if (by_op) json_object_set(o, "kernel_ms_by_op", by_op);
  char *s = json_dumps(o, JSON_COMPACT);
  printf("%s\n", s);
  free(s);
  json_decref(o);
}

/* Runs the loaded model as a asks and reports; returns the exit status. */
static int run_model(const run_args_t *a, pr_model_t *model) {
  int n_in = pr_engine_model_num_inputs(model), n_out = pr_engine_model_num_outputs(model);
  if (n_in > MAX_INPUTS) {
    fprintf(stderr, "packrat run: model has more than %d inputs\n", MAX_INPUTS);
    return 1;
  }
  pr_tensor_t inputs[MAX_INPUTS] = {0};
  runner_t run = {0};
  int rc = 1;
  pr_tensor_t *outputs = calloc((size_t)n_out + 1, sizeof *outputs);
  double *times = calloc((size_t)a->repeat, sizeof *times);
  double t0 = pr__now();
  bool ready = outputs && times && prepare(a, model, &run, inputs, a->plan_arg, true);
  double prepare_ms = (pr__now() - t0) * 1e3;
  if (ready && time_runs(a, &run, inputs, n_in, outputs, n_out, times) &&
      (!a->output_dir || write_outputs(a->output_dir, model, outputs, n_out))) {
    run_summary_t sum;
    summarize(a, &run, n_in, times, &sum);
    sum.prepare_ms = prepare_ms;
    print_summary(a, model, outputs, n_out, &sum);
    json_t *by_op = a->profile ? print_kernel_profile(run.session) : NULL;
    if (a->json) print_json(a, &run, &sum, by_op);
    json_decref(by_op);
    rc = 0;
  }
  for (int i = 0; i < n_in; i++) pr_engine_tensor_free(&inputs[i]);
  free(outputs);
  free(times);
  runner_destroy(&run);
  return rc;
}

/* Several --plan side by side (see usage): every plan's instances made
 * first, warm-up runs of each, then rounds of one run of every plan in a
 * rotating order; one line (and JSON entry) per plan. Exit status. */
static int compare_plans(const run_args_t *a, pr_model_t *model) {
  int n_in = pr_engine_model_num_inputs(model), n = a->n_plans, made = 0, rc = 1;
  if (n_in > MAX_INPUTS) {
    fprintf(stderr, "packrat run: model has more than %d inputs\n", MAX_INPUTS);
    return 1;
  }
  pr_tensor_t inputs[MAX_INPUTS] = {0};
  runner_t *runs = calloc((size_t)n, sizeof *runs);
  double *times = calloc((size_t)n * (size_t)a->repeat, sizeof *times);
  run_summary_t *sums = calloc((size_t)n, sizeof *sums);
  bool ok = runs && times && sums;
  if (!ok) fprintf(stderr, "packrat run: out of memory\n");
  while (ok && made < n) { /* runs[made] is destroyed after a failed prepare too */
    ok = prepare(a, model, &runs[made], inputs, a->plans[made], made == 0);
    made++;
  }
  char err[1024];
  for (int r = -a->warmup; ok && r < a->repeat; r++)
    for (int j = 0; ok && j < n; j++) {
      int k = r < 0 ? j : (r + j) % n; /* rotates: no plan always runs first */
      double t0 = pr__now();
      if (runner_run(&runs[k], inputs, n_in, NULL, 0, err, sizeof err)) {
        fprintf(stderr, "packrat run: plan %s: %s\n", a->plans[k], err);
        ok = false;
      } else if (r >= 0) {
        times[(size_t)k * (size_t)a->repeat + (size_t)r] = (pr__now() - t0) * 1e3;
      }
    }
  if (ok) {
    int best = 0;
    for (int k = 0; k < n; k++) {
      summarize(a, &runs[k], n_in, times + (size_t)k * (size_t)a->repeat, &sums[k]);
      if (sums[k].median < sums[best].median) best = k;
    }
    printf("%d plans side by side, %d rounds (batch %lld):\n", n, a->repeat,
           (long long)sums[0].batch);
    for (int k = 0; k < n; k++)
      printf("  %-40s median %9.3f ms, p90 %9.3f ms, min %9.3f ms%s\n", sums[k].plan,
             sums[k].median, sums[k].p90, sums[k].min, k == best ? "  (fastest)" : "");
    if (a->json) {
      json_t *o = json_pack("{s:s, s:I, s:i, s:i, s:s, s:[]}", "model", a->model_path, "batch",
                            (json_int_t)sums[0].batch, "repeat", a->repeat, "warmup", a->warmup,
                            "isa", pr_engine_isa(), "plans");
      for (int k = 0; k < n; k++) {
        int threads = 0;
        for (int i = 0; i < runs[k].plan->n_instances; i++)
          threads += runs[k].plan->instances[i].threads;
        json_array_append_new(
            json_object_get(o, "plans"),
            json_pack("{s:s, s:s, s:i, s:i, s:f, s:f, s:f}", "arg", a->plans[k], "plan",
                      sums[k].plan, "instances", runs[k].plan->n_instances, "threads", threads,
                      "median_ms", sums[k].median, "p90_ms", sums[k].p90, "min_ms", sums[k].min));
      }
      double max_rss, rss;
      memory_mb(&max_rss, &rss);
      if (max_rss >= 0) json_object_set_new(o, "max_rss_mb", json_real(max_rss));
      char *s = json_dumps(o, JSON_COMPACT);
      printf("%s\n", s);
      free(s);
      json_decref(o);
    }
    rc = 0;
  }
  for (int k = 0; k < made; k++) runner_destroy(&runs[k]);
  for (int i = 0; i < n_in; i++) pr_engine_tensor_free(&inputs[i]);
  free(runs);
  free(times);
  free(sums);
  return rc;
}

int pr__cli_run(int argc, char **argv) {
  run_args_t a;
  int rc = parse_args(&a, argc, argv);
  if (rc < 0) {
    char err[1024];
    pr_model_t *model;
    if (pr_engine_model_load_file(a.model_path, &model, err, sizeof err)) {
      fprintf(stderr, "packrat run: %s\n", err);
      rc = 1;
    } else {
      rc = a.n_plans > 1 ? compare_plans(&a, model) : run_model(&a, model);
      pr_engine_model_destroy(model);
    }
  }
  for (int j = 0; j < a.n_named; j++) free((void *)a.in_names[j]);
  return rc;
}
