/* Fused scaled-dot-product attention (made by the fuser from MatMul, scale,
 * mask, Softmax, MatMul): per (batch, head) and block of query rows, the
 * scores S = scale * Q K' + mask go to a per-thread scratch block that stays
 * in cache, are turned into softmax rows in place, and O = S V is written
 * straight into the output view. Operands are strided views (pr_attn_t), so
 * the Split, Reshape and Transpose nodes around the products do not run. */
#include <math.h>
#include <omp.h>

#include "base/util.h"
#include "engine/ops/fastmath.h"
#include "engine/ops/ops.h"

typedef struct {
  char tq, tk, tv; /* sgemm transposition of Q, K' and V */
  int64_t ldq, ldk, ldv, ldo;
  int64_t rows;   /* query rows per task */
  float *scratch; /* rows x Sk floats per thread */
} attn_state_t;

static void destroy_attn(void *p) {
  attn_state_t *s = p;
  pr__free(s->scratch);
  free(s);
}

/* sgemm form of a rows x cols view with strides (rs, cs): 'N' when columns
 * are contiguous, 'T' when rows are; false when neither. */
bool pr__attn_operand(int64_t rows, int64_t cols, int64_t rs, int64_t cs, char *t, int64_t *ld) {
  if (cs == 1 && (rs >= cols || rows == 1)) {
    *t = 'N';
    *ld = rs > cols ? rs : cols;
    return true;
  }
  if (rs == 1 && (cs >= rows || cols == 1)) {
    *t = 'T';
    *ld = cs > rows ? cs : rows;
    return true;
  }
  return false;
}

static pr_status_t prepare_attn(pr_compile_t *c, pr_node_t *n) {
  const pr_attn_t *a = &n->attn;
  attn_state_t *s = calloc(1, sizeof *s);
  if (!s) return PR_ERR_NOMEM;
  n->state = s;
  char to;
  if (!pr__attn_operand(a->Sq, a->D, a->st[0][2], a->st[0][3], &s->tq, &s->ldq) ||
      !pr__attn_operand(a->D, a->Sk, a->st[1][2], a->st[1][3], &s->tk, &s->ldk) ||
      !pr__attn_operand(a->Sk, a->Dv, a->st[2][2], a->st[2][3], &s->tv, &s->ldv) ||
      !pr__attn_operand(a->Sq, a->Dv, a->st[4][2], a->st[4][3], &to, &s->ldo) || to != 'N')
    return pr__fail(c, n, PR_ERR_INTERNAL, "attention operands are not matrices");
  /* whole heads per task (larger products run faster), split into row
   * blocks while there are fewer than two tasks per thread; a block of
   * scores stays within 256 KiB */
  s->rows = a->Sq;
  while (s->rows > 16 && (s->rows * a->Sk > 65536 ||
                          a->B * a->H * ((a->Sq + s->rows - 1) / s->rows) < 2 * c->threads))
    s->rows = (s->rows + 1) / 2;
  size_t per = (size_t)s->rows * (size_t)a->Sk;
  if (!(s->scratch = pr__aligned_alloc(sizeof(float) * per * (size_t)c->threads)))
    return PR_ERR_NOMEM;
  n->flops = 2.0 * (double)(a->B * a->H) * (double)(a->Sq * a->Sk) * (double)(a->D + a->Dv);
  return PR_OK;
}

static void run_attn(pr_exec_t *x, pr_node_t *n) {
  const attn_state_t *s = n->state;
  const pr_attn_t *a = &n->attn;
  const float *q = (const float *)pr__xin(x, n, 0) + a->off[0];
  const float *k = (const float *)pr__xin(x, n, 1) + a->off[1];
  const float *v = (const float *)pr__xin(x, n, 2) + a->off[2];
  const float *mask =
      n->n_in > 3 && n->in[3] >= 0 ? (const float *)pr__xin(x, n, 3) + a->off[3] : NULL;
  float *o = (float *)pr__xout(x, n, 0) + a->off[4];
  int64_t H = a->H, Sq = a->Sq, Sk = a->Sk, R = s->rows, nblk = (Sq + R - 1) / R;
  int64_t tasks = a->B * H * nblk;
  const int64_t(*st)[4] = a->st;
#pragma omp parallel for num_threads(x->threads) schedule(static) if (tasks > 1)
  for (int64_t t = 0; t < tasks; t++) {
    int64_t b = t / (H * nblk), h = t / nblk % H, i0 = t % nblk * R;
    int64_t rows = Sq - i0 < R ? Sq - i0 : R;
    float *S = s->scratch + (size_t)omp_get_thread_num() * (size_t)(R * Sk);
    const float *qp = q + b * st[0][0] + h * st[0][1] + i0 * st[0][2];
    const float *kp = k + b * st[1][0] + h * st[1][1];
    const float *vp = v + b * st[2][0] + h * st[2][1];
    float *op = o + b * st[4][0] + h * st[4][1] + i0 * st[4][2];
    dnnl_sgemm(s->tq, s->tk, rows, Sk, a->D, a->scale, qp, s->ldq, kp, s->ldk, 0.f, S, Sk);
    for (int64_t i = 0; i < rows; i++) {
      float *row = S + i * Sk;
      if (mask) {
        const float *mp = mask + b * st[3][0] + h * st[3][1] + (i0 + i) * st[3][2];
        int64_t ms = st[3][3];
        if (ms == 1) {
#pragma omp simd
          for (int64_t j = 0; j < Sk; j++) row[j] += mp[j];
        } else {
          for (int64_t j = 0; j < Sk; j++) row[j] += mp[j * ms];
        }
      }
      pr__softmax_row(row, row, Sk);
    }
    dnnl_sgemm('N', s->tv, rows, a->Dv, Sk, 1.f, S, Sk, vp, s->ldv, 0.f, op, s->ldo);
  }
}

const pr_op_t pr__op_attention = {
    .name = "Attention", .prepare = prepare_attn, .run = run_attn, .destroy = destroy_attn};
