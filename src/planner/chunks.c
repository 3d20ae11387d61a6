/* How an instance runs a batch on its prepared sessions (planner.h,
 * pr_plan_next_chunk). Pure: no threads, no I/O.
 *
 * Notes on the design:
 * - An instance holds sessions for a few batch sizes (1, 2, 4, ... and its
 *   planned batch); a batch between two of them ran padded to the larger.
 *   On ResNet-50 with two threads a batch of 5 padded to 8 takes 175 ms,
 *   the same 5 rows as runs of 4 and 1 take 116 ms: under a moderate load,
 *   where batches come in every size, padding throws away up to a third of
 *   a large-batch plan's compute.
 * - The cover with the least total time is a knapsack over the rows left
 *   (each run covers a session's rows, the last one padded); it is taken
 *   only when it beats one padded run by PR_CHUNK_GAIN, so that noise in
 *   the measured times (a batch of 8 against two of 4 differ by 4% there)
 *   does not trade a whole run for two; each run also costs
 *   PR_CHUNK_RUN_MS beyond its session's time (the batch's assembly, the
 *   team's start, the answers), so a model of microseconds is not split,
 *   and rows a session holds exactly run there. The largest run goes first:
 *   most requests are answered soonest. */
#include <assert.h>
#include <stdbool.h>

#include "packrat/planner.h"

/* The smallest size holding `rows`, else the largest (index). */
static int holding(const int *sizes, int n, int rows) {
  for (int i = 0; i < n; i++)
    if (sizes[i] >= rows) return i;
  return n - 1;
}

int pr_plan_next_chunk(const int *sizes, const double *ms, int n, int rows) {
  if (n < 1 || rows < 1) return rows < 1 ? 0 : rows;
  int one = holding(sizes, n, rows);
  int fallback = sizes[one] < rows ? sizes[one] : rows;
  if (n < 2 || rows > PR_CHUNK_MAX_ROWS || sizes[one] == rows) return fallback;
  for (int i = 0; i < n; i++)
    if (ms[i] <= 0 || sizes[i] < 1 || (i && sizes[i] <= sizes[i - 1])) return fallback;
  /* cost[r]: least time for r rows; runs[r] the runs it takes; big[r]
   * the session of its largest run */
  double cost[PR_CHUNK_MAX_ROWS + 1];
  int runs[PR_CHUNK_MAX_ROWS + 1], big[PR_CHUNK_MAX_ROWS + 1];
  cost[0] = 0, runs[0] = 0, big[0] = -1;
  assert(rows >= 1 && rows <= PR_CHUNK_MAX_ROWS); /* the tables' bound */
  for (int r = 1; r <= rows; r++) {
    cost[r] = -1;
    for (int i = 0; i < n; i++) {
      int rest = r > sizes[i] ? r - sizes[i] : 0;
      double c = ms[i] + PR_CHUNK_RUN_MS + cost[rest];
      int k = runs[rest] + 1;
      bool better = cost[r] < 0 || c < cost[r] - 1e-12 ||
                    (c <= cost[r] + 1e-12 && (k < runs[r] || (k == runs[r] && i > big[r])));
      if (!better) continue;
      cost[r] = c, runs[r] = k;
      big[r] = big[rest] > i ? big[rest] : i;
    }
    assert(cost[r] > 0 && runs[r] >= 1 && big[r] >= 0 && big[r] < n); /* every r is reachable */
  }
  if (sizes[one] >= rows && cost[rows] >= PR_CHUNK_GAIN * (ms[one] + PR_CHUNK_RUN_MS))
    return fallback;
  return sizes[big[rows]] < rows ? sizes[big[rows]] : rows;
}
