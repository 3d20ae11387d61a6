/* Open Inference Protocol (KServe v2) codec: infer requests (JSON tensors or
 * the binary tensor data extension) into request tensors, outputs into
 * response bodies. Pure: no I/O, no threads. Every error names what is wrong
 * and carries the HTTP status it maps to (the one place statuses are chosen). */
#ifndef PR_SERVER_PROTOCOL_H
#define PR_SERVER_PROTOCOL_H

#include <stdbool.h>
#include <stddef.h>

#include "packrat/engine.h"
#include "server/scheduler.h"

typedef struct {
  int n_inputs;
  pr_tensor_info_t inputs[PR_SCHED_MAX_IO]; /* dims[0] < 0: the batch axis */
  int n_outputs;
  pr_tensor_info_t outputs[PR_SCHED_MAX_IO];
  int max_batch;
} pr_proto_model_t;

typedef struct {
  char id[256];
  bool has_id;
  int n_outputs; /* requested outputs (0: all) */
  int outputs[PR_SCHED_MAX_IO];
  bool binary[PR_SCHED_MAX_IO]; /* per model output: answer in binary */
} pr_proto_infer_t;

/* v2 datatype name <-> dtype ("FP32" <-> PR_DTYPE_FLOAT). */
const char *pr_proto_datatype(pr_dtype_t dt);
pr_dtype_t pr_proto_dtype(const char *datatype);

/* Parses an infer request body (json_len: the JSON header's length, the whole
 * body without the binary extension) into r->inputs/r->rows and q. Returns
 * the HTTP status: 200, or 400 with a message in err. */
int pr_proto_parse_infer(const pr_proto_model_t *m, const char *body, size_t len, size_t json_len,
                         pr_request_t *r, pr_proto_infer_t *q, char *err, size_t err_len);

/* Builds the response body (malloc'd into *out, *out_len); *json_len is the
 * JSON header's length when binary outputs follow, else 0. */
int pr_proto_infer_response(const pr_proto_model_t *m, const char *model_name, const char *version,
                            const pr_request_t *r, const pr_proto_infer_t *q, char **out,
                            size_t *out_len, size_t *json_len);

/* {"error": msg} (malloc'd). */
char *pr_proto_error(const char *msg);

#endif
