/* Matrix products: MatMul (numpy matmul with batch broadcasting) and Gemm
 * (oneDNN sgemm).
 *
 * Two kernels. A "linear" MatMul (B a constant matrix, A with at least two
 * rows) runs as one product over the stacked rows of A, with B reordered
 * once into the kernel's layout (shared by the model's sessions) and a fused
 * bias, activations and residual sum (see fuse.c): a oneDNN matmul primitive
 * where oneDNN runs AVX-512, packrat's own AVX2 kernel (sgemm.c) where it
 * runs AVX2 or less (oneDNN 2.6's AVX2 matmul ran BERT's 768 -> 3072
 * products at 44% of the peak; ours runs at 80-90%). Every other
 * MatMul (B computed at run time, batched products, a single row of A) runs
 * as sgemm calls, one per batch entry that B does not share. Double and
 * the 32- and 64-bit integers (which ONNX Runtime takes too; no oneDNN
 * kernel does) run a plain product per batch entry, integers wrapping. */
#include <string.h>

#include "base/util.h"
#include "engine/ops/dnnl_util.h"
#include "engine/ops/matmul_shape.h"
#include "engine/ops/sgemm.h"

typedef struct {
  pr_mm_shape_t mm; /* the product's geometry */
  /* linear kernel */
  bool linear;
  pr_dtype_t dtype;
  pr_dnnl_prim_t prim;
  void *w_buf;
  pr_model_t *w_cache;
  int sum_in; /* input index of the residual addend, -1 */
  /* packrat's own kernel (sgemm.c) instead of prim: B packed into w_buf */
  bool own, bias;
  int64_t rows;
  pr_sgemm_epi_t epi;
} matmul_state_t;

static void destroy_matmul(void *p) {
  matmul_state_t *s = p;
  pr__dnnl_prim_destroy(&s->prim);
  if (s->w_buf) pr__dnnl_weights_release(s->w_buf, s->w_cache);
  free(s);
}

static pr_status_t matmul_shape(pr_compile_t *c, pr_node_t *n, matmul_state_t *s, int *ro,
                                int64_t *od) {
  pr_value_t *a = pr__in(c, n, 0), *b = pr__in(c, n, 1);
  if (!a || !b) return pr__fail(c, n, PR_ERR_INVALID, "needs two inputs");
  if (a->dtype != b->dtype)
    return pr__fail(c, n, PR_ERR_INVALID, "input types differ (%s, %s)", pr_dtype_name(a->dtype),
                    pr_dtype_name(b->dtype));
  switch (a->dtype) {
    case PR_DTYPE_FLOAT:
    case PR_DTYPE_DOUBLE:
    case PR_DTYPE_INT32:
    case PR_DTYPE_INT64:
    case PR_DTYPE_UINT32:
    case PR_DTYPE_UINT64: break;
    default: return pr__fail(c, n, PR_ERR_UNSUPPORTED, "element type %s", pr_dtype_name(a->dtype));
  }
  s->dtype = a->dtype;
  return pr__mm_shape(c, n, a, b, &s->mm, ro, od);
}

static pr_status_t infer_matmul(pr_compile_t *c, pr_node_t *n) {
  matmul_state_t s = {0};
  int r = 0;
  int64_t d[PR_MAX_RANK + 2];
  pr_status_t st = matmul_shape(c, n, &s, &r, d);
  if (st) return st;
  pr__value_set_shape(pr__out(c, n, 0), s.dtype, r, d);
  n->flops = 2.0 * (double)s.mm.batch * (double)s.mm.M * (double)s.mm.N * (double)s.mm.K;
  return PR_OK;
}

bool pr__matmul_is_linear(pr_compile_t *c, const pr_node_t *n) {
  if (strcmp(n->op->name, "MatMul") || n->n_in < 2) return false;
  const pr_value_t *a = &c->v[n->in[0]], *b = &c->v[n->in[1]];
  if (a->dtype != PR_DTYPE_FLOAT || a->rank < 2 || !b->is_const || b->rank != 2 ||
      b->dtype != PR_DTYPE_FLOAT || a->dims[a->rank - 1] != b->dims[0])
    return false;
  /* one row is a matrix-vector product: sgemm streams B faster than the
   * blocked kernel */
  return pr__value_numel(a) / b->dims[0] >= 2;
}

/* packrat's AVX2 kernel runs the linear MatMul when oneDNN has no AVX-512
 * kernels here (the CPU, or ONEDNN_MAX_CPU_ISA) and the kernel's epilogue
 * holds every fused operation (a residual sum before the activations). */
static bool own_kernel_fits(const pr_node_t *n) {
  if (!pr__sgemm_isa_fits()) return false;
  if (n->post.sum && n->post.sum_before != 0) return false;
  if (n->post.n_eltwise > PR_SGEMM_MAX_ACT) return false;
  for (int i = 0; i < n->post.n_eltwise; i++)
    if (!pr__sgemm_act_supported(n->post.alg[i])) return false;
  return true;
}

static pr_status_t prepare_own(pr_compile_t *c, pr_node_t *n, matmul_state_t *s, int64_t K,
                               int64_t N) {
  /* the packed layout's stand-in descriptor keys the shared weight cache */
  dnnl_dims_t pd = {(N + PR_SGEMM_NR - 1) / PR_SGEMM_NR, K, PR_SGEMM_NR};
  dnnl_memory_desc_t key;
  PR_DNNL(c, n, dnnl_memory_desc_init_by_tag(&key, 3, pd, dnnl_f32, dnnl_abc));
  if (!(s->w_buf = pr__dnnl_weights_cached(c, n, 1, &key, &s->w_cache))) {
    float *buf = pr__aligned_calloc(pr__sgemm_packed_size(K, N));
    if (!buf) return PR_ERR_NOMEM;
    pr__sgemm_pack_b(pr__in(c, n, 1)->data, K, N, buf);
    s->w_buf = buf;
    if (!c->fixed_inputs && n->m) {
      if (!(s->w_buf = pr__wcache_put(c->model, n->m, 1, &key, buf))) return PR_ERR_NOMEM;
      s->w_cache = c->model;
    }
  }
  s->epi.accumulate = n->post.sum;
  s->epi.n_act = n->post.n_eltwise;
  for (int i = 0; i < n->post.n_eltwise; i++) {
    s->epi.alg[i] = n->post.alg[i];
    s->epi.alpha[i] = n->post.alpha[i];
    s->epi.beta[i] = n->post.beta[i];
  }
  snprintf(n->impl, sizeof n->impl, "packrat:sgemm_avx2");
  s->own = s->linear = true;
  return PR_OK;
}

static pr_status_t prepare_linear(pr_compile_t *c, pr_node_t *n, matmul_state_t *s) {
  pr_value_t *a = pr__in(c, n, 0), *b = pr__in(c, n, 1);
  pr_value_t *bias = n->n_in > 2 && s->sum_in != 2 ? pr__in(c, n, 2) : NULL;
  int64_t K = b->dims[0], N = b->dims[1], rows = pr__value_numel(a) / K;
  if (bias && (bias->dtype != PR_DTYPE_FLOAT || pr__value_numel(bias) != N))
    return pr__fail(c, n, PR_ERR_INTERNAL, "fused bias must hold %lld floats", (long long)N);
  s->rows = rows;
  s->bias = bias != NULL;
  if (!c->bf16 && own_kernel_fits(n)) return prepare_own(c, n, s, K, N);
  dnnl_dims_t ad = {rows, K}, wd = {K, N}, od = {rows, N}, bd = {1, N};
  dnnl_memory_desc_t a_md, w_any, w_plain, o_md, b_md;
  /* bf16: A reordered to bf16 (row-major, the value's own shape), B too */
  dnnl_data_type_t at = c->bf16 ? dnnl_bf16 : dnnl_f32;
  if (c->bf16) {
    dnnl_memory_desc_t a16;
    dnnl_dims_t vd;
    for (int k = 0; k < a->rank; k++) vd[k] = a->dims[k];
    static const dnnl_format_tag_t row_major[] = {0,         0,          dnnl_ab,    dnnl_abc,
                                                  dnnl_abcd, dnnl_abcde, dnnl_abcdef};
    if (a->rank > 6) return pr__fail(c, n, PR_ERR_UNSUPPORTED, "bf16 MatMul of rank %d", a->rank);
    PR_DNNL(c, n, dnnl_memory_desc_init_by_tag(&a16, a->rank, vd, dnnl_bf16, row_major[a->rank]));
    pr_status_t st = pr__require_md(c, n, 0, &a16);
    if (st) return st;
  }
  PR_DNNL(c, n, dnnl_memory_desc_init_by_tag(&a_md, 2, ad, at, dnnl_ab));
  PR_DNNL(c, n, dnnl_memory_desc_init_by_tag(&w_any, 2, wd, at, dnnl_format_tag_any));
  PR_DNNL(c, n, dnnl_memory_desc_init_by_tag(&w_plain, 2, wd, dnnl_f32, dnnl_ab));
  PR_DNNL(c, n, dnnl_memory_desc_init_by_tag(&o_md, 2, od, dnnl_f32, dnnl_ab));
  PR_DNNL(c, n, dnnl_memory_desc_init_by_tag(&b_md, 2, bd, dnnl_f32, dnnl_ab));
  dnnl_matmul_desc_t md;
  PR_DNNL(c, n, dnnl_matmul_desc_init(&md, &a_md, &w_any, bias ? &b_md : NULL, &o_md));
  dnnl_primitive_attr_t attr;
  pr_status_t st = pr__dnnl_post_attr(c, n, &attr);
  if (st) return st;
  dnnl_primitive_desc_t pd;
  dnnl_status_t ds = dnnl_primitive_desc_create(&pd, &md, attr, c->engine, NULL);
  dnnl_primitive_attr_destroy(attr);
  if (ds != dnnl_success) return pr__fail(c, n, PR_ERR_UNSUPPORTED, "no oneDNN matmul (%d)", ds);
  dnnl_memory_desc_t w_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
  if ((st = pr__dnnl_prim_init(c, n, &s->prim, pd))) return st;
  if (!(s->w_buf = pr__dnnl_weights_cached(c, n, 0, &w_md, &s->w_cache)) &&
      (st = pr__dnnl_weights_make(c, n, 0, b->data, &w_plain, &w_md, &s->w_buf, &s->w_cache)))
    return st;
  pr__dnnl_prim_add_arg(&s->prim, DNNL_ARG_SRC, n->in[0], NULL, &a_md);
  pr__dnnl_prim_add_arg(&s->prim, DNNL_ARG_WEIGHTS, -1, s->w_buf, &w_md);
  if (bias) pr__dnnl_prim_add_arg(&s->prim, DNNL_ARG_BIAS, n->in[2], NULL, &b_md);
  pr__dnnl_prim_add_arg(&s->prim, DNNL_ARG_DST, n->out[0], NULL, &o_md);
  s->linear = true;
  return PR_OK;
}

static pr_status_t prepare_matmul(pr_compile_t *c, pr_node_t *n) {
  matmul_state_t *s = calloc(1, sizeof *s);
  if (!s) return PR_ERR_NOMEM;
  n->state = s;
  s->sum_in = n->post.sum ? n->n_in - 1 : -1;
  int r;
  int64_t d[PR_MAX_RANK + 2];
  pr_status_t st = matmul_shape(c, n, s, &r, d);
  if (st) return st;
  if (s->dtype == PR_DTYPE_FLOAT && pr__matmul_is_linear(c, n)) return prepare_linear(c, n, s);
  if (n->n_in > 2 || n->post.n_eltwise)
    return pr__fail(c, n, PR_ERR_INTERNAL, "fused operations on a non-linear MatMul");
  return PR_OK;
}

/* The plain product of one type: o = a b per batch entry, summed in ACC (an
 * integer sum in uint64_t wraps, and its low bits are the wrapped result). */
#define MATMUL_PLAIN(sfx, T, ACC)                                                         \
  static void matmul_##sfx(const matmul_state_t *s, const T *a, const T *b, T *o) {       \
    int64_t M = s->mm.M, N = s->mm.N, K = s->mm.K;                                        \
    for (int64_t i = 0; i < s->mm.batch; i++) {                                           \
      const T *pa = a + pr__bcast_offset(i, s->mm.rank, s->mm.bdims, s->mm.sa);           \
      const T *pb = b + pr__bcast_offset(i, s->mm.rank, s->mm.bdims, s->mm.sb);           \
      T *po = o + i * M * N;                                                              \
      for (int64_t m = 0; m < M; m++)                                                     \
        for (int64_t j = 0; j < N; j++) {                                                 \
          ACC acc = 0;                                                                    \
          for (int64_t k = 0; k < K; k++) acc += (ACC)pa[m * K + k] * (ACC)pb[k * N + j]; \
          po[m * N + j] = (T)acc;                                                         \
        }                                                                                 \
    }                                                                                     \
  }
MATMUL_PLAIN(f64, double, double)
MATMUL_PLAIN(i32, int32_t, uint64_t)
MATMUL_PLAIN(i64, int64_t, uint64_t)
MATMUL_PLAIN(u32, uint32_t, uint64_t)
MATMUL_PLAIN(u64, uint64_t, uint64_t)
#undef MATMUL_PLAIN

static void run_matmul_plain(pr_exec_t *x, pr_node_t *n, const matmul_state_t *s) {
  const void *a = pr__xin(x, n, 0), *b = pr__xin(x, n, 1);
  void *o = pr__xout(x, n, 0);
  switch (s->dtype) {
    case PR_DTYPE_DOUBLE: matmul_f64(s, a, b, o); break;
    case PR_DTYPE_INT32: matmul_i32(s, a, b, o); break;
    case PR_DTYPE_INT64: matmul_i64(s, a, b, o); break;
    case PR_DTYPE_UINT32: matmul_u32(s, a, b, o); break;
    case PR_DTYPE_UINT64: matmul_u64(s, a, b, o); break;
    default: assert(0 && "matmul: element type");
  }
}

static void run_matmul(pr_exec_t *x, pr_node_t *n) {
  matmul_state_t *s = n->state;
  if (s->dtype != PR_DTYPE_FLOAT) {
    run_matmul_plain(x, n, s);
    return;
  }
  if (s->linear) {
    if (s->sum_in >= 0) pr__dnnl_sum_addend(x, n, s->sum_in);
    if (s->own) {
      pr_sgemm_epi_t epi = s->epi;
      if (s->bias) epi.bias = pr__xin(x, n, 2);
      int64_t K = s->mm.K, N = s->mm.N;
      pr__sgemm_packed(s->rows, N, K, pr__xin(x, n, 0), K, s->w_buf, pr__xout(x, n, 0), N, &epi,
                       x->threads);
      return;
    }
    pr__dnnl_prim_run(x, &s->prim);
    return;
  }
  const float *a = pr__xin(x, n, 0), *b = pr__xin(x, n, 1);
  float *o = pr__xout(x, n, 0);
  bool tall = true; /* b shared by every batch entry, a's entries stacked in order */
  for (int k = 0; k < s->mm.rank; k++)
    tall &= s->mm.bdims[k] == 1 || (s->mm.sb[k] == 0 && s->mm.sa[k] != 0);
  if (tall) { /* one sgemm over the stacked rows of a */
    int64_t rows = s->mm.M * s->mm.batch;
    dnnl_sgemm('N', 'N', rows, s->mm.N, s->mm.K, 1.f, a, s->mm.K, b, s->mm.N, 0.f, o, s->mm.N);
    return;
  }
  for (int64_t i = 0; i < s->mm.batch; i++) {
    int64_t oa = pr__bcast_offset(i, s->mm.rank, s->mm.bdims, s->mm.sa);
    int64_t ob = pr__bcast_offset(i, s->mm.rank, s->mm.bdims, s->mm.sb);
    dnnl_sgemm('N', 'N', s->mm.M, s->mm.N, s->mm.K, 1.f, a + oa, s->mm.K, b + ob, s->mm.N, 0.f,
               o + i * s->mm.M * s->mm.N, s->mm.N);
  }
}

const pr_op_t pr__op_matmul = {.name = "MatMul",
                               .attrs = "",
                               .min_opset = 1,
                               .max_inputs = 2,
                               .infer = infer_matmul,
                               .prepare = prepare_matmul,
                               .run = run_matmul,
                               .destroy = destroy_matmul};

/* ---- Gemm: Y = alpha * A' B' + beta * C ---- */

static pr_status_t infer_gemm(pr_compile_t *c, pr_node_t *n) {
  pr_value_t *a = pr__in(c, n, 0), *b = pr__in(c, n, 1), *cc = pr__in(c, n, 2);
  if (!a || !b) return pr__fail(c, n, PR_ERR_INVALID, "needs A and B");
  if ((a->dtype != PR_DTYPE_FLOAT && a->dtype != PR_DTYPE_DOUBLE) || b->dtype != a->dtype ||
      (cc && cc->dtype != a->dtype))
    return pr__fail(c, n, PR_ERR_UNSUPPORTED, "A, B and C of one type, FLOAT or DOUBLE");
  if (a->rank != 2 || b->rank != 2) return pr__fail(c, n, PR_ERR_INVALID, "A and B must be 2-D");
  bool ta = pr__attr_int(n->m, "transA", 0), tb = pr__attr_int(n->m, "transB", 0);
  int64_t M = ta ? a->dims[1] : a->dims[0], K = ta ? a->dims[0] : a->dims[1];
  int64_t K2 = tb ? b->dims[1] : b->dims[0], N = tb ? b->dims[0] : b->dims[1];
  if (K != K2)
    return pr__fail(c, n, PR_ERR_INVALID, "inner dimensions differ (%lld, %lld)", (long long)K,
                    (long long)K2);
  int64_t d[2] = {M, N};
  if (cc) {
    int r;
    int64_t bd[PR_MAX_RANK];
    if (cc->rank > 2 || pr__broadcast_shape(2, d, cc->rank, cc->dims, &r, bd) < 0 || bd[0] != M ||
        bd[1] != N)
      return pr__fail(c, n, PR_ERR_INVALID, "C does not broadcast to [M, N]");
  }
  pr__value_set_shape(pr__out(c, n, 0), a->dtype, 2, d);
  n->flops = 2.0 * (double)M * (double)N * (double)K;
  return PR_OK;
}

/* Gemm in double: the plain product, then alpha and beta C */
static void run_gemm_f64(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *a = &x->v[n->in[0]], *b = &x->v[n->in[1]], *o = &x->v[n->out[0]];
  const pr_value_t *cc = n->n_in > 2 && n->in[2] >= 0 ? &x->v[n->in[2]] : NULL;
  bool ta = pr__attr_int(n->m, "transA", 0), tb = pr__attr_int(n->m, "transB", 0);
  double alpha = pr__attr_float(n->m, "alpha", 1.f), beta = pr__attr_float(n->m, "beta", 1.f);
  int64_t M = o->dims[0], N = o->dims[1], K = ta ? a->dims[0] : a->dims[1];
  int64_t lda = a->dims[1], ldb = b->dims[1];
  const double *pa = a->ptr, *pb = b->ptr, *pc = cc ? cc->ptr : NULL;
  int64_t cm = cc && cc->rank == 2 ? cc->dims[0] : 1;
  int64_t cn = cc && cc->rank >= 1 ? cc->dims[cc->rank - 1] : 1;
  double *y = o->ptr;
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      double acc = 0;
      for (int64_t k = 0; k < K; k++)
        acc += pa[ta ? k * lda + i : i * lda + k] * pb[tb ? j * ldb + k : k * ldb + j];
      double add = pc ? beta * pc[(cm == 1 ? 0 : i) * cn + (cn == 1 ? 0 : j)] : 0;
      y[i * N + j] = alpha * acc + add;
    }
}

static void run_gemm(pr_exec_t *x, pr_node_t *n) {
  const pr_value_t *a = &x->v[n->in[0]], *b = &x->v[n->in[1]], *o = &x->v[n->out[0]];
  const pr_value_t *cc = n->n_in > 2 && n->in[2] >= 0 ? &x->v[n->in[2]] : NULL;
  if (o->dtype == PR_DTYPE_DOUBLE) {
    run_gemm_f64(x, n);
    return;
  }
  bool ta = pr__attr_int(n->m, "transA", 0), tb = pr__attr_int(n->m, "transB", 0);
  float alpha = pr__attr_float(n->m, "alpha", 1.f), beta = pr__attr_float(n->m, "beta", 1.f);
  int64_t M = o->dims[0], N = o->dims[1], K = ta ? a->dims[0] : a->dims[1];
  float *y = o->ptr;
  float b2 = 0.f;
  if (cc && beta != 0.f) {
    const float *pc = cc->ptr;
    int64_t cm = cc->rank == 2 ? cc->dims[0] : 1, cn = cc->rank >= 1 ? cc->dims[cc->rank - 1] : 1;
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) y[i * N + j] = pc[(cm == 1 ? 0 : i) * cn + (cn == 1 ? 0 : j)];
    b2 = beta;
  }
  dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, a->ptr, a->dims[1], b->ptr, b->dims[1],
             b2, y, N);
}

const pr_op_t pr__op_gemm = {.name = "Gemm",
                             .attrs = "alpha,beta,transA,transB",
                             .min_opset = 1, /* 1 and 6: C required (broadcast: the loader) */
                             .max_inputs = 3,
                             .infer = infer_gemm,
                             .run = run_gemm};
