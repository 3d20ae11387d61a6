/* The HTTP routes: one table of {method, pattern, route}, matched against a
 * request's method and path. Pure: no I/O, no allocation. Patterns are
 * '/'-separated segments; "{m}" captures a model name, "{v}" a version.
 * HEAD matches every GET route (libmicrohttpd sends the headers only). */
#ifndef PR_SERVER_ROUTER_H
#define PR_SERVER_ROUTER_H

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
pr_route_access_t pr_route_access(pr_route_id_t id);

#define PR_ROUTE_MAX_SEGMENTS 8

typedef struct {
  pr_route_id_t id;
  const char *model;   /* "{m}", NULL when the route has none */
  const char *version; /* "{v}", NULL when not given */
  char buf[2048];      /* the path's segments, NUL-separated; model/version point here */
} pr_route_t;

/* Matches method and path (already percent-decoded, no query). Returns PR_OK
 * with *out filled, PR_ERR_NOT_FOUND when no route has that path (nor any
 * path of more than PR_ROUTE_MAX_SEGMENTS segments), PR_ERR_METHOD when a
 * route has the path but not the method, PR_ERR_URI_TOO_LONG when the path
 * is longer than out->buf. */
pr_status_t pr_route_match(const char *method, const char *path, pr_route_t *out);

/* Whether a route's request body is tensor data (bounded by the body limit);
 * other routes take small JSON bodies only. */
int pr_route_takes_tensors(pr_route_id_t id);

/* Whether a route's handler may take long (loading a model, preparing a
 * plan's sessions): it runs off the HTTP threads. */
int pr_route_is_slow(pr_route_id_t id);

#endif
