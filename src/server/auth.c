/* Bearer tokens (see auth.h). */
#include "server/auth.h"

#include <errno.h>
#include <nettle/sha2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/log.h"
#include "base/util.h"

#define MAX_TOKENS 1024
#define TOKEN_MIN 16
#define TOKEN_MAX 4096

typedef struct {
  int n;
  unsigned char (*digest)[SHA256_DIGEST_SIZE];
} token_set_t;

struct pr_auth {
  token_set_t read, admin;
};

static void digest_of(const char *tok, size_t len, unsigned char out[SHA256_DIGEST_SIZE]) {
  struct sha256_ctx ctx;
  sha256_init(&ctx);
  sha256_update(&ctx, len, (const uint8_t *)tok);
  sha256_digest(&ctx, SHA256_DIGEST_SIZE, out);
}

/* One line of a token file: trimmed, checked; 1 a token, 0 skipped, -1 bad. */
static int parse_line(char *line, size_t *len) {
  char *p = line;
  while (*p == ' ' || *p == '\t') p++;
  size_t n = strlen(p);
  while (n && (p[n - 1] == '\n' || p[n - 1] == '\r' || p[n - 1] == ' ' || p[n - 1] == '\t')) n--;
  memmove(line, p, n);
  line[n] = 0;
  *len = n;
  if (n == 0 || line[0] == '#') return 0;
  if (n < TOKEN_MIN || n > TOKEN_MAX) return -1;
  for (size_t i = 0; i < n; i++)
    if (line[i] <= ' ' || line[i] > '~') return -1;
  return 1;
}

static pr_status_t load_file(const char *path, token_set_t *set, char *err, size_t err_len) {
  FILE *f = pr__fopen_regular(path);
  if (!f) {
    pr__errf(err, err_len, "cannot read the token file %s: %s", path, pr__file_error(errno));
    return PR_ERR_IO;
  }
  char *line = malloc(TOKEN_MAX + 64);
  set->digest = calloc(MAX_TOKENS, sizeof *set->digest);
  pr_status_t st = line && set->digest ? PR_OK : PR_ERR_NOMEM;
  for (int lineno = 1; st == PR_OK && fgets(line, TOKEN_MAX + 64, f); lineno++) {
    size_t len;
    int r = parse_line(line, &len);
    if (r < 0) {
      /* the token itself is never echoed */
      pr__errf(err, err_len, "%s line %d: a token is %d to %d printable characters, no spaces",
               path, lineno, TOKEN_MIN, TOKEN_MAX);
      st = PR_ERR_INVALID;
    } else if (r == 1 && set->n == MAX_TOKENS) {
      pr__errf(err, err_len, "%s: more than %d tokens", path, MAX_TOKENS);
      st = PR_ERR_INVALID;
    } else if (r == 1) {
      digest_of(line, len, set->digest[set->n++]);
    }
  }
  if (st == PR_OK && set->n == 0) {
    pr__errf(err, err_len, "%s holds no token", path);
    st = PR_ERR_INVALID;
  }
  if (line) memset(line, 0, TOKEN_MAX + 64);
  free(line);
  fclose(f);
  return st;
}

pr_status_t pr__auth_load(const char *read_file, const char *admin_file, pr_auth_t **out, char *err,
                          size_t err_len) {
  *out = NULL;
  if (!read_file && !admin_file) return PR_OK;
  pr_auth_t *a = calloc(1, sizeof *a);
  if (!a) return PR_ERR_NOMEM;
  pr_status_t st = PR_OK;
  if (read_file) st = load_file(read_file, &a->read, err, err_len);
  if (!st && admin_file) st = load_file(admin_file, &a->admin, err, err_len);
  if (st) {
    pr__auth_free(a);
    return st;
  }
  *out = a;
  return PR_OK;
}

void pr__auth_free(pr_auth_t *a) {
  if (!a) return;
  free(a->read.digest);
  free(a->admin.digest);
  free(a);
}

/* Whether d is in set, looking at every entry whatever matches. */
static bool in_set(const token_set_t *set, const unsigned char d[SHA256_DIGEST_SIZE]) {
  unsigned found = 0;
  for (int i = 0; i < set->n; i++) {
    unsigned diff = 0;
    for (int k = 0; k < SHA256_DIGEST_SIZE; k++) diff |= set->digest[i][k] ^ d[k];
    found |= (unsigned)(diff == 0);
  }
  return found != 0;
}

pr_status_t pr__auth_check(const pr_auth_t *a, pr_route_access_t need, const char *authorization) {
  if (!a || need == PR_ACCESS_OPEN) return PR_OK;
  const token_set_t *want = need == PR_ACCESS_ADMIN && a->admin.n ? &a->admin : &a->read;
  if (want->n == 0) return PR_OK; /* that class has no token file: open */
  const char *tok = authorization;
  if (!tok || strncasecmp(tok, "Bearer ", 7)) return PR_ERR_UNAUTHORIZED;
  tok += 7;
  while (*tok == ' ') tok++;
  size_t len = strnlen(tok, TOKEN_MAX + 1);
  unsigned char d[SHA256_DIGEST_SIZE];
  digest_of(tok, len, d);
  bool admin = in_set(&a->admin, d), read = in_set(&a->read, d);
  if (need == PR_ACCESS_ADMIN)
    return admin || (!a->admin.n && read) ? PR_OK : read ? PR_ERR_FORBIDDEN : PR_ERR_UNAUTHORIZED;
  return read || admin ? PR_OK : PR_ERR_UNAUTHORIZED;
}
