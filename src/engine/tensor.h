/* Tensor helpers internal to the engine. */
#ifndef PR_ENGINE_TENSOR_H
#define PR_ENGINE_TENSOR_H

#include "packrat/engine.h"

/* Largest model file, and largest tensor in one. */
#define PR_MAX_MODEL_BYTES ((size_t)4 << 30)

typedef struct Onnx__TensorProto Onnx__TensorProto;
/* TensorProto -> newly allocated tensor (free with pr_engine_tensor_free + free).
 * External data is read from base_dir, never from outside it. Takes tp's
 * raw_data when it is 16-byte aligned (the tensor's data becomes that
 * buffer and tp is left without raw_data: a load's peak memory halves), so
 * a caller that still needs tp's bytes passes a copy. */
pr_status_t pr__tensor_from_proto(Onnx__TensorProto *tp, const char *base_dir, pr_tensor_t **out,
                                  char *err, size_t err_len);

#endif
