/* The pinned worker: one thread pinned to its CPUs, its OpenMP team of
 * `threads` threads, and the engine sessions it compiled there, one per batch
 * size. The one place that starts such a thread: the scheduler's instances,
 * `packrat run --plan` (runtime/instances.h) and the profiler all use it.
 *
 * Notes on the design:
 * - A oneDNN primitive keeps the OpenMP thread count in force when it was
 *   created, so a worker's sessions are compiled on the worker's own thread,
 *   after pinning (sched_setaffinity before any OpenMP region: the team
 *   inherits the mask) and setting its team size (base/omp_team.h).
 * - Threads: pr__worker_start and pr__worker_join are called by the owner;
 *   pr__worker_prepare, pr__worker_session and the sessions themselves belong
 *   to the worker's thread while it runs, and to the owner after the join.
 *   The worker shares no other state: callers synchronize the rest. */
#ifndef PR_RUNTIME_WORKER_H
#define PR_RUNTIME_WORKER_H

#include <pthread.h>
#include <stdbool.h>

#include "packrat/engine.h"

#define PR_WORKER_MAX_THREADS 1024
/* Sessions one worker may hold: powers of two up to 2^21 and two more. */
#define PR_WORKER_MAX_SIZES 24
#define PR_WORKER_MAX_IO 64

/* A session compiled for `rows` rows (the batch), with input buffers of
 * that many rows when the worker was asked for them. */
typedef struct {
  int rows;
  pr_session_t *session;
  pr_tensor_t *in; /* n_in buffers (owned), or NULL */
} pr_worker_session_t;

typedef struct pr_worker {
  int index; /* in messages */
  int threads;
  int cpus[PR_WORKER_MAX_THREADS];
  pr_model_t *model;
  /* dims other than the batch; when base.input_shapes is set, each input's
   * shape at any batch (axis 0 replaced by the rows of each session) */
  pr_session_options_t base;
  int n_in;
  pr_worker_session_t sizes[PR_WORKER_MAX_SIZES]; /* ascending rows */
  int n_sizes;
  pr_status_t status; /* of the caller's work on this worker */
  char err[512];
  bool parked; /* pr__worker_park'ed (on w's thread only, like the sessions) */
  /* private */
  pthread_t thread;
  bool running;
  void (*main)(struct pr_worker *w, void *ctx);
  void *ctx;
} pr_worker_t;

/* Sets up w (zeroed first) for `threads` threads on cpus[0..threads-1];
 * base (may be NULL: defaults) is copied, and what it points to must outlive
 * the worker. PR_ERR_INVALID for a thread count outside 1..PR_WORKER_MAX_THREADS
 * or a model with more than PR_WORKER_MAX_IO inputs. */
pr_status_t pr__worker_init(pr_worker_t *w, int index, pr_model_t *model, const int *cpus,
                            int threads, const pr_session_options_t *base, char *err,
                            size_t err_len);

/* Starts w's thread: it pins itself to w's CPUs (a warning when it cannot),
 * sets its OpenMP team to w->threads, then runs main(w, ctx).
 * PR_ERR_INTERNAL when no thread can be started. */
pr_status_t pr__worker_start(pr_worker_t *w, void (*main)(pr_worker_t *w, void *ctx), void *ctx);

/* On w's thread, while its instance has no work for a while (its plan is
 * not the live one): gives its OpenMP team's threads back to the system
 * (pr__omp_release). libgomp counts every team's threads in the process,
 * and once they outnumber the CPUs, every team's threads wait between
 * parallel regions with a 100-spin poll, then sleep: each region of the
 * live plan then pays a futex wake a thread (ResNet-50 on a 2-thread
 * instance ran 17% slower with three more plans prepared). A one-thread
 * worker has no team (libgomp's omp_pause_resource_all ends the calling
 * thread's own pool) and is only marked parked. */
void pr__worker_park(pr_worker_t *w);
/* On w's thread, before its next run after pr__worker_park: starts its team
 * again, each thread pinned to its core as at the start. */
void pr__worker_unpark(pr_worker_t *w);

/* Waits for w's thread to return (if it was started) and frees its sessions. */
void pr__worker_join(pr_worker_t *w);

/* On w's thread: compiles the session for `rows` rows unless w holds one;
 * with buffers, also zeroed input buffers of that many rows. Fails with the
 * engine's status (message in w->err) or PR_ERR_BUSY when w holds
 * PR_WORKER_MAX_SIZES sessions. */
pr_status_t pr__worker_prepare(pr_worker_t *w, int rows, bool buffers);

/* On w's thread: compiles a session for `rows` rows at the given input
 * shapes (one per input, axis 0 ignored; NULL: w's base shapes) into *out,
 * with zeroed input buffers when asked, without keeping it among w's sizes:
 * the caller owns it and frees it with pr__worker_session_free (on w's
 * thread, or after the join). Errors as pr__worker_prepare. */
pr_status_t pr__worker_compile(pr_worker_t *w, const pr_tensor_info_t *shapes, int rows,
                               bool buffers, pr_worker_session_t *out);
void pr__worker_session_free(pr_worker_t *w, pr_worker_session_t *z);

/* Prepares 1, 2, 4, ... below batch, and batch itself (with buffers). */
pr_status_t pr__worker_prepare_up_to(pr_worker_t *w, int batch, bool buffers);

/* The session of the smallest prepared size >= rows, or NULL when rows is
 * larger than every prepared size. */
pr_worker_session_t *pr__worker_session(pr_worker_t *w, int rows);

/* The largest prepared session, or NULL when none. */
pr_worker_session_t *pr__worker_largest(pr_worker_t *w);

/* Fills z's float input buffers with small valid values (zeros elsewhere are
 * valid indices): inputs for timing a session. */
void pr__worker_fill_inputs(pr_worker_t *w, pr_worker_session_t *z);

/* Bytes of one row (axis 0) of t. */
size_t pr__worker_row_bytes(const pr_tensor_t *t);

#endif
