/* The protobuf side of inference over gRPC: a ModelInferRequest (protobuf-c,
 * from src/server/proto/grpc_service.proto) into a request's tensors, and
 * the scheduler's outputs into a packed ModelInferResponse. Pure: no I/O,
 * no threads (fuzzed by tests/fuzz/fuzz_grpc_infer.c).
 *
 * Notes on the design:
 * - Every check against the model is protocol.c's (pr__proto_input_check
 *   and friends), the same as JSON's: a request is taken or refused, with
 *   the same message, whatever its wire format.
 * - Tensor data comes either all in raw_input_contents (one entry per
 *   input, in order, exactly the tensor's bytes) or all typed in each
 *   input's contents (the one field of its datatype, exactly as many
 *   values as the shape holds; INT8/16 and UINT8/16 range-checked; FP16
 *   only raw, as the protocol says). Mixing the two is refused.
 * - The answer comes the way the request came: raw outputs for raw inputs
 *   (what Triton's clients expect), typed for typed, and raw whenever an
 *   output is FP16 (it has no typed field). */
#ifndef PR_SERVER_GRPC_CODEC_H
#define PR_SERVER_GRPC_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grpc_service.pb-c.h"
#include "server/protocol.h"

/* Decodes req's inputs into r->inputs/r->rows and the outputs it asks for
 * into q (pr__proto_parse_infer's contract: tensors at most max_bytes, 0:
 * any; PR_ERR_INVALID or PR_ERR_BUSY with a message in err; release q with
 * pr__proto_infer_clear in every case). *raw: whether the answer goes raw. */
pr_status_t pr__grpc_decode_infer(const pr_proto_model_t *m,
                                  const Inference__ModelInferRequest *req, size_t max_bytes,
                                  pr_request_t *r, pr_proto_infer_t *q, bool *raw, char *err,
                                  size_t err_len);

/* The check of a request message msg[0..len) (of descriptor d) on the wire,
 * before protobuf-c unpacks it, so that what a message costs to decode is
 * bounded by what it holds:
 * - every string field in it (and in every message inside it, map entries
 *   and oneofs included) is valid UTF-8 without NUL bytes: protobuf-c hands
 *   strings out NUL-terminated and drops their length, so "mlp\0x" would
 *   unpack as "mlp" (REST's rule for the same fields);
 * - no repeated message field (a map too) has more than PR_GRPC_MAX_ENTRIES
 *   entries in one message, no message field that is not repeated is sent
 *   twice (protobuf-c would merge the copies), and no message holds more
 *   than PR_GRPC_MAX_UNKNOWN fields its type does not define (protobuf-c
 *   keeps a copy of each): an empty entry is 2 bytes on the wire and a
 *   hundred unpacked;
 * - *cost, an upper bound on the bytes protobuf-c allocates to unpack it
 *   (each message, array, string and copied value as glibc's malloc sizes
 *   it), is at most PR_GRPC_MAX_EXPANSION times len (plus 64 KiB): packed
 *   small integers, the most a valid request expands, take 8.
 * 0: it may be unpacked; 1: refused, with a message in err; -1: the bytes do
 * not parse (the unpack refuses them; *cost holds what was walked). */
#define PR_GRPC_MAX_ENTRIES 1024
#define PR_GRPC_MAX_UNKNOWN 64
#define PR_GRPC_MAX_EXPANSION 16
int pr__grpc_wire_check(const ProtobufCMessageDescriptor *d, const uint8_t *msg, size_t len,
                        size_t *cost, char *err, size_t err_len);

/* Packs the ModelInferResponse of a request r that ran (malloc'd into *out,
 * *out_len, the caller's to free). PR_ERR_NOMEM when memory runs out. */
pr_status_t pr__grpc_encode_infer(const pr_proto_model_t *m, const char *model_name,
                                  const char *version, const pr_request_t *r,
                                  const pr_proto_infer_t *q, bool raw, uint8_t **out,
                                  size_t *out_len);

#endif
