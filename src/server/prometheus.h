/* Prometheus text exposition (format 0.0.4) of the served models' counters,
 * histograms and plans, and the server's HTTP counters. */
#ifndef PR_SERVER_PROMETHEUS_H
#define PR_SERVER_PROMETHEUS_H

#include <stdint.h>
#include <stdio.h>

#include "server/grpc.h"
#include "server/models.h"

typedef struct {
  uint64_t http_requests, http_errors, http_refused; /* refused: over a limit, from the headers */
  pr_grpc_counts_t grpc;
  uint64_t inflight_bytes, inflight_limit;
  uint64_t answer_bytes, answers_refused; /* unsent infer answers (in inflight_bytes) */
  int connections, connections_limit;     /* beyond the limit libmicrohttpd refuses (and logs) */
  int models_limit;
} pr_prom_server_t;

/* Writes every metric family to f. Takes a reference on each ready model
 * while writing, so an unload waits. */
void pr__prom_write(pr_models_t *ms, const pr_prom_server_t *srv, FILE *f);

#endif
