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
 *    once (pr__grpc_reply) or later from another thread (infer, admin).
 * 3. TAG_SEND: the answer (initial metadata, message, status) went out.
 * 4. TAG_CLOSE: the call is over on the client's side (or cancelled).
 * A call holds one reference per batch of operations in flight and one per
 * handler holding it; the last one frees it.
 *
 * A stream (ModelStreamInfer) reads one message at a time: each runs as a
 * call of its own (a child: no gRPC call, ModelInfer's handler, a
 * reference to the stream) whose answer joins the stream's queue of
 * answers, sent one at a time (gRPC takes one message send at a time) in
 * the order they were answered, wrapped as ModelStreamInferResponse (an
 * error is that answer's error_message; the stream goes on). The stream
 * reads the next message only while fewer than stream_max_pending requests
 * (and stream_max_bytes of their messages) wait for their answer to be
 * sent. It ends, status OK, once the client closed its side and every
 * answer went out; on shutdown, once every accepted request is answered
 * (UNAVAILABLE); cancelled, its answers still to come are dropped. A
 * stream's state is under its own lock (after g->lock).
 *
 * Answers nobody reads: an infer answer counts against the in-flight bound
 * (pr__service_answer_hold) from its encoding until its send completes,
 * which HTTP/2 flow control holds while the client does not read; one that
 * does not fit is answered UNAVAILABLE instead (pr__grpc_reply). A stream's
 * unsent answers count in its `held` too, so it stops reading. A unary
 * call whose answer is being sent is in g's list of sends (under g->lock);
 * once a second a queue thread sweeps that list and the streams' sends:
 * one waiting longer than answer_timeout_s has its call (its stream)
 * cancelled, and what it held goes with it. */
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

typedef enum { TAG_NEW, TAG_RECV, TAG_SEND, TAG_CLOSE, TAG_STATUS, TAG_SHUTDOWN } tag_kind_t;

/* An answer waiting to be sent on a stream. */
typedef struct answer {
  struct answer *next;
  grpc_byte_buffer *buf;
  size_t held;   /* its request's bytes, and its own when it is an infer answer */
  size_t answer; /* of those, its own (pr__service_answer_hold) */
} answer_t;

struct pr_grpc_stream {
  pthread_mutex_t lock;
  int pending;                     /* requests received whose answer is not sent yet */
  size_t held;                     /* their messages' bytes */
  answer_t *head, *tail, *sending; /* queued; the one being sent */
  double send_since;               /* when `sending` began (pr__now()) */
  bool meta_sent, reading, half_closed, draining, cancelled, finished;
  bool listed;                   /* in g's list (under g->lock) */
  pr_grpc_stream_t *prev, *next; /* in g's list of open streams */
  pr_grpc_call_t *children;      /* its messages whose requests are live */
  pr_grpc_call_t *call;
  const pr_grpc_rpc_t *each; /* the RPC each message runs (rpc->each's) */
};

struct pr_grpc {
  pr_service_t *svc;
  pr_grpc_config_t cfg;
  const pr_grpc_rpc_t *rpcs; /* the handlers' table (grpc_rpc.c) */
  int n_rpcs;
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
  pr_grpc_stream_t *streams;     /* open streams, under lock */
  pr_grpc_call_t *sends;         /* unary calls whose answer is being sent, under lock */
  _Atomic int64_t next_sweep_ms; /* when the answer timeout's next sweep is due */
  _Atomic uint64_t streams_open, stream_messages;
};

/* ---- calls ---- */

static pr_grpc_call_t *call_new(pr_grpc_t *g) {
  pr_grpc_call_t *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->g = g;
  c->svc = g->svc;
  atomic_init(&c->refs, 1);
  pthread_mutex_init(&c->inf_lock, NULL);
  grpc_call_details_init(&c->details);
  grpc_metadata_array_init(&c->meta);
  c->t_new = (pr_grpc_tag_t){c, TAG_NEW};
  c->t_recv = (pr_grpc_tag_t){c, TAG_RECV};
  c->t_send = (pr_grpc_tag_t){c, TAG_SEND};
  c->t_close = (pr_grpc_tag_t){c, TAG_CLOSE};
  c->t_status = (pr_grpc_tag_t){c, TAG_STATUS};
  atomic_fetch_add(&g->calls, 1);
  return c;
}

static void stream_free(pr_grpc_t *g, pr_grpc_stream_t *st);

void pr__grpc_call_ref(pr_grpc_call_t *c) {
  atomic_fetch_add(&c->refs, 1);
}

void pr__grpc_call_unref(pr_grpc_call_t *c) {
  if (atomic_fetch_sub(&c->refs, 1) != 1) return;
  pr_grpc_t *g = c->g;
  assert(!c->in_sends && !c->answer_held); /* its send's completion came first */
  if (c->stream) stream_free(g, c->stream);
  if (c->parent) pr__grpc_call_unref(c->parent); /* a stream's message: its answer is queued */
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
  pthread_mutex_destroy(&c->inf_lock);
  free(c);
  atomic_fetch_sub(&g->calls, 1);
}

/* Starts one batch of ops on c's call, holding a reference for it. */
static bool start_batch(pr_grpc_call_t *c, const grpc_op *ops, size_t n, pr_grpc_tag_t *tag) {
  pr__grpc_call_ref(c);
  if (grpc_call_start_batch(c->call, ops, n, tag, NULL) == GRPC_CALL_OK) return true;
  pr__grpc_call_unref(c);
  return false;
}

static void stream_answer(pr_grpc_call_t *c, pr_status_t st, const char *msg, uint8_t *body,
                          size_t len, size_t answer);

/* c's answer is being sent: in g's list of sends, or out of it (g->lock
 * taken here). */
static void sends_add(pr_grpc_t *g, pr_grpc_call_t *c) {
  pthread_mutex_lock(&g->lock);
  c->send_since = pr__now();
  c->in_sends = true;
  c->send_next = g->sends;
  c->send_prev = NULL;
  if (g->sends) g->sends->send_prev = c;
  g->sends = c;
  pthread_mutex_unlock(&g->lock);
}

static void sends_remove(pr_grpc_t *g, pr_grpc_call_t *c) {
  pthread_mutex_lock(&g->lock);
  if (c->in_sends) {
    if (c->send_prev)
      c->send_prev->send_next = c->send_next;
    else
      g->sends = c->send_next;
    if (c->send_next) c->send_next->send_prev = c->send_prev;
    c->in_sends = false;
  }
  pthread_mutex_unlock(&g->lock);
}

/* A unary call's send is over (sent, or the call broke): its answer's
 * bytes go, and so does their count. */
static void unary_sent(pr_grpc_call_t *c) {
  sends_remove(c->g, c);
  if (c->send) grpc_byte_buffer_destroy(c->send);
  c->send = NULL;
  pr__service_answer_gone(c->svc, c->answer_held);
  c->answer_held = 0;
}

void pr__grpc_reply(pr_grpc_call_t *c, pr_status_t st, const char *msg, uint8_t *body, size_t len) {
  assert(!c->replied); /* one answer a call */
  c->replied = true;
  /* an infer answer (its request still held) counts until it is sent */
  size_t answer = 0;
  if (st == PR_OK && c->inf.req) {
    if (pr__service_answer_hold(c->svc, len)) {
      answer = len;
    } else {
      free(body);
      body = NULL;
      len = 0;
      st = PR_ERR_BUSY;
      msg =
          "the server holds too many answer bytes that their clients have not read "
          "(--max-inflight-mb); retry later";
    }
  }
  if (c->parent) {
    stream_answer(c, st, msg, body, len, answer);
    return;
  }
  int code = pr__proto_grpc_status(st);
  if (code != GRPC_STATUS_OK) atomic_fetch_add(&c->g->errors, 1);
  char clean[1024];
  pr__utf8_sanitize(msg ? msg : "", clean, sizeof clean);
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
  c->answer_held = answer;
  if (c->g->cfg.answer_timeout_s > 0) sends_add(c->g, c); /* before its completion can come */
  if (!start_batch(c, ops, n, &c->t_send)) unary_sent(c);
}

void pr__grpc_reply_message(pr_grpc_call_t *c, const ProtobufCMessage *m) {
  size_t len = protobuf_c_message_get_packed_size(m);
  uint8_t *buf = malloc(len ? len : 1);
  if (!buf) {
    pr__grpc_reply(c, PR_ERR_NOMEM, "out of memory", NULL, 0);
    return;
  }
  protobuf_c_message_pack(m, buf);
  pr__grpc_reply(c, PR_OK, NULL, buf, len);
}

/* The RPC of a method path, NULL when none. */
static const pr_grpc_rpc_t *rpc_find(const pr_grpc_t *g, grpc_slice method) {
  for (int i = 0; i < g->n_rpcs; i++)
    if (!grpc_slice_str_cmp(method, g->rpcs[i].path)) return &g->rpcs[i];
  return NULL;
}

/* Unpacks the message (len bytes, passed by pr__grpc_wire_check) and runs
 * c's RPC on it. */
static void rpc_run(pr_grpc_call_t *c, const uint8_t *msg, size_t len) {
  ProtobufCMessage *req = protobuf_c_message_unpack(c->rpc->request, NULL, len, msg);
  if (!req) {
    pr__grpc_reply(c, PR_ERR_INVALID, "malformed request message", NULL, 0);
    return;
  }
  c->rpc->run(c, req);
  protobuf_c_message_free_unpacked(req, NULL);
}

/* ---- the steps of a call ---- */

static void request_call(pr_grpc_t *g) {
  pr_grpc_call_t *c = call_new(g);
  if (!c) return; /* out of memory: the calls still requested go on */
  if (grpc_server_request_call(g->server, &c->call, &c->details, &c->meta, g->cq, g->cq,
                               &c->t_new) != GRPC_CALL_OK) {
    c->call = NULL;
    pr__grpc_call_unref(c);
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

static bool stream_start(pr_grpc_t *g, pr_grpc_call_t *c);

static void on_new(pr_grpc_t *g, pr_grpc_call_t *c, bool ok) {
  if (!ok) { /* the server is shutting down */
    c->call = NULL;
    pr__grpc_call_unref(c);
    return;
  }
  atomic_fetch_add(&g->open, 1);
  atomic_fetch_add(&g->received, 1);
  request_call(g);
  c->rpc = rpc_find(g, c->details.method); /* before on_close can run */
  grpc_op close_op = {.op = GRPC_OP_RECV_CLOSE_ON_SERVER};
  close_op.data.recv_close_on_server.cancelled = &c->cancelled;
  start_batch(c, &close_op, 1, &c->t_close);
  char token[4200];
  pr_status_t st = PR_OK;
  if (!c->rpc)
    st = PR_ERR_METHOD;
  else if (atomic_load(&g->open) > g->cfg.max_calls)
    st = PR_ERR_NOMEM;
  else
    st = pr__auth_check(g->svc->auth, g->svc->routes[c->rpc->route].access,
                        authorization(c, token, sizeof token));
  if (st) {
    pr__grpc_reply(c, st,
                   st == PR_ERR_METHOD         ? "this method is not served here"
                   : st == PR_ERR_NOMEM        ? "too many calls at once; retry later"
                   : st == PR_ERR_UNAUTHORIZED ? "a valid bearer token is required "
                                                 "(authorization: Bearer TOKEN)"
                                               : "this token may not change the server's state; "
                                                 "an admin token may",
                   NULL, 0);
  } else if (c->rpc->each) {
    if (!stream_start(g, c)) pr__grpc_reply(c, PR_ERR_NOMEM, "out of memory", NULL, 0);
  } else {
    grpc_op recv_op = {.op = GRPC_OP_RECV_MESSAGE};
    recv_op.data.recv_message.recv_message = &c->recv;
    start_batch(c, &recv_op, 1, &c->t_recv);
  }
  memset(token, 0, sizeof token);
  pr__grpc_call_unref(c); /* the request's reference */
}

/* The received message of c (NULL, false: none), its buffer freed. */
static bool take_message(pr_grpc_call_t *c, grpc_slice *msg) {
  grpc_byte_buffer_reader reader;
  if (!c->recv || !grpc_byte_buffer_reader_init(&reader, c->recv)) return false;
  *msg = grpc_byte_buffer_reader_readall(&reader);
  grpc_byte_buffer_reader_destroy(&reader);
  grpc_byte_buffer_destroy(c->recv);
  c->recv = NULL;
  return true;
}

/* Whether message msg of rpc is refused (PR_OK: not): over the size limit,
 * malformed on the wire (before anything is allocated for it: a message
 * whose unpacking would cost far more than its size, grpc_codec.h), or
 * needing more than --max-inflight-mb to decode; why says which. *held:
 * the message and what unpacking it allocates, held while its handler
 * runs. */
static pr_status_t check_message(pr_grpc_t *g, const pr_grpc_rpc_t *rpc, grpc_slice msg,
                                 size_t *held, char *why, size_t why_len) {
  size_t len = GRPC_SLICE_LENGTH(msg);
  size_t limit = (g->svc->routes[rpc->route].flags & PR_ROUTE_TENSORS) ? g->svc->max_body_bytes
                                                                       : SMALL_MESSAGE_MAX;
  size_t cost = 0;
  *held = len;
  if (len > limit) {
    snprintf(why, why_len, "request message over the size limit");
    return PR_ERR_TOO_LARGE;
  }
  int wire = pr__grpc_wire_check(rpc->request, GRPC_SLICE_START_PTR(msg), len, &cost, why, why_len);
  if (wire) {
    if (wire < 0) snprintf(why, why_len, "malformed request message");
    return PR_ERR_INVALID;
  }
  *held = len + cost;
  if (*held > g->svc->max_inflight_bytes) { /* never fits, however long the client waits */
    snprintf(why, why_len, "the message needs %zu MiB to decode, more than --max-inflight-mb (%zu)",
             *held >> 20, g->svc->max_inflight_bytes >> 20);
    return PR_ERR_TOO_LARGE;
  }
  return PR_OK;
}

/* After a refused message: a large one leaves the slices gRPC read it
 * into (tens of kilobytes each) free in the arenas of the threads that read
 * it; they are handed back (100 refused 8 MB messages: resident memory
 * flat, +60% without; tests/e2e/hostile.py grpc_memory). A trim takes each
 * arena's lock in turn for 70-240 us here (600 kB to 8 MB messages), a few
 * percent of what receiving the megabyte or more that triggers it costs,
 * so a client sending refused messages buys no more than it pays for. A
 * valid message's slices are reused by the next. */
static void trim_after_refusal(size_t len) {
  if (len >= ((size_t)1 << 20)) malloc_trim(0);
}

static void stream_on_recv(pr_grpc_t *g, pr_grpc_call_t *c, bool ok);

/* The received message's bytes, counted against the bounds; runs the RPC. */
static void on_recv(pr_grpc_t *g, pr_grpc_call_t *c, bool ok) {
  if (c->stream) {
    stream_on_recv(g, c, ok);
    return;
  }
  grpc_slice msg;
  if (!ok || !take_message(c, &msg)) {
    pr__grpc_reply(c, PR_ERR_INVALID, "no request message", NULL, 0);
    return;
  }
  char why[160];
  size_t held, len = GRPC_SLICE_LENGTH(msg);
  pr_status_t refusal = check_message(g, c->rpc, msg, &held, why, sizeof why);
  if (refusal)
    pr__grpc_reply(c, refusal, why, NULL, 0);
  else if (!pr__service_reserve(g->svc, held))
    pr__grpc_reply(c, PR_ERR_BUSY, "the server holds too many request bytes; retry later", NULL, 0);
  else {
    rpc_run(c, GRPC_SLICE_START_PTR(msg), len);
    pr__service_release(g->svc, held);
  }
  grpc_slice_unref(msg);
  if (refusal) trim_after_refusal(len);
}

/* ---- streams (ModelStreamInfer) ---- */

/* An answer sent or dropped: the stream holds it no more (st->lock held, or
 * the stream being freed). */
static void answer_free(pr_grpc_stream_t *st, answer_t *a) {
  st->pending--;
  st->held -= a->held;
  grpc_byte_buffer_destroy(a->buf);
  pr__service_answer_gone(st->call->svc, a->answer);
  free(a);
}

/* Drops every answer still queued (st->lock held, or being freed). */
static void answers_drop(pr_grpc_stream_t *st) {
  while (st->head) {
    answer_t *a = st->head;
    st->head = a->next;
    answer_free(st, a);
  }
  st->tail = NULL;
}

/* Starts reading the next message when the stream may (st->lock held). */
static void stream_read_locked(pr_grpc_call_t *c) {
  pr_grpc_stream_t *st = c->stream;
  pr_grpc_t *g = c->g;
  if (st->reading || st->half_closed || st->draining || st->cancelled || st->finished ||
      st->pending >= g->cfg.stream_max_pending || st->held >= g->cfg.stream_max_bytes)
    return;
  grpc_op op = {.op = GRPC_OP_RECV_MESSAGE};
  op.data.recv_message.recv_message = &c->recv;
  st->reading = start_batch(c, &op, 1, &c->t_recv);
}

/* Ends the stream once nothing is left to answer and the client closed its
 * side (OK) or the server shuts down (UNAVAILABLE) (st->lock held). */
static void stream_finish_locked(pr_grpc_call_t *c) {
  pr_grpc_stream_t *st = c->stream;
  if (st->finished || st->cancelled || st->sending || st->pending > 0 ||
      !(st->half_closed || st->draining))
    return;
  st->finished = true;
  grpc_status_code code = st->half_closed ? GRPC_STATUS_OK : GRPC_STATUS_UNAVAILABLE;
  c->status_msg = grpc_slice_from_static_string(
      st->half_closed ? ""
                      : "the server is shutting down; every request the stream sent was answered");
  grpc_op ops[2];
  memset(ops, 0, sizeof ops);
  size_t n = 0;
  if (!st->meta_sent) ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
  st->meta_sent = true;
  ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
  ops[n].data.send_status_from_server.status = code;
  ops[n++].data.send_status_from_server.status_details = &c->status_msg;
  start_batch(c, ops, n, &c->t_status);
}

/* Sends the next queued answer (st->lock held, none being sent). */
static void stream_send_locked(pr_grpc_call_t *c) {
  pr_grpc_stream_t *st = c->stream;
  assert(!st->sending);
  answer_t *a = st->head;
  if (!a || st->cancelled) return;
  st->head = a->next;
  if (!st->head) st->tail = NULL;
  grpc_op ops[2];
  memset(ops, 0, sizeof ops);
  size_t n = 0;
  if (!st->meta_sent) ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[n].op = GRPC_OP_SEND_MESSAGE;
  ops[n++].data.send_message.send_message = a->buf;
  st->sending = a;
  st->send_since = pr__now();
  if (start_batch(c, ops, n, &c->t_send)) {
    st->meta_sent = true;
    return;
  }
  st->sending = NULL; /* the call is over: the answer is dropped */
  st->cancelled = true;
  answer_free(st, a);
}

/* An answer went out (or the call broke): the next one, more reading, or
 * the end. */
static void stream_on_send(pr_grpc_call_t *c, bool ok) {
  pr_grpc_stream_t *st = c->stream;
  pthread_mutex_lock(&st->lock);
  if (st->sending) answer_free(st, st->sending);
  st->sending = NULL;
  if (!ok) st->cancelled = true;
  stream_send_locked(c);
  stream_read_locked(c);
  stream_finish_locked(c);
  pthread_mutex_unlock(&st->lock);
}

/* A ModelStreamInferResponse of one field (length-delimited): its key
 * (field << 3 | 2) and varint length in a slice of their own, then the
 * bytes (taken, freed with the buffer), uncopied. NULL when out of memory. */
static grpc_byte_buffer *wrap_field(int field, uint8_t *data, size_t len) {
  if (!data && len) return NULL; /* a copy that failed */
  uint8_t head[11];
  size_t n = 0;
  head[n++] = (uint8_t)(field << 3 | 2);
  for (size_t v = len;; v >>= 7) {
    head[n++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
    if (v < 0x80) break;
  }
  grpc_slice parts[2] = {grpc_slice_from_copied_buffer((const char *)head, n),
                         data ? grpc_slice_new(data, len, free) : grpc_empty_slice()};
  grpc_byte_buffer *b = grpc_raw_byte_buffer_create(parts, 2);
  grpc_slice_unref(parts[0]);
  grpc_slice_unref(parts[1]);
  return b;
}

/* A stream message's answer (from any thread): wrapped as a
 * ModelStreamInferResponse (infer_response, field 2, the packed response
 * as it is; or error_message, field 1) and queued on the stream. */
static void stream_answer(pr_grpc_call_t *ch, pr_status_t code, const char *msg, uint8_t *body,
                          size_t len, size_t answer) {
  pr_grpc_call_t *c = ch->parent;
  pr_grpc_stream_t *st = c->stream;
  if (code) {
    atomic_fetch_add(&c->g->errors, 1);
    free(body);
    char clean[1024];
    pr__utf8_sanitize(msg && *msg ? msg : "error", clean, sizeof clean);
    len = strlen(clean);
    body = (uint8_t *)strdup(clean);
  }
  answer_t *a = calloc(1, sizeof *a);
  if (a) {
    a->held = ch->held + answer;
    a->answer = answer;
    a->buf = wrap_field(code ? 1 : 2, body, len);
  } else {
    free(body);
  }
  pthread_mutex_lock(&st->lock);
  st->held += answer; /* the stream reads no more while its unsent answers hold its bound */
  if (!a || !a->buf || st->cancelled || st->finished) { /* dropped: nobody to read it */
    st->pending--;
    st->held -= ch->held + answer;
    if (a && a->buf) grpc_byte_buffer_destroy(a->buf);
    free(a);
    pr__service_answer_gone(c->svc, answer);
  } else {
    if (st->tail)
      st->tail->next = a;
    else
      st->head = a;
    st->tail = a;
    if (!st->sending) stream_send_locked(c);
  }
  stream_read_locked(c);
  stream_finish_locked(c);
  pthread_mutex_unlock(&st->lock);
}

/* Runs one message of stream c as a call of its own (ModelInfer's
 * handler), or answers it on the stream when it is refused. */
static void stream_message(pr_grpc_t *g, pr_grpc_call_t *c, grpc_slice msg) {
  pr_grpc_stream_t *st = c->stream;
  pr_grpc_call_t *ch = call_new(g);
  if (!ch) return; /* out of memory: the message is not answered; the stream goes on */
  ch->parent = c;
  pr__grpc_call_ref(c);
  ch->rpc = st->each;
  char why[160];
  size_t len = GRPC_SLICE_LENGTH(msg);
  pr_status_t refusal = check_message(g, ch->rpc, msg, &ch->held, why, sizeof why);
  pthread_mutex_lock(&st->lock);
  st->pending++;
  st->held += ch->held;
  bool draining = st->draining;
  pthread_mutex_unlock(&st->lock);
  atomic_fetch_add(&g->stream_messages, 1);
  if (draining)
    pr__grpc_reply(ch, PR_ERR_BUSY, "the server is shutting down", NULL, 0);
  else if (refusal)
    pr__grpc_reply(ch, refusal, why, NULL, 0);
  else if (!pr__service_reserve(g->svc, ch->held))
    pr__grpc_reply(ch, PR_ERR_BUSY, "the server holds too many request bytes; retry later", NULL,
                   0);
  else {
    rpc_run(ch, GRPC_SLICE_START_PTR(msg), len);
    pr__service_release(g->svc, ch->held);
  }
  pr__grpc_call_unref(ch); /* its creation's reference */
  if (refusal) trim_after_refusal(len);
}

static void stream_on_recv(pr_grpc_t *g, pr_grpc_call_t *c, bool ok) {
  pr_grpc_stream_t *st = c->stream;
  grpc_slice msg;
  bool got = ok && take_message(c, &msg);
  pthread_mutex_lock(&st->lock);
  st->reading = false;
  if (!got) st->half_closed = true; /* the client sent its last */
  pthread_mutex_unlock(&st->lock);
  if (got) {
    stream_message(g, c, msg);
    grpc_slice_unref(msg);
  }
  pthread_mutex_lock(&st->lock);
  stream_read_locked(c);
  stream_finish_locked(c);
  pthread_mutex_unlock(&st->lock);
}

/* ---- cancellation ----
 *
 * A ModelInfer whose client went away (the call cancelled or past its
 * deadline, or the stream it came on cancelled) leaves the scheduler's
 * queue unrun (PR_ERR_CANCELLED, counted), as does one an instance has
 * taken while its batch still fills (pr__sched_drop); one whose batch runs
 * runs, and its answer is dropped with the call. inf_lock keeps the request
 * (freed by its completion callback, which marks it over first) while it
 * is taken out; lock order: a stream's lock, a call's inf_lock, the
 * scheduler's. */

/* c's client is gone: its request leaves the queue if it still waits. */
static void infer_cancel(pr_grpc_call_t *c) {
  pthread_mutex_lock(&c->inf_lock);
  c->gone = true;
  pr_sched_t *s = c->inf_live && !c->inf_over ? c->inf.model->sched : NULL;
  pr_request_t *r = c->inf.req;
  bool queued = s && pr__sched_drop(s, r);
  pthread_mutex_unlock(&c->inf_lock);
  if (queued) pr__sched_cancel(s, r); /* runs infer_done; the caller's reference holds c */
}

void pr__grpc_infer_live(pr_grpc_call_t *c) {
  pthread_mutex_lock(&c->inf_lock);
  c->inf_live = !c->inf_over; /* false: answered already */
  bool live = c->inf_live, gone = c->gone;
  pthread_mutex_unlock(&c->inf_lock);
  pr_grpc_stream_t *st = c->parent ? c->parent->stream : NULL;
  if (live && st) { /* listed while live: a cancelled stream cancels it */
    pthread_mutex_lock(&st->lock);
    pthread_mutex_lock(&c->inf_lock);
    if (!c->inf_over) {
      c->listed = true;
      c->sib_next = st->children;
      if (st->children) st->children->sib_prev = c;
      st->children = c;
    }
    pthread_mutex_unlock(&c->inf_lock);
    gone |= st->cancelled;
    pthread_mutex_unlock(&st->lock);
  }
  if (live && gone) infer_cancel(c);
}

void pr__grpc_infer_over(pr_grpc_call_t *c) {
  pr_grpc_stream_t *st = c->parent ? c->parent->stream : NULL;
  if (st) pthread_mutex_lock(&st->lock);
  pthread_mutex_lock(&c->inf_lock);
  c->inf_over = true;
  if (c->listed) {
    if (c->sib_prev)
      c->sib_prev->sib_next = c->sib_next;
    else
      st->children = c->sib_next;
    if (c->sib_next) c->sib_next->sib_prev = c->sib_prev;
    c->listed = false;
  }
  pthread_mutex_unlock(&c->inf_lock);
  if (st) pthread_mutex_unlock(&st->lock);
}

/* A cancelled stream's live requests (st->lock held): each with a
 * reference, into a new array (*n of them; NULL: none, or no memory,
 * and they run). */
static pr_grpc_call_t **children_locked(pr_grpc_stream_t *st, int *n) {
  *n = 0;
  for (pr_grpc_call_t *ch = st->children; ch; ch = ch->sib_next) (*n)++;
  pr_grpc_call_t **all = *n ? malloc(sizeof *all * (size_t)*n) : NULL;
  if (!all) return *n = 0, NULL;
  int k = 0;
  for (pr_grpc_call_t *ch = st->children; ch; ch = ch->sib_next) {
    pr__grpc_call_ref(ch); /* listed: its request's reference holds it */
    all[k++] = ch;
  }
  return all;
}

/* A call is over (its status sent, or cancelled). Cancelled, its request
 * (a ModelInfer) or its stream's leave the queue. A stream leaves g's list
 * (the list's reference goes); cancelled, what is queued goes too. c->rpc
 * is set before the close can come. */
static void on_close(pr_grpc_t *g, pr_grpc_call_t *c) {
  if (!c->rpc) return;
  if (!c->rpc->each) {
    if (c->cancelled) infer_cancel(c);
    return;
  }
  pthread_mutex_lock(&g->lock);
  c->closed = true;
  pr_grpc_stream_t *st = c->stream;
  bool listed = st && st->listed;
  if (listed) {
    if (st->prev)
      st->prev->next = st->next;
    else
      g->streams = st->next;
    if (st->next) st->next->prev = st->prev;
    st->listed = false;
  }
  pthread_mutex_unlock(&g->lock);
  if (!st) return;
  pr_grpc_call_t **gone = NULL;
  int n_gone = 0;
  pthread_mutex_lock(&st->lock);
  if (c->cancelled) {
    st->cancelled = true;
    answers_drop(st);
    gone = children_locked(st, &n_gone);
  }
  pthread_mutex_unlock(&st->lock);
  for (int k = 0; k < n_gone; k++) {
    infer_cancel(gone[k]);
    pr__grpc_call_unref(gone[k]);
  }
  free(gone);
  if (listed) pr__grpc_call_unref(c); /* the list's */
}

/* Makes c a stream and reads its first message; false when out of memory. */
static bool stream_start(pr_grpc_t *g, pr_grpc_call_t *c) {
  pr_grpc_stream_t *st = calloc(1, sizeof *st);
  if (!st) return false;
  pthread_mutex_init(&st->lock, NULL);
  st->call = c;
  st->each = rpc_find(g, grpc_slice_from_static_string(c->rpc->each));
  assert(st->each);
  pthread_mutex_lock(&g->lock);
  c->stream = st;
  st->draining = g->shutting_down;
  st->cancelled = c->closed; /* over already (cancelled at once) */
  if (!c->closed) {          /* listed, with a reference, until the call is over (on_close) */
    pr__grpc_call_ref(c);
    st->listed = true;
    st->next = g->streams;
    if (g->streams) g->streams->prev = st;
    g->streams = st;
  }
  pthread_mutex_unlock(&g->lock);
  atomic_fetch_add(&g->streams_open, 1);
  pthread_mutex_lock(&st->lock);
  stream_read_locked(c);
  stream_finish_locked(c); /* shutting down already: it ends at once */
  pthread_mutex_unlock(&st->lock);
  return true;
}

/* The stream of a call being freed (out of g's list already), its answers
 * gone. */
static void stream_free(pr_grpc_t *g, pr_grpc_stream_t *st) {
  atomic_fetch_sub(&g->streams_open, 1);
  assert(!st->sending);
  answers_drop(st);
  pthread_mutex_destroy(&st->lock);
  free(st);
}

/* Shutdown: every open stream reads no more and ends once what it accepted
 * is answered. g->lock held. */
static void streams_drain_locked(pr_grpc_t *g) {
  for (pr_grpc_stream_t *st = g->streams; st; st = st->next) {
    pthread_mutex_lock(&st->lock); /* the list's reference keeps it */
    st->draining = true;
    stream_finish_locked(st->call);
    pthread_mutex_unlock(&st->lock);
  }
}

static void on_event(pr_grpc_t *g, pr_grpc_tag_t *t, bool ok) {
  pr_grpc_call_t *c = t->call;
  switch (t->kind) {
    case TAG_NEW: on_new(g, c, ok); return;
    case TAG_RECV: on_recv(g, c, ok); break;
    case TAG_SEND:
      if (c->stream)
        stream_on_send(c, ok);
      else
        unary_sent(c);
      break;
    case TAG_CLOSE: on_close(g, c); break;
    case TAG_STATUS: break;
    case TAG_SHUTDOWN:
      pthread_mutex_lock(&g->lock);
      g->shut_down = true;
      pthread_mutex_unlock(&g->lock);
      return;
  }
  pr__grpc_call_unref(c); /* the batch's reference */
}

/* ---- answers nobody reads ---- */

/* At most this many calls are cancelled a sweep (the rest the next). */
#define SWEEP_MAX 256

/* Cancels the calls (and streams) whose answer has waited for its send
 * longer than answer_timeout_s: a client that does not read. */
static void sweep(pr_grpc_t *g, double now) {
  double limit = g->cfg.answer_timeout_s;
  pr_grpc_call_t *late[SWEEP_MAX];
  int n = 0;
  pthread_mutex_lock(&g->lock);
  for (pr_grpc_call_t *c = g->sends; c && n < SWEEP_MAX; c = c->send_next)
    if (!c->send_cancelled && now - c->send_since > limit) {
      c->send_cancelled = true;
      pr__grpc_call_ref(c); /* the list's entry is alive: its send's reference */
      late[n++] = c;
    }
  for (pr_grpc_stream_t *st = g->streams; st && n < SWEEP_MAX; st = st->next) {
    pthread_mutex_lock(&st->lock);
    bool stuck = st->sending && !st->cancelled && now - st->send_since > limit;
    if (stuck) st->cancelled = true; /* no more sends; on_close drops what is queued */
    pthread_mutex_unlock(&st->lock);
    if (stuck) {
      pr__grpc_call_ref(st->call); /* the list's reference holds it */
      late[n++] = st->call;
    }
  }
  pthread_mutex_unlock(&g->lock);
  for (int i = 0; i < n; i++) {
    grpc_call_cancel_with_status(late[i]->call, GRPC_STATUS_DEADLINE_EXCEEDED,
                                 "the answer was not read within --idle-timeout-s", NULL);
    pr__grpc_call_unref(late[i]);
  }
  if (n)
    pr__log(PR_LOG_WARN, "gRPC: %d call%s cancelled: answers not read within %.0f s", n,
            n == 1 ? "" : "s", limit);
}

/* Sweeps when one is due, on one queue thread at a time. */
static void sweep_when_due(pr_grpc_t *g) {
  if (g->cfg.answer_timeout_s <= 0) return;
  double now = pr__now();
  int64_t due = atomic_load(&g->next_sweep_ms), now_ms = (int64_t)(now * 1e3);
  if (now_ms < due || !atomic_compare_exchange_strong(&g->next_sweep_ms, &due, now_ms + 1000))
    return;
  sweep(g, now);
}

static void *queue_main(void *arg) {
  pr_grpc_t *g = arg;
  for (;;) {
    /* woken once a second at least, for the answer timeout's sweep */
    gpr_timespec wake =
        gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_seconds(1, GPR_TIMESPAN));
    grpc_event ev = grpc_completion_queue_next(g->cq, wake, NULL);
    if (ev.type == GRPC_QUEUE_SHUTDOWN) return NULL;
    if (ev.type == GRPC_OP_COMPLETE) on_event(g, ev.tag, ev.success != 0);
    sweep_when_due(g);
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
    pr__errf(err, err_len, "cannot listen for gRPC on %s%s", addr,
             g->cfg.tls_cert ? " (or the TLS certificate and key do not fit)" : "");
    return PR_ERR_IO;
  }
  return PR_OK;
}

pr_status_t pr_grpc__open(pr_service_t *svc, const pr_grpc_config_t *cfg, const pr_grpc_rpc_t *rpcs,
                          int n_rpcs, pr_grpc_t **out, char *err, size_t err_len) {
  *out = NULL;
  pr_grpc_t *g = calloc(1, sizeof *g);
  if (!g) return PR_ERR_NOMEM;
  g->svc = svc;
  g->cfg = *cfg;
  g->rpcs = rpcs;
  g->n_rpcs = n_rpcs;
  g->shutdown_tag = (pr_grpc_tag_t){NULL, TAG_SHUTDOWN};
  pthread_mutex_init(&g->lock, NULL);
  grpc_init();
  pr_status_t st = bind_server(g, err, err_len);
  g->threads = calloc((size_t)cfg->threads, sizeof *g->threads);
  if (!st && !g->threads) st = PR_ERR_NOMEM;
  if (st) {
    pr__grpc_stop(g, 0);
    return st;
  }
  *out = g;
  return PR_OK;
}

pr_status_t pr__grpc_start(pr_grpc_t *g, char *err, size_t err_len) {
  grpc_server_start(g->server);
  for (int i = 0; i < POSTED_CALLS; i++) request_call(g);
  for (; g->n_threads < g->cfg.threads; g->n_threads++)
    if (pthread_create(&g->threads[g->n_threads], NULL, queue_main, g)) break;
  if (!g->n_threads) {
    pr__errf(err, err_len, "cannot start the gRPC threads");
    return PR_ERR_NOMEM; /* the caller's pr__grpc_stop takes the shutdown's events */
  }
  return PR_OK;
}

int pr__grpc_port(const pr_grpc_t *g) {
  return g->port;
}

pr_grpc_counts_t pr__grpc_counts(const pr_grpc_t *g) {
  if (!g) return (pr_grpc_counts_t){0};
  return (pr_grpc_counts_t){.calls = atomic_load(&g->received),
                            .errors = atomic_load(&g->errors),
                            .streams = atomic_load(&g->streams_open),
                            .stream_requests = atomic_load(&g->stream_messages)};
}

void pr__grpc_shutdown(pr_grpc_t *g) {
  if (!g) return;
  pthread_mutex_lock(&g->lock);
  bool first = !g->shutting_down;
  g->shutting_down = true;
  streams_drain_locked(g);
  pthread_mutex_unlock(&g->lock);
  if (first) grpc_server_shutdown_and_notify(g->server, g->cq, &g->shutdown_tag);
}

/* Waits until the shutdown tag came (and every call object is gone) or
 * `until` (pr__now()); true when it came. */
static bool wait_shut_down(pr_grpc_t *g, double until) {
  pthread_mutex_lock(&g->lock);
  while ((!g->shut_down || atomic_load(&g->calls) > 0) && pr__now() < until) {
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
    if (atomic_load(&g->open) == 0 || pr__now() >= until) return false;
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

bool pr__grpc_stop(pr_grpc_t *g, double timeout_s) {
  if (!g) return true;
  if (g->server) {
    pr__grpc_shutdown(g);
    if (!g->n_threads) {
      drain_inline(g);
    } else if (!wait_answered(g, pr__now() + timeout_s)) {
      /* gRPC's shutdown also waits for idle connections to go: once every
       * accepted call is answered (or the time is up), they are closed
       * and what is left is cancelled; a handler still running (a model
       * stuck in a kernel) keeps its call: then everything is left */
      grpc_server_cancel_all_calls(g->server);
      if (!wait_shut_down(g, pr__now() + 2.0)) {
        pr__log(PR_LOG_ERROR, "shutdown: %d gRPC call%s still running, not answered",
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
