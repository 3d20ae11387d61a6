#include "model_builder.h"

#include "packrat/engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx.pb-c.h"

struct mb {
  Onnx__ModelProto model;
  Onnx__GraphProto graph;
  Onnx__OperatorSetIdProto opset, *opsets[1];
};

#define PUSH(arr, n, item)                              \
  do {                                                  \
    (arr) = realloc((arr), sizeof(*(arr)) * ((n) + 1)); \
    (arr)[(n)++] = (item);                              \
  } while (0)

mb_t *mb_new(int opset) {
  mb_t *b = calloc(1, sizeof *b);
  onnx__model_proto__init(&b->model);
  onnx__graph_proto__init(&b->graph);
  onnx__operator_set_id_proto__init(&b->opset);
  b->opset.domain = strdup("");
  b->opset.has_version = 1;
  b->opset.version = opset;
  b->opsets[0] = &b->opset;
  b->model.n_opset_import = 1;
  b->model.opset_import = b->opsets;
  b->model.has_ir_version = 1;
  b->model.ir_version = 8;
  b->model.graph = &b->graph;
  b->graph.name = strdup("test");
  return b;
}

static Onnx__ValueInfoProto *value_info(const char *name, int elem_type, int rank,
                                        const int64_t *dims) {
  Onnx__ValueInfoProto *vi = calloc(1, sizeof *vi);
  onnx__value_info_proto__init(vi);
  vi->name = strdup(name);
  if (elem_type) {
    Onnx__TypeProto *tp = calloc(1, sizeof *tp);
    onnx__type_proto__init(tp);
    Onnx__TypeProto__Tensor *tt = calloc(1, sizeof *tt);
    onnx__type_proto__tensor__init(tt);
    tt->has_elem_type = 1;
    tt->elem_type = elem_type;
    Onnx__TensorShapeProto *sp = calloc(1, sizeof *sp);
    onnx__tensor_shape_proto__init(sp);
    for (int k = 0; k < rank; k++) {
      Onnx__TensorShapeProto__Dimension *d = calloc(1, sizeof *d);
      onnx__tensor_shape_proto__dimension__init(d);
      if (dims[k] >= 0) {
        d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        d->dim_value = dims[k];
      } else {
        char nm[16];
        snprintf(nm, sizeof nm, k == 0 ? "batch" : "d%d", k);
        d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
        d->dim_param = strdup(nm);
      }
      PUSH(sp->dim, sp->n_dim, d);
    }
    if (rank >= 0)
      tt->shape = sp;
    else
      free(sp); /* no shape: a body's input its node shapes */
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    vi->type = tp;
  }
  return vi;
}

void mb_input(mb_t *b, const char *name, int elem_type, int rank, const int64_t *dims) {
  PUSH(b->graph.input, b->graph.n_input, value_info(name, elem_type, rank, dims));
}

void mb_output(mb_t *b, const char *name) {
  PUSH(b->graph.output, b->graph.n_output, value_info(name, 0, 0, NULL));
}

static Onnx__TensorProto *new_tensor(const char *name, int elem_type, int rank,
                                     const int64_t *dims) {
  Onnx__TensorProto *t = calloc(1, sizeof *t);
  onnx__tensor_proto__init(t);
  t->name = strdup(name);
  t->has_data_type = 1;
  t->data_type = elem_type;
  t->n_dims = (size_t)rank;
  t->dims = calloc((size_t)rank + 1, sizeof(int64_t));
  if (rank) memcpy(t->dims, dims, sizeof(int64_t) * (size_t)rank);
  return t;
}

void mb_init(mb_t *b, const char *name, int elem_type, int rank, const int64_t *dims,
             const void *data, size_t nbytes) {
  Onnx__TensorProto *t = new_tensor(name, elem_type, rank, dims);
  t->has_raw_data = 1;
  t->raw_data.len = nbytes;
  t->raw_data.data = malloc(nbytes + 1);
  memcpy(t->raw_data.data, data, nbytes);
  PUSH(b->graph.initializer, b->graph.n_initializer, t);
}

static Onnx__StringStringEntryProto *entry(const char *k, const char *v) {
  Onnx__StringStringEntryProto *e = calloc(1, sizeof *e);
  onnx__string_string_entry_proto__init(e);
  e->key = strdup(k);
  e->value = strdup(v);
  return e;
}

void mb_init_external(mb_t *b, const char *name, int elem_type, int rank, const int64_t *dims,
                      const char *location, long offset, long length) {
  Onnx__TensorProto *t = new_tensor(name, elem_type, rank, dims);
  t->has_data_location = 1;
  t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
  char num[32];
  PUSH(t->external_data, t->n_external_data, entry("location", location));
  snprintf(num, sizeof num, "%ld", offset);
  PUSH(t->external_data, t->n_external_data, entry("offset", num));
  snprintf(num, sizeof num, "%ld", length);
  PUSH(t->external_data, t->n_external_data, entry("length", num));
  PUSH(b->graph.initializer, b->graph.n_initializer, t);
}

int mb_node(mb_t *b, const char *op, const char *name, const char *const *inputs,
            const char *const *outputs) {
  Onnx__NodeProto *n = calloc(1, sizeof *n);
  onnx__node_proto__init(n);
  n->op_type = strdup(op);
  n->name = strdup(name);
  for (; inputs && *inputs; inputs++) PUSH(n->input, n->n_input, strdup(*inputs));
  for (; outputs && *outputs; outputs++) PUSH(n->output, n->n_output, strdup(*outputs));
  PUSH(b->graph.node, b->graph.n_node, n);
  return (int)b->graph.n_node - 1;
}

static Onnx__AttributeProto *attr(mb_t *b, int node, const char *name, int type) {
  Onnx__AttributeProto *a = calloc(1, sizeof *a);
  onnx__attribute_proto__init(a);
  a->name = strdup(name);
  a->has_type = 1;
  a->type = type;
  Onnx__NodeProto *n = b->graph.node[node];
  PUSH(n->attribute, n->n_attribute, a);
  return a;
}

void mb_attr_int(mb_t *b, int node, const char *name, int64_t v) {
  Onnx__AttributeProto *a = attr(b, node, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
  a->has_i = 1;
  a->i = v;
}

void mb_attr_float(mb_t *b, int node, const char *name, float v) {
  Onnx__AttributeProto *a = attr(b, node, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
  a->has_f = 1;
  a->f = v;
}

void mb_attr_ints(mb_t *b, int node, const char *name, int n, const int64_t *v) {
  Onnx__AttributeProto *a = attr(b, node, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
  a->n_ints = (size_t)n;
  a->ints = calloc((size_t)n + 1, sizeof(int64_t));
  memcpy(a->ints, v, sizeof(int64_t) * (size_t)n);
}

void mb_attr_string(mb_t *b, int node, const char *name, const char *v) {
  Onnx__AttributeProto *a = attr(b, node, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
  a->has_s = 1;
  a->s.len = strlen(v);
  a->s.data = (uint8_t *)strdup(v);
}

void mb_attr_graph(mb_t *b, int node, const char *name, mb_t *body) {
  Onnx__AttributeProto *a = attr(b, node, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH);
  a->g = malloc(sizeof *a->g);
  *a->g = body->graph; /* its parts are malloc'd: freed with the node */
  free(body->opset.domain);
  free(body);
}

void mb_finish(mb_t *b, void **data, size_t *len) {
  b->model.opset_import = b->opsets;
  *len = onnx__model_proto__get_packed_size(&b->model);
  *data = malloc(*len + 1);
  onnx__model_proto__pack(&b->model, *data);
  /* every field was malloc'd, so the generated free functions release them */
  Onnx__GraphProto *g = &b->graph;
  /* free the graph's heap parts with the generated helpers */
  for (size_t i = 0; i < g->n_node; i++) onnx__node_proto__free_unpacked(g->node[i], NULL);
  for (size_t i = 0; i < g->n_input; i++) onnx__value_info_proto__free_unpacked(g->input[i], NULL);
  for (size_t i = 0; i < g->n_output; i++)
    onnx__value_info_proto__free_unpacked(g->output[i], NULL);
  for (size_t i = 0; i < g->n_initializer; i++)
    onnx__tensor_proto__free_unpacked(g->initializer[i], NULL);
  free(g->node);
  free(g->input);
  free(g->output);
  free(g->initializer);
  free(g->name);
  free(b->opset.domain);
  free(b);
}

struct pr_model *mb_load(mb_t *b, char *err, size_t err_len) {
  void *data;
  size_t len;
  mb_finish(b, &data, &len);
  pr_model_t *m = NULL;
  if (pr_engine_model_load_memory(data, len, NULL, &m, err, err_len)) m = NULL;
  free(data);
  return m;
}

struct pr_model *mb_neg_model(int rank, const int64_t *dims, char *err, size_t err_len) {
  mb_t *b = mb_new(13);
  mb_input(b, "x", PR_DTYPE_FLOAT, rank, dims);
  mb_node(b, "Neg", "neg", (const char *[]){"x", NULL}, (const char *[]){"y", NULL});
  mb_output(b, "y");
  return mb_load(b, err, err_len);
}
