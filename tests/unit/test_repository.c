/* The model repository's config.json parser: from a buffer (not
 * NUL-terminated) and from a file, settings applied over the defaults, and
 * every error naming where the text came from. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/repository.h"

static pr_model_config_t defaults(void) {
  pr_model_config_t c = {.max_batch = 8, .queue_capacity = 256, .autoscale = true, .estimator = 1};
  snprintf(c.plan, sizeof c.plan, "auto");
  return c;
}

static int parse(const char *text, pr_model_config_t *c, char *err) {
  /* a copy without the NUL, so that reading past len shows under ASan */
  size_t len = strlen(text);
  char *buf = malloc(len ? len : 1);
  memcpy(buf, text, len);
  int rc = pr_repo_parse_config(buf, len, "m/config.json", c, err, 256);
  free(buf);
  return rc;
}

static void test_parse_settings(void **s) {
  pr_model_config_t c = defaults();
  char err[256];
  assert_int_equal(parse("{\"max_batch_size\": 16, \"min_batch_size\": 2, \"max_queue_delay_us\": "
                         "0, \"request_timeout_ms\": 1500, \"plan\": \"1x4,1x4\", \"autoscale\": "
                         "false, \"estimator\": \"paper\", \"dims\": {\"sequence\": 128}}",
                         &c, err),
                   0);
  assert_int_equal(c.max_batch, 16);
  assert_int_equal(c.min_batch, 2);
  assert_int_equal(c.max_queue_delay_us, 0);
  assert_int_equal(c.queue_capacity, 256); /* absent: the default stays */
  assert_true(c.request_timeout_s == 1.5);
  assert_string_equal(c.plan, "1x4,1x4");
  assert_false(c.autoscale);
  assert_int_equal(c.estimator, 0);
  assert_int_equal(c.n_dims, 1);
  assert_string_equal(c.dim_names[0], "sequence");
  assert_int_equal(c.dim_values[0], 128);
  c = defaults();
  assert_int_equal(parse("{}", &c, err), 0);
  assert_int_equal(c.max_batch, 8);
}

static void test_parse_errors(void **s) {
  static const struct {
    const char *text, *msg;
  } bad[] = {
      {"", "m/config.json: "},
      {"{\"max_batch_size\": 4", "m/config.json: "},
      {"[1]", "must be a JSON object"},
      {"{\"max_batch_size\": 0}", "'max_batch_size' must be a positive integer"},
      {"{\"max_batch_size\": 4097}", "at most 4096"},
      {"{\"queue_capacity\": 1.5}", "'queue_capacity'"},
      {"{\"plan\": 2}", "'plan'"},
      {"{\"autoscale\": 1}", "'autoscale'"},
      {"{\"estimator\": \"fast\"}", "'estimator'"},
      {"{\"min_batch_size\": 9}", "min_batch_size above max_batch_size"},
      {"{\"dims\": {\"s\": 0}}", "dims"},
      {"{\"dims\": {\"a\":1,\"b\":1,\"c\":1,\"d\":1,\"e\":1,\"f\":1,\"g\":1,\"h\":1,\"i\":1}}",
       "at most 8"},
      {"{\"plan\": \"auto\", \"plan\": \"1x1\"}", "duplicate"},
      {"{\"batch\": 1}", "unknown setting 'batch'"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    pr_model_config_t c = defaults();
    char err[256] = "";
    assert_int_equal(parse(bad[i].text, &c, err), -1);
    assert_non_null(strstr(err, "m/config.json: "));
    if (!strstr(err, bad[i].msg)) fail_msg("'%s': error '%s'", bad[i].text, err);
  }
}

/* Messages quote keys and paths and are cut to the buffer; the server sends
 * them as JSON, so they stay valid UTF-8 (a cut inside "é" crashed the load
 * endpoint: pr_proto_error could not encode the message). */
static void test_errors_stay_utf8(void **s) {
  char text[2048] = "{\"";
  for (int i = 0; i < 600; i++) strcat(text, "\xc3\xa9"); /* a 1200-byte key of é */
  strcat(text, "\": 1}");
  for (size_t err_len = 1; err_len <= 1024; err_len++) {
    pr_model_config_t c = defaults();
    char err[1024];
    assert_int_equal(pr_repo_parse_config(text, strlen(text), "m/config.json", &c, err, err_len),
                     -1);
    json_t *j = json_string(err); /* NULL when not UTF-8 */
    if (!j) fail_msg("err_len %zu: message not UTF-8", err_len);
    json_decref(j);
  }
  /* a path that is not UTF-8, and a cut 3- and 4-byte sequence */
  static const char *origins[] = {"m\xff\xc0\xaf/config.json", "\xe2\x82", "\xf0\x9f\x98",
                                  "\xed\xa0\x80", "\xf4\x90\x80\x80"};
  for (size_t i = 0; i < sizeof origins / sizeof origins[0]; i++) {
    pr_model_config_t c = defaults();
    char err[256];
    assert_int_equal(pr_repo_parse_config("[]", 2, origins[i], &c, err, sizeof err), -1);
    json_t *j = json_string(err);
    if (!j) fail_msg("origin %zu: message not UTF-8", i);
    json_decref(j);
    assert_non_null(strstr(err, ": must be a JSON object"));
  }
}

static void test_read_file(void **s) {
  char path[] = "/tmp/pr_repo_test_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  const char text[] = "{\"max_batch_size\": 2}";
  assert_int_equal(write(fd, text, sizeof text - 1), (ssize_t)(sizeof text - 1));
  close(fd);
  pr_model_config_t c = defaults();
  char err[256];
  assert_int_equal(pr_repo_read_config(path, &c, err, sizeof err), 0);
  assert_int_equal(c.max_batch, 2);
  /* over the size limit */
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  for (int i = 0; i <= PR_REPO_CONFIG_MAX; i += 8) fputs("        ", f);
  fclose(f);
  assert_int_equal(pr_repo_read_config(path, &c, err, sizeof err), -1);
  assert_non_null(strstr(err, path));
  unlink(path);
  assert_int_equal(pr_repo_read_config(path, &c, err, sizeof err), -1);
  assert_non_null(strstr(err, path));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_settings),
      cmocka_unit_test(test_parse_errors),
      cmocka_unit_test(test_errors_stay_utf8),
      cmocka_unit_test(test_read_file),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
