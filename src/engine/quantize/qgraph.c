/* The quantizer's view of an ONNX graph: the name index and the protobuf-c
 * builders (qgraph.h). */
#include "engine/quantize/qgraph.h"

#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/util.h"
#include "engine/tensor.h"

/* The id of name, added when new; -1 when out of memory. */
static int intern(pr_qz_index_t *ix, const char *name, int cap) {
  int id = pr__names_get(&ix->ids, name);
  if (id >= 0) return id;
  if (ix->n == cap || pr__names_put(&ix->ids, name, ix->n)) return -1;
  return ix->n++;
}

/* Every name the graph mentions, counted generously: each input, output and
 * initializer is at most one value. */
static int name_bound(const Onnx__GraphProto *g) {
  size_t n = g->n_input + g->n_output + g->n_initializer + 1;
  for (size_t i = 0; i < g->n_node; i++) n += g->node[i]->n_input + g->node[i]->n_output;
  return n > (size_t)(1 << 28) ? -1 : (int)n;
}

static pr_status_t index_alloc(pr_qz_index_t *ix, int cap) {
  ix->producer = malloc(sizeof(int) * (size_t)cap);
  ix->uses = calloc((size_t)cap, sizeof(int));
  ix->consumer = malloc(sizeof(int) * (size_t)cap);
  ix->init = malloc(sizeof(int) * (size_t)cap);
  ix->is_const = calloc((size_t)cap, sizeof(bool));
  ix->is_output = calloc((size_t)cap, sizeof(bool));
  ix->is_input = calloc((size_t)cap, sizeof(bool));
  if (!ix->producer || !ix->uses || !ix->consumer || !ix->init || !ix->is_const || !ix->is_output ||
      !ix->is_input)
    return PR_ERR_NOMEM;
  for (int i = 0; i < cap; i++) ix->producer[i] = ix->consumer[i] = ix->init[i] = -1;
  return PR_OK;
}

pr_status_t pr__qz_index_build(pr_qz_index_t *ix, Onnx__GraphProto *g) {
  memset(ix, 0, sizeof *ix);
  ix->g = g;
  pr__names_init(&ix->ids);
  int cap = name_bound(g), id;
  if (cap < 0 || index_alloc(ix, cap)) goto nomem;
  for (size_t i = 0; i < g->n_initializer; i++) {
    if ((id = intern(ix, g->initializer[i]->name, cap)) < 0) goto nomem;
    ix->init[id] = (int)i, ix->is_const[id] = true;
  }
  for (size_t i = 0; i < g->n_input; i++) {
    if ((id = intern(ix, g->input[i]->name, cap)) < 0) goto nomem;
    ix->is_input[id] = ix->init[id] < 0;
  }
  for (size_t i = 0; i < g->n_node; i++) {
    const Onnx__NodeProto *n = g->node[i];
    for (size_t k = 0; k < n->n_input; k++) {
      if (!n->input[k][0]) continue;
      if ((id = intern(ix, n->input[k], cap)) < 0) goto nomem;
      ix->uses[id]++, ix->consumer[id] = (int)i;
    }
    for (size_t k = 0; k < n->n_output; k++) {
      if (!n->output[k][0]) continue;
      if ((id = intern(ix, n->output[k], cap)) < 0) goto nomem;
      ix->producer[id] = (int)i;
      ix->is_const[id] = !strcmp(n->op_type, "Constant") && pr__qz_attr(n, "value");
    }
  }
  for (size_t i = 0; i < g->n_output; i++) {
    if ((id = intern(ix, g->output[i]->name, cap)) < 0) goto nomem;
    ix->is_output[id] = true;
  }
  return PR_OK;
nomem:
  pr__qz_index_free(ix);
  return PR_ERR_NOMEM;
}

void pr__qz_index_free(pr_qz_index_t *ix) {
  pr__names_free(&ix->ids);
  free(ix->producer), free(ix->uses), free(ix->consumer), free(ix->init);
  free(ix->is_const), free(ix->is_output), free(ix->is_input);
  memset(ix, 0, sizeof *ix);
}

int pr__qz_id(const pr_qz_index_t *ix, const char *name) {
  return name && name[0] ? pr__names_get(&ix->ids, name) : -1;
}

Onnx__TensorProto *pr__qz_const_proto(const pr_qz_index_t *ix, const char *name) {
  int id = pr__qz_id(ix, name);
  if (id < 0 || !ix->is_const[id]) return NULL;
  if (ix->init[id] >= 0) return ix->g->initializer[ix->init[id]];
  const Onnx__AttributeProto *a = pr__qz_attr(ix->g->node[ix->producer[id]], "value");
  return a ? a->t : NULL;
}

/* Copies tp's inline float data (raw or typed) into a new tensor; NULL
 * when its size does not match its shape or memory runs out. */
static pr_tensor_t *inline_float(const Onnx__TensorProto *tp) {
  if (tp->n_dims > PR_MAX_RANK) return NULL;
  pr_tensor_t *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->dtype = PR_DTYPE_FLOAT;
  t->rank = (int)tp->n_dims;
  int64_t n = 1;
  for (int k = 0; k < t->rank; k++) {
    t->dims[k] = tp->dims[k];
    if (tp->dims[k] < 0 || (tp->dims[k] && n > INT64_MAX / 4 / tp->dims[k])) n = -1;
    if (n >= 0) n *= tp->dims[k];
  }
  size_t have = tp->has_raw_data ? tp->raw_data.len / 4 : tp->n_float_data;
  t->data = n >= 0 && (size_t)n == have ? pr__aligned_alloc((size_t)n * 4) : NULL;
  if (!t->data) {
    free(t);
    return NULL;
  }
  memcpy(t->data, tp->has_raw_data ? (const void *)tp->raw_data.data : tp->float_data,
         (size_t)n * 4);
  return t;
}

pr_status_t pr__qz_const_float(const pr_qz_index_t *ix, const char *name, const char *base_dir,
                               pr_tensor_t **out, char *err, size_t err_len) {
  const Onnx__TensorProto *tp = pr__qz_const_proto(ix, name);
  *out = NULL;
  if (!tp) return PR_ERR_NOT_FOUND;
  if (tp->data_type != PR_DTYPE_FLOAT) return PR_ERR_UNSUPPORTED;
  /* inline data copied here: pr__tensor_from_proto takes over a raw_data
   * buffer, and the model keeps this one */
  if (!(tp->has_data_location &&
        tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)) {
    if ((*out = inline_float(tp))) return PR_OK;
    pr__errf(err, err_len, "tensor '%.200s': its data does not fit its shape", name);
    return PR_ERR_INVALID;
  }
  /* external data: read from its file, nothing of tp is taken */
  return pr__tensor_from_proto((Onnx__TensorProto *)tp, base_dir, out, err, err_len);
}

const Onnx__AttributeProto *pr__qz_attr(const Onnx__NodeProto *n, const char *name) {
  for (size_t i = 0; i < n->n_attribute; i++)
    if (n->attribute[i]->name && !strcmp(n->attribute[i]->name, name)) return n->attribute[i];
  return NULL;
}

int64_t pr__qz_attr_int(const Onnx__NodeProto *n, const char *name, int64_t def) {
  const Onnx__AttributeProto *a = pr__qz_attr(n, name);
  return a && a->has_i ? a->i : def;
}

float pr__qz_attr_float(const Onnx__NodeProto *n, const char *name, float def) {
  const Onnx__AttributeProto *a = pr__qz_attr(n, name);
  return a && a->has_f ? a->f : def;
}

const char *pr__qz_node_name(const Onnx__NodeProto *n) {
  if (n->name && n->name[0]) return n->name;
  return n->n_output ? n->output[0] : "";
}

pr_status_t pr__qz_list_push(Onnx__NodeProto ***list, size_t *n, size_t *cap,
                             Onnx__NodeProto *node) {
  if (*n == *cap) {
    size_t grown = *cap * 2 + 16;
    Onnx__NodeProto **l = realloc(*list, sizeof *l * grown);
    if (!l) return PR_ERR_NOMEM;
    *list = l, *cap = grown;
  }
  (*list)[(*n)++] = node;
  return PR_OK;
}

/* ---- builders ---- */

static char **strings_new(int n, const char *const *s) {
  char **out = calloc((size_t)n + 1, sizeof *out);
  for (int k = 0; out && k < n; k++)
    if (!(out[k] = strdup(s[k]))) {
      while (k--) free(out[k]);
      free(out);
      return NULL;
    }
  return out;
}

Onnx__NodeProto *pr__qz_node_new(const char *op, const char *name, int n_in, const char *const *in,
                                 int n_out, const char *const *out) {
  Onnx__NodeProto *n = malloc(sizeof *n);
  if (!n) return NULL;
  onnx__node_proto__init(n);
  n->op_type = strdup(op);
  n->name = strdup(name);
  n->input = strings_new(n_in, in);
  n->output = strings_new(n_out, out);
  n->n_input = n->input ? (size_t)n_in : 0;
  n->n_output = n->output ? (size_t)n_out : 0;
  if (!n->op_type || !n->name || !n->input || !n->output) {
    onnx__node_proto__free_unpacked(n, NULL);
    return NULL;
  }
  return n;
}

/* Appends a new attribute of name and type to n; NULL when out of memory. */
static Onnx__AttributeProto *attr_add(Onnx__NodeProto *n, const char *name,
                                      Onnx__AttributeProto__AttributeType type) {
  Onnx__AttributeProto **list = realloc(n->attribute, sizeof *list * (n->n_attribute + 1));
  if (!list) return NULL;
  n->attribute = list;
  Onnx__AttributeProto *a = malloc(sizeof *a);
  if (!a) return NULL;
  onnx__attribute_proto__init(a);
  if (!(a->name = strdup(name))) {
    free(a);
    return NULL;
  }
  a->has_type = 1, a->type = type;
  list[n->n_attribute++] = a;
  return a;
}

pr_status_t pr__qz_node_set_int(Onnx__NodeProto *n, const char *name, int64_t v) {
  pr__qz_node_drop_attr(n, name);
  Onnx__AttributeProto *a = attr_add(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
  if (!a) return PR_ERR_NOMEM;
  a->has_i = 1, a->i = v;
  return PR_OK;
}

pr_status_t pr__qz_node_set_input(Onnx__NodeProto *n, int k, const char *name) {
  char *s = strdup(name);
  if (!s) return PR_ERR_NOMEM;
  free(n->input[k]);
  n->input[k] = s;
  return PR_OK;
}

pr_status_t pr__qz_node_add_input(Onnx__NodeProto *n, const char *name) {
  char **list = realloc(n->input, sizeof *list * (n->n_input + 1)), *s;
  if (!list) return PR_ERR_NOMEM;
  n->input = list;
  if (!(s = strdup(name))) return PR_ERR_NOMEM;
  list[n->n_input++] = s;
  return PR_OK;
}

void pr__qz_node_drop_attr(Onnx__NodeProto *n, const char *name) {
  for (size_t i = 0; i < n->n_attribute; i++)
    if (n->attribute[i]->name && !strcmp(n->attribute[i]->name, name)) {
      onnx__attribute_proto__free_unpacked(n->attribute[i], NULL);
      memmove(&n->attribute[i], &n->attribute[i + 1],
              sizeof *n->attribute * (n->n_attribute - i - 1));
      n->n_attribute--;
      return;
    }
}

Onnx__TensorProto *pr__qz_tensor_new(const char *name, pr_dtype_t dtype, int rank,
                                     const int64_t *dims, const void *data, size_t nbytes) {
  Onnx__TensorProto *t = malloc(sizeof *t);
  if (!t) return NULL;
  onnx__tensor_proto__init(t);
  t->name = strdup(name);
  t->dims = malloc(sizeof(int64_t) * ((size_t)rank + 1));
  t->raw_data.data = malloc(nbytes ? nbytes : 1);
  if (!t->name || !t->dims || !t->raw_data.data) {
    onnx__tensor_proto__free_unpacked(t, NULL);
    return NULL;
  }
  t->n_dims = (size_t)rank;
  if (rank) memcpy(t->dims, dims, sizeof(int64_t) * (size_t)rank);
  t->has_data_type = 1, t->data_type = (int32_t)dtype;
  t->has_raw_data = 1, t->raw_data.len = nbytes;
  if (nbytes) memcpy(t->raw_data.data, data, nbytes);
  return t;
}

pr_status_t pr__qz_add_init(Onnx__GraphProto *g, Onnx__TensorProto *t) {
  Onnx__TensorProto **list = realloc(g->initializer, sizeof *list * (g->n_initializer + 1));
  if (!list) {
    onnx__tensor_proto__free_unpacked(t, NULL);
    return PR_ERR_NOMEM;
  }
  g->initializer = list;
  list[g->n_initializer++] = t;
  return PR_OK;
}

Onnx__ValueInfoProto *pr__qz_value_info_new(const char *name, int elem) {
  Onnx__ValueInfoProto *v = malloc(sizeof *v);
  Onnx__TypeProto *tp = malloc(sizeof *tp);
  Onnx__TypeProto__Tensor *tt = malloc(sizeof *tt);
  char *s = strdup(name);
  if (!v || !tp || !tt || !s) {
    free(v), free(tp), free(tt), free(s);
    return NULL;
  }
  onnx__value_info_proto__init(v);
  onnx__type_proto__init(tp);
  onnx__type_proto__tensor__init(tt);
  tt->has_elem_type = elem != 0, tt->elem_type = elem;
  tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
  tp->tensor_type = tt;
  v->name = s;
  v->type = tp;
  return v;
}

char *pr__qz_name(const char *base, const char *suffix) {
  size_t a = strlen(base), b = strlen(suffix);
  char *s = malloc(a + b + 1);
  if (!s) return NULL;
  memcpy(s, base, a);
  memcpy(s + a, suffix, b + 1);
  return s;
}

/* True when node i of ix's graph is an Identity of a constant whose output
 * is not a graph output. */
static bool identity_of_const(const pr_qz_index_t *ix, int i) {
  const Onnx__NodeProto *n = ix->g->node[i];
  if (strcmp(n->op_type, "Identity") || n->n_input != 1 || n->n_output != 1) return false;
  int in = pr__qz_id(ix, n->input[0]), out = pr__qz_id(ix, n->output[0]);
  return in >= 0 && ix->is_const[in] && out >= 0 && !ix->is_output[out];
}

pr_status_t pr__qz_bypass_identity(Onnx__GraphProto *g) {
  pr_qz_index_t ix;
  if (pr__qz_index_build(&ix, g)) return PR_ERR_NOMEM;
  /* the new names first, the node inputs replaced after the index (which
   * borrows names of g, perhaps a node input's) is gone */
  size_t n_in = 0;
  for (size_t i = 0; i < g->n_node; i++) n_in += g->node[i]->n_input;
  char **repl = calloc(n_in + 1, sizeof *repl);
  pr_status_t st = repl ? PR_OK : PR_ERR_NOMEM;
  for (size_t i = 0, at = 0; i < g->n_node && !st; i++) {
    const Onnx__NodeProto *m = g->node[i];
    for (size_t k = 0; k < m->n_input && !st; k++, at++) {
      int id = pr__qz_id(&ix, m->input[k]);
      int p = id >= 0 ? ix.producer[id] : -1;
      if (p >= 0 && identity_of_const(&ix, p) && !(repl[at] = strdup(g->node[p]->input[0])))
        st = PR_ERR_NOMEM;
    }
  }
  pr__qz_index_free(&ix);
  for (size_t i = 0, at = 0; repl && i < g->n_node; i++) {
    Onnx__NodeProto *m = g->node[i];
    for (size_t k = 0; k < m->n_input; k++, at++) {
      if (!repl[at]) continue;
      if (st) {
        free(repl[at]);
        continue;
      }
      free(m->input[k]);
      m->input[k] = repl[at];
    }
  }
  free(repl);
  return st;
}
