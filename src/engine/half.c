/* float16 models: float32 inside, float16 at the edges.
 *
 * A model with float16 weights or float16 inputs and outputs (a converted
 * export, say) is rewritten when it loads: float16 initializers, Constant
 * values and ConstantOfShape fills become float32; a Cast (or EyeLike) to
 * float16 produces float32 instead; each float16 graph input gets a Cast to
 * float32 behind it and each float16 graph output a Cast to float16 in front
 * of it. The kernels then see only float32, and the model's inputs and
 * outputs keep the float16 type its users send and expect. */
#include "engine/half.h"

#include <stdlib.h>
#include <string.h>

#include "base/fp16.h"
#include "base/util.h"

/* t's float16 data as float32, in place of the old data. */
static pr_status_t tensor_to_float(pr_tensor_t *t) {
  if (!t || t->dtype != PR_DTYPE_FLOAT16) return PR_OK;
  int64_t n = pr_tensor_numel(t);
  float *f = pr__aligned_alloc(sizeof(float) * (size_t)(n ? n : 1));
  if (!f) return PR_ERR_NOMEM;
  const uint16_t *h = t->data;
  for (int64_t i = 0; i < n; i++) f[i] = pr__half_to_float(h[i]);
  pr__free(t->data);
  t->data = f;
  t->dtype = PR_DTYPE_FLOAT;
  return PR_OK;
}

/* Attributes that make float16: Cast's `to`, EyeLike's `dtype`, a float16
 * tensor (ConstantOfShape's value, Constant's value_*). */
static pr_status_t node_to_float(pr_mnode_t *n) {
  for (int k = 0; k < n->n_attrs; k++) {
    pr_attr_t *a = &n->attrs[k];
    bool type_attr = !strcmp(a->name, "to") || !strcmp(a->name, "dtype");
    if (type_attr && a->type == PR_ATTR_INT && a->i == PR_DTYPE_FLOAT16) a->i = PR_DTYPE_FLOAT;
    if (a->type == PR_ATTR_TENSOR) {
      pr_status_t st = tensor_to_float(a->t);
      if (st) return st;
    }
  }
  return PR_OK;
}

static bool uses_half(const pr_model_t *m, const pr_dtype_t *out_types) {
  for (int i = 0; i < m->n_values; i++)
    if ((m->values[i].init && m->values[i].init->dtype == PR_DTYPE_FLOAT16) ||
        m->values[i].dtype == PR_DTYPE_FLOAT16)
      return true;
  for (int i = 0; i < m->n_outputs; i++)
    if (out_types[i] == PR_DTYPE_FLOAT16) return true;
  return false;
}

/* A new value that copies v's name and declared shape, of type dtype. */
static int add_edge_value(pr_model_t *m, int v, pr_dtype_t dtype) {
  pr_mvalue_t *nv = realloc(m->values, sizeof *nv * (size_t)(m->n_values + 1));
  if (!nv) return -1;
  m->values = nv;
  pr_mvalue_t *e = &m->values[m->n_values], *src = &m->values[v];
  memset(e, 0, sizeof *e);
  e->rank = src->rank;
  memcpy(e->dims, src->dims, sizeof e->dims);
  e->dtype = dtype;
  e->defined = true;
  if (!(e->name = pr__strdup(src->name))) return -1;
  for (int k = 0; k < PR_MAX_RANK; k++)
    if (src->dim_names[k] && !(e->dim_names[k] = pr__strdup(src->dim_names[k]))) return -1;
  return m->n_values++;
}

/* A Cast node from value `from` to value `to` (type `dtype`) at position at. */
static pr_status_t insert_cast(pr_model_t *m, int at, int from, int to, pr_dtype_t dtype) {
  pr_mnode_t *nn = realloc(m->nodes, sizeof *nn * (size_t)(m->n_nodes + 1));
  if (!nn) return PR_ERR_NOMEM;
  m->nodes = nn;
  memmove(&nn[at + 1], &nn[at], sizeof *nn * (size_t)(m->n_nodes - at));
  m->n_nodes++;
  pr_mnode_t *n = &nn[at];
  memset(n, 0, sizeof *n);
  char name[512];
  snprintf(name, sizeof name, "%s (as %s)", m->values[to].name, pr_dtype_name(dtype));
  n->name = pr__strdup(name);
  n->op_type = pr__strdup("Cast");
  n->in = malloc(sizeof(int));
  n->out = malloc(sizeof(int));
  n->attrs = calloc(1, sizeof *n->attrs);
  if (!n->name || !n->op_type || !n->in || !n->out || !n->attrs) return PR_ERR_NOMEM;
  n->n_in = n->n_out = n->n_attrs = 1;
  n->in[0] = from;
  n->out[0] = to;
  n->attrs[0].type = PR_ATTR_INT;
  n->attrs[0].i = dtype;
  if (!(n->attrs[0].name = pr__strdup("to"))) return PR_ERR_NOMEM;
  n->op = pr__op_find("Cast");
  return n->op ? PR_OK : PR_ERR_INTERNAL;
}

pr_status_t pr__half_edges(pr_model_t *m, const pr_dtype_t *out_types) {
  if (!uses_half(m, out_types)) return PR_OK;
  pr_status_t st;
  for (int i = 0; i < m->n_values; i++)
    if ((st = tensor_to_float(m->values[i].init))) return st;
  for (int i = 0; i < m->n_nodes; i++)
    if ((st = node_to_float(&m->nodes[i]))) return st;
  /* inputs: the edge value takes the graph input's place, a Cast feeds the
   * value the nodes read (now float32) */
  int n_cast = 0;
  for (int k = 0; k < m->n_inputs; k++) {
    int v = m->inputs[k];
    if (m->values[v].dtype != PR_DTYPE_FLOAT16) continue;
    int e = add_edge_value(m, v, PR_DTYPE_FLOAT16);
    if (e < 0) return PR_ERR_NOMEM;
    m->values[v].dtype = PR_DTYPE_FLOAT;
    m->inputs[k] = e;
    if ((st = insert_cast(m, n_cast++, e, v, PR_DTYPE_FLOAT))) return st;
  }
  /* outputs: a Cast to float16 makes the edge value the users read */
  int first_edge = m->n_values;
  for (int k = 0; k < m->n_outputs; k++) {
    int v = m->outputs[k];
    if (out_types[k] != PR_DTYPE_FLOAT16 || v >= first_edge) continue; /* done (listed twice) */
    for (int j = 0; j < n_cast; j++) /* a graph input that is also an output: its float value */
      if (m->nodes[j].in[0] == v) v = m->nodes[j].out[0];
    int e = add_edge_value(m, v, PR_DTYPE_FLOAT16);
    if (e < 0) return PR_ERR_NOMEM;
    if (m->values[v].dtype == PR_DTYPE_FLOAT16) m->values[v].dtype = PR_DTYPE_FLOAT;
    for (int j = k; j < m->n_outputs; j++)
      if (m->outputs[j] == v) m->outputs[j] = e;
    if ((st = insert_cast(m, m->n_nodes, v, e, PR_DTYPE_FLOAT16))) return st;
  }
  return PR_OK;
}
