/* The gRPC front end: the KServe v2 service `inference.GRPCInferenceService`
 * (with Triton's repository, statistics and configuration RPCs) and the
 * standard health service `grpc.health.v1.Health/Check`, on gRPC's C core
 * (Debian libgrpc-dev) with protobuf-c messages. It shares everything but
 * the wire with the HTTP front end (service.h): the models, the scheduler
 * and its queue, the byte bounds, the tokens, the statistics.
 *
 * Notes on the design:
 * - One completion queue, served by `threads` threads; calls are requested
 *   generically (grpc_server_request_call) and dispatched by method path
 *   through a table. A call is a small state machine driven by its tags:
 *   accepted -> message received -> answered -> closed. No handler blocks
 *   a queue thread: ModelInfer queues its request and returns; the
 *   scheduler's completion callback (pr_request_t.on_done, on the worker
 *   that ran it) packs the answer and starts the send; repository load and
 *   unload run on a thread of their own (at most 32 at once).
 * - Messages are bounded by the body limit (max_body_bytes: gRPC refuses
 *   a larger one with RESOURCE_EXHAUSTED before it is read; RPCs other
 *   than ModelInfer take 1 MiB), their bytes counted against the in-flight
 *   bound; calls open at once are bounded by max_calls.
 * - Answers: a ModelInfer answer counts against the in-flight bound from
 *   its encoding until gRPC has sent it (HTTP/2 flow control holds a send
 *   while the client does not read); one that does not fit is answered
 *   UNAVAILABLE instead. A stream's unsent answers also count in its
 *   stream_max_bytes, so a stream whose client does not read stops being
 *   read. A send still waiting after answer_timeout_s cancels its call
 *   (or stream).
 * - Tokens come in the `authorization` metadata ("Bearer TOKEN"), checked
 *   against each RPC's class (router.c's pr_route_access of its REST twin)
 *   before the message is read. TLS and mutual TLS come from the same PEM
 *   files as HTTPS; with a client CA the handshake requires and verifies a
 *   client certificate.
 * - Statuses become gRPC codes in pr__proto_grpc_status (protocol.c) only.
 * - Draining: pr__grpc_shutdown stops accepting calls (new ones fail at
 *   once), accepted ones are answered; pr__grpc_stop waits for them within
 *   its bound, then cancels what is left.
 * - Threads and locks: `lock` guards the shutdown flags (pr__grpc_stop
 *   polls them); a call's reference count (atomic) frees it once its last
 *   tag and its handler are done. Counters are atomics. */
#ifndef PR_SERVER_GRPC_H
#define PR_SERVER_GRPC_H

#include <stdbool.h>
#include <stdint.h>

#include "server/service.h"

/* --grpc-stream-max-pending's default */
#define PR_GRPC_STREAM_MAX_PENDING 64

typedef struct {
  const char *host; /* IPv4 or IPv6 address */
  int port;         /* 0 picks a free one */
  int threads;      /* completion-queue threads (>= 1) */
  int max_calls;    /* calls open at once; beyond: RESOURCE_EXHAUSTED */
  /* a ModelStreamInfer stream's requests received and not yet answered
   * (sent), and their bytes, at most: beyond, the stream reads no more
   * until answers go out (a client that does not read its answers stops
   * being read; HTTP/2 flow control then holds it) */
  int stream_max_pending;  /* >= 1 (PR_GRPC_STREAM_MAX_PENDING by default) */
  size_t stream_max_bytes; /* their messages and their answers not yet sent */
  /* an answer not sent within this long (its client does not read it)
   * cancels its call, or its stream, freeing what they hold (0: never) */
  double answer_timeout_s;
  /* PEM text (NULL cert: plain text); client_ca: mutual TLS */
  const char *tls_cert, *tls_key, *tls_client_ca;
} pr_grpc_config_t;

typedef struct pr_grpc pr_grpc_t;

/* Binds cfg's address for serving svc over gRPC (connections wait until
 * pr__grpc_start). PR_ERR_IO when the address cannot be bound (or the TLS
 * files do not fit), PR_ERR_NOMEM; a message in err. */
pr_status_t pr__grpc_open(pr_service_t *svc, const pr_grpc_config_t *cfg, pr_grpc_t **out,
                          char *err, size_t err_len);
/* Starts serving on the address g bound. PR_ERR_NOMEM (no thread could
 * start) with a message in err: then only pr__grpc_stop is left to call. */
pr_status_t pr__grpc_start(pr_grpc_t *g, char *err, size_t err_len);
/* The port bound. */
int pr__grpc_port(const pr_grpc_t *g);
/* For /metrics: calls received, calls (and stream requests) answered with
 * an error, ModelStreamInfer streams open now and the requests they
 * carried (all 0 for NULL). */
typedef struct {
  uint64_t calls, errors, streams, stream_requests;
} pr_grpc_counts_t;
pr_grpc_counts_t pr__grpc_counts(const pr_grpc_t *g);
/* Stops accepting calls; the accepted ones go on (NULL: no-op). */
void pr__grpc_shutdown(pr_grpc_t *g);
/* Waits until every accepted call is answered or timeout_s passes (then
 * cancels them and waits for their handlers), and frees. Returns false,
 * freeing nothing, when a handler still runs after that (a model stuck in
 * a kernel: the process is exiting). NULL: true. */
bool pr__grpc_stop(pr_grpc_t *g, double timeout_s);

#endif
