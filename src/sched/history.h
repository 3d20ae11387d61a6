/* The recent history of one served model, for the dashboard: a ring of
 * per-second samples (arrivals, completions, failures, rejections, queue
 * depth, a latency histogram) over the last PR_HISTORY_SECONDS seconds, and
 * the last PR_HISTORY_SWITCHES reconfigurations (time, from-plan, to-plan,
 * reason, duration). Both are bounded: memory does not grow with uptime or
 * load.
 *
 * Notes on the design:
 * - Time is passed in (monotonic seconds, base/util.h's pr__now): the
 *   recording and reading functions are pure apart from the lock, so tests
 *   drive them with made-up clocks. A sample belongs to the second
 *   floor(now); the ring slot of second t is t mod PR_HISTORY_SECONDS, and a
 *   slot holding an older second is cleared when reused.
 * - Latencies go into log-spaced buckets (four a doubling from 10 us; the
 *   last one, from about 35 s, takes everything above): a percentile is the
 *   geometric middle of its bucket, within 9% of the true value below 35 s.
 * - Queue depth: the largest and the last depth seen in each second. A second
 *   with no event keeps the depth the last event left (a stuck queue stays
 *   visible).
 * - Locking: one mutex (`lock`) guards everything. It is a leaf: nothing
 *   else is taken while it is held, so a caller may hold its own locks (the
 *   scheduler records under its queue lock) while calling in. */
#ifndef PR_SCHED_HISTORY_H
#define PR_SCHED_HISTORY_H

#include <stdbool.h>
#include <stdint.h>

#include "base/lock.h"

#define PR_HISTORY_SECONDS 300
#define PR_HISTORY_SWITCHES 64
#define PR_HISTORY_BUCKETS 88 /* 4 a doubling from 10 us: up to 10 us x 2^22 */
#define PR_HISTORY_PLAN_LEN 128
#define PR_HISTORY_WHY_LEN 256

typedef struct {
  int64_t second; /* floor(monotonic time); -1: slot never used */
  uint32_t arrivals, completed, failed, rejected;
  uint32_t queue_max, queue_last;
  uint32_t latency[PR_HISTORY_BUCKETS]; /* completed requests' latencies */
} pr_history_second_t;

typedef struct {
  double t;                       /* monotonic seconds */
  char from[PR_HISTORY_PLAN_LEN]; /* plan specs ("2x4,1x2"; "" for the first plan) */
  char to[PR_HISTORY_PLAN_LEN];
  char why[PR_HISTORY_WHY_LEN];
  double duration_ms;
} pr_history_switch_t;

typedef struct {
  pr_lock_t lock;
  pr_history_second_t seconds[PR_HISTORY_SECONDS];
  pr_history_switch_t switches[PR_HISTORY_SWITCHES]; /* a ring: the newest at n_switches - 1 */
  uint64_t n_switches;                               /* recorded since creation */
  uint32_t last_queue;                               /* depth left by the last queue event */
  int64_t first_second; /* the second it was created in: the series starts there */
} pr_history_t;

/* One second of the series, as read (pr__history_series). */
typedef struct {
  int64_t second;
  double arrivals, completed, failed, rejected; /* per second */
  double p50_ms, p99_ms;                        /* < 0: no request completed in it */
  double queue_max, queue_last;
} pr_history_point_t;

/* Allocates an empty history starting at `now`; NULL when out of memory. */
pr_history_t *pr__history_create(double now);
/* pr__history_destroy(NULL) is a no-op. */
void pr__history_destroy(pr_history_t *h);

/* A request entered the queue, which now holds `depth`. */
void pr__history_arrival(pr_history_t *h, double now, int depth);
/* A request was refused (queue full or stopping). */
void pr__history_rejected(pr_history_t *h, double now);
/* Requests left the queue, which now holds `depth`. */
void pr__history_queue(pr_history_t *h, double now, int depth);
/* A request completed after latency_s (ok: answered with outputs, else an
 * error, a timeout among them). */
void pr__history_done(pr_history_t *h, double now, double latency_s, bool ok);
/* A reconfiguration: from (NULL or "" for the first plan) -> to, why (may be
 * NULL); texts are cut to their fields' sizes on a UTF-8 boundary. */
void pr__history_switch(pr_history_t *h, double now, const char *from, const char *to,
                        const char *why, double duration_ms);

/* The last n seconds up to and including floor(now), oldest first, into out
 * (n <= PR_HISTORY_SECONDS, else cut to it; none before the history's first
 * second); seconds without samples read as zero with the queue depth carried
 * over. Returns how many points. */
int pr__history_series(pr_history_t *h, double now, int n, pr_history_point_t *out);
/* Latency percentiles (q in (0, 1]) over the last n seconds up to floor(now)
 * in ms; < 0 when no request completed in them. */
double pr__history_percentile(pr_history_t *h, double now, int n, double q);
/* The last reconfigurations (at most max), oldest first; returns how many.
 * *total: how many were recorded since creation (may be NULL). */
int pr__history_switches(pr_history_t *h, pr_history_switch_t *out, int max, uint64_t *total);

/* The bucket of a latency in seconds, and a bucket's representative latency
 * in ms (its geometric middle). */
int pr__history_bucket(double latency_s);
double pr__history_bucket_ms(int bucket);

#endif
