/* Model instances: one pinned thread per instance, each with its own engine
 * session (t threads, batch b) sharing the model's weights. A batch of B
 * requests (axis 0 of every input) is split into the instances' sub-batches
 * in order, run concurrently, and the outputs gathered in order.
 *
 * Threads: pr_instances_run is called by one thread at a time; it hands each
 * instance its slice under the executor's lock and waits for all of them. */
#ifndef PR_SERVER_INSTANCES_H
#define PR_SERVER_INSTANCES_H

#include "packrat/engine.h"
#include "packrat/planner.h"

typedef struct pr_instances pr_instances_t;

/* Starts plan->n_instances threads; instance k is pinned to
 * cpus[first_core .. first_core + threads - 1] (cpus in the topology's order;
 * n_cpus must cover the plan) and compiles its session there. base supplies
 * dims other than the batch (its batch and threads are ignored). */
pr_status_t pr_instances_create(pr_model_t *model, const pr_plan_t *plan, const int *cpus,
                                int n_cpus, const pr_session_options_t *base, pr_instances_t **out,
                                char *err, size_t err_len);

/* Runs one batch of plan->batch: inputs as for a session with batch B.
 * outputs get views of buffers owned by the executor, valid until the next
 * run or destroy. */
pr_status_t pr_instances_run(pr_instances_t *x, const pr_tensor_t *inputs, int n_inputs,
                             pr_tensor_t *outputs, int n_outputs, char *err, size_t err_len);

/* Shapes of the whole batch's inputs and outputs. */
pr_status_t pr_instances_input(const pr_instances_t *x, int i, pr_tensor_info_t *info);

void pr_instances_destroy(pr_instances_t *x);

#endif
