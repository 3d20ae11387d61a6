/* libFuzzer target: arbitrary bytes as a model's config.json
 * (pr__repo_parse_config). Parsing must either succeed with settings inside
 * their documented ranges or fail with a message naming the origin that the
 * server can send ({"error": ...}: valid UTF-8). Never a
 * crash, leak or undefined behaviour. FUZZ_VERBOSE=1 in the environment
 * prints each input's result. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/protocol.h"
#include "server/repository.h"

#define CHECK(cond, ...)                           \
  do {                                             \
    if (!(cond)) {                                 \
      fprintf(stderr, "fuzz_config: %s: ", #cond); \
      fprintf(stderr, __VA_ARGS__);                \
      fprintf(stderr, "\n");                       \
      abort();                                     \
    }                                              \
  } while (0)

static bool terminated(const char *s, size_t cap) {
  return memchr(s, '\0', cap) != NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* the server's defaults (server.c) */
  pr_model_config_t c = {.max_batch = 8,
                         .max_queue_delay_us = 2000,
                         .queue_capacity = 256,
                         .request_timeout_s = 30,
                         .autoscale = true,
                         .estimator = 1};
  snprintf(c.plan, sizeof c.plan, "auto");
  char err[1024]; /* as the server's load endpoint */
  err[0] = '\0';
  int rc = pr__repo_parse_config((const char *)data, size, "config.json", &c, err, sizeof err);
  if (getenv("FUZZ_VERBOSE")) fprintf(stderr, "fuzz_config: %d %s\n", rc, rc ? err : "");
  if (rc) {
    CHECK(!strncmp(err, "config.json: ", 13) && terminated(err, sizeof err), "error '%s'", err);
    /* the load endpoint answers {"error": err} (pr__proto_error), which must not fail */
    char *reply = pr__proto_error(err);
    CHECK(reply, "pr__proto_error cannot encode the message '%s'", err);
    free(reply);
    return 0;
  }
  CHECK(c.max_batch >= 1 && c.max_batch <= 4096, "max_batch %d", c.max_batch);
  CHECK(c.min_batch >= 0 && c.min_batch <= c.max_batch, "min_batch %d", c.min_batch);
  CHECK(c.max_queue_delay_us >= 0 && c.queue_capacity >= 1 && c.request_timeout_s > 0,
        "queue settings");
  CHECK(c.estimator == 0 || c.estimator == 1, "estimator %d", c.estimator);
  CHECK(terminated(c.plan, sizeof c.plan), "plan");
  CHECK(c.n_dims >= 0 && c.n_dims <= 8, "n_dims %d", c.n_dims);
  for (int i = 0; i < c.n_dims; i++)
    CHECK(terminated(c.dim_names[i], sizeof c.dim_names[i]) && c.dim_values[i] >= 1, "dim %d", i);
  return 0;
}
