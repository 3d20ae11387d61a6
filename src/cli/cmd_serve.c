/* packrat serve: serve a model repository over the Open Inference Protocol. */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/log.h"
#include "base/topology.h"
#include "cli/args.h"
#include "cli/cli.h"
#include "server/server.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: packrat serve --model-repository DIR [options]\n"
          "\n"
          "Serves every model of DIR (DIR/<model>/<version>/model.onnx with an optional\n"
          "DIR/<model>/config.json, or DIR/<model>.onnx) over the Open Inference Protocol.\n"
          "Each model is profiled (progress and the time left in the log; a cached profile\n"
          "that covers it is reused, see 'packrat profile --help'), planned for its max\n"
          "batch and run on pinned instances; a fixed \"plan\" in config.json (e.g.\n"
          "\"1x1\") skips the profile. Every config.json key: docs/model-repository.md.\n"
          "The ready line names the address; the dashboard is its page /.\n"
          "\n"
          "  --host ADDR              IPv4 or IPv6 address to listen on (default\n"
          "                           127.0.0.1; 0.0.0.0 or :: for every interface)\n"
          "  --http-port N            port (default 8000; 0 picks a free one)\n"
          "  --grpc-port N            also serve gRPC (KServe v2 GRPCInferenceService and\n"
          "                           grpc.health.v1.Health) on this port (0 picks a free\n"
          "                           one; default: no gRPC); same models, queue, limits,\n"
          "                           tokens (authorization metadata) and TLS as HTTP\n"
          "  --grpc-threads N         threads serving all gRPC calls (default 4)\n"
          "  --grpc-stream-max-pending N\n"
          "                           a ModelStreamInfer stream's requests waiting for\n"
          "                           their answer to be sent, at most (default 64; also\n"
          "                           at most --max-body-mb of their messages): beyond,\n"
          "                           the stream is not read until answers go out\n"
          "  --cores LIST             CPUs to use, e.g. 0-7 or 0,2,4 (default: all)\n"
          "  --cpus N                 CPUs' worth of threads to run at once (default: the\n"
          "                           CPUs allowed, at most the cgroup CPU quota rounded\n"
          "                           down: a container's --cpus or a Kubernetes limit)\n"
          "  --max-batch B            default max batch size (default 8)\n"
          "  --max-queue-delay-us U   default max queue delay (default 2000)\n"
          "  --max-body-mb N          largest infer request body (default 64; other\n"
          "                           routes take 1 MiB)\n"
          "  --max-inflight-mb N      bytes held for clients at once: request bodies and\n"
          "                           parsed tensors, and infer answers not yet sent;\n"
          "                           beyond it requests and answers get 503 (default 1024)\n"
          "  --max-models N           models known at once (default 64)\n"
          "  --max-prepared-plans N   prepared plans per model; the least recently used is\n"
          "                           evicted beyond it (default 16, 2..64)\n"
          "  --balance-window-s S     the models that follow the load divide the cores\n"
          "                           (config.json \"cores\"); every S seconds the\n"
          "                           balancer re-divides them when the loads moved\n"
          "                           (a 10%% better division, 3 windows in a row, at\n"
          "                           most every 10 s; default 1, 0: only on loads and\n"
          "                           unloads)\n"
          "  --max-connections N      open HTTP connections (default 4096; the open-file\n"
          "                           limit is raised to fit when the hard limit allows)\n"
          "  --max-connections-per-client N\n"
          "                           connections from one client address (default 0: no\n"
          "                           limit; keep 0 behind a load balancer)\n"
          "  --http-threads N         threads serving all connections (default 4)\n"
          "  --http-colocate on|off   a thread serving connections moves to the core of\n"
          "                           the idle instance it hands a request to, so that\n"
          "                           neither hand-off wakes another core (default on)\n"
          "  --idle-timeout-s N       close a connection silent this long, one whose\n"
          "                           answer is not read included; cancel a gRPC call or\n"
          "                           stream whose answer is not sent in it (default 30)\n"
          "  --shutdown-timeout-s N   on SIGTERM/SIGINT, the longest wait for accepted\n"
          "                           requests before exiting (default 30)\n"
          "  --request-timeout-ms N   default time a request may wait in the queue\n"
          "                           (default 30000); a request the queue's backlog\n"
          "                           cannot serve within it (rows ahead at the live\n"
          "                           plan's measured rate) gets 503 with Retry-After\n"
          "                           at once\n"
          "  --queue-capacity N       default requests a model queues at most (default:\n"
          "                           --max-connections, so that a connection's request\n"
          "                           waits rather than being refused while the backlog\n"
          "                           can be served within its timeout)\n"
          "  --tls-cert FILE          serve HTTPS with this PEM certificate (chain)...\n"
          "  --tls-key FILE           ...and its PEM private key\n"
          "  --tls-client-ca FILE     mutual TLS: requests need a client certificate this\n"
          "                           PEM CA signed (403 without one)\n"
          "  --auth-token-file FILE   bearer tokens (one a line) that inference, metadata,\n"
          "                           metrics and the dashboard's state require; health,\n"
          "                           readiness and the dashboard page stay open\n"
          "  --admin-token-file FILE  bearer tokens that loading, unloading models and\n"
          "                           changing plans require (default: the auth tokens)\n"
          "  --strict-readiness on|off\n"
          "                           GET /v2/health/ready (and gRPC ServerReady, Health):\n"
          "                           on, ready only while every model is ready (a failed\n"
          "                           load or a folder that is no model's layout makes it\n"
          "                           503; an unload on purpose does not); off, ready\n"
          "                           whenever the server serves (default on)\n"
          "  --log-format text|json   log lines (default text)\n"
          "\n"
          "Signals: SIGTERM or SIGINT answers every accepted request, then exits (within\n"
          "--shutdown-timeout-s; while models still load, at once); SIGHUP is logged and\n"
          "ignored; SIGPIPE is ignored.\n");
}

static int parse_cpus(const char *s, int *cpus, int max) {
  int n = 0;
  while (*s) {
    char *end;
    long a = strtol(s, &end, 10), b = a;
    if (end == s || a < 0) return -1;
    if (*end == '-') {
      s = end + 1;
      b = strtol(s, &end, 10);
      if (end == s || b < a) return -1;
    }
    for (long c = a; c <= b; c++) {
      if (n == max || c > 65535) return -1;
      cpus[n++] = (int)c;
    }
    s = end;
    if (*s == ',')
      s++;
    else if (*s)
      return -1;
  }
  return n;
}

/* One flag (argv[*i], value argv[*i + 1]) into cfg; returns -1 to go on,
 * else the exit status. */
static int parse_flag(pr_server_config_t *cfg, int argc, char **argv, int *i) {
  static int cpus[4096];
  const char *a = argv[*i], *val = *i + 1 < argc ? argv[*i + 1] : NULL;
  if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
    usage(stdout);
    return 0;
  } else if (!strcmp(a, "--model-repository") && val) {
    cfg->repository = val;
  } else if (!strcmp(a, "--host") && val) {
    cfg->host = val;
  } else if (!strcmp(a, "--http-port")) {
    cfg->port = (int)pr__cli_parse_long(a, val, 0, 65535);
  } else if (!strcmp(a, "--grpc-port")) {
    cfg->grpc_port = (int)pr__cli_parse_long(a, val, 0, 65535);
  } else if (!strcmp(a, "--grpc-stream-max-pending")) {
    cfg->grpc_stream_max_pending = (int)pr__cli_parse_long(a, val, 1, 65536);
  } else if (!strcmp(a, "--grpc-threads")) {
    cfg->grpc_threads = (int)pr__cli_parse_long(a, val, 1, 256);
  } else if (!strcmp(a, "--max-batch")) {
    cfg->max_batch = (int)pr__cli_parse_long(a, val, 1, 4096);
  } else if (!strcmp(a, "--max-queue-delay-us")) {
    cfg->max_queue_delay_us = (int)pr__cli_parse_long(a, val, 0, 10000000);
  } else if (!strcmp(a, "--max-body-mb")) {
    cfg->max_body_bytes = (size_t)pr__cli_parse_long(a, val, 1, 4096) << 20;
  } else if (!strcmp(a, "--max-inflight-mb")) {
    cfg->max_inflight_bytes = (size_t)pr__cli_parse_long(a, val, 1, 1 << 20) << 20;
  } else if (!strcmp(a, "--max-models")) {
    cfg->max_models = (int)pr__cli_parse_long(a, val, 1, 4096);
  } else if (!strcmp(a, "--balance-window-s")) {
    cfg->balance_window_s = pr__cli_parse_double(a, val, 0, 3600);
  } else if (!strcmp(a, "--max-prepared-plans")) {
    cfg->max_prepared_plans = (int)pr__cli_parse_long(a, val, 2, 64);
  } else if (!strcmp(a, "--max-connections")) {
    cfg->max_connections = (int)pr__cli_parse_long(a, val, 1, 1000000);
  } else if (!strcmp(a, "--max-connections-per-client")) {
    cfg->max_connections_per_client = (int)pr__cli_parse_long(a, val, 0, 1000000);
  } else if (!strcmp(a, "--http-threads")) {
    cfg->http_threads = (int)pr__cli_parse_long(a, val, 1, 256);
  } else if (!strcmp(a, "--idle-timeout-s")) {
    cfg->idle_timeout_s = (int)pr__cli_parse_long(a, val, 1, 86400);
  } else if (!strcmp(a, "--shutdown-timeout-s")) {
    cfg->shutdown_timeout_s = (int)pr__cli_parse_long(a, val, 1, 86400);
  } else if (!strcmp(a, "--tls-cert") && val) {
    cfg->tls_cert_file = val;
  } else if (!strcmp(a, "--tls-key") && val) {
    cfg->tls_key_file = val;
  } else if (!strcmp(a, "--tls-client-ca") && val) {
    cfg->tls_client_ca_file = val;
  } else if (!strcmp(a, "--auth-token-file") && val) {
    cfg->auth_token_file = val;
  } else if (!strcmp(a, "--admin-token-file") && val) {
    cfg->admin_token_file = val;
  } else if (!strcmp(a, "--queue-capacity")) {
    cfg->queue_capacity = (int)pr__cli_parse_long(a, val, 1, 10000000);
  } else if (!strcmp(a, "--request-timeout-ms")) {
    cfg->request_timeout_s = (double)pr__cli_parse_long(a, val, 1, 86400000) / 1000.0;
  } else if (!strcmp(a, "--cores") && val) {
    cfg->n_cpus = parse_cpus(val, cpus, 4096);
    if (cfg->n_cpus <= 0) {
      fprintf(stderr, "packrat serve: --cores wants a list like 0-3,8 (got '%s')\n", val);
      return 2;
    }
    cfg->cpus = cpus;
  } else if (!strcmp(a, "--cpus")) {
    pr__topology_set_cpus((int)pr__cli_parse_long(a, val, 1, 65536));
  } else if (!strcmp(a, "--http-colocate") && val) {
    if (strcmp(val, "on") && strcmp(val, "off")) {
      fprintf(stderr, "packrat serve: --http-colocate is on or off\n");
      return 2;
    }
    cfg->http_colocate = !strcmp(val, "on");
  } else if (!strcmp(a, "--strict-readiness") && val) {
    if (strcmp(val, "on") && strcmp(val, "off")) {
      fprintf(stderr, "packrat serve: --strict-readiness is on or off\n");
      return 2;
    }
    cfg->strict_readiness = !strcmp(val, "on");
  } else if (!strcmp(a, "--log-format") && val) {
    if (strcmp(val, "text") && strcmp(val, "json")) {
      fprintf(stderr, "packrat serve: --log-format is text or json\n");
      return 2;
    }
    pr__log_set_json(!strcmp(val, "json"));
  } else {
    fprintf(stderr, "packrat serve: unexpected argument '%s'\n", a);
    usage(stderr);
    return 2;
  }
  (*i)++; /* every flag but --help takes a value */
  return -1;
}

/* Every connection is a descriptor: the soft open-file limit (often 1024)
 * is raised toward what max_connections needs, as far as the hard limit
 * allows. */
static void raise_file_limit(int max_connections) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl)) return;
  rlim_t want = (rlim_t)max_connections + 256;
  if (rl.rlim_max != RLIM_INFINITY && want > rl.rlim_max) want = rl.rlim_max;
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
    rl.rlim_cur = want;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
      rl.rlim_cur < (rlim_t)max_connections + 64)
    pr__log(PR_LOG_WARN, "open-file limit %llu: fewer than --max-connections %d fit",
            (unsigned long long)rl.rlim_cur, max_connections);
}

/* Signals: a thread waits for SIGINT/SIGTERM (blocked in every thread).
 * Before the server listens (while models load and profile), a signal ends
 * the process at once: nothing was accepted, and the profile cache is only
 * ever written whole (temporary file and rename). After, it wakes the main
 * thread, which drains. `listening` is set under `lock` by before_listen,
 * so the two cannot cross. */
static struct {
  pthread_mutex_t lock;
  bool listening;
  sem_t got;
  int sig;
  sigset_t set;
} sigs = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void *signal_main(void *arg) {
  (void)arg;
  int sig = 0;
  /* SIGHUP (a closed terminal, or an operator used to daemons that reload
   * on it) is logged and ignored: models change through the repository
   * routes, one at a time, with their errors in the answer */
  while (!sigwait(&sigs.set, &sig) && sig == SIGHUP)
    pr__log(PR_LOG_WARN,
            "SIGHUP: ignored (the repository is not re-read; load or unload a model "
            "with POST /v2/repository/models/<model>/load or /unload)");
  pthread_mutex_lock(&sigs.lock);
  if (!sigs.listening) {
    pr__log(PR_LOG_INFO, "%s while starting: exiting (no request was accepted)",
            sig == SIGINT ? "SIGINT" : "SIGTERM");
    _exit(0);
  }
  sigs.sig = sig;
  pthread_mutex_unlock(&sigs.lock);
  sem_post(&sigs.got);
  return NULL;
}

static void before_listen(void *ctx) {
  (void)ctx;
  pthread_mutex_lock(&sigs.lock);
  sigs.listening = true;
  pthread_mutex_unlock(&sigs.lock);
}

/* Starts the server, logs what it serves, waits for SIGINT or SIGTERM,
 * stops it; the exit status. */
static int serve(pr_server_config_t *cfg) {
  pr_server_t *s;
  char err[1024];
  pthread_t t;
  sem_init(&sigs.got, 0, 0);
  if (pthread_create(&t, NULL, signal_main, NULL)) {
    pr__log(PR_LOG_ERROR, "cannot start the signal thread");
    return 1;
  }
  pthread_detach(t);
  cfg->before_listen = before_listen;
  if (pr__server_start(cfg, &s, err, sizeof err)) {
    pr__log(PR_LOG_ERROR, "%s", err);
    return 1;
  }
  char desc[8192];
  pr__server_describe(s, desc, sizeof desc);
  char *save = NULL;
  for (char *line = strtok_r(desc, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
    pr__log(PR_LOG_INFO, "%s", line);
  char url_host[80]; /* an IPv6 address goes in brackets in a URL */
  snprintf(url_host, sizeof url_host, strchr(cfg->host, ':') ? "[%s]" : "%s", cfg->host);
  char grpc[128] = "";
  if (pr__server_grpc_port(s) >= 0)
    snprintf(grpc, sizeof grpc, ", gRPC%s: %s:%d", cfg->tls_cert_file ? " (TLS)" : "", url_host,
             pr__server_grpc_port(s));
  const char *scheme = cfg->tls_cert_file ? "https" : "http";
  pr__log(PR_LOG_INFO,
          "ready: %s://%s:%d/v2 (infer: POST /v2/models/<model>/infer, metrics: /metrics, "
          "dashboard: %s://%s:%d/%s)",
          scheme, url_host, pr__server_port(s), scheme, url_host, pr__server_port(s), grpc);
  while (sem_wait(&sigs.got) && errno == EINTR) {
  }
  pr__log(PR_LOG_INFO, "%s: finishing accepted requests, then exiting",
          sigs.sig == SIGINT ? "SIGINT" : "SIGTERM");
  pr__server_stop(s);
  pr__log(PR_LOG_INFO, "stopped");
  return 0;
}

int pr__cli_serve(int argc, char **argv) {
  pr_server_config_t cfg;
  pr__server_config_default(&cfg);
  for (int i = 1; i < argc; i++) {
    int rc = parse_flag(&cfg, argc, argv, &i);
    if (rc >= 0) return rc;
  }
  if (!cfg.repository) {
    fprintf(stderr, "packrat serve: --model-repository is required\n");
    usage(stderr);
    return 2;
  }
  /* glibc gives each new thread its own malloc arena (up to 8 per core); as
   * prepared plans come and go (threads started and joined), freed memory
   * scattered over many arenas kept the resident size growing by 10-30%
   * before it levelled off. Four arenas keep it flat (measured with
   * tests/e2e/hostile.py memory). MALLOC_ARENA_MAX, when set, decides. */
  if (!getenv("MALLOC_ARENA_MAX")) mallopt(M_ARENA_MAX, 4);
  /* blocks of a megabyte or more (request bodies and messages, batched
   * tensors) are mapped and unmapped on their own. glibc's moving threshold
   * rises to the size of the largest block freed (up to 32 MB) and then
   * serves such blocks from the arenas, where the space each thread freed
   * stays resident: 100 refused 8 MB gRPC messages took the resident size
   * from 30 to 70 MB (with grpc.c's trim after each), against flat with the
   * threshold fixed (tests/e2e/hostile.py grpc_memory). Mapping costs a
   * megabyte's page faults, about 0.1 ms, against a transfer of that size.
   * MALLOC_MMAP_THRESHOLD_, when set, decides. */
  if (!getenv("MALLOC_MMAP_THRESHOLD_")) mallopt(M_MMAP_THRESHOLD, 1 << 20);
  raise_file_limit(cfg.max_connections);
  /* every thread inherits the blocked signals; the main thread waits for them */
  sigemptyset(&sigs.set);
  sigaddset(&sigs.set, SIGINT);
  sigaddset(&sigs.set, SIGTERM);
  sigaddset(&sigs.set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &sigs.set, NULL);
  signal(SIGPIPE, SIG_IGN);
  return serve(&cfg);
}
