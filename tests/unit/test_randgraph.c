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

#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

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

static void seed_range(long *first, long *n) {
  const char *seeds = getenv("PR_RANDGRAPH_SEEDS");
  *first = 1, *n = 300;
  if (seeds && sscanf(seeds, "%ld:%ld", first, n) != 2) fail_msg("PR_RANDGRAPH_SEEDS=FIRST:COUNT");
}

/* Child: each seed's unfused answers as a count (UINT64_MAX: none) and
 * the floats. */
static int write_answers(const char *path) {
  long first, n;
  seed_range(&first, &n);
  FILE *f = fopen(path, "wb");
  if (!f) return 1;
  for (long seed = first; seed < first + n; seed++) {
    size_t cnt;
    double tol;
    float *a = rg_reference(rg_src_seed((uint64_t)seed), &cnt, &tol);
    uint64_t w = a ? cnt : UINT64_MAX;
    fwrite(&w, sizeof w, 1, f);
    if (a) fwrite(a, sizeof(float), cnt, f);
    free(a);
  }
  return fclose(f) != 0;
}

extern char **environ;

/* Runs this binary with oneDNN held to isa, writing its answers to path. */
static void spawn_writer(const char *isa, const char *path) {
  char **env = calloc(1, sizeof(char *) * 4096);
  char isa_var[64], path_var[512];
  int k = 0;
  for (char **e = environ; *e && k < 4093; e++)
    if (strncmp(*e, "ONEDNN_MAX_CPU_ISA=", 19) && strncmp(*e, "PR_RANDGRAPH_WRITE=", 19))
      env[k++] = *e;
  snprintf(isa_var, sizeof isa_var, "ONEDNN_MAX_CPU_ISA=%s", isa);
  snprintf(path_var, sizeof path_var, "PR_RANDGRAPH_WRITE=%s", path);
  env[k++] = isa_var, env[k++] = path_var;
  char *argv[] = {"test_randgraph", NULL};
  pid_t pid;
  int status;
  assert_int_equal(posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, env), 0);
  assert_int_equal(waitpid(pid, &status, 0), pid);
  free(env);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void test_same_answers_on_narrower_isas(void **state) {
  static const char *const isas[] = {"SSE41", "AVX2"};
  long first, n;
  seed_range(&first, &n);
  for (size_t k = 0; k < sizeof isas / sizeof isas[0]; k++) {
    char path[] = "/tmp/randgraph-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    spawn_writer(isas[k], path);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    int compared = 0;
    for (long seed = first; seed < first + n; seed++) {
      uint64_t cnt;
      assert_int_equal(fread(&cnt, sizeof cnt, 1, f), 1);
      size_t mine_n;
      double tol;
      float *mine = rg_reference(rg_src_seed((uint64_t)seed), &mine_n, &tol);
      float *theirs = cnt == UINT64_MAX ? NULL : malloc(sizeof(float) * (cnt ? cnt : 1));
      if (theirs) assert_int_equal(fread(theirs, sizeof(float), cnt, f), cnt);
      char msg[512];
      if (!mine != !theirs || (mine && mine_n != cnt))
        fail_msg("seed %ld: %s compiles or sizes the graph otherwise", seed, isas[k]);
      if (mine && !rg_agree(theirs, mine, cnt, tol, msg, sizeof msg))
        fail_msg("seed %ld: the answers with oneDNN held to %s differ%s", seed, isas[k], msg);
      compared += mine != NULL;
      free(mine), free(theirs);
    }
    fclose(f);
    unlink(path);
    printf("randgraph: %d graphs answer the same with oneDNN held to %s\n", compared, isas[k]);
    assert_true(compared * 10 >= n * 9);
  }
}

int main(void) {
  const char *write = getenv("PR_RANDGRAPH_WRITE");
  if (write) return write_answers(write);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_random_graphs_agree),
      cmocka_unit_test(test_same_answers_on_narrower_isas),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
