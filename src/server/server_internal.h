/* The server's internals, shared by server.c (the route handlers, start
 * and stop) and http.c (the libmicrohttpd callbacks: headers, bodies,
 * replies, suspended requests). Nothing else includes this. The threads and
 * locks are described at the top of server.c and http.c. */
#ifndef PR_SERVER_SERVER_INTERNAL_H
#define PR_SERVER_SERVER_INTERNAL_H

#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>

#include "server/auth.h"
#include "server/dashboard.h"
#include "server/grpc.h"
#include "server/hangup.h"
#include "server/listener.h"
#include "server/router.h"
#include "server/server.h"
#include "server/service.h"
#include "server/tls.h"

/* On SIGTERM, uploads still arriving get this long to finish, and
 * connections that have not sent their first request yet this long to send
 * it (one that has not by then was not about to). */
#define SHUTDOWN_UPLOAD_GRACE_S 10.0
#define SHUTDOWN_FRESH_GRACE_S 2.0

struct pr_server {
  pr_server_config_t cfg;
  char repository[4096];
  int cpus[4096], n_cpus;
  pr_service_t svc;             /* shared with the gRPC front end */
  pr_auth_t *auth;              /* NULL: no tokens (svc.auth) */
  pr_grpc_t *grpc;              /* NULL: no gRPC */
  pr_tls_t *tls;                /* NULL: plain HTTP */
  struct sockaddr_storage addr; /* where to listen */
  pr_dash_t *dash;
  double started; /* pr__now() at start */
  struct MHD_Daemon *daemon;
  pr_listener_t *listener; /* accepts for the daemon (NULL once draining) */
  pr_hangup_t *hangup;     /* watches suspended infer connections for their client's close */
  int port;
  _Atomic uint64_t http_requests, http_errors, http_refused;
  _Atomic int in_progress;   /* requests received and not yet answered */
  _Atomic int serving;       /* of those, the ones whose body is in (being handled) */
  _Atomic int connections;   /* open HTTP connections */
  _Atomic int suspended;     /* connections waiting for an answer made elsewhere */
  _Atomic int admin_threads; /* deferred admin handlers running */
  _Atomic bool stopping;     /* draining: every answer closes its connection */
  /* connections handed to libmicrohttpd that it has not started yet, and
   * started ones that have not sent a request yet: their requests are on
   * the way (a balancer's fresh connection), and the drain waits for them */
  _Atomic int handed;
  _Atomic int fresh;
  /* the drain's end: no handler starts after `closing`; `entering` counts
   * the ones running (http.c) */
  _Atomic bool closing;
  _Atomic int entering;
};

/* ---- per-request state ---- */

typedef struct pr_http_conn {
  pr_server_t *s;
  struct MHD_Connection *c; /* NULL until the request's first call (pr_http__access) */
  /* the raw path holds %2F or %5C (pr_http__uri_log saw it before
   * libmicrohttpd decoded it): refused */
  bool encoded_separator;
  pr_route_t route;
  pr_status_t route_status;  /* of pr__route_match */
  char *body;                /* base + pad: see body_room */
  char *base;                /* the allocation (pr__aligned_alloc) */
  size_t len, cap, limit;    /* cap: bytes of body's room */
  size_t pad;                /* puts the body's binary part on a 64-byte line */
  size_t reserved;           /* bytes counted in s->inflight */
  size_t answer_held;        /* its infer answer's bytes (pr__service_answer_hold) until sent */
  size_t dropped;            /* body bytes read after a refusal */
  bool serving;              /* counted in s->serving */
  pr_status_t refuse_status; /* != PR_OK: answer this instead of routing */
  char refuse_msg[160];
  bool framing; /* refused for the body's framing: the answer closes the connection */
  /* a request answered off the connection's thread (see "suspended
   * requests" above): `lock` orders suspend and resume */
  pthread_mutex_t lock;
  bool suspended, answered;
  uint64_t watch;            /* while suspended for an infer answer: its hangup watch */
  pr_infer_t inf;            /* an infer request in the scheduler (inf.req) */
  pr_served_t *model;        /* the reference held for it */
  bool model_owned;          /* the reference is the request's (with_model leaves it) */
  double retry_after_s;      /* of a 503 answer: its Retry-After (0: 1 s) */
  double t_queued;           /* when its infer answer was queued (0: none) */
  double t_parse, compute_s; /* its body's parse began; its batch's compute */
  bool deferred;             /* an admin handler running on its own thread */
  struct MHD_Response *resp; /* the deferred handler's answer */
  unsigned resp_code;
} conn_t;

/* ---- http.c ---- */

/* Queues (or keeps, for a deferred handler) the answer r with the
 * protocol's HTTP status for st. */
enum MHD_Result pr_http__deliver(conn_t *cn, pr_status_t st, struct MHD_Response *r);
/* Answers with body (malloc'ed, taken over) of type; json_len: the JSON
 * part's length of a binary answer (0: none). */
enum MHD_Result pr_http__reply(conn_t *cn, pr_status_t st, char *body, size_t len, const char *type,
                               size_t json_len);
enum MHD_Result pr_http__reply_static(conn_t *cn, pr_status_t st, const char *body);
/* o may be NULL (a json_pack that failed): PR_ERR_NOMEM. Takes o. */
enum MHD_Result pr_http__reply_json(conn_t *cn, pr_status_t st, json_t *o);
enum MHD_Result pr_http__reply_error(conn_t *cn, pr_status_t st, const char *msg);
/* An infer request for model m (a reference with_model holds): decoded,
 * queued, its connection suspended until the scheduler answers. */
enum MHD_Result pr_http__infer(pr_server_t *s, struct MHD_Connection *c, conn_t *cn,
                               pr_served_t *m);
/* libmicrohttpd's callbacks (cls: the server). uri_log sees a request's
 * raw target first, before libmicrohttpd decodes it: its conn_t starts
 * there (the access handler's *con_cls). */
void *pr_http__uri_log(void *cls, const char *uri, struct MHD_Connection *c);
enum MHD_Result pr_http__access(void *cls, struct MHD_Connection *c, const char *url,
                                const char *method, const char *version, const char *upload,
                                size_t *upload_size, void **con_cls);
/* The hangup watcher's callbacks (hangup.h) for suspended infer connections. */
bool pr_http__hangup_take(void *item);
void pr_http__hangup_finish(void *item);
void pr_http__completed(void *cls, struct MHD_Connection *c, void **con_cls,
                        enum MHD_RequestTerminationCode t);
void pr_http__on_connection(void *cls, struct MHD_Connection *c, void **socket_ctx,
                            enum MHD_ConnectionNotificationCode code);

#endif
