#include "server/router.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

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

/* pattern with its bracketed part left out (with = false) or kept, the
 * brackets dropped, into out; false when it has no bracketed part and
 * with is asked for. */
static bool form(const char *pattern, bool with, char *out, size_t len) {
  const char *open = strchr(pattern, '['), *close = open ? strchr(open, ']') : NULL;
  if (!open || !close) {
    snprintf(out, len, "%s", pattern);
    return !with;
  }
  snprintf(out, len, "%.*s%.*s%s", (int)(open - pattern), pattern,
           with ? (int)(close - open - 1) : 0, open + 1, close + 1);
  return true;
}

/* Whether the pattern form pat matches the path's n segments seg; its
 * captures in *model, *version and their count in *captures. */
static bool same_path(char *pat, char **seg, int n, const char **model, const char **version,
                      int *captures) {
  char *pseg[PR_ROUTE_MAX_SEGMENTS];
  if (split(pat, pseg) != n) return false;
  *model = *version = NULL;
  *captures = 0;
  for (int i = 0; i < n; i++) {
    if (!strcmp(pseg[i], "{m}"))
      *model = seg[i], ++*captures;
    else if (!strcmp(pseg[i], "{v}"))
      *version = seg[i], ++*captures;
    else if (strcmp(pseg[i], seg[i]))
      return false;
  }
  return true;
}

pr_status_t pr__route_match(const pr_route_row_t *rows, int n_rows, const char *method,
                            const char *path, pr_route_t *out) {
  size_t len = strlen(path);
  if (len >= sizeof out->buf) return PR_ERR_URI_TOO_LONG;
  memcpy(out->buf, path, len + 1);
  char *seg[PR_ROUTE_MAX_SEGMENTS];
  int n = split(out->buf, seg);
  if (n < 0) return PR_ERR_NOT_FOUND;
  pr_status_t status = PR_ERR_NOT_FOUND;
  int best = -1, best_captures = 0;
  for (int r = 0; r < n_rows; r++) {
    const pr_route_row_t *row = &rows[r];
    bool method_ok =
        !strcmp(row->method, method) || (!strcmp(method, "HEAD") && (row->flags & PR_ROUTE_HEAD));
    for (int with = 0; with < 2; with++) {
      char pat[128];
      const char *model, *version;
      int captures;
      if (!form(row->pattern, with, pat, sizeof pat) ||
          !same_path(pat, seg, n, &model, &version, &captures))
        continue;
      if (!method_ok) {
        status = PR_ERR_METHOD;
        continue;
      }
      if (best < 0 || captures < best_captures) {
        best = r, best_captures = captures;
        out->model = model;
        out->version = version;
      }
    }
  }
  if (best < 0) return status;
  out->id = (pr_route_id_t)best;
  out->row = &rows[best];
  return PR_OK;
}
