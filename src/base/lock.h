/* A mutex that knows its owner in Debug builds, so that code can assert
 * "this lock is held by me" (SQLite's sqlite3_mutex_held), and a rwlock that
 * knows its writer and counts its readers. In NDEBUG builds they are plain
 * pthread locks and the checks compile away.
 *
 * The owner fields are written only by the thread that holds the mutex
 * (right after taking it, right before giving it up, around condition
 * waits), so reading them while holding it is race-free. The rwlock's
 * writer fields likewise, under the write lock; its reader count is atomic
 * (a reader is "someone holds it for reading", not "I do"). */
#ifndef PR_BASE_LOCK_H
#define PR_BASE_LOCK_H

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

typedef struct {
  pthread_mutex_t m;
#ifndef NDEBUG
  pthread_t owner;
  bool held;
#endif
} pr_lock_t;

static inline void pr__lock_init(pr_lock_t *l) {
  pthread_mutex_init(&l->m, NULL);
#ifndef NDEBUG
  l->held = false;
#endif
}

static inline void pr__lock_destroy(pr_lock_t *l) {
  pthread_mutex_destroy(&l->m);
}

static inline void pr_lock__mine(pr_lock_t *l) {
#ifndef NDEBUG
  l->owner = pthread_self();
  l->held = true;
#else
  (void)l;
#endif
}

static inline void pr_lock__release(pr_lock_t *l) {
#ifndef NDEBUG
  assert(l->held && pthread_equal(l->owner, pthread_self()));
  l->held = false;
#else
  (void)l;
#endif
}

static inline void pr__lock(pr_lock_t *l) {
  pthread_mutex_lock(&l->m);
  pr_lock__mine(l);
}

static inline void pr__unlock(pr_lock_t *l) {
  pr_lock__release(l);
  pthread_mutex_unlock(&l->m);
}

/* True when the calling thread holds l (always true in NDEBUG builds: for
 * assert only). */
static inline bool pr__lock_held(pr_lock_t *l) {
#ifndef NDEBUG
  return l->held && pthread_equal(l->owner, pthread_self());
#else
  (void)l;
  return true;
#endif
}

static inline void pr__lock_wait(pr_lock_t *l, pthread_cond_t *c) {
  pr_lock__release(l);
  pthread_cond_wait(c, &l->m);
  pr_lock__mine(l);
}

/* Returns pthread_cond_timedwait's result (ETIMEDOUT when `until` passed). */
static inline int pr__lock_timedwait(pr_lock_t *l, pthread_cond_t *c,
                                     const struct timespec *until) {
  pr_lock__release(l);
  int rc = pthread_cond_timedwait(c, &l->m, until);
  pr_lock__mine(l);
  return rc;
}

typedef struct {
  pthread_rwlock_t rw;
#ifndef NDEBUG
  pthread_t writer;
  bool write_held;
  atomic_int readers;
#endif
} pr_rwlock_t;

static inline void pr__rwlock_init(pr_rwlock_t *l) {
  pthread_rwlock_init(&l->rw, NULL);
#ifndef NDEBUG
  l->write_held = false;
  atomic_init(&l->readers, 0);
#endif
}

static inline void pr__rwlock_destroy(pr_rwlock_t *l) {
  pthread_rwlock_destroy(&l->rw);
}

static inline void pr__rwlock_rdlock(pr_rwlock_t *l) {
  pthread_rwlock_rdlock(&l->rw);
#ifndef NDEBUG
  atomic_fetch_add(&l->readers, 1);
#endif
}

static inline void pr__rwlock_wrlock(pr_rwlock_t *l) {
  pthread_rwlock_wrlock(&l->rw);
#ifndef NDEBUG
  l->writer = pthread_self();
  l->write_held = true;
#endif
}

/* True when the calling thread holds l for writing (true in NDEBUG builds:
 * for assert only). */
static inline bool pr__rwlock_write_held(pr_rwlock_t *l) {
#ifndef NDEBUG
  return l->write_held && pthread_equal(l->writer, pthread_self());
#else
  (void)l;
  return true;
#endif
}

/* True when the calling thread holds l for writing or some thread holds it
 * for reading (true in NDEBUG builds: for assert only, by a thread that
 * claims to hold l). */
static inline bool pr__rwlock_held(pr_rwlock_t *l) {
#ifndef NDEBUG
  return pr__rwlock_write_held(l) || atomic_load(&l->readers) > 0;
#else
  (void)l;
  return true;
#endif
}

static inline void pr__rwlock_unlock(pr_rwlock_t *l) {
#ifndef NDEBUG
  if (pr__rwlock_write_held(l)) {
    l->write_held = false;
  } else {
    int was = atomic_fetch_sub(&l->readers, 1);
    assert(was > 0);
    (void)was;
  }
#endif
  pthread_rwlock_unlock(&l->rw);
}

#endif
