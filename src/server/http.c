/* HTTP/1.1 on libmicrohttpd: what happens to a request between its headers
 * and its answer. The route handlers are server.c's; this file is the
 * machinery around them: limits decided from the headers, bodies read into
 * aligned buffers, every reply (the one place an HTTP status is made from a
 * pr_status_t), infer requests suspended while they wait in the queue, and
 * slow admin calls on threads of their own.
 *
 * Notes on the design:
 * - libmicrohttpd calls these from its pool threads; a connection's calls
 *   never overlap. The answer of a suspended request is made on another
 *   thread (the scheduler's completion callback, a deferred admin thread):
 *   cn->lock orders suspending against resuming (see "suspended requests").
 * - Shared counters are atomics of the server (server_internal.h).
 * - Bytes held for a client count against --max-inflight-mb whichever way
 *   they flow: a body as it arrives, its tensors once decoded, its infer
 *   answer from the encoding until libmicrohttpd has sent it or the
 *   connection is gone (pr_http__completed). An answer that does not fit
 *   is dropped for a 503, so clients that send and never read hold the
 *   bound at most; libmicrohttpd's connection timeout (--idle-timeout-s:
 *   no byte moved) closes such a connection and frees its answer. One
 *   request at a time per connection (HTTP/1.1): one that has not read its
 *   answer is not read from either.
 * - Framing that a proxy could read differently from libmicrohttpd
 *   (request smuggling) is refused with 400 and the connection closed:
 *   two Content-Length values, a header name with white space, any
 *   Transfer-Encoding but one header of exactly `chunked`, both
 *   Transfer-Encoding and Content-Length. A path holding an encoded `/` or
 *   `\` (%2F, %5C) is refused (400): libmicrohttpd decodes it before the
 *   routes see it, where a proxy's path rules would not. */
#define _GNU_SOURCE
#include <jansson.h>
#include <math.h>
#include <microhttpd.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/log.h"
#include "base/topology.h"
#include "base/util.h"
#include "server/models.h"
#include "server/protocol.h"
#include "server/server_internal.h"

/* Bodies of the routes that take no tensors (plan, repository) are small. */
#define ADMIN_BODY_MAX ((size_t)1 << 20)

/* ---- per-request state ---- */

/* Counts n more bytes against the in-flight limit; false when over it. */
static bool reserve(pr_server_t *s, conn_t *cn, size_t n) {
  if (!pr__service_reserve(&s->svc, n)) return false;
  cn->reserved += n;
  return true;
}

static void refuse(pr_server_t *s, conn_t *cn, pr_status_t status, const char *msg) {
  if (cn->refuse_status) return;
  cn->refuse_status = status;
  snprintf(cn->refuse_msg, sizeof cn->refuse_msg, "%s", msg);
  pr__free(cn->base);
  cn->body = cn->base = NULL;
  cn->len = cn->cap = 0;
  atomic_fetch_add(&s->http_refused, 1);
}

/* A request's state, from its request line on. */
static conn_t *conn_new(pr_server_t *s) {
  conn_t *cn = calloc(1, sizeof *cn);
  if (!cn) return NULL;
  cn->s = s;
  pthread_mutex_init(&cn->lock, NULL);
  return cn;
}

/* Whether the path of a raw request target (up to '?') holds %2F or %5C. */
static bool encoded_separator(const char *uri) {
  for (const char *p = uri; *p && *p != '?'; p++)
    if (p[0] == '%' && ((p[1] == '2' && (p[2] == 'F' || p[2] == 'f')) ||
                        (p[1] == '5' && (p[2] == 'C' || p[2] == 'c'))))
      return true;
  return false;
}

/* ---- replies ---- */

/* The answer r with the protocol's HTTP status for st: queued on the
 * connection, or kept for it when a deferred handler made it on another
 * thread (queued when the connection resumes). While the server drains,
 * and after a request whose body's framing was refused (what follows it on
 * the connection cannot be told apart from its body, whatever the method),
 * the answer closes its connection; a 401 names the scheme (Bearer). */
enum MHD_Result pr_http__deliver(conn_t *cn, pr_status_t st, struct MHD_Response *r) {
  if (atomic_load(&cn->s->stopping) || cn->framing)
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
  if (st == PR_ERR_UNAUTHORIZED) MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
  unsigned code = (unsigned)pr__proto_http_status(st);
  if (st == PR_ERR_BUSY) { /* when to come back: a client that retries at once adds to the load */
    char after[24];
    snprintf(after, sizeof after, "%.0f", cn->retry_after_s > 1 ? ceil(cn->retry_after_s) : 1.0);
    MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, after);
  }
  if (cn->deferred) {
    cn->resp = r;
    cn->resp_code = code;
    return MHD_YES;
  }
  enum MHD_Result ret = MHD_queue_response(cn->c, code, r);
  MHD_destroy_response(r);
  return ret;
}

/* Every reply goes out here or in reply_static. */
enum MHD_Result pr_http__reply(conn_t *cn, pr_status_t st, char *body, size_t len, const char *type,
                               size_t json_len) {
  struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
  if (!r) {
    free(body);
    return MHD_NO;
  }
  MHD_add_response_header(r, "Content-Type", type);
  if (json_len) {
    char h[32];
    snprintf(h, sizeof h, "%zu", json_len);
    MHD_add_response_header(r, "Inference-Header-Content-Length", h);
  }
  return pr_http__deliver(cn, st, r);
}

enum MHD_Result pr_http__reply_static(conn_t *cn, pr_status_t st, const char *body) {
  struct MHD_Response *r =
      MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_PERSISTENT);
  if (!r) return MHD_NO;
  MHD_add_response_header(r, "Content-Type", "application/json");
  return pr_http__deliver(cn, st, r);
}

/* o may be NULL (a json_pack that failed): PR_ERR_NOMEM. */
enum MHD_Result pr_http__reply_json(conn_t *cn, pr_status_t st, json_t *o) {
  char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(o);
  if (!s)
    return pr_http__reply_static(cn, PR_ERR_NOMEM, "{\"error\":\"cannot encode the response\"}");
  return pr_http__reply(cn, st, s, strlen(s), "application/json", 0);
}

enum MHD_Result pr_http__reply_error(conn_t *cn, pr_status_t st, const char *msg) {
  atomic_fetch_add(&cn->s->http_errors, 1);
  char *b = pr__proto_error(msg);
  if (!b) return pr_http__reply_static(cn, st, "{\"error\":\"out of memory\"}");
  return pr_http__reply(cn, st, b, strlen(b), "application/json", 0);
}

/* ---- suspended requests ----
 *
 * An infer request waits in its model's queue without a thread: its
 * connection is suspended (MHD_suspend_connection) and the scheduler's
 * completion callback resumes it; libmicrohttpd then calls the handler
 * again, which sends the answer (infer_finish). Admin routes that can take
 * long (loading a model, preparing a plan) run on a thread of their own the
 * same way. cn->lock orders the two sides: the handler suspends under it,
 * and the callback resumes only a connection that is suspended (an answer
 * that comes first is noted, and sent without suspending). */

static void suspend_locked(conn_t *cn) {
  MHD_suspend_connection(cn->c);
  cn->suspended = true;
  atomic_fetch_add(&cn->s->suspended, 1);
}

/* The scheduler's (or an admin thread's) "answered": any thread. The
 * resume comes after the unlock: it may wake the connection's thread on
 * this very core (the hand-off's co-location), which then runs at once and
 * must not find the lock still held by the thread it preempted. A suspended
 * connection stays (nothing else resumes or closes it) until resumed; cn
 * may be gone once it is, so only s is used after. */
static void on_answered(void *ctx) {
  conn_t *cn = ctx;
  pr_server_t *s = cn->s;
  struct MHD_Connection *c = cn->c;
  pthread_mutex_lock(&cn->lock);
  cn->answered = true;
  bool resume = cn->suspended;
  cn->suspended = false;
  pr__hangup_remove(s->hangup, cn->watch); /* before the resume: cn may go after it */
  cn->watch = 0;
  pthread_mutex_unlock(&cn->lock);
  if (!resume) return;
  MHD_resume_connection(c);
  /* after the resume: the drain stops libmicrohttpd only when none is left */
  atomic_fetch_sub(&s->suspended, 1);
}

/* Frees the infer request of cn (the model reference stays until the
 * connection's request completes: its stats count the send). */
static void infer_release(conn_t *cn) {
  pr__infer_release(&cn->inf, cn->answered);
}

/* An encoded answer: the body and, with binary outputs, its JSON part's length. */
typedef struct {
  char *body;
  size_t len, json_len;
} http_out_t;

static pr_status_t encode_json(pr_infer_t *x, void *arg) {
  http_out_t *o = arg;
  const pr_served_t *m = x->model;
  return pr__proto_infer_response(&m->proto, m->entry.name, m->entry.version, x->req, &x->q,
                                  &o->body, &o->len, &o->json_len);
}

/* The answer to an infer request the scheduler is done with. */
static enum MHD_Result infer_finish(conn_t *cn) {
  http_out_t out = {0};
  const char *msg;
  double t_encoded;
  pr_status_t st = pr__infer_answer(&cn->inf, encode_json, &out, &msg, &t_encoded);
  if (st != PR_OK) { /* msg may be the request's: answered before it is freed */
    enum MHD_Result ret = pr_http__reply_error(cn, st, msg);
    infer_release(cn);
    return ret;
  }
  cn->compute_s = cn->inf.req->compute_s;
  infer_release(cn);
  /* the body is read and decoded: what the connection holds from now on
   * is its answer, counted until it is sent (see the notes at the top) */
  pr__free(cn->base);
  cn->body = cn->base = NULL;
  cn->len = cn->cap = 0;
  pr__service_release(&cn->s->svc, cn->reserved);
  cn->reserved = 0;
  if (!pr__service_answer_hold(&cn->s->svc, out.len)) {
    free(out.body);
    return pr_http__reply_error(cn, PR_ERR_BUSY,
                                "the server holds too many answer bytes that their clients have "
                                "not read (--max-inflight-mb); retry later");
  }
  cn->answer_held = out.len;
  cn->t_queued = t_encoded; /* "send" ends when libmicrohttpd has sent it (completed) */
  return pr_http__reply(cn, PR_OK, out.body, out.len,
                        out.json_len ? "application/octet-stream" : "application/json",
                        out.json_len);
}

typedef struct {
  const char *body;
  size_t len, json_len;
} http_body_t;

static pr_status_t decode_json(const pr_proto_model_t *m, void *arg, size_t max_bytes,
                               pr_request_t *r, pr_proto_infer_t *q, char *err, size_t err_len) {
  const http_body_t *b = arg;
  return pr__proto_parse_infer(m, b->body, b->len, b->json_len, max_bytes, r, q, err, err_len);
}

/* Moves this (libmicrohttpd pool) thread to the core of a waiting instance
 * of m, if there is one and it is not there yet: the submit then wakes that
 * instance, and the instance's answer this thread, on one core (see
 * pr__sched_home_cpu); it stays there for the requests after, as a
 * connection's next request most often goes the same way. When every
 * instance is busy the thread gets its cores back: under load, parsing
 * pinned to an instance's first core would hold up that instance's team. */
static void colocate(const pr_served_t *m) {
  static __thread int here = -1; /* the core this thread is pinned to */
  static __thread cpu_set_t all; /* its cores before */
  int home = pr__sched_home_cpu(m->sched, sched_getcpu());
  if (home == here) return;
  if (here < 0 && sched_getaffinity(0, sizeof all, &all)) return;
  int moved = home >= 0 ? pr__topology_pin(&home, 1) : sched_setaffinity(0, sizeof all, &all);
  if (!moved) here = home;
}

enum MHD_Result pr_http__infer(pr_server_t *s, struct MHD_Connection *c, conn_t *cn,
                               pr_served_t *m) {
  const char *hl =
      MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Inference-Header-Content-Length");
  http_body_t b = {cn->body ? cn->body : "", cn->len, cn->len};
  if (hl) {
    char *end;
    long long v = strtoll(hl, &end, 10);
    if (*hl < '0' || *hl > '9' || *end || v < 0 || (size_t)v > cn->len) /* digits only */
      return pr_http__reply_error(
          cn, PR_ERR_INVALID, "Inference-Header-Content-Length must be a length within the body");
    b.json_len = (size_t)v;
  }
  char err[512];
  if (s->cfg.http_colocate) colocate(m);
  /* on_answered may run before the submit returns: it only marks the
   * connection answered then, and it is answered here without suspending */
  pr_status_t st =
      pr__infer_submit(&s->svc, m, decode_json, &b, on_answered, cn, &cn->inf, err, sizeof err);
  if (st != PR_OK) { /* with_model puts the reference */
    cn->retry_after_s = cn->inf.retry_after_s;
    return pr_http__reply_error(cn, st, err);
  }
  cn->t_parse = cn->inf.t_parse;
  cn->model = m;
  cn->model_owned = true;
  pthread_mutex_lock(&cn->lock);
  bool now = cn->answered;
  if (!now) {
    suspend_locked(cn);
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci) cn->watch = pr__hangup_add(s->hangup, ci->connect_fd, cn); /* 0: it runs whatever */
  }
  pthread_mutex_unlock(&cn->lock);
  return now ? infer_finish(cn) : MHD_YES;
}

/* The hangup watcher's (hangup.h): the client of a suspended infer
 * connection closed it. Its request leaves the queue if it still waits
 * there (the watch, removed by on_answered before the resume, keeps cn
 * and its request), and is completed PR_ERR_CANCELLED after (its answer
 * resumes the connection, whose 499 goes nowhere); one an instance has
 * taken is completed so unrun while its batch fills (pr__sched_drop), else
 * it runs, and its answer is dropped with the connection. */
bool pr_http__hangup_take(void *item) {
  conn_t *cn = item;
  return pr__sched_drop(cn->inf.model->sched, cn->inf.req);
}

void pr_http__hangup_finish(void *item) {
  conn_t *cn = item;
  pr__sched_cancel(cn->inf.model->sched, cn->inf.req);
}

/* ---- libmicrohttpd callbacks ---- */

/* The headers that frame a body, as every one of them says (libmicrohttpd
 * reads the first of each only). */
typedef struct {
  int count; /* Content-Length headers */
  char first[32];
  bool conflict;
  bool bad_name;   /* a header name with white space ("Content-Length : 5") */
  int te_count;    /* Transfer-Encoding headers */
  bool te_chunked; /* the one there is says exactly "chunked" (libmicrohttpd's test) */
} lengths_t;

static enum MHD_Result count_lengths(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value) {
  (void)kind;
  lengths_t *l = cls;
  if (strpbrk(key, " \t")) l->bad_name = true;
  if (!strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING)) {
    l->te_chunked = l->te_count++ == 0 && value && !strcasecmp(value, "chunked");
    return MHD_YES;
  }
  if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH)) return MHD_YES;
  if (l->count++ == 0)
    snprintf(l->first, sizeof l->first, "%s", value ? value : "");
  else if (!value || strcmp(value, l->first))
    l->conflict = true;
  return MHD_YES;
}

/* First call of a request: the headers are in; decide the route and the
 * limits before any body byte is read. */
static void on_headers(pr_server_t *s, struct MHD_Connection *c, conn_t *cn, const char *method,
                       const char *url) {
  cn->route_status = pr__route_match(s->svc.routes, PR_ROUTE_COUNT, method, url, &cn->route);
  if (cn->encoded_separator) {
    refuse(s, cn, PR_ERR_INVALID,
           "the path holds an encoded '/' or '\\' (%2F or %5C); send the character itself");
    return;
  }
  if (!pr__tls_client_ok(s->tls, c)) {
    refuse(s, cn, PR_ERR_FORBIDDEN, "a client certificate that --tls-client-ca signed is required");
    return;
  }
  if (cn->route_status == PR_OK) {
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    pr_status_t st = pr__auth_check(s->auth, cn->route.row->access, h);
    if (st) {
      refuse(s, cn, st,
             st == PR_ERR_UNAUTHORIZED
                 ? "a valid bearer token is required (Authorization: Bearer TOKEN)"
                 : "this token may not change the server's state; an admin token may");
      return;
    }
  }
  cn->limit = cn->route_status == PR_OK && (cn->route.row->flags & PR_ROUTE_TENSORS)
                  ? s->cfg.max_body_bytes
                  : ADMIN_BODY_MAX;
  const char *hl =
      MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Inference-Header-Content-Length");
  if (hl && *hl >= '0' && *hl <= '9') /* checked when the body is parsed */
    cn->pad = (PR_ALIGN - strtoull(hl, NULL, 10) % PR_ALIGN) % PR_ALIGN;
  lengths_t l = {0};
  MHD_get_connection_values(c, MHD_HEADER_KIND, count_lengths, &l);
  /* framing the server and a proxy could read differently (request
   * smuggling) is refused, and the connection closes after the answer */
  cn->framing = l.conflict || l.bad_name;
  if (l.conflict) {
    refuse(s, cn, PR_ERR_INVALID, "conflicting Content-Length headers");
    return;
  }
  if (l.bad_name) {
    refuse(s, cn, PR_ERR_INVALID, "a header name holds white space");
    return;
  }
  /* RFC 9112 6.3: a final coding other than chunked leaves the body's
   * length unknown (400, and close); a coding before it packrat does not
   * decode either, and chunked twice is not allowed: exactly one
   * Transfer-Encoding header saying `chunked` is served */
  cn->framing = l.te_count && (!l.te_chunked || l.count);
  if (l.te_count && !l.te_chunked) {
    refuse(s, cn, PR_ERR_INVALID,
           l.te_count > 1 ? "more than one Transfer-Encoding header"
                          : "Transfer-Encoding must be exactly 'chunked'");
    return;
  }
  if (l.te_count && l.count) { /* libmicrohttpd would read it chunked, a proxy may not */
    refuse(s, cn, PR_ERR_INVALID, "Transfer-Encoding and Content-Length together");
    return;
  }
  if (!l.count) return;
  char *end;
  unsigned long long len = strtoull(l.first, &end, 10);
  if (*end) return; /* libmicrohttpd refuses a malformed length itself */
  if (len > cn->limit) {
    char msg[160];
    snprintf(msg, sizeof msg,
             "request body of %llu bytes is over the limit of %zu (infer: --max-body-mb; "
             "other routes: 1 MiB)",
             len, cn->limit);
    refuse(s, cn, PR_ERR_TOO_LARGE, msg);
  } else if (atomic_load(&s->svc.inflight) + len > s->cfg.max_inflight_bytes) {
    /* refused now; an accepted body is counted as its bytes arrive, so a
     * client that announces much and sends little holds nothing */
    refuse(s, cn, PR_ERR_BUSY, "the server holds too many request bytes; retry later");
  }
}

/* Grows cn's body to hold at least `need` bytes (doubling, up to the
 * limit; never by what the client only announced, so that a client that
 * announces much and sends little holds little). The body sits `pad` bytes
 * into a 64-byte aligned block, so that the binary tensors after an
 * Inference-Header-Content-Length JSON part start on a 64-byte line and the
 * scheduler can hand them to the engine where they are (no copy). */
static bool body_room(conn_t *cn, size_t need) {
  size_t cap = need * 2;
  if (cap > cn->limit + 1) cap = cn->limit + 1;
  if (cap < need) cap = need;
  char *nb = pr__aligned_alloc(cn->pad + cap);
  if (!nb) return false;
  if (cn->len) memcpy(nb + cn->pad, cn->body, cn->len);
  pr__free(cn->base);
  cn->base = nb;
  cn->body = nb + cn->pad;
  cn->cap = cap;
  return true;
}

static void on_upload(pr_server_t *s, conn_t *cn, const char *data, size_t n) {
  if (cn->refuse_status) return;
  if (cn->len + n > cn->limit) {
    char msg[160];
    snprintf(msg, sizeof msg,
             "request body over the limit of %zu bytes (infer: --max-body-mb; other routes: 1 MiB)",
             cn->limit);
    refuse(s, cn, PR_ERR_TOO_LARGE, msg);
    return;
  }
  /* bodies are counted as their bytes arrive */
  if (cn->len + n > cn->reserved && !reserve(s, cn, cn->len + n - cn->reserved)) {
    refuse(s, cn, PR_ERR_BUSY, "the server holds too many request bytes; retry later");
    return;
  }
  if (cn->len + n + 1 > cn->cap && !body_room(cn, cn->len + n + 1)) {
    refuse(s, cn, PR_ERR_BUSY, "out of memory; retry later");
    return;
  }
  memcpy(cn->body + cn->len, data, n);
  cn->len += n;
}

/* ---- deferred admin handlers (see "suspended requests") ---- */

/* At most this many admin calls run at once; more are answered 503. */
#define MAX_ADMIN_THREADS 32

static void *deferred_main(void *arg) {
  conn_t *cn = arg;
  if (cn->route.row->handler(cn->s, cn->c, cn) != MHD_YES && !cn->resp)
    pr_http__reply_static(cn, PR_ERR_NOMEM, "{\"error\":\"out of memory\"}");
  atomic_fetch_sub(&cn->s->admin_threads, 1);
  on_answered(cn);
  return NULL;
}

static enum MHD_Result defer(pr_server_t *s, conn_t *cn) {
  if (atomic_fetch_add(&s->admin_threads, 1) >= MAX_ADMIN_THREADS) {
    atomic_fetch_sub(&s->admin_threads, 1);
    return pr_http__reply_error(cn, PR_ERR_BUSY,
                                "too many repository and plan calls at once; retry later");
  }
  pthread_attr_t attr;
  pthread_t t;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_mutex_lock(&cn->lock);
  cn->deferred = true;
  bool started = pthread_create(&t, &attr, deferred_main, cn) == 0;
  if (started) suspend_locked(cn);
  pthread_mutex_unlock(&cn->lock);
  pthread_attr_destroy(&attr);
  if (started) return MHD_YES;
  cn->deferred = false;
  atomic_fetch_sub(&s->admin_threads, 1);
  return pr_http__reply_error(cn, PR_ERR_NOMEM, "cannot start a thread for the call");
}

static enum MHD_Result deferred_finish(conn_t *cn) {
  struct MHD_Response *r = cn->resp;
  cn->resp = NULL;
  cn->deferred = false;
  enum MHD_Result ret = MHD_queue_response(cn->c, cn->resp_code, r);
  MHD_destroy_response(r);
  return ret;
}

enum MHD_Result pr_http__access(void *cls, struct MHD_Connection *c, const char *url,
                                const char *method, const char *version, const char *upload,
                                size_t *upload_size, void **con_cls) {
  pr_server_t *s = cls;
  conn_t *cn = *con_cls;
  if (!cn || !cn->c) { /* the request's first call (uri_log made cn, unless out of memory) */
    if (!cn && !(cn = conn_new(s))) return MHD_NO;
    cn->c = c;
    *con_cls = cn;
    atomic_fetch_add(&s->http_requests, 1);
    atomic_fetch_add(&s->in_progress, 1);
    /* the connection's first request: no longer fresh (counted in progress
     * first, so a drain never sees it as neither) */
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    bool *fresh = ci ? ci->socket_context : NULL;
    if (fresh && *fresh) {
      *fresh = false;
      atomic_fetch_sub(&s->fresh, 1);
    }
    on_headers(s, c, cn, method, url);
    /* refused from the headers: answer now, the body is never read */
    if (cn->refuse_status) return pr_http__reply_error(cn, cn->refuse_status, cn->refuse_msg);
    return MHD_YES;
  }
  /* resumed: the answer was made elsewhere */
  if (cn->inf.req) return infer_finish(cn);
  if (cn->deferred) return cn->resp ? deferred_finish(cn) : MHD_NO;
  if (*upload_size) {
    /* over a limit mid-body: the rest is read and dropped, and the error is
     * the answer (libmicrohttpd answers only once the body is in); a body
     * that goes on past twice its limit is cut off by closing */
    if (cn->refuse_status && (cn->dropped += *upload_size) > 2 * cn->limit) return MHD_NO;
    on_upload(s, cn, upload, *upload_size);
    *upload_size = 0;
    return MHD_YES;
  }
  if (!cn->serving) {
    cn->serving = true;
    atomic_fetch_add(&s->serving, 1);
  }
  if (cn->refuse_status) return pr_http__reply_error(cn, cn->refuse_status, cn->refuse_msg);
  if (cn->route_status != PR_OK)
    return pr_http__reply_error(cn, cn->route_status,
                                cn->route_status == PR_ERR_NOT_FOUND ? "not found"
                                : cn->route_status == PR_ERR_METHOD  ? "method not allowed here"
                                                                     : "URL too long");
  /* a handler may suspend the connection, which libmicrohttpd must not
   * have once it stops: past the drain's last wait (s->closing) none runs */
  atomic_fetch_add(&s->entering, 1);
  enum MHD_Result r;
  if (atomic_load(&s->closing))
    r = pr_http__reply_error(cn, PR_ERR_BUSY, "the server is shutting down");
  else
    r = (cn->route.row->flags & PR_ROUTE_SLOW) ? defer(s, cn) : cn->route.row->handler(s, c, cn);
  atomic_fetch_sub(&s->entering, 1);
  return r;
}

void *pr_http__uri_log(void *cls, const char *uri, struct MHD_Connection *c) {
  (void)c;
  conn_t *cn = conn_new(cls);
  if (cn) cn->encoded_separator = encoded_separator(uri);
  return cn;
}

void pr_http__completed(void *cls, struct MHD_Connection *c, void **con_cls,
                        enum MHD_RequestTerminationCode t) {
  pr_server_t *s = cls;
  conn_t *cn = *con_cls;
  if (cn && !cn->c) { /* libmicrohttpd refused it before the first call (its own answer) */
    pthread_mutex_destroy(&cn->lock);
    free(cn);
  } else if (cn) {
    /* an answer that came before the handler suspended may still be
     * leaving on_answered */
    pthread_mutex_lock(&cn->lock);
    pthread_mutex_unlock(&cn->lock);
    infer_release(cn);
    if (cn->model) {
      if (cn->t_queued > 0 && t == MHD_REQUEST_TERMINATED_COMPLETED_OK) {
        pr_sched_stats_t *stats = pr__sched_stats(cn->model->sched);
        double now = pr__now();
        pr__hist_observe(&stats->stage[PR_STAGE_send], now - cn->t_queued);
        pr__hist_observe(&stats->overhead_s, now - cn->t_parse - cn->compute_s);
      }
      pr__models_put(cn->model);
    }
    if (cn->resp) MHD_destroy_response(cn->resp);
    pthread_mutex_destroy(&cn->lock);
    pr__service_release(&s->svc, cn->reserved);
    pr__service_answer_gone(&s->svc, cn->answer_held); /* sent, or the connection is gone */
    if (cn->serving) atomic_fetch_sub(&s->serving, 1);
    pr__free(cn->base);
    free(cn);
    atomic_fetch_sub(&s->in_progress, 1);
  }
  *con_cls = NULL;
}

/* A connection's socket context is a flag, set while it has not sent a
 * request (s->fresh counts them): only its own thread reads or writes it. */
void pr_http__on_connection(void *cls, struct MHD_Connection *c, void **socket_ctx,
                            enum MHD_ConnectionNotificationCode code) {
  (void)c;
  pr_server_t *s = cls;
  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    atomic_fetch_add(&s->connections, 1);
    bool *fresh = malloc(sizeof *fresh); /* out of memory: not waited for */
    if (fresh) {
      *fresh = true;
      atomic_fetch_add(&s->fresh, 1);
    }
    *socket_ctx = fresh;
    atomic_fetch_sub(&s->handed, 1); /* counted fresh first */
    return;
  }
  bool *fresh = *socket_ctx;
  if (fresh && *fresh) atomic_fetch_sub(&s->fresh, 1);
  free(fresh);
  *socket_ctx = NULL;
  atomic_fetch_sub(&s->connections, 1);
}
