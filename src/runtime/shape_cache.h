/* The per-instance session cache: sessions of a worker for input shapes
 * other than the one it prepared up front (a served model whose dims take a
 * range or a list of sizes), compiled on first use and kept, bounded by
 * count and by bytes, least recently used first out.
 *
 * Notes on the design:
 * - One cache belongs to one worker and is used on that worker's thread
 *   only (sessions keep the OpenMP team of the thread that compiled them),
 *   so it has no lock. Its counters (pr_shape_cache_stats_t) are atomics
 *   that several caches (the instances of one model) may share and any
 *   thread may read.
 * - A key is the input shapes without axis 0, plus the rows the session is
 *   compiled for; sessions share the model's weights (engine), so an entry
 *   costs its arena and its input buffers, which is what the byte bound
 *   counts.
 * - The entry just compiled is kept even when it alone is over the byte
 *   bound (the request that needed it runs on it); older ones go first. */
#ifndef PR_RUNTIME_SHAPE_CACHE_H
#define PR_RUNTIME_SHAPE_CACHE_H

#include <stdatomic.h>
#include <stdint.h>

#include "runtime/worker.h"

typedef struct {
  _Atomic uint64_t hits, misses, evictions;
  _Atomic uint64_t compile_ns; /* summed over every compile */
} pr_shape_cache_stats_t;

typedef struct pr_shape_cache pr_shape_cache_t;

/* A cache of at most max_sessions sessions and max_bytes bytes (both >= 1)
 * counting into stats (may be NULL; must outlive the cache). NULL when out
 * of memory. */
pr_shape_cache_t *pr__shape_cache_create(int max_sessions, size_t max_bytes,
                                         pr_shape_cache_stats_t *stats);

/* On w's thread: the session of w for input shapes `shapes` (one per input,
 * axis 0 ignored) at `rows` rows, with input buffers; compiled on a miss
 * (*compile_s: its seconds, 0 on a hit), evicting the least recently used
 * entries beyond the bounds. NULL with *st (the engine's status, message in
 * w->err) when it cannot be compiled. The session stays valid until the
 * next call or pr__shape_cache_destroy. */
pr_worker_session_t *pr__shape_cache_get(pr_shape_cache_t *c, pr_worker_t *w,
                                         const pr_tensor_t *shapes, int rows, double *compile_s,
                                         pr_status_t *st);

/* On w's thread: compiles the session for `shapes` at `rows` rows ahead of
 * any request (a size the config lists) and keeps it as a least recently
 * used entry would be kept; counted as neither hit nor miss. PR_OK when it
 * was already there; else as pr__shape_cache_get. */
pr_status_t pr__shape_cache_warm(pr_shape_cache_t *c, pr_worker_t *w, const pr_tensor_t *shapes,
                                 int rows);

/* Sessions held and their bytes. */
int pr__shape_cache_count(const pr_shape_cache_t *c);
size_t pr__shape_cache_bytes(const pr_shape_cache_t *c);

/* Frees every session (on w's thread, or after w's join) and c.
 * pr__shape_cache_destroy(NULL, w) is a no-op. */
void pr__shape_cache_destroy(pr_shape_cache_t *c, pr_worker_t *w);

#endif
