/* packrat infer: a command-line client of a running server. Reads the
 * model's metadata (GET /v2/models/M), sends the input files as one KServe
 * v2 JSON infer request (POST /v2/models/M/infer) over libcurl and prints
 * the outputs, or each row's top-k classes.
 *
 * Notes on the design:
 * - Input files: ONNX TensorProto (.pb) and NumPy (.npy) through the
 *   engine's tensor reader; JSON (.json) as a nested array of numbers (the
 *   shape is the nesting, the datatype the model's) or one v2 tensor object
 *   {"shape", "datatype", "data"}. A tensor one axis short of a batched
 *   input gets a batch axis of 1.
 * - Everything from the server is untrusted: answers are bounded
 *   (MAX_ANSWER), parsed by jansson, and an error message is printed
 *   through a filter that keeps printable ASCII only. */
#include <curl/curl.h>
#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "packrat/engine.h"
#include "server/protocol.h"

#define MAX_INPUTS 64
#define MAX_ANSWER (512L << 20) /* bytes of a server's answer kept */

static void usage(FILE *f) {
  fprintf(f,
          "usage: packrat infer --url URL --model NAME --input [INPUT=]FILE... [options]\n"
          "\n"
          "Sends one inference request (KServe v2, JSON) to a running packrat (or any v2)\n"
          "server and prints the outputs: name, datatype, shape, and each row's values.\n"
          "\n"
          "  --url URL        the server, e.g. http://127.0.0.1:8000\n"
          "  --model NAME     the model to run\n"
          "  --model-version V  a version of the model (default: the server's choice)\n"
          "  --input [INPUT=]FILE...  input tensors, the files up to the next --flag\n"
          "                   (--input repeatable): .npy, ONNX TensorProto .pb, or .json\n"
          "                   (a nested array of numbers, or {\"shape\": [...],\n"
          "                   \"datatype\": \"FP32\", \"data\": [...]}). A file with INPUT=\n"
          "                   goes to that input; the others, in order, to the model's\n"
          "                   inputs that no file names, in the order of its metadata.\n"
          "                   A tensor one axis short of a batched input gets batch 1.\n"
          "  --top-k K        print each row's K largest values as 'index (score)' instead\n"
          "                   of the values (classifiers; a row is the first axis)\n"
          "  --full           print every value (default: the first 10 of each row)\n"
          "  --timeout S      give up after S seconds (default 60)\n"
          "\n"
          "Exit status: 0 answered; 1 the server could not be reached, answered with an\n"
          "error (printed), or a file could not be read; 2 bad usage.\n");
}

typedef struct {
  const char *url, *model, *version;
  const char *files[MAX_INPUTS];
  int n_files, top_k;
  long timeout_s;
  bool full;
} infer_args_t;

typedef struct {
  char *buf;
  size_t len;
  bool too_long;
} answer_t;

/* ---- HTTP ---- */

static size_t on_data(char *ptr, size_t size, size_t n, void *ctx) {
  answer_t *a = ctx;
  size_t k = size * n;
  if (a->len + k > (size_t)MAX_ANSWER) {
    a->too_long = true;
    return 0;
  }
  char *grown = realloc(a->buf, a->len + k + 1);
  if (!grown) return 0;
  a->buf = grown;
  memcpy(a->buf + a->len, ptr, k);
  a->len += k;
  a->buf[a->len] = 0;
  return k;
}

/* Prints the server's {"error": ...} (printable ASCII only, cut), or the
 * start of its answer when it is not one. */
static void print_server_error(long status, const answer_t *a) {
  json_t *root = a->buf ? json_loadb(a->buf, a->len, 0, NULL) : NULL;
  const char *msg = root ? json_string_value(json_object_get(root, "error")) : NULL;
  if (!msg) msg = a->buf ? a->buf : "";
  fprintf(stderr, "packrat infer: the server answered %ld: ", status);
  for (size_t i = 0; msg[i] && i < 1000; i++)
    fputc(msg[i] >= 0x20 && msg[i] < 0x7f ? msg[i] : '?', stderr);
  fputc('\n', stderr);
  json_decref(root);
}

/* GET (body NULL) or POST body to url; the parsed JSON answer, or NULL after
 * a message on stderr. */
static json_t *http_json(const infer_args_t *a, const char *url, const char *body) {
  answer_t ans = {0};
  CURL *c = curl_easy_init();
  if (!c) return fprintf(stderr, "packrat infer: cannot start libcurl\n"), NULL;
  struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
  char cerr[CURL_ERROR_SIZE] = "";
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &ans);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, a->timeout_s);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, a->timeout_s < 10 ? a->timeout_s : 10L);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  if (body) {
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
  }
  CURLcode rc = curl_easy_perform(c);
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(c);
  curl_slist_free_all(hdr);
  json_t *root = NULL;
  if (ans.too_long)
    fprintf(stderr, "packrat infer: the answer of %s is over %ld MiB\n", url, MAX_ANSWER >> 20);
  else if (rc != CURLE_OK)
    fprintf(stderr, "packrat infer: cannot reach %s: %s\n", url,
            cerr[0] ? cerr : curl_easy_strerror(rc));
  else if (status >= 400)
    print_server_error(status, &ans);
  else if (!(root = ans.buf ? json_loadb(ans.buf, ans.len, 0, NULL) : NULL))
    fprintf(stderr, "packrat infer: the answer of %s is not JSON (status %ld)\n", url, status);
  free(ans.buf);
  return root;
}

/* url + "/v2/models/M[/versions/V]" + suffix, with M and V escaped; NULL
 * when out of memory. */
static char *model_url(const infer_args_t *a, const char *suffix) {
  char *m = curl_easy_escape(NULL, a->model, 0);
  char *v = a->version ? curl_easy_escape(NULL, a->version, 0) : NULL;
  size_t base = strlen(a->url);
  while (base > 0 && a->url[base - 1] == '/') base--;
  size_t len = base + (m ? strlen(m) : 0) + (v ? strlen(v) : 0) + strlen(suffix) + 32;
  char *u = m && (v || !a->version) ? malloc(len) : NULL;
  if (u)
    snprintf(u, len, "%.*s/v2/models/%s%s%s%s", (int)base, a->url, m, v ? "/versions/" : "",
             v ? v : "", suffix);
  curl_free(m);
  curl_free(v);
  return u;
}

/* ---- inputs ---- */

typedef struct {
  char name[256];
  char datatype[16];
  int rank;
  int64_t dims[PR_MAX_RANK];
  json_t *data; /* flat array */
} input_t;

/* Flattens a nested JSON array into flat, recording its shape; false after
 * a message when it is ragged, too deep or holds something else. */
static bool flatten(const char *path, json_t *v, int depth, input_t *in, json_t *flat) {
  if (!json_is_array(v)) {
    if (json_is_number(v) || json_is_boolean(v)) return json_array_append(flat, v) == 0;
    fprintf(stderr, "packrat infer: %s: the data holds something other than numbers\n", path);
    return false;
  }
  if (depth >= PR_MAX_RANK) {
    fprintf(stderr, "packrat infer: %s: more than %d nested arrays\n", path, PR_MAX_RANK);
    return false;
  }
  int64_t n = (int64_t)json_array_size(v);
  if (depth == in->rank) {
    in->rank++;
    in->dims[depth] = n;
  } else if (in->dims[depth] != n) {
    fprintf(stderr, "packrat infer: %s: the nested arrays are not all of one length\n", path);
    return false;
  }
  for (size_t i = 0; i < (size_t)n; i++)
    if (!flatten(path, json_array_get(v, i), depth + 1, in, flat)) return false;
  return true;
}

/* A .json input file into in (datatype "" when the file does not say). */
static bool read_json_input(const char *path, input_t *in) {
  json_error_t je;
  json_t *root = json_load_file(path, 0, &je), *data = root;
  if (!root) {
    fprintf(stderr, "packrat infer: %s: %s (line %d)\n", path, je.text, je.line);
    return false;
  }
  const char *dt = json_string_value(json_object_get(root, "datatype"));
  if (json_is_object(root)) data = json_object_get(root, "data");
  if (dt) snprintf(in->datatype, sizeof in->datatype, "%s", dt);
  in->data = json_array();
  if (!data)
    fprintf(stderr, "packrat infer: %s: needs an array of numbers or {\"shape\", \"data\"}\n",
            path);
  bool ok = data && in->data && flatten(path, data, 0, in, in->data);
  json_t *shape = json_object_get(root, "shape");
  if (ok && json_is_array(shape)) { /* an explicit shape replaces the nesting's */
    in->rank = (int)json_array_size(shape);
    int64_t n = 1;
    for (int d = 0; ok && d < in->rank && d < PR_MAX_RANK; d++) {
      json_int_t k = json_integer_value(json_array_get(shape, (size_t)d));
      ok = json_is_integer(json_array_get(shape, (size_t)d)) && k >= 0 &&
           (k == 0 || n <= (1LL << 40) / k); /* no overflow of the element count */
      in->dims[d] = k, n *= ok ? k : 1;
    }
    if (!ok || in->rank > PR_MAX_RANK || n != (int64_t)json_array_size(in->data)) {
      fprintf(stderr, "packrat infer: %s: 'shape' does not match the number of values\n", path);
      ok = false;
    }
  }
  json_decref(root);
  return ok;
}

/* One element of t as JSON; NULL for the types JSON cannot carry exactly. */
static json_t *element(const pr_tensor_t *t, int64_t i) {
  switch (t->dtype) {
    case PR_DTYPE_FLOAT: return json_real(((const float *)t->data)[i]);
    case PR_DTYPE_DOUBLE: return json_real(((const double *)t->data)[i]);
    case PR_DTYPE_INT8: return json_integer(((const int8_t *)t->data)[i]);
    case PR_DTYPE_UINT8: return json_integer(((const uint8_t *)t->data)[i]);
    case PR_DTYPE_INT16: return json_integer(((const int16_t *)t->data)[i]);
    case PR_DTYPE_UINT16: return json_integer(((const uint16_t *)t->data)[i]);
    case PR_DTYPE_INT32: return json_integer(((const int32_t *)t->data)[i]);
    case PR_DTYPE_UINT32: return json_integer(((const uint32_t *)t->data)[i]);
    case PR_DTYPE_INT64: return json_integer(((const int64_t *)t->data)[i]);
    case PR_DTYPE_UINT64: {
      uint64_t v = ((const uint64_t *)t->data)[i];
      return v <= INT64_MAX ? json_integer((json_int_t)v) : NULL;
    }
    case PR_DTYPE_BOOL: return json_boolean(((const uint8_t *)t->data)[i]);
    default: return NULL;
  }
}

/* A .npy or .pb input file into in. */
static bool read_tensor_input(const char *path, input_t *in) {
  pr_tensor_t t;
  char err[1024];
  if (pr_engine_tensor_read_file(path, &t, NULL, err, sizeof err)) {
    fprintf(stderr, "packrat infer: %s\n", err);
    return false;
  }
  snprintf(in->datatype, sizeof in->datatype, "%s", pr__proto_datatype(t.dtype));
  in->rank = t.rank;
  memcpy(in->dims, t.dims, sizeof in->dims);
  in->data = json_array();
  int64_t n = pr_tensor_numel(&t);
  bool ok = in->data != NULL;
  for (int64_t i = 0; ok && i < n; i++) {
    json_t *v = element(&t, i);
    ok = v && json_array_append_new(in->data, v) == 0;
    if (!v)
      fprintf(stderr, "packrat infer: %s: %s values cannot be sent as JSON numbers\n", path,
              pr_dtype_name(t.dtype));
  }
  pr_engine_tensor_free(&t);
  return ok;
}

/* The index of the model input that spec ([INPUT=]FILE) names, or -1 when
 * it names none (then all of spec is the file). */
static int named_input(const char *spec, json_t *meta_inputs) {
  const char *eq = strchr(spec, '=');
  size_t i;
  json_t *it;
  json_array_foreach(meta_inputs, i, it) {
    const char *name = json_string_value(json_object_get(it, "name"));
    if (eq && name && strlen(name) == (size_t)(eq - spec) && !strncmp(name, spec, eq - spec))
      return i <= INT_MAX ? (int)i : -1;
  }
  return -1;
}

/* Whether one of the n files named (named[i]) names input k (slot[i]). */
static bool input_named(const int *slot, const bool *named, int n, int k) {
  for (int i = 0; i < n; i++)
    if (named[i] && slot[i] == k) return true;
  return false;
}

/* Which model input each file goes to (slot[i], for a->files[i]): a named
 * file to its input, the unnamed ones in order to the inputs that no file
 * names. False after a message when an input is named twice or the
 * unnamed files outnumber the inputs left. */
static bool assign_inputs(const infer_args_t *a, json_t *meta_inputs, int slot[MAX_INPUTS]) {
  bool named[MAX_INPUTS];
  for (int i = 0; i < a->n_files; i++) {
    slot[i] = named_input(a->files[i], meta_inputs);
    named[i] = slot[i] >= 0;
    for (int j = 0; named[i] && j < i; j++)
      if (named[j] && slot[j] == slot[i]) {
        fprintf(stderr, "packrat infer: input %.*s is given twice\n",
                (int)(strchr(a->files[i], '=') - a->files[i]), a->files[i]);
        return false;
      }
  }
  size_t n_inputs = json_array_size(meta_inputs);
  int next = 0;
  for (int i = 0; i < a->n_files; i++) {
    if (named[i]) continue;
    while (input_named(slot, named, a->n_files, next)) next++;
    if ((size_t)next >= n_inputs) {
      fprintf(stderr, "packrat infer: %s: more files than the model's %zu inputs\n", a->files[i],
              n_inputs);
      return false;
    }
    slot[i] = next++;
  }
  return true;
}

/* Reads spec ([INPUT=]FILE) as the model input meta (its metadata) and fits
 * it to that. */
static bool load_input(const char *spec, json_t *meta, input_t *in) {
  const char *eq = strchr(spec, '='), *file = spec;
  const char *meta_name = json_string_value(json_object_get(meta, "name"));
  if (eq && meta_name && strlen(meta_name) == (size_t)(eq - spec) &&
      !strncmp(meta_name, spec, eq - spec))
    file = eq + 1;
  const char *dt = json_string_value(json_object_get(meta, "datatype"));
  json_t *shape = json_object_get(meta, "shape");
  snprintf(in->name, sizeof in->name, "%s", meta_name ? meta_name : "");
  size_t len = strlen(file);
  bool is_json = len >= 5 && !strcmp(file + len - 5, ".json");
  if (!(is_json ? read_json_input(file, in) : read_tensor_input(file, in))) return false;
  if (!in->datatype[0]) snprintf(in->datatype, sizeof in->datatype, "%s", dt ? dt : "FP32");
  /* one axis short of a batched input: batch 1 */
  if (json_is_array(shape) && (int)json_array_size(shape) == in->rank + 1 &&
      json_integer_value(json_array_get(shape, 0)) == -1 && in->rank < PR_MAX_RANK) {
    memmove(in->dims + 1, in->dims, sizeof in->dims[0] * (size_t)in->rank);
    in->dims[0] = 1, in->rank++;
  }
  return true;
}

/* The request body {"inputs": [...]}; NULL after a message. */
static char *request_body(const infer_args_t *a, json_t *meta, input_t *ins) {
  json_t *meta_inputs = json_object_get(meta, "inputs"), *list = json_array();
  if (!json_is_array(meta_inputs)) {
    fprintf(stderr, "packrat infer: the model's metadata lists no inputs\n");
    json_decref(list);
    return NULL;
  }
  int slot[MAX_INPUTS];
  bool ok = list != NULL && assign_inputs(a, meta_inputs, slot);
  for (int i = 0; ok && i < a->n_files; i++) {
    ok = load_input(a->files[i], json_array_get(meta_inputs, (size_t)slot[i]), &ins[i]);
    json_t *shape = json_array();
    for (int d = 0; ok && d < ins[i].rank; d++)
      json_array_append_new(shape, json_integer(ins[i].dims[d]));
    if (ok)
      json_array_append_new(list, json_pack("{s:s, s:s, s:o, s:O}", "name", ins[i].name, "datatype",
                                            ins[i].datatype, "shape", shape, "data", ins[i].data));
    else
      json_decref(shape);
  }
  char *body = NULL;
  if (ok) {
    json_t *root = json_pack("{s:o}", "inputs", list);
    body = json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(9));
    json_decref(root);
  } else {
    json_decref(list);
  }
  return body;
}

/* ---- outputs ---- */

static double number(json_t *v) {
  return json_is_boolean(v) ? (double)json_is_true(v) : json_number_value(v);
}

/* Row r's k largest values as "index (score)". */
static void print_top_k(json_t *data, size_t r, size_t cols, int k) {
  int *best = calloc((size_t)k, sizeof *best), n = 0;
  if (!best) return;
  for (size_t c = 0; c < cols; c++) {
    double v = number(json_array_get(data, r * cols + c));
    int pos = n < k ? n++ : k;
    while (pos > 0 && number(json_array_get(data, r * cols + (size_t)best[pos - 1])) < v) {
      if (pos < k) best[pos] = best[pos - 1];
      pos--;
    }
    if (pos < k) best[pos] = (int)c;
  }
  printf("  row %zu:", r);
  for (int i = 0; i < n; i++)
    printf("%s %d (%.6g)", i ? "," : "", best[i],
           number(json_array_get(data, r * cols + (size_t)best[i])));
  printf("\n");
  free(best);
}

static void print_output(const infer_args_t *a, json_t *out) {
  const char *name = json_string_value(json_object_get(out, "name"));
  const char *dt = json_string_value(json_object_get(out, "datatype"));
  json_t *shape = json_object_get(out, "shape"), *data = json_object_get(out, "data");
  size_t n = json_array_size(data), rank = json_array_size(shape);
  printf("%s %s [", name ? name : "?", dt ? dt : "?");
  for (size_t d = 0; d < rank; d++)
    printf("%s%lld", d ? ", " : "", (long long)json_integer_value(json_array_get(shape, d)));
  printf("]\n");
  size_t rows = rank >= 2 ? (size_t)json_integer_value(json_array_get(shape, 0)) : 1;
  if (rows < 1 || n % rows) rows = 1;
  size_t cols = n / rows;
  for (size_t r = 0; r < rows && cols; r++) {
    if (a->top_k) {
      print_top_k(data, r, cols, a->top_k);
      continue;
    }
    size_t shown = a->full || cols <= 10 ? cols : 10;
    printf("  row %zu:", r);
    for (size_t c = 0; c < shown; c++) printf(" %.6g", number(json_array_get(data, r * cols + c)));
    if (shown < cols) printf(" ... (%zu values)", cols);
    printf("\n");
  }
}

/* ---- flags ---- */

/* Returns -1 to go on, else the exit status. */
static int parse_args(infer_args_t *a, int argc, char **argv) {
  *a = (infer_args_t){.timeout_s = 60};
  for (int i = 1; i < argc; i++) {
    const char *f = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
    const char **dst = !strcmp(f, "--url")             ? &a->url
                       : !strcmp(f, "--model")         ? &a->model
                       : !strcmp(f, "--model-version") ? &a->version
                                                       : NULL;
    if (!strcmp(f, "--help") || !strcmp(f, "-h")) {
      usage(stdout);
      return 0;
    } else if (dst) {
      if (!val) return fprintf(stderr, "packrat infer: %s needs a value\n", f), 2;
      *dst = val, i++;
    } else if (!strcmp(f, "--input")) { /* its files: up to the next --flag */
      int before = a->n_files;
      for (; i + 1 < argc && strncmp(argv[i + 1], "--", 2); i++) {
        if (a->n_files == MAX_INPUTS)
          return fprintf(stderr, "packrat infer: at most %d input files\n", MAX_INPUTS), 2;
        a->files[a->n_files++] = argv[i + 1];
      }
      if (a->n_files == before) return fprintf(stderr, "packrat infer: --input needs a file\n"), 2;
    } else if (!strcmp(f, "--top-k")) {
      a->top_k = (int)pr__cli_parse_long(f, val, 1, 1000), i++;
    } else if (!strcmp(f, "--timeout")) {
      a->timeout_s = pr__cli_parse_long(f, val, 1, 86400), i++;
    } else if (!strcmp(f, "--full")) {
      a->full = true;
    } else {
      fprintf(stderr, "packrat infer: unexpected argument '%s'\n", f);
      usage(stderr);
      return 2;
    }
  }
  if (!a->url || !a->model || !a->n_files) {
    fprintf(stderr, "packrat infer: give --url, --model and at least one --input\n");
    usage(stderr);
    return 2;
  }
  return -1;
}

static int infer(const infer_args_t *a) {
  input_t ins[MAX_INPUTS] = {0};
  char *meta_url = model_url(a, ""), *infer_url = model_url(a, "/infer"), *body = NULL;
  json_t *meta = NULL, *answer = NULL;
  int rc = 1;
  if (!meta_url || !infer_url || !(meta = http_json(a, meta_url, NULL))) goto out;
  if (!(body = request_body(a, meta, ins))) goto out;
  if (!(answer = http_json(a, infer_url, body))) goto out;
  json_t *outs = json_object_get(answer, "outputs");
  if (!json_is_array(outs)) {
    fprintf(stderr, "packrat infer: the answer has no 'outputs'\n");
    goto out;
  }
  size_t i;
  json_t *it;
  json_array_foreach(outs, i, it) print_output(a, it);
  rc = 0;
out:
  for (int i = 0; i < a->n_files; i++) json_decref(ins[i].data);
  json_decref(meta);
  json_decref(answer);
  free(body);
  free(meta_url);
  free(infer_url);
  return rc;
}

int pr__cli_infer(int argc, char **argv) {
  infer_args_t a;
  int rc = parse_args(&a, argc, argv);
  if (rc >= 0) return rc;
  curl_global_init(CURL_GLOBAL_DEFAULT);
  rc = infer(&a);
  curl_global_cleanup();
  return rc;
}
