/* JSON views of a served model that clients parse by a published schema:
 * its statistics (the statistics extension of KServe v2 / Triton) and its
 * effective configuration. */
#ifndef PR_SERVER_MODEL_JSON_H
#define PR_SERVER_MODEL_JSON_H

#include <jansson.h>

#include "server/models.h"

/* One entry of "model_stats": name, version, last_inference (ms since the
 * epoch, 0 before any), inference_count (rows answered), execution_count
 * (session runs), inference_stats {success, fail, queue, compute_input,
 * compute_infer, compute_output, cache_hit, cache_miss} each {count, ns},
 * batch_stats [{batch_size, compute_input, compute_infer, compute_output}]
 * for every batch size that ran; packrat's own figures under "packrat". */
json_t *pr__model_stats_json(pr_served_t *m);

/* The configuration m runs with, in config.json's keys (so it can be saved
 * and fed back), with name, platform, inputs and outputs. */
json_t *pr__model_config_json(pr_served_t *m);

#endif
