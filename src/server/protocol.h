/* Open Inference Protocol (KServe v2) codec: infer requests (JSON tensors or
 * the binary tensor data extension) into request tensors, outputs into
 * response bodies, errors into {"error": ...}, and pr_status_t into HTTP
 * and gRPC status codes (the one place each mapping is made). Pure: no I/O, no
 * threads.
 *
 * Notes on the design:
 * - Bodies are parsed with yajl's event parser in two passes over the JSON
 *   text: the first reads everything but the tensors' "data" (names, shapes,
 *   datatypes, parameters), the second streams each "data" array straight
 *   into its typed tensor, whose size the first pass fixed. No tree of the
 *   document is built, so parsing takes the body plus the tensors' own bytes
 *   (a 60 MB body of numbers costs about 60 MB more, not a gigabyte).
 * - "data" is either flat (row-major, as many values as the shape holds) or
 *   nested exactly as the shape says; anything ragged is refused.
 * - Floating-point values that JSON cannot write (NaN, +Inf, -Inf) travel as
 *   the strings "NaN", "Infinity" and "-Infinity", both ways; the binary
 *   extension carries them as they are. FP16 travels as JSON numbers (the
 *   half value, exactly), unsigned types as integers up to UINT64_MAX.
 * - Text from the client is UTF-8-validated by the parser (names, ids,
 *   datatypes). Error messages that echo it are cut to the caller's buffer,
 *   possibly inside a character; pr__proto_error replaces what is not UTF-8,
 *   so every error body is valid JSON. */
#ifndef PR_SERVER_PROTOCOL_H
#define PR_SERVER_PROTOCOL_H

#include <stdbool.h>
#include <stddef.h>

#include "packrat/engine.h"
#include "sched/scheduler.h"
#include "server/status.h"

/* A dim requests may size (the config's range or list): name, bounds, and
 * the allowed sizes when it is a list (n_list 0: every size min..max). */
#define PR_PROTO_DIM_LIST_MAX 16
typedef struct {
  char name[64];
  long long min, max;
  int n_list;
  long long list[PR_PROTO_DIM_LIST_MAX];
} pr_proto_dim_t;

typedef struct {
  int n_inputs;
  /* dims[0] is -1: axis 0 is the batch; so is every dynamic axis */
  pr_tensor_info_t inputs[PR_SCHED_MAX_IO];
  int n_outputs;
  pr_tensor_info_t outputs[PR_SCHED_MAX_IO];
  int max_batch;
  /* dynamic dims: dyn_of[input][axis] is 1 + the index in dyn of the dim
   * at that axis (0: not dynamic); inputs that share a dim must agree */
  int n_dyn;
  pr_proto_dim_t dyn[PR_SCHED_MAX_DYN];
  unsigned char dyn_of[PR_SCHED_MAX_IO][PR_MAX_RANK];
} pr_proto_model_t;

/* "1..512" or "one of 64, 128, 256" into buf. */
void pr__proto_dim_allowed(const pr_proto_dim_t *d, char *buf, size_t len);

typedef struct {
  char *id;      /* owned; NULL when the request has none */
  int n_outputs; /* requested outputs (0: all) */
  int outputs[PR_SCHED_MAX_IO];
  bool binary[PR_SCHED_MAX_IO]; /* per model output: answer in binary */
  int priority;                 /* parameters.priority (0: none named) */
  long long timeout_us;         /* parameters.timeout (0: none) */
} pr_proto_infer_t;

/* v2 datatype name <-> dtype ("FP32" <-> PR_DTYPE_FLOAT). */
const char *pr__proto_datatype(pr_dtype_t dt);
pr_dtype_t pr__proto_dtype(const char *datatype);

/* Parses an infer request body (json_len: the JSON header's length, the whole
 * body without the binary extension) into r->inputs/r->rows and q, allocating
 * at most max_bytes of tensors (0: no bound). Tensors from JSON are r's;
 * binary ones (but BOOL) are views into body (r->borrowed): the body must
 * stay unchanged until r is freed. Returns
 * PR_OK; PR_ERR_INVALID for a malformed body or one the model does not take;
 * PR_ERR_BUSY over max_bytes or when the tensors cannot be allocated (retry
 * later); a message in err for every error. Release q with
 * pr__proto_infer_clear in every case. */
pr_status_t pr__proto_parse_infer(const pr_proto_model_t *m, const char *body, size_t len,
                                  size_t json_len, size_t max_bytes, pr_request_t *r,
                                  pr_proto_infer_t *q, char *err, size_t err_len);
void pr__proto_infer_clear(pr_proto_infer_t *q);

/* The error of a "priority" parameter that is no level: negative, not an
 * integer, or past any model's levels (one within range but past the
 * model's own is refused at submit, with its count). */
#define PR_PRIORITY_RANGE                                                                     \
  "'priority' must be an integer from 0 (the model's default level) to the model's priority " \
  "levels"

/* ---- checks every wire format shares (JSON and binary here, protobuf in
 * grpc_codec.c): each returns PR_OK or an error with a message in err ---- */

/* Input `name` of a request against the model: known, not given before,
 * datatype, rank, dims (axis 0: the batch, 1..max_batch, the same for every
 * input: r->rows, -1 before the first). On PR_OK the input is taken:
 * r->inputs[*k] has its dtype, rank and dims (no data yet), *numel and
 * *nbytes its size. PR_ERR_INVALID otherwise. */
pr_status_t pr__proto_input_check(const pr_proto_model_t *m, const char *name, const char *datatype,
                                  int rank, const int64_t *dims, pr_request_t *r, int *k,
                                  size_t *numel, size_t *nbytes, char *err, size_t err_len);
/* Allocates input k's nbytes, counted in *bytes against max_bytes (0: no
 * bound): PR_ERR_BUSY over it or out of memory. */
pr_status_t pr__proto_input_alloc(pr_request_t *r, int k, size_t nbytes, size_t max_bytes,
                                  size_t *bytes, char *err, size_t err_len);
/* PR_ERR_INVALID when a model input was not given. */
pr_status_t pr__proto_inputs_complete(const pr_proto_model_t *m, const pr_request_t *r, char *err,
                                      size_t err_len);
/* Adds the requested output `name` to q (*k: its index in the model);
 * PR_ERR_INVALID for an unknown or repeated one. */
pr_status_t pr__proto_output_take(const pr_proto_model_t *m, const char *name, pr_proto_infer_t *q,
                                  int *k, char *err, size_t err_len);

/* Builds the response body (malloc'd into *out, *out_len, the caller's to
 * free); *json_len is the JSON header's length when binary outputs follow,
 * else 0. Returns PR_OK, PR_ERR_NOMEM, or PR_ERR_INTERNAL when the JSON
 * cannot be written (a name that is not valid UTF-8); *out is untouched on
 * error. */
pr_status_t pr__proto_infer_response(const pr_proto_model_t *m, const char *model_name,
                                     const char *version, const pr_request_t *r,
                                     const pr_proto_infer_t *q, char **out, size_t *out_len,
                                     size_t *json_len);

/* The HTTP status of a pr_status_t (the engine's and server/status.h's): the
 * one place statuses become HTTP. Unknown statuses are 500. */
int pr__proto_http_status(pr_status_t st);

/* The gRPC status code (grpc/status.h's grpc_status_code) of a pr_status_t:
 * beside pr__proto_http_status, the one place statuses become gRPC codes.
 * Unknown statuses are INTERNAL. */
int pr__proto_grpc_status(pr_status_t st);

/* {"error": msg} (malloc'd, NULL only when out of memory); msg may hold any
 * bytes: invalid UTF-8 is replaced, so the body is always valid JSON. */
char *pr__proto_error(const char *msg);

#endif
