/* packrat serve: a model repository served over the Open Inference Protocol
 * (HTTP/1.1, libmicrohttpd; and gRPC, server/grpc.h). Each model version gets a profile (cached), a
 * plan for its max batch and a scheduler with the plan's pinned instances. */
#ifndef PR_SERVER_SERVER_H
#define PR_SERVER_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#include "packrat/engine.h"

typedef struct {
  const char *repository;      /* DIR/<model>/<version>/model.onnx or DIR/<model>.onnx */
  const char *host;            /* default 127.0.0.1 */
  int port;                    /* default 8000; 0 picks a free port */
  int grpc_port;               /* gRPC (server/grpc.h): -1 none (default), 0 a free port */
  int grpc_threads;            /* threads serving every gRPC call (default 4) */
  int grpc_stream_max_pending; /* a stream's unanswered requests (default 64) */
  const int *cpus;             /* CPUs to use (default: every allowed CPU, topology order) */
  int n_cpus;
  int max_batch;                  /* default for models without config (default 8) */
  int max_queue_delay_us;         /* default 2000 */
  int queue_capacity;             /* default 0: max_connections requests */
  double request_timeout_s;       /* default 30 */
  size_t max_body_bytes;          /* infer bodies (default 64 MiB); other routes take 1 MiB */
  size_t max_inflight_bytes;      /* bodies, parsed tensors, unsent answers (default 1 GiB) */
  int max_models;                 /* models known at once (default 64) */
  int max_prepared_plans;         /* prepared plans per model (default 16) */
  double balance_window_s;        /* the balancer's window (default 1; 0: cores move on
                                     loads and unloads only) */
  int max_connections;            /* open HTTP connections (default 4096) */
  int max_connections_per_client; /* from one client address (default 0: no limit) */
  int http_threads;               /* threads serving every connection (default 4) */
  /* an HTTP thread moves to the core of the waiting instance it hands an
   * infer request to (pr__sched_home_cpu), and stays (default true) */
  bool http_colocate;
  int idle_timeout_s;             /* silent connection closed, unsent gRPC answer cancelled (30) */
  int shutdown_timeout_s;         /* pr__server_stop's bound on draining (default 30) */
  bool load_all;                  /* load every model at start (default true) */
  bool strict_readiness;          /* ready: every model ready (default true) or the server up */
  const char *auth_token_file;    /* bearer tokens for reads and inference (server/auth.h) */
  const char *admin_token_file;   /* bearer tokens for changes of state */
  const char *tls_cert_file;      /* PEM certificate (chain): HTTPS (server/tls.h) */
  const char *tls_key_file;       /* its PEM private key */
  const char *tls_client_ca_file; /* PEM CA: clients must present a certificate it signed */
  /* optional: called by pr__server_start once the models are loaded, just
   * before it serves (the ports are bound before the models load; from
   * then on a stop must drain, not abandon) */
  void (*before_listen)(void *ctx);
  void *before_listen_ctx;
} pr_server_config_t;

typedef struct pr_server pr_server_t;

void pr__server_config_default(pr_server_config_t *c);
/* Binds the ports (a port in use fails here, before any model loads),
 * loads the repository's models and starts serving. */
pr_status_t pr__server_start(const pr_server_config_t *cfg, pr_server_t **out, char *err,
                             size_t err_len);
/* The port actually bound. */
int pr__server_port(const pr_server_t *s);
/* The gRPC port bound; -1 without gRPC. */
int pr__server_grpc_port(const pr_server_t *s);
/* Human-readable summary of each loaded model's plan (for the log). */
void pr__server_describe(pr_server_t *s, char *buf, size_t len);
/* Stops accepting connections, answers every accepted request (each answer
 * closes its connection), closes idle ones, frees all; within
 * shutdown_timeout_s (after it, requests still running are left
 * unanswered and their memory is not freed: the process is exiting). */
void pr__server_stop(pr_server_t *s);

#endif
