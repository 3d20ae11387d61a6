/* Declarations of every operator and helpers shared by the op files. */
#ifndef PR_ENGINE_OPS_H
#define PR_ENGINE_OPS_H

#include <stdlib.h>

#include "engine/graph.h"

// clang-format off
#define PR_OPS_LIST                                                                                \
  X(relu)                                                                                          \
  X(leaky_relu)                                                                                    \
  X(sigmoid)                                                                                       \
  X(tanh) X(hard_sigmoid) X(hard_swish) X(clip) X(add) X(sub) X(mul) X(div) X(sum) X(identity)     \
      X(dropout) X(reshape) X(flatten) X(squeeze) X(unsqueeze) X(shape) X(concat) X(split)         \
          X(transpose) X(gather) X(pad) X(conv) X(batch_norm) X(max_pool) X(average_pool)          \
              X(global_average_pool) X(global_max_pool) X(gemm) X(matmul) X(softmax) X(resize)     \
                  X(sqrt) X(erf) X(exp) X(log) X(neg) X(abs) X(reciprocal) X(pow) X(cast) X(range) \
                      X(reduce_mean) X(reduce_sum) X(reduce_max) X(slice) X(layer_norm) \
  X(equal) X(less) X(greater) X(less_or_equal) X(greater_or_equal) X(and) X(or) X(xor) X(not) \
  X(where) X(min) X(max) X(expand) X(constant_of_shape) X(trilu) X(cumsum) X(conv_transpose) \
  X(nll_loss) X(sce_loss) X(rnn) X(gru) X(lstm) \
  X(dft) X(stft) X(hann_window) X(hamming_window) X(blackman_window) X(mel_weight_matrix) \
  X(argmax) X(argmin) X(hardmax) X(topk) X(gather_elements) X(gather_nd) X(scatter_elements) \
  X(scatter) X(scatter_nd) X(tile) X(depth_to_space) X(space_to_depth) X(reverse_sequence) \
  X(one_hot) X(eye_like) X(compress) X(unique) X(non_max_suppression)
// clang-format on

#define X(name) extern const pr_op_t pr_op_##name;
PR_OPS_LIST
#undef X

/* Compiler-made kernels (no ONNX name of their own). */
extern const pr_op_t pr_op_layer_norm_fused;
extern const pr_op_t pr_op_gelu_erf, pr_op_gelu_tanh;
extern const pr_op_t pr_op_attention;
/* sgemm form of a rows x cols view with strides (rs, cs) (attention.c). */
bool pr_attn_operand(int64_t rows, int64_t cols, int64_t rs, int64_t cs, char *t, int64_t *ld);

/* A MatMul that runs as one oneDNN kernel with a constant B (matmul.c); the
 * fuser gives those a bias, activations and a residual sum. */
bool pr_matmul_is_linear(pr_compile_t *c, const pr_node_t *n);

/* Normalize axis into [0, rank); returns -1 when out of range. */
static inline int pr_axis(int64_t axis, int rank) {
  if (axis < -rank || axis >= (rank ? rank : 1)) return -1;
  return (int)(axis < 0 ? axis + rank : axis);
}

/* Numpy broadcast of two shapes into out; returns -1 when incompatible. */
int pr_broadcast_shape(int ra, const int64_t *a, int rb, const int64_t *b, int *ro, int64_t *o);

/* Inputs from..n_in-1 of n, all of input from's element type, broadcast
 * together into out (rank *ro, dims od); fails naming the node. */
pr_status_t pr_broadcast_inputs(pr_compile_t *c, pr_node_t *n, int from, int *ro, int64_t *od);

/* Element i of a tensor of type t as a double (integers, bool, floats, float16). */
double pr_load_double(const void *p, pr_dtype_t t, int64_t i);
/* Element i of a tensor of an integer type or bool as an int64 (UINT64
 * reinterpreted: values of 2^63 and more come out negative); 0 for others. */
int64_t pr_load_int64(const void *p, pr_dtype_t t, int64_t i);

/* Element strides of v broadcast to an output of rank r and dims d (0 on
 * broadcast axes), and the offset in v of output element i. */
static inline void pr_bcast_strides(const pr_value_t *v, int r, const int64_t *d, int64_t *st) {
  int64_t e = 1;
  for (int k = r - 1; k >= 0; k--) {
    int kv = k - (r - v->rank);
    int64_t dv = kv >= 0 ? v->dims[kv] : 1;
    st[k] = dv == 1 && d[k] != 1 ? 0 : e;
    e *= dv;
  }
}
static inline int64_t pr_bcast_offset(int64_t i, int r, const int64_t *d, const int64_t *st) {
  int64_t off = 0;
  for (int k = r - 1; k >= 0; k--) {
    off += (i % d[k]) * st[k];
    i /= d[k];
  }
  return off;
}

/* Parallel memcpy for large buffers. */
void pr_copy(void *dst, const void *src, size_t n, int threads);

#endif
