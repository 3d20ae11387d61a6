/* Bearer tokens: who may call what.
 *
 * Routes are open (health, readiness, the dashboard's page), read (infer,
 * metadata, statistics, metrics, the repository index, the dashboard's
 * state) or admin (loading and unloading models, pinning plans: anything
 * that changes state); router.c says which. With --auth-token-file, read
 * routes need one of its tokens (or an admin token); with
 * --admin-token-file, admin routes need one of its tokens (without it, any
 * read token passes there too). No file: that class is open.
 *
 * Notes on the design:
 * - Token files: one token a line, '#' comments and blank lines skipped;
 *   a token is 16 to 4096 printable ASCII bytes without spaces. A file that
 *   cannot be read or holds no token is an error at start.
 * - Only SHA-256 digests of the tokens are kept; a presented token is
 *   hashed and compared with every stored digest in constant time, so
 *   neither a token's bytes nor its length leak through timing. Tokens are
 *   never logged or echoed in an answer.
 * - Read-only after pr__auth_load: any thread may check. */
#ifndef PR_SERVER_AUTH_H
#define PR_SERVER_AUTH_H

#include "server/router.h"

typedef struct pr_auth pr_auth_t;

/* Loads the token files (either may be NULL). *out is NULL when both are. */
pr_status_t pr__auth_load(const char *read_file, const char *admin_file, pr_auth_t **out, char *err,
                          size_t err_len);
void pr__auth_free(pr_auth_t *a);

/* Whether a request with this Authorization header value (may be NULL) may
 * use a route of class `need`: PR_OK, PR_ERR_UNAUTHORIZED (no token, or
 * one that is not known), PR_ERR_FORBIDDEN (a read token on an admin
 * route). A NULL auth allows everything. */
pr_status_t pr__auth_check(const pr_auth_t *a, pr_route_access_t need, const char *authorization);

#endif
