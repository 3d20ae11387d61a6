/* packrat quantize: a float32 ONNX model and calibration inputs in, a QDQ
 * int8 model out (packrat/quantize.h does the work). */
#include <dirent.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "packrat/quantize.h"

#define MAX_CALIB 64       /* --calibration flags */
#define MAX_EXCLUDE 256    /* --exclude flags */
#define MAX_SAMPLES 100000 /* files per input */

static void usage(FILE *f) {
  fprintf(f,
          "usage: packrat quantize MODEL.onnx --out Q.onnx --calibration [NAME=]PATH... [options]\n"
          "\n"
          "Writes a QDQ model (QuantizeLinear/DequantizeLinear pairs, as ONNX Runtime's\n"
          "quantizer does) of a float32 model: the Conv, MatMul, Gemm and Add nodes that\n"
          "packrat folds into int8 kernels, with int8 weights (symmetric, per output\n"
          "channel), int32 biases, and the activations around them per tensor, their\n"
          "ranges measured by running the model on the calibration inputs.\n"
          "\n"
          "  --out FILE            the quantized model (replaced whole)\n"
          "  --calibration [NAME=]PATH\n"
          "                        calibration data of input NAME (NAME= may be left out\n"
          "                        when the model has one input): a .npy or .pb tensor file,\n"
          "                        or a folder whose .npy and .pb files are read in name\n"
          "                        order; sample k is the k-th file of every input (each\n"
          "                        input needs as many); a file may hold a batch\n"
          "  --method M            minmax (default), percentile, or entropy (TensorRT's\n"
          "                        calibration: the threshold T of least KL divergence\n"
          "                        between a 2048-bin histogram of |x| and its 128-level\n"
          "                        quantization; the range [-T, T] cut to [min, max])\n"
          "  --percentile P        with --method percentile: the range keeps P%% of the\n"
          "                        values at each end (default 99.999)\n"
          "  --activations T       uint8 (default) or int8\n"
          "  --ops LIST            operators to quantize, of Conv,MatMul,Gemm,Add (default all)\n"
          "  --exclude NODE        leave node NODE float (its name, or its first output's\n"
          "                        when it has none; repeatable)\n"
          "  --fold-batchnorm      fold each BatchNormalization that follows a Conv into it\n"
          "                        first (the Conv then runs in int8 too)\n"
          "  --accuracy A          leave float the fewest nodes it finds such that at least\n"
          "                        A%% (0 < A <= 100) of the held-out samples agree with the\n"
          "                        float model (--metric); prints the nodes left float. Tries\n"
          "                        many models: each node alone in int8 ranks its\n"
          "                        sensitivity, then a binary search on the count of the\n"
          "                        most sensitive left float, then each of those back to int8\n"
          "                        where the target still holds\n"
          "  --holdout N           with --accuracy: the calibration samples (evenly spread)\n"
          "                        kept out of the ranges to check agreement on (default a\n"
          "                        quarter of them, at least 1; fewer than the samples)\n"
          "  --metric M            with --accuracy: when a held-out sample agrees; range\n"
          "                        (default): every output's max |int8 - fp32| within\n"
          "                        --tolerance of that output's fp32 range; argmax: every\n"
          "                        output's argmax along its last axis the same at every\n"
          "                        position (classes); ctc: every output's [T, C] blocks\n"
          "                        (last two axes) decode greedily to the same labels\n"
          "                        (argmax per step, repeats merged, class 0 the blank: a\n"
          "                        text recognizer reads the same string)\n"
          "  --tolerance T         with --metric range: the share of the range, 0 < T <= 1\n"
          "                        (default 0.02)\n"
          "  --dynamic             dynamic quantization instead (for MatMul-heavy\n"
          "                        transformers): each MatMul with constant weights as\n"
          "                        DynamicQuantizeLinear + MatMulInteger (int8 weights per\n"
          "                        column, activations quantized at run time: the form ONNX\n"
          "                        Runtime's quantize_dynamic writes); no --calibration,\n"
          "                        takes only --out, --exclude, --threads, --reduce-range\n"
          "                        and --json\n"
          "  --reduce-range        weights in 7 bits ([-64, 64]; ONNX Runtime's reduce_range):\n"
          "                        on CPUs without VNNI (AVX2) packrat runs such a model on\n"
          "                        oneDNN's int8 kernels, exactly (8-bit weights could\n"
          "                        overflow their 16-bit pair sums there, so those run\n"
          "                        packrat's exact but slow plain loops); a little less\n"
          "                        accurate\n"
          "  --threads T           threads of the calibration runs (default 1)\n"
          "  --json                print one JSON object as the last line\n");
}

typedef struct {
  const char *model, *out;
  const char *calib[MAX_CALIB];
  int n_calib;
  const char *exclude[MAX_EXCLUDE];
  pr_quantize_options_t opt;
  long holdout; /* 0: the default */
  bool metric_set, tolerance_set;
  bool static_flags; /* a flag of static quantization only was given */
  bool json;
} quantize_args_t;

/* ---- flags ---- */

static bool parse_ops(const char *val, unsigned *ops) {
  static const struct {
    const char *name;
    unsigned bit;
  } KINDS[] = {{"Conv", PR_QUANT_CONV},
               {"MatMul", PR_QUANT_MATMUL},
               {"Gemm", PR_QUANT_GEMM},
               {"Add", PR_QUANT_ADD}};
  *ops = 0;
  for (const char *p = val; *p;) {
    size_t len = strcspn(p, ",");
    size_t k = 0;
    while (k < 4 && (strlen(KINDS[k].name) != len || strncmp(KINDS[k].name, p, len))) k++;
    if (k == 4) return false;
    *ops |= KINDS[k].bit;
    p += len + (p[len] == ',');
  }
  return *ops != 0;
}

/* val as a number in (lo, hi] (lo itself when lo_in); false when it is not. */
static bool parse_number(const char *val, double lo, bool lo_in, double hi, double *out) {
  char *end;
  *out = strtod(val, &end);
  return !*end && end != val && (*out > lo || (lo_in && *out == lo)) && *out <= hi;
}

/* The accuracy search's flags; -1 to go on, else the exit status. */
static int parse_accuracy_flag(quantize_args_t *a, const char *f, const char *val) {
  if (!strcmp(f, "--accuracy")) {
    if (!parse_number(val, 0, false, 100, &a->opt.accuracy))
      return fprintf(stderr, "packrat quantize: --accuracy is a percentage, 0 < A <= 100\n"), 2;
  } else if (!strcmp(f, "--holdout")) {
    a->holdout = pr__cli_parse_long(f, val, 1, MAX_SAMPLES);
  } else if (!strcmp(f, "--metric")) {
    static const char *const METRICS[] = {"range", "argmax", "ctc"}; /* pr_quantize_metric_t */
    int m = 0;
    while (m < 3 && strcmp(val, METRICS[m])) m++;
    if (m == 3) return fprintf(stderr, "packrat quantize: --metric is range, argmax or ctc\n"), 2;
    a->opt.metric = (pr_quantize_metric_t)m;
    a->metric_set = true;
  } else {
    if (!parse_number(val, 0, false, 1, &a->opt.tolerance))
      return fprintf(stderr, "packrat quantize: --tolerance is a number, 0 < T <= 1\n"), 2;
    a->tolerance_set = true;
  }
  return -1;
}

/* One flag with its value; -1 to go on, else the exit status. */
static int parse_flag(quantize_args_t *a, const char *f, const char *val) {
  static const char *const FLAGS[] = {"--out",         "--calibration", "--method",  "--percentile",
                                      "--activations", "--ops",         "--exclude", "--threads",
                                      "--accuracy",    "--holdout",     "--metric",  "--tolerance"};
  size_t known = 0;
  while (known < sizeof FLAGS / sizeof *FLAGS && strcmp(FLAGS[known], f)) known++;
  if (known == sizeof FLAGS / sizeof *FLAGS) {
    fprintf(stderr, "packrat quantize: unknown option '%s'\n", f);
    usage(stderr);
    return 2;
  }
  if (!val) {
    fprintf(stderr, "packrat quantize: %s needs a value\n", f);
    return 2;
  }
  a->static_flags |= known != 0 && known != 6 && known != 7; /* but --out, --exclude, --threads */
  if (known >= 8) return parse_accuracy_flag(a, f, val);
  if (!strcmp(f, "--out")) {
    a->out = val;
  } else if (!strcmp(f, "--calibration")) {
    if (a->n_calib == MAX_CALIB)
      return fprintf(stderr, "packrat quantize: at most %d --calibration\n", MAX_CALIB), 2;
    a->calib[a->n_calib++] = val;
  } else if (!strcmp(f, "--method")) {
    static const char *const METHODS[] = {"minmax", "percentile",
                                          "entropy"}; /* pr_calib_method_t */
    int m = 0;
    while (m < 3 && strcmp(val, METHODS[m])) m++;
    if (m == 3)
      return fprintf(stderr, "packrat quantize: --method is minmax, percentile or entropy\n"), 2;
    a->opt.method = (pr_calib_method_t)m;
  } else if (!strcmp(f, "--percentile")) {
    char *end;
    a->opt.percentile = strtod(val, &end);
    if (*end || end == val || !(a->opt.percentile >= 50 && a->opt.percentile <= 100))
      return fprintf(stderr, "packrat quantize: --percentile is a number in [50, 100]\n"), 2;
  } else if (!strcmp(f, "--activations")) {
    bool u8 = !strcmp(val, "uint8") || !strcmp(val, "u8");
    if (!u8 && strcmp(val, "int8") && strcmp(val, "s8"))
      return fprintf(stderr, "packrat quantize: --activations is uint8 or int8\n"), 2;
    a->opt.activation_type = u8 ? PR_DTYPE_UINT8 : PR_DTYPE_INT8;
  } else if (!strcmp(f, "--ops")) {
    if (!parse_ops(val, &a->opt.ops))
      return fprintf(stderr, "packrat quantize: --ops lists Conv, MatMul, Gemm, Add\n"), 2;
  } else if (!strcmp(f, "--exclude")) {
    if (a->opt.n_exclude == MAX_EXCLUDE)
      return fprintf(stderr, "packrat quantize: at most %d --exclude\n", MAX_EXCLUDE), 2;
    a->exclude[a->opt.n_exclude++] = val;
  } else {
    a->opt.threads = (int)pr__cli_parse_long(f, val, 1, 1024);
  }
  return -1;
}

static int parse_args(quantize_args_t *a, int argc, char **argv) {
  memset(a, 0, sizeof *a);
  a->opt = pr_quantize_options_default();
  a->opt.exclude = a->exclude;
  for (int i = 1; i < argc; i++) {
    const char *f = argv[i];
    int rc;
    if (!strcmp(f, "--help") || !strcmp(f, "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(f, "--json")) {
      a->json = true;
    } else if (!strcmp(f, "--fold-batchnorm")) {
      a->opt.fold_batchnorm = a->static_flags = true;
    } else if (!strcmp(f, "--dynamic")) {
      a->opt.dynamic = true;
    } else if (!strcmp(f, "--reduce-range")) {
      a->opt.reduce_range = true;
    } else if (f[0] == '-') {
      if ((rc = parse_flag(a, f, i + 1 < argc ? argv[i + 1] : NULL)) >= 0) return rc;
      i++;
    } else if (!a->model) {
      a->model = f;
    } else {
      fprintf(stderr, "packrat quantize: unexpected argument '%s'\n", f);
      return 2;
    }
  }
  if (a->opt.dynamic && a->static_flags) {
    fprintf(stderr,
            "packrat quantize: --dynamic takes only --out, --exclude, --threads, --reduce-range "
            "and --json\n");
    return 2;
  }
  if (!a->model || !a->out || (!a->n_calib && !a->opt.dynamic)) {
    fprintf(stderr, "packrat quantize: needs MODEL.onnx, --out and --calibration\n");
    usage(stderr);
    return 2;
  }
  if (!(a->opt.accuracy > 0) && (a->holdout || a->metric_set || a->tolerance_set)) {
    fprintf(stderr, "packrat quantize: --holdout, --metric and --tolerance go with --accuracy\n");
    return 2;
  }
  if (a->tolerance_set && a->opt.metric != PR_QUANT_METRIC_RANGE) {
    fprintf(stderr, "packrat quantize: --tolerance goes with --metric range\n");
    return 2;
  }
  return -1;
}

/* ---- calibration files ---- */

typedef struct {
  char **files;
  int n;
} file_list_t;

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool tensor_file(const char *name) {
  size_t len = strlen(name);
  return (len > 4 && !strcmp(name + len - 4, ".npy")) ||
         (len > 3 && !strcmp(name + len - 3, ".pb"));
}

/* The files of PATH (a file, or a folder's .npy and .pb files in name
 * order) into l; false after a message. */
static bool list_files(const char *path, file_list_t *l) {
  struct stat sb;
  if (stat(path, &sb)) {
    fprintf(stderr, "packrat quantize: --calibration %s: no such file or folder\n", path);
    return false;
  }
  if (!S_ISDIR(sb.st_mode)) {
    l->files = malloc(sizeof *l->files);
    if (!l->files || !(l->files[0] = strdup(path))) return false;
    l->n = 1;
    return true;
  }
  DIR *d = opendir(path);
  if (!d) {
    fprintf(stderr, "packrat quantize: cannot open folder %s\n", path);
    return false;
  }
  struct dirent *de;
  int cap = 0;
  bool ok = true;
  while (ok && (de = readdir(d))) {
    if (!tensor_file(de->d_name)) continue;
    if (l->n == MAX_SAMPLES) {
      fprintf(stderr, "packrat quantize: %s: more than %d files\n", path, MAX_SAMPLES);
      ok = false;
    } else if (l->n == cap) {
      cap = cap * 2 + 64;
      char **grown = realloc(l->files, sizeof *grown * (size_t)cap);
      ok = grown != NULL;
      if (grown) l->files = grown;
    }
    size_t len = strlen(path) + strlen(de->d_name) + 2;
    char *full = ok ? malloc(len) : NULL;
    if (full) snprintf(full, len, "%s/%s", path, de->d_name), l->files[l->n++] = full;
    ok = ok && full;
  }
  closedir(d);
  if (ok && !l->n) fprintf(stderr, "packrat quantize: folder %s holds no .npy or .pb file\n", path);
  if (ok && l->n) qsort(l->files, (size_t)l->n, sizeof *l->files, cmp_str);
  return ok && l->n;
}

static void free_lists(file_list_t *lists, int n) {
  for (int i = 0; i < n; i++) {
    for (int k = 0; k < lists[i].n; k++) free(lists[i].files[k]);
    free(lists[i].files);
  }
}

/* The input index that "NAME=" in spec names, or -1 with *path at spec
 * when the model has one input and spec names none; -2 after a message. */
static int spec_input(pr_quantizer_t *q, const char *spec, const char **path) {
  int n_in = pr_engine_quantizer_num_inputs(q);
  const char *eq = strchr(spec, '=');
  for (int i = 0; eq && i < n_in; i++) {
    pr_tensor_info_t info;
    pr_engine_quantizer_input(q, i, &info);
    if (strlen(info.name) == (size_t)(eq - spec) &&
        !strncmp(info.name, spec, (size_t)(eq - spec))) {
      *path = eq + 1;
      return i;
    }
  }
  *path = spec;
  if (n_in == 1) return 0;
  fprintf(stderr,
          "packrat quantize: --calibration %s: name the input (NAME=PATH); the model has %d\n",
          spec, n_in);
  return -2;
}

/* Each model input's files into lists (n_in of them); false after a message. */
static bool calibration_files(const quantize_args_t *a, pr_quantizer_t *q, file_list_t *lists) {
  int n_in = pr_engine_quantizer_num_inputs(q);
  for (int c = 0; c < a->n_calib; c++) {
    const char *path;
    int i = spec_input(q, a->calib[c], &path);
    if (i < 0) return false;
    if (lists[i].n) {
      fprintf(stderr, "packrat quantize: input %d has two --calibration flags\n", i);
      return false;
    }
    if (!list_files(path, &lists[i])) return false;
  }
  for (int i = 0; i < n_in; i++) {
    pr_tensor_info_t info;
    pr_engine_quantizer_input(q, i, &info);
    if (!lists[i].n) {
      fprintf(stderr, "packrat quantize: no --calibration for input '%s'\n", info.name);
      return false;
    }
    if (lists[i].n != lists[0].n) {
      fprintf(stderr, "packrat quantize: input '%s' has %d calibration files, the first input %d\n",
              info.name, lists[i].n, lists[0].n);
      return false;
    }
  }
  return true;
}

/* ---- running ---- */

/* Whether sample k of n is one of the `held` held out (evenly spread). */
static bool held_out(int k, int n, int held) {
  return (long)(k + 1) * held / n > (long)k * held / n;
}

/* Sample k's tensors into in, then observed or held out; false after a
 * message. */
static bool feed(pr_quantizer_t *q, const file_list_t *lists, int n_in, int pass, int k,
                 bool hold) {
  char err[1024];
  pr_tensor_t in[64];
  int got = 0;
  pr_status_t st = PR_OK;
  for (; got < n_in && !st; got++) {
    st = pr_engine_tensor_read_file(lists[got].files[k], &in[got], NULL, err, sizeof err);
    if (st) fprintf(stderr, "packrat quantize: %s: %s\n", lists[got].files[k], err);
  }
  if (st) got--;
  if (!st && (st = hold ? pr_engine_quantizer_hold_out(q, in, n_in, err, sizeof err)
                        : pr_engine_quantizer_observe(q, pass, in, n_in, err, sizeof err)))
    fprintf(stderr, "packrat quantize: %s: %s\n", lists[0].files[k], err);
  for (int i = 0; i < got; i++) pr_engine_tensor_free(&in[i]);
  return !st;
}

/* Every pass over every sample, `held` of them held out (in the first
 * pass) for the accuracy search; false after a message. */
static bool calibrate(pr_quantizer_t *q, const file_list_t *lists, int n_in, int held) {
  int n = lists[0].n;
  for (int pass = 0; pass < pr_engine_quantizer_passes(q); pass++)
    for (int k = 0; k < n; k++) {
      bool hold = held && held_out(k, n, held);
      if ((!hold || pass == 0) && !feed(q, lists, n_in, pass, k, hold)) return false;
    }
  return true;
}

/* The samples to hold out: --holdout, or a quarter; -1 after a message. */
static int holdout_count(const quantize_args_t *a, int n_samples) {
  if (!(a->opt.accuracy > 0)) return 0;
  long held = a->holdout ? a->holdout : n_samples / 4 > 1 ? n_samples / 4 : 1;
  if (held >= n_samples) {
    fprintf(stderr,
            "packrat quantize: --accuracy: holding %ld of %d calibration samples out leaves none "
            "for the ranges\n",
            held, n_samples);
    return -1;
  }
  return (int)held;
}

/* A node name from the model printed with its control bytes as '?'. */
static void print_name(const char *name) {
  for (size_t i = 0; name[i] && i < 200; i++)
    putchar((unsigned char)name[i] < 0x20 || name[i] == 0x7f ? '?' : name[i]);
}

static const char *metric_name(const quantize_args_t *a) {
  return a->opt.metric == PR_QUANT_METRIC_ARGMAX ? "argmax"
         : a->opt.metric == PR_QUANT_METRIC_CTC  ? "ctc"
                                                 : "range";
}

static void print_search(const quantize_args_t *a, const pr_quantize_report_t *r) {
  printf("accuracy: %.1f%% of %d held-out samples agree with fp32 (%s", r->agreement, r->held_out,
         metric_name(a));
  if (a->opt.metric == PR_QUANT_METRIC_RANGE) printf(" %g", a->opt.tolerance);
  printf("; target %g%%; every node int8: %.1f%%) after %d trials; left float: %d", a->opt.accuracy,
         r->agreement_all_int8, r->trials, r->n_float);
  for (int i = 0; i < r->n_float; i++) {
    printf(i ? ", " : " (");
    print_name(r->float_nodes[i]);
  }
  printf("%s\n", r->n_float ? ")" : "");
}

/* The accuracy search's part of the JSON report (names that are not UTF-8
 * left out). */
static json_t *search_json(const quantize_args_t *a, const pr_quantize_report_t *r) {
  json_t *names = json_array();
  for (int i = 0; names && i < r->n_float; i++)
    json_array_append_new(names, json_string(r->float_nodes[i]));
  return json_pack("{s:f, s:s, s:f, s:i, s:f, s:f, s:i, s:o*}", "target", a->opt.accuracy, "metric",
                   metric_name(a), "tolerance", a->opt.tolerance, "held_out", r->held_out,
                   "agreement", r->agreement, "agreement_all_int8", r->agreement_all_int8, "trials",
                   r->trials, "float_nodes", names);
}

static void print_dynamic(const quantize_args_t *a, const pr_quantize_report_t *r) {
  printf(
      "%s -> %s: %d MatMul dynamic (int8 weights per column; %d activations quantized at run "
      "time by DynamicQuantizeLinear); opset %d\n",
      a->model, a->out, r->ops[1], r->tensors, r->opset);
  if (!a->json) return;
  json_t *o = json_pack("{s:s, s:s, s:b, s:i, s:i, s:i, s:b}", "model", a->model, "out", a->out,
                        "dynamic", 1, "matmul", r->ops[1], "activations", r->tensors, "opset",
                        r->opset, "reduce_range", a->opt.reduce_range);
  char *s = json_dumps(o, JSON_COMPACT);
  if (s) printf("%s\n", s);
  free(s);
  json_decref(o);
}

static void print_report(const quantize_args_t *a, const pr_quantize_report_t *r) {
  if (a->opt.dynamic) {
    print_dynamic(a, r);
    return;
  }
  const char *type = a->opt.activation_type == PR_DTYPE_INT8 ? "int8" : "uint8";
  const char *method = a->opt.method == PR_CALIB_PERCENTILE ? "percentile"
                       : a->opt.method == PR_CALIB_ENTROPY  ? "entropy"
                                                            : "minmax";
  printf("%s -> %s: %d Conv, %d MatMul, %d Gemm, %d Add in int8; %d activations %s (%s", a->model,
         a->out, r->ops[0], r->ops[1], r->ops[2], r->ops[3], r->tensors, type, method);
  if (a->opt.method == PR_CALIB_PERCENTILE) printf(" %g", a->opt.percentile);
  printf(", %lld samples); opset %d", (long long)r->samples, r->from_opset);
  if (r->opset != r->from_opset) printf(" -> %d", r->opset);
  if (r->folded_bn) printf("; %d BatchNormalization folded into Conv", r->folded_bn);
  if (a->opt.reduce_range) printf("; weights in 7 bits");
  printf("\n");
  if (a->opt.accuracy > 0) print_search(a, r);
  if (!a->json) return;
  json_t *o =
      json_pack("{s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:s, s:s, s:I, s:i, s:i}", "model", a->model,
                "out", a->out, "conv", r->ops[0], "matmul", r->ops[1], "gemm", r->ops[2], "add",
                r->ops[3], "activations", r->tensors, "type", type, "method", method, "samples",
                (json_int_t)r->samples, "from_opset", r->from_opset, "opset", r->opset);
  if (o) json_object_set_new(o, "reduce_range", json_boolean(a->opt.reduce_range));
  if (o && a->opt.accuracy > 0) json_object_set_new(o, "accuracy", search_json(a, r));
  char *s = json_dumps(o, JSON_COMPACT);
  if (s) printf("%s\n", s);
  free(s);
  json_decref(o);
}

int pr__cli_quantize(int argc, char **argv) {
  quantize_args_t a;
  int rc = parse_args(&a, argc, argv);
  if (rc >= 0) return rc;
  char err[1024];
  pr_quantizer_t *q;
  if (pr_engine_quantizer_create(a.model, &a.opt, &q, err, sizeof err)) {
    fprintf(stderr, "packrat quantize: %s\n", err);
    return 1;
  }
  int n_in = pr_engine_quantizer_num_inputs(q);
  file_list_t lists[64] = {{0}};
  pr_quantize_report_t report;
  rc = 1;
  if (n_in > 64) {
    fprintf(stderr, "packrat quantize: the model has more than 64 inputs\n");
  } else if (a.opt.dynamic) {
    if (pr_engine_quantizer_write(q, a.out, &report, err, sizeof err))
      fprintf(stderr, "packrat quantize: %s\n", err);
    else
      print_report(&a, &report), rc = 0;
  } else if (calibration_files(&a, q, lists)) {
    int held = holdout_count(&a, lists[0].n);
    if (held < 0)
      rc = 2;
    else if (!calibrate(q, lists, n_in, held))
      ;
    else if (pr_engine_quantizer_write(q, a.out, &report, err, sizeof err))
      fprintf(stderr, "packrat quantize: %s\n", err);
    else
      print_report(&a, &report), rc = 0;
  }
  free_lists(lists, n_in < 64 ? n_in : 64);
  pr_engine_quantizer_destroy(q);
  return rc;
}
