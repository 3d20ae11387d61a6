/* packrat: CPU inference server for ONNX models. Dispatches subcommands. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "packrat/engine.h"
#include "pr_build_version.h"

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
          "  infer              send one request to a running server and print the outputs\n"
          "  version            print the version (also: packrat --version)\n"
          "\n"
          "'packrat <command> --help' describes a command's options.\n");
}

static int version(void) {
  printf("packrat %s\n%s\n", PR_BUILD_VERSION, pr_engine_backend_version());
  return 0;
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
  if (!strcmp(argv[1], "infer")) return pr_cli_infer(argc - 1, argv + 1);
  if (!strcmp(argv[1], "version") || !strcmp(argv[1], "--version") || !strcmp(argv[1], "-V"))
    return version();
  fprintf(stderr, "packrat: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return 2;
}
