/* The load generator of packrat bench (loadgen.h): the request, closed and
 * open loops on libcurl, response checks. All state is in pr_loadgen_t and
 * the loops' own structs: no globals. */
#include "cli/loadgen.h"

#include <assert.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "base/util.h"
#include "server/protocol.h"

#define MAX_INFLIGHT 4096

/* The class of an answer's status (0: no answer). */
static pr_loadgen_class_t status_class(long status) {
  static const pr_loadgen_class_t by_hundred[] = {PR_LOADGEN_2XX, PR_LOADGEN_3XX, PR_LOADGEN_4XX,
                                                  PR_LOADGEN_5XX};
  return status >= 200 && status < 600 ? by_hundred[status / 100 - 2] : PR_LOADGEN_TRANSPORT;
}

/* Appends one latency to r's sample; dropped when memory runs out (the
 * counts stay exact). */
static void add_latency(pr_loadgen_result_t *r, double ms) {
  if (r->n == r->cap) {
    size_t cap = r->cap ? r->cap * 2 : 1024;
    double *lat = realloc(r->lat, sizeof *lat * cap);
    if (!lat) return;
    r->lat = lat;
    r->cap = cap;
  }
  r->lat[r->n++] = ms;
}

void pr__loadgen_result_add(pr_loadgen_result_t *r, double ms, long status, bool ok) {
  pr_loadgen_class_t c = status_class(status);
  assert(!ok || c == PR_LOADGEN_2XX);
  r->requests++;
  r->by_class[c]++;
  if (ok) {
    add_latency(r, ms);
  } else {
    r->errors++;
    r->errors_by_class[c]++;
  }
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double pct(const pr_loadgen_result_t *r, double p) {
  if (!r->n) return 0;
  size_t i = (size_t)ceil(p * (double)r->n);
  return r->lat[i ? i - 1 : 0];
}

/* counts[] by class as {"2xx", "3xx", "4xx", "5xx", "transport"}. */
static json_t *class_counts_json(const uint64_t counts[PR_LOADGEN_N_CLASSES]) {
  static const char *const names[] = {"2xx", "3xx", "4xx", "5xx", "transport"};
  static_assert(sizeof names / sizeof *names == PR_LOADGEN_N_CLASSES, "a name per class");
  json_t *o = json_object();
  for (int c = 0; o && c < PR_LOADGEN_N_CLASSES; c++)
    json_object_set_new(o, names[c], json_integer((json_int_t)counts[c]));
  return o;
}

json_t *pr__loadgen_result_json(pr_loadgen_result_t *r, double seconds) {
  if (r->n) qsort(r->lat, r->n, sizeof *r->lat, cmp_double); /* a phase may send nothing */
  double sum = 0;
  for (size_t i = 0; i < r->n; i++) sum += r->lat[i];
  uint64_t successes = r->requests - r->errors;
  return json_pack("{s:I, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:o, s:o}", "requests",
                   (json_int_t)r->requests, "errors", (json_int_t)r->errors, "duration_s", seconds,
                   "throughput_rps", seconds > 0 ? (double)successes / seconds : 0.0, "p50_ms",
                   pct(r, 0.5), "p90_ms", pct(r, 0.9), "p99_ms", pct(r, 0.99), "max_ms",
                   r->n ? r->lat[r->n - 1] : 0.0, "mean_ms", r->n ? sum / (double)r->n : 0.0,
                   "status_counts", class_counts_json(r->by_class), "error_counts",
                   class_counts_json(r->errors_by_class));
}

/* ---- the request body ---- */

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

/* GET url into *text (malloc'd, NUL-terminated; NULL when empty); the HTTP
 * status into *status (0 when there was no answer). */
/* GET url (with `Authorization: <authorization>` unless it is "" or NULL). */
static CURLcode http_get(const char *url, const char *authorization, char **text, long *status) {
  *text = NULL;
  *status = 0;
  CURL *c = curl_easy_init();
  if (!c) return CURLE_FAILED_INIT;
  struct curl_slist *h = NULL;
  if (authorization && authorization[0]) {
    char line[700];
    snprintf(line, sizeof line, "Authorization: %s", authorization);
    h = curl_slist_append(NULL, line);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
  }
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, text);
  CURLcode cc = curl_easy_perform(c);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
  curl_easy_cleanup(c);
  curl_slist_free_all(h);
  return cc;
}

/* The model's metadata (GET /v2/models/MODEL) with an "inputs" array; NULL
 * after a message. */
static json_t *model_metadata(const char *base, const char *model, const char *authorization) {
  char url[2048];
  snprintf(url, sizeof url, "%s/v2/models/%s", base, model);
  char *meta;
  long status;
  CURLcode cc = http_get(url, authorization, &meta, &status);
  if (cc != CURLE_OK || status != 200 || !meta) {
    fprintf(stderr, "packrat bench: GET %s failed (%s, status %ld)\n", url,
            cc != CURLE_OK ? curl_easy_strerror(cc) : "HTTP", status);
    free(meta);
    return NULL;
  }
  json_t *m = json_loads(meta, 0, NULL);
  free(meta);
  if (!json_is_array(m ? json_object_get(m, "inputs") : NULL)) {
    fprintf(stderr, "packrat bench: model metadata without inputs\n");
    json_decref(m);
    return NULL;
  }
  return m;
}

/* t (its dtype set) gets the metadata's shape (symbolic dimensions as 1) and
 * data: FP32 random in [-1, 1), other types zero. */
static void generated_input(pr_tensor_t *t, json_t *shape, unsigned *seed) {
  t->rank = (int)json_array_size(shape);
  for (int d = 0; d < t->rank; d++) {
    json_int_t v = json_integer_value(json_array_get(shape, (size_t)d));
    t->dims[d] = v < 0 ? 1 : v;
  }
  t->data = calloc((size_t)pr_tensor_numel(t) + 1, pr_dtype_size(t->dtype));
  if (t->dtype == PR_DTYPE_FLOAT)
    for (int64_t e = 0; e < pr_tensor_numel(t); e++) {
      *seed = *seed * 1103515245u + 12345u;
      ((float *)t->data)[e] = (float)((*seed >> 8) % 2000) / 1000.f - 1.f;
    }
}

/* t's elements as a JSON array of numbers. */
static json_t *tensor_data_json(const pr_tensor_t *t) {
  json_t *data = json_array();
  for (int64_t e = 0; e < pr_tensor_numel(t); e++) {
    if (t->dtype == PR_DTYPE_FLOAT)
      json_array_append_new(data, json_real(((float *)t->data)[e]));
    else if (t->dtype == PR_DTYPE_INT64)
      json_array_append_new(data, json_integer(((int64_t *)t->data)[e]));
    else if (t->dtype == PR_DTYPE_INT32)
      json_array_append_new(data, json_integer(((int32_t *)t->data)[e]));
    else
      json_array_append_new(data, json_integer(((uint8_t *)t->data)[e]));
  }
  return data;
}

/* The request body being built: the JSON header and the binary tail. */
typedef struct {
  json_t *req, *inputs;
  bool binary;
  char *bin;
  size_t bin_len;
} body_build_t;

/* Appends input `name` holding t to the body: its data inline, or its bytes
 * to the binary tail. */
static void add_input(body_build_t *b, const char *name, const pr_tensor_t *t) {
  json_t *js = json_array();
  for (int d = 0; d < t->rank; d++) json_array_append_new(js, json_integer(t->dims[d]));
  json_t *ji = json_pack("{s:s, s:s, s:o}", "name", name, "datatype", pr__proto_datatype(t->dtype),
                         "shape", js);
  size_t nbytes = (size_t)pr_tensor_numel(t) * pr_dtype_size(t->dtype);
  if (b->binary) {
    json_object_set_new(ji, "parameters",
                        json_pack("{s:I}", "binary_data_size", (json_int_t)nbytes));
    b->bin = realloc(b->bin, b->bin_len + nbytes + 1);
    memcpy(b->bin + b->bin_len, t->data, nbytes);
    b->bin_len += nbytes;
  } else {
    json_object_set_new(ji, "data", tensor_data_json(t));
  }
  json_array_append_new(b->inputs, ji);
}

/* Every input of metadata m into b: the first from `given` when given, the
 * others generated. -1 after a message. */
static int add_inputs(body_build_t *b, json_t *m, const pr_tensor_t *given) {
  size_t i;
  json_t *in;
  unsigned seed = 7;
  json_array_foreach(json_object_get(m, "inputs"), i, in) {
    const char *dt = json_string_value(json_object_get(in, "datatype"));
    pr_tensor_t t = {.dtype = pr__proto_dtype(dt ? dt : "")};
    json_t *shape = json_object_get(in, "shape");
    if (!pr_dtype_size(t.dtype) || !json_is_array(shape)) {
      fprintf(stderr, "packrat bench: input %zu has an unsupported datatype\n", i);
      return -1;
    }
    bool use_given = given && i == 0;
    if (use_given)
      t = *given;
    else
      generated_input(&t, shape, &seed);
    add_input(b, json_string_value(json_object_get(in, "name")), &t);
    if (!use_given) free(t.data);
  }
  return 0;
}

/* rq's body (JSON header, then the binary tail), URL and headers. */
static void finish_request(const char *base, const char *model, const body_build_t *b,
                           pr_loadgen_request_t *rq) {
  char *js = json_dumps(b->req, JSON_COMPACT);
  rq->json_len = strlen(js);
  rq->len = rq->json_len + b->bin_len;
  rq->body = malloc(rq->len + 1);
  memcpy(rq->body, js, rq->json_len);
  if (b->bin_len) memcpy(rq->body + rq->json_len, b->bin, b->bin_len);
  free(js);
  snprintf(rq->url, sizeof rq->url, "%s/v2/models/%s/infer", base, model);
  char h[64];
  rq->headers = curl_slist_append(NULL, b->binary ? "Content-Type: application/octet-stream"
                                                  : "Content-Type: application/json");
  if (b->binary) {
    snprintf(h, sizeof h, "Inference-Header-Content-Length: %zu", rq->json_len);
    rq->headers = curl_slist_append(rq->headers, h);
  }
  rq->headers = curl_slist_append(rq->headers, "Expect:");
  if (rq->authorization[0]) {
    char auth[sizeof rq->authorization + 32];
    snprintf(auth, sizeof auth, "Authorization: %s", rq->authorization);
    rq->headers = curl_slist_append(rq->headers, auth);
  }
}

int pr__loadgen_set_token(pr_loadgen_request_t *rq, const char *path) {
  void *text;
  size_t len;
  if (pr__read_file(path, &text, &len, 513)) {
    fprintf(stderr, "packrat bench: cannot read the token file %s (at most 512 bytes)\n", path);
    return -1;
  }
  const char *t = text; /* not NUL-terminated */
  size_t n = 0;
  while (n < len && t[n] != '\r' && t[n] != '\n') n++;
  bool printable = n > 0;
  for (size_t i = 0; i < n; i++) printable &= t[i] > ' ' && t[i] < 127;
  if (printable) snprintf(rq->authorization, sizeof rq->authorization, "Bearer %.*s", (int)n, t);
  free(text);
  if (!printable) {
    fprintf(stderr, "packrat bench: the token file %s holds no token on its first line\n", path);
    return -1;
  }
  return 0;
}

int pr__loadgen_request_build(const char *base, const char *model, const char *input_file,
                              bool binary, pr_loadgen_request_t *rq) {
  json_t *m = model_metadata(base, model, rq->authorization);
  if (!m) return -1;
  pr_tensor_t given = {0};
  char err[512];
  if (input_file && pr_engine_tensor_read_file(input_file, &given, NULL, err, sizeof err)) {
    fprintf(stderr, "packrat bench: %s\n", err);
    json_decref(m);
    return -1;
  }
  body_build_t b = {.req = json_object(), .inputs = json_array(), .binary = binary};
  json_object_set_new(b.req, "inputs", b.inputs);
  int rc = add_inputs(&b, m, input_file ? &given : NULL);
  if (input_file) pr_engine_tensor_free(&given);
  if (rc == 0) {
    if (binary)
      json_object_set_new(b.req, "parameters", json_pack("{s:b}", "binary_data_output", 1));
    finish_request(base, model, &b, rq);
  }
  json_decref(b.req);
  json_decref(m);
  free(b.bin);
  return rc;
}

typedef struct {
  char *buf;
  size_t len, cap;
  char hlen[32];      /* Inference-Header-Content-Length of the response */
  double retry_after; /* its Retry-After in seconds (0: none) */
  pr_loadgen_t *lg;
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
  static const char retry[] = "retry-after:";
  if (len > sizeof retry && !strncasecmp(p, retry, sizeof retry - 1)) {
    char v[32];
    size_t vl = len - (sizeof retry - 1);
    if (vl >= sizeof v) vl = sizeof v - 1;
    memcpy(v, p + sizeof retry - 1, vl);
    v[vl] = 0;
    double secs = strtod(v, NULL); /* delay-seconds; an HTTP date reads as 0: 1 s */
    b->retry_after = secs > 0 && secs < 3600 ? secs : 1;
  }
  return len;
}

/* True when the response's first output matches the expected tensor. */
static bool response_ok(const body_t *b) {
  const pr_tensor_t *expect = &b->lg->expect;
  size_t jl = b->hlen[0] ? (size_t)atoll(b->hlen) : b->len;
  if (jl > b->len) return false;
  size_t n = (size_t)pr_tensor_numel(expect);
  const float *ref = expect->data;
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

/* Whether a finished request with this status (0: no answer) succeeded: a
 * 200 whose first output, when checked, matches (a mismatch is counted in
 * lg->mismatches). The first few error bodies are shown on stderr. */
static bool answer_ok(long status, body_t *b) {
  bool ok = status == 200;
  if (ok && b->lg->check && !response_ok(b)) {
    atomic_fetch_add(&b->lg->mismatches, 1);
    ok = false;
  }
  if (status >= 400 && status != 503 && atomic_fetch_add(&b->lg->error_samples, 1) < 3)
    fprintf(stderr, "packrat bench: HTTP %ld: %.*s\n", status, (int)(b->len < 300 ? b->len : 300),
            b->buf ? b->buf : "");
  b->len = 0;
  b->hlen[0] = 0;
  return ok;
}

static CURL *make_easy(const pr_loadgen_request_t *rq) {
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

/* One request on c through the multi handle m, polling its socket
 * without ever sleeping (--busy-poll): the thread stays on its CPU, so
 * the answer's arrival wakes no one. */
static CURLcode perform_polling(CURLM *m, CURL *c) {
  CURLcode cc = CURLE_FAILED_INIT;
  if (curl_multi_add_handle(m, c) != CURLM_OK) return cc;
  int running = 1;
  while (running && curl_multi_perform(m, &running) == CURLM_OK) continue;
  CURLMsg *msg;
  int left;
  while ((msg = curl_multi_info_read(m, &left)))
    if (msg->msg == CURLMSG_DONE && msg->easy_handle == c) cc = msg->data.result;
  curl_multi_remove_handle(m, c);
  return cc;
}

static void *closed_main(void *arg) {
  pr_loadgen_worker_t *w = arg;
  pr_loadgen_t *lg = w->ctx;
  CURL *c = make_easy(&lg->rq);
  CURLM *m = lg->busy_poll ? curl_multi_init() : NULL;
  body_t body = {.lg = lg};
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &body);
  while (pr__now() < w->until) {
    double t0 = pr__now();
    body.retry_after = 0;
    CURLcode cc = m ? perform_polling(m, c) : curl_easy_perform(c);
    long status = 0;
    if (cc == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    pr__loadgen_result_add(&w->res, (pr__now() - t0) * 1e3, status, answer_ok(status, &body));
    /* a 503 says when to come back: a client that resends at once only
     * adds refusals to the server's load */
    if (status == 503) {
      double wait = body.retry_after > 0 ? body.retry_after : 1, left = w->until - pr__now();
      if (wait > left) wait = left;
      if (wait > 0) nanosleep(&(struct timespec){(time_t)wait, (long)(fmod(wait, 1) * 1e9)}, NULL);
      atomic_fetch_add(&lg->backoffs, 1);
    }
  }
  free(body.buf);
  curl_easy_cleanup(c);
  if (m) curl_multi_cleanup(m);
  return NULL;
}

void pr__loadgen_result_merge(pr_loadgen_result_t *dst, pr_loadgen_result_t *src) {
  for (size_t k = 0; k < src->n; k++) add_latency(dst, src->lat[k]);
  dst->requests += src->requests;
  dst->errors += src->errors;
  for (int c = 0; c < PR_LOADGEN_N_CLASSES; c++) {
    dst->by_class[c] += src->by_class[c];
    dst->errors_by_class[c] += src->errors_by_class[c];
  }
  free(src->lat);
  src->lat = NULL;
  src->n = src->cap = 0;
}

void pr__loadgen_threads(int n, void *(*fn)(void *), void *ctx, double until,
                         pr_loadgen_result_t *all) {
  pr_loadgen_worker_t *w = calloc((size_t)n, sizeof *w);
  pthread_t *th = calloc((size_t)n, sizeof *th);
  int started = 0;
  for (int i = 0; w && th && i < n; i++) {
    w[i] = (pr_loadgen_worker_t){.ctx = ctx, .until = until};
    if (pthread_create(&th[i], NULL, fn, &w[i])) break;
    started++;
  }
  for (int i = 0; i < started; i++) {
    pthread_join(th[i], NULL);
    pr__loadgen_result_merge(all, &w[i].res);
  }
  free(w);
  free(th);
}

void pr__loadgen_closed(pr_loadgen_t *lg, int concurrency, double until, pr_loadgen_result_t *all) {
  pr__loadgen_threads(concurrency, closed_main, lg, until, all);
}

/* ---- open loop ---- */

/* An exponential gap of mean 1 from the generator *seed (fixed at the start
 * of a run: every run of a schedule sends at the same times). */
static double exp_gap(unsigned long long *seed) {
  *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
  double u = ((double)(*seed >> 11) + 1.0) / 9007199254740993.0;
  return -log(u);
}

void pr__loadgen_open(pr_loadgen_t *lg, pr_loadgen_phase_t *phases, int n_phases,
                      pr_loadgen_result_t *all) {
  CURLM *multi = curl_multi_init();
  curl_multi_setopt(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, 1024L);
  unsigned long long seed = 0x9e3779b97f4a7c15ull;
  double start = pr__now(), next = start, phase_end = start;
  int phase = 0;
  phase_end = start + phases[0].seconds;
  int inflight = 0;
  typedef struct {
    double sched;
    int phase;
    body_t body;
  } tag_t;
  next += exp_gap(&seed) / phases[0].rate;
  for (;;) {
    double now = pr__now();
    while (phase < n_phases && (next <= now || phase_end <= now)) {
      if (next >= phase_end) {
        /* a gap drawn at this phase's rate ran past its end: the next phase
         * draws its first arrival from its own start at its own rate
         * (Poisson arrivals forget), so a slow phase cannot swallow the
         * start of a fast one (0.1 req/s before 40 req/s lost seconds) */
        next = phase_end;
        if (++phase < n_phases) {
          phase_end += phases[phase].seconds;
          next += exp_gap(&seed) / phases[phase].rate;
        }
        continue;
      }
      if (inflight < MAX_INFLIGHT) {
        CURL *c = make_easy(&lg->rq);
        tag_t *tag = calloc(1, sizeof *tag);
        tag->body.lg = lg;
        tag->sched = next;
        tag->phase = phase;
        curl_easy_setopt(c, CURLOPT_PRIVATE, tag);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &tag->body);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, &tag->body);
        curl_multi_add_handle(multi, c);
        inflight++;
      } else { /* client saturated: not sent, an error of the phase and of the whole run */
        pr__loadgen_result_add(&phases[phase].res, 0, 0, false);
        pr__loadgen_result_add(all, 0, 0, false);
      }
      next += exp_gap(&seed) / phases[phase].rate;
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
      double ms = (pr__now() - tag->sched) * 1e3;
      bool ok = answer_ok(status, &tag->body);
      pr__loadgen_result_add(&phases[tag->phase].res, ms, status, ok);
      pr__loadgen_result_add(all, ms, status, ok);
      free(tag->body.buf);
      free(tag);
      curl_multi_remove_handle(multi, c);
      curl_easy_cleanup(c);
      inflight--;
    }
    double wait = phase < n_phases ? (next < phase_end ? next : phase_end) - pr__now() : 0.05;
    int ms = wait <= 0 ? 0 : wait > 0.05 ? 50 : (int)(wait * 1e3);
    curl_multi_poll(multi, NULL, 0, ms, NULL);
  }
  curl_multi_cleanup(multi);
}

/* packrat_reconfigurations_total from /metrics (summed), or -1. */
double pr__loadgen_scrape_reconfigurations(const char *base) {
  char url[2048];
  snprintf(url, sizeof url, "%s/metrics", base);
  char *text;
  long status;
  CURLcode cc = http_get(url, NULL, &text, &status);
  double total = -1;
  for (char *p = text; cc == CURLE_OK && p && (p = strstr(p, "\npackrat_reconfigurations_total"));
       p++) {
    char *sp = strchr(p + 1, ' ');
    if (sp) total = (total < 0 ? 0 : total) + atof(sp + 1);
  }
  free(text);
  return total;
}

void pr__loadgen_free(pr_loadgen_t *lg) {
  free(lg->rq.body);
  curl_slist_free_all(lg->rq.headers);
  pr_engine_tensor_free(&lg->expect);
}
