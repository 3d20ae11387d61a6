/* A request to a scheduler (scheduler.h): its inputs, its outputs once
 * done, its status, and how its submitter learns that it is done (wait, or
 * a callback). The front ends make and free requests; a scheduler fills
 * them. */
#ifndef PR_SCHED_REQUEST_H
#define PR_SCHED_REQUEST_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "packrat/engine.h"

/* A request's status beside the engine's (packrat/engine.h) and the front
 * end's (server/status.h): the client went away before it ran (HTTP 499,
 * gRPC CANCELLED). */
#define PR_ERR_CANCELLED (-105)

#define PR_SCHED_MAX_IO 32

typedef struct pr_request {
  int rows;                             /* batch dimension of this request's inputs */
  pr_tensor_t inputs[PR_SCHED_MAX_IO];  /* owned */
  pr_tensor_t outputs[PR_SCHED_MAX_IO]; /* owned, filled on success */
  /* bit k: inputs[k].data is borrowed (a view into a buffer its submitter
   * keeps until the request is freed; read only, any alignment), not freed */
  unsigned borrowed;
  /* PR_ERR_TIMEOUT, PR_ERR_BUSY (unloaded), PR_ERR_CANCELLED, others: the engine's */
  pr_status_t status;
  char err[256];
  double t_enqueue, t_start, t_end, deadline;
  double compute_s; /* the session runs of its batch, all chunks (set when done) */
  /* set before submitting: the queue's priority level (1 is served first;
   * 0: the model's default level) and this request's own queue timeout
   * (0: the model's; the earlier of the two applies) */
  int priority;
  double timeout_s;
  /* set by a refused submit (PR_ERR_BUSY): when a retry may be served, in
   * seconds from now (the Retry-After an HTTP answer carries) */
  double retry_after_s;
  bool done;
  /* its client went away after an instance took it (pr__sched_drop): if
   * its batch has not begun to run, the instance completes it
   * PR_ERR_CANCELLED instead of running it */
  _Atomic bool gone;
  /* optional: called once when the request is done (answered, failed or
   * timed out), from the thread that finished it, after which the
   * scheduler no longer touches the request; set before submitting */
  void (*on_done)(void *ctx);
  void *on_done_ctx;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  struct pr_request *next;
} pr_request_t;

pr_request_t *pr__request_new(void);
void pr__request_free(pr_request_t *r);
/* Waits for r to complete. */
void pr__request_wait(pr_request_t *r);

#endif
