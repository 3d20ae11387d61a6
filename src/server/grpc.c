/* The gRPC front end's transport: the server, its completion queue and
 * threads, and the life of a call (see grpc.h). The RPCs themselves are in
 * grpc_rpc.c; this file knows them only through pr_grpc_rpcs.
 *
 * The life of a call (each step a tag on the completion queue):
 * 1. TAG_NEW: grpc_server_request_call gave a call; another is requested,
 *    the method is looked up, the token checked (refused: answered now,
 *    the message never read), RECV_CLOSE_ON_SERVER and RECV_MESSAGE start.
 * 2. TAG_RECV: the message is in; its bytes are counted against the
 *    in-flight bound and the RPC's handler runs with them. It answers at
 *    once (pr_grpc_reply) or later from another thread (infer, admin).
 * 3. TAG_SEND: the answer (initial metadata, message, status) went out.
 * 4. TAG_CLOSE: the call is over on the client's side (or cancelled).
 * A call holds one reference per batch of operations in flight and one per
 * handler holding it; the last one frees it. */
#define _GNU_SOURCE
#include "server/grpc.h"

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/text.h"
#include "base/util.h"
#include "server/grpc_call.h"
#include "server/grpc_codec.h"

/* Calls requested from the server ahead, so a burst waits for no request. */
#define POSTED_CALLS 32
/* Messages of RPCs other than ModelInfer are small. */
#define SMALL_MESSAGE_MAX ((size_t)1 << 20)

typedef enum { TAG_NEW, TAG_RECV, TAG_SEND, TAG_CLOSE, TAG_SHUTDOWN } tag_kind_t;

struct pr_grpc {
  pr_service_t *svc;
  pr_grpc_config_t cfg;
  grpc_server *server;
  grpc_completion_queue *cq;
  pthread_t *threads;
  int n_threads;
  int port;
  pr_grpc_tag_t shutdown_tag;
  pthread_mutex_t lock;
  bool shutting_down, shut_down; /* under lock */
  _Atomic int calls;             /* call objects alive (requested ones too) */
  _Atomic int open;              /* accepted calls not yet freed */
  _Atomic uint64_t received, errors;
};

/* ---- calls ---- */

static pr_grpc_call_t *call_new(pr_grpc_t *g) {
  pr_grpc_call_t *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->g = g;
  c->svc = g->svc;
  atomic_init(&c->refs, 1);
  grpc_call_details_init(&c->details);
  grpc_metadata_array_init(&c->meta);
  c->t_new = (pr_grpc_tag_t){c, TAG_NEW};
  c->t_recv = (pr_grpc_tag_t){c, TAG_RECV};
  c->t_send = (pr_grpc_tag_t){c, TAG_SEND};
  c->t_close = (pr_grpc_tag_t){c, TAG_CLOSE};
  atomic_fetch_add(&g->calls, 1);
  return c;
}

void pr_grpc_call_ref(pr_grpc_call_t *c) {
  atomic_fetch_add(&c->refs, 1);
}

void pr_grpc_call_unref(pr_grpc_call_t *c) {
  if (atomic_fetch_sub(&c->refs, 1) != 1) return;
  pr_grpc_t *g = c->g;
  if (c->call) {
    grpc_call_unref(c->call);
    atomic_fetch_sub(&g->open, 1);
  }
  grpc_call_details_destroy(&c->details);
  grpc_metadata_array_destroy(&c->meta);
  if (c->recv) grpc_byte_buffer_destroy(c->recv);
  if (c->send) grpc_byte_buffer_destroy(c->send);
  grpc_slice_unref(c->status_msg);
  grpc_slice_unref(c->pushback.value);
  free(c);
  atomic_fetch_sub(&g->calls, 1);
}

/* Starts one batch of ops on c's call, holding a reference for it. */
static bool start_batch(pr_grpc_call_t *c, const grpc_op *ops, size_t n, pr_grpc_tag_t *tag) {
  pr_grpc_call_ref(c);
  if (grpc_call_start_batch(c->call, ops, n, tag, NULL) == GRPC_CALL_OK) return true;
  pr_grpc_call_unref(c);
  return false;
}

void pr_grpc_reply(pr_grpc_call_t *c, pr_status_t st, const char *msg, uint8_t *body, size_t len) {
  assert(!c->replied); /* one answer a call */
  c->replied = true;
  int code = pr_proto_grpc_status(st);
  if (code != GRPC_STATUS_OK) atomic_fetch_add(&c->g->errors, 1);
  char clean[1024];
  pr_utf8_sanitize(msg ? msg : "", clean, sizeof clean);
  c->status_msg = grpc_slice_from_copied_string(clean);
  grpc_op ops[3];
  memset(ops, 0, sizeof ops);
  size_t n = 0;
  ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
  if (code == GRPC_STATUS_OK) {
    grpc_slice s = body ? grpc_slice_new(body, len, free) : grpc_empty_slice();
    c->send = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);
    ops[n].op = GRPC_OP_SEND_MESSAGE;
    ops[n++].data.send_message.send_message = c->send;
  } else {
    free(body);
  }
  ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
  ops[n].data.send_status_from_server.status = (grpc_status_code)code;
  if (code == GRPC_STATUS_UNAVAILABLE) {
    /* when to come back, as HTTP's Retry-After (gRPC's retry pushback):
     * the scheduler's estimate for a refused request, 1 s otherwise */
    double s = c->inf.retry_after_s > 1 ? ceil(c->inf.retry_after_s) : 1.0;
    char ms[24];
    snprintf(ms, sizeof ms, "%.0f", s * 1e3);
    c->pushback.key = grpc_slice_from_static_string("grpc-retry-pushback-ms");
    c->pushback.value = grpc_slice_from_copied_string(ms);
    ops[n].data.send_status_from_server.trailing_metadata_count = 1;
    ops[n].data.send_status_from_server.trailing_metadata = &c->pushback;
  }
  ops[n++].data.send_status_from_server.status_details = &c->status_msg;
  start_batch(c, ops, n, &c->t_send);
}

void pr_grpc_reply_message(pr_grpc_call_t *c, const ProtobufCMessage *m) {
  size_t len = protobuf_c_message_get_packed_size(m);
  uint8_t *buf = malloc(len ? len : 1);
  if (!buf) {
    pr_grpc_reply(c, PR_ERR_NOMEM, "out of memory", NULL, 0);
    return;
  }
  protobuf_c_message_pack(m, buf);
  pr_grpc_reply(c, PR_OK, NULL, buf, len);
}

/* ---- the steps of a call ---- */

static void request_call(pr_grpc_t *g) {
  pr_grpc_call_t *c = call_new(g);
  if (!c) return; /* out of memory: the calls still requested go on */
  if (grpc_server_request_call(g->server, &c->call, &c->details, &c->meta, g->cq, g->cq,
                               &c->t_new) != GRPC_CALL_OK) {
    c->call = NULL;
    pr_grpc_call_unref(c);
  }
}

/* The bearer token of c's `authorization` metadata (NUL-terminated copy
 * in buf), or NULL when there is none or it does not fit. */
static const char *authorization(pr_grpc_call_t *c, char *buf, size_t len) {
  for (size_t i = 0; i < c->meta.count; i++) {
    const grpc_metadata *md = &c->meta.metadata[i];
    if (grpc_slice_str_cmp(md->key, "authorization")) continue;
    size_t n = GRPC_SLICE_LENGTH(md->value);
    if (n >= len) return NULL;
    memcpy(buf, GRPC_SLICE_START_PTR(md->value), n);
    buf[n] = 0;
    return buf;
  }
  return NULL;
}

static void on_new(pr_grpc_t *g, pr_grpc_call_t *c, bool ok) {
  if (!ok) { /* the server is shutting down */
    c->call = NULL;
    pr_grpc_call_unref(c);
    return;
  }
  atomic_fetch_add(&g->open, 1);
  atomic_fetch_add(&g->received, 1);
  request_call(g);
  grpc_op close_op = {.op = GRPC_OP_RECV_CLOSE_ON_SERVER};
  close_op.data.recv_close_on_server.cancelled = &c->cancelled;
  start_batch(c, &close_op, 1, &c->t_close);
  c->rpc = pr_grpc_rpc_find(c->details.method);
  char token[4200];
  pr_status_t st = PR_OK;
  if (!c->rpc)
    st = PR_ERR_METHOD;
  else if (atomic_load(&g->open) > g->cfg.max_calls)
    st = PR_ERR_NOMEM;
  else
    st = pr_auth_check(g->svc->auth, pr_route_access(c->rpc->route),
                       authorization(c, token, sizeof token));
  if (st) {
    pr_grpc_reply(c, st,
                  st == PR_ERR_METHOD         ? "this method is not served here"
                  : st == PR_ERR_NOMEM        ? "too many calls at once; retry later"
                  : st == PR_ERR_UNAUTHORIZED ? "a valid bearer token is required "
                                                "(authorization: Bearer TOKEN)"
                                              : "this token may not change the server's state; "
                                                "an admin token may",
                  NULL, 0);
  } else {
    grpc_op recv_op = {.op = GRPC_OP_RECV_MESSAGE};
    recv_op.data.recv_message.recv_message = &c->recv;
    start_batch(c, &recv_op, 1, &c->t_recv);
  }
  memset(token, 0, sizeof token);
  pr_grpc_call_unref(c); /* the request's reference */
}

/* The received message's bytes, counted against the bounds; runs the RPC. */
static void on_recv(pr_grpc_t *g, pr_grpc_call_t *c, bool ok) {
  if (!ok || !c->recv) {
    pr_grpc_reply(c, PR_ERR_INVALID, "no request message", NULL, 0);
    return;
  }
  grpc_byte_buffer_reader reader;
  if (!grpc_byte_buffer_reader_init(&reader, c->recv)) {
    pr_grpc_reply(c, PR_ERR_INVALID, "cannot read the request message", NULL, 0);
    return;
  }
  grpc_slice msg = grpc_byte_buffer_reader_readall(&reader);
  grpc_byte_buffer_reader_destroy(&reader);
  grpc_byte_buffer_destroy(c->recv);
  c->recv = NULL;
  size_t len = GRPC_SLICE_LENGTH(msg);
  size_t limit = pr_route_takes_tensors(c->rpc->route) ? g->svc->max_body_bytes : SMALL_MESSAGE_MAX;
  /* the message and what unpacking it allocates are held while the handler
   * runs; a message whose unpacking would cost far more than its size, or
   * that does not parse, is refused from the wire before anything is
   * allocated for it (grpc_codec.h) */
  char err[160];
  size_t cost = 0;
  int wire = len > limit ? 0
                         : pr_grpc_wire_check(c->rpc->request, GRPC_SLICE_START_PTR(msg), len,
                                              &cost, err, sizeof err);
  size_t held = len + cost;
  pr_status_t refusal = PR_OK;
  const char *why = err;
  if (len > limit)
    refusal = PR_ERR_TOO_LARGE, why = "request message over the size limit";
  else if (wire)
    refusal = PR_ERR_INVALID, why = wire > 0 ? err : "malformed request message";
  else if (held > g->svc->max_inflight_bytes) {
    /* never fits, however long the client waits: not a busy server */
    refusal = PR_ERR_TOO_LARGE;
    snprintf(err, sizeof err,
             "the message needs %zu MiB to decode, more than --max-inflight-mb (%zu)", held >> 20,
             g->svc->max_inflight_bytes >> 20);
  }
  if (refusal)
    pr_grpc_reply(c, refusal, why, NULL, 0);
  else if (!pr_service_reserve(g->svc, held))
    pr_grpc_reply(c, PR_ERR_BUSY, "the server holds too many request bytes; retry later", NULL, 0);
  else {
    pr_grpc_rpc_run(c, GRPC_SLICE_START_PTR(msg), len);
    pr_service_release(g->svc, held);
  }
  grpc_slice_unref(msg);
  /* a large refused message leaves the slices gRPC read it into (tens of
   * kilobytes each) free in the arenas of the threads that read it; they are
   * handed back (100 refused 8 MB messages: resident memory flat, +60%
   * without; tests/e2e/hostile.py grpc_memory). A trim takes each arena's
   * lock in turn for 70-240 us here (600 kB to 8 MB messages), a few percent
   * of what receiving the megabyte or more that triggers it costs, so a
   * client sending refused messages buys no more than it pays for. A valid
   * message's slices are reused by the next. */
  if (refusal && len >= ((size_t)1 << 20)) malloc_trim(0);
}

static void on_event(pr_grpc_t *g, pr_grpc_tag_t *t, bool ok) {
  pr_grpc_call_t *c = t->call;
  switch (t->kind) {
    case TAG_NEW: on_new(g, c, ok); return;
    case TAG_RECV: on_recv(g, c, ok); break;
    case TAG_SEND:
    case TAG_CLOSE: break;
    case TAG_SHUTDOWN:
      pthread_mutex_lock(&g->lock);
      g->shut_down = true;
      pthread_mutex_unlock(&g->lock);
      return;
  }
  pr_grpc_call_unref(c); /* the batch's reference */
}

static void *queue_main(void *arg) {
  pr_grpc_t *g = arg;
  for (;;) {
    grpc_event ev = grpc_completion_queue_next(g->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    if (ev.type == GRPC_QUEUE_SHUTDOWN) return NULL;
    if (ev.type == GRPC_OP_COMPLETE) on_event(g, ev.tag, ev.success != 0);
  }
}

/* ---- start and stop ---- */

static grpc_server_credentials *credentials(const pr_grpc_config_t *cfg) {
  if (!cfg->tls_cert) return grpc_insecure_server_credentials_create();
  grpc_ssl_pem_key_cert_pair pair = {cfg->tls_key, cfg->tls_cert};
  return grpc_ssl_server_credentials_create_ex(
      cfg->tls_client_ca, &pair, 1,
      cfg->tls_client_ca ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                         : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE,
      NULL);
}

/* The server with its limits, bound to host:port. */
static pr_status_t bind_server(pr_grpc_t *g, char *err, size_t err_len) {
  int max_recv =
      g->svc->max_body_bytes > (size_t)INT32_MAX ? INT32_MAX : (int)g->svc->max_body_bytes;
  grpc_arg args[] = {
      {.type = GRPC_ARG_INTEGER,
       .key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
       .value.integer = max_recv},
      {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, .value.integer = -1},
      /* a port another process holds is an error, not shared (gRPC's
       * default, SO_REUSEPORT, would split the calls between the two) */
      {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_ALLOW_REUSEPORT, .value.integer = 0},
  };
  grpc_channel_args ch = {sizeof args / sizeof args[0], args};
  g->server = grpc_server_create(&ch, NULL);
  g->cq = grpc_completion_queue_create_for_next(NULL);
  grpc_server_register_completion_queue(g->server, g->cq, NULL);
  char addr[300];
  snprintf(addr, sizeof addr, strchr(g->cfg.host, ':') ? "[%s]:%d" : "%s:%d", g->cfg.host,
           g->cfg.port);
  grpc_server_credentials *creds = credentials(&g->cfg);
  g->port = creds ? grpc_server_add_http2_port(g->server, addr, creds) : 0;
  if (creds) grpc_server_credentials_release(creds);
  if (g->port <= 0) {
    pr_errf(err, err_len, "cannot listen for gRPC on %s%s", addr,
            g->cfg.tls_cert ? " (or the TLS certificate and key do not fit)" : "");
    return PR_ERR_IO;
  }
  return PR_OK;
}

pr_status_t pr_grpc_start(pr_service_t *svc, const pr_grpc_config_t *cfg, pr_grpc_t **out,
                          char *err, size_t err_len) {
  *out = NULL;
  pr_grpc_t *g = calloc(1, sizeof *g);
  if (!g) return PR_ERR_NOMEM;
  g->svc = svc;
  g->cfg = *cfg;
  g->shutdown_tag = (pr_grpc_tag_t){NULL, TAG_SHUTDOWN};
  pthread_mutex_init(&g->lock, NULL);
  grpc_init();
  pr_status_t st = bind_server(g, err, err_len);
  g->threads = calloc((size_t)cfg->threads, sizeof *g->threads);
  if (!st && !g->threads) st = PR_ERR_NOMEM;
  if (st) {
    pr_grpc_stop(g, 0);
    return st;
  }
  grpc_server_start(g->server);
  for (int i = 0; i < POSTED_CALLS; i++) request_call(g);
  for (; g->n_threads < cfg->threads; g->n_threads++)
    if (pthread_create(&g->threads[g->n_threads], NULL, queue_main, g)) break;
  if (!g->n_threads) {
    pr_grpc_shutdown(g);
    pr_grpc_stop(g, 0);
    pr_errf(err, err_len, "cannot start the gRPC threads");
    return PR_ERR_NOMEM;
  }
  *out = g;
  return PR_OK;
}

int pr_grpc_port(const pr_grpc_t *g) {
  return g->port;
}

void pr_grpc_counts(const pr_grpc_t *g, uint64_t *calls, uint64_t *errors) {
  *calls = g ? atomic_load(&g->received) : 0;
  *errors = g ? atomic_load(&g->errors) : 0;
}

void pr_grpc_shutdown(pr_grpc_t *g) {
  if (!g) return;
  pthread_mutex_lock(&g->lock);
  bool first = !g->shutting_down;
  g->shutting_down = true;
  pthread_mutex_unlock(&g->lock);
  if (first) grpc_server_shutdown_and_notify(g->server, g->cq, &g->shutdown_tag);
}

/* Waits until the shutdown tag came (and every call object is gone) or
 * `until` (pr_now()); true when it came. */
static bool wait_shut_down(pr_grpc_t *g, double until) {
  pthread_mutex_lock(&g->lock);
  while ((!g->shut_down || atomic_load(&g->calls) > 0) && pr_now() < until) {
    pthread_mutex_unlock(&g->lock);
    usleep(2000);
    pthread_mutex_lock(&g->lock);
  }
  bool done = g->shut_down && atomic_load(&g->calls) == 0;
  pthread_mutex_unlock(&g->lock);
  return done;
}

/* Waits until the shutdown is complete (true) or, false, every accepted
 * call is answered and closed (then gRPC waits for idle connections only)
 * or `until` passes. */
static bool wait_answered(pr_grpc_t *g, double until) {
  for (;;) {
    pthread_mutex_lock(&g->lock);
    bool done = g->shut_down;
    pthread_mutex_unlock(&g->lock);
    if (done) return wait_shut_down(g, until);
    if (atomic_load(&g->open) == 0 || pr_now() >= until) return false;
    usleep(2000);
  }
}

/* Without queue threads (a start that failed half way), the events of
 * the shutdown are taken here. */
static void drain_inline(pr_grpc_t *g) {
  while (!g->shut_down || atomic_load(&g->calls) > 0) {
    grpc_event ev = grpc_completion_queue_next(g->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    if (ev.type == GRPC_OP_COMPLETE) on_event(g, ev.tag, ev.success != 0);
  }
}

bool pr_grpc_stop(pr_grpc_t *g, double timeout_s) {
  if (!g) return true;
  if (g->server) {
    pr_grpc_shutdown(g);
    if (!g->n_threads) {
      drain_inline(g);
    } else if (!wait_answered(g, pr_now() + timeout_s)) {
      /* gRPC's shutdown also waits for idle connections to go: once every
       * accepted call is answered (or the time is up), they are closed
       * and what is left is cancelled; a handler still running (a model
       * stuck in a kernel) keeps its call: then everything is left */
      grpc_server_cancel_all_calls(g->server);
      if (!wait_shut_down(g, pr_now() + 2.0)) {
        pr_log(PR_LOG_ERROR, "shutdown: %d gRPC call%s still running, not answered",
               atomic_load(&g->open), atomic_load(&g->open) == 1 ? "" : "s");
        return false;
      }
    }
    grpc_server_destroy(g->server);
  }
  if (g->cq) {
    grpc_completion_queue_shutdown(g->cq);
    for (int i = 0; i < g->n_threads; i++) pthread_join(g->threads[i], NULL);
    if (!g->n_threads)
      while (grpc_completion_queue_next(g->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
             GRPC_QUEUE_SHUTDOWN) {
      }
    grpc_completion_queue_destroy(g->cq);
  }
  grpc_shutdown();
  pthread_mutex_destroy(&g->lock);
  free(g->threads);
  free(g);
  return true;
}
