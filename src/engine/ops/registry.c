/* Operator registry and attribute accessors. */
#include <string.h>

#include "engine/graph.h"
#include "engine/ops/ops.h"

static const pr_op_t *const ops[] = {
#define X(name) &pr__op_##name,
    PR_OPS_LIST
#undef X
};
_Static_assert(sizeof ops / sizeof ops[0] == PR_OP_COUNT,
               "PR_OP_COUNT differs from the entries of PR_OPS_LIST (ops.h)");

const pr_op_t *pr__op_find(const char *name) {
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    if (!strcmp(ops[i]->name, name)) return ops[i];
  return NULL;
}

int pr_engine_op_count(void) {
  return PR_OP_COUNT;
}

pr_status_t pr_engine_op(int i, const char **name, int *min_opset) {
  if (i < 0 || i >= PR_OP_COUNT) return PR_ERR_INVALID;
  *name = ops[i]->name;
  *min_opset = ops[i]->min_opset;
  return PR_OK;
}

const pr_attr_t *pr__attr_find(const pr_mnode_t *m, const char *name) {
  if (!m) return NULL;
  for (int i = 0; i < m->n_attrs; i++)
    if (!strcmp(m->attrs[i].name, name)) return &m->attrs[i];
  return NULL;
}

int64_t pr__attr_int(const pr_mnode_t *m, const char *name, int64_t def) {
  const pr_attr_t *a = pr__attr_find(m, name);
  return a && a->type == PR_ATTR_INT ? a->i : def;
}

float pr__attr_float(const pr_mnode_t *m, const char *name, float def) {
  const pr_attr_t *a = pr__attr_find(m, name);
  return a && a->type == PR_ATTR_FLOAT ? a->f : def;
}

const char *pr__attr_string(const pr_mnode_t *m, const char *name, const char *def) {
  const pr_attr_t *a = pr__attr_find(m, name);
  return a && a->type == PR_ATTR_STRING ? a->s : def;
}

int pr__attr_ints(const pr_mnode_t *m, const char *name, const int64_t **vals) {
  const pr_attr_t *a = pr__attr_find(m, name);
  if (!a || a->type != PR_ATTR_INTS) return 0;
  *vals = a->ints;
  return a->n;
}

int pr__attr_floats(const pr_mnode_t *m, const char *name, const float **vals) {
  const pr_attr_t *a = pr__attr_find(m, name);
  if (!a || a->type != PR_ATTR_FLOATS) return 0;
  *vals = a->floats;
  return a->n;
}

const char *pr__attr_strings_at(const pr_attr_t *a, int k) {
  if (!a || a->type != PR_ATTR_STRINGS || k < 0 || k >= a->n) return NULL;
  const char *p = a->s;
  while (k--) p += strlen(p) + 1;
  return p;
}
