/* An instance's worker: its sessions, taking a batch off the queue, running
 * it (padded, or in chunks) and scattering the answers. See scheduler.h for
 * the locking rules. */
#define _GNU_SOURCE
#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/lock.h"
#include "base/log.h"
#include "base/util.h"
#include "packrat/planner.h"
#include "runtime/worker.h"
#include "sched/history.h"
#include "sched/internal.h"

/* ---- running a batch ----
 *
 * A batch of `rows` rows (the requests' rows in order) runs on the smallest
 * prepared session that holds it, padded with zero rows; a batch larger than
 * every prepared size (a lone request with more rows than the instance's
 * batch) runs in chunks of the largest, the last one padded. No session is
 * compiled here. Padding and chunking take the rows of a batch to be
 * independent of each other, which is what serving a model by its batch
 * axis already assumes (every input and output has the batch as axis 0,
 * checked at prepare); a model that mixed rows across axis 0 (a reduction
 * over the batch) could be served neither padded nor in chunks, and neither
 * could it be batched at all. */

/* Copies rows [done, done + c) of the batch's inputs into z's buffers and
 * zeroes the padding rows after them. */
static void gather(const pr_sched_t *s, pr_worker_session_t *z, pr_request_t **reqs, int n,
                   int done, int c) {
  assert(c >= 1 && c <= z->rows);
  for (int k = 0; k < s->n_in; k++) {
    size_t rb = pr__worker_row_bytes(&z->in[k]);
    char *dst = z->in[k].data;
    for (int i = 0, first = 0; i < n; first += reqs[i++]->rows) {
      int lo = first > done ? first : done, hi = first + reqs[i]->rows;
      if (hi > done + c) hi = done + c;
      if (lo >= hi) continue;
      memcpy(dst + rb * (size_t)(lo - done),
             (char *)reqs[i]->inputs[k].data + rb * (size_t)(lo - first), rb * (size_t)(hi - lo));
    }
    if (c < z->rows) memset(dst + rb * (size_t)c, 0, rb * (size_t)(z->rows - c));
  }
}

/* True when the session can read request r's inputs where they are, with
 * no copy into its buffers: r alone fills z (same dtypes and shapes), and
 * each input is aligned to 16 bytes (a binary HTTP body is laid out so that
 * its tensors start 64-byte aligned; the engine reads inputs in place and
 * never writes them). */
static bool reads_in_place(const pr_sched_t *s, const pr_worker_session_t *z,
                           const pr_request_t *r) {
  for (int k = 0; k < s->n_in; k++) {
    const pr_tensor_t *a = &r->inputs[k], *b = &z->in[k];
    if (a->dtype != b->dtype || a->rank != b->rank || (uintptr_t)a->data % 16) return false;
    for (int d = 0; d < a->rank; d++)
      if (a->dims[d] != b->dims[d]) return false;
  }
  return true;
}

/* Copies rows [done, done + c) of a run's outputs (of z_rows rows) to the
 * requests they belong to, allocating each request's outputs on its first
 * rows; a request whose outputs cannot be allocated gets rs[i] =
 * PR_ERR_NOMEM. */
static void scatter(const pr_sched_t *s, const pr_tensor_t *outs, int z_rows, pr_request_t **reqs,
                    int n, int done, int c, pr_status_t *rs) {
  for (int i = 0, first = 0; i < n; first += reqs[i++]->rows) {
    pr_request_t *r = reqs[i];
    int lo = first > done ? first : done, hi = first + r->rows;
    if (hi > done + c) hi = done + c;
    for (int o = 0; o < s->n_out && lo < hi && !rs[i]; o++) {
      /* prepare checked that every output has the session's rows as axis 0 */
      assert(outs[o].rank >= 1 && outs[o].dims[0] == z_rows);
      pr_tensor_t *t = &r->outputs[o];
      size_t rb = pr__worker_row_bytes(&outs[o]);
      if (!t->data) {
        *t = outs[o];
        t->dims[0] = r->rows;
        if (!(t->data = pr__aligned_alloc(rb * (size_t)r->rows))) {
          rs[i] = PR_ERR_NOMEM;
          break;
        }
      }
      memcpy((char *)t->data + rb * (size_t)(lo - first),
             (const char *)outs[o].data + rb * (size_t)(lo - done), rb * (size_t)(hi - lo));
    }
  }
}

/* Completes the requests of a batch: the run's status st (message err), else
 * each request's own. */
static void complete_batch(pr_sched_t *s, pr_request_t **reqs, int n, pr_status_t st,
                           const char *err, const pr_status_t *rs) {
  for (int i = 0; i < n; i++) {
    pr_status_t r_st = st ? st : rs[i];
    double now = pr__now();
    pr__hist_observe(&s->stats.request_s, now - reqs[i]->t_enqueue);
    pr__history_done(s->history, now, now - reqs[i]->t_enqueue, !r_st);
    atomic_fetch_add(r_st ? &s->stats.failed : &s->stats.success, 1);
    atomic_fetch_add(r_st ? &s->stats.failed_ns : &s->stats.success_ns,
                     (uint64_t)((now - reqs[i]->t_enqueue) * 1e9));
    pr_sched__complete(reqs[i], r_st, r_st ? (st ? err : "out of memory") : NULL);
  }
  struct timespec wall;
  clock_gettime(CLOCK_REALTIME, &wall);
  atomic_store(&s->stats.last_inference_ms,
               (uint64_t)wall.tv_sec * 1000 + (uint64_t)(wall.tv_nsec / 1000000));
}

/* One session run of `rows` rows took ms, its whole pass (assembly, run,
 * scatter) pass_ms (full: of the planned batch). Only w's thread writes
 * these, so load-then-store is no race. */
static void measured(worker_t *w, double ms, double pass_ms, int rows, bool full) {
  const double alpha = 0.2;
  double any = atomic_load(&w->any_ms), f = atomic_load(&w->full_ms);
  atomic_store(&w->any_ms, any > 0 ? any + alpha * (ms - any) : ms);
  if (full) {
    double pass = atomic_load(&w->pass_ms);
    atomic_store(&w->full_ms, f > 0 ? f + alpha * (ms - f) : ms);
    atomic_store(&w->pass_ms, pass > 0 ? pass + 0.05 * (pass_ms - pass) : pass_ms);
  }
  /* rows first: a reader that loads runs, then rows, sees rows >= runs */
  atomic_fetch_add(&w->rows, (uint64_t)rows);
  atomic_fetch_add(&w->runs, 1);
}

/* The time of a run of each of w's prepared sessions, for
 * pr_plan_next_chunk: measured, else scaled by rows from the nearest
 * measured size (the nearest in ratio), else from the plan's latency at the
 * instance's batch, else the rows themselves (the same unit throughout). A
 * guess too low gets the session tried, and timed; one too high never
 * would, so the guesses scale by rows, which is low for the small sizes
 * (a batch runs faster a row than a single one). */
static void session_times(const worker_t *w, int *sizes, double *ms) {
  const pr_worker_t *pw = &w->w;
  const config_t *cfg = &w->s->configs[w->config];
  double planned = cfg->plan.instances[w - cfg->workers].latency_ms;
  for (int i = 0; i < pw->n_sizes; i++) {
    sizes[i] = pw->sizes[i].rows;
    ms[i] = w->size_ms[i];
  }
  for (int i = 0; i < pw->n_sizes; i++) {
    if (ms[i] > 0) continue;
    int near = -1;
    for (int j = 0; j < pw->n_sizes; j++)
      if (w->size_ms[j] > 0 && (near < 0 || fabs(log((double)sizes[j] / sizes[i])) <
                                                fabs(log((double)sizes[near] / sizes[i]))))
        near = j;
    ms[i] = near >= 0     ? w->size_ms[near] * sizes[i] / sizes[near]
            : planned > 0 ? planned * sizes[i] / w->batch
                          : sizes[i];
  }
}

/* Rows of the next run of a batch with `left` rows to go: on the prepared
 * sessions, pr_plan_next_chunk's; with other shapes (the shape cache), all
 * of them (the session holding them, or its largest). */
static int next_chunk(const worker_t *w, const pr_request_t *r, int left) {
  if (w->cache && !pr_sched__prepared_shape(w, r)) return left;
  int sizes[PR_WORKER_MAX_SIZES];
  double ms[PR_WORKER_MAX_SIZES];
  session_times(w, sizes, ms);
  return pr_plan_next_chunk(sizes, ms, w->w.n_sizes, left);
}

/* Whether z, one of w's prepared sessions, has not run yet: its first run
 * touches its memory (page faults, cold caches), so it is not timed
 * (time_session), nor taken as a pass of the planned batch: the first
 * pass seeds pass_ms, whose average then moves 5% a pass, and a slow seed
 * makes the plan look short of capacity to the autoscaler and admission
 * for dozens of passes. */
static bool first_run(const worker_t *w, const pr_worker_session_t *z) {
  const pr_worker_t *pw = &w->w;
  return z >= pw->sizes && z < pw->sizes + pw->n_sizes && w->size_runs[z - pw->sizes] == 0;
}

/* A prepared session z (of w's sizes) ran in ms: its EWMA, past its first
 * run. Rises are taken a quarter at a time: one slow run (a page fault, a
 * neighbour) must not make a size look slower than a cover of smaller ones
 * that is then used instead, and never timed again. */
static void time_session(worker_t *w, const pr_worker_session_t *z, double ms) {
  const pr_worker_t *pw = &w->w;
  if (z < pw->sizes || z >= pw->sizes + pw->n_sizes) return; /* the shape cache's */
  int i = (int)(z - pw->sizes);
  if (w->size_runs[i]++ == 0) return;
  double was = w->size_ms[i];
  if (was <= 0) {
    w->size_ms[i] = ms;
    return;
  }
  double step = ms - was;
  if (step > 0.25 * was) step = 0.25 * was;
  w->size_ms[i] = was + 0.2 * step;
}

/* Runs a batch of n requests (rows rows) in one run or several
 * (next_chunk), answering each request as soon as its rows are in: a
 * request answered may be gone at once (its waiter frees it), so the runs
 * after it look only at the requests from `first` on. A run the engine
 * refuses for its data (PR_ERR_INVALID: one request's index out of range)
 * is retried one request at a time, so that only the request at fault
 * fails, not the others batched with it. */
static void run_batch(worker_t *w, pr_request_t **reqs, int n, int rows) {
  pr_sched_t *s = w->s;
  pr_status_t rs[PR_SCHED_MAX_BATCH_REQUESTS] = {0}, st = PR_OK;
  char err[512] = "";
  assert(n >= 1 && n <= PR_SCHED_MAX_BATCH_REQUESTS && rows >= 1);
  double t0 = pr__now(), compute = 0;
  /* first: the first request not answered yet; base: the rows before it */
  int first = 0, base = 0;
  bool refused = false; /* the engine refused a run's data */
  for (int done = 0; done < rows && !st;) {
    pr_request_t **rq = reqs + first;
    int m = n - first, want = next_chunk(w, rq[0], rows - done);
    /* the batch has one shape: the prepared one, or another of w's cache */
    pr_worker_session_t *z = pr_sched__session_for(w, rq[0], want, &st, err, sizeof err);
    if (!z) break;
    assert(z->in); /* the prepared ones before the config went live */
    int c = want < z->rows ? want : z->rows;
    double ta = pr__now();
    const pr_tensor_t *in = z->in;
    if (m == 1 && c == z->rows && done == base && reads_in_place(s, z, rq[0]))
      in = rq[0]->inputs;
    else
      gather(s, z, rq, m, done - base, c);
    pr_tensor_t outs[PR_SCHED_MAX_IO];
    double tb = pr__now();
    st = pr_engine_session_run(z->session, in, s->n_in, outs, s->n_out, err, sizeof err);
    refused = st == PR_ERR_INVALID;
    double tc = pr__now();
    if (!st) scatter(s, outs, z->rows, rq, m, done - base, c, rs + first);
    double td = pr__now();
    if (!st) {
      bool full = z->rows == w->batch && c == w->batch && !first_run(w, z);
      measured(w, (tc - tb) * 1e3, (td - ta) * 1e3, c, full);
      time_session(w, z, (tc - tb) * 1e3);
    }
    pr__hist_observe(&s->stats.stage[PR_STAGE_assemble], tb - ta);
    pr__hist_observe(&s->stats.stage[PR_STAGE_compute], tc - tb);
    compute += tc - tb;
    pr__hist_observe(&s->stats.stage[PR_STAGE_scatter], td - tc);
    pr_batch_stats_t *bs = &s->stats.by_batch[c < s->stats.max_batch ? c : s->stats.max_batch];
    atomic_fetch_add(&bs->count, 1);
    atomic_fetch_add(&bs->input_ns, (uint64_t)((tb - ta) * 1e9));
    atomic_fetch_add(&bs->infer_ns, (uint64_t)((tc - tb) * 1e9));
    atomic_fetch_add(&bs->output_ns, (uint64_t)((td - tc) * 1e9));
    atomic_fetch_add(&s->stats.executions, 1);
    atomic_fetch_add(&s->stats.rows_executed, (uint64_t)c);
    pr__hist_observe(&s->stats.batch, c);
    done += c;
    if (st || done == rows) break;
    /* the requests whose rows are all in are answered before the next run
     * (a batch run in parts answers its first part a run sooner) */
    int k = first, end = base;
    while (k < n && end + reqs[k]->rows <= done) end += reqs[k++]->rows;
    if (k == first) continue;
    for (int i = first; i < k; i++) reqs[i]->compute_s = compute;
    complete_batch(s, reqs + first, k - first, PR_OK, "", rs + first);
    first = k, base = end;
  }
  if (refused && n - first > 1) {
    for (int i = first; i < n; i++) run_batch(w, reqs + i, 1, reqs[i]->rows);
    return;
  }
  double t1 = pr__now();
  pr__hist_observe(&s->stats.compute_s, t1 - t0);
  atomic_fetch_add(&s->stats.compute_us, (uint64_t)((t1 - t0) * 1e6) * (uint64_t)n);
  for (int i = first; i < n; i++) reqs[i]->compute_s = compute;
  complete_batch(s, reqs + first, n - first, st, err, rs + first);
}

/* ---- instance workers ---- */

/* On the worker's thread: sessions for 1, 2, 4, ... up to the planned batch
 * and the batch itself, each checked to scatter by rows. */
/* Completes the requests of a taken batch whose clients went away while it
 * filled (pr__sched_drop), unrun; the others stay in order. The new n and
 * *rows. qlock not held. */
static int drop_gone(pr_sched_t *s, pr_request_t **reqs, int n, int *rows) {
  int kept = 0;
  for (int i = 0; i < n; i++) {
    if (!atomic_load(&reqs[i]->gone)) {
      reqs[kept++] = reqs[i];
      continue;
    }
    *rows -= reqs[i]->rows;
    pr__sched_cancel(s, reqs[i]);
  }
  return kept;
}

static pr_status_t prepare_sessions(worker_t *w) {
  pr_worker_t *pw = &w->w;
  pr_status_t st = pr__worker_prepare_up_to(pw, w->batch, true);
  /* outputs are scattered back by rows: each must have the batch axis */
  for (int z = 0; z < pw->n_sizes && !st; z++)
    for (int o = 0; o < w->s->n_out && !st; o++) {
      pr_tensor_info_t info;
      int rows = pw->sizes[z].rows;
      pr_engine_session_output(pw->sizes[z].session, o, &info);
      if (info.rank >= 1 && info.dims[0] == rows) continue;
      pr__errf(pw->err, sizeof pw->err,
               "output '%s' has no batch axis (at batch %d its first dimension is %lld): only "
               "models whose every output has the batch as axis 0 are served",
               info.name, rows, info.rank ? (long long)info.dims[0] : 0LL);
      st = PR_ERR_UNSUPPORTED;
    }
  return st;
}

/* Takes requests for one batch off the queue into reqs (qlock held, the
 * worker's config active, the queue not empty): what fits in the planned
 * batch, oldest first (a request larger than the batch runs alone), waiting
 * for more at most the max queue delay and never past a held request's
 * deadline, then only those of the batch's first run. Returns how many (0:
 * all it took had timed out). */
static int take_batch(worker_t *w, pr_request_t **reqs, int *rows_out) {
  pr_sched_t *s = w->s;
  assert(pr__lock_held(&s->qlock) && s->head);
  int n = 0, rows = 0;
  double first_t = s->head->t_enqueue, deadline = 0; /* earliest of the requests held */
  for (;;) {
    while (s->head && n < PR_SCHED_MAX_BATCH_REQUESTS &&
           (n == 0 || rows + s->head->rows <= w->batch)) {
      pr_request_t *r = s->head;
      s->head = r->next;
      if (!s->head) s->tail = NULL;
      pr_sched__unqueued(s, r);
      if (r->deadline > 0 && pr__now() > r->deadline) {
        pr_sched__expired(w, r);
        continue;
      }
      reqs[n++] = r;
      rows += r->rows;
      if (r->deadline > 0 && (deadline == 0 || r->deadline < deadline)) deadline = r->deadline;
    }
    if (!pr_sched__wait_for_more(w, n, rows, first_t, deadline)) break;
    if (s->head && rows + s->head->rows > w->batch) break;
  }
  /* of a batch that would run in parts (next_chunk), only the requests of
   * its first run are kept; the rest go back to the queue's front, to be
   * taken with what arrives meanwhile (into one run of 4, not a run of 2
   * of their own) or by another instance at once. Not while the config is
   * being left (a switch, a stop, a retirement): its workers would not take
   * them back, and the new config's may be asleep already. */
  if (n > 1 && !s->stop && s->active == w->config && !s->configs[w->config].retire) {
    int c = next_chunk(w, reqs[0], rows), keep = 0, kept = 0;
    while (keep < n && kept < c) kept += reqs[keep++]->rows;
    if (keep < n) {
      pr_sched__requeue_front(s, reqs + keep, n - keep);
      n = keep, rows = kept;
      pr__history_queue(s->history, pr__now(), s->depth);
    }
  }
  *rows_out = rows;
  return n;
}

/* Parks pw's team or starts it again, outside qlock (held on entry and on
 * return): the team's threads are made or joined. */
static void repark(pr_sched_t *s, pr_worker_t *pw, bool park) {
  pr__unlock(&s->qlock);
  if (park)
    pr__worker_park(pw);
  else
    pr__worker_unpark(pw);
  pr__lock(&s->qlock);
}

void pr_sched__worker_main(pr_worker_t *pw, void *ctx) {
  worker_t *w = ctx;
  pr_sched_t *s = w->s;
  pw->status = prepare_sessions(w);
  if (!pw->status && s->cfg.n_dyn &&
      !(w->cache =
            pr__shape_cache_create(s->cfg.cache_sessions, s->cfg.cache_bytes, &s->stats.cache))) {
    pr__errf(pw->err, sizeof pw->err, "out of memory");
    pw->status = PR_ERR_NOMEM;
  }
  if (!pw->status && w->cache) pw->status = pr_sched__warm(w);
  pr__lock(&s->qlock);
  s->started++;
  pthread_cond_broadcast(&s->qcond);
  assert(w->config >= 0 && w->config < PR_SCHED_MAX_CONFIGS);
  config_t *cfg = &s->configs[w->config];
  pr_request_t *batch[PR_SCHED_MAX_BATCH_REQUESTS];
  while (!pw->status) {
    /* parked while another config is active; on stop, the active config
     * drains the queue and every other worker leaves at once */
    while (!s->stop && !cfg->retire && !(s->head && s->active == w->config)) {
      bool live = s->active == w->config;
      if (live == pw->parked) {
        /* parked while another plan is live (its teams keep libgomp's full
         * spin: see pr__worker_park), unparked as soon as this one is (a
         * switch wakes its workers), before its first batch */
        repark(s, pw, !live);
        continue;
      }
      w->idle = true;
      pr__lock_wait(&s->qlock, &s->work[w->config]);
      w->idle = false;
    }
    if (cfg->retire || (s->stop && (!s->head || s->active != w->config))) break;
    if (pw->parked) { /* work came with the switch */
      repark(s, pw, false);
      continue; /* the queue may have changed meanwhile */
    }
    int rows = 0;
    int n = s->cfg.n_dyn ? pr_sched__take_shaped(w, batch, &rows) : take_batch(w, batch, &rows);
    pr_request_t *expired = w->expired;
    w->expired = NULL;
    if (n && s->head) pr_sched__wake(s, w->config); /* more work for another instance */
    pr__unlock(&s->qlock);
    for (pr_request_t *r = expired, *next; r; r = next) {
      next = r->next;
      pr_sched__time_out(s, r);
    }
    n = drop_gone(s, batch, n, &rows);
    if (!n) {
      pr__lock(&s->qlock);
      continue;
    }
    double now = pr__now();
    for (int i = 0; i < n; i++) {
      batch[i]->t_start = now;
      pr__hist_observe(&s->stats.queue_s, now - batch[i]->t_enqueue);
      pr__hist_observe(&s->stats.stage[PR_STAGE_queue], now - batch[i]->t_enqueue);
      atomic_fetch_add(&s->stats.queue_us, (uint64_t)((now - batch[i]->t_enqueue) * 1e6));
    }
    run_batch(w, batch, n, rows);
    pr__lock(&s->qlock);
  }
  pr__unlock(&s->qlock);
  /* on this thread: its sessions hold this thread's OpenMP team */
  pr__shape_cache_destroy(w->cache, pw);
  w->cache = NULL;
}
