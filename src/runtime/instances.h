/* Instances running one batch together (`packrat run --plan`): one pinned
 * worker (runtime/worker.h) per instance, each with its own engine session
 * (t threads, batch b) sharing the model's weights. A batch of B rows (axis
 * 0 of every input) is split into the instances' sub-batches in order, run
 * concurrently, and the outputs gathered in order.
 *
 * The runtime sits below the planner: an instance list comes in as
 * pr_instance_spec_t (a plan's instances carry the same three numbers).
 *
 * Threads: pr__instances_run is called by one thread at a time; it hands each
 * instance its slice under the executor's lock and waits for all of them. */
#ifndef PR_RUNTIME_INSTANCES_H
#define PR_RUNTIME_INSTANCES_H

#include "packrat/engine.h"

typedef struct {
  int threads, batch;
  int first_core; /* index into the CPU order the instance is pinned to */
} pr_instance_spec_t;

typedef struct pr_instances pr_instances_t;

/* Starts n instance threads; instance k is pinned to
 * cpus[first_core .. first_core + threads - 1] (cpus in the topology's order;
 * n_cpus must cover them) and compiles its session there. base supplies
 * dims other than the batch (its batch and threads are ignored). The batch
 * is the sum of the instances' batches. PR_ERR_INVALID for a bad list. */
pr_status_t pr__instances_create(pr_model_t *model, const pr_instance_spec_t *specs, int n,
                                 const int *cpus, int n_cpus, const pr_session_options_t *base,
                                 pr_instances_t **out, char *err, size_t err_len);

/* Runs one batch: inputs as for a session with batch B (the sum).
 * outputs get views of buffers owned by the executor, valid until the next
 * run or destroy. */
pr_status_t pr__instances_run(pr_instances_t *x, const pr_tensor_t *inputs, int n_inputs,
                              pr_tensor_t *outputs, int n_outputs, char *err, size_t err_len);

/* Shapes of the whole batch's inputs and outputs. */
pr_status_t pr__instances_input(const pr_instances_t *x, int i, pr_tensor_info_t *info);

void pr__instances_destroy(pr_instances_t *x);

#endif
