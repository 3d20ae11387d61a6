/* The scheduler's switch invariant: while clients submit from several
 * threads and plans are switched, pinned and evicted under them, every
 * request is answered once, with its own rows' results, and the counters
 * add up (no request lost, none run twice). Meanwhile a reader does what
 * the dashboard does (instances' measurements, the history); the history
 * must add up too: every completion and every switch recorded. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/topology.h"
#include "base/util.h"
#include "model_builder.h"
#include "packrat/engine.h"
#include "packrat/planner.h"
#include "sched/scheduler.h"
#include "server/status.h"

#define CLIENTS 4
#define PER_CLIENT 300

/* x[batch, 4] -> Neg -> y[batch, 4] */
static pr_model_t *neg_model(void) {
  const int64_t xd[2] = {-1, 4};
  char err[256];
  pr_model_t *m = mb_neg_model(2, xd, err, sizeof err);
  if (!m) fail_msg("%s", err);
  return m;
}

typedef struct {
  pr_sched_t *s;
  int client;
  _Atomic int *done_clients;
  _Atomic long *rows_sent;
  _Atomic int *switches; /* the switcher's count so far */
  int bad, sent;
} client_t;

/* PER_CLIENT requests, and more (up to 5000) until the switcher has made
 * 12 switches: a loaded machine can run the requests faster than it
 * switches. */
static void *client_main(void *arg) {
  client_t *c = arg;
  for (int i = 0; i < PER_CLIENT || (atomic_load(c->switches) < 12 && i < 5000); i++) {
    int rows = 1 + (i + c->client) % 2;
    pr_request_t *r = pr__request_new();
    r->rows = rows;
    pr_tensor_t *t = &r->inputs[0];
    t->dtype = PR_DTYPE_FLOAT;
    t->rank = 2;
    t->dims[0] = rows;
    t->dims[1] = 4;
    t->data = malloc(sizeof(float) * 4 * (size_t)rows);
    float id = (float)(c->client * 100000 + i * 10); /* unique per request and row */
    for (int k = 0; k < 4 * rows; k++) ((float *)t->data)[k] = id + (float)(k / 4);
    while (pr__sched_submit(c->s, r) != PR_OK) { /* queue full: retry */
    }
    pr__sched_wait(c->s, r);
    const pr_tensor_t *y = &r->outputs[0];
    if (r->status || y->dims[0] != rows) {
      c->bad++;
    } else {
      for (int k = 0; k < 4 * rows; k++)
        if (((float *)y->data)[k] != -(id + (float)(k / 4))) c->bad++;
    }
    atomic_fetch_add(c->rows_sent, rows);
    c->sent++;
    pr__request_free(r);
  }
  atomic_fetch_add(c->done_clients, 1);
  return NULL;
}

/* The dashboard's reads, over and over, until the clients are done. */
typedef struct {
  pr_sched_t *s;
  _Atomic int *done_clients;
  int reads, bad;
} reader_t;

static void *reader_main(void *arg) {
  reader_t *r = arg;
  pr_plan_t *plan = malloc(sizeof *plan);
  pr_sched_instance_t *inst = malloc(sizeof *inst * PR_PLAN_MAX_INSTANCES);
  pr_history_point_t *pts = malloc(sizeof *pts * PR_HISTORY_SECONDS);
  pr_history_switch_t *sw = malloc(sizeof *sw * PR_HISTORY_SWITCHES);
  while (atomic_load(r->done_clients) < CLIENTS) {
    int n = pr__sched_instances(r->s, plan, inst, PR_PLAN_MAX_INSTANCES);
    if (n != plan->n_instances) r->bad++;
    for (int k = 0; k < n; k++)
      if (inst[k].rows < inst[k].runs || inst[k].any_ms < 0) r->bad++;
    pr_history_t *h = pr__sched_history(r->s);
    pr__history_series(h, pr__now(), PR_HISTORY_SECONDS, pts);
    pr__history_switches(h, sw, PR_HISTORY_SWITCHES, NULL);
    r->reads++;
  }
  free(plan), free(inst), free(pts), free(sw);
  return NULL;
}

static void test_switch_under_submits(void **state) {
  pr__log_set_level(PR_LOG_WARN); /* a line per switch otherwise */
  pr_model_t *m = neg_model();
  int cpus[256];
  int n_cpus = pr__topology_cpu_order(cpus, 256);
  char err[512];
  pr_plan_t plans[2];
  assert_int_equal(pr_plan_parse("1x1", NULL, &plans[0], err, sizeof err), PR_OK);
  assert_int_equal(pr_plan_parse("1x2", NULL, &plans[1], err, sizeof err), PR_OK);
  pr_sched_config_t cfg = {.max_batch = 2,
                           .queue_capacity = 64,
                           .max_queue_delay_s = 0.0005,
                           .timeout_s = 0,
                           .max_plans = 3};
  pr_session_options_t base = pr_session_options_default();
  pr_sched_t *s;
  if (pr__sched_create(m, plans, NULL, 2, 0, cpus, n_cpus, &base, &cfg, &s, err, sizeof err))
    fail_msg("%s", err);
  _Atomic int done = 0, switched = 0;
  _Atomic long rows_sent = 0;
  client_t cl[CLIENTS];
  pthread_t th[CLIENTS], rth;
  for (int i = 0; i < CLIENTS; i++) {
    cl[i] = (client_t){
        .s = s, .client = i, .done_clients = &done, .rows_sent = &rows_sent, .switches = &switched};
    pthread_create(&th[i], NULL, client_main, &cl[i]);
  }
  reader_t rd = {.s = s, .done_clients = &done};
  pthread_create(&rth, NULL, reader_main, &rd);
  /* switch between the prepared plans, and pin new ones (evicting) */
  const char *pins[] = {"2x2", "1x2,1x1", "2x1", "1x1,1x1"};
  int switches = 0, pinned = 0;
  while (atomic_load(&done) < CLIENTS) {
    if (switches % 8 == 7 && n_cpus >= 2) { /* the pins need two cores */
      pr_plan_t p;
      assert_int_equal(pr_plan_parse(pins[pinned % 4], NULL, &p, err, sizeof err), PR_OK);
      if (pr__sched_pin(s, &p, err, sizeof err)) fail_msg("pin %s: %s", pins[pinned % 4], err);
      pinned++;
    } else {
      pr__sched_switch(s, switches % 2, "test");
    }
    atomic_store(&switched, ++switches);
    struct timespec ts = {0, 300000};
    nanosleep(&ts, NULL);
  }
  for (int i = 0; i < CLIENTS; i++) pthread_join(th[i], NULL);
  pthread_join(rth, NULL);
  int sent = 0;
  for (int i = 0; i < CLIENTS; i++) {
    assert_int_equal(cl[i].bad, 0);
    assert_true(cl[i].sent >= PER_CLIENT);
    sent += cl[i].sent;
  }
  assert_int_equal(rd.bad, 0);
  assert_true(rd.reads > 0);
  pr_sched_stats_t *st = pr__sched_stats(s);
  /* the history saw every request and every switch (and the first plan) */
  pr_history_t *h = pr__sched_history(s);
  pr_history_point_t *pts = malloc(sizeof *pts * PR_HISTORY_SECONDS);
  int n = pr__history_series(h, pr__now() + 1, PR_HISTORY_SECONDS, pts);
  double arrived = 0, completed = 0;
  for (int i = 0; i < n; i++) arrived += pts[i].arrivals, completed += pts[i].completed;
  free(pts);
  assert_true(arrived == sent && completed == sent);
  uint64_t total;
  pr_history_switch_t last;
  assert_int_equal(pr__history_switches(h, &last, 1, &total), 1);
  assert_int_equal(total, atomic_load(&st->reconfigurations) + 1);
  assert_int_equal(atomic_load(&st->success), sent);
  assert_int_equal(atomic_load(&st->failed), 0);
  assert_int_equal(atomic_load(&st->timed_out), 0);
  /* each row ran exactly once: none lost, none twice */
  assert_int_equal((long)atomic_load(&st->rows_executed), atomic_load(&rows_sent));
  assert_true(switches > 10);
  assert_true(pr__sched_num_configs(s) <= 3);
  pr__sched_destroy(s);
  pr_engine_model_destroy(m);
}

/* Re-plans (the joint plan moving the model's share) under submits: each
 * replan prepares the set on the other share, switches the live batch's
 * plan and retires the old set; no request is lost, wrong or run twice. */
static void test_replan_under_submits(void **state) {
  pr__log_set_level(PR_LOG_WARN);
  pr_model_t *m = neg_model();
  int cpus[256];
  int n_cpus = pr__topology_cpu_order(cpus, 256);
  char err[512];
  pr_plan_t plans[2];
  assert_int_equal(pr_plan_parse("1x1", NULL, &plans[0], err, sizeof err), PR_OK);
  assert_int_equal(pr_plan_parse("1x2", NULL, &plans[1], err, sizeof err), PR_OK);
  plans[0].latency_ms = plans[0].instances[0].latency_ms = 1; /* planned, as the optimizer's */
  plans[1].latency_ms = plans[1].instances[0].latency_ms = 2;
  pr_sched_config_t cfg = {
      .max_batch = 2, .queue_capacity = 64, .max_queue_delay_s = 0.0005, .max_plans = 4};
  pr_session_options_t base = pr_session_options_default();
  pr_sched_t *s;
  if (pr__sched_create(m, plans, NULL, 2, 1, cpus, n_cpus, &base, &cfg, &s, err, sizeof err))
    fail_msg("%s", err);
  _Atomic int done = 0, replans = 0;
  _Atomic long rows_sent = 0;
  client_t cl[CLIENTS];
  pthread_t th[CLIENTS];
  for (int i = 0; i < CLIENTS; i++) {
    cl[i] = (client_t){
        .s = s, .client = i, .done_clients = &done, .rows_sent = &rows_sent, .switches = &replans};
    pthread_create(&th[i], NULL, client_main, &cl[i]);
  }
  /* an invalid set changes nothing */
  assert_int_equal(pr__sched_replan(s, plans, NULL, 2, 2, "test", err, sizeof err), PR_ERR_INVALID);
  assert_int_equal(pr__sched_replan(s, plans, NULL, 4, 0, "test", err, sizeof err), PR_ERR_INVALID);
  int n = 0, shift = n_cpus >= 2 ? 1 : 0;
  while (atomic_load(&done) < CLIENTS) {
    pr_plan_t moved[2] = {plans[0], plans[1]};
    int at = (n + 1) % 2 ? shift : 0;
    pr_plan_offset(&moved[0], at);
    pr_plan_offset(&moved[1], at);
    if (pr__sched_replan(s, moved, NULL, 2, 1, "test: the share moved", err, sizeof err))
      fail_msg("replan: %s", err);
    pr_plan_t live;
    pr__sched_current_plan(s, &live);
    assert_int_equal(live.instances[0].first_core, at); /* the live batch's plan, moved */
    assert_int_equal(live.batch, 2);
    assert_int_equal(pr__sched_num_configs(s), 2); /* the old set retired */
    atomic_store(&replans, ++n);
  }
  for (int i = 0; i < CLIENTS; i++) {
    pthread_join(th[i], NULL);
    assert_int_equal(cl[i].bad, 0);
  }
  pr_sched_stats_t *st = pr__sched_stats(s);
  assert_int_equal((long)atomic_load(&st->rows_executed), atomic_load(&rows_sent));
  assert_int_equal(atomic_load(&st->failed), 0);
  assert_true(n >= 12);
  pr__sched_destroy(s);
  pr_engine_model_destroy(m);
}

/* One request of `rows` rows through s; its output checked against -input. */
/* One request of `rows` rows whose input starts `skew` bytes into a 64-byte
 * aligned block (a view the request does not own, as a binary HTTP body's
 * tensor is): its answer is right and its input is left as it was. */
static void run_skewed(pr_sched_t *s, int rows, size_t skew) {
  pr_request_t *r = pr__request_new();
  r->rows = rows;
  pr_tensor_t *t = &r->inputs[0];
  *t = (pr_tensor_t){.dtype = PR_DTYPE_FLOAT, .rank = 2, .dims = {rows, 4}};
  char *block = pr__aligned_alloc(skew + sizeof(float) * 4 * (size_t)rows);
  float *x = (float *)(block + skew);
  t->data = x;
  r->borrowed = 1;
  for (int k = 0; k < 4 * rows; k++) x[k] = (float)k;
  assert_int_equal(pr__sched_submit(s, r), PR_OK);
  pr__sched_wait(s, r);
  assert_int_equal(r->status, PR_OK);
  assert_int_equal(r->outputs[0].dims[0], rows);
  for (int k = 0; k < 4 * rows; k++) {
    assert_true(((float *)r->outputs[0].data)[k] == -(float)k);
    assert_true(x[k] == (float)k);
  }
  pr__request_free(r);
  pr__free(block);
}

static void run_one(pr_sched_t *s, int rows) {
  run_skewed(s, rows, 0);
}

/* A scheduler of m on one plan (spec) with cfg. */
static pr_sched_t *plan_sched(pr_model_t *m, const char *spec, const pr_sched_config_t *cfg) {
  int cpus[256];
  int n_cpus = pr__topology_cpu_order(cpus, 256);
  char err[512];
  pr_plan_t plan;
  assert_int_equal(pr_plan_parse(spec, NULL, &plan, err, sizeof err), PR_OK);
  pr_session_options_t base = pr_session_options_default();
  pr_sched_t *s;
  if (pr__sched_create(m, &plan, NULL, 1, 0, cpus, n_cpus, &base, cfg, &s, err, sizeof err))
    fail_msg("%s", err);
  return s;
}

/* A scheduler of m on one plan (spec), max batch max_batch, a short queue. */
static pr_sched_t *one_plan_sched(pr_model_t *m, const char *spec, int max_batch) {
  pr_sched_config_t cfg = {
      .max_batch = max_batch, .queue_capacity = 8, .max_queue_delay_s = 0.0001};
  return plan_sched(m, spec, &cfg);
}

/* A request that fills a session alone is read where it is (aligned to 16
 * bytes) or copied (not aligned, or padded to the session's rows): the
 * same answers either way, on the same runs. */
static void test_inputs_read_in_place_or_copied(void **state) {
  pr_model_t *m = neg_model();
  pr_sched_t *s = one_plan_sched(m, "1x2", 2);
  const size_t skews[] = {0, 4, 16, 64, 100};
  for (int i = 0; i < 5; i++) {
    run_skewed(s, 2, skews[i]); /* fills the session of 2 rows */
    run_skewed(s, 1, skews[i]); /* the session of 1 row */
    run_skewed(s, 3, skews[i]); /* chunks of 2 and 1 */
  }
  assert_int_equal(atomic_load(&pr__sched_stats(s)->executions), 5 * 4);
  pr__sched_destroy(s);
  pr_engine_model_destroy(m);
}

/* A session's first run (its memory touched the first time) is not a
 * measured pass of the planned batch: the next one is. */
static void test_first_pass_not_measured(void **state) {
  pr_model_t *m = neg_model();
  pr_sched_t *s = one_plan_sched(m, "1x2", 2);
  pr_plan_t *p = malloc(sizeof *p);
  pr_sched_instance_t inst[1];
  run_one(s, 2);
  assert_int_equal(pr__sched_instances(s, p, inst, 1), 1);
  assert_int_equal(inst[0].runs, 1);
  assert_true(inst[0].full_ms == 0);
  run_one(s, 2);
  assert_int_equal(pr__sched_instances(s, p, inst, 1), 1);
  assert_true(inst[0].full_ms > 0);
  free(p);
  pr__sched_destroy(s);
  pr_engine_model_destroy(m);
}

/* No session is compiled on the request path: an instance planned for 3
 * rows holds sessions for 1, 2 and 3; a lone request of 8 rows runs in
 * chunks of 3, 3 and 2 (three runs), one of 7 in 3, 3 and 1 (padded on
 * nothing: 1 is prepared), with every row's result in place. */
static void test_larger_request_runs_in_chunks(void **state) {
  pr_model_t *m = neg_model();
  pr_sched_t *s = one_plan_sched(m, "1x3", 8);
  pr_sched_stats_t *st = pr__sched_stats(s);
  run_one(s, 8);
  assert_int_equal(atomic_load(&st->executions), 3);
  run_one(s, 7);
  assert_int_equal(atomic_load(&st->executions), 6);
  run_one(s, 2); /* fits: one run */
  assert_int_equal(atomic_load(&st->executions), 7);
  assert_int_equal(atomic_load(&st->rows_executed), 17);
  /* the instance timed each run; runs of 3 rows are of its planned batch */
  pr_plan_t *p = malloc(sizeof *p);
  pr_sched_instance_t inst[1];
  assert_int_equal(pr__sched_instances(s, p, inst, 1), 1);
  assert_int_equal(p->instances[0].batch, 3);
  free(p);
  assert_int_equal(inst[0].runs, 7);
  assert_int_equal(inst[0].rows, 17);
  assert_true(inst[0].full_ms > 0 && inst[0].any_ms > 0);
  pr__sched_destroy(s);
  pr_engine_model_destroy(m);
}

/* x[batch, 64, 56, 56] -> Conv 3x3 whose kernel is the identity (1 at each
 * channel's own centre tap) -> y = x: a run costs about the same a row at
 * any batch (milliseconds of compute a row), as a large model does. */
static pr_model_t *conv_model(void) {
  const int64_t xd[4] = {-1, 64, 56, 56}, wd[4] = {64, 64, 3, 3};
  static float w[64 * 64 * 9];
  memset(w, 0, sizeof w);
  for (int c = 0; c < 64; c++) w[(c * 64 + c) * 9 + 4] = 1;
  mb_t *b = mb_new(13);
  mb_input(b, "x", PR_DTYPE_FLOAT, 4, xd);
  mb_init(b, "w", PR_DTYPE_FLOAT, 4, wd, w, sizeof w);
  int n = mb_node(b, "Conv", "conv", (const char *[]){"x", "w", NULL}, (const char *[]){"y", NULL});
  mb_attr_ints(b, n, "pads", 4, (const int64_t[]){1, 1, 1, 1});
  mb_output(b, "y");
  char err[256];
  pr_model_t *m = mb_load(b, err, sizeof err);
  if (!m) fail_msg("%s", err);
  return m;
}

#define CONV_ROW (64 * 56 * 56)

static pr_request_t *conv_request(int rows, float tag) {
  pr_request_t *r = pr__request_new();
  r->rows = rows;
  pr_tensor_t *t = &r->inputs[0];
  *t = (pr_tensor_t){.dtype = PR_DTYPE_FLOAT, .rank = 4, .dims = {rows, 64, 56, 56}};
  t->data = malloc(sizeof(float) * CONV_ROW * (size_t)rows);
  for (size_t k = 0; k < (size_t)CONV_ROW * (size_t)rows; k++)
    ((float *)t->data)[k] = tag + (float)(k % 1000);
  return r;
}

static void check_conv_answer(pr_request_t *r) {
  assert_int_equal(r->status, PR_OK);
  assert_int_equal(r->outputs[0].dims[0], r->rows);
  assert_memory_equal(r->outputs[0].data, r->inputs[0].data,
                      sizeof(float) * CONV_ROW * (size_t)r->rows);
}

/* A batch between two prepared sizes runs in parts when padding would
 * cost more (pr_plan_next_chunk): on one instance of batch 8 whose runs
 * cost about the same a row (a run of 8 about 8 of 1), once each size has
 * been timed, a request of 5 rows runs in parts, none of them padded to 8,
 * and of five one-row requests batched together only those of the first
 * run are taken: the rest go back to the queue, and are taken once those
 * are answered. Every answer is its own input. */
static void test_batch_runs_in_parts(void **state) {
  (void)state;
  pr_model_t *m = conv_model();
  pr_sched_config_t cfg = {.max_batch = 8, .queue_capacity = 16, .max_queue_delay_s = 0.05};
  pr_sched_t *s = plan_sched(m, "1x8", &cfg);
  pr_sched_stats_t *st = pr__sched_stats(s);
  /* each size timed four times (a size's first run is not) */
  for (int rep = 0; rep < 5; rep++)
    for (int rows = 1; rows <= 8; rows *= 2) {
      pr_request_t *r = conv_request(rows, (float)rows);
      assert_int_equal(pr__sched_submit(s, r), PR_OK);
      pr__sched_wait(s, r);
      check_conv_answer(r);
      pr__request_free(r);
    }
  assert_int_equal(atomic_load(&st->executions), 20);
  assert_int_equal(atomic_load(&st->by_batch[8].count), 5);
  pr_request_t *r = conv_request(5, 0.5f);
  assert_int_equal(pr__sched_submit(s, r), PR_OK);
  pr__sched_wait(s, r);
  check_conv_answer(r);
  pr__request_free(r);
  assert_true(atomic_load(&st->executions) >= 22);
  assert_int_equal(atomic_load(&st->rows_executed), 5 * 15 + 5);
  assert_int_equal(atomic_load(&st->by_batch[8].count), 5);
  assert_int_equal(atomic_load(&st->by_batch[5].count), 0);
  uint64_t runs = atomic_load(&st->executions);
  pr_request_t *five[5];
  for (int i = 0; i < 5; i++) {
    five[i] = conv_request(1, (float)(i * 1000));
    assert_int_equal(pr__sched_submit(s, five[i]), PR_OK);
  }
  for (int i = 0; i < 5; i++) {
    pr__sched_wait(s, five[i]);
    check_conv_answer(five[i]);
  }
  assert_true(atomic_load(&st->executions) >= runs + 2);
  assert_int_equal(atomic_load(&st->by_batch[8].count), 5);
  /* the first run holds the first request (the oldest); the last request
   * was put back and taken after it was answered (with whatever came
   * meanwhile: late binding) */
  assert_true(five[0]->t_end < five[4]->t_end);
  assert_true(five[0]->t_end <= five[4]->t_start);
  for (int i = 0; i < 5; i++) pr__request_free(five[i]);
  pr__sched_destroy(s);
  pr_engine_model_destroy(m);
}

static void count_done(void *ctx) {
  atomic_fetch_add((_Atomic int *)ctx, 1);
}

/* Requests queued behind a long one on a single instance: those taken out
 * are completed PR_ERR_CANCELLED without running (the runs count says so),
 * once each (on_done), and counted; the rest are answered. A request an
 * instance has taken or answered cannot be taken out. */
static void test_cancel_queued(void **state) {
  (void)state;
  pr_model_t *m = conv_model();
  pr_sched_config_t cfg = {.max_batch = 16, .queue_capacity = 16, .max_queue_delay_s = 0.0001};
  pr_sched_t *s = plan_sched(m, "1x1", &cfg);
  pr_sched_stats_t *st = pr__sched_stats(s);
  _Atomic int dones = 0;
  pr_request_t *big = conv_request(16, 0.25f), *q[6];
  big->on_done = count_done, big->on_done_ctx = &dones;
  assert_int_equal(pr__sched_submit(s, big), PR_OK);
  for (int i = 0; i < 6; i++) {
    q[i] = conv_request(1, (float)(i * 1000));
    q[i]->on_done = count_done, q[i]->on_done_ctx = &dones;
    assert_int_equal(pr__sched_submit(s, q[i]), PR_OK);
  }
  /* the last ones first: they wait behind the others whatever the
   * instance has taken meanwhile (16 runs of one row for the big one) */
  for (int i = 5; i >= 1; i -= 2) {
    assert_true(pr__sched_unqueue(s, q[i]));
    assert_false(pr__sched_unqueue(s, q[i])); /* out already */
    pr__sched_cancel(s, q[i]);
    assert_true(q[i]->done);
    assert_int_equal(q[i]->status, PR_ERR_CANCELLED);
    assert_null(q[i]->outputs[0].data);
  }
  assert_int_equal(atomic_load(&st->cancelled), 3);
  pr__sched_wait(s, big);
  check_conv_answer(big);
  for (int i = 0; i < 6; i += 2) {
    pr__sched_wait(s, q[i]);
    check_conv_answer(q[i]);
    assert_false(pr__sched_unqueue(s, q[i])); /* answered */
  }
  assert_int_equal(atomic_load(&st->executions), 16 + 3);
  assert_int_equal(atomic_load(&st->success), 4);
  assert_int_equal(pr__sched_queue_depth(s), 0);
  /* a waiter wakes once its request is done, and on_done runs after that
   * on the thread that completed it: counted once the workers are joined */
  pr__sched_destroy(s);
  assert_int_equal(atomic_load(&dones), 7);
  pr__request_free(big);
  for (int i = 0; i < 6; i++) pr__request_free(q[i]);
  pr_engine_model_destroy(m);
}

/* A request an instance has taken while it waits to fill its batch
 * (max_queue_delay) leaves unrun when its client goes away; one whose
 * client stays is run as usual. */
static void test_drop_while_filling(void **state) {
  (void)state;
  pr_model_t *m = conv_model();
  pr_sched_config_t cfg = {.max_batch = 4, .queue_capacity = 16, .max_queue_delay_s = 0.6};
  pr_sched_t *s = plan_sched(m, "1x4", &cfg);
  pr_sched_stats_t *st = pr__sched_stats(s);
  _Atomic int dones = 0;
  pr_request_t *a = conv_request(1, 0.5f), *b = conv_request(1, 2.0f);
  a->on_done = count_done, a->on_done_ctx = &dones;
  b->on_done = count_done, b->on_done_ctx = &dones;
  assert_int_equal(pr__sched_submit(s, a), PR_OK);
  assert_int_equal(pr__sched_submit(s, b), PR_OK);
  /* the instance takes both and waits up to 0.6 s for two more rows */
  for (int i = 0; i < 200 && pr__sched_queue_depth(s) > 0; i++) usleep(1000);
  assert_int_equal(pr__sched_queue_depth(s), 0);
  assert_false(pr__sched_drop(s, a)); /* taken: marked gone */
  pr__sched_wait(s, a);
  assert_int_equal(a->status, PR_ERR_CANCELLED);
  assert_null(a->outputs[0].data);
  pr__sched_wait(s, b);
  check_conv_answer(b);
  assert_int_equal(atomic_load(&st->cancelled), 1);
  assert_int_equal(atomic_load(&st->success), 1);
  assert_int_equal(atomic_load(&st->executions), 1);
  /* answered: a drop now changes nothing */
  assert_false(pr__sched_drop(s, b));
  pr__sched_destroy(s);
  assert_int_equal(atomic_load(&dones), 2);
  pr__request_free(a);
  pr__request_free(b);
  pr_engine_model_destroy(m);
}

typedef struct {
  pr_sched_t *s;
  pr_request_t **reqs;
  int n;
  _Atomic int *submitted;
  int cancelled;
} canceller_t;

/* Takes out every other request as soon as it is submitted. */
static void *canceller_main(void *arg) {
  canceller_t *c = arg;
  for (int i = 1; i < c->n; i += 2) {
    while (atomic_load(c->submitted) <= i) sched_yield();
    if (pr__sched_unqueue(c->s, c->reqs[i])) {
      pr__sched_cancel(c->s, c->reqs[i]);
      c->cancelled++;
    }
  }
  return NULL;
}

/* A canceller racing two instances: every request completes exactly once,
 * answered (its rows negated) or cancelled unrun, and the counts add up. */
static void test_cancel_races_instances(void **state) {
  (void)state;
  pr_model_t *m = neg_model();
  enum { N = 2000 };
  pr_sched_config_t cfg = {.max_batch = 4, .queue_capacity = N, .max_queue_delay_s = 0.0002};
  int cpus[256];
  int n_cpus = pr__topology_cpu_order(cpus, 256);
  pr_sched_t *s = plan_sched(m, n_cpus >= 2 ? "1x4,1x4" : "1x4", &cfg);
  pr_request_t **reqs = calloc(N, sizeof *reqs);
  _Atomic int dones = 0, submitted = 0;
  canceller_t c = {.s = s, .reqs = reqs, .n = N, .submitted = &submitted};
  for (int i = 0; i < N; i++) {
    reqs[i] = pr__request_new();
    reqs[i]->rows = 1;
    reqs[i]->inputs[0] = (pr_tensor_t){.dtype = PR_DTYPE_FLOAT, .rank = 2, .dims = {1, 4}};
    reqs[i]->inputs[0].data = malloc(4 * sizeof(float));
    for (int k = 0; k < 4; k++) ((float *)reqs[i]->inputs[0].data)[k] = (float)(i + k);
    reqs[i]->on_done = count_done, reqs[i]->on_done_ctx = &dones;
  }
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, canceller_main, &c), 0);
  for (int i = 0; i < N; i++) {
    assert_int_equal(pr__sched_submit(s, reqs[i]), PR_OK);
    atomic_store(&submitted, i + 1);
  }
  pthread_join(t, NULL);
  int ok = 0, cancelled = 0;
  for (int i = 0; i < N; i++) {
    pr__sched_wait(s, reqs[i]);
    if (reqs[i]->status == PR_ERR_CANCELLED) {
      assert_true(i % 2 == 1);
      cancelled++;
      continue;
    }
    assert_int_equal(reqs[i]->status, PR_OK);
    for (int k = 0; k < 4; k++)
      assert_true(((float *)reqs[i]->outputs[0].data)[k] == -(float)(i + k));
    ok++;
  }
  pr_sched_stats_t *st = pr__sched_stats(s);
  assert_int_equal(cancelled, c.cancelled);
  assert_int_equal(ok + cancelled, N);
  assert_int_equal(atomic_load(&st->cancelled), (uint64_t)cancelled);
  assert_int_equal(atomic_load(&st->success), (uint64_t)ok);
  assert_int_equal(atomic_load(&st->rows_executed), (uint64_t)ok);
  pr__sched_destroy(s); /* joins the workers, whose on_done calls come after the waits */
  assert_int_equal(atomic_load(&dones), N);
  for (int i = 0; i < N; i++) pr__request_free(reqs[i]);
  free(reqs);
  pr_engine_model_destroy(m);
}

/* x[batch, d1, 4] -> Neg: d1 is sized by each request. */
static pr_model_t *neg_seq_model(void) {
  const int64_t xd[3] = {-1, -1, 4};
  char err[256];
  pr_model_t *m = mb_neg_model(3, xd, err, sizeof err);
  if (!m) fail_msg("%s", err);
  return m;
}

/* A request of `rows` rows of length len (not submitted). */
static pr_request_t *seq_request(int rows, int len) {
  pr_request_t *r = pr__request_new();
  r->rows = rows;
  pr_tensor_t *t = &r->inputs[0];
  *t = (pr_tensor_t){.dtype = PR_DTYPE_FLOAT, .rank = 3, .dims = {rows, len, 4}};
  t->data = malloc(sizeof(float) * 4 * (size_t)(rows * len));
  for (int k = 0; k < 4 * rows * len; k++) ((float *)t->data)[k] = (float)(k + len);
  return r;
}

static void check_seq_answer(pr_request_t *r) {
  const pr_tensor_t *in = &r->inputs[0], *out = &r->outputs[0];
  assert_int_equal(r->status, PR_OK);
  assert_int_equal(out->rank, 3);
  for (int d = 0; d < 3; d++) assert_int_equal(out->dims[d], in->dims[d]);
  for (int64_t k = 0; k < pr_tensor_numel(in); k++)
    assert_true(((float *)out->data)[k] == -((float *)in->data)[k]);
}

/* Requests of different shapes are never batched together: with one
 * instance of batch 4 and a long queue delay, lengths 2, 5, 2, 5, 3 queued
 * at once run as three batches ([2, 2], [5, 5], [3]) in the order of their
 * first requests (the head decides each batch: none starves); the prepared
 * length (3) runs on the prepared sessions, the others on the instance's
 * cache (2 sessions: a third shape evicts the least recently used). */
static void test_batches_group_shapes(void **state) {
  pr_model_t *m = neg_seq_model();
  int cpus[256];
  int n_cpus = pr__topology_cpu_order(cpus, 256);
  char err[512];
  pr_plan_t plan;
  assert_int_equal(pr_plan_parse("1x4", NULL, &plan, err, sizeof err), PR_OK);
  pr_sched_config_t cfg = {.max_batch = 4,
                           .queue_capacity = 16,
                           .max_queue_delay_s = 0.3,
                           .n_dyn = 1,
                           .dyn = {{"d1", 0, 1}},
                           .cache_sessions = 2,
                           .cache_bytes = 1 << 30};
  pr_session_options_t base = pr_session_options_default();
  const char *names[1] = {"d1"};
  int64_t values[1] = {3};
  base.n_dims = 1, base.dim_names = names, base.dim_values = values;
  pr_sched_t *s;
  if (pr__sched_create(m, &plan, NULL, 1, 0, cpus, n_cpus, &base, &cfg, &s, err, sizeof err))
    fail_msg("%s", err);
  static const int lens[5] = {2, 5, 2, 5, 3}, rows[5] = {1, 1, 1, 2, 1};
  pr_request_t *r[5];
  for (int i = 0; i < 5; i++)
    assert_int_equal(pr__sched_submit(s, r[i] = seq_request(rows[i], lens[i])), PR_OK);
  for (int i = 0; i < 5; i++) pr__sched_wait(s, r[i]);
  for (int i = 0; i < 5; i++) check_seq_answer(r[i]);
  pr_sched_stats_t *st = pr__sched_stats(s);
  assert_int_equal(atomic_load(&st->executions), 3);
  assert_true(r[0]->t_start == r[2]->t_start && r[1]->t_start == r[3]->t_start);
  assert_true(r[0]->t_start < r[1]->t_start && r[1]->t_start < r[4]->t_start);
  pr_sched_shape_t shapes[PR_SCHED_MAX_SHAPES];
  uint64_t other;
  assert_int_equal(pr__sched_shapes(s, shapes, PR_SCHED_MAX_SHAPES, &other), 3);
  static const int64_t want_len[3] = {2, 5, 3};
  static const uint64_t want_rows[3] = {2, 3, 1}, want_reqs[3] = {2, 2, 1};
  for (int i = 0; i < 3; i++) {
    assert_int_equal(shapes[i].values[0], want_len[i]);
    assert_int_equal(shapes[i].requests, want_reqs[i]);
    assert_int_equal(shapes[i].rows, want_rows[i]);
    assert_int_equal(shapes[i].batches, 1);
  }
  assert_int_equal(other, 0);
  assert_int_equal(atomic_load(&st->cache.misses), 2); /* [2 rows x 2], [4 rows x 5] */
  assert_int_equal(atomic_load(&st->cache.evictions), 0);
  for (int i = 0; i < 5; i++) pr__request_free(r[i]);
  pr_request_t *x = seq_request(2, 2); /* cached */
  assert_int_equal(pr__sched_submit(s, x), PR_OK);
  pr__sched_wait(s, x);
  check_seq_answer(x);
  pr__request_free(x);
  assert_int_equal(atomic_load(&st->cache.hits), 1);
  x = seq_request(1, 7); /* a third shape: the least recently used (5) goes */
  assert_int_equal(pr__sched_submit(s, x), PR_OK);
  pr__sched_wait(s, x);
  check_seq_answer(x);
  pr__request_free(x);
  assert_int_equal(atomic_load(&st->cache.misses), 3);
  assert_int_equal(atomic_load(&st->cache.evictions), 1);
  assert_int_equal(atomic_load(&st->compile_s.count), 3);
  pr__sched_destroy(s);
  pr_engine_model_destroy(m);
}

/* Shape buckets: the same plan at two buckets (4 and 16) is two configs,
 * each prepared at its bucket's size: a length-4 request misses the cache
 * while bucket 16's config is live and runs on the prepared sessions once
 * bucket 4's is; requests are counted per bucket. */
static void test_bucket_configs(void **state) {
  pr_model_t *m = neg_seq_model();
  int cpus[256];
  int n_cpus = pr__topology_cpu_order(cpus, 256);
  char err[512];
  pr_plan_t plans[2];
  for (int i = 0; i < 2; i++) {
    assert_int_equal(pr_plan_parse("1x2", NULL, &plans[i], err, sizeof err), PR_OK);
    plans[i].latency_ms = 1; /* planned: the autoscaler's */
  }
  const int buckets[2] = {0, 1};
  pr_sched_config_t cfg = {.max_batch = 2,
                           .queue_capacity = 16,
                           .n_dyn = 1,
                           .dyn = {{"d1", 0, 1}},
                           .dyn_of = {{0, 1}},
                           .cache_sessions = 4,
                           .cache_bytes = 1 << 30,
                           .n_buckets = 2,
                           .bucket_sizes = {4, 16}};
  pr_session_options_t base = pr_session_options_default();
  const char *names[1] = {"d1"};
  int64_t values[1] = {16};
  base.n_dims = 1, base.dim_names = names, base.dim_values = values;
  pr_sched_t *s;
  if (pr__sched_create(m, plans, buckets, 2, 1, cpus, n_cpus, &base, &cfg, &s, err, sizeof err))
    fail_msg("%s", err);
  pr_plan_t snap[4];
  long long sizes[4];
  int active;
  assert_int_equal(pr__sched_snapshot(s, snap, sizes, 4, &active), 2);
  assert_true(sizes[0] == 4 && sizes[1] == 16 && active == 1);
  const pr_sched_dim_t *dim;
  const long long *bs;
  assert_int_equal(pr__sched_buckets(s, &dim, &bs), 2);
  assert_string_equal(dim->name, "d1");
  static const int lens[4] = {4, 4, 16, 9};
  static const uint64_t misses[4] = {1, 1, 2, 3};
  pr_sched_stats_t *st = pr__sched_stats(s);
  for (int i = 0; i < 4; i++) {
    if (i == 1) assert_int_equal(pr__sched_switch(s, 0, "bucket 4"), PR_OK);
    pr_request_t *x = seq_request(1, lens[i]);
    assert_int_equal(pr__sched_submit(s, x), PR_OK);
    pr__sched_wait(s, x);
    check_seq_answer(x);
    pr__request_free(x);
    assert_int_equal(atomic_load(&st->cache.misses), misses[i]);
  }
  assert_int_equal(atomic_load(&st->cache.hits), 0);
  assert_int_equal(atomic_load(&st->bucket_arrivals[0]), 2);
  assert_int_equal(atomic_load(&st->bucket_arrivals[1]), 2); /* 16 and 9 */
  pr__sched_destroy(s);
  pr_engine_model_destroy(m);
}

/* The autoscaler compares plans by what they serve: once every instance of
 * a plan has run a whole planned batch, its measured pass replaces the
 * profile's latency. Two plans planned at 10 ns a batch (1e8 requests a
 * second): after batch-1 requests on the 1x1 plan, the autoscaler's target
 * capacity is what that plan measured (a pass of the tiny model takes
 * about a microsecond), a tenth of the planned rate or less. */
static void test_autoscaler_capacity_measured(void **state) {
  pr_model_t *m = neg_model();
  int cpus[256];
  int n_cpus = pr__topology_cpu_order(cpus, 256);
  char err[512];
  pr_plan_t plans[2];
  const char *specs[2] = {"1x1", "1x2"};
  for (int i = 0; i < 2; i++) {
    assert_int_equal(pr_plan_parse(specs[i], NULL, &plans[i], err, sizeof err), PR_OK);
    plans[i].latency_ms = 1e-5;
  }
  pr_sched_config_t cfg = {.max_batch = 2, .queue_capacity = 8, .max_queue_delay_s = 0.0001};
  pr_session_options_t base = pr_session_options_default();
  pr_sched_t *s;
  if (pr__sched_create(m, plans, NULL, 2, 0, cpus, n_cpus, &base, &cfg, &s, err, sizeof err))
    fail_msg("%s", err);
  for (int i = 0; i < 20; i++) run_one(s, 1); /* the live plan: 1x1 */
  pr_sched_stats_t *st = pr__sched_stats(s);
  assert_int_equal(pr__sched_set_auto(s, true, 1, 0.05), PR_OK);
  double capacity = 0;
  for (int i = 0; i < 100 && capacity == 0; i++) {
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    if (atomic_load(&st->auto_target) == 1)
      capacity = (double)atomic_load(&st->auto_capacity_milli) * 1e-3;
  }
  assert_int_equal(pr__sched_set_auto(s, false, 1, 0), PR_OK);
  if (!(capacity > 0 && capacity < 1e7))
    fail_msg("target capacity %g requests/s: the planned 1e8, not the measured", capacity);
  pr__sched_destroy(s);
  pr_engine_model_destroy(m);
}

/* The core of a waiting instance (pr__sched_home_cpu), where the HTTP
 * thread goes before it hands a request over: each instance's own first
 * core while it waits, asked from there; another waiting one's from
 * elsewhere; none of the busy one's, and -1 while every instance is busy. */
static bool home_is(pr_sched_t *s, int from, int want) {
  for (double t0 = pr__now(); pr__now() - t0 < 10; usleep(1000))
    if (pr__sched_home_cpu(s, from) == want) return true;
  return false;
}

static void test_home_cpu(void **state) {
  pr_model_t *m = neg_model();
  int cpus[256];
  int n = pr__topology_cpu_order(cpus, 256) > 1 ? 2 : 1;
  pr_sched_t *s = one_plan_sched(m, n == 2 ? "1x1,1x1" : "1x1", 1);
  for (int k = 0; k < n; k++) assert_true(home_is(s, cpus[k], cpus[k]));
  int any = pr__sched_home_cpu(s, -1);
  assert_true(any == cpus[0] || any == cpus[n - 1]);
  /* a request of many rows keeps one instance busy (rows run one a pass) */
  const int rows = 200000;
  pr_request_t *r = pr__request_new();
  r->rows = rows;
  r->inputs[0] = (pr_tensor_t){.dtype = PR_DTYPE_FLOAT, .rank = 2, .dims = {rows, 4}};
  r->inputs[0].data = calloc((size_t)rows * 4, sizeof(float));
  assert_int_equal(pr__sched_submit(s, r), PR_OK);
  int seen = 0; /* polls that found the busy instance's core left out */
  for (;;) {
    pthread_mutex_lock(&r->lock);
    bool done = r->done;
    pthread_mutex_unlock(&r->lock);
    if (done) break;
    int h0 = pr__sched_home_cpu(s, cpus[0]), h1 = pr__sched_home_cpu(s, cpus[n - 1]);
    if (n == 1 ? h0 == -1 : (h0 == h1 && h0 >= 0)) seen++;
  }
  pr__sched_wait(s, r);
  assert_int_equal(r->status, PR_OK);
  assert_true(seen > 0);
  pr__request_free(r);
  for (int k = 0; k < n; k++) assert_true(home_is(s, cpus[k], cpus[k])); /* waiting again */
  pr__sched_destroy(s);
  pr_engine_model_destroy(m);
}

/* Threads of this process pinned to cpu alone (Cpus_allowed_list "cpu"). */
static int pinned_alone(int cpu) {
  char want[32], path[64], line[256];
  snprintf(want, sizeof want, "%d", cpu);
  int n = 0;
  char cmd[64];
  snprintf(cmd, sizeof cmd, "ls /proc/%d/task", (int)getpid()); /* (popen's self is ls) */
  FILE *ls = popen(cmd, "r");
  int tid;
  while (ls && fscanf(ls, "%d", &tid) == 1) {
    snprintf(path, sizeof path, "/proc/%d/task/%d/status", (int)getpid(), tid);
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f))
      if (!strncmp(line, "Cpus_allowed_list:", 18)) {
        char *v = line + 18;
        while (*v == ' ' || *v == '\t') v++;
        v[strcspn(v, "\n")] = 0;
        n += !strcmp(v, want);
      }
    if (f) fclose(f);
  }
  if (ls) pclose(ls);
  return n;
}

/* CPU seconds this process spends over `seconds` of idling (after 0.1 s
 * for the teams' spin-wait after their last region to end). */
static double idle_cpu_s(double seconds) {
  struct timespec settle = {0, 100 * 1000 * 1000};
  nanosleep(&settle, NULL);
  struct timespec a, b;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
  usleep((useconds_t)(seconds * 1e6));
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
  return (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
}

static bool pinned_becomes(int cpu, int want) {
  for (double t0 = pr__now(); pr__now() - t0 < 10; usleep(1000))
    if (pinned_alone(cpu) == want) return true;
  return false;
}

/* An instance whose plan is not live gives its OpenMP team's threads back
 * (libgomp throttles every team's spin while teams outnumber the CPUs),
 * and starts them again, each pinned to its core, when its plan is live
 * again: plan 0 is one 2-thread instance (its second thread alone on the
 * second core), plan 1 two 1-thread instances (one alone there). */
static void test_idle_plan_parks(void **state) {
  int cpus[256];
  if (pr__topology_cpu_order(cpus, 256) < 2) skip(); /* one core: no team of two */
  pr_model_t *m = neg_model();
  pr_plan_t plans[2];
  char err[512];
  assert_int_equal(pr_plan_parse("2x1", NULL, &plans[0], err, sizeof err), PR_OK);
  assert_int_equal(pr_plan_parse("1x1,1x1", NULL, &plans[1], err, sizeof err), PR_OK);
  pr_sched_config_t cfg = {.max_batch = 1, .queue_capacity = 8, .max_queue_delay_s = 0.0001};
  pr_session_options_t base = pr_session_options_default();
  pr_sched_t *s;
  if (pr__sched_create(m, plans, NULL, 2, 0, cpus, 2, &base, &cfg, &s, err, sizeof err))
    fail_msg("%s", err);
#ifdef PR_SERIAL_OMP
  const int team = 0; /* (the ThreadSanitizer build: one-thread teams) */
#else
  const int team = 1;
#endif
  run_one(s, 1);
  assert_true(pinned_becomes(cpus[1], 1 + team)); /* plan 1's instance, the team's thread */
  /* the idle plan's one-thread instances sleep (they spun once) */
  assert_true(idle_cpu_s(0.5) < 0.1);
  for (int round = 0; round < 2; round++) {
    assert_int_equal(pr__sched_switch(s, 1, "test"), PR_OK);
    run_one(s, 1);
    assert_true(pinned_becomes(cpus[1], 1)); /* the team's thread is gone */
    assert_true(idle_cpu_s(0.5) < 0.1);
    assert_int_equal(pr__sched_switch(s, 0, "test"), PR_OK);
    run_one(s, 1);
    assert_true(pinned_becomes(cpus[1], 1 + team)); /* back, on its core */
  }
  pr__sched_destroy(s);
  pr_engine_model_destroy(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_switch_under_submits),
                                     cmocka_unit_test(test_replan_under_submits),
                                     cmocka_unit_test(test_larger_request_runs_in_chunks),
                                     cmocka_unit_test(test_batch_runs_in_parts),
                                     cmocka_unit_test(test_cancel_queued),
                                     cmocka_unit_test(test_drop_while_filling),
                                     cmocka_unit_test(test_cancel_races_instances),
                                     cmocka_unit_test(test_first_pass_not_measured),
                                     cmocka_unit_test(test_inputs_read_in_place_or_copied),
                                     cmocka_unit_test(test_batches_group_shapes),
                                     cmocka_unit_test(test_bucket_configs),
                                     cmocka_unit_test(test_autoscaler_capacity_measured),
                                     cmocka_unit_test(test_home_cpu),
                                     cmocka_unit_test(test_idle_plan_parks)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
