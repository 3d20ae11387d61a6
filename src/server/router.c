#include "server/router.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static const struct {
  const char *method, *pattern;
  pr_route_id_t id;
} routes[] = {
    {"GET", "/metrics", PR_ROUTE_METRICS},
    {"GET", "/v2", PR_ROUTE_SERVER_META},
    {"GET", "/v2/health/live", PR_ROUTE_LIVE},
    {"GET", "/v2/health/ready", PR_ROUTE_READY},
    {"POST", "/v2/repository/index", PR_ROUTE_REPO_INDEX},
    {"POST", "/v2/repository/models/{m}/load", PR_ROUTE_REPO_LOAD},
    {"POST", "/v2/repository/models/{m}/unload", PR_ROUTE_REPO_UNLOAD},
    {"GET", "/v2/models/stats", PR_ROUTE_STATS_ALL}, /* before {m}: first match wins */
    {"GET", "/v2/models/{m}", PR_ROUTE_MODEL_META},
    {"GET", "/v2/models/{m}/versions/{v}", PR_ROUTE_MODEL_META},
    {"GET", "/v2/models/{m}/ready", PR_ROUTE_MODEL_READY},
    {"GET", "/v2/models/{m}/versions/{v}/ready", PR_ROUTE_MODEL_READY},
    {"POST", "/v2/models/{m}/infer", PR_ROUTE_INFER},
    {"POST", "/v2/models/{m}/versions/{v}/infer", PR_ROUTE_INFER},
    {"GET", "/v2/models/{m}/stats", PR_ROUTE_STATS},
    {"GET", "/v2/models/{m}/versions/{v}/stats", PR_ROUTE_STATS},
    {"GET", "/v2/models/{m}/config", PR_ROUTE_MODEL_CONFIG},
    {"GET", "/v2/models/{m}/versions/{v}/config", PR_ROUTE_MODEL_CONFIG},
    {"GET", "/v2/models/{m}/plan", PR_ROUTE_PLAN_GET},
    {"POST", "/v2/models/{m}/plan", PR_ROUTE_PLAN_POST},
    {"GET", "/v2/plan", PR_ROUTE_HOST_PLAN},
    {"GET", "/", PR_ROUTE_DASH_PAGE},
    {"GET", "/dashboard/app.js", PR_ROUTE_DASH_SCRIPT},
    {"GET", "/dashboard/style.css", PR_ROUTE_DASH_STYLE},
    {"GET", "/dashboard/state", PR_ROUTE_DASH_STATE},
};
_Static_assert(sizeof routes / sizeof routes[0] == PR_ROUTE_COUNT + 5,
               "every route once, plus the five /versions/{v} forms");

/* Splits path at '/' into seg (empty segments dropped); -1 when too many. */
static int split(char *path, char **seg) {
  int n = 0;
  for (char *p = path; *p;) {
    while (*p == '/') *p++ = 0;
    if (!*p) break;
    if (n == PR_ROUTE_MAX_SEGMENTS) return -1;
    seg[n++] = p;
    while (*p && *p != '/') p++;
  }
  return n;
}

pr_status_t pr_route_match(const char *method, const char *path, pr_route_t *out) {
  size_t len = strlen(path);
  if (len >= sizeof out->buf) return PR_ERR_URI_TOO_LONG;
  memcpy(out->buf, path, len + 1);
  char *seg[PR_ROUTE_MAX_SEGMENTS];
  int n = split(out->buf, seg);
  if (n < 0) return PR_ERR_NOT_FOUND;
  const char *m = !strcmp(method, "HEAD") ? "GET" : method;
  pr_status_t status = PR_ERR_NOT_FOUND;
  for (size_t r = 0; r < sizeof routes / sizeof routes[0]; r++) {
    char pat[64], *pseg[PR_ROUTE_MAX_SEGMENTS];
    snprintf(pat, sizeof pat, "%s", routes[r].pattern);
    int pn = split(pat, pseg);
    if (pn != n) continue;
    const char *model = NULL, *version = NULL;
    bool same = true;
    for (int i = 0; i < n && same; i++) {
      if (!strcmp(pseg[i], "{m}"))
        model = seg[i];
      else if (!strcmp(pseg[i], "{v}"))
        version = seg[i];
      else
        same = !strcmp(pseg[i], seg[i]);
    }
    if (!same) continue;
    if (strcmp(routes[r].method, m)) {
      status = PR_ERR_METHOD;
      continue;
    }
    out->id = routes[r].id;
    out->model = model;
    out->version = version;
    return PR_OK;
  }
  return status;
}

pr_route_access_t pr_route_access(pr_route_id_t id) {
  switch (id) {
    case PR_ROUTE_LIVE:
    case PR_ROUTE_READY:
    case PR_ROUTE_MODEL_READY:
    case PR_ROUTE_DASH_PAGE:
    case PR_ROUTE_DASH_SCRIPT:
    case PR_ROUTE_DASH_STYLE: return PR_ACCESS_OPEN;
    case PR_ROUTE_METRICS:
    case PR_ROUTE_SERVER_META:
    case PR_ROUTE_REPO_INDEX:
    case PR_ROUTE_MODEL_META:
    case PR_ROUTE_INFER:
    case PR_ROUTE_STATS:
    case PR_ROUTE_STATS_ALL:
    case PR_ROUTE_MODEL_CONFIG:
    case PR_ROUTE_PLAN_GET:
    case PR_ROUTE_HOST_PLAN:
    case PR_ROUTE_DASH_STATE: return PR_ACCESS_READ;
    case PR_ROUTE_REPO_LOAD:
    case PR_ROUTE_REPO_UNLOAD:
    case PR_ROUTE_PLAN_POST:
    case PR_ROUTE_COUNT: break;
  }
  return PR_ACCESS_ADMIN; /* and anything unknown */
}

int pr_route_takes_tensors(pr_route_id_t id) {
  return id == PR_ROUTE_INFER;
}

int pr_route_is_slow(pr_route_id_t id) {
  return id == PR_ROUTE_REPO_LOAD || id == PR_ROUTE_REPO_UNLOAD || id == PR_ROUTE_PLAN_POST;
}
