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
  int rc = pr__repo_parse_config(buf, len, "m/config.json", c, err, 256);
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
  assert_int_equal(c.dim_kind[0], PR_DIM_FIXED);
  c = defaults();
  assert_int_equal(parse("{}", &c, err), 0);
  assert_int_equal(c.max_batch, 8);
}

/* Dynamic dims: a range (profiled at profile_at, else its max), a list
 * (kept ascending, planned at its largest), beside a fixed one; the
 * session cache's bounds. */
static void test_parse_dynamic_dims(void **s) {
  pr_model_config_t c = defaults();
  char err[256] = "";
  if (parse("{\"dims\": {\"sequence\": {\"min\": 1, \"max\": 512}, \"width\": [256, 64, 128], "
            "\"height\": 48, \"tokens\": {\"max\": 64, \"profile_at\": 32}}, "
            "\"session_cache\": {\"max_sessions\": 4, \"max_mb\": 256}}",
            &c, err))
    fail_msg("%s", err);
  assert_int_equal(c.n_dims, 4);
  assert_string_equal(c.dim_names[0], "sequence");
  assert_int_equal(c.dim_kind[0], PR_DIM_RANGE);
  assert_int_equal(c.dim_min[0], 1);
  assert_int_equal(c.dim_max[0], 512);
  assert_int_equal(c.dim_values[0], 512);
  assert_string_equal(c.dim_names[1], "width");
  assert_int_equal(c.dim_kind[1], PR_DIM_LIST);
  assert_int_equal(c.dim_n_list[1], 3);
  assert_int_equal(c.dim_list[1][0], 64);
  assert_int_equal(c.dim_list[1][1], 128);
  assert_int_equal(c.dim_list[1][2], 256);
  assert_int_equal(c.dim_min[1], 64);
  assert_int_equal(c.dim_max[1], 256);
  assert_int_equal(c.dim_values[1], 256);
  assert_int_equal(c.dim_kind[2], PR_DIM_FIXED);
  assert_int_equal(c.dim_values[2], 48);
  assert_int_equal(c.dim_kind[3], PR_DIM_RANGE);
  assert_int_equal(c.dim_min[3], 1); /* min defaults to 1 */
  assert_int_equal(c.dim_values[3], 32);
  assert_int_equal(c.cache_sessions, 4);
  assert_int_equal(c.cache_bytes, 256LL << 20);
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
      {"{\"dims\": {\"s\": {\"min\": 9, \"max\": 8}}}", "'min' at most 'max'"},
      {"{\"dims\": {\"s\": {\"min\": 1}}}", "a range needs 'max'"},
      {"{\"dims\": {\"s\": {\"min\": 0, \"max\": 8}}}", "'min' must be an integer in 1.."},
      {"{\"dims\": {\"s\": {\"max\": -3}}}", "'max' must be an integer"},
      {"{\"dims\": {\"s\": {\"max\": 99999999999}}}", "'max' must be an integer"},
      {"{\"dims\": {\"s\": {\"max\": 8, \"profile_at\": 9}}}", "'profile_at' between"},
      {"{\"dims\": {\"s\": {\"max\": 8, \"step\": 2}}}", "unknown key 'step'"},
      {"{\"dims\": {\"s\": []}}", "1 to 16 sizes"},
      {"{\"dims\": {\"s\": [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]}}", "1 to 16 sizes"},
      {"{\"dims\": {\"s\": [8, 0]}}", "sizes must be integers"},
      {"{\"dims\": {\"s\": [8, \"16\"]}}", "sizes must be integers"},
      {"{\"dims\": {\"s\": [8, 16, 8]}}", "size 8 listed twice"},
      {"{\"dims\": {\"s\": 1.5}}", "a range {\"min\": A"},
      {"{\"dims\": {\"\": 4}}", "names of 1 to 63 bytes"},
      {"{\"session_cache\": 4}", "'session_cache' must be"},
      {"{\"session_cache\": {\"max_sessions\": 0}}", "max_sessions must be 1..256"},
      {"{\"session_cache\": {\"max_sessions\": 257}}", "max_sessions must be 1..256"},
      {"{\"session_cache\": {\"max_mb\": 0}}", "max_mb 1.."},
      {"{\"session_cache\": {\"entries\": 2}}", "'session_cache'"},
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
 * endpoint: pr__proto_error could not encode the message). */
static void test_errors_stay_utf8(void **s) {
  char text[2048] = "{\"";
  for (int i = 0; i < 600; i++) strcat(text, "\xc3\xa9"); /* a 1200-byte key of é */
  strcat(text, "\": 1}");
  for (size_t err_len = 1; err_len <= 1024; err_len++) {
    pr_model_config_t c = defaults();
    char err[1024];
    assert_int_equal(pr__repo_parse_config(text, strlen(text), "m/config.json", &c, err, err_len),
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
    assert_int_equal(pr__repo_parse_config("[]", 2, origins[i], &c, err, sizeof err), -1);
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
  assert_int_equal(pr__repo_read_config(path, &c, err, sizeof err), 0);
  assert_int_equal(c.max_batch, 2);
  /* over the size limit */
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  for (int i = 0; i <= PR_REPO_CONFIG_MAX; i += 8) fputs("        ", f);
  fclose(f);
  assert_int_equal(pr__repo_read_config(path, &c, err, sizeof err), -1);
  assert_non_null(strstr(err, path));
  unlink(path);
  assert_int_equal(pr__repo_read_config(path, &c, err, sizeof err), -1);
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
  int n = pr__repo_versions(dir, "m", &c.policy, e, PR_REPO_MAX_VERSIONS);
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
  assert_int_equal(pr__repo_versions(dir, "nope", &c.policy, e, 2), -1);
  assert_int_equal(pr__repo_versions(dir, "../m", &c.policy, e, 2), -1);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

/* Folders named as models that are not one are listed with their problem
 * (and found by name), beside the models; NAME.onnx beside a folder that
 * is no model is the model; an empty folder lists nothing. */
static void test_layout_problems(void **s) {
  char dir[] = "/tmp/pr_repo_layout_XXXXXX";
  assert_non_null(mkdtemp(dir));
  pr_repo_entry_t e[8];
  int total = -1;
  assert_int_equal(pr__repo_scan(dir, e, 8, &total), 0);
  assert_int_equal(total, 0);
  add_version(dir, "1"); /* m: a model */
  char p[600];
  const char *dirs[] = {"flat", "nofile", "nofile/2", "both", ".hidden"};
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
    snprintf(p, sizeof p, "%s/%s", dir, dirs[i]);
    assert_int_equal(mkdir(p, 0755), 0);
  }
  const char *files[] = {"flat/model.onnx", "nofile/2/other.onnx", "both.onnx", "README.md"};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    snprintf(p, sizeof p, "%s/%s", dir, files[i]);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fclose(f);
  }
  int n = pr__repo_scan(dir, e, 8, &total);
  assert_int_equal(n, 4); /* m, flat, nofile, both (the file) */
  assert_int_equal(total, 4);
  int seen = 0;
  for (int i = 0; i < n; i++) {
    if (!strcmp(e[i].name, "m") || !strcmp(e[i].name, "both")) {
      assert_string_equal(e[i].problem, "");
      assert_true(e[i].path[0] != 0);
      seen |= !strcmp(e[i].name, "m") ? 1 : 2;
    } else if (!strcmp(e[i].name, "flat")) {
      assert_non_null(strstr(e[i].problem, "folder flat has no numeric version folder"));
      assert_non_null(strstr(e[i].problem, PR_REPO_LAYOUT));
      assert_string_equal(e[i].path, "");
      seen |= 4;
    } else {
      assert_string_equal(e[i].name, "nofile");
      assert_non_null(strstr(e[i].problem, "version folder nofile/2 has no model.onnx"));
      seen |= 8;
    }
  }
  assert_int_equal(seen, 15);
  pr_repo_entry_t one;
  assert_int_equal(pr__repo_find(dir, "flat", &one), 0);
  assert_non_null(strstr(one.problem, "no numeric version folder"));
  assert_int_equal(pr__repo_find(dir, "both", &one), 0);
  assert_string_equal(one.problem, "");
  assert_int_equal(pr__repo_find(dir, "m", &one), 0);
  assert_string_equal(one.problem, "");
  assert_int_equal(pr__repo_find(dir, "absent", &one), -1);
  pr_model_config_t c = defaults();
  assert_int_equal(pr__repo_versions(dir, "flat", &c.policy, e, 2), -1);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

/* A config.json that is a FIFO or a folder is refused at once, never waited
 * on, and the error says it is not a regular file. */
static void test_config_not_regular(void **s) {
  char dir[] = "/tmp/pr_repo_fifo_XXXXXX";
  assert_non_null(mkdtemp(dir));
  char path[600], err[256];
  snprintf(path, sizeof path, "%s/config.json", dir);
  assert_int_equal(mkfifo(path, 0644), 0);
  pr_model_config_t c = defaults();
  assert_int_equal(pr__repo_read_config(path, &c, err, sizeof err), -1);
  assert_non_null(strstr(err, "not a regular file"));
  assert_int_equal(pr__repo_read_config(dir, &c, err, sizeof err), -1);
  assert_non_null(strstr(err, "not a regular file"));
  unlink(path);
  rmdir(dir);
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

/* The "cores" setting: its keys, and refusals that name the setting. */
static void test_cores_setting(void **s) {
  pr_model_config_t c = defaults();
  char err[512];
  assert_int_equal(
      parse("{\"cores\": {\"weight\": 2.5, \"min\": 2, \"max\": 6, \"latency_target_ms\": 40}}", &c,
            err),
      0);
  assert_true(c.core_weight == 2.5 && c.min_cores == 2 && c.max_cores == 6 &&
              c.latency_target_ms == 40 && !c.share_cores);
  c = defaults();
  assert_int_equal(parse("{\"cores\": {\"share\": true}}", &c, err), 0);
  assert_true(c.share_cores && c.core_weight == 0);
  const char *bad[] = {
      "{\"cores\": {\"weight\": 0}}",
      "{\"cores\": {\"weight\": 1001}}",
      "{\"cores\": {\"min\": 0}}",
      "{\"cores\": {\"max\": 1.5}}",
      "{\"cores\": {\"min\": 4, \"max\": 2}}",
      "{\"cores\": {\"latency_target_ms\": -1}}",
      "{\"cores\": {\"share\": 1}}",
      "{\"cores\": {\"share\": true, \"min\": 1}}",
      "{\"cores\": {\"threads\": 2}}",
      "{\"cores\": {}}",
      "{\"cores\": 4}",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    c = defaults();
    assert_int_equal(parse(bad[i], &c, err), -1);
    assert_non_null(strstr(err, "'cores'"));
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_settings),  cmocka_unit_test(test_parse_dynamic_dims),
      cmocka_unit_test(test_parse_errors),    cmocka_unit_test(test_errors_stay_utf8),
      cmocka_unit_test(test_read_file),       cmocka_unit_test(test_version_policies),
      cmocka_unit_test(test_policy_settings), cmocka_unit_test(test_cores_setting),
      cmocka_unit_test(test_layout_problems), cmocka_unit_test(test_config_not_regular),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
