/* Request queue, instance workers, the reaper, create and destroy. See
 * scheduler.h for the locking rules; sched_internal.h for how the
 * scheduler's files share its state. */
#define _GNU_SOURCE
#include "server/scheduler.h"

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
#include "server/history.h"
#include "server/sched_internal.h"
#include "server/status.h"

void pr_sched__timespec_at(struct timespec *ts, double t_mono) {
  /* condition variables here use CLOCK_MONOTONIC */
  ts->tv_sec = (time_t)t_mono;
  ts->tv_nsec = (long)((t_mono - (double)ts->tv_sec) * 1e9);
}

void pr_sched__cond_init_monotonic(pthread_cond_t *c) {
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(c, &ca);
  pthread_condattr_destroy(&ca);
}

pr_request_t *pr_request_new(void) {
  pr_request_t *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  pthread_mutex_init(&r->lock, NULL);
  pr_sched__cond_init_monotonic(&r->cond);
  return r;
}

void pr_request_free(pr_request_t *r) {
  if (!r) return;
  for (int i = 0; i < PR_SCHED_MAX_IO; i++) {
    if (!(r->borrowed & 1u << i)) pr_free(r->inputs[i].data);
    pr_free(r->outputs[i].data);
  }
  pthread_mutex_destroy(&r->lock);
  pthread_cond_destroy(&r->cond);
  free(r);
}

static void complete(pr_request_t *r, pr_status_t st, const char *msg) {
  pthread_mutex_lock(&r->lock);
  r->status = st;
  if (msg) snprintf(r->err, sizeof r->err, "%s", msg);
  r->t_end = pr_now();
  r->done = true;
  void (*cb)(void *) = r->on_done;
  void *ctx = r->on_done_ctx;
  pthread_cond_signal(&r->cond);
  pthread_mutex_unlock(&r->lock);
  /* r may be freed as soon as the callback runs (or a waiter wakes) */
  if (cb) cb(ctx);
}

void pr_request_wait(pr_request_t *r) {
  pthread_mutex_lock(&r->lock);
  while (!r->done) pthread_cond_wait(&r->cond, &r->lock);
  pthread_mutex_unlock(&r->lock);
}

/* Waits until r is done or the monotonic time `until`; returns done. */
static bool wait_until(pr_request_t *r, double until) {
  struct timespec ts;
  pr_sched__timespec_at(&ts, until);
  pthread_mutex_lock(&r->lock);
  while (!r->done && pthread_cond_timedwait(&r->cond, &r->lock, &ts) != ETIMEDOUT) {
  }
  bool done = r->done;
  pthread_mutex_unlock(&r->lock);
  return done;
}

/* Completes r, out of the queue and never run, with st (counted in *count). */
static void complete_unrun(pr_sched_t *s, pr_request_t *r, _Atomic uint64_t *count, pr_status_t st,
                           const char *msg) {
  atomic_fetch_add(count, 1);
  double now = pr_now();
  pr_history_done(s->history, now, now - r->t_enqueue, false);
  complete(r, st, msg);
}

void pr_sched__time_out(pr_sched_t *s, pr_request_t *r) {
  complete_unrun(s, r, &s->stats.timed_out, PR_ERR_TIMEOUT, "request timed out in the queue");
}

/* Unlinks r from the queue if it waits there (qlock held); whether it did. */
static bool unqueue_locked(pr_sched_t *s, pr_request_t *r) {
  assert(pr_lock_held(&s->qlock));
  for (pr_request_t **at = &s->head, *prev = NULL; *at; prev = *at, at = &(*at)->next) {
    if (*at != r) continue;
    *at = r->next;
    if (s->tail == r) s->tail = prev;
    pr_sched__unqueued(s, r);
    pr_history_queue(s->history, pr_now(), s->depth);
    return true;
  }
  return false;
}

bool pr_sched_unqueue(pr_sched_t *s, pr_request_t *r) {
  pr_lock(&s->qlock);
  bool queued = unqueue_locked(s, r);
  pr_unlock(&s->qlock);
  return queued;
}

void pr_sched_cancel(pr_sched_t *s, pr_request_t *r) {
  complete_unrun(s, r, &s->stats.cancelled, PR_ERR_CANCELLED,
                 "the client went away before the request ran");
}

void pr_sched_wait(pr_sched_t *s, pr_request_t *r) {
  if (r->deadline > 0 && !wait_until(r, r->deadline) && pr_sched_unqueue(s, r))
    pr_sched__time_out(s, r);
  pr_request_wait(r);
}

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
    size_t rb = pr_worker_row_bytes(&z->in[k]);
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
      size_t rb = pr_worker_row_bytes(&outs[o]);
      if (!t->data) {
        *t = outs[o];
        t->dims[0] = r->rows;
        if (!(t->data = pr_aligned_alloc(rb * (size_t)r->rows))) {
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
    double now = pr_now();
    pr_hist_observe(&s->stats.request_s, now - reqs[i]->t_enqueue);
    pr_history_done(s->history, now, now - reqs[i]->t_enqueue, !r_st);
    atomic_fetch_add(r_st ? &s->stats.failed : &s->stats.success, 1);
    atomic_fetch_add(r_st ? &s->stats.failed_ns : &s->stats.success_ns,
                     (uint64_t)((now - reqs[i]->t_enqueue) * 1e9));
    complete(reqs[i], r_st, r_st ? (st ? err : "out of memory") : NULL);
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
 * after it look only at the requests from `first` on. */
static void run_batch(worker_t *w, pr_request_t **reqs, int n, int rows) {
  pr_sched_t *s = w->s;
  pr_status_t rs[PR_SCHED_MAX_BATCH_REQUESTS] = {0}, st = PR_OK;
  char err[512] = "";
  assert(n >= 1 && n <= PR_SCHED_MAX_BATCH_REQUESTS && rows >= 1);
  double t0 = pr_now(), compute = 0;
  /* first: the first request not answered yet; base: the rows before it */
  int first = 0, base = 0;
  for (int done = 0; done < rows && !st;) {
    pr_request_t **rq = reqs + first;
    int m = n - first, want = next_chunk(w, rq[0], rows - done);
    /* the batch has one shape: the prepared one, or another of w's cache */
    pr_worker_session_t *z = pr_sched__session_for(w, rq[0], want, &st, err, sizeof err);
    if (!z) break;
    assert(z->in); /* the prepared ones before the config went live */
    int c = want < z->rows ? want : z->rows;
    double ta = pr_now();
    const pr_tensor_t *in = z->in;
    if (m == 1 && c == z->rows && done == base && reads_in_place(s, z, rq[0]))
      in = rq[0]->inputs;
    else
      gather(s, z, rq, m, done - base, c);
    pr_tensor_t outs[PR_SCHED_MAX_IO];
    double tb = pr_now();
    st = pr_engine_session_run(z->session, in, s->n_in, outs, s->n_out, err, sizeof err);
    double tc = pr_now();
    if (!st) scatter(s, outs, z->rows, rq, m, done - base, c, rs + first);
    double td = pr_now();
    if (!st) {
      bool full = z->rows == w->batch && c == w->batch && !first_run(w, z);
      measured(w, (tc - tb) * 1e3, (td - ta) * 1e3, c, full);
      time_session(w, z, (tc - tb) * 1e3);
    }
    pr_hist_observe(&s->stats.stage[PR_STAGE_assemble], tb - ta);
    pr_hist_observe(&s->stats.stage[PR_STAGE_compute], tc - tb);
    compute += tc - tb;
    pr_hist_observe(&s->stats.stage[PR_STAGE_scatter], td - tc);
    pr_batch_stats_t *bs = &s->stats.by_batch[c < s->stats.max_batch ? c : s->stats.max_batch];
    atomic_fetch_add(&bs->count, 1);
    atomic_fetch_add(&bs->input_ns, (uint64_t)((tb - ta) * 1e9));
    atomic_fetch_add(&bs->infer_ns, (uint64_t)((tc - tb) * 1e9));
    atomic_fetch_add(&bs->output_ns, (uint64_t)((td - tc) * 1e9));
    atomic_fetch_add(&s->stats.executions, 1);
    atomic_fetch_add(&s->stats.rows_executed, (uint64_t)c);
    pr_hist_observe(&s->stats.batch, c);
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
  double t1 = pr_now();
  pr_hist_observe(&s->stats.compute_s, t1 - t0);
  atomic_fetch_add(&s->stats.compute_us, (uint64_t)((t1 - t0) * 1e6) * (uint64_t)n);
  for (int i = first; i < n; i++) reqs[i]->compute_s = compute;
  complete_batch(s, reqs + first, n - first, st, err, rs + first);
}

/* ---- instance workers ---- */

/* On the worker's thread: sessions for 1, 2, 4, ... up to the planned batch
 * and the batch itself, each checked to scatter by rows. */
static pr_status_t prepare_sessions(worker_t *w) {
  pr_worker_t *pw = &w->w;
  pr_status_t st = pr_worker_prepare_up_to(pw, w->batch, true);
  /* outputs are scattered back by rows: each must have the batch axis */
  for (int z = 0; z < pw->n_sizes && !st; z++)
    for (int o = 0; o < w->s->n_out && !st; o++) {
      pr_tensor_info_t info;
      int rows = pw->sizes[z].rows;
      pr_engine_session_output(pw->sizes[z].session, o, &info);
      if (info.rank >= 1 && info.dims[0] == rows) continue;
      pr_errf(pw->err, sizeof pw->err,
              "output '%s' has no batch axis (at batch %d its first dimension is %lld): only "
              "models whose every output has the batch as axis 0 are served",
              info.name, rows, info.rank ? (long long)info.dims[0] : 0LL);
      st = PR_ERR_UNSUPPORTED;
    }
  return st;
}

/* Puts reqs[0..n) back, in order, at the front of their priority levels
 * (qlock held): they were at the queue's head when taken. */
static void requeue_front(pr_sched_t *s, pr_request_t **reqs, int n) {
  assert(pr_lock_held(&s->qlock));
  for (int i = n - 1; i >= 0; i--) {
    pr_request_t *r = reqs[i], **at = &s->head;
    while (*at && (*at)->priority < r->priority) at = &(*at)->next;
    r->next = *at;
    *at = r;
    if (!r->next) s->tail = r;
    s->depth++;
    s->level_rows[r->priority] += r->rows;
    /* the reaper may have looked while it was out of the queue */
    if (r->deadline > 0 && (s->reap_due == 0 || r->deadline < s->reap_due))
      pthread_cond_signal(&s->reap_cond);
  }
}

/* Takes requests for one batch off the queue into reqs (qlock held, the
 * worker's config active, the queue not empty): what fits in the planned
 * batch, oldest first (a request larger than the batch runs alone), waiting
 * for more at most the max queue delay and never past a held request's
 * deadline, then only those of the batch's first run. Returns how many (0:
 * all it took had timed out). */
static int take_batch(worker_t *w, pr_request_t **reqs, int *rows_out) {
  pr_sched_t *s = w->s;
  assert(pr_lock_held(&s->qlock) && s->head);
  int n = 0, rows = 0;
  double first_t = s->head->t_enqueue, deadline = 0; /* earliest of the requests held */
  for (;;) {
    while (s->head && n < PR_SCHED_MAX_BATCH_REQUESTS &&
           (n == 0 || rows + s->head->rows <= w->batch)) {
      pr_request_t *r = s->head;
      s->head = r->next;
      if (!s->head) s->tail = NULL;
      pr_sched__unqueued(s, r);
      if (r->deadline > 0 && pr_now() > r->deadline) {
        pr_sched__expired(w, r);
        continue;
      }
      reqs[n++] = r;
      rows += r->rows;
      if (r->deadline > 0 && (deadline == 0 || r->deadline < deadline)) deadline = r->deadline;
    }
    pr_history_queue(s->history, pr_now(), s->depth);
    if (n == 0 || rows >= w->batch || s->stop || s->active != w->config) break;
    double until = first_t + s->cfg.max_queue_delay_s;
    if (deadline > 0 && deadline < until) until = deadline;
    if (pr_now() >= until) break;
    struct timespec ts;
    pr_sched__timespec_at(&ts, until);
    w->idle = true; /* asleep for more of its batch: a hand-off may come to its core */
    pr_lock_timedwait(&s->qlock, &s->work[w->config], &ts);
    w->idle = false;
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
      requeue_front(s, reqs + keep, n - keep);
      n = keep, rows = kept;
      pr_history_queue(s->history, pr_now(), s->depth);
    }
  }
  *rows_out = rows;
  return n;
}

/* Parks pw's team or starts it again, outside qlock (held on entry and on
 * return): the team's threads are made or joined. */
static void repark(pr_sched_t *s, pr_worker_t *pw, bool park) {
  pr_unlock(&s->qlock);
  if (park)
    pr_worker_park(pw);
  else
    pr_worker_unpark(pw);
  pr_lock(&s->qlock);
}

void pr_sched__worker_main(pr_worker_t *pw, void *ctx) {
  worker_t *w = ctx;
  pr_sched_t *s = w->s;
  pw->status = prepare_sessions(w);
  if (!pw->status && s->cfg.n_dyn &&
      !(w->cache =
            pr_shape_cache_create(s->cfg.cache_sessions, s->cfg.cache_bytes, &s->stats.cache))) {
    pr_errf(pw->err, sizeof pw->err, "out of memory");
    pw->status = PR_ERR_NOMEM;
  }
  if (!pw->status && w->cache) pw->status = pr_sched__warm(w);
  pr_lock(&s->qlock);
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
         * spin: see pr_worker_park), unparked as soon as this one is (a
         * switch wakes its workers), before its first batch */
        repark(s, pw, !live);
        continue;
      }
      w->idle = true;
      pr_lock_wait(&s->qlock, &s->work[w->config]);
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
    pr_unlock(&s->qlock);
    for (pr_request_t *r = expired, *next; r; r = next) {
      next = r->next;
      pr_sched__time_out(s, r);
    }
    if (!n) {
      pr_lock(&s->qlock);
      continue;
    }
    double now = pr_now();
    for (int i = 0; i < n; i++) {
      batch[i]->t_start = now;
      pr_hist_observe(&s->stats.queue_s, now - batch[i]->t_enqueue);
      pr_hist_observe(&s->stats.stage[PR_STAGE_queue], now - batch[i]->t_enqueue);
      atomic_fetch_add(&s->stats.queue_us, (uint64_t)((now - batch[i]->t_enqueue) * 1e6));
    }
    run_batch(w, batch, n, rows);
    pr_lock(&s->qlock);
  }
  pr_unlock(&s->qlock);
  /* on this thread: its sessions hold this thread's OpenMP team */
  pr_shape_cache_destroy(w->cache, pw);
  w->cache = NULL;
}

/* The earliest deadline in the queue (0: none). Deadlines differ per request
 * and the queue is in priority order, so the whole queue is looked at; it
 * is bounded by the queue capacity and looked at once a wake-up. */
static double earliest_deadline(pr_sched_t *s) {
  assert(pr_lock_held(&s->qlock));
  double due = 0;
  for (const pr_request_t *r = s->head; r; r = r->next)
    if (r->deadline > 0 && (due == 0 || r->deadline < due)) due = r->deadline;
  return due;
}

/* Unlinks every queued request past its deadline into a list (qlock held). */
static pr_request_t *take_expired(pr_sched_t *s, double now) {
  assert(pr_lock_held(&s->qlock));
  pr_request_t *expired = NULL, *prev = NULL;
  for (pr_request_t **at = &s->head; *at;) {
    pr_request_t *r = *at;
    if (r->deadline <= 0 || now < r->deadline) {
      prev = r;
      at = &r->next;
      continue;
    }
    *at = r->next;
    if (s->tail == r) s->tail = prev;
    pr_sched__unqueued(s, r);
    r->next = expired;
    expired = r;
  }
  assert(s->depth >= 0);
  return expired;
}

/* The reaper: sleeps until the earliest deadline in the queue (a submit with
 * an earlier one wakes it), then fails what has expired. */
static void *reaper_main(void *arg) {
  pr_sched_t *s = arg;
  pr_lock(&s->qlock);
  while (!s->stop) {
    double due = earliest_deadline(s);
    s->reap_due = due;
    if (due == 0) {
      pr_lock_wait(&s->qlock, &s->reap_cond);
      continue;
    }
    if (pr_now() < due) {
      struct timespec ts;
      pr_sched__timespec_at(&ts, due);
      pr_lock_timedwait(&s->qlock, &s->reap_cond, &ts);
      continue;
    }
    pr_request_t *expired = take_expired(s, pr_now());
    if (expired) pr_history_queue(s->history, pr_now(), s->depth);
    pr_unlock(&s->qlock);
    for (pr_request_t *r = expired, *next; r; r = next) {
      next = r->next;
      pr_sched__time_out(s, r);
    }
    pr_lock(&s->qlock);
  }
  pr_unlock(&s->qlock);
  return NULL;
}

/* The shape buckets of cfg and each plan's bucket. */
static pr_status_t check_buckets(const pr_sched_config_t *cfg, const int *buckets, int n_plans,
                                 char *err, size_t err_len) {
  if (cfg->n_buckets < 0 || cfg->n_buckets > PR_BUCKETS_MAX ||
      (cfg->n_buckets && (cfg->bucket_dim < 0 || cfg->bucket_dim >= cfg->n_dyn))) {
    pr_errf(err, err_len, "%d shape buckets of dynamic dim %d", cfg->n_buckets, cfg->bucket_dim);
    return PR_ERR_INVALID;
  }
  for (int k = 0; k < cfg->n_buckets; k++)
    if (cfg->bucket_sizes[k] < 1 || (k && cfg->bucket_sizes[k] <= cfg->bucket_sizes[k - 1])) {
      pr_errf(err, err_len, "shape bucket sizes must be positive and ascending");
      return PR_ERR_INVALID;
    }
  for (int i = 0; buckets && i < n_plans; i++)
    if (buckets[i] < -1 || buckets[i] >= cfg->n_buckets) {
      pr_errf(err, err_len, "plan %d: no shape bucket %d", i, buckets[i]);
      return PR_ERR_INVALID;
    }
  return PR_OK;
}

static pr_status_t check_create(pr_model_t *model, int n_plans, int *max_plans,
                                const pr_sched_config_t *cfg, char *err, size_t err_len) {
  int n_in = pr_engine_model_num_inputs(model), n_out = pr_engine_model_num_outputs(model);
  if (n_in > PR_SCHED_MAX_IO || n_out > PR_SCHED_MAX_IO || n_in < 1) {
    pr_errf(err, err_len, "models with 1 to %d inputs and outputs are served", PR_SCHED_MAX_IO);
    return PR_ERR_UNSUPPORTED;
  }
  *max_plans = cfg->max_plans > 0 ? cfg->max_plans : PR_SCHED_MAX_CONFIGS - 1;
  if (*max_plans < 2 || *max_plans >= PR_SCHED_MAX_CONFIGS) {
    pr_errf(err, err_len, "max prepared plans must be 2..%d", PR_SCHED_MAX_CONFIGS - 1);
    return PR_ERR_INVALID;
  }
  for (int j = 0; j < cfg->n_dyn && j < PR_SCHED_MAX_DYN; j++)
    if (cfg->dyn[j].input < 0 || cfg->dyn[j].input >= n_in || cfg->dyn[j].axis < 1 ||
        cfg->dyn[j].axis >= PR_MAX_RANK) {
      pr_errf(err, err_len, "dynamic dim %d: no input %d axis %d", j, cfg->dyn[j].input,
              cfg->dyn[j].axis);
      return PR_ERR_INVALID;
    }
  for (int k = 0; k < PR_SCHED_MAX_IO; k++)
    for (int d = 0; d < PR_MAX_RANK; d++)
      if (cfg->dyn_of[k][d] > cfg->n_dyn || (cfg->dyn_of[k][d] && (k >= n_in || d == 0))) {
        pr_errf(err, err_len, "input %d axis %d: no dynamic dim %d", k, d, cfg->dyn_of[k][d]);
        return PR_ERR_INVALID;
      }
  if (n_plans < 1 || n_plans > *max_plans) {
    pr_errf(err, err_len, "%d plans to prepare, between 1 and the limit of %d expected", n_plans,
            *max_plans);
    return PR_ERR_INVALID;
  }
  return PR_OK;
}

/* Copies the session options (and the named dims they point to, which are
 * the caller's) into s. */
static void keep_base(pr_sched_t *s, const pr_session_options_t *base) {
  s->base = base ? *base : pr_session_options_default();
  s->base.n_dims = s->base.n_dims < 8 ? s->base.n_dims : 8;
  for (int i = 0; i < s->base.n_dims; i++) {
    snprintf(s->dim_names[i], sizeof s->dim_names[i], "%s", base->dim_names[i]);
    s->dim_name_ptrs[i] = s->dim_names[i];
    s->dim_values[i] = base->dim_values[i];
  }
  s->base.dim_names = s->dim_name_ptrs;
  s->base.dim_values = s->dim_values;
}

/* Input shapes at batch 1 tell every dim but the batch: they become the
 * shapes every instance's sessions are compiled for (axis 0 replaced). */
static pr_status_t probe_inputs(pr_sched_t *s, char *err, size_t err_len) {
  pr_session_options_t probe = s->base;
  probe.batch = 1;
  pr_session_t *ps;
  pr_status_t st = pr_engine_session_create(s->model, &probe, &ps, err, err_len);
  if (st) return st;
  for (int i = 0; i < s->n_in; i++) {
    pr_engine_session_input(ps, i, &s->in_info[i]);
    if (s->in_info[i].rank < 1) st = PR_ERR_UNSUPPORTED;
  }
  pr_engine_session_destroy(ps);
  if (st) {
    pr_errf(err, err_len, "every input needs a batch axis");
    return st;
  }
  s->base.input_shapes = s->in_info;
  return PR_OK;
}

const char *const pr_stage_names[PR_STAGE_COUNT] = {
#define PR_STAGE_NAME(name) #name,
    PR_STAGES(PR_STAGE_NAME)
#undef PR_STAGE_NAME
};

static void init_stats(pr_sched_stats_t *st) {
  for (int k = 0; k < PR_STAGE_COUNT; k++)
    pr_hist_init(&st->stage[k], pr_stage_bounds, pr_stage_n_bounds);
  pr_hist_init(&st->overhead_s, pr_stage_bounds, pr_stage_n_bounds);
  pr_hist_init(&st->request_s, pr_latency_bounds, pr_latency_n_bounds);
  pr_hist_init(&st->queue_s, pr_latency_bounds, pr_latency_n_bounds);
  pr_hist_init(&st->compute_s, pr_latency_bounds, pr_latency_n_bounds);
  pr_hist_init(&st->batch, pr_batch_bounds, pr_batch_n_bounds);
  pr_hist_init(&st->switch_s, pr_latency_bounds, pr_latency_n_bounds);
  pr_hist_init(&st->compile_s, pr_latency_bounds, pr_latency_n_bounds);
}

pr_status_t pr_sched_create(pr_model_t *model, const pr_plan_t *plans, const int *buckets,
                            int n_plans, int active, const int *cpus, int n_cpus,
                            const pr_session_options_t *base, const pr_sched_config_t *cfg,
                            pr_sched_t **out, char *err, size_t err_len) {
  *out = NULL;
  int max_plans;
  pr_status_t st = check_create(model, n_plans, &max_plans, cfg, err, err_len);
  if (!st) st = check_buckets(cfg, buckets, n_plans, err, err_len);
  if (st) return st;
  pr_sched_t *s = calloc(1, sizeof *s);
  if (!s) return PR_ERR_NOMEM;
  s->model = model;
  s->cfg = *cfg;
  s->cfg.max_plans = max_plans;
  s->cfg.n_dyn = cfg->n_dyn < 0 ? 0 : cfg->n_dyn < PR_SCHED_MAX_DYN ? cfg->n_dyn : PR_SCHED_MAX_DYN;
  s->cfg.n_ahead = cfg->n_ahead < 0                    ? 0
                   : cfg->n_ahead < PR_SCHED_MAX_AHEAD ? cfg->n_ahead
                                                       : PR_SCHED_MAX_AHEAD;
  if (s->cfg.cache_sessions < 1) s->cfg.cache_sessions = 8;
  if (s->cfg.cache_bytes < 1) s->cfg.cache_bytes = (size_t)1 << 30;
  if (s->cfg.priority_levels < 1) s->cfg.priority_levels = 1; /* one FIFO */
  if (s->cfg.default_priority < 1 || s->cfg.default_priority > s->cfg.priority_levels)
    s->cfg.default_priority = (s->cfg.priority_levels + 1) / 2;
  keep_base(s, base);
  s->n_in = pr_engine_model_num_inputs(model);
  s->n_out = pr_engine_model_num_outputs(model);
  s->n_cpus = n_cpus < 4096 ? n_cpus : 4096;
  memcpy(s->cpus, cpus, sizeof(int) * (size_t)s->n_cpus);
  pr_lock_init(&s->admin);
  pr_lock_init(&s->qlock);
  pr_sched__cond_init_monotonic(&s->qcond);
  for (int c = 0; c < PR_SCHED_MAX_CONFIGS; c++) pr_sched__cond_init_monotonic(&s->work[c]);
  pr_sched__cond_init_monotonic(&s->reap_cond);
  s->active = -1;
  init_stats(&s->stats);
  s->stats.max_batch = cfg->max_batch > 0 ? cfg->max_batch : 1;
  if (!(s->stats.by_batch = calloc((size_t)s->stats.max_batch + 1, sizeof *s->stats.by_batch))) {
    pr_sched_destroy(s);
    return PR_ERR_NOMEM;
  }
  s->level_rows = calloc((size_t)s->cfg.priority_levels + 1, sizeof *s->level_rows);
  if (!s->level_rows || !(s->history = pr_history_create(pr_now()))) {
    pr_sched_destroy(s);
    return PR_ERR_NOMEM;
  }
  if ((st = probe_inputs(s, err, err_len))) {
    pr_sched_destroy(s);
    return st;
  }
  int first = -1;
  for (int i = 0; i < n_plans; i++) {
    pr_lock(&s->admin);
    int idx = pr_sched__add_plan_locked(s, &plans[i], buckets ? buckets[i] : -1, err, err_len);
    pr_unlock(&s->admin);
    if (idx < 0) {
      pr_sched_destroy(s);
      return PR_ERR_INVALID;
    }
    if (i == active || first < 0) first = idx;
  }
  pr_lock(&s->qlock);
  s->active = first;
  char spec[PR_HISTORY_PLAN_LEN];
  pr_plan_format(&s->configs[first].plan, spec, sizeof spec);
  pr_unlock(&s->qlock);
  pr_history_switch(s->history, pr_now(), NULL, spec, "first plan, at load", 0);
  /* always: a request may carry its own timeout */
  if (pthread_create(&s->reaper, NULL, reaper_main, s) != 0) {
    pr_errf(err, err_len, "cannot start the scheduler's timeout thread");
    pr_sched_destroy(s);
    return PR_ERR_NOMEM;
  }
  s->reaper_running = true;
  *out = s;
  return PR_OK;
}

void pr_sched_destroy(pr_sched_t *s) {
  if (!s) return;
  pr_lock(&s->admin);
  pr_sched__set_auto_locked(s, false, 0, 0);
  pr_lock(&s->qlock);
  s->stop = true;
  for (int c = 0; c < PR_SCHED_MAX_CONFIGS; c++) pr_sched__wake(s, c);
  pthread_cond_broadcast(&s->reap_cond);
  pr_unlock(&s->qlock);
  if (s->reaper_running) pthread_join(s->reaper, NULL);
  /* the active config drains the queue, the others leave at once */
  for (int c = 0; c < PR_SCHED_MAX_CONFIGS; c++)
    for (int k = 0; k < s->configs[c].n_workers; k++) pr_worker_join(&s->configs[c].workers[k].w);
  /* instances that failed to start leave requests behind: fail them */
  for (pr_request_t *r = s->head, *next; r; r = next) {
    next = r->next;
    complete(r, PR_ERR_BUSY, "model unloaded");
  }
  for (int c = 0; c < PR_SCHED_MAX_CONFIGS; c++) free(s->configs[c].workers);
  pr_unlock(&s->admin);
  pr_lock_destroy(&s->admin);
  pr_lock_destroy(&s->qlock);
  pthread_cond_destroy(&s->qcond);
  for (int c = 0; c < PR_SCHED_MAX_CONFIGS; c++) pthread_cond_destroy(&s->work[c]);
  pthread_cond_destroy(&s->reap_cond);
  pr_history_destroy(s->history);
  free(s->stats.by_batch);
  free(s->level_rows);
  free(s);
}

/* Links r in after every request of its level or a level before it (qlock
 * held): the common case, a level no later than the tail's, appends. */
static void enqueue_locked(pr_sched_t *s, pr_request_t *r) {
  assert(pr_lock_held(&s->qlock));
  r->next = NULL;
  if (!s->tail || s->tail->priority <= r->priority) {
    if (s->tail)
      s->tail->next = r;
    else
      s->head = r;
    s->tail = r;
    return;
  }
  pr_request_t **at = &s->head;
  while ((*at)->priority <= r->priority) at = &(*at)->next;
  assert(*at); /* the tail's level is later than r's */
  r->next = *at;
  *at = r;
}

pr_status_t pr_sched_submit(pr_sched_t *s, pr_request_t *r) {
  if (r->priority < 0 || r->priority > s->cfg.priority_levels) return PR_ERR_INVALID;
  if (r->priority == 0) r->priority = s->cfg.default_priority;
  r->t_enqueue = pr_now();
  double timeout = s->cfg.timeout_s;
  if (r->timeout_s > 0 && (timeout <= 0 || r->timeout_s < timeout)) timeout = r->timeout_s;
  r->deadline = timeout > 0 ? r->t_enqueue + timeout : 0;
  pr_lock(&s->qlock);
  pr_status_t st = pr_sched__admit_locked(s, r, timeout);
  if (st) {
    pr_unlock(&s->qlock);
    atomic_fetch_add(&s->stats.rejected, 1);
    pr_history_rejected(s->history, r->t_enqueue);
    return st;
  }
  enqueue_locked(s, r);
  s->depth++;
  s->level_rows[r->priority] += r->rows;
  if (r->deadline > 0 && (s->reap_due == 0 || r->deadline < s->reap_due))
    pthread_cond_signal(&s->reap_cond);
  atomic_fetch_add(&s->stats.arrivals, 1);
  if (s->cfg.n_buckets) atomic_fetch_add(&s->stats.bucket_arrivals[pr_sched__bucket_of(s, r)], 1);
  pr_history_arrival(s->history, r->t_enqueue, s->depth);
  pr_sched__wake(s, s->active);
  pr_unlock(&s->qlock);
  return PR_OK;
}

int pr_sched_home_cpu(pr_sched_t *s, int cpu) {
  pr_lock(&s->qlock);
  const config_t *cfg = &s->configs[s->active];
  int home = -1;
  for (int k = 0; k < cfg->n_workers; k++) {
    if (!cfg->workers[k].idle) continue;
    home = cfg->workers[k].w.cpus[0];
    if (home == cpu) break; /* the caller's own */
  }
  pr_unlock(&s->qlock);
  return home;
}

int pr_sched_queue_depth(pr_sched_t *s) {
  pr_lock(&s->qlock);
  int d = s->depth;
  pr_unlock(&s->qlock);
  return d;
}

const int *pr_sched_cpus(const pr_sched_t *s) {
  return s->cpus;
}

int pr_sched_num_cpus(const pr_sched_t *s) {
  return s->n_cpus;
}

pr_sched_stats_t *pr_sched_stats(pr_sched_t *s) {
  return &s->stats;
}

pr_history_t *pr_sched_history(pr_sched_t *s) {
  return s->history;
}

int pr_sched_instances(pr_sched_t *s, pr_plan_t *plan, pr_sched_instance_t *out, int max) {
  pr_lock(&s->qlock);
  assert(s->active >= 0 && s->active < PR_SCHED_MAX_CONFIGS); /* set before s is returned */
  const config_t *cfg = &s->configs[s->active];
  *plan = cfg->plan;
  int n = cfg->n_workers < max ? cfg->n_workers : max;
  for (int k = 0; k < n; k++) {
    worker_t *w = &cfg->workers[k];
    out[k].runs = atomic_load(&w->runs); /* before rows (measured) */
    out[k].rows = atomic_load(&w->rows);
    out[k].full_ms = atomic_load(&w->full_ms);
    out[k].any_ms = atomic_load(&w->any_ms);
  }
  pr_unlock(&s->qlock);
  return n;
}
