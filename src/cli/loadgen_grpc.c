/* The gRPC side of packrat bench (loadgen.h): the same request as the REST
 * binary one, as a KServe v2 ModelInferRequest with raw_input_contents, sent
 * on gRPC's C core in a closed loop (one channel, a completion queue and a
 * call at a time per thread). */
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/util.h"
#include "cli/loadgen.h"
#include "grpc_service.pb-c.h"

#define INFER_METHOD "/inference.GRPCInferenceService/ModelInfer"

/* The request's JSON header and binary tail, as a packed ModelInferRequest.
 * 0, or -1 after a message. */
static int pack_request(const pr_loadgen_request_t *rq, const char *model, pr_loadgen_grpc_t *g) {
  json_t *h = json_loadb(rq->body, rq->json_len, 0, NULL);
  json_t *ins = json_object_get(h, "inputs");
  size_t n = json_array_size(ins), off = rq->json_len;
  Inference__ModelInferRequest req = INFERENCE__MODEL_INFER_REQUEST__INIT;
  Inference__ModelInferRequest__InferInputTensor *t = calloc(n + 1, sizeof *t);
  Inference__ModelInferRequest__InferInputTensor **tp = calloc(n + 1, sizeof *tp);
  ProtobufCBinaryData *raw = calloc(n + 1, sizeof *raw);
  int64_t(*shapes)[PR_MAX_RANK] = calloc(n + 1, sizeof *shapes);
  int rc = h && t && tp && raw && shapes ? 0 : -1;
  for (size_t i = 0; !rc && i < n; i++) {
    json_t *in = json_array_get(ins, i), *shape = json_object_get(in, "shape");
    json_int_t bytes =
        json_integer_value(json_object_get(json_object_get(in, "parameters"), "binary_data_size"));
    inference__model_infer_request__infer_input_tensor__init(&t[i]);
    t[i].name = (char *)json_string_value(json_object_get(in, "name"));
    t[i].datatype = (char *)json_string_value(json_object_get(in, "datatype"));
    t[i].n_shape = json_array_size(shape) < PR_MAX_RANK ? json_array_size(shape) : PR_MAX_RANK;
    for (size_t d = 0; d < t[i].n_shape; d++)
      shapes[i][d] = json_integer_value(json_array_get(shape, d));
    t[i].shape = shapes[i];
    tp[i] = &t[i];
    if (bytes < 0 || (size_t)bytes > rq->len - off) rc = -1;
    raw[i] = (ProtobufCBinaryData){.len = (size_t)bytes, .data = (uint8_t *)rq->body + off};
    off += (size_t)bytes;
  }
  req.model_name = (char *)model;
  req.n_inputs = req.n_raw_input_contents = n;
  req.inputs = tp;
  req.raw_input_contents = raw;
  if (!rc) {
    g->len = inference__model_infer_request__get_packed_size(&req);
    g->msg = malloc(g->len + 1);
    if (g->msg)
      inference__model_infer_request__pack(&req, g->msg);
    else
      rc = -1;
  }
  if (rc) fprintf(stderr, "packrat bench: cannot make the gRPC request\n");
  free(t), free(tp), free(raw), free(shapes);
  json_decref(h);
  return rc;
}

/* One ModelInfer call: the gRPC status (and the response checked to hold
 * outputs); `transport` (-1) when no status came. */
static long call_once(grpc_channel *ch, grpc_completion_queue *cq, const pr_loadgen_grpc_t *g) {
  gpr_timespec deadline =
      gpr_time_add(gpr_now(GPR_CLOCK_REALTIME), gpr_time_from_seconds(120, GPR_TIMESPAN));
  grpc_call *call =
      grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq,
                               grpc_slice_from_static_string(INFER_METHOD), NULL, deadline, NULL);
  grpc_slice s = grpc_slice_from_static_buffer(g->msg, g->len);
  grpc_byte_buffer *send = grpc_raw_byte_buffer_create(&s, 1), *recv = NULL;
  grpc_metadata_array init_md, trailing;
  grpc_metadata_array_init(&init_md);
  grpc_metadata_array_init(&trailing);
  grpc_status_code status = GRPC_STATUS_UNKNOWN;
  grpc_slice details;
  grpc_op ops[6];
  memset(ops, 0, sizeof ops);
  grpc_metadata auth = {.key = grpc_slice_from_static_string("authorization"),
                        .value = grpc_slice_from_static_string(g->authorization)};
  ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[0].data.send_initial_metadata.count = g->authorization[0] ? 1 : 0;
  ops[0].data.send_initial_metadata.metadata = &auth;
  ops[1].op = GRPC_OP_SEND_MESSAGE;
  ops[1].data.send_message.send_message = send;
  ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
  ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
  ops[3].data.recv_initial_metadata.recv_initial_metadata = &init_md;
  ops[4].op = GRPC_OP_RECV_MESSAGE;
  ops[4].data.recv_message.recv_message = &recv;
  ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
  ops[5].data.recv_status_on_client.trailing_metadata = &trailing;
  ops[5].data.recv_status_on_client.status = &status;
  ops[5].data.recv_status_on_client.status_details = &details;
  long result = -1;
  if (call && grpc_call_start_batch(call, ops, 6, (void *)1, NULL) == GRPC_CALL_OK) {
    grpc_event ev = grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    if (ev.type == GRPC_OP_COMPLETE && ev.success) result = status;
    grpc_slice_unref(details);
  }
  if (result == GRPC_STATUS_OK) { /* an answer must decode and hold outputs */
    grpc_byte_buffer_reader rd;
    grpc_slice all = grpc_empty_slice();
    if (recv && grpc_byte_buffer_reader_init(&rd, recv)) {
      all = grpc_byte_buffer_reader_readall(&rd);
      grpc_byte_buffer_reader_destroy(&rd);
    }
    Inference__ModelInferResponse *r = inference__model_infer_response__unpack(
        NULL, GRPC_SLICE_LENGTH(all), GRPC_SLICE_START_PTR(all));
    if (!r || !r->n_outputs) result = GRPC_STATUS_INTERNAL;
    if (r) inference__model_infer_response__free_unpacked(r, NULL);
    grpc_slice_unref(all);
  }
  grpc_byte_buffer_destroy(send);
  if (recv) grpc_byte_buffer_destroy(recv);
  grpc_metadata_array_destroy(&init_md);
  grpc_metadata_array_destroy(&trailing);
  if (call) grpc_call_unref(call);
  return result;
}

/* What every gRPC worker shares. */
typedef struct {
  const pr_loadgen_grpc_t *g;
  grpc_channel *ch;
} grpc_shared_t;

static void *grpc_main(void *arg) {
  pr_loadgen_worker_t *w = arg;
  const grpc_shared_t *sh = w->ctx;
  grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
  while (pr__now() < w->until) {
    double t0 = pr__now();
    long st = call_once(sh->ch, cq, sh->g);
    /* as an HTTP status for the result's classes: OK 200, else 500, no
     * status at all "transport" */
    long http = st == 0 ? 200 : st > 0 ? 500 : 0;
    pr__loadgen_result_add(&w->res, (pr__now() - t0) * 1e3, http, st == 0);
    /* UNAVAILABLE is the server's back-pressure (HTTP's 503): back off a
     * second, as the HTTP loop does without a Retry-After */
    if (st == GRPC_STATUS_UNAVAILABLE && pr__now() + 1 < w->until)
      nanosleep(&(struct timespec){1, 0}, NULL);
  }
  grpc_completion_queue_shutdown(cq);
  while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
         GRPC_QUEUE_SHUTDOWN) {
  }
  grpc_completion_queue_destroy(cq);
  return NULL;
}

int pr__loadgen_grpc_build(const pr_loadgen_request_t *rq, const char *model, const char *address,
                           pr_loadgen_grpc_t *g) {
  memset(g, 0, sizeof *g);
  snprintf(g->address, sizeof g->address, "%s", address);
  memcpy(g->authorization, rq->authorization, sizeof g->authorization);
  return pack_request(rq, model, g);
}

void pr__loadgen_grpc_closed(const pr_loadgen_grpc_t *g, int concurrency, double until,
                             pr_loadgen_result_t *all) {
  grpc_init();
  grpc_channel_credentials *creds = grpc_insecure_credentials_create();
  grpc_channel *ch = grpc_channel_create(g->address, creds, NULL);
  grpc_channel_credentials_release(creds);
  grpc_shared_t sh = {.g = g, .ch = ch};
  pr__loadgen_threads(concurrency, grpc_main, &sh, until, all);
  grpc_channel_destroy(ch);
  grpc_shutdown();
}

void pr__loadgen_grpc_free(pr_loadgen_grpc_t *g) {
  free(g->msg);
  g->msg = NULL;
}
