/* A walk over protobuf wire bytes before protobuf-c unpacks them: bounds the
 * nesting depth and the count of items to allocate (protobuf-c 1.4 recurses once per
 * nested message with no limit of its own, so a deep file would overflow
 * the stack), and refuses malformed wire data. */
#ifndef PR_ENGINE_ONNX_PRESCAN_H
#define PR_ENGINE_ONNX_PRESCAN_H

#include <stddef.h>

#include "packrat/engine.h"

struct ProtobufCMessageDescriptor;

/* Messages nest at most this deep in a model file (the top message is level
 * 1): protobuf's own default recursion limit. Real models need about 35 at
 * the loader's 8 levels of subgraphs (3 levels each: node, attribute,
 * graph), a handful more for nested sequence/map/optional types. */
#define PR_PRESCAN_MAX_DEPTH 100
/* A model file holds at most this many messages, strings (and bytes) and
 * unknown fields: protobuf-c allocates each one, and 2 bytes of file can
 * cost 200 unpacked. Real models hold a few per node and initializer. */
#define PR_PRESCAN_MAX_ITEMS ((size_t)1 << 24)

/* Walks the len bytes at data as a message of type desc, guided by
 * protobuf-c's runtime descriptors (a field of type MESSAGE is a nested
 * message of field->descriptor; unknown fields and other types are skipped
 * by their wire type), with an explicit stack, not recursion. PR_OK when
 * protobuf-c may unpack the bytes without nesting deeper than max_depth
 * levels or holding more than max_items items to allocate; PR_ERR_INVALID, with
 * err saying why ("model nests messages deeper than N levels", a count, or
 * malformed wire data at an offset), otherwise. Passing the scan does not
 * make the bytes a valid message (a field's wire type may disagree with its
 * descriptor): protobuf-c's unpack still decides that. */
pr_status_t pr_engine__proto_prescan(const void *data, size_t len,
                                     const struct ProtobufCMessageDescriptor *desc, int max_depth,
                                     size_t max_items, char *err, size_t err_len);

#endif
