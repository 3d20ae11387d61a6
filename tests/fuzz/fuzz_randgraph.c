/* libFuzzer target: the bytes choose a random graph (tests/unit/randgraph.c:
 * the patterns the fuser rewrites, the layouts and the buffer reuse around
 * them), which runs fused, unfused and unfused with every value a graph
 * output; any disagreement, a fused session that fails where the unfused
 * one runs, a run that writes into its inputs or answers differently the
 * second time aborts with the graph printed. A graph the unfused session
 * refuses is skipped.
 *
 * Replay a finding in the normal build (faster, and the log names the
 * nodes): PR_RANDGRAPH_FILE=crash-... build/tests/test_randgraph */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "randgraph.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static rg_result_t res; /* 9 KB: off the stack */
  rg_check(rg_src_bytes(data, size), &res);
  if (res.verdict != RG_FAIL) return 0;
  fprintf(stderr, "randgraph: %s\n%s", res.msg, res.log);
  abort();
}
