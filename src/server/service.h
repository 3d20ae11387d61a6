/* What both front ends (HTTP in server.c, gRPC in grpc.c) do the same way:
 * the state they share (the model registry, tokens, the in-flight byte
 * bound, the limits) and the operations behind their routes and RPCs:
 * readiness, model lookup, the repository index, load and unload, the
 * statistics, and inference (decode, reserve, queue, answer). Each front
 * end only turns its wire format into these calls and their results back
 * into its own answers, so REST and gRPC cannot drift apart.
 *
 * Notes on the design:
 * - An infer request's tensors are counted against `max_inflight_bytes`
 *   (beside the request bodies the front ends count) from the decode until
 *   the request is released; decoding may take what is left of the bound.
 *   Its encoded answer is counted from the encoding until it is sent or
 *   its client is gone (pr__service_answer_hold): the bound is on every
 *   byte held for a client, whichever way it flows.
 * - Threads: every function may be called from any thread; the counters
 *   are atomics and the registry has its own locks (models.h). The
 *   scheduler's completion callback of an infer request runs on the thread
 *   that finished it (an instance's worker or the timeout reaper). */
#ifndef PR_SERVER_SERVICE_H
#define PR_SERVER_SERVICE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/auth.h"
#include "server/models.h"
#include "server/protocol.h"
#include "server/router.h"

typedef struct {
  pr_models_t *models;
  const pr_auth_t *auth; /* NULL: no tokens */
  /* the routes, one row per route (router.h, server.c's): HTTP matches
   * them, gRPC reads its RPCs' REST twins' access and flags */
  const pr_route_row_t *routes;
  const char *repository;
  /* readiness (pr__service_ready): every model ready (Triton's
   * --strict-readiness, the default) or the server up whatever its models */
  bool strict_readiness;
  int max_models;
  size_t max_body_bytes;     /* an infer request's body or message */
  size_t max_inflight_bytes; /* bodies, tensors and unsent answers held at once */
  _Atomic uint64_t inflight; /* bytes reserved now */
  /* of those, encoded infer answers not yet sent (a reader that does not
   * read holds them), and the answers refused for want of room */
  _Atomic uint64_t answer_bytes, answers_refused;
  _Atomic bool stopping; /* draining: health says NOT_SERVING */
} pr_service_t;

/* Counts n more bytes against the in-flight bound; false (nothing counted)
 * beyond it. pr__service_release gives them back. */
bool pr__service_reserve(pr_service_t *svc, size_t n);
void pr__service_release(pr_service_t *svc, size_t n);

/* Counts an encoded infer answer of n bytes against the in-flight bound
 * (and in answer_bytes) until pr__service_answer_gone(svc, n): once it is
 * sent, or its connection or call is gone. False beyond the bound: nothing
 * is counted but the refusal, and the caller answers 503 (UNAVAILABLE)
 * instead, so that answers nobody reads cannot hold more than the bound. */
bool pr__service_answer_hold(pr_service_t *svc, size_t n);
void pr__service_answer_gone(pr_service_t *svc, size_t n);

/* Ready: with strict_readiness, every known model (one whose load was
 * tried, a folder of the repository that is not a model's layout among
 * them) is ready or was unloaded on purpose; without, always (the front
 * ends answer only once started). */
bool pr__service_ready(pr_service_t *svc);

/* The ready model `name` (version: NULL or "" for the served one) with a
 * reference taken (pr__models_put), or NULL with *st (PR_ERR_NOT_FOUND;
 * PR_ERR_BUSY: loading; PR_ERR_MODEL_UNAVAILABLE: its load failed or it
 * was unloaded) and a message for the client in msg (msg_len bytes). */
pr_served_t *pr__service_model(pr_service_t *svc, const char *name, const char *version,
                               pr_status_t *st, char *msg, size_t msg_len);

/* A model version's name (pr_repo_entry_t.version). */
typedef char pr_version_name_t[32];
/* Copies of the ready versions of model `name` into out (at most max);
 * returns how many. */
int pr__service_versions(pr_service_t *svc, const char *name, pr_version_name_t *out, int max);

/* The server's protocol extensions (ServerMetadata, GET /v2). */
extern const char *const pr__service_extensions[];
extern const int pr__service_n_extensions;

/* One model of the repository index: its state is READY, LOADING or
 * UNAVAILABLE, with the reason it is not ready. */
typedef void (*pr_index_fn)(const char *name, const char *version, const char *state,
                            const char *reason, void *ctx);
/* Calls fn for each model of the repository (at most max_models + 64);
 * PR_ERR_IO when the repository cannot be read. */
pr_status_t pr__service_index(pr_service_t *svc, pr_index_fn fn, void *ctx);

/* Loads (or reloads) / unloads a model. Errors: PR_ERR_NOT_FOUND,
 * PR_ERR_BUSY (max_models), PR_ERR_INVALID (a model that cannot be read or
 * run: the repository's fault), others; a message in err. Slow: a load
 * profiles and prepares plans, an unload waits for the requests in flight. */
pr_status_t pr__service_load(pr_service_t *svc, const char *name, char *err, size_t err_len);
pr_status_t pr__service_unload(pr_service_t *svc, const char *name, char *err, size_t err_len);

/* ---- statistics (the Triton schema's figures, for JSON and protobuf) ---- */

typedef struct {
  uint64_t count, ns;
} pr_duration_t;

typedef struct {
  uint64_t last_inference_ms, inference_count, execution_count;
  pr_duration_t success, fail, queue, compute_input, compute_infer, compute_output;
} pr_model_stats_t;

void pr__service_stats(pr_served_t *m, pr_model_stats_t *out);
/* fn for every batch size that ran: executions (count), and their time
 * copying inputs in, running, copying outputs out. */
void pr__service_batch_stats(pr_served_t *m,
                             void (*fn)(int batch, pr_duration_t input, pr_duration_t infer,
                                        pr_duration_t output, void *ctx),
                             void *ctx);

/* ---- inference ---- */

/* Decodes a request of the wire format into r's input tensors and q (the
 * outputs asked for), taking at most max_bytes of tensors (0: any):
 * pr__proto_parse_infer's contract. */
typedef pr_status_t (*pr_infer_decode_fn)(const pr_proto_model_t *m, void *arg, size_t max_bytes,
                                          pr_request_t *r, pr_proto_infer_t *q, char *err,
                                          size_t err_len);

typedef struct {
  pr_service_t *svc;
  pr_served_t *model; /* the reference the caller handed over */
  pr_request_t *req;
  pr_proto_infer_t q;
  size_t reserved; /* its tensors' bytes, counted in svc->inflight */
  double t_parse;  /* when its decoding began */
  /* of a refused submit (PR_ERR_BUSY): seconds until a retry may be served
   * (0: no estimate) */
  double retry_after_s;
} pr_infer_t;

/* Decodes a request for the ready model m (the caller holds a reference),
 * counts its tensors against the in-flight bound and queues it; on_done(ctx)
 * runs once it is answered, failed or timed out (any thread; possibly before
 * this returns). On PR_OK, *x holds the request and m's reference (release
 * them with pr__infer_release and pr__models_put(x->model)); on error nothing
 * is held (the caller keeps its reference) and err says why: the decoder's
 * errors, PR_ERR_BUSY (bytes in flight, a full queue, a backlog longer
 * than the request's timeout: x->retry_after_s says when to retry),
 * PR_ERR_INVALID (a
 * priority beyond the model's levels), PR_ERR_NOMEM. The request takes the
 * decoded priority and timeout (q's). */
pr_status_t pr__infer_submit(pr_service_t *svc, pr_served_t *m, pr_infer_decode_fn decode,
                             void *arg, void (*on_done)(void *), void *ctx, pr_infer_t *x,
                             char *err, size_t err_len);

/* The answer of a done request: its status (with *msg, the scheduler's
 * message) or, when it ran, encode(x, arg)'s. The stages "resume" (done to
 * taken up) and "encode" are timed into the model's stats; *t_encoded is
 * when the encoding ended. */
pr_status_t pr__infer_answer(pr_infer_t *x, pr_status_t (*encode)(pr_infer_t *x, void *arg),
                             void *arg, const char **msg, double *t_encoded);

/* Frees the request (waiting for it if the scheduler still holds it) and
 * gives its bytes back; the model reference stays. No-op when none. */
void pr__infer_release(pr_infer_t *x, bool answered);

#endif
