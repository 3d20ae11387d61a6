/* packrat: CPU inference server for ONNX models. Dispatches subcommands. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
          "  quantize MODEL.onnx  write an int8 (QDQ) model calibrated on sample inputs\n"
          "  tokenize           text to token ids and back with a Hugging Face tokenizer\n"
          "  version            print the version (also: packrat --version)\n"
          "\n"
          "'packrat <command> --help' describes a command's options.\n");
}

static int version(void) {
  printf("packrat %s\n%s\n", PR_BUILD_VERSION, pr_engine_backend_version());
  return 0;
}

/* libgomp (oneDNN's threading here) reads its settings once, before main.
 * Its default wait after a parallel region is 300,000 spins (about 8 ms at
 * 26 ns a PAUSE on Zen 4) before a team thread sleeps: each instance keeps
 * its cores busy that long after every batch, where the HTTP threads, the
 * client on the same machine and the next request's hand-off need them.
 * Unless OpenMP's wait was set by the user, packrat starts itself again at
 * once with GOMP_SPINCOUNT=PR_OMP_SPINS (about 80 us): longer than the gaps between a
 * model's kernels (microseconds), shorter than the gaps between requests.
 * bench/serve.py measures the difference (docs/benchmarks.md, "Server"). */
#define PR_OMP_SPINS "3000"
static void settle_openmp(char **argv) {
  if (getenv("GOMP_SPINCOUNT") || getenv("OMP_WAIT_POLICY")) return;
  if (setenv("GOMP_SPINCOUNT", PR_OMP_SPINS, 0)) return;
  execv("/proc/self/exe", argv);
  unsetenv("GOMP_SPINCOUNT"); /* no /proc: libgomp's default stands */
}

int main(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
      !strcmp(argv[1], "help")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (!strcmp(argv[1], "run") || !strcmp(argv[1], "profile") || !strcmp(argv[1], "plan") ||
      !strcmp(argv[1], "serve") || !strcmp(argv[1], "quantize"))
    settle_openmp(argv);
  if (!strcmp(argv[1], "run")) return pr__cli_run(argc - 1, argv + 1);
  if (!strcmp(argv[1], "profile")) return pr__cli_profile(argc - 1, argv + 1);
  if (!strcmp(argv[1], "plan")) return pr__cli_plan(argc - 1, argv + 1);
  if (!strcmp(argv[1], "serve")) return pr__cli_serve(argc - 1, argv + 1);
  if (!strcmp(argv[1], "bench")) return pr__cli_bench(argc - 1, argv + 1);
  if (!strcmp(argv[1], "infer")) return pr__cli_infer(argc - 1, argv + 1);
  if (!strcmp(argv[1], "quantize")) return pr__cli_quantize(argc - 1, argv + 1);
  if (!strcmp(argv[1], "tokenize")) return pr__cli_tokenize(argc - 1, argv + 1);
  if (!strcmp(argv[1], "version") || !strcmp(argv[1], "--version") || !strcmp(argv[1], "-V"))
    return version();
  fprintf(stderr, "packrat: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return 2;
}
