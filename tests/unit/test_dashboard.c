/* The dashboard's state document and files: client- and engine-made text
 * comes out as valid, escaped JSON (names with quotes, markup, control
 * characters and bytes that are not UTF-8); unknown numbers are null; cores
 * follow the plan's first_core into the CPU order and stay within it; the
 * series and timeline are dated from the clocks given; a model that is not
 * ready and a server with no model encode; the routes exist; the files load
 * nothing from outside and the headers forbid it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "base/text.h"
#include "base/topology.h"
#include "server/dashboard.h"
#include "server/router.h"

/* Dumps and re-reads o (as the page's JSON.parse would), freeing o. */
static json_t *round_trip(json_t *o, char **text) {
  assert_non_null(o);
  *text = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  assert_non_null(*text);
  assert_true(pr__utf8_valid(*text, strlen(*text)));
  json_error_t e;
  json_t *back = json_loads(*text, 0, &e);
  if (!back) fail_msg("not JSON: %s", e.text);
  return back;
}

static const char *str(json_t *o, const char *key) {
  const char *s = json_string_value(json_object_get(o, key));
  if (!s) fail_msg("no string '%s'", key);
  return s;
}

static void test_untrusted_text(void **state) {
  const char *evil = "<img src=x onerror=alert(1)>\"quoted\"\\ \x01\n\xff\xfe end";
  pr_dash_model_t v = {.name = evil,
                       .version = "1\"",
                       .state = "UNAVAILABLE",
                       .reason = "bad \xc3( bytes </script>",
                       .active = -1};
  char *text;
  json_t *o = round_trip(pr__dash_model_json(&v, 10, 1e9), &text);
  char want[256];
  pr__utf8_sanitize(evil, want, sizeof want);
  assert_string_equal(str(o, "name"), want);             /* the same text, valid UTF-8 */
  assert_non_null(strstr(str(o, "name"), "<img src=x")); /* data, not markup: kept */
  assert_string_equal(str(o, "version"), "1\"");
  assert_non_null(strstr(text, "\\\"quoted\\\"")); /* escaped in the document */
  assert_non_null(strstr(text, "\\u0001"));
  assert_null(strchr(text, '\n'));
  assert_null(strstr(str(o, "reason"), "\xc3("));
  /* not ready: no plan, empty lists, null profile */
  assert_true(json_is_null(json_object_get(o, "plan")));
  assert_true(json_is_null(json_object_get(o, "profile")));
  assert_int_equal(json_array_size(json_object_get(o, "instances")), 0);
  assert_int_equal(json_array_size(json_object_get(o, "switches")), 0);
  json_t *series = json_object_get(o, "series");
  assert_int_equal(json_array_size(json_object_get(series, "rate")), 0);
  assert_true(json_is_null(json_object_get(series, "summary_p99_ms")));
  json_decref(o);
  free(text);
}

/* A ready model: 2 instances on CPUs 4..7, a profile with a missing point,
 * two seconds of series and one switch. */
static json_t *ready_model(char **text, int first_core_of_second) {
  static pr_plan_t plan, prepared[2];
  memset(&plan, 0, sizeof plan);
  plan = (pr_plan_t){.batch = 6, .cores = 4, .latency_ms = 3.5, .n_instances = 2};
  plan.instances[0] = (pr_plan_instance_t){2, 4, 3.5, 0};
  plan.instances[1] = (pr_plan_instance_t){2, 2, 2.0, first_core_of_second};
  static const long long buckets[2] = {0, 64}; /* the second at a shape bucket */
  prepared[0] = plan;
  prepared[1] = (pr_plan_t){.batch = 1, .cores = 4, .latency_ms = 1.0, .n_instances = 1};
  prepared[1].instances[0] = (pr_plan_instance_t){4, 1, 1.0, 0};
  static const int cpus[] = {4, 5, 6, 7};
  static pr_sched_instance_t measured[2] = {{.full_ms = 3.9, .any_ms = 3.1, .runs = 10, .rows = 30},
                                            {.full_ms = 0, .any_ms = 0, .runs = 0, .rows = 0}};
  static pr_profile_point_t points[] = {{.threads = 1, .batch = 1, .latency_ms = 2.0},
                                        {.threads = 2, .batch = 1, .latency_ms = 1.5},
                                        {.threads = 1, .batch = 4, .latency_ms = 6.0}};
  static pr_profile_t profile = {.cores = 4, .n_points = 3, .points = points, .cpu = "cpu \xff"};
  static pr_history_point_t series[2] = {
      {.second = 98, .arrivals = 10, .completed = 9, .p50_ms = 1.25, .p99_ms = 7.5, .queue_max = 3},
      {.second = 99, .arrivals = 0, .p50_ms = -1, .p99_ms = -1, .queue_max = 0}};
  static pr_history_switch_t sw[1] = {{.t = 90,
                                       .from = "4x1",
                                       .to = "2x4,2x2",
                                       .why = "autoscaler: target batch 6",
                                       .duration_ms = 0.5}};
  pr_dash_model_t v = {.name = "m",
                       .version = "1",
                       .state = "READY",
                       .reason = "",
                       .max_batch = 8,
                       .queue_depth = 3,
                       .queue_capacity = 256,
                       .autoscale = true,
                       .plan = &plan,
                       .measured = measured,
                       .n_measured = 2,
                       .cpus = cpus,
                       .n_cpus = 4,
                       .prepared = prepared,
                       .prepared_bucket = buckets,
                       .n_prepared = 2,
                       .active = 0,
                       .profile = &profile,
                       .series = series,
                       .n_series = 2,
                       .p50_ms = 1.25,
                       .p99_ms = 7.5,
                       .switches = sw,
                       .n_switches = 1,
                       .switches_total = 5,
                       .divided = true,
                       .share_first = 1,
                       .share_cores = 2};
  return round_trip(pr__dash_model_json(&v, 100.0, 1e9), text);
}

static void test_ready_model(void **state) {
  char *text;
  json_t *o = ready_model(&text, 2);
  json_t *insts = json_object_get(o, "instances");
  assert_int_equal(json_array_size(insts), 2);
  json_t *i0 = json_array_get(insts, 0), *i1 = json_array_get(insts, 1);
  json_t *c0 = json_object_get(i0, "cores"), *c1 = json_object_get(i1, "cores");
  assert_int_equal(json_array_size(c0), 2);
  assert_int_equal(json_integer_value(json_array_get(c0, 0)), 4);
  assert_int_equal(json_integer_value(json_array_get(c1, 1)), 7);
  /* its share of the cores: the second and third of the order */
  json_t *share = json_object_get(o, "share");
  assert_true(json_is_true(json_object_get(share, "divided")));
  json_t *sc = json_object_get(share, "cores");
  assert_int_equal(json_array_size(sc), 2);
  assert_int_equal(json_integer_value(json_array_get(sc, 0)),
                   json_integer_value(json_array_get(c0, 1)));
  assert_true(json_real_value(json_object_get(i0, "measured_ms")) == 3.9);
  assert_true(json_real_value(json_object_get(i0, "mean_rows")) == 3.0);
  assert_true(json_is_null(json_object_get(i1, "measured_ms"))); /* nothing measured yet */
  assert_true(json_real_value(json_object_get(i1, "predicted_ms")) == 2.0);
  assert_string_equal(str(json_object_get(o, "plan"), "spec"), "2x4,2x2");
  json_t *prep = json_object_get(o, "prepared");
  assert_true(json_is_true(json_object_get(json_array_get(prep, 0), "active")));
  assert_true(json_is_false(json_object_get(json_array_get(prep, 1), "active")));
  assert_null(json_object_get(json_array_get(prep, 0), "bucket"));
  assert_int_equal(json_integer_value(json_object_get(json_array_get(prep, 1), "bucket")), 64);
  /* the profile as a matrix: threads x batches, null where not measured */
  json_t *prof = json_object_get(o, "profile"), *lat = json_object_get(prof, "latency_ms");
  assert_int_equal(json_array_size(json_object_get(prof, "threads")), 2);
  assert_int_equal(json_integer_value(json_array_get(json_object_get(prof, "batches"), 1)), 4);
  assert_true(json_real_value(json_array_get(json_array_get(lat, 0), 1)) == 6.0);
  assert_true(json_is_null(json_array_get(json_array_get(lat, 1), 1)));
  assert_string_equal(str(prof, "cpu"), "cpu ?");
  /* series: dated from the clocks; unknown latencies are null */
  json_t *s = json_object_get(o, "series");
  assert_int_equal(json_integer_value(json_object_get(s, "start_unix_ms")), (1e9 - 2) * 1000);
  assert_int_equal(json_integer_value(json_array_get(json_object_get(s, "rate"), 0)), 10);
  assert_true(json_is_null(json_array_get(json_object_get(s, "p50_ms"), 1)));
  assert_true(json_real_value(json_array_get(json_object_get(s, "p99_ms"), 0)) == 7.5);
  assert_int_equal(json_integer_value(json_array_get(json_object_get(s, "queue"), 0)), 3);
  json_t *w = json_array_get(json_object_get(o, "switches"), 0);
  assert_int_equal(json_integer_value(json_object_get(w, "unix_ms")), (1e9 - 10) * 1000);
  assert_string_equal(str(w, "why"), "autoscaler: target batch 6");
  assert_string_equal(str(w, "from"), "4x1");
  assert_int_equal(json_integer_value(json_object_get(o, "switches_total")), 5);
  json_decref(o);
  free(text);
}

static void test_cores_bounded(void **state) {
  char *text;
  json_t *o = ready_model(&text, 3); /* the second instance would run past the 4 CPUs */
  json_t *c1 = json_object_get(json_array_get(json_object_get(o, "instances"), 1), "cores");
  assert_int_equal(json_array_size(c1), 1);
  assert_int_equal(json_integer_value(json_array_get(c1, 0)), 7);
  json_decref(o);
  free(text);
}

/* A profile is a grid; one whose points share no thread count or batch
 * would be a matrix of n^2 cells: left out rather than drawn. */
static void test_profile_too_sparse(void **state) {
  enum { N = 1100 };
  pr_profile_point_t *pts = calloc(N, sizeof *pts);
  assert_non_null(pts);
  for (int i = 0; i < N; i++) pts[i] = (pr_profile_point_t){.threads = i + 1, .batch = N - i};
  pr_profile_t prof = {.cores = N, .n_points = N, .points = pts};
  pr_dash_model_t v = {
      .name = "m", .version = "1", .state = "READY", .active = -1, .profile = &prof};
  char *text;
  json_t *o = round_trip(pr__dash_model_json(&v, 0, 0), &text);
  assert_true(json_is_null(json_object_get(o, "profile")));
  json_decref(o);
  free(text);
  prof.n_points = 30; /* 30 x 30 cells, 30 of them known */
  o = round_trip(pr__dash_model_json(&v, 0, 0), &text);
  json_t *lat = json_object_get(json_object_get(o, "profile"), "latency_ms");
  assert_int_equal(json_array_size(lat), 30);
  assert_true(json_is_null(json_array_get(json_array_get(lat, 0), 0)));
  json_decref(o);
  free(text);
  free(pts);
}

static void test_no_models(void **state) {
  static const int cpus[] = {0, 1};
  pr_models_config_t mc = {
      .repository = "/nonexistent", .cpus = cpus, .n_cpus = 2, .max_models = 4, .max_plans = 4};
  pr_models_t *ms;
  assert_int_equal(pr__models_create(&mc, &ms), PR_OK);
  pr_dash_machine_t mach = {
      .cpu_name = "cpu \"x\"", .physical_cores = 2, .cpus = cpus, .n_cpus = 2, .uptime_s = 1.5};
  pr_dash_t *d = pr__dash_create();
  assert_non_null(d);
  char *text = pr__dash_state(d, ms, &mach);
  pr__dash_destroy(d);
  pr__dash_destroy(NULL);
  assert_non_null(text);
  json_t *o = json_loads(text, 0, NULL);
  assert_non_null(o);
  assert_int_equal(json_array_size(json_object_get(o, "models")), 0);
  json_t *m = json_object_get(o, "machine");
  assert_string_equal(str(m, "cpu"), "cpu \"x\"");
  assert_int_equal(json_array_size(json_object_get(m, "cpus")), 2);
  assert_int_equal(json_array_size(json_object_get(m, "core_of")), 2);
  assert_int_equal(json_array_size(json_object_get(m, "thread_of")), 2);
  assert_string_equal(str(json_object_get(o, "server"), "name"), "packrat");
  assert_true(json_integer_value(json_object_get(json_object_get(o, "limits"), "series_s")) ==
              PR_HISTORY_SECONDS);
  json_decref(o);
  free(text);
  pr__models_destroy(ms);
}

/* The cores the machine part shows: every CPU of the order has a core and
 * a thread; first threads are the physical cores; others are unknown. */
static void test_topology_cores(void **state) {
  int cpus[4096], firsts = 0, thread;
  int n = pr__topology_cpu_order(cpus, 4096);
  assert_true(n >= 1);
  for (int i = 0; i < n; i++) {
    int core = pr__topology_core_of(cpus[i], &thread);
    assert_true(core >= 0 && thread >= 0);
    firsts += thread == 0;
  }
  assert_int_equal(firsts, pr__topology_num_cores());
  assert_int_equal(pr__topology_core_of(-1, &thread), -1);
  assert_int_equal(thread, -1);
  assert_int_equal(pr__topology_core_of(1 << 20, NULL), -1);
}

static void test_routes(void **state) {
  pr_route_t r;
  assert_int_equal(pr__route_match(pr__http_routes, PR_ROUTE_COUNT, "GET", "/", &r), PR_OK);
  assert_int_equal(r.id, PR_ROUTE_DASH_PAGE);
  assert_int_equal(pr__route_match(pr__http_routes, PR_ROUTE_COUNT, "HEAD", "/", &r), PR_OK);
  assert_int_equal(pr__route_match(pr__http_routes, PR_ROUTE_COUNT, "GET", "/dashboard/state", &r),
                   PR_OK);
  assert_int_equal(r.id, PR_ROUTE_DASH_STATE);
  assert_int_equal(pr__route_match(pr__http_routes, PR_ROUTE_COUNT, "GET", "/dashboard/app.js", &r),
                   PR_OK);
  assert_int_equal(r.id, PR_ROUTE_DASH_SCRIPT);
  assert_int_equal(
      pr__route_match(pr__http_routes, PR_ROUTE_COUNT, "GET", "/dashboard/style.css", &r), PR_OK);
  assert_int_equal(r.id, PR_ROUTE_DASH_STYLE);
  assert_int_equal(pr__route_match(pr__http_routes, PR_ROUTE_COUNT, "POST", "/", &r),
                   PR_ERR_METHOD);
  assert_int_equal(
      pr__route_match(pr__http_routes, PR_ROUTE_COUNT, "GET", "/dashboard/other.js", &r),
      PR_ERR_NOT_FOUND);
  assert_int_equal(pr__route_match(pr__http_routes, PR_ROUTE_COUNT, "GET", "/dashboard", &r),
                   PR_ERR_NOT_FOUND);
}

static void test_files_self_contained(void **state) {
  const char *types[] = {"text/html", "text/javascript", "text/css"};
  for (int i = 0; i < PR_DASH_N_ASSETS; i++) {
    pr_dash_asset_t a = pr__dash_asset((pr_dash_asset_id_t)i);
    assert_true(a.len > 100 && strlen((const char *)a.data) == a.len);
    assert_non_null(strstr(a.content_type, types[i]));
    const char *t = (const char *)a.data;
    assert_null(strstr(t, "https:"));
    assert_null(strstr(t, "innerHTML"));
    assert_null(strstr(t, "outerHTML"));
    assert_null(strstr(t, "insertAdjacentHTML"));
    assert_null(strstr(t, "document.write"));
    assert_null(strstr(t, "eval("));
    /* the one http: is the SVG namespace, a name, not a download */
    const char *http = strstr(t, "http:");
    if (http) {
      assert_int_equal(strncmp(http, "http://www.w3.org/2000/svg\"", 27), 0);
      assert_null(strstr(http + 1, "http:"));
    }
  }
  assert_non_null(strstr((const char *)pr__dash_asset(PR_DASH_PAGE).data, "dashboard/app.js"));
  bool csp = false;
  for (int i = 0; pr__dash_headers[i][0]; i++)
    if (!strcmp(pr__dash_headers[i][0], "Content-Security-Policy")) {
      csp = true;
      assert_non_null(strstr(pr__dash_headers[i][1], "default-src 'none'"));
      assert_non_null(strstr(pr__dash_headers[i][1], "script-src 'self';"));
      assert_non_null(strstr(pr__dash_headers[i][1], "connect-src 'self';"));
      assert_null(strstr(pr__dash_headers[i][1], "unsafe"));
    }
  assert_true(csp);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_untrusted_text),
      cmocka_unit_test(test_ready_model),
      cmocka_unit_test(test_cores_bounded),
      cmocka_unit_test(test_no_models),
      cmocka_unit_test(test_routes),
      cmocka_unit_test(test_files_self_contained),
      cmocka_unit_test(test_profile_too_sparse),
      cmocka_unit_test(test_topology_cores),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
