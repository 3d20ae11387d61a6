/* Internal to the gRPC front end: a call as the transport (grpc.c) and the
 * RPC handlers (grpc_rpc.c) share it. See grpc.c for a call's life. */
#ifndef PR_SERVER_GRPC_CALL_H
#define PR_SERVER_GRPC_CALL_H

#include <assert.h>
#include <grpc/grpc.h>
#include <protobuf-c/protobuf-c.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "server/grpc.h"
#include "server/router.h"

typedef struct pr_grpc_call pr_grpc_call_t;

/* A completion-queue tag: which call, which step. */
typedef struct {
  pr_grpc_call_t *call;
  int kind;
} pr_grpc_tag_t;

/* One RPC: its method path, the REST route it mirrors (its access class
 * and body limit), the request message it takes, and its handler. The
 * handler answers with pr__grpc_reply* exactly once, now or later from
 * another thread (holding a reference to the call until it has). */
typedef struct {
  const char *path;
  pr_route_id_t route;
  const ProtobufCMessageDescriptor *request;
  void (*run)(pr_grpc_call_t *c, ProtobufCMessage *req);
  /* a stream of requests (ModelStreamInfer): the transport runs each
   * message as a call of `each` (NULL run) */
  const char *each;
} pr_grpc_rpc_t;

typedef struct pr_grpc_stream pr_grpc_stream_t;

struct pr_grpc_call {
  pr_grpc_t *g;
  pr_service_t *svc;
  grpc_call *call; /* NULL until the server gives one */
  grpc_call_details details;
  grpc_metadata_array meta;
  grpc_byte_buffer *recv, *send;
  grpc_slice status_msg;
  grpc_metadata pushback; /* UNAVAILABLE's grpc-retry-pushback-ms (a value slice once set) */
  int cancelled;
  bool replied;
  bool closed; /* the call is over (TAG_CLOSE), under g's lock */
  const pr_grpc_rpc_t *rpc;
  pr_grpc_tag_t t_new, t_recv, t_send, t_close, t_status;
  /* a stream call's state (grpc.c), or, for one of its messages, the
   * stream call it answers on (a reference held) and the bytes it holds */
  pr_grpc_stream_t *stream;
  pr_grpc_call_t *parent;
  size_t held;
  _Atomic int refs;
  /* ModelInfer: the request in the scheduler, and how to answer it */
  pr_infer_t inf;
  bool raw;
  /* cancellation (grpc.c): under inf_lock, whether inf's request is in
   * the scheduler (live: submitted, not done), done (its answer begun),
   * and the client gone (the call cancelled, its deadline passed, or its
   * stream's); a stream's message is listed in its stream while live */
  pthread_mutex_t inf_lock;
  bool inf_live, inf_over, gone, listed;
  pr_grpc_call_t *sib_prev, *sib_next;
  /* an infer answer's bytes held until sent (pr__service_answer_hold); a
   * call whose answer is being sent is in g's list of sends, under g's
   * lock, since send_since (pr__now()), for the answer timeout */
  size_t answer_held;
  double send_since;
  bool in_sends, send_cancelled;
  pr_grpc_call_t *send_prev, *send_next;
  /* repository load/unload: the model's name, copied for the thread */
  char model[256];
};

void pr__grpc_call_ref(pr_grpc_call_t *c);
void pr__grpc_call_unref(pr_grpc_call_t *c);

/* Answers c: st and msg (any bytes: sanitized) as the gRPC status; with
 * PR_OK, body (malloc'd, taken, may be NULL for an empty message). */
void pr__grpc_reply(pr_grpc_call_t *c, pr_status_t st, const char *msg, uint8_t *body, size_t len);
/* Answers c with the packed message m (status OK). */
void pr__grpc_reply_message(pr_grpc_call_t *c, const ProtobufCMessage *m);

/* ModelInfer's request in the scheduler: pr__grpc_infer_live after its
 * submit succeeded (the request may be cancelled from then on: at once
 * when the client went away meanwhile), pr__grpc_infer_over first in its
 * completion callback (it no longer can). */
void pr__grpc_infer_live(pr_grpc_call_t *c);
void pr__grpc_infer_over(pr_grpc_call_t *c);

/* The transport's bind (grpc.c), which pr__grpc_open (grpc_rpc.c) calls
 * with its table of RPCs: a call of a method path not in rpcs[0..n_rpcs)
 * is answered UNIMPLEMENTED. The handlers call the transport (above),
 * never the other way but through this table. */
pr_status_t pr_grpc__open(pr_service_t *svc, const pr_grpc_config_t *cfg, const pr_grpc_rpc_t *rpcs,
                          int n_rpcs, pr_grpc_t **out, char *err, size_t err_len);

#endif
