/* The differential check of the compiler on seeded random graphs
 * (randgraph.h): each graph runs fused, unfused and unfused with every value
 * a graph output, and the answers must agree. CTest runs it as is and with
 * oneDNN held to AVX2 and to SSE4.1 (other layouts and blockings).
 *
 * Environment:
 *   PR_RANDGRAPH_SEEDS=FIRST:COUNT  the seeds to run (default 1:300)
 *   PR_RANDGRAPH_FILE=PATH          run the graph of a fuzz input instead
 *                                   (tests/fuzz/fuzz_randgraph.c)
 *   PR_RANDGRAPH_VERBOSE=1          print every graph
 *   PR_RANDGRAPH_ALL=1              go on after a failure; list them all */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "randgraph.h"

typedef struct {
  int graphs, skipped, failed, fused;
  char made[512]; /* every fuser-made kernel seen */
} tally_t;

static void count(tally_t *t, const rg_result_t *r, const char *what) {
  bool verbose = getenv("PR_RANDGRAPH_VERBOSE") != NULL;
  t->graphs++;
  t->skipped += r->verdict == RG_SKIP;
  t->failed += r->verdict == RG_FAIL;
  t->fused += r->fused;
  if (r->verdict == RG_FAIL || verbose)
    printf("%s %s: %s\n%s%s\n", what,
           r->verdict == RG_FAIL   ? "FAILS"
           : r->verdict == RG_SKIP ? "skipped"
                                   : "agrees",
           r->msg, r->log, r->made);
  char ops[sizeof r->made];
  snprintf(ops, sizeof ops, "%s", r->made);
  for (char *tok = strtok(ops, ","); tok; tok = strtok(NULL, ",")) {
    char key[64];
    snprintf(key, sizeof key, ",%s,", tok);
    if (!strstr(t->made, key) && strlen(t->made) + strlen(key) < sizeof t->made)
      strcat(strcat(t->made, tok), ",");
  }
}

static void run_file(const char *path, tally_t *t) {
  FILE *f = fopen(path, "rb");
  if (!f) fail_msg("cannot open %s", path);
  static uint8_t data[1 << 16];
  size_t len = fread(data, 1, sizeof data, f);
  fclose(f);
  rg_result_t *r = malloc(sizeof *r);
  rg_check(rg_src_bytes(data, len), r);
  count(t, r, path);
  free(r);
}

static void test_random_graphs_agree(void **state) {
  tally_t t = {.made = ","};
  const char *file = getenv("PR_RANDGRAPH_FILE"), *seeds = getenv("PR_RANDGRAPH_SEEDS");
  bool keep_going = getenv("PR_RANDGRAPH_ALL") != NULL;
  if (file) {
    run_file(file, &t);
    assert_int_equal(t.failed, 0);
    return;
  }
  long first = 1, n = 300;
  if (seeds && sscanf(seeds, "%ld:%ld", &first, &n) != 2)
    fail_msg("PR_RANDGRAPH_SEEDS=FIRST:COUNT");
  rg_result_t *r = malloc(sizeof *r);
  for (long seed = first; seed < first + n; seed++) {
    char what[32];
    snprintf(what, sizeof what, "seed %ld", seed);
    rg_check(rg_src_seed((uint64_t)seed), r);
    count(&t, r, what);
    if (t.failed && !keep_going) break;
  }
  free(r);
  printf("randgraph: %d graphs, %d skipped, %d failed, %d with fewer kernels fused; made:%s\n",
         t.graphs, t.skipped, t.failed, t.fused, t.made);
  assert_int_equal(t.failed, 0);
  if (seeds) return;
  /* the default seeds reach the fusions and seldom draw a graph that does
   * not compile */
  assert_true(t.skipped * 10 <= t.graphs);
  assert_true(t.fused * 3 >= t.graphs);
  const char *want[] = {",LayerNorm,", ",Attention,", ",GeluErf,", ",GeluTanh,", ",SiLU,"};
  for (size_t k = 0; k < sizeof want / sizeof want[0]; k++)
    if (!strstr(t.made, want[k])) fail_msg("no graph fused into %s", want[k]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_random_graphs_agree),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
