/* ONNX model loading: protobuf-c ModelProto -> pr_model_t (tensor decoding
 * in tensor.c, the model's accessors and weight cache in model.c).
 *
 * Everything read from the file is validated here: sizes, element counts,
 * value references, topological order, operator support. After a successful
 * load the model is immutable. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/util.h"
#include "engine/graph.h"
#include "engine/half.h"
#include "engine/names.h"
#include "engine/onnx_prescan.h"
#include "engine/tensor.h"
#include "onnx.pb-c.h"

/* Subgraphs nest at most this deep (a bound on the loader's recursion). */
#define MAX_GRAPH_DEPTH 8

typedef struct loader {
  pr_model_t *m;
  pr_names_t names;
  const char *base_dir;
  char *err;
  size_t err_len;
  /* a subgraph's loader: the enclosing graph's, and how deep this one is */
  struct loader *parent;
  int depth;
  /* the node being added (its subgraphs are loading): the outer-scope values
   * they read so far, indices in m (its implicit inputs) */
  int *implicit, n_implicit;
} loader_t;

static pr_status_t load_graph(loader_t *L, const Onnx__GraphProto *g);

static int value_index(loader_t *L, const char *name, int create) {
  int idx = pr__names_get(&L->names, name);
  if (idx >= 0 || !create) return idx;
  pr_model_t *m = L->m;
  pr_mvalue_t *nv = realloc(m->values, sizeof *nv * (size_t)(m->n_values + 1));
  if (!nv) return -1;
  m->values = nv;
  pr_mvalue_t *v = &m->values[m->n_values];
  memset(v, 0, sizeof *v);
  v->name = pr__strdup(name);
  v->rank = -1;
  if (!v->name || pr__names_put(&L->names, v->name, m->n_values) < 0) return -1;
  return m->n_values++;
}

/* Index of the parent's implicit-input slot that holds its value pidx,
 * adding one; -1 when out of memory. */
static int implicit_slot(loader_t *P, int pidx) {
  for (int k = 0; k < P->n_implicit; k++)
    if (P->implicit[k] == pidx) return k;
  int *a = realloc(P->implicit, sizeof(int) * (size_t)(P->n_implicit + 1));
  if (!a) return -1;
  P->implicit = a;
  a[P->n_implicit] = pidx;
  return P->n_implicit++;
}

/* A subgraph reads `name` from an enclosing scope (ONNX: outer-scope values
 * are visible to nested graphs): the value, found up the chain of loaders,
 * becomes an input of this graph after its own (and an implicit input of
 * the node that owns it, level by level). Returns its index here, or -1
 * when no enclosing scope defines it (or out of memory). */
static int outer_value(loader_t *L, const char *name) {
  loader_t *P = L->parent;
  if (!P) return -1;
  int pidx = value_index(P, name, 0);
  if (pidx < 0 || !P->m->values[pidx].defined) pidx = outer_value(P, name);
  if (pidx < 0) return -1;
  int slot = implicit_slot(P, pidx);
  if (slot < 0) return -1;
  pr_model_t *m = L->m;
  int *in = realloc(m->inputs, sizeof(int) * (size_t)(m->n_inputs + 1));
  if (!in) return -1;
  m->inputs = in;
  int j = m->n_inputs - m->n_formal;
  int *os = realloc(m->outer_slot, sizeof(int) * (size_t)(j + 1));
  if (!os) return -1;
  m->outer_slot = os;
  int idx = value_index(L, name, 1);
  if (idx < 0) return -1;
  pr_mvalue_t *v = &m->values[idx], *pv = &P->m->values[pidx];
  v->defined = true;
  v->dtype = pv->dtype;
  v->rank = -1; /* known when the body runs */
  os[j] = slot;
  in[m->n_inputs++] = idx;
  return idx;
}

/* A GRAPH attribute: the body as a model of its own, loaded with L as its
 * enclosing scope. */
static pr_status_t load_subgraph(loader_t *L, const Onnx__GraphProto *g, pr_model_t **out) {
  if (L->depth + 1 >= MAX_GRAPH_DEPTH) {
    pr__errf(L->err, L->err_len, "subgraphs nested deeper than %d", MAX_GRAPH_DEPTH);
    return PR_ERR_UNSUPPORTED;
  }
  pr_model_t *m = calloc(1, sizeof *m);
  if (!m) return PR_ERR_NOMEM;
  pthread_mutex_init(&m->cache_lock, NULL);
  m->opset = L->m->opset;
  memcpy(m->sha256, L->m->sha256, sizeof m->sha256);
  loader_t S = {.m = m,
                .base_dir = L->base_dir,
                .err = L->err,
                .err_len = L->err_len,
                .parent = L,
                .depth = L->depth + 1};
  pr__names_init(&S.names);
  pr_status_t st = load_graph(&S, g);
  pr__names_free(&S.names);
  free(S.implicit);
  if (st) {
    pr_engine_model_destroy(m);
    return st;
  }
  *out = m;
  return PR_OK;
}

static pr_status_t read_value_info(loader_t *L, const Onnx__ValueInfoProto *vi, int idx) {
  pr_mvalue_t *v = &L->m->values[idx];
  const Onnx__TypeProto *tp = vi->type;
  if (!tp || tp->value_case == ONNX__TYPE_PROTO__VALUE__NOT_SET) return PR_OK; /* no type given */
  if (tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE) {
    pr__errf(L->err, L->err_len, "value '%s': only tensor types are supported", vi->name);
    return PR_ERR_UNSUPPORTED;
  }
  const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
  if (tt->has_elem_type) v->dtype = (pr_dtype_t)tt->elem_type;
  if (!tt->shape) return PR_OK;
  if (tt->shape->n_dim > PR_MAX_RANK) {
    pr__errf(L->err, L->err_len, "value '%s': rank over %d", vi->name, PR_MAX_RANK);
    return PR_ERR_UNSUPPORTED;
  }
  v->rank = (int)tt->shape->n_dim;
  for (int k = 0; k < v->rank; k++) {
    const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[k];
    v->dims[k] = -1;
    if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && d->dim_value >= 0)
      v->dims[k] = d->dim_value;
    else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM)
      v->dim_names[k] = pr__strdup(d->dim_param);
  }
  return PR_OK;
}

/* A STRINGS attribute: n strings, each NUL-terminated, one after another. */
static pr_status_t convert_strings(loader_t *L, const Onnx__NodeProto *np,
                                   const Onnx__AttributeProto *ap, pr_attr_t *a) {
  size_t total = 1;
  for (size_t k = 0; k < ap->n_strings; k++) {
    if (ap->strings[k].len && memchr(ap->strings[k].data, 0, ap->strings[k].len)) {
      pr__errf(L->err, L->err_len, "node '%s': attribute '%s' holds a NUL byte", np->name,
               ap->name);
      return PR_ERR_INVALID;
    }
    total += ap->strings[k].len + 1;
  }
  a->n = (int)ap->n_strings;
  if (!(a->s = malloc(total))) return PR_ERR_NOMEM;
  char *p = a->s;
  for (size_t k = 0; k < ap->n_strings; k++) {
    if (ap->strings[k].len) memcpy(p, ap->strings[k].data, ap->strings[k].len);
    p += ap->strings[k].len;
    *p++ = 0;
  }
  *p = 0;
  return PR_OK;
}

static pr_status_t convert_attr(loader_t *L, const Onnx__NodeProto *np,
                                const Onnx__AttributeProto *ap, pr_attr_t *a) {
  a->name = pr__strdup(ap->name ? ap->name : "");
  a->type = ap->has_type ? (int)ap->type : 0;
  if (!a->type) { /* old files: infer from the populated field */
    if (ap->n_ints)
      a->type = PR_ATTR_INTS;
    else if (ap->n_floats)
      a->type = PR_ATTR_FLOATS;
    else if (ap->t)
      a->type = PR_ATTR_TENSOR;
    else if (ap->has_s)
      a->type = PR_ATTR_STRING;
    else if (ap->n_strings)
      a->type = PR_ATTR_STRINGS;
    else if (ap->has_f)
      a->type = PR_ATTR_FLOAT;
    else
      a->type = PR_ATTR_INT;
  }
  a->f = ap->f;
  a->i = ap->i;
  switch (a->type) {
    case PR_ATTR_STRING:
      a->s = malloc(ap->s.len + 1);
      if (!a->s) return PR_ERR_NOMEM;
      if (ap->s.len) memcpy(a->s, ap->s.data, ap->s.len);
      a->s[ap->s.len] = 0;
      break;
    case PR_ATTR_INTS:
      a->n = (int)ap->n_ints;
      a->ints = malloc(sizeof(int64_t) * (ap->n_ints + 1));
      if (!a->ints) return PR_ERR_NOMEM;
      if (ap->n_ints) memcpy(a->ints, ap->ints, sizeof(int64_t) * ap->n_ints);
      break;
    case PR_ATTR_FLOATS:
      a->n = (int)ap->n_floats;
      a->floats = malloc(sizeof(float) * (ap->n_floats + 1));
      if (!a->floats) return PR_ERR_NOMEM;
      if (ap->n_floats) memcpy(a->floats, ap->floats, sizeof(float) * ap->n_floats);
      break;
    case PR_ATTR_TENSOR:
      if (!ap->t) {
        pr__errf(L->err, L->err_len, "node '%s': attribute '%s' has no tensor", np->name, ap->name);
        return PR_ERR_INVALID;
      }
      return pr__tensor_from_proto(ap->t, L->base_dir, &a->t, L->err, L->err_len);
    case PR_ATTR_STRINGS: return convert_strings(L, np, ap, a);
    case PR_ATTR_GRAPH:
      if (!ap->g) {
        pr__errf(L->err, L->err_len, "node '%s': attribute '%s' has no graph", np->name, ap->name);
        return PR_ERR_INVALID;
      }
      return load_subgraph(L, ap->g, &a->g);
    case PR_ATTR_FLOAT:
    case PR_ATTR_INT: break;
    default:
      pr__errf(L->err, L->err_len, "node '%s' (%s): attribute '%s' of type %d not supported",
               np->name ? np->name : "", np->op_type, ap->name, a->type);
      return PR_ERR_UNSUPPORTED;
  }
  return PR_OK;
}

/* Constant nodes become initializers of their output. */
static pr_status_t load_constant(loader_t *L, const Onnx__NodeProto *np, int out_idx) {
  if (np->n_attribute != 1) {
    pr__errf(L->err, L->err_len, "node '%s' (Constant): needs exactly one attribute", np->name);
    return PR_ERR_INVALID;
  }
  const Onnx__AttributeProto *ap = np->attribute[0];
  pr_mvalue_t *v = &L->m->values[out_idx];
  pr_tensor_t *t = NULL;
  const char *an = ap->name ? ap->name : "";
  if (!strcmp(an, "value")) {
    if (!ap->t) goto bad;
    pr_status_t st = pr__tensor_from_proto(ap->t, L->base_dir, &t, L->err, L->err_len);
    if (st) return st;
  } else if (!strcmp(an, "value_float") || !strcmp(an, "value_int")) {
    int is_f = an[6] == 'f';
    t = calloc(1, sizeof *t);
    if (!t) return PR_ERR_NOMEM;
    t->dtype = is_f ? PR_DTYPE_FLOAT : PR_DTYPE_INT64;
    t->rank = 0;
    t->data = pr__aligned_alloc(8);
    if (!t->data) {
      free(t);
      return PR_ERR_NOMEM;
    }
    if (is_f)
      *(float *)t->data = ap->f;
    else
      *(int64_t *)t->data = ap->i;
  } else if (!strcmp(an, "value_floats") || !strcmp(an, "value_ints")) {
    int is_f = an[6] == 'f';
    size_t n = is_f ? ap->n_floats : ap->n_ints;
    t = calloc(1, sizeof *t);
    if (!t) return PR_ERR_NOMEM;
    t->dtype = is_f ? PR_DTYPE_FLOAT : PR_DTYPE_INT64;
    t->rank = 1;
    t->dims[0] = (int64_t)n;
    t->data = pr__aligned_alloc(n * 8 + 8);
    if (!t->data) {
      free(t);
      return PR_ERR_NOMEM;
    }
    if (n) memcpy(t->data, is_f ? (void *)ap->floats : (void *)ap->ints, n * (is_f ? 4 : 8));
  } else {
    pr__errf(L->err, L->err_len, "node '%s' (Constant): attribute '%s' not supported", np->name,
             an);
    return PR_ERR_UNSUPPORTED;
  }
  v->init = t;
  v->defined = true;
  v->dtype = t->dtype;
  v->rank = t->rank;
  memcpy(v->dims, t->dims, sizeof v->dims);
  return PR_OK;
bad:
  pr__errf(L->err, L->err_len, "node '%s' (Constant): malformed", np->name);
  return PR_ERR_INVALID;
}

/* Attributes of operator versions before opset 7 that change nothing the
 * engine computes: consumed_inputs (an in-place hint of version 1), is_test
 * (BatchNormalization and Dropout in inference are what is_test asks for),
 * Gemm's broadcast (C broadcast or of full shape: both what Gemm-7 does). */
static bool legacy_hint(const pr_model_t *m, const pr_mnode_t *n, const char *attr) {
  return m->opset < 7 && (!strcmp(attr, "consumed_inputs") || !strcmp(attr, "is_test") ||
                          (!strcmp(attr, "broadcast") && !strcmp(n->op->name, "Gemm")));
}

static pr_status_t check_node_attrs(loader_t *L, const pr_mnode_t *n) {
  const pr_op_t *op = n->op;
  for (int i = 0; i < n->n_attrs; i++) {
    const char *an = n->attrs[i].name;
    if (legacy_hint(L->m, n, an)) continue;
    size_t len = strlen(an);
    const char *p = op->attrs ? op->attrs : "";
    int found = 0;
    while (*p) {
      const char *e = strchr(p, ',');
      size_t l = e ? (size_t)(e - p) : strlen(p);
      if (l == len && !strncmp(p, an, len)) {
        found = 1;
        break;
      }
      if (!e) break;
      p = e + 1;
    }
    if (!found) {
      pr__errf(L->err, L->err_len, "node '%s' (%s): attribute '%s' not supported",
               pr__mnode_name(n), n->op_type, an);
      return PR_ERR_UNSUPPORTED;
    }
  }
  if (op->max_inputs && n->n_in > op->max_inputs) {
    pr__errf(L->err, L->err_len, "node '%s' (%s): %d inputs, at most %d allowed", pr__mnode_name(n),
             n->op_type, n->n_in, op->max_inputs);
    return PR_ERR_INVALID;
  }
  if (op->check) return op->check(n, L->m->opset, L->err, L->err_len);
  return PR_OK;
}

static pr_status_t read_opset(loader_t *L, const Onnx__ModelProto *mp) {
  pr_model_t *m = L->m;
  m->opset = -1;
  for (size_t i = 0; i < mp->n_opset_import; i++) {
    const char *d = mp->opset_import[i]->domain;
    if (!d || !*d || !strcmp(d, "ai.onnx")) m->opset = (int)mp->opset_import[i]->version;
  }
  if (m->opset < 0) m->opset = 1;
  /* each node's operator version is then checked against what its kernel
   * implements (pr_op_t.min_opset, its attributes and inputs) */
  if (m->opset < 1 || m->opset > PR_MAX_OPSET) {
    pr__errf(L->err, L->err_len, "opset %d not supported (1 to %d are)", m->opset, PR_MAX_OPSET);
    return PR_ERR_UNSUPPORTED;
  }
  return PR_OK;
}

static pr_status_t load_initializers(loader_t *L, const Onnx__GraphProto *g) {
  pr_model_t *m = L->m;
  pr_status_t st;
  for (size_t i = 0; i < g->n_initializer; i++) {
    Onnx__TensorProto *tp = g->initializer[i]; /* the loader's: its bytes may be taken */
    if (!tp->name || !*tp->name) {
      pr__errf(L->err, L->err_len, "initializer %zu has no name", i);
      return PR_ERR_INVALID;
    }
    int idx = value_index(L, tp->name, 1);
    if (idx < 0) return PR_ERR_NOMEM;
    if (m->values[idx].init) {
      pr__errf(L->err, L->err_len, "initializer '%s' defined twice", tp->name);
      return PR_ERR_INVALID;
    }
    pr_tensor_t *t;
    if ((st = pr__tensor_from_proto(tp, L->base_dir, &t, L->err, L->err_len))) return st;
    pr_mvalue_t *v = &m->values[idx];
    v->init = t;
    v->defined = true;
    v->dtype = t->dtype;
    v->rank = t->rank;
    memcpy(v->dims, t->dims, sizeof v->dims);
  }
  if (g->n_sparse_initializer) {
    pr__errf(L->err, L->err_len, "sparse initializers not supported");
    return PR_ERR_UNSUPPORTED;
  }
  return PR_OK;
}

/* Graph inputs; an input that is also an initializer is a constant. */
static pr_status_t load_inputs(loader_t *L, const Onnx__GraphProto *g) {
  pr_model_t *m = L->m;
  pr_status_t st;
  m->inputs = calloc(g->n_input + 1, sizeof(int));
  if (!m->inputs) return PR_ERR_NOMEM;
  for (size_t i = 0; i < g->n_input; i++) {
    const Onnx__ValueInfoProto *vi = g->input[i];
    if (!vi->name || !*vi->name) {
      pr__errf(L->err, L->err_len, "graph input %zu has no name", i);
      return PR_ERR_INVALID;
    }
    int idx = value_index(L, vi->name, 1);
    if (idx < 0) return PR_ERR_NOMEM;
    if (m->values[idx].init) continue;
    for (int k = 0; k < m->n_inputs; k++)
      if (m->inputs[k] == idx) {
        pr__errf(L->err, L->err_len, "graph input '%s' listed twice", vi->name);
        return PR_ERR_INVALID;
      }
    if ((st = read_value_info(L, vi, idx))) return st;
    /* a body's inputs may leave type and shape to its node (known when it
     * runs) */
    bool body = L->parent != NULL;
    if (!pr_dtype_size(m->values[idx].dtype) && !(body && !m->values[idx].dtype)) {
      pr__errf(L->err, L->err_len, "graph input '%s': element type %d not supported", vi->name,
               m->values[idx].dtype);
      return PR_ERR_UNSUPPORTED;
    }
    if (m->values[idx].rank < 0 && !body) {
      pr__errf(L->err, L->err_len, "graph input '%s' has no shape", vi->name);
      return PR_ERR_UNSUPPORTED;
    }
    m->values[idx].defined = true;
    m->inputs[m->n_inputs++] = idx;
  }
  m->n_formal = m->n_inputs;
  return PR_OK;
}

/* Checks what the graph's order and limits require of node np (named nm). */
static pr_status_t check_node_proto(loader_t *L, const Onnx__NodeProto *np, const char *nm,
                                    const char *ot) {
  if (np->domain && *np->domain && strcmp(np->domain, "ai.onnx")) {
    pr__errf(L->err, L->err_len, "node '%s' (%s): domain '%s' not supported", nm, ot, np->domain);
    return PR_ERR_UNSUPPORTED;
  }
  if (np->n_input > INT_MAX / 8 || np->n_output > INT_MAX / 8) {
    pr__errf(L->err, L->err_len, "node '%s' (%s): too many inputs or outputs", nm, ot);
    return PR_ERR_INVALID;
  }
  for (size_t k = 0; k < np->n_input; k++) {
    const char *in = np->input[k];
    if (!in || !*in) continue;
    int idx = value_index(L, in, 0);
    if (idx < 0 || !L->m->values[idx].defined) idx = outer_value(L, in);
    if (idx < 0) {
      pr__errf(L->err, L->err_len, "node '%s' (%s): input '%s' is not defined before it", nm, ot,
               in);
      return PR_ERR_INVALID;
    }
  }
  return PR_OK;
}

static pr_status_t add_constant(loader_t *L, const Onnx__NodeProto *np, const char *nm) {
  if (np->n_output != 1 || !np->output[0] || !*np->output[0]) {
    pr__errf(L->err, L->err_len, "node '%s' (Constant): needs one output", nm);
    return PR_ERR_INVALID;
  }
  int idx = value_index(L, np->output[0], 1);
  if (idx < 0) return PR_ERR_NOMEM;
  if (L->m->values[idx].init) {
    pr__errf(L->err, L->err_len, "value '%s' defined twice", np->output[0]);
    return PR_ERR_INVALID;
  }
  return load_constant(L, np, idx);
}

/* Value indices of n's inputs and (new) outputs. */
static pr_status_t link_node(loader_t *L, const Onnx__NodeProto *np, pr_mnode_t *n, const char *nm,
                             const char *ot) {
  for (size_t k = 0; k < np->n_input; k++)
    n->in[k] = (np->input[k] && *np->input[k]) ? value_index(L, np->input[k], 0) : -1;
  for (size_t k = 0; k < np->n_output; k++) {
    const char *on = np->output[k];
    if (!on || !*on) {
      n->out[k] = -1;
      continue;
    }
    int idx = value_index(L, on, 0);
    if (idx >= 0) {
      pr__errf(L->err, L->err_len, "node '%s' (%s): output '%s' defined twice", nm, ot, on);
      return PR_ERR_INVALID;
    }
    if ((idx = value_index(L, on, 1)) < 0) return PR_ERR_NOMEM;
    L->m->values[idx].defined = true;
    n->out[k] = idx;
  }
  return PR_OK;
}

/* The outer-scope values n's subgraphs read become its last inputs. */
static pr_status_t add_implicit(loader_t *L, pr_mnode_t *n) {
  if (!L->n_implicit) return PR_OK;
  if (L->n_implicit > INT_MAX / 8 - n->n_in) return PR_ERR_INVALID;
  int *in = realloc(n->in, sizeof(int) * (size_t)(n->n_in + L->n_implicit + 1));
  if (!in) return PR_ERR_NOMEM;
  n->in = in;
  memcpy(in + n->n_in, L->implicit, sizeof(int) * (size_t)L->n_implicit);
  n->n_in += L->n_implicit;
  n->n_implicit = L->n_implicit;
  L->n_implicit = 0;
  return PR_OK;
}

static pr_status_t add_node(loader_t *L, const Onnx__NodeProto *np, const char *nm,
                            const char *ot) {
  pr_model_t *m = L->m;
  pr_status_t st;
  pr_mnode_t *n = &m->nodes[m->n_nodes];
  n->name = pr__strdup(nm);
  n->op_type = pr__strdup(ot);
  n->in = calloc(np->n_input + 1, sizeof(int));
  n->out = calloc(np->n_output + 1, sizeof(int));
  n->attrs = calloc(np->n_attribute + 1, sizeof *n->attrs);
  if (!n->name || !n->op_type || !n->in || !n->out || !n->attrs) return PR_ERR_NOMEM;
  m->n_nodes++;
  n->n_in = (int)np->n_input;
  n->n_out = (int)np->n_output;
  /* attributes first: subgraphs see the values defined before this node,
   * not its outputs */
  L->n_implicit = 0;
  for (size_t k = 0; k < np->n_attribute; k++) {
    n->n_attrs++;
    if ((st = convert_attr(L, np, np->attribute[k], &n->attrs[k]))) return st;
  }
  if ((st = add_implicit(L, n))) return st;
  if ((st = link_node(L, np, n, nm, ot))) return st;
  n->op = pr__op_find(ot);
  if (!n->op) {
    pr__errf(L->err, L->err_len, "node '%s': operator %s not supported", nm, ot);
    return PR_ERR_UNSUPPORTED;
  }
  if (m->opset < n->op->min_opset) {
    pr__errf(L->err, L->err_len,
             "node '%s' (%s): the version of %s in opset %d is not implemented (opset %d and later "
             "are)",
             nm, ot, ot, m->opset, n->op->min_opset);
    return PR_ERR_UNSUPPORTED;
  }
  return check_node_attrs(L, n);
}

/* Nodes, in file order, which ONNX requires to be topological. */
static pr_status_t load_nodes(loader_t *L, const Onnx__GraphProto *g) {
  pr_status_t st;
  L->m->nodes = calloc(g->n_node + 1, sizeof *L->m->nodes);
  if (!L->m->nodes) return PR_ERR_NOMEM;
  for (size_t i = 0; i < g->n_node; i++) {
    const Onnx__NodeProto *np = g->node[i];
    const char *ot = np->op_type ? np->op_type : "";
    const char *nm = np->name && *np->name ? np->name : (np->n_output ? np->output[0] : "");
    if ((st = check_node_proto(L, np, nm, ot))) return st;
    st = !strcmp(ot, "Constant") ? add_constant(L, np, nm) : add_node(L, np, nm, ot);
    if (st) return st;
  }
  return PR_OK;
}

/* Graph outputs; their declared shapes (like those of intermediates) are only
 * hints: shapes are inferred. */
static pr_status_t load_outputs(loader_t *L, const Onnx__GraphProto *g) {
  pr_model_t *m = L->m;
  pr_status_t st;
  m->outputs = calloc(g->n_output + 1, sizeof(int));
  if (!m->outputs) return PR_ERR_NOMEM;
  for (size_t i = 0; i < g->n_output; i++) {
    const Onnx__ValueInfoProto *vi = g->output[i];
    int idx = vi->name ? value_index(L, vi->name, 0) : -1;
    if (idx < 0 && vi->name) idx = outer_value(L, vi->name);
    if (idx < 0) {
      pr__errf(L->err, L->err_len, "graph output '%s' is not produced by the graph",
               vi->name ? vi->name : "");
      return PR_ERR_INVALID;
    }
    if (vi->type && vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE &&
        vi->type->value_case != ONNX__TYPE_PROTO__VALUE__NOT_SET) {
      pr__errf(L->err, L->err_len, "graph output '%s': only tensor types are supported", vi->name);
      return PR_ERR_UNSUPPORTED;
    }
    if (m->values[idx].rank < 0 && (st = read_value_info(L, vi, idx))) return st;
    m->outputs[m->n_outputs++] = idx;
  }
  if (!m->n_outputs) {
    pr__errf(L->err, L->err_len, "graph has no outputs");
    return PR_ERR_INVALID;
  }
  return PR_OK;
}

static pr_status_t load_graph(loader_t *L, const Onnx__GraphProto *g) {
  pr_status_t st;
  if ((st = load_initializers(L, g)) || (st = load_inputs(L, g)) || (st = load_nodes(L, g)) ||
      (st = load_outputs(L, g)))
    return st;
  return PR_OK;
}

static pr_status_t build(loader_t *L, const Onnx__ModelProto *mp) {
  const Onnx__GraphProto *g = mp->graph;
  if (!g) {
    pr__errf(L->err, L->err_len, "model has no graph");
    return PR_ERR_INVALID;
  }
  pr_status_t st;
  if ((st = read_opset(L, mp)) || (st = load_graph(L, g))) return st;
  /* float16 models compute in float32 (half.c): the outputs' declared types */
  pr_dtype_t *out_types = calloc(g->n_output + 1, sizeof *out_types);
  if (!out_types) return PR_ERR_NOMEM;
  for (size_t i = 0; i < g->n_output; i++) {
    const Onnx__TypeProto *tp = g->output[i]->type;
    if (tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE &&
        tp->tensor_type->has_elem_type)
      out_types[i] = (pr_dtype_t)tp->tensor_type->elem_type;
  }
  st = pr__half_edges(L->m, out_types);
  free(out_types);
  if (st) pr__errf(L->err, L->err_len, "float16 model: out of memory");
  return st;
}

pr_status_t pr_engine_model_load_memory(const void *data, size_t len, const char *base_dir,
                                        pr_model_t **out, char *err, size_t err_len) {
  if (!data || !out) {
    pr__errf(err, err_len, "no model data");
    return PR_ERR_INVALID;
  }
  *out = NULL;
  /* protobuf-c's unpack recurses without a limit: the nesting is bounded
   * first (MAX_GRAPH_DEPTH below applies to what unpacks) */
  pr_status_t st =
      pr_engine__proto_prescan(data, len, &onnx__model_proto__descriptor, PR_PRESCAN_MAX_DEPTH,
                               PR_PRESCAN_MAX_ITEMS, err, err_len);
  if (st) return st;
  Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, len, data);
  if (!mp) {
    pr__errf(err, err_len, "not a valid ONNX model (protobuf parse failed)");
    return PR_ERR_INVALID;
  }
  pr_model_t *m = calloc(1, sizeof *m);
  if (!m) {
    onnx__model_proto__free_unpacked(mp, NULL);
    return PR_ERR_NOMEM;
  }
  pthread_mutex_init(&m->cache_lock, NULL);
  loader_t L = {.m = m, .base_dir = base_dir, .err = err, .err_len = err_len};
  pr__names_init(&L.names);
  st = build(&L, mp);
  pr__names_free(&L.names);
  free(L.implicit);
  onnx__model_proto__free_unpacked(mp, NULL);
  if (st) {
    pr_engine_model_destroy(m);
    return st;
  }
  pr__sha256_hex(data, len, m->sha256);
  *out = m;
  return PR_OK;
}

pr_status_t pr_engine_model_load_file(const char *path, pr_model_t **out, char *err,
                                      size_t err_len) {
  void *data;
  size_t len;
  if (pr__read_file(path, &data, &len, PR_MAX_MODEL_BYTES) < 0) {
    pr__errf(err, err_len, "cannot read %s: %s", path, pr__file_error(errno));
    return PR_ERR_IO;
  }
  char dir[4096];
  pr__dirname(path, dir, sizeof dir);
  pr_status_t st = pr_engine_model_load_memory(data, len, dir, out, err, err_len);
  free(data);
  return st;
}
