/* packrat bench: a load client for the Open Inference Protocol.
 *
 * Closed loop (--concurrency C): C threads, each sends its next request when
 * the previous one is answered. Open loop (--rate R or --schedule): Poisson
 * arrivals at R requests/s from one thread driving libcurl's multi interface;
 * latency is measured from each request's scheduled arrival, so a slow server
 * cannot hide queueing by slowing the client down. */
#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/util.h"
#include "cli/cli.h"
#include "packrat/engine.h"
#include "server/protocol.h"

#define MAX_PHASES 32
#define MAX_INFLIGHT 4096

static void usage(FILE *f) {
  fprintf(f,
          "usage: packrat bench --url http://HOST:PORT --model M [options]\n"
          "\n"
          "  --concurrency C      closed loop with C connections (default 1)\n"
          "  --rate R             open loop: Poisson arrivals at R requests/s\n"
          "  --schedule R:S,...   open loop in phases: R requests/s for S seconds each\n"
          "  --duration S         seconds of load (default 10; not with --schedule)\n"
          "  --input FILE         the request's input (.pb or .npy, batch axis included);\n"
          "                       default: random data of the model's shape at batch 1\n"
          "  --json-data          send tensors as JSON instead of the binary extension\n"
          "  --expect FILE        check every response's first output against this tensor\n"
          "                       (max|diff| <= 1e-4 x max|expected|); a mismatch is an error\n"
          "  --json               print one JSON object as the last line\n");
}

typedef struct {
  double *lat; /* ms of successful requests */
  size_t n, cap;
  uint64_t requests, errors;
  uint64_t by_status[6]; /* 2xx..5xx, transport */
} result_t;

static void result_add(result_t *r, double ms, long status) {
  r->requests++;
  if (status == 200) {
    if (r->n == r->cap) {
      r->cap = r->cap ? r->cap * 2 : 1024;
      r->lat = realloc(r->lat, sizeof(double) * r->cap);
    }
    r->lat[r->n++] = ms;
  } else {
    r->errors++;
  }
  int k = status >= 200 && status < 600 ? (int)(status / 100) - 2 : 4;
  if (k >= 0 && k < 5)
    r->by_status[k]++;
  else
    r->by_status[5]++;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double pct(const result_t *r, double p) {
  if (!r->n) return 0;
  size_t i = (size_t)ceil(p * (double)r->n);
  return r->lat[i ? i - 1 : 0];
}

static json_t *result_json(result_t *r, double seconds) {
  qsort(r->lat, r->n, sizeof *r->lat, cmp_double);
  return json_pack("{s:I, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "requests",
                   (json_int_t)r->requests, "errors", (json_int_t)r->errors, "duration_s", seconds,
                   "throughput_rps", seconds > 0 ? (double)r->n / seconds : 0.0, "p50_ms",
                   pct(r, 0.5), "p90_ms", pct(r, 0.9), "p99_ms", pct(r, 0.99), "max_ms",
                   r->n ? r->lat[r->n - 1] : 0.0, "mean_ms",
                   r->n ? ({
                     double s = 0;
                     for (size_t i = 0; i < r->n; i++) s += r->lat[i];
                     s / (double)r->n;
                   })
                        : 0.0);
}

/* ---- the request body ---- */

typedef struct {
  char url[2048];
  char *body;
  size_t len, json_len;
  struct curl_slist *headers;
} request_t;

static size_t collect(char *p, size_t size, size_t n, void *ud) {
  char **buf = ud;
  size_t old = *buf ? strlen(*buf) : 0;
  char *nb = realloc(*buf, old + size * n + 1);
  if (!nb) return 0;
  memcpy(nb + old, p, size * n);
  nb[old + size * n] = 0;
  *buf = nb;
  return size * n;
}

static int build_request(const char *base, const char *model, const char *input_file, bool binary,
                         request_t *rq) {
  char url[2048];
  snprintf(url, sizeof url, "%s/v2/models/%s", base, model);
  CURL *c = curl_easy_init();
  char *meta = NULL;
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &meta);
  CURLcode cc = curl_easy_perform(c);
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(c);
  if (cc != CURLE_OK || status != 200 || !meta) {
    fprintf(stderr, "packrat bench: GET %s failed (%s, status %ld)\n", url,
            cc != CURLE_OK ? curl_easy_strerror(cc) : "HTTP", status);
    free(meta);
    return -1;
  }
  json_t *m = json_loads(meta, 0, NULL);
  free(meta);
  json_t *inputs = m ? json_object_get(m, "inputs") : NULL;
  if (!json_is_array(inputs)) {
    fprintf(stderr, "packrat bench: model metadata without inputs\n");
    json_decref(m);
    return -1;
  }
  pr_tensor_t given = {0};
  char err[512];
  if (input_file && pr_engine_tensor_read_file(input_file, &given, NULL, err, sizeof err)) {
    fprintf(stderr, "packrat bench: %s\n", err);
    json_decref(m);
    return -1;
  }
  json_t *req = json_object(), *rin = json_array();
  json_object_set_new(req, "inputs", rin);
  char *bin = NULL;
  size_t bin_len = 0;
  size_t i;
  json_t *in;
  unsigned seed = 7;
  json_array_foreach(inputs, i, in) {
    const char *dt = json_string_value(json_object_get(in, "datatype"));
    pr_tensor_t t = {.dtype = pr_proto_dtype(dt ? dt : "")};
    json_t *shape = json_object_get(in, "shape"), *js = json_array();
    if (!pr_dtype_size(t.dtype) || !json_is_array(shape)) {
      fprintf(stderr, "packrat bench: input %zu has an unsupported datatype\n", i);
      json_decref(m);
      json_decref(req);
      return -1;
    }
    if (input_file && i == 0) {
      t = given;
    } else {
      t.rank = (int)json_array_size(shape);
      for (int d = 0; d < t.rank; d++) {
        json_int_t v = json_integer_value(json_array_get(shape, (size_t)d));
        t.dims[d] = v < 0 ? 1 : v;
      }
      t.data = calloc((size_t)pr_tensor_numel(&t) + 1, pr_dtype_size(t.dtype));
      if (t.dtype == PR_DTYPE_FLOAT)
        for (int64_t e = 0; e < pr_tensor_numel(&t); e++) {
          seed = seed * 1103515245u + 12345u;
          ((float *)t.data)[e] = (float)((seed >> 8) % 2000) / 1000.f - 1.f;
        }
    }
    for (int d = 0; d < t.rank; d++) json_array_append_new(js, json_integer(t.dims[d]));
    json_t *ji =
        json_pack("{s:s, s:s, s:o}", "name", json_string_value(json_object_get(in, "name")),
                  "datatype", pr_proto_datatype(t.dtype), "shape", js);
    size_t nbytes = (size_t)pr_tensor_numel(&t) * pr_dtype_size(t.dtype);
    if (binary) {
      json_object_set_new(ji, "parameters",
                          json_pack("{s:I}", "binary_data_size", (json_int_t)nbytes));
      bin = realloc(bin, bin_len + nbytes + 1);
      memcpy(bin + bin_len, t.data, nbytes);
      bin_len += nbytes;
    } else {
      json_t *data = json_array();
      for (int64_t e = 0; e < pr_tensor_numel(&t); e++) {
        if (t.dtype == PR_DTYPE_FLOAT)
          json_array_append_new(data, json_real(((float *)t.data)[e]));
        else if (t.dtype == PR_DTYPE_INT64)
          json_array_append_new(data, json_integer(((int64_t *)t.data)[e]));
        else if (t.dtype == PR_DTYPE_INT32)
          json_array_append_new(data, json_integer(((int32_t *)t.data)[e]));
        else
          json_array_append_new(data, json_integer(((uint8_t *)t.data)[e]));
      }
      json_object_set_new(ji, "data", data);
    }
    json_array_append_new(rin, ji);
    if (!(input_file && i == 0)) free(t.data);
  }
  if (input_file) pr_engine_tensor_free(&given);
  if (binary) json_object_set_new(req, "parameters", json_pack("{s:b}", "binary_data_output", 1));
  char *js = json_dumps(req, JSON_COMPACT);
  json_decref(req);
  json_decref(m);
  rq->json_len = strlen(js);
  rq->len = rq->json_len + bin_len;
  rq->body = malloc(rq->len + 1);
  memcpy(rq->body, js, rq->json_len);
  if (bin_len) memcpy(rq->body + rq->json_len, bin, bin_len);
  free(js);
  free(bin);
  snprintf(rq->url, sizeof rq->url, "%s/v2/models/%s/infer", base, model);
  char h[64];
  rq->headers = curl_slist_append(
      NULL, binary ? "Content-Type: application/octet-stream" : "Content-Type: application/json");
  if (binary) {
    snprintf(h, sizeof h, "Inference-Header-Content-Length: %zu", rq->json_len);
    rq->headers = curl_slist_append(rq->headers, h);
  }
  rq->headers = curl_slist_append(rq->headers, "Expect:");
  return 0;
}

/* The expected first output, when checking responses. */
static pr_tensor_t g_expect;
static bool g_check;
static _Atomic uint64_t g_mismatches;

typedef struct {
  char *buf;
  size_t len, cap;
  char hlen[32]; /* Inference-Header-Content-Length of the response */
} body_t;

static size_t body_write(char *p, size_t size, size_t n, void *ud) {
  body_t *b = ud;
  size_t add = size * n;
  if (b->len + add > b->cap) {
    size_t cap = (b->len + add) * 2;
    char *nb = realloc(b->buf, cap);
    if (!nb) return 0;
    b->buf = nb;
    b->cap = cap;
  }
  memcpy(b->buf + b->len, p, add);
  b->len += add;
  return add;
}

static size_t header_write(char *p, size_t size, size_t n, void *ud) {
  body_t *b = ud;
  static const char key[] = "inference-header-content-length:";
  size_t len = size * n;
  if (len > sizeof key && !strncasecmp(p, key, sizeof key - 1)) {
    size_t vl = len - (sizeof key - 1);
    if (vl >= sizeof b->hlen) vl = sizeof b->hlen - 1;
    memcpy(b->hlen, p + sizeof key - 1, vl);
    b->hlen[vl] = 0;
  }
  return len;
}

/* True when the response's first output matches the expected tensor. */
static bool response_ok(const body_t *b) {
  size_t jl = b->hlen[0] ? (size_t)atoll(b->hlen) : b->len;
  if (jl > b->len) return false;
  size_t n = (size_t)pr_tensor_numel(&g_expect);
  const float *ref = g_expect.data;
  double max_ref = 0, max_diff = 0;
  if (jl < b->len) { /* binary */
    if (b->len - jl < n * sizeof(float)) return false;
    const char *data = b->buf + jl;
    for (size_t i = 0; i < n; i++) {
      float v;
      memcpy(&v, data + i * sizeof v, sizeof v);
      max_ref = fmax(max_ref, fabs(ref[i]));
      double d = fabs(v - ref[i]);
      if (!(d <= max_diff)) max_diff = d;
    }
  } else {
    json_t *root = json_loadb(b->buf, b->len, 0, NULL);
    json_t *data = json_object_get(json_array_get(json_object_get(root, "outputs"), 0), "data");
    if (!json_is_array(data) || json_array_size(data) != n) {
      json_decref(root);
      return false;
    }
    for (size_t i = 0; i < n; i++) {
      max_ref = fmax(max_ref, fabs(ref[i]));
      double d = fabs(json_number_value(json_array_get(data, i)) - ref[i]);
      if (!(d <= max_diff)) max_diff = d;
    }
    json_decref(root);
  }
  return max_diff <= 1e-4 * max_ref;
}

static _Atomic int g_error_samples;

/* Final status of a finished request: a 200 whose output mismatches is 0.
 * The first few error bodies are shown on stderr. */
static long checked_status(long status, body_t *b) {
  if (status == 200 && g_check && !response_ok(b)) {
    atomic_fetch_add(&g_mismatches, 1);
    status = 0;
  }
  if (status >= 400 && status != 503 && atomic_fetch_add(&g_error_samples, 1) < 3)
    fprintf(stderr, "packrat bench: HTTP %ld: %.*s\n", status, (int)(b->len < 300 ? b->len : 300),
            b->buf ? b->buf : "");
  b->len = 0;
  b->hlen[0] = 0;
  return status;
}

static CURL *make_easy(const request_t *rq) {
  CURL *c = curl_easy_init();
  curl_easy_setopt(c, CURLOPT_URL, rq->url);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, rq->body);
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)rq->len);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, rq->headers);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, body_write);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, header_write);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
  return c;
}

/* ---- closed loop ---- */

typedef struct {
  const request_t *rq;
  double until;
  result_t res;
} closed_t;

static void *closed_main(void *arg) {
  closed_t *w = arg;
  CURL *c = make_easy(w->rq);
  body_t body = {0};
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &body);
  while (pr_now() < w->until) {
    double t0 = pr_now();
    CURLcode cc = curl_easy_perform(c);
    long status = 0;
    if (cc == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    result_add(&w->res, (pr_now() - t0) * 1e3, checked_status(status, &body));
  }
  free(body.buf);
  curl_easy_cleanup(c);
  return NULL;
}

/* ---- open loop ---- */

typedef struct {
  double rate, seconds;
  result_t res;
} phase_t;

static void open_loop(const request_t *rq, phase_t *phases, int n_phases, result_t *all) {
  CURLM *multi = curl_multi_init();
  curl_multi_setopt(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, 1024L);
  unsigned long long seed = 0x9e3779b97f4a7c15ull;
  double start = pr_now(), next = start, phase_end = start;
  int phase = 0;
  phase_end = start + phases[0].seconds;
  int inflight = 0;
  typedef struct {
    double sched;
    int phase;
    body_t body;
  } tag_t;
  for (;;) {
    double now = pr_now();
    while (phase < n_phases && next <= now) {
      while (phase < n_phases && next >= phase_end) {
        phase++;
        if (phase < n_phases) phase_end += phases[phase].seconds;
      }
      if (phase >= n_phases) break;
      if (inflight < MAX_INFLIGHT) {
        CURL *c = make_easy(rq);
        tag_t *tag = calloc(1, sizeof *tag);
        tag->sched = next;
        tag->phase = phase;
        curl_easy_setopt(c, CURLOPT_PRIVATE, tag);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &tag->body);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, &tag->body);
        curl_multi_add_handle(multi, c);
        inflight++;
      } else {
        result_add(&phases[phase].res, 0, 0); /* client saturated: counted as an error */
      }
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      double u = ((double)(seed >> 11) + 1.0) / 9007199254740993.0;
      next += -log(u) / phases[phase].rate;
    }
    if (phase >= n_phases && inflight == 0) break;
    int running;
    curl_multi_perform(multi, &running);
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(multi, &left))) {
      if (msg->msg != CURLMSG_DONE) continue;
      CURL *c = msg->easy_handle;
      tag_t *tag;
      curl_easy_getinfo(c, CURLINFO_PRIVATE, (char **)&tag);
      long status = 0;
      if (msg->data.result == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
      double ms = (pr_now() - tag->sched) * 1e3;
      status = checked_status(status, &tag->body);
      result_add(&phases[tag->phase].res, ms, status);
      result_add(all, ms, status);
      free(tag->body.buf);
      free(tag);
      curl_multi_remove_handle(multi, c);
      curl_easy_cleanup(c);
      inflight--;
    }
    double wait = phase < n_phases ? next - pr_now() : 0.05;
    int ms = wait <= 0 ? 0 : wait > 0.05 ? 50 : (int)(wait * 1e3);
    curl_multi_poll(multi, NULL, 0, ms, NULL);
  }
  curl_multi_cleanup(multi);
}

/* packrat_reconfigurations_total from /metrics (summed), or -1. */
static double scrape_reconfigurations(const char *base) {
  char url[2048];
  snprintf(url, sizeof url, "%s/metrics", base);
  CURL *c = curl_easy_init();
  char *text = NULL;
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &text);
  CURLcode cc = curl_easy_perform(c);
  curl_easy_cleanup(c);
  double total = -1;
  for (char *p = text; cc == CURLE_OK && p && (p = strstr(p, "\npackrat_reconfigurations_total"));
       p++) {
    char *sp = strchr(p + 1, ' ');
    if (sp) total = (total < 0 ? 0 : total) + atof(sp + 1);
  }
  free(text);
  return total;
}

int pr_cli_bench(int argc, char **argv) {
  const char *url = NULL, *model = NULL, *input = NULL, *schedule = NULL, *expect = NULL;
  int concurrency = 0;
  double rate = 0, duration = 10;
  bool json = false, binary = true;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "--url") && val) {
      url = val, i++;
    } else if (!strcmp(a, "--model") && val) {
      model = val, i++;
    } else if (!strcmp(a, "--input") && val) {
      input = val, i++;
    } else if (!strcmp(a, "--expect") && val) {
      expect = val, i++;
    } else if (!strcmp(a, "--schedule") && val) {
      schedule = val, i++;
    } else if (!strcmp(a, "--concurrency")) {
      concurrency = (int)pr_cli_parse_long(a, val, 1, 1024), i++;
    } else if (!strcmp(a, "--rate") && val) {
      rate = atof(val), i++;
      if (!(rate > 0 && rate <= 1e6))
        return fprintf(stderr, "packrat bench: --rate must be in (0, 1e6]\n"), 2;
    } else if (!strcmp(a, "--duration") && val) {
      duration = atof(val), i++;
      if (!(duration > 0 && duration <= 86400))
        return fprintf(stderr, "packrat bench: --duration must be in (0, 86400]\n"), 2;
    } else if (!strcmp(a, "--json")) {
      json = true;
    } else if (!strcmp(a, "--json-data")) {
      binary = false;
    } else {
      fprintf(stderr, "packrat bench: unexpected argument '%s'\n", a);
      usage(stderr);
      return 2;
    }
  }
  if (!url || !model || (concurrency && (rate > 0 || schedule)) || (rate > 0 && schedule)) {
    fprintf(stderr,
            "packrat bench: give --url, --model and one of --concurrency, --rate, --schedule\n");
    return 2;
  }
  phase_t phases[MAX_PHASES];
  memset(phases, 0, sizeof phases);
  int n_phases = 0;
  if (schedule) {
    for (const char *p = schedule; *p;) {
      char *end;
      double r = strtod(p, &end);
      if (end == p || *end != ':' || !(r > 0) || n_phases == MAX_PHASES) goto bad_schedule;
      p = end + 1;
      double s = strtod(p, &end);
      if (end == p || !(s > 0)) goto bad_schedule;
      phases[n_phases].rate = r;
      phases[n_phases++].seconds = s;
      p = end;
      if (*p == ',')
        p++;
      else if (*p)
        goto bad_schedule;
    }
  } else if (rate > 0) {
    phases[0] = (phase_t){.rate = rate, .seconds = duration};
    n_phases = 1;
  } else if (!concurrency) {
    concurrency = 1;
  }
  if (expect) {
    char err[512];
    if (pr_engine_tensor_read_file(expect, &g_expect, NULL, err, sizeof err) ||
        g_expect.dtype != PR_DTYPE_FLOAT) {
      fprintf(stderr, "packrat bench: --expect: %s\n", err[0] ? err : "must be a FLOAT tensor");
      return 1;
    }
    g_check = true;
  }
  curl_global_init(CURL_GLOBAL_DEFAULT);
  char base[1024];
  snprintf(base, sizeof base, "%s", url);
  size_t bl = strlen(base);
  while (bl && base[bl - 1] == '/') base[--bl] = 0;
  request_t rq = {0};
  if (build_request(base, model, input, binary, &rq)) return 1;
  double reconf0 = scrape_reconfigurations(base);
  result_t all = {0};
  double t0 = pr_now();
  if (concurrency) {
    closed_t *w = calloc((size_t)concurrency, sizeof *w);
    pthread_t *th = calloc((size_t)concurrency, sizeof *th);
    for (int i = 0; i < concurrency; i++) {
      w[i].rq = &rq;
      w[i].until = t0 + duration;
      pthread_create(&th[i], NULL, closed_main, &w[i]);
    }
    for (int i = 0; i < concurrency; i++) {
      pthread_join(th[i], NULL);
      for (size_t k = 0; k < w[i].res.n; k++) result_add(&all, w[i].res.lat[k], 200);
      all.requests += w[i].res.requests - w[i].res.n;
      all.errors += w[i].res.errors;
      free(w[i].res.lat);
    }
    free(w);
    free(th);
  } else {
    open_loop(&rq, phases, n_phases, &all);
  }
  double elapsed = pr_now() - t0;
  double reconf1 = scrape_reconfigurations(base);
  json_t *o = result_json(&all, elapsed);
  json_object_set_new(o, "mode", json_string(concurrency ? "closed" : "open"));
  if (concurrency) json_object_set_new(o, "concurrency", json_integer(concurrency));
  if (reconf0 >= 0 && reconf1 >= 0)
    json_object_set_new(o, "reconfigurations", json_integer((json_int_t)(reconf1 - reconf0)));
  if (n_phases) {
    json_t *ph = json_array();
    for (int i = 0; i < n_phases; i++) {
      json_t *pj = result_json(&phases[i].res, phases[i].seconds);
      json_object_set_new(pj, "rate", json_real(phases[i].rate));
      json_array_append_new(ph, pj);
      printf(
          "phase %d (%.1f req/s for %.0f s): %llu requests, %llu errors, p50 %.1f ms, p99 %.1f "
          "ms\n",
          i, phases[i].rate, phases[i].seconds, (unsigned long long)phases[i].res.requests,
          (unsigned long long)phases[i].res.errors, json_real_value(json_object_get(pj, "p50_ms")),
          json_real_value(json_object_get(pj, "p99_ms")));
      free(phases[i].res.lat);
    }
    json_object_set_new(o, "phases", ph);
  }
  printf(
      "%llu requests in %.1f s: %llu errors, %.1f req/s; latency p50 %.1f ms, p90 %.1f ms, p99 "
      "%.1f ms, max %.1f ms\n",
      (unsigned long long)all.requests, elapsed, (unsigned long long)all.errors,
      json_real_value(json_object_get(o, "throughput_rps")),
      json_real_value(json_object_get(o, "p50_ms")), json_real_value(json_object_get(o, "p90_ms")),
      json_real_value(json_object_get(o, "p99_ms")), json_real_value(json_object_get(o, "max_ms")));
  if (all.errors)
    printf("errors by status: 2xx %llu, 3xx %llu, 4xx %llu, 5xx %llu, transport %llu\n",
           (unsigned long long)all.by_status[0], (unsigned long long)all.by_status[1],
           (unsigned long long)all.by_status[2], (unsigned long long)all.by_status[3],
           (unsigned long long)all.by_status[5]);
  json_t *codes = json_pack("{s:I, s:I, s:I, s:I}", "4xx", (json_int_t)all.by_status[2], "5xx",
                            (json_int_t)all.by_status[3], "transport", (json_int_t)all.by_status[5],
                            "2xx", (json_int_t)all.by_status[0]);
  json_object_set_new(o, "status_counts", codes);
  if (g_check) {
    json_object_set_new(o, "mismatches", json_integer((json_int_t)atomic_load(&g_mismatches)));
    printf("responses checked against %s: %llu mismatches\n", expect,
           (unsigned long long)atomic_load(&g_mismatches));
  }
  if (json) {
    char *s = json_dumps(o, JSON_COMPACT);
    printf("%s\n", s);
    free(s);
  }
  json_decref(o);
  free(all.lat);
  free(rq.body);
  curl_slist_free_all(rq.headers);
  pr_engine_tensor_free(&g_expect);
  curl_global_cleanup();
  return 0;
bad_schedule:
  fprintf(stderr, "packrat bench: --schedule wants RATE:SECONDS,... with positive numbers\n");
  return 2;
}
