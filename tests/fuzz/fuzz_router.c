/* libFuzzer target: the URL router (src/server/router.c). The first byte
 * picks the method (GET, POST, HEAD, or the next bytes up to a NUL), the rest
 * is the path. Every answer must be one of the router's statuses; a match
 * must capture non-empty segments without '/', inside the route's buffer. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/protocol.h"
#include "server/router.h"

#define CHECK(cond, ...)                            \
  do {                                              \
    if (!(cond)) {                                  \
      fprintf(stderr, "fuzz_router: " __VA_ARGS__); \
      fprintf(stderr, " (%s)\n", #cond);            \
      abort();                                      \
    }                                               \
  } while (0)

static void check_capture(const pr_route_t *r, const char *seg) {
  if (!seg) return;
  CHECK(seg >= r->buf && seg < r->buf + sizeof r->buf, "capture outside the buffer");
  CHECK(*seg && !strchr(seg, '/'), "empty capture or one holding '/'");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  static const char *const methods[] = {"GET", "POST", "HEAD", "DELETE"};
  char method[16];
  size_t at = 1;
  if (data[0] < 4) {
    snprintf(method, sizeof method, "%s", methods[data[0]]);
  } else {
    size_t n = 0;
    while (at < size && data[at] && n + 1 < sizeof method) method[n++] = (char)data[at++];
    method[n] = 0;
    at++;
  }
  size_t len = at < size ? size - at : 0;
  char *path = malloc(len + 1);
  if (!path) return 0;
  if (len) memcpy(path, data + at, len);
  path[len] = 0; /* libmicrohttpd hands the path as a C string */
  pr_route_t r;
  int st =
      pr__proto_http_status(pr__route_match(pr__http_routes, PR_ROUTE_COUNT, method, path, &r));
  CHECK(st == 200 || st == 404 || st == 405 || st == 414, "status %d", st);
  if (st == 200) {
    CHECK(r.id >= 0 && r.id < PR_ROUTE_COUNT, "route id %d", (int)r.id);
    check_capture(&r, r.model);
    check_capture(&r, r.version);
    CHECK(!strcmp(method, "GET") || !strcmp(method, "POST") || !strcmp(method, "HEAD"),
          "matched method %s", method);
    CHECK(r.row == &pr__http_routes[r.id], "route %d's row", (int)r.id);
    CHECK(!strcmp(method, r.row->method) ||
              (!strcmp(method, "HEAD") && !strcmp(r.row->method, "GET")),
          "%s matched a %s route", method, r.row->method);
  }
  free(path);
  return 0;
}
