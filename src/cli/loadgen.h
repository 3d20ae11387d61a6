/* The load generator behind packrat bench.
 *
 * Closed loop (pr__loadgen_closed): C threads, each sends its next request when
 * the previous one is answered. Open loop (pr__loadgen_open): Poisson arrivals
 * at each phase's rate from one thread driving libcurl's multi interface;
 * latency is measured from each request's scheduled arrival, so a slow
 * server cannot hide queueing by slowing the client down.
 *
 * Threads: the closed loop's threads share only the pr_loadgen_t, whose
 * request is read-only once built and whose counters are atomic; each keeps
 * its own result, merged after the join. */
#ifndef PR_CLI_LOADGEN_H
#define PR_CLI_LOADGEN_H

#include <curl/curl.h>
#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "packrat/engine.h"

/* The classes a request is counted in: its answer's HTTP status class, or
 * transport when there was no answer (connection refused or reset, timed
 * out, not sent because the open loop had too many in flight) or one whose
 * status is outside 200..599. */
typedef enum {
  PR_LOADGEN_2XX,
  PR_LOADGEN_3XX,
  PR_LOADGEN_4XX,
  PR_LOADGEN_5XX,
  PR_LOADGEN_TRANSPORT,
  PR_LOADGEN_N_CLASSES
} pr_loadgen_class_t;

/* Invariants (pr__loadgen_result_add keeps them): every request is in
 * exactly one class, so by_class sums to requests; every error is in
 * exactly one class, so errors_by_class sums to errors; the successes are
 * requests - errors, all 2xx. A 2xx error is an answer that was not a
 * success: a 200 whose output mismatched, or a 2xx other than 200. */
typedef struct {
  double *lat; /* ms of successful requests (a sample: n may fall short when memory does) */
  size_t n, cap;
  uint64_t requests, errors;
  uint64_t by_class[PR_LOADGEN_N_CLASSES];
  uint64_t errors_by_class[PR_LOADGEN_N_CLASSES];
} pr_loadgen_result_t;

typedef struct {
  char url[2048];
  char *body;
  size_t len, json_len;
  struct curl_slist *headers;
  char authorization[600]; /* "Bearer TOKEN" (pr__loadgen_set_token), "" for none */
} pr_loadgen_request_t;

typedef struct {
  double rate, seconds;
  pr_loadgen_result_t res;
} pr_loadgen_phase_t;

/* One load run: the request sent, the expected first output (when check),
 * and what the responses showed. */
typedef struct {
  pr_loadgen_request_t rq;
  pr_tensor_t expect;
  bool check;
  bool busy_poll;              /* closed loop: each thread polls its socket, never sleeps */
  _Atomic uint64_t mismatches; /* 200s whose output differed from expect */
  _Atomic int error_samples;   /* error bodies shown on stderr (the first 3) */
  _Atomic uint64_t backoffs;   /* closed loop: 503s waited out (their Retry-After) */
} pr_loadgen_t;

/* Builds the request for model at base (http://host:port) from the model's
 * metadata and input_file (NULL: zeros), JSON or binary. 0, or 1 after a
 * message on stderr. */
int pr__loadgen_request_build(const char *base, const char *model, const char *input_file,
                              bool binary, pr_loadgen_request_t *rq);

/* Sends `Authorization: Bearer <token>` (REST, the metadata GET included)
 * or the same `authorization` metadata (gRPC) with every request: the
 * token is the first line of path (at most 512 bytes). Call before
 * pr__loadgen_request_build. 0, or -1 after a message on stderr. */
int pr__loadgen_set_token(pr_loadgen_request_t *rq, const char *path);

/* Counts one request: status is its answer's HTTP status (0: none), ok
 * whether it succeeded (only a 2xx can: a 200, its output as expected). */
void pr__loadgen_result_add(pr_loadgen_result_t *r, double ms, long status, bool ok);
/* {requests, errors, duration_s, throughput_rps, p50/p90/p99/max/mean_ms,
 * status_counts, error_counts} (sorts r); the counts by class are objects
 * {"2xx", "3xx", "4xx", "5xx", "transport"}. */
json_t *pr__loadgen_result_json(pr_loadgen_result_t *r, double seconds);

/* Adds src's latencies and counts to dst, and frees src's latencies. */
void pr__loadgen_result_merge(pr_loadgen_result_t *dst, pr_loadgen_result_t *src);

/* One thread of a closed loop: ctx is what every thread shares, res its
 * own result. */
typedef struct {
  void *ctx;
  double until;
  pr_loadgen_result_t res;
} pr_loadgen_worker_t;

/* Runs n threads of fn, each on its own pr_loadgen_worker_t (ctx shared,
 * until the monotonic end), joins them and merges their results into all.
 * The closed loops of both protocols run on it. */
void pr__loadgen_threads(int n, void *(*fn)(void *), void *ctx, double until,
                         pr_loadgen_result_t *all);

/* Closed loop with `concurrency` threads until the monotonic time `until`
 * (lg->busy_poll: each spins on its socket instead of sleeping in poll). */
void pr__loadgen_closed(pr_loadgen_t *lg, int concurrency, double until, pr_loadgen_result_t *all);
/* Open loop through the phases in order; each phase's result and all. */
void pr__loadgen_open(pr_loadgen_t *lg, pr_loadgen_phase_t *phases, int n_phases,
                      pr_loadgen_result_t *all);

/* packrat_reconfigurations_total from base's /metrics (summed), or -1. */
double pr__loadgen_scrape_reconfigurations(const char *base);

/* The same request over gRPC (loadgen_grpc.c): a packed KServe v2
 * ModelInferRequest with raw_input_contents made from the binary REST
 * request rq, sent to address (HOST:PORT, plain text). */
typedef struct {
  char address[256];
  char authorization[600]; /* rq's, sent as `authorization` metadata ("" none) */
  uint8_t *msg;
  size_t len;
} pr_loadgen_grpc_t;

/* 0, or -1 after a message on stderr. rq must be the binary request. */
int pr__loadgen_grpc_build(const pr_loadgen_request_t *rq, const char *model, const char *address,
                           pr_loadgen_grpc_t *g);
/* Closed loop over gRPC: `concurrency` threads on one channel, each one
 * call at a time, until `until`. An answer counts when its status is OK and
 * it decodes with outputs (non-OK statuses count as 5xx, none as transport). */
void pr__loadgen_grpc_closed(const pr_loadgen_grpc_t *g, int concurrency, double until,
                             pr_loadgen_result_t *all);
void pr__loadgen_grpc_free(pr_loadgen_grpc_t *g);

/* Frees the request and the expected tensor. */
void pr__loadgen_free(pr_loadgen_t *lg);

#endif
