/* Tensor helpers internal to the engine. */
#ifndef PR_ENGINE_TENSOR_H
#define PR_ENGINE_TENSOR_H

#include "packrat/engine.h"

/* Largest model file, and largest tensor in one. */
#define PR_MAX_MODEL_BYTES ((size_t)4 << 30)

typedef struct Onnx__TensorProto Onnx__TensorProto;
/* TensorProto -> newly allocated tensor (free with pr_engine_tensor_free + free).
 * External data is read from base_dir, never from outside it. */
pr_status_t pr_tensor_from_proto(const Onnx__TensorProto *tp, const char *base_dir,
                                 pr_tensor_t **out, char *err, size_t err_len);

#endif
