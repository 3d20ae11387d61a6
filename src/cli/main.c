/* packrat: CPU inference server for ONNX models. Dispatches subcommands. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: packrat <command> [options]\n"
          "\n"
          "commands:\n"
          "  run MODEL.onnx     run a model (optionally under a plan) and report latency\n"
          "  profile MODEL.onnx measure latency per thread count and batch size\n"
          "  plan MODEL.onnx    the best instances for a batch on this machine\n"
          "  serve              serve a model repository over HTTP (Open Inference Protocol)\n"
          "  bench              load a running server and report throughput and latency\n"
          "\n"
          "'packrat <command> --help' describes a command's options.\n");
}

long pr_cli_parse_long(const char *flag, const char *val, long min, long max) {
  if (!val) {
    fprintf(stderr, "packrat: %s needs a value\n", flag);
    exit(2);
  }
  char *end;
  errno = 0;
  long v = strtol(val, &end, 10);
  if (errno || *end || end == val || v < min || v > max) {
    fprintf(stderr, "packrat: %s must be an integer in [%ld, %ld], got '%s'\n", flag, min, max,
            val);
    exit(2);
  }
  return v;
}

void pr_cli_parse_dim(const char *flag, const char *val, pr_cli_dims_t *d) {
  const char *eq = val ? strchr(val, '=') : NULL;
  if (!eq || eq == val || (size_t)(eq - val) >= sizeof d->names[0]) {
    fprintf(stderr, "packrat: %s needs NAME=N (a name of at most %zu characters)\n", flag,
            sizeof d->names[0] - 1);
    exit(2);
  }
  if (d->n == PR_CLI_MAX_DIMS) {
    fprintf(stderr, "packrat: at most %d %s flags\n", PR_CLI_MAX_DIMS, flag);
    exit(2);
  }
  int i = d->n++;
  snprintf(d->names[i], sizeof d->names[i], "%.*s", (int)(eq - val), val);
  d->name_ptrs[i] = d->names[i];
  d->values[i] = pr_cli_parse_long(flag, eq + 1, 1, 1L << 30);
}

void pr_cli_dims_apply(const pr_cli_dims_t *d, pr_session_options_t *opt) {
  opt->n_dims = d->n;
  opt->dim_names = d->n ? d->name_ptrs : NULL;
  opt->dim_values = d->n ? d->values : NULL;
}

int main(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
      !strcmp(argv[1], "help")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (!strcmp(argv[1], "run")) return pr_cli_run(argc - 1, argv + 1);
  if (!strcmp(argv[1], "profile")) return pr_cli_profile(argc - 1, argv + 1);
  if (!strcmp(argv[1], "plan")) return pr_cli_plan(argc - 1, argv + 1);
  if (!strcmp(argv[1], "serve")) return pr_cli_serve(argc - 1, argv + 1);
  if (!strcmp(argv[1], "bench")) return pr_cli_bench(argc - 1, argv + 1);
  fprintf(stderr, "packrat: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return 2;
}
