/* The model repository's config.json parser: from a buffer (not
 * NUL-terminated) and from a file, settings applied over the defaults, and
 * every error naming where the text came from; the versions each version
 * policy selects. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/* A version folder v of model m under dir, with an (empty) model.onnx. */
static void add_version(const char *dir, const char *v) {
  char p[512];
  snprintf(p, sizeof p, "%s/m", dir);
  mkdir(p, 0755);
  snprintf(p, sizeof p, "%s/m/%s", dir, v);
  assert_int_equal(mkdir(p, 0755), 0);
  snprintf(p, sizeof p, "%s/m/%s/model.onnx", dir, v);
  FILE *f = fopen(p, "w");
  assert_non_null(f);
  fclose(f);
}

static int versions(const char *dir, const char *policy_json, char *out, size_t len) {
  pr_model_config_t c = defaults();
  char err[256];
  if (policy_json) assert_int_equal(parse(policy_json, &c, err), 0);
  pr_repo_entry_t e[PR_REPO_MAX_VERSIONS];
  int n = pr_repo_versions(dir, "m", &c.policy, e, PR_REPO_MAX_VERSIONS);
  size_t off = 0;
  out[0] = 0;
  for (int i = 0; i < n; i++) off += (size_t)snprintf(out + off, len - off, "%s ", e[i].version);
  return n;
}

/* Version policies: which version folders each selects, highest first; "007"
 * is version 7; folders that are not versions are skipped. */
static void test_version_policies(void **s) {
  char dir[] = "/tmp/pr_repo_versions_XXXXXX";
  assert_non_null(mkdtemp(dir));
  const char *made[] = {"1", "2", "007", "10", "x", "3a"};
  for (size_t i = 0; i < sizeof made / sizeof made[0]; i++) add_version(dir, made[i]);
  char got[256];
  assert_int_equal(versions(dir, NULL, got, sizeof got), 1);
  assert_string_equal(got, "10 ");
  assert_int_equal(
      versions(dir, "{\"version_policy\": {\"latest\": {\"num_versions\": 3}}}", got, sizeof got),
      3);
  assert_string_equal(got, "10 7 2 ");
  assert_int_equal(versions(dir, "{\"version_policy\": {\"all\": {}}}", got, sizeof got), 4);
  assert_string_equal(got, "10 7 2 1 ");
  assert_int_equal(versions(dir, "{\"version_policy\": {\"specific\": {\"versions\": [1, 7, 99]}}}",
                            got, sizeof got),
                   2);
  assert_string_equal(got, "7 1 ");
  assert_int_equal(
      versions(dir, "{\"version_policy\": {\"specific\": {\"versions\": [99]}}}", got, sizeof got),
      0);
  pr_model_config_t c = defaults();
  pr_repo_entry_t e[2];
  assert_int_equal(pr_repo_versions(dir, "nope", &c.policy, e, 2), -1);
  assert_int_equal(pr_repo_versions(dir, "../m", &c.policy, e, 2), -1);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

/* The version_policy and priority settings: the forms taken, and refusals. */
static void test_policy_settings(void **s) {
  pr_model_config_t c = defaults();
  char err[256];
  assert_int_equal(parse("{\"priority_levels\": 4, \"default_priority_level\": 2}", &c, err), 0);
  assert_int_equal(c.priority_levels, 4);
  assert_int_equal(c.default_priority, 2);
  const char *bad[] = {
      "{\"priority_levels\": 2, \"default_priority_level\": 3}",
      "{\"priority_levels\": 0}",
      "{\"version_policy\": {\"latest\": {\"num_versions\": 17}}}",
      "{\"version_policy\": {\"latest\": {}}}",
      "{\"version_policy\": {\"specific\": {\"versions\": [1, -2]}}}",
      "{\"version_policy\": {\"all\": {}, \"latest\": {\"num_versions\": 1}}}",
      "{\"version_policy\": []}",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    c = defaults();
    c.priority_levels = 10;
    assert_int_equal(parse(bad[i], &c, err), -1);
    assert_non_null(strstr(err, "m/config.json"));
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_settings),   cmocka_unit_test(test_parse_errors),
      cmocka_unit_test(test_errors_stay_utf8), cmocka_unit_test(test_read_file),
      cmocka_unit_test(test_version_policies), cmocka_unit_test(test_policy_settings),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
