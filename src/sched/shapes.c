/* Requests of many shapes (a model whose dims take a range or a list of
 * sizes): batching by shape, the sessions of other shapes, the shapes
 * served. See scheduler.h for the locking rules; internal.h for how
 * the scheduler's files share its state.
 *
 * Notes on the design:
 * - A batch holds requests of one shape only: the queue's head (the
 *   oldest request of the first priority level) decides it, and the
 *   instance then takes the later requests of that shape that fit, in queue
 *   order, passing over requests of other shapes (they stay where they
 *   are). Every batch starts at the head, so no request waits behind
 *   requests of another shape for longer than the batches ahead of it take:
 *   nothing starves. Requests of other shapes run at the same time on the
 *   other instances.
 * - An instance runs its prepared shape (the one the plan was made at) on
 *   the sessions it compiled before its plan went live, exactly as a model
 *   of one shape does; any other shape on a session of its own cache
 *   (runtime/shape_cache.h), compiled on that shape's first request, at the
 *   smallest power of two of rows that holds the batch (at most the planned
 *   batch; larger requests run in chunks of it).
 * - The shapes-served table is guarded by qlock and bounded
 *   (PR_SCHED_MAX_SHAPES); shapes beyond it are counted together. */
#define _GNU_SOURCE
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "base/lock.h"
#include "base/log.h"
#include "base/util.h"
#include "sched/internal.h"

static bool same_shape(const pr_sched_t *s, const pr_request_t *a, const pr_request_t *b) {
  for (int k = 0; k < s->n_in; k++) {
    const pr_tensor_t *x = &a->inputs[k], *y = &b->inputs[k];
    if (x->rank != y->rank) return false;
    for (int d = 1; d < x->rank; d++)
      if (x->dims[d] != y->dims[d]) return false;
  }
  return true;
}

/* Whether the input shapes agree with `info` past axis 0. */
static bool shapes_equal(const pr_sched_t *s, const pr_tensor_t *x, const pr_tensor_info_t *info) {
  for (int k = 0; k < s->n_in; k++) {
    if (x[k].rank != info[k].rank) return false;
    for (int d = 1; d < x[k].rank; d++)
      if (x[k].dims[d] != info[k].dims[d]) return false;
  }
  return true;
}

bool pr_sched__prepared_shape(const worker_t *w, const pr_request_t *r) {
  assert(w->config >= 0 && w->config < PR_SCHED_MAX_CONFIGS);
  return shapes_equal(w->s, r->inputs, w->s->configs[w->config].in_info);
}

int pr_sched__bucket_of(const pr_sched_t *s, const pr_request_t *r) {
  assert(s->cfg.n_buckets > 0 && s->cfg.bucket_dim < s->cfg.n_dyn);
  const pr_sched_dim_t *d = &s->cfg.dyn[s->cfg.bucket_dim];
  return pr_bucket_of(s->cfg.bucket_sizes, s->cfg.n_buckets, r->inputs[d->input].dims[d->axis]);
}

/* Unlinks r from the queue; prev: the request before it (NULL: r is the
 * head). qlock held. */
static void unlink_after(pr_sched_t *s, pr_request_t *prev, pr_request_t *r) {
  assert(pr__lock_held(&s->qlock) && (prev ? prev->next : s->head) == r);
  if (prev)
    prev->next = r->next;
  else
    s->head = r->next;
  if (s->tail == r) s->tail = prev;
  pr_sched__unqueued(s, r);
}

/* Moves the queued requests of reqs[0]'s shape (the head's when n is 0)
 * into reqs[n..] while they fit the planned batch, in queue order; expired
 * ones time out on the way. Returns the new n; *rows and *deadline (the
 * earliest held, 0: none) follow. qlock held. */
static int take_same(worker_t *w, pr_request_t **reqs, int n, int *rows, double *deadline) {
  pr_sched_t *s = w->s;
  assert(pr__lock_held(&s->qlock));
  pr_request_t *prev = NULL;
  for (pr_request_t *r = s->head, *next; r && n < PR_SCHED_MAX_BATCH_REQUESTS; r = next) {
    next = r->next;
    if (n > 0 && !same_shape(s, r, reqs[0])) {
      prev = r; /* another shape: stays queued, in its place */
      continue;
    }
    if (n > 0 && *rows + r->rows > w->batch) break; /* first in, first out within a shape */
    unlink_after(s, prev, r);
    if (r->deadline > 0 && pr__now() > r->deadline) {
      pr_sched__expired(w, r);
      continue;
    }
    reqs[n++] = r;
    *rows += r->rows;
    if (r->deadline > 0 && (*deadline == 0 || r->deadline < *deadline)) *deadline = r->deadline;
    if (*rows >= w->batch) break;
  }
  return n;
}

/* Counts a batch of reqs[0]'s shape in the shapes served. qlock held. */
static void record_shape(pr_sched_t *s, pr_request_t **reqs, int n, int rows) {
  assert(pr__lock_held(&s->qlock) && n >= 1);
  int64_t v[PR_SCHED_MAX_DYN] = {0};
  for (int j = 0; j < s->cfg.n_dyn; j++) {
    const pr_sched_dim_t *d = &s->cfg.dyn[j];
    assert(d->input >= 0 && d->input < s->n_in && d->axis >= 1 && d->axis < PR_MAX_RANK);
    v[j] = reqs[0]->inputs[d->input].dims[d->axis];
  }
  pr_sched_shape_t *at = NULL;
  for (int i = 0; i < s->n_shapes && !at; i++)
    if (!memcmp(s->shapes[i].values, v, sizeof v)) at = &s->shapes[i];
  if (!at && s->n_shapes < PR_SCHED_MAX_SHAPES) {
    at = &s->shapes[s->n_shapes++];
    memcpy(at->values, v, sizeof v);
  }
  if (!at) {
    s->shapes_other += (uint64_t)n;
    return;
  }
  at->requests += (uint64_t)n;
  at->rows += (uint64_t)rows;
  at->batches++;
}

int pr_sched__take_shaped(worker_t *w, pr_request_t **reqs, int *rows_out) {
  pr_sched_t *s = w->s;
  assert(pr__lock_held(&s->qlock) && s->head && s->cfg.n_dyn > 0);
  int n = 0, rows = 0;
  double first_t = s->head->t_enqueue, deadline = 0; /* earliest of the requests held */
  for (;;) {
    n = take_same(w, reqs, n, &rows, &deadline);
    if (!pr_sched__wait_for_more(w, n, rows, first_t, deadline)) break;
  }
  if (n) record_shape(s, reqs, n, rows);
  *rows_out = rows;
  return n;
}

/* The rows of a cached session for `rows` rows: the smallest power of two
 * that holds them, at most the planned batch. */
static int cache_rows(int rows, int batch) {
  int b = 1;
  while (b < rows && b < batch) b *= 2;
  return b < batch ? b : batch;
}

/* "x [1, 37, 16]" for the log: r's first input. */
static void shape_text(const pr_request_t *r, char *buf, size_t len) {
  size_t off = 0;
  const pr_tensor_t *t = &r->inputs[0];
  for (int d = 1; d < t->rank && off < len; d++)
    off +=
        (size_t)snprintf(buf + off, len - off, "%s%lld", d > 1 ? "x" : "", (long long)t->dims[d]);
}

/* Whether z's outputs can be scattered back by rows (every one has z's
 * rows as axis 0, known before the run): what prepare checks of the
 * prepared sessions, checked of a cached one at each use (a few compares). */
static bool rows_scatter(const pr_sched_t *s, const pr_worker_session_t *z) {
  if (pr_engine_session_is_dynamic(z->session)) return false;
  for (int o = 0; o < s->n_out; o++) {
    pr_tensor_info_t info;
    pr_engine_session_output(z->session, o, &info);
    if (info.rank < 1 || info.dims[0] != z->rows) return false;
  }
  return true;
}

pr_worker_session_t *pr_sched__session_for(worker_t *w, const pr_request_t *r, int rows,
                                           pr_status_t *st, char *err, size_t err_len) {
  *st = PR_OK;
  if (!w->cache || pr_sched__prepared_shape(w, r)) {
    pr_worker_session_t *z = pr__worker_session(&w->w, rows);
    return z ? z : pr__worker_largest(&w->w);
  }
  double compile_s;
  int at = cache_rows(rows, w->batch);
  pr_worker_session_t *z = pr__shape_cache_get(w->cache, &w->w, r->inputs, at, &compile_s, st);
  char shape[128] = "";
  if (!z || compile_s > 0) shape_text(r, shape, sizeof shape);
  if (!z) {
    pr__errf(err, err_len, "no session for inputs of shape [*x%s]: %s", shape, w->w.err);
    return NULL;
  }
  if (compile_s > 0) {
    pr__hist_observe(&w->s->stats.compile_s, compile_s);
    pr__log(PR_LOG_INFO, "%sinstance %d: compiled a session for shape [%dx%s] in %.3f s",
            w->s->cfg.who, w->w.index, at, shape, compile_s);
  }
  if (!rows_scatter(w->s, z)) {
    *st = PR_ERR_UNSUPPORTED;
    pr__errf(err, err_len,
             "at this shape the model's outputs do not have the batch as axis 0 (or are known only "
             "at run time): it cannot be served at this shape");
    return NULL;
  }
  return z;
}

/* The input shapes of ahead set a: the prepared ones (s->in_info) with
 * each dyn dim's axes at its value there. */
static void ahead_shapes(const pr_sched_t *s, int a, pr_tensor_t *shapes) {
  for (int k = 0; k < s->n_in; k++) {
    const pr_tensor_info_t *t = &s->in_info[k];
    shapes[k] = (pr_tensor_t){.dtype = t->dtype, .rank = t->rank};
    memcpy(shapes[k].dims, t->dims, sizeof shapes[k].dims);
    for (int d = 1; d < t->rank; d++) {
      int j = s->cfg.dyn_of[k][d] - 1;
      assert(j < s->cfg.n_dyn);
      if (j >= 0) shapes[k].dims[d] = s->cfg.ahead[a][j];
    }
  }
}

pr_status_t pr_sched__warm(worker_t *w) {
  pr_sched_t *s = w->s;
  pr_worker_t *pw = &w->w;
  int held = 0;
  for (int a = 0; a < s->cfg.n_ahead; a++) {
    pr_tensor_t shapes[PR_SCHED_MAX_IO];
    ahead_shapes(s, a, shapes);
    if (shapes_equal(s, shapes, s->configs[w->config].in_info)) continue; /* prepared */
    for (int b = 1;; b = b * 2 < w->batch ? b * 2 : w->batch) {
      if (held++ == s->cfg.cache_sessions) {
        pr__log(PR_LOG_INFO,
                "%sinstance %d: the listed sizes need more sessions than the cache holds (%d); the "
                "rest compile on first use",
                s->cfg.who, pw->index, s->cfg.cache_sessions);
        return PR_OK;
      }
      pr_status_t st = pr__shape_cache_warm(w->cache, pw, shapes, b);
      if (st) return st; /* the message is in pw->err */
      if (b == w->batch) break;
    }
  }
  return PR_OK;
}

int pr__sched_buckets(pr_sched_t *s, const pr_sched_dim_t **dim, const long long **sizes) {
  *dim = s->cfg.n_buckets ? &s->cfg.dyn[s->cfg.bucket_dim] : NULL;
  *sizes = s->cfg.bucket_sizes;
  return s->cfg.n_buckets;
}

int pr__sched_dyn(pr_sched_t *s, const pr_sched_dim_t **dyn) {
  *dyn = s->cfg.dyn;
  return s->cfg.n_dyn;
}

int pr__sched_shapes(pr_sched_t *s, pr_sched_shape_t *out, int max, uint64_t *others) {
  pr__lock(&s->qlock);
  int n = s->n_shapes < max ? s->n_shapes : max;
  memcpy(out, s->shapes, sizeof *out * (size_t)n);
  *others = s->shapes_other;
  pr__unlock(&s->qlock);
  return n;
}
