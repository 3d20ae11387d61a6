/* Declarations of every operator; the helpers the op files share are in
 * common.h. */
#ifndef PR_ENGINE_OPS_H
#define PR_ENGINE_OPS_H

#include <stdlib.h>

#include "engine/graph.h"
#include "engine/ops/common.h"

/* Every ONNX operator, one entry per line (the file that implements it).
 * Adding one: a line here and PR_OP_COUNT one higher (registry.c checks). */
// clang-format off
#define PR_OPS_LIST                             \
  X(relu)               /* elementwise.c */    \
  X(leaky_relu)         /* elementwise.c */    \
  X(sigmoid)            /* elementwise.c */    \
  X(tanh)               /* elementwise.c */    \
  X(hard_sigmoid)       /* elementwise.c */    \
  X(hard_swish)         /* elementwise.c */    \
  X(clip)               /* elementwise.c */    \
  X(sqrt)               /* elementwise.c */    \
  X(erf)                /* elementwise.c */    \
  X(exp)                /* elementwise.c */    \
  X(log)                /* elementwise.c */    \
  X(neg)                /* elementwise.c */    \
  X(abs)                /* elementwise.c */    \
  X(reciprocal)         /* elementwise.c */    \
  X(sin)                /* elementwise.c */    \
  X(cos)                /* elementwise.c */    \
  X(tan)                /* elementwise.c */    \
  X(asin)               /* elementwise.c */    \
  X(acos)               /* elementwise.c */    \
  X(atan)               /* elementwise.c */    \
  X(sinh)               /* elementwise.c */    \
  X(cosh)               /* elementwise.c */    \
  X(asinh)              /* elementwise.c */    \
  X(acosh)              /* elementwise.c */    \
  X(atanh)              /* elementwise.c */    \
  X(floor)              /* elementwise.c */    \
  X(ceil)               /* elementwise.c */    \
  X(round)              /* elementwise.c */    \
  X(sign)               /* elementwise.c */    \
  X(elu)                /* elementwise.c */    \
  X(selu)               /* elementwise.c */    \
  X(celu)               /* elementwise.c */    \
  X(thresholded_relu)   /* elementwise.c */    \
  X(shrink)             /* elementwise.c */    \
  X(softplus)           /* elementwise.c */    \
  X(softsign)           /* elementwise.c */    \
  X(mish)               /* elementwise.c */    \
  X(gelu)               /* elementwise.c */    \
  X(add)                 /* arithmetic.c */     \
  X(sub)                 /* arithmetic.c */     \
  X(mul)                 /* arithmetic.c */     \
  X(div)                 /* arithmetic.c */     \
  X(sum)                 /* arithmetic.c */     \
  X(pow)                 /* arithmetic.c */     \
  X(min)                 /* arithmetic.c */     \
  X(max)                 /* arithmetic.c */     \
  X(mean)               /* arithmetic.c */     \
  X(mod)                /* arithmetic.c */     \
  X(bit_shift)          /* arithmetic.c */     \
  X(prelu)              /* arithmetic.c */     \
  X(equal)               /* logic.c */          \
  X(less)                /* logic.c */          \
  X(greater)             /* logic.c */          \
  X(less_or_equal)       /* logic.c */          \
  X(greater_or_equal)    /* logic.c */          \
  X(and)                 /* logic.c */          \
  X(or)                  /* logic.c */          \
  X(xor)                 /* logic.c */          \
  X(not)                 /* logic.c */          \
  X(is_inf)              /* logic.c */          \
  X(is_nan)              /* logic.c */          \
  X(where)               /* logic.c */          \
  X(cast)                /* cast.c */           \
  X(cast_like)           /* cast.c */           \
  X(size)                /* cast.c */           \
  X(det)                 /* linalg.c */         \
  X(einsum)              /* einsum.c */         \
  X(tfidf_vectorizer)    /* text.c */           \
  X(range)               /* generator.c */      \
  X(constant_of_shape)   /* generator.c */      \
  X(reduce_mean)         /* reduce.c */         \
  X(reduce_sum)          /* reduce.c */         \
  X(reduce_max)          /* reduce.c */         \
  X(reduce_min)          /* reduce.c */         \
  X(reduce_prod)         /* reduce.c */         \
  X(reduce_l1)           /* reduce.c */         \
  X(reduce_l2)           /* reduce.c */         \
  X(reduce_log_sum)      /* reduce.c */         \
  X(reduce_log_sum_exp)  /* reduce.c */         \
  X(reduce_sum_square)   /* reduce.c */         \
  X(cumsum)              /* reduce.c */         \
  X(identity)            /* shape.c */          \
  X(dropout)             /* shape.c */          \
  X(reshape)             /* shape.c */          \
  X(flatten)             /* shape.c */          \
  X(squeeze)             /* shape.c */          \
  X(unsqueeze)           /* shape.c */          \
  X(shape)               /* shape.c */          \
  X(concat)              /* movement.c */       \
  X(split)               /* movement.c */       \
  X(transpose)           /* movement.c */       \
  X(gather)              /* movement.c */       \
  X(pad)                 /* movement.c */       \
  X(slice)               /* movement.c */       \
  X(expand)              /* movement.c */       \
  X(trilu)               /* movement.c */       \
  X(batch_norm)          /* normalization.c */  \
  X(softmax)             /* normalization.c */  \
  X(log_softmax)         /* normalization.c */  \
  X(instance_norm)       /* norm_stats.c */     \
  X(group_norm)          /* norm_stats.c */     \
  X(mvn)                 /* norm_stats.c */     \
  X(lrn)                 /* norm_stats.c */     \
  X(layer_norm)          /* normalization.c */  \
  X(gemm)                /* matmul.c */         \
  X(matmul)              /* matmul.c */         \
  X(conv)                /* conv.c */           \
  X(conv_transpose)      /* conv_transpose.c */ \
  X(max_pool)            /* pool.c */           \
  X(average_pool)        /* pool.c */           \
  X(global_average_pool) /* pool.c */           \
  X(global_max_pool)     /* pool.c */           \
  X(max_unpool)          /* pool.c */           \
  X(resize)              /* resize.c */         \
  X(grid_sample)         /* grid_sample.c */    \
  X(roi_align)           /* roi_align.c */      \
  X(upsample)            /* resize.c */         \
  X(nll_loss)            /* loss.c */           \
  X(sce_loss)            /* loss.c */           \
  X(rnn)                 /* rnn.c */            \
  X(gru)                 /* rnn.c */            \
  X(lstm)                /* rnn.c */            \
  X(dft)                 /* signal.c */         \
  X(stft)                /* signal.c */         \
  X(hann_window)         /* signal.c */         \
  X(hamming_window)      /* signal.c */         \
  X(blackman_window)     /* signal.c */         \
  X(mel_weight_matrix)   /* signal.c */         \
  X(argmax)              /* select.c */         \
  X(argmin)              /* select.c */         \
  X(hardmax)             /* select.c */         \
  X(topk)                /* select.c */         \
  X(gather_elements)     /* gather_scatter.c */ \
  X(gather_nd)           /* gather_scatter.c */ \
  X(scatter_elements)    /* gather_scatter.c */ \
  X(scatter)             /* gather_scatter.c */ \
  X(scatter_nd)          /* gather_scatter.c */ \
  X(tile)                /* rearrange.c */      \
  X(depth_to_space)      /* rearrange.c */      \
  X(space_to_depth)      /* rearrange.c */      \
  X(reverse_sequence)    /* rearrange.c */      \
  X(one_hot)             /* construct.c */      \
  X(eye_like)            /* construct.c */      \
  X(compress)            /* value_shaped.c */   \
  X(unique)              /* value_shaped.c */   \
  X(non_max_suppression) /* value_shaped.c */   \
  X(quantize_linear)     /* quant.c */          \
  X(dequantize_linear)   /* quant.c */          \
  X(dynamic_quantize_linear) /* quant.c */      \
  X(qlinear_conv)        /* qconv.c */          \
  X(conv_integer)        /* qconv.c */          \
  X(qlinear_matmul)      /* qmatmul.c */        \
  X(matmul_integer)      /* qmatmul.c */        \
  X(non_zero)            /* value_shaped.c */   \
  X(if)                  /* control.c */        \
  X(loop)                /* control.c */        \
  X(scan)                /* control.c */
// clang-format on
#define PR_OP_COUNT 157

#define X(name) extern const pr_op_t pr__op_##name;
PR_OPS_LIST
#undef X

/* Compiler-made kernels (no ONNX name of their own). */
extern const pr_op_t pr__op_layer_norm_fused;
extern const pr_op_t pr__op_gelu_erf, pr__op_gelu_tanh;
extern const pr_op_t pr__op_silu;
extern const pr_op_t pr__op_attention;
extern const pr_op_t pr__op_qlinear_add; /* quant.c, made by the QDQ fuser */
extern const pr_op_t pr__op_qlookup;     /* quant.c, made by the QDQ fuser */
/* Node n's float function (a unary op of elementwise.c, or Clip with
 * constant bounds) on v[0..len) in place; false, v unchanged, when n is no
 * such node. */
bool pr__unary_eval(pr_compile_t *c, const pr_node_t *n, float *v, int64_t len);
/* sgemm form of a rows x cols view with strides (rs, cs) (attention.c). */
bool pr__attn_operand(int64_t rows, int64_t cols, int64_t rs, int64_t cs, char *t, int64_t *ld);

/* A MatMul that runs as one oneDNN kernel with a constant B (matmul.c); the
 * fuser gives those a bias, activations and a residual sum. */
bool pr__matmul_is_linear(pr_compile_t *c, const pr_node_t *n);
/* A Conv with an output position whose window lies in the padding only, on
 * some axis (conv.c): oneDNN 2.6's brgconv kernels answer wrong there with
 * a sum post-op (and crash with a sum and an eltwise one), so the fuser
 * gives such a conv no residual sum. */
bool pr__conv_window_in_padding(pr_compile_t *c, pr_node_t *n);

#endif
