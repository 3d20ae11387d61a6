/* packrat bench: a load client for the Open Inference Protocol. Flags and
 * the report here; the load itself (closed and open loops, response checks)
 * in loadgen.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "cli/args.h"
#include "cli/cli.h"
#include "cli/loadgen.h"

#define MAX_PHASES 32

static void usage(FILE *f) {
  fprintf(f,
          "usage: packrat bench --url http://HOST:PORT --model M [options]\n"
          "\n"
          "  --concurrency C      closed loop with C connections (default 1); a 503 is\n"
          "                       waited out for its Retry-After (1 s without one), as a\n"
          "                       real client backs off (counted in \"backoffs\")\n"
          "  --rate R             open loop: Poisson arrivals at R requests/s\n"
          "  --schedule R:S,...   open loop in phases: R requests/s for S seconds each\n"
          "  --duration S         seconds of load (default 10; not with --schedule)\n"
          "  --input FILE         the request's input (.pb or .npy, batch axis included);\n"
          "                       default: random data of the model's shape at batch 1\n"
          "  --json-data          send tensors as JSON instead of the binary extension\n"
          "  --busy-poll          closed loop, REST: each connection's thread polls its\n"
          "                       socket without sleeping (a core each), as a latency\n"
          "                       client does: on one machine a client asleep on an idle\n"
          "                       core makes the server's send pay for waking that core\n"
          "  --protocol P         rest (default) or grpc: the same request as a KServe v2\n"
          "                       ModelInferRequest (raw_input_contents) on gRPC, closed loop\n"
          "                       only; --url still names the REST port (model metadata)\n"
          "  --grpc-address A     HOST:PORT of the server's gRPC port (with --protocol grpc)\n"
          "  --token-file F       send the bearer token on F's first line with every request\n"
          "  --expect FILE        check every response's first output against this tensor\n"
          "                       (max|diff| <= 1e-4 x max|expected|); a mismatch is an error\n"
          "  --json               print one JSON object as the last line: status_counts\n"
          "                       holds every request by class (2xx..5xx, transport: no\n"
          "                       answer), error_counts the errors by class (their sum\n"
          "                       is errors; a 2xx error is a mismatch)\n");
}

typedef struct {
  const char *url, *model, *input, *schedule, *expect, *protocol, *grpc_address, *token_file;
  int concurrency;
  double rate, duration;
  bool json, binary, busy_poll;
  pr_loadgen_phase_t phases[MAX_PHASES];
  int n_phases;
} bench_args_t;

/* One flag (argv[*i]); returns -1 to go on, else the exit status. */
static int parse_flag(bench_args_t *b, int argc, char **argv, int *i) {
  const char *a = argv[*i], *val = *i + 1 < argc ? argv[*i + 1] : NULL;
  const char **str = !strcmp(a, "--url")            ? &b->url
                     : !strcmp(a, "--model")        ? &b->model
                     : !strcmp(a, "--input")        ? &b->input
                     : !strcmp(a, "--expect")       ? &b->expect
                     : !strcmp(a, "--schedule")     ? &b->schedule
                     : !strcmp(a, "--protocol")     ? &b->protocol
                     : !strcmp(a, "--grpc-address") ? &b->grpc_address
                     : !strcmp(a, "--token-file")   ? &b->token_file
                                                    : NULL;
  if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
    usage(stdout);
    return 0;
  } else if (str && val) {
    *str = val, (*i)++;
  } else if (!strcmp(a, "--concurrency")) {
    b->concurrency = (int)pr__cli_parse_long(a, val, 1, 1024), (*i)++;
  } else if (!strcmp(a, "--rate") && val) {
    b->rate = atof(val), (*i)++;
    if (!(b->rate > 0 && b->rate <= 1e6))
      return fprintf(stderr, "packrat bench: --rate must be in (0, 1e6]\n"), 2;
  } else if (!strcmp(a, "--duration") && val) {
    b->duration = atof(val), (*i)++;
    if (!(b->duration > 0 && b->duration <= 86400))
      return fprintf(stderr, "packrat bench: --duration must be in (0, 86400]\n"), 2;
  } else if (!strcmp(a, "--json")) {
    b->json = true;
  } else if (!strcmp(a, "--json-data")) {
    b->binary = false;
  } else if (!strcmp(a, "--busy-poll")) {
    b->busy_poll = true;
  } else {
    fprintf(stderr, "packrat bench: unexpected argument '%s'\n", a);
    usage(stderr);
    return 2;
  }
  return -1;
}

/* --schedule RATE:SECONDS,... into b->phases; false when malformed. */
static bool parse_schedule(bench_args_t *b) {
  for (const char *p = b->schedule; *p;) {
    char *end;
    double r = strtod(p, &end);
    if (end == p || *end != ':' || !(r > 0) || b->n_phases == MAX_PHASES) return false;
    p = end + 1;
    double s = strtod(p, &end);
    if (end == p || !(s > 0)) return false;
    b->phases[b->n_phases].rate = r;
    b->phases[b->n_phases++].seconds = s;
    p = end;
    if (*p == ',')
      p++;
    else if (*p)
      return false;
  }
  return true;
}

/* --protocol and --grpc-address: -1 to go on, else the exit status. */
static int check_protocol(const bench_args_t *b) {
  if (b->protocol && strcmp(b->protocol, "rest") && strcmp(b->protocol, "grpc")) {
    fprintf(stderr, "packrat bench: --protocol is rest or grpc, not '%s'\n", b->protocol);
    return 2;
  }
  bool grpc = b->protocol && !strcmp(b->protocol, "grpc");
  if (grpc && (!b->grpc_address || !b->concurrency || !b->binary || b->expect)) {
    fprintf(stderr,
            "packrat bench: --protocol grpc needs --grpc-address HOST:PORT and a closed "
            "loop (--concurrency), and takes neither --json-data nor --expect\n");
    return 2;
  }
  if (b->busy_poll && (grpc || !b->concurrency)) {
    fprintf(stderr, "packrat bench: --busy-poll goes with a REST closed loop (--concurrency)\n");
    return 2;
  }
  if (!grpc && b->grpc_address) {
    fprintf(stderr, "packrat bench: --grpc-address goes with --protocol grpc\n");
    return 2;
  }
  return -1;
}

/* Returns -1 to go on, else the exit status. */
static int parse_args(bench_args_t *b, int argc, char **argv) {
  memset(b, 0, sizeof *b);
  b->duration = 10;
  b->binary = true;
  for (int i = 1; i < argc; i++) {
    int rc = parse_flag(b, argc, argv, &i);
    if (rc >= 0) return rc;
  }
  if (!b->url || !b->model || (b->concurrency && (b->rate > 0 || b->schedule)) ||
      (b->rate > 0 && b->schedule)) {
    fprintf(stderr,
            "packrat bench: give --url, --model and one of --concurrency, --rate, --schedule\n");
    return 2;
  }
  if (b->schedule && !parse_schedule(b)) {
    fprintf(stderr, "packrat bench: --schedule wants RATE:SECONDS,... with positive numbers\n");
    return 2;
  }
  if (!b->schedule && b->rate > 0) {
    b->phases[0] = (pr_loadgen_phase_t){.rate = b->rate, .seconds = b->duration};
    b->n_phases = 1;
  } else if (!b->schedule && !b->concurrency) {
    b->concurrency = 1;
  }
  return check_protocol(b);
}

/* Prints each phase's line and adds the phases to o. */
static void report_phases(bench_args_t *b, json_t *o) {
  json_t *ph = json_array();
  for (int i = 0; i < b->n_phases; i++) {
    pr_loadgen_phase_t *p = &b->phases[i];
    json_t *pj = pr__loadgen_result_json(&p->res, p->seconds);
    json_object_set_new(pj, "rate", json_real(p->rate));
    json_array_append_new(ph, pj);
    printf(
        "phase %d (%.1f req/s for %.0f s): %llu requests, %llu errors, p50 %.1f ms, p99 %.1f "
        "ms\n",
        i, p->rate, p->seconds, (unsigned long long)p->res.requests,
        (unsigned long long)p->res.errors, json_real_value(json_object_get(pj, "p50_ms")),
        json_real_value(json_object_get(pj, "p99_ms")));
    free(p->res.lat);
  }
  json_object_set_new(o, "phases", ph);
}

static void report(bench_args_t *b, pr_loadgen_t *lg, pr_loadgen_result_t *all, double elapsed,
                   json_t *o) {
  printf(
      "%llu requests in %.1f s: %llu errors, %.1f req/s; latency p50 %.1f ms, p90 %.1f ms, p99 "
      "%.1f ms, max %.1f ms\n",
      (unsigned long long)all->requests, elapsed, (unsigned long long)all->errors,
      json_real_value(json_object_get(o, "throughput_rps")),
      json_real_value(json_object_get(o, "p50_ms")), json_real_value(json_object_get(o, "p90_ms")),
      json_real_value(json_object_get(o, "p99_ms")), json_real_value(json_object_get(o, "max_ms")));
  /* each error is in exactly one class (loadgen.h): the classes sum to the total */
  const uint64_t *st = all->errors_by_class;
  if (all->errors)
    printf("errors by status: 2xx %llu, 3xx %llu, 4xx %llu, 5xx %llu, transport %llu\n",
           (unsigned long long)st[PR_LOADGEN_2XX], (unsigned long long)st[PR_LOADGEN_3XX],
           (unsigned long long)st[PR_LOADGEN_4XX], (unsigned long long)st[PR_LOADGEN_5XX],
           (unsigned long long)st[PR_LOADGEN_TRANSPORT]);
  json_object_set_new(o, "backoffs", json_integer((json_int_t)atomic_load(&lg->backoffs)));
  if (lg->check) {
    uint64_t bad = atomic_load(&lg->mismatches);
    json_object_set_new(o, "mismatches", json_integer((json_int_t)bad));
    printf("responses checked against %s: %llu mismatches\n", b->expect, (unsigned long long)bad);
  }
  if (b->json) {
    char *s = json_dumps(o, JSON_COMPACT);
    printf("%s\n", s);
    free(s);
  }
}

/* Sends the load and reports it; returns the exit status. */
static int bench(bench_args_t *b, pr_loadgen_t *lg) {
  char base[1024];
  snprintf(base, sizeof base, "%s", b->url);
  size_t bl = strlen(base);
  while (bl && base[bl - 1] == '/') base[--bl] = 0;
  if (b->token_file && pr__loadgen_set_token(&lg->rq, b->token_file)) return 1;
  if (pr__loadgen_request_build(base, b->model, b->input, b->binary, &lg->rq)) return 1;
  double reconf0 = pr__loadgen_scrape_reconfigurations(base);
  pr_loadgen_result_t all = {0};
  pr_loadgen_grpc_t g = {0};
  bool grpc = b->protocol && !strcmp(b->protocol, "grpc");
  if (grpc && pr__loadgen_grpc_build(&lg->rq, b->model, b->grpc_address, &g)) return 1;
  double t0 = pr__now();
  if (grpc)
    pr__loadgen_grpc_closed(&g, b->concurrency, t0 + b->duration, &all);
  else if (b->concurrency)
    pr__loadgen_closed(lg, b->concurrency, t0 + b->duration, &all);
  else
    pr__loadgen_open(lg, b->phases, b->n_phases, &all);
  pr__loadgen_grpc_free(&g);
  double elapsed = pr__now() - t0;
  double reconf1 = pr__loadgen_scrape_reconfigurations(base);
  json_t *o = pr__loadgen_result_json(&all, elapsed);
  json_object_set_new(o, "mode", json_string(b->concurrency ? "closed" : "open"));
  json_object_set_new(o, "protocol", json_string(grpc ? "grpc" : "rest"));
  if (b->concurrency) json_object_set_new(o, "concurrency", json_integer(b->concurrency));
  if (reconf0 >= 0 && reconf1 >= 0)
    json_object_set_new(o, "reconfigurations", json_integer((json_int_t)(reconf1 - reconf0)));
  if (b->n_phases) report_phases(b, o);
  report(b, lg, &all, elapsed, o);
  json_decref(o);
  free(all.lat);
  return 0;
}

int pr__cli_bench(int argc, char **argv) {
  bench_args_t *b = malloc(sizeof *b);
  pr_loadgen_t *lg = calloc(1, sizeof *lg);
  int rc = b && lg ? parse_args(b, argc, argv) : 1;
  if (rc < 0 && b->expect) {
    char err[512] = "";
    if (pr_engine_tensor_read_file(b->expect, &lg->expect, NULL, err, sizeof err) ||
        lg->expect.dtype != PR_DTYPE_FLOAT) {
      fprintf(stderr, "packrat bench: --expect: %s\n", err[0] ? err : "must be a FLOAT tensor");
      rc = 1;
    }
    lg->check = true;
  }
  if (rc < 0) {
    lg->busy_poll = b->busy_poll;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    rc = bench(b, lg);
    curl_global_cleanup();
  }
  if (lg) pr__loadgen_free(lg);
  free(lg);
  free(b);
  return rc;
}
