/* The HTTP routes: a table of one row per route (method, path pattern,
 * access class, flags, handler), and the matcher of a request's method and
 * path against such a table. Pure: no I/O, no allocation. */
#ifndef PR_SERVER_ROUTER_H
#define PR_SERVER_ROUTER_H

#include <microhttpd.h>
#include <stddef.h>

#include "server/status.h"

typedef enum {
  PR_ROUTE_METRICS,
  PR_ROUTE_SERVER_META,
  PR_ROUTE_LIVE,
  PR_ROUTE_READY,
  PR_ROUTE_REPO_INDEX,
  PR_ROUTE_REPO_LOAD,
  PR_ROUTE_REPO_UNLOAD,
  PR_ROUTE_MODEL_META,
  PR_ROUTE_MODEL_READY,
  PR_ROUTE_INFER,
  PR_ROUTE_STATS,
  PR_ROUTE_STATS_ALL,    /* GET /v2/models/stats: every ready model's */
  PR_ROUTE_MODEL_CONFIG, /* the effective configuration */
  PR_ROUTE_PLAN_GET,
  PR_ROUTE_PLAN_POST,
  PR_ROUTE_HOST_PLAN,   /* GET /v2/plan: every model's share of the cores and plan */
  PR_ROUTE_DASH_PAGE,   /* GET /: the dashboard (server/dashboard.h) */
  PR_ROUTE_DASH_SCRIPT, /* its script and style sheet */
  PR_ROUTE_DASH_STYLE,
  PR_ROUTE_DASH_STATE, /* the JSON state it polls */
  PR_ROUTE_COUNT
} pr_route_id_t;

/* Who may call a route (server/auth.h): anyone, holders of a read token,
 * holders of an admin token. */
typedef enum { PR_ACCESS_OPEN, PR_ACCESS_READ, PR_ACCESS_ADMIN } pr_route_access_t;

/* What else a route's row says of it. */
enum {
  PR_ROUTE_HEAD = 1,    /* a GET route HEAD matches too (libmicrohttpd sends the headers only) */
  PR_ROUTE_TENSORS = 2, /* its body is tensor data (bounded by the body limit), not small JSON */
  PR_ROUTE_SLOW =
      4, /* its handler may take long (a load, a plan's sessions): off the HTTP threads */
};

struct pr_server;
struct pr_http_conn;
typedef enum MHD_Result (*pr_route_handler_fn)(struct pr_server *s, struct MHD_Connection *c,
                                               struct pr_http_conn *cn);

/* One row per route: everything the front ends know of it. The pattern is
 * '/'-separated segments, "{m}" capturing a model name and "{v}" a
 * version; a part in brackets is optional ("/v2/models/{m}[/versions/{v}]"
 * matches both forms). The server's table (server.c) is indexed by
 * pr_route_id_t; gRPC reads a method's access and flags from its REST
 * twin's row. */
typedef struct {
  const char *method, *pattern;
  pr_route_access_t access;
  unsigned flags;
  pr_route_handler_fn handler; /* the HTTP handler (NULL in a table of tests) */
} pr_route_row_t;

/* The server's routes, in pr_route_id_t order (server.c). */
extern const pr_route_row_t pr__http_routes[PR_ROUTE_COUNT];

#define PR_ROUTE_MAX_SEGMENTS 8

typedef struct {
  pr_route_id_t id; /* the row's index */
  const pr_route_row_t *row;
  const char *model;   /* "{m}", NULL when the route has none */
  const char *version; /* "{v}", NULL when not given */
  char buf[2048];      /* the path's segments, NUL-separated; model/version point here */
} pr_route_t;

/* Matches method and path (already percent-decoded, no query) against
 * rows[0..n): where several rows match the path, the one with the fewest
 * captures ("/v2/models/stats" before "/v2/models/{m}"), then the first.
 * Returns PR_OK with *out filled, PR_ERR_NOT_FOUND when no row has that
 * path (nor any path of more than PR_ROUTE_MAX_SEGMENTS segments),
 * PR_ERR_METHOD when a row has the path but not the method, and
 * PR_ERR_URI_TOO_LONG when the path is longer than out->buf. */
pr_status_t pr__route_match(const pr_route_row_t *rows, int n, const char *method, const char *path,
                            pr_route_t *out);

#endif
