/* Bearer tokens (src/server/auth.c): token files are read strictly, a
 * request is let through only with a known token of the right class, and
 * the classes nest (an admin token reads too). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/auth.h"

#define READ_TOK "read-token-0123456789abcdef"
#define ADMIN_TOK "admin-token-0123456789abcdef"

static char *write_file(const char *text) {
  char *path = strdup("/tmp/packrat-auth-XXXXXX");
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
  return path;
}

static pr_auth_t *load(const char *read_text, const char *admin_text) {
  char *r = read_text ? write_file(read_text) : NULL,
       *a = admin_text ? write_file(admin_text) : NULL;
  char err[256] = "";
  pr_auth_t *auth = NULL;
  pr_status_t st = pr__auth_load(r, a, &auth, err, sizeof err);
  if (r) unlink(r);
  if (a) unlink(a);
  free(r);
  free(a);
  if (st) fail_msg("%s", err);
  return auth;
}

static void test_files(void **state) {
  char err[256];
  pr_auth_t *a = NULL;
  assert_int_equal(pr__auth_load(NULL, NULL, &a, err, sizeof err), PR_OK);
  assert_null(a);
  assert_int_equal(pr__auth_load("/nonexistent/tokens", NULL, &a, err, sizeof err), PR_ERR_IO);
  static const char *const bad[] = {"# only a comment\n\n", "short\n",
                                    "has a space in it 0123456789\n", "tab\there-0123456789abc\n"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char *p = write_file(bad[i]);
    assert_int_equal(pr__auth_load(p, NULL, &a, err, sizeof err), PR_ERR_INVALID);
    assert_null(a);
    assert_null(strstr(err, "short")); /* a token is never echoed */
    unlink(p);
    free(p);
  }
  /* comments, blank lines, indentation and CRLF are fine */
  a = load("# tokens\n\n  " READ_TOK "\r\n", NULL);
  assert_int_equal(pr__auth_check(a, PR_ACCESS_READ, "Bearer " READ_TOK), PR_OK);
  pr__auth_free(a);
}

static void test_classes(void **state) {
  pr_auth_t *a = load(READ_TOK "\n", ADMIN_TOK "\n");
  assert_int_equal(pr__auth_check(NULL, PR_ACCESS_ADMIN, NULL), PR_OK);
  assert_int_equal(pr__auth_check(a, PR_ACCESS_OPEN, NULL), PR_OK);
  assert_int_equal(pr__auth_check(a, PR_ACCESS_READ, NULL), PR_ERR_UNAUTHORIZED);
  assert_int_equal(pr__auth_check(a, PR_ACCESS_READ, "Basic " READ_TOK), PR_ERR_UNAUTHORIZED);
  assert_int_equal(pr__auth_check(a, PR_ACCESS_READ, "Bearer " READ_TOK "x"), PR_ERR_UNAUTHORIZED);
  assert_int_equal(pr__auth_check(a, PR_ACCESS_READ, "Bearer read-token"), PR_ERR_UNAUTHORIZED);
  assert_int_equal(pr__auth_check(a, PR_ACCESS_READ, "Bearer " READ_TOK), PR_OK);
  assert_int_equal(pr__auth_check(a, PR_ACCESS_READ, "bearer " READ_TOK), PR_OK);
  assert_int_equal(pr__auth_check(a, PR_ACCESS_READ, "Bearer " ADMIN_TOK), PR_OK);
  assert_int_equal(pr__auth_check(a, PR_ACCESS_ADMIN, "Bearer " READ_TOK), PR_ERR_FORBIDDEN);
  assert_int_equal(pr__auth_check(a, PR_ACCESS_ADMIN, "Bearer " ADMIN_TOK), PR_OK);
  assert_int_equal(pr__auth_check(a, PR_ACCESS_ADMIN, "Bearer nope-nope-nope-nope"),
                   PR_ERR_UNAUTHORIZED);
  pr__auth_free(a);
  /* read tokens only: they pass on admin routes too */
  a = load(READ_TOK "\n", NULL);
  assert_int_equal(pr__auth_check(a, PR_ACCESS_ADMIN, "Bearer " READ_TOK), PR_OK);
  assert_int_equal(pr__auth_check(a, PR_ACCESS_ADMIN, NULL), PR_ERR_UNAUTHORIZED);
  pr__auth_free(a);
  /* admin tokens only: reads are open */
  a = load(NULL, ADMIN_TOK "\n");
  assert_int_equal(pr__auth_check(a, PR_ACCESS_READ, NULL), PR_OK);
  assert_int_equal(pr__auth_check(a, PR_ACCESS_ADMIN, NULL), PR_ERR_UNAUTHORIZED);
  assert_int_equal(pr__auth_check(a, PR_ACCESS_ADMIN, "Bearer " ADMIN_TOK), PR_OK);
  pr__auth_free(a);
}

/* every route has a class and a handler; the ones that change state are
 * admin; HEAD only where GET */
static void test_route_classes(void **state) {
  assert_int_equal(pr__http_routes[PR_ROUTE_LIVE].access, PR_ACCESS_OPEN);
  assert_int_equal(pr__http_routes[PR_ROUTE_READY].access, PR_ACCESS_OPEN);
  assert_int_equal(pr__http_routes[PR_ROUTE_INFER].access, PR_ACCESS_READ);
  assert_int_equal(pr__http_routes[PR_ROUTE_METRICS].access, PR_ACCESS_READ);
  assert_int_equal(pr__http_routes[PR_ROUTE_DASH_STATE].access, PR_ACCESS_READ);
  assert_int_equal(pr__http_routes[PR_ROUTE_REPO_LOAD].access, PR_ACCESS_ADMIN);
  assert_int_equal(pr__http_routes[PR_ROUTE_REPO_UNLOAD].access, PR_ACCESS_ADMIN);
  assert_int_equal(pr__http_routes[PR_ROUTE_PLAN_POST].access, PR_ACCESS_ADMIN);
  for (int r = 0; r < PR_ROUTE_COUNT; r++) {
    const pr_route_row_t *row = &pr__http_routes[r];
    assert_non_null(row->method); /* a row for every id */
    assert_non_null(row->pattern);
    assert_non_null(row->handler);
    if (row->flags & PR_ROUTE_SLOW) /* the calls that change state */
      assert_int_equal(row->access, PR_ACCESS_ADMIN);
    assert_int_equal(!!(row->flags & PR_ROUTE_HEAD), !strcmp(row->method, "GET"));
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_files),
      cmocka_unit_test(test_classes),
      cmocka_unit_test(test_route_classes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
