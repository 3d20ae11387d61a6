/* ONNX model loading: protobuf-c ModelProto -> pr_model_t.
 *
 * Everything read from the file is validated here: sizes, element counts,
 * value references, topological order, operator support. After a successful
 * load the model is immutable. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "base/util.h"
#include "engine/graph.h"
#include "engine/names.h"
#include "engine/tensor.h"
#include "onnx.pb-c.h"

#define MAX_MODEL_BYTES ((size_t)4 << 30)

typedef struct {
  pr_model_t *m;
  pr_names_t names;
  const char *base_dir;
  char *err;
  size_t err_len;
} loader_t;

static int value_index(loader_t *L, const char *name, int create) {
  int idx = pr_names_get(&L->names, name);
  if (idx >= 0 || !create) return idx;
  pr_model_t *m = L->m;
  pr_mvalue_t *nv = realloc(m->values, sizeof *nv * (size_t)(m->n_values + 1));
  if (!nv) return -1;
  m->values = nv;
  pr_mvalue_t *v = &m->values[m->n_values];
  memset(v, 0, sizeof *v);
  v->name = pr_strdup(name);
  v->rank = -1;
  if (!v->name || pr_names_put(&L->names, v->name, m->n_values) < 0) return -1;
  return m->n_values++;
}

/* s (untrusted bytes) made safe to put in a message: printable ASCII kept,
 * other bytes as '?', cut to fit out. */
static void safe_text(const char *s, char *out, size_t len) {
  size_t i = 0;
  for (; s[i] && i + 1 < len; i++) out[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
  out[i] = 0;
  if (s[i] && len > 4) memcpy(out + len - 4, "...", 4);
}

static bool has_dotdot_component(const char *path) {
  for (const char *p = path;; p++) {
    const char *end = strchr(p, '/');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    if (n == 2 && p[0] == '.' && p[1] == '.') return true;
    if (!end) return false;
    p = end;
  }
}

/* Opens the external data file `location` names, relative to the model's
 * folder. The location is untrusted: an absolute path, a '..' component, or
 * one that resolves (through symlinks) outside the folder is refused, so a
 * model can only read files inside its own folder. A symlink inside the
 * folder pointing inside it is fine. Only regular files are read. */
static pr_status_t open_external(loader_t *L, const Onnx__TensorProto *tp, const char *location,
                                 FILE **out) {
  char shown[160], base[PATH_MAX], joined[2 * PATH_MAX], real[PATH_MAX];
  safe_text(location, shown, sizeof shown);
  if (location[0] == '/' || has_dotdot_component(location)) {
    pr_errf(L->err, L->err_len,
            "tensor '%s': external data location '%s' is refused (absolute or with a '..' "
            "component)",
            tp->name, shown);
    return PR_ERR_INVALID;
  }
  const char *dir = L->base_dir ? L->base_dir : ".";
  if (!realpath(dir, base)) {
    pr_errf(L->err, L->err_len, "tensor '%s': cannot resolve the model's folder: %s", tp->name,
            strerror(errno));
    return PR_ERR_IO;
  }
  if ((size_t)snprintf(joined, sizeof joined, "%s/%s", base, location) >= sizeof joined) {
    pr_errf(L->err, L->err_len, "tensor '%s': external data location '%s' too long", tp->name,
            shown);
    return PR_ERR_INVALID;
  }
  if (!realpath(joined, real)) {
    pr_errf(L->err, L->err_len, "tensor '%s': cannot open external data '%s': %s", tp->name, shown,
            strerror(errno));
    return PR_ERR_IO;
  }
  size_t bl = strlen(base);
  if (strncmp(real, base, bl) || (base[bl - 1] != '/' && real[bl] != '/')) {
    pr_errf(L->err, L->err_len,
            "tensor '%s': external data location '%s' resolves outside the model's folder",
            tp->name, shown);
    return PR_ERR_INVALID;
  }
  /* the resolved path has no symlinks; O_NOFOLLOW refuses one swapped in
   * since; O_NONBLOCK: a FIFO there must not block the open (it is refused
   * below as not a regular file; reads of a regular file never block) */
  int fd = open(real, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  struct stat sb;
  if (fd < 0 || fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
    pr_errf(L->err, L->err_len, "tensor '%s': cannot open external data '%s': %s", tp->name, shown,
            fd < 0 ? strerror(errno) : "not a regular file");
    if (fd >= 0) close(fd);
    return fd < 0 ? PR_ERR_IO : PR_ERR_INVALID;
  }
  if (!(*out = fdopen(fd, "rb"))) {
    close(fd);
    return PR_ERR_NOMEM;
  }
  return PR_OK;
}

static pr_status_t load_external(loader_t *L, const Onnx__TensorProto *tp, void *dst,
                                 size_t nbytes) {
  const char *location = NULL;
  long long offset = 0, length = -1;
  for (size_t i = 0; i < tp->n_external_data; i++) {
    const char *k = tp->external_data[i]->key, *val = tp->external_data[i]->value;
    if (!k || !val) continue;
    if (!strcmp(k, "location"))
      location = val;
    else if (!strcmp(k, "offset"))
      offset = atoll(val);
    else if (!strcmp(k, "length"))
      length = atoll(val);
  }
  if (!location || !*location) {
    pr_errf(L->err, L->err_len, "tensor '%s': external data without a location", tp->name);
    return PR_ERR_INVALID;
  }
  if (offset < 0 || (length >= 0 && (size_t)length != nbytes)) {
    pr_errf(L->err, L->err_len, "tensor '%s': external data offset/length invalid", tp->name);
    return PR_ERR_INVALID;
  }
  FILE *f;
  pr_status_t st = open_external(L, tp, location, &f);
  if (st) return st;
  int ok = fseeko(f, (off_t)offset, SEEK_SET) == 0 && fread(dst, 1, nbytes, f) == nbytes;
  fclose(f);
  if (!ok) {
    char shown[160];
    safe_text(location, shown, sizeof shown);
    pr_errf(L->err, L->err_len, "tensor '%s': external data '%s' too short", tp->name, shown);
    return PR_ERR_IO;
  }
  return PR_OK;
}

/* TensorProto -> newly allocated pr_tensor_t. */
pr_status_t pr_tensor_from_proto(const Onnx__TensorProto *tp, const char *base_dir,
                                 pr_tensor_t **out, char *err, size_t err_len) {
  loader_t L = {.base_dir = base_dir, .err = err, .err_len = err_len};
  const char *name = tp->name ? tp->name : "";
  pr_dtype_t dt = (pr_dtype_t)tp->data_type;
  size_t esize = pr_dtype_size(dt);
  if (!esize) {
    pr_errf(err, err_len, "tensor '%s': element type %d not supported", name, tp->data_type);
    return PR_ERR_UNSUPPORTED;
  }
  if (tp->n_dims > PR_MAX_RANK) {
    pr_errf(err, err_len, "tensor '%s': rank %zu over %d", name, tp->n_dims, PR_MAX_RANK);
    return PR_ERR_UNSUPPORTED;
  }
  if (tp->segment) {
    pr_errf(err, err_len, "tensor '%s': segmented tensors not supported", name);
    return PR_ERR_UNSUPPORTED;
  }
  pr_tensor_t *t = calloc(1, sizeof *t);
  if (!t) return PR_ERR_NOMEM;
  t->dtype = dt;
  t->rank = (int)tp->n_dims;
  size_t numel = 1;
  for (size_t i = 0; i < tp->n_dims; i++) {
    if (tp->dims[i] < 0 || pr_mul_size(numel, (size_t)tp->dims[i], &numel)) {
      pr_errf(err, err_len, "tensor '%s': bad dimension %lld", name, (long long)tp->dims[i]);
      free(t);
      return PR_ERR_INVALID;
    }
    t->dims[i] = tp->dims[i];
  }
  size_t nbytes;
  if (pr_mul_size(numel, esize, &nbytes) || nbytes > MAX_MODEL_BYTES) {
    pr_errf(err, err_len, "tensor '%s': too large", name);
    free(t);
    return PR_ERR_INVALID;
  }
  t->data = pr_aligned_calloc(nbytes);
  if (!t->data) {
    free(t);
    return PR_ERR_NOMEM;
  }
  pr_status_t st = PR_OK;
  size_t have = 0; /* typed-field element count */
  if (tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
    st = load_external(&L, tp, t->data, nbytes);
  } else if (tp->has_raw_data) {
    if (tp->raw_data.len != nbytes) {
      pr_errf(err, err_len, "tensor '%s': raw_data has %zu bytes, shape needs %zu", name,
              tp->raw_data.len, nbytes);
      st = PR_ERR_INVALID;
    } else if (nbytes && ((uintptr_t)tp->raw_data.data % 16) == 0) {
      /* take protobuf-c's copy of the bytes instead of copying them again
       * (both come from malloc): halves the peak memory of a load */
      pr_free(t->data);
      t->data = tp->raw_data.data;
      ((Onnx__TensorProto *)tp)->raw_data.data = NULL;
      ((Onnx__TensorProto *)tp)->raw_data.len = 0;
      ((Onnx__TensorProto *)tp)->has_raw_data = 0;
    } else if (nbytes) {
      memcpy(t->data, tp->raw_data.data, nbytes);
    }
  } else {
    switch (dt) {
      case PR_DTYPE_FLOAT:
        have = tp->n_float_data;
        if (have == numel && nbytes) memcpy(t->data, tp->float_data, nbytes);
        break;
      case PR_DTYPE_DOUBLE:
        have = tp->n_double_data;
        if (have == numel && nbytes) memcpy(t->data, tp->double_data, nbytes);
        break;
      case PR_DTYPE_INT64:
        have = tp->n_int64_data;
        if (have == numel && nbytes) memcpy(t->data, tp->int64_data, nbytes);
        break;
      case PR_DTYPE_UINT32:
      case PR_DTYPE_UINT64:
        have = tp->n_uint64_data;
        if (have == numel)
          for (size_t i = 0; i < numel; i++) {
            if (dt == PR_DTYPE_UINT64)
              ((uint64_t *)t->data)[i] = tp->uint64_data[i];
            else
              ((uint32_t *)t->data)[i] = (uint32_t)tp->uint64_data[i];
          }
        break;
      default: /* int32 and narrower, bool, float16: int32_data */
        have = tp->n_int32_data;
        if (have == numel)
          for (size_t i = 0; i < numel; i++) {
            int32_t x = tp->int32_data[i];
            switch (esize) {
              case 1: ((uint8_t *)t->data)[i] = (uint8_t)x; break;
              case 2: ((uint16_t *)t->data)[i] = (uint16_t)x; break;
              default: ((int32_t *)t->data)[i] = x; break;
            }
          }
        break;
    }
    if (have != numel) {
      pr_errf(err, err_len, "tensor '%s': has %zu elements, shape needs %zu", name, have, numel);
      st = PR_ERR_INVALID;
    }
  }
  if (st) {
    pr_engine_tensor_free(t);
    free(t);
    return st;
  }
  *out = t;
  return PR_OK;
}

static pr_status_t read_value_info(loader_t *L, const Onnx__ValueInfoProto *vi, int idx) {
  pr_mvalue_t *v = &L->m->values[idx];
  const Onnx__TypeProto *tp = vi->type;
  if (!tp) return PR_OK;
  if (tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE) {
    pr_errf(L->err, L->err_len, "value '%s': only tensor types are supported", vi->name);
    return PR_ERR_UNSUPPORTED;
  }
  const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
  if (tt->has_elem_type) v->dtype = (pr_dtype_t)tt->elem_type;
  if (!tt->shape) return PR_OK;
  if (tt->shape->n_dim > PR_MAX_RANK) {
    pr_errf(L->err, L->err_len, "value '%s': rank over %d", vi->name, PR_MAX_RANK);
    return PR_ERR_UNSUPPORTED;
  }
  v->rank = (int)tt->shape->n_dim;
  for (int k = 0; k < v->rank; k++) {
    const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[k];
    v->dims[k] = -1;
    if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && d->dim_value >= 0)
      v->dims[k] = d->dim_value;
    else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM)
      v->dim_names[k] = pr_strdup(d->dim_param);
  }
  return PR_OK;
}

static pr_status_t convert_attr(loader_t *L, const Onnx__NodeProto *np,
                                const Onnx__AttributeProto *ap, pr_attr_t *a) {
  a->name = pr_strdup(ap->name ? ap->name : "");
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
        pr_errf(L->err, L->err_len, "node '%s': attribute '%s' has no tensor", np->name, ap->name);
        return PR_ERR_INVALID;
      }
      return pr_tensor_from_proto(ap->t, L->base_dir, &a->t, L->err, L->err_len);
    case PR_ATTR_STRINGS: { /* n strings, each NUL-terminated, one after another */
      size_t total = 1;
      for (size_t k = 0; k < ap->n_strings; k++) {
        if (memchr(ap->strings[k].data, 0, ap->strings[k].len)) {
          pr_errf(L->err, L->err_len, "node '%s': attribute '%s' holds a NUL byte", np->name,
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
      break;
    }
    case PR_ATTR_FLOAT:
    case PR_ATTR_INT: break;
    default:
      pr_errf(L->err, L->err_len, "node '%s' (%s): attribute '%s' of type %d not supported",
              np->name ? np->name : "", np->op_type, ap->name, a->type);
      return PR_ERR_UNSUPPORTED;
  }
  return PR_OK;
}

/* Constant nodes become initializers of their output. */
static pr_status_t load_constant(loader_t *L, const Onnx__NodeProto *np, int out_idx) {
  if (np->n_attribute != 1) {
    pr_errf(L->err, L->err_len, "node '%s' (Constant): needs exactly one attribute", np->name);
    return PR_ERR_INVALID;
  }
  const Onnx__AttributeProto *ap = np->attribute[0];
  pr_mvalue_t *v = &L->m->values[out_idx];
  pr_tensor_t *t = NULL;
  const char *an = ap->name ? ap->name : "";
  if (!strcmp(an, "value")) {
    if (!ap->t) goto bad;
    pr_status_t st = pr_tensor_from_proto(ap->t, L->base_dir, &t, L->err, L->err_len);
    if (st) return st;
  } else if (!strcmp(an, "value_float") || !strcmp(an, "value_int")) {
    int is_f = an[6] == 'f';
    t = calloc(1, sizeof *t);
    if (!t) return PR_ERR_NOMEM;
    t->dtype = is_f ? PR_DTYPE_FLOAT : PR_DTYPE_INT64;
    t->rank = 0;
    t->data = pr_aligned_alloc(8);
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
    t->data = pr_aligned_alloc(n * 8 + 8);
    if (!t->data) {
      free(t);
      return PR_ERR_NOMEM;
    }
    if (n) memcpy(t->data, is_f ? (void *)ap->floats : (void *)ap->ints, n * (is_f ? 4 : 8));
  } else {
    pr_errf(L->err, L->err_len, "node '%s' (Constant): attribute '%s' not supported", np->name, an);
    return PR_ERR_UNSUPPORTED;
  }
  v->init = t;
  v->defined = true;
  v->dtype = t->dtype;
  v->rank = t->rank;
  memcpy(v->dims, t->dims, sizeof v->dims);
  return PR_OK;
bad:
  pr_errf(L->err, L->err_len, "node '%s' (Constant): malformed", np->name);
  return PR_ERR_INVALID;
}

static pr_status_t check_node_attrs(loader_t *L, const pr_mnode_t *n) {
  const pr_op_t *op = n->op;
  for (int i = 0; i < n->n_attrs; i++) {
    const char *an = n->attrs[i].name;
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
      pr_errf(L->err, L->err_len, "node '%s' (%s): attribute '%s' not supported", pr_mnode_name(n),
              n->op_type, an);
      return PR_ERR_UNSUPPORTED;
    }
  }
  if (op->max_inputs && n->n_in > op->max_inputs) {
    pr_errf(L->err, L->err_len, "node '%s' (%s): %d inputs, at most %d allowed", pr_mnode_name(n),
            n->op_type, n->n_in, op->max_inputs);
    return PR_ERR_INVALID;
  }
  if (op->check) return op->check(n, L->m->opset, L->err, L->err_len);
  return PR_OK;
}

static pr_status_t build(loader_t *L, const Onnx__ModelProto *mp) {
  pr_model_t *m = L->m;
  const Onnx__GraphProto *g = mp->graph;
  if (!g) {
    pr_errf(L->err, L->err_len, "model has no graph");
    return PR_ERR_INVALID;
  }
  m->opset = -1;
  for (size_t i = 0; i < mp->n_opset_import; i++) {
    const char *d = mp->opset_import[i]->domain;
    if (!d || !*d || !strcmp(d, "ai.onnx")) m->opset = (int)mp->opset_import[i]->version;
  }
  if (m->opset < 0) m->opset = 1;
  if (m->opset < 7 || m->opset > 17) {
    pr_errf(L->err, L->err_len, "opset %d not supported (7 to 17 are)", m->opset);
    return PR_ERR_UNSUPPORTED;
  }
  pr_status_t st;
  /* initializers */
  for (size_t i = 0; i < g->n_initializer; i++) {
    const Onnx__TensorProto *tp = g->initializer[i];
    if (!tp->name || !*tp->name) {
      pr_errf(L->err, L->err_len, "initializer %zu has no name", i);
      return PR_ERR_INVALID;
    }
    int idx = value_index(L, tp->name, 1);
    if (idx < 0) return PR_ERR_NOMEM;
    if (m->values[idx].init) {
      pr_errf(L->err, L->err_len, "initializer '%s' defined twice", tp->name);
      return PR_ERR_INVALID;
    }
    pr_tensor_t *t;
    if ((st = pr_tensor_from_proto(tp, L->base_dir, &t, L->err, L->err_len))) return st;
    pr_mvalue_t *v = &m->values[idx];
    v->init = t;
    v->defined = true;
    v->dtype = t->dtype;
    v->rank = t->rank;
    memcpy(v->dims, t->dims, sizeof v->dims);
  }
  if (g->n_sparse_initializer) {
    pr_errf(L->err, L->err_len, "sparse initializers not supported");
    return PR_ERR_UNSUPPORTED;
  }
  /* inputs (an input that is also an initializer is a constant) */
  m->inputs = calloc(g->n_input + 1, sizeof(int));
  if (!m->inputs) return PR_ERR_NOMEM;
  for (size_t i = 0; i < g->n_input; i++) {
    const Onnx__ValueInfoProto *vi = g->input[i];
    if (!vi->name || !*vi->name) {
      pr_errf(L->err, L->err_len, "graph input %zu has no name", i);
      return PR_ERR_INVALID;
    }
    int idx = value_index(L, vi->name, 1);
    if (idx < 0) return PR_ERR_NOMEM;
    if (m->values[idx].init) continue;
    for (int k = 0; k < m->n_inputs; k++)
      if (m->inputs[k] == idx) {
        pr_errf(L->err, L->err_len, "graph input '%s' listed twice", vi->name);
        return PR_ERR_INVALID;
      }
    if ((st = read_value_info(L, vi, idx))) return st;
    if (!pr_dtype_size(m->values[idx].dtype)) {
      pr_errf(L->err, L->err_len, "graph input '%s': element type %d not supported", vi->name,
              m->values[idx].dtype);
      return PR_ERR_UNSUPPORTED;
    }
    if (m->values[idx].rank < 0) {
      pr_errf(L->err, L->err_len, "graph input '%s' has no shape", vi->name);
      return PR_ERR_UNSUPPORTED;
    }
    m->values[idx].defined = true;
    m->inputs[m->n_inputs++] = idx;
  }
  /* nodes, in file order, which ONNX requires to be topological */
  m->nodes = calloc(g->n_node + 1, sizeof *m->nodes);
  if (!m->nodes) return PR_ERR_NOMEM;
  for (size_t i = 0; i < g->n_node; i++) {
    const Onnx__NodeProto *np = g->node[i];
    const char *ot = np->op_type ? np->op_type : "";
    const char *nm = np->name && *np->name ? np->name : (np->n_output ? np->output[0] : "");
    if (np->domain && *np->domain && strcmp(np->domain, "ai.onnx")) {
      pr_errf(L->err, L->err_len, "node '%s' (%s): domain '%s' not supported", nm, ot, np->domain);
      return PR_ERR_UNSUPPORTED;
    }
    if (np->n_input > 16 || np->n_output > 16) {
      pr_errf(L->err, L->err_len, "node '%s' (%s): too many inputs or outputs", nm, ot);
      return PR_ERR_UNSUPPORTED;
    }
    for (size_t k = 0; k < np->n_input; k++) {
      const char *in = np->input[k];
      if (!in || !*in) continue;
      int idx = value_index(L, in, 0);
      int defined = idx >= 0 && m->values[idx].defined;
      if (!defined) {
        pr_errf(L->err, L->err_len, "node '%s' (%s): input '%s' is not defined before it", nm, ot,
                in);
        return PR_ERR_INVALID;
      }
    }
    if (!strcmp(ot, "Constant")) {
      if (np->n_output != 1 || !np->output[0] || !*np->output[0]) {
        pr_errf(L->err, L->err_len, "node '%s' (Constant): needs one output", nm);
        return PR_ERR_INVALID;
      }
      int idx = value_index(L, np->output[0], 1);
      if (idx < 0) return PR_ERR_NOMEM;
      if (m->values[idx].init) {
        pr_errf(L->err, L->err_len, "value '%s' defined twice", np->output[0]);
        return PR_ERR_INVALID;
      }
      if ((st = load_constant(L, np, idx))) return st;
      continue;
    }
    pr_mnode_t *n = &m->nodes[m->n_nodes];
    n->name = pr_strdup(nm);
    n->op_type = pr_strdup(ot);
    n->in = calloc(np->n_input + 1, sizeof(int));
    n->out = calloc(np->n_output + 1, sizeof(int));
    n->attrs = calloc(np->n_attribute + 1, sizeof *n->attrs);
    if (!n->name || !n->op_type || !n->in || !n->out || !n->attrs) return PR_ERR_NOMEM;
    m->n_nodes++;
    n->n_in = (int)np->n_input;
    n->n_out = (int)np->n_output;
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
        pr_errf(L->err, L->err_len, "node '%s' (%s): output '%s' defined twice", nm, ot, on);
        return PR_ERR_INVALID;
      }
      if ((idx = value_index(L, on, 1)) < 0) return PR_ERR_NOMEM;
      m->values[idx].defined = true;
      n->out[k] = idx;
    }
    for (size_t k = 0; k < np->n_attribute; k++) {
      n->n_attrs++;
      if ((st = convert_attr(L, np, np->attribute[k], &n->attrs[k]))) return st;
    }
    n->op = pr_op_find(ot);
    if (!n->op) {
      pr_errf(L->err, L->err_len, "node '%s': operator %s not supported", nm, ot);
      return PR_ERR_UNSUPPORTED;
    }
    if (m->opset < n->op->min_opset) {
      pr_errf(L->err, L->err_len, "node '%s': %s at opset %d not supported (from %d)", nm, ot,
              m->opset, n->op->min_opset);
      return PR_ERR_UNSUPPORTED;
    }
    if ((st = check_node_attrs(L, n))) return st;
  }
  /* outputs */
  m->outputs = calloc(g->n_output + 1, sizeof(int));
  if (!m->outputs) return PR_ERR_NOMEM;
  for (size_t i = 0; i < g->n_output; i++) {
    const Onnx__ValueInfoProto *vi = g->output[i];
    int idx = vi->name ? value_index(L, vi->name, 0) : -1;
    if (idx < 0) {
      pr_errf(L->err, L->err_len, "graph output '%s' is not produced by the graph",
              vi->name ? vi->name : "");
      return PR_ERR_INVALID;
    }
    if (vi->type && vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE) {
      pr_errf(L->err, L->err_len, "graph output '%s': only tensor types are supported", vi->name);
      return PR_ERR_UNSUPPORTED;
    }
    if (m->values[idx].rank < 0 && (st = read_value_info(L, vi, idx))) return st;
    m->outputs[m->n_outputs++] = idx;
  }
  if (!m->n_outputs) {
    pr_errf(L->err, L->err_len, "graph has no outputs");
    return PR_ERR_INVALID;
  }
  /* declared shapes of outputs and intermediates are only hints: shapes are inferred */
  return PR_OK;
}

static void free_tensor(pr_tensor_t *t) {
  if (!t) return;
  pr_engine_tensor_free(t);
  free(t);
}

void pr_engine_model_destroy(pr_model_t *m) {
  if (!m) return;
  for (int i = 0; i < m->n_values; i++) {
    free(m->values[i].name);
    for (int k = 0; k < PR_MAX_RANK; k++) free(m->values[i].dim_names[k]);
    free_tensor(m->values[i].init);
  }
  free(m->values);
  for (int i = 0; i < m->n_nodes; i++) {
    pr_mnode_t *n = &m->nodes[i];
    free(n->name);
    free(n->op_type);
    free(n->in);
    free(n->out);
    for (int k = 0; k < n->n_attrs; k++) {
      free(n->attrs[k].name);
      free(n->attrs[k].s);
      free(n->attrs[k].ints);
      free(n->attrs[k].floats);
      free_tensor(n->attrs[k].t);
    }
    free(n->attrs);
  }
  free(m->nodes);
  free(m->inputs);
  free(m->outputs);
  for (int i = 0; i < m->n_cache; i++) pr_free(m->cache[i].buf);
  free(m->cache);
  pthread_mutex_destroy(&m->cache_lock);
  free(m);
}

void *pr_wcache_get(pr_model_t *m, const void *node, int variant, const dnnl_memory_desc_t *md) {
  void *buf = NULL;
  pthread_mutex_lock(&m->cache_lock);
  for (int i = 0; i < m->n_cache && !buf; i++) {
    pr_wcache_entry_t *e = &m->cache[i];
    if (e->node == node && e->variant == variant && dnnl_memory_desc_equal(&e->md, md)) {
      e->refs++;
      buf = e->buf;
    }
  }
  pthread_mutex_unlock(&m->cache_lock);
  return buf;
}

void *pr_wcache_put(pr_model_t *m, const void *node, int variant, const dnnl_memory_desc_t *md,
                    void *buf) {
  void *have = pr_wcache_get(m, node, variant, md);
  if (have) {
    pr_free(buf);
    return have;
  }
  pthread_mutex_lock(&m->cache_lock);
  if (m->n_cache == m->cap_cache) {
    int cap = m->cap_cache ? m->cap_cache * 2 : 64;
    pr_wcache_entry_t *nc = realloc(m->cache, sizeof *nc * (size_t)cap);
    if (!nc) {
      pthread_mutex_unlock(&m->cache_lock);
      pr_free(buf);
      return NULL;
    }
    m->cache = nc;
    m->cap_cache = cap;
  }
  m->cache[m->n_cache++] = (pr_wcache_entry_t){node, variant, *md, buf, 1};
  pthread_mutex_unlock(&m->cache_lock);
  return buf;
}

size_t pr_engine_model_shared_weight_bytes(pr_model_t *m) {
  size_t total = 0;
  pthread_mutex_lock(&m->cache_lock);
  for (int i = 0; i < m->n_cache; i++) total += dnnl_memory_desc_get_size(&m->cache[i].md);
  pthread_mutex_unlock(&m->cache_lock);
  return total;
}

void pr_wcache_release(pr_model_t *m, void *buf) {
  if (!buf) return;
  pthread_mutex_lock(&m->cache_lock);
  for (int i = 0; i < m->n_cache; i++) {
    if (m->cache[i].buf != buf) continue;
    if (--m->cache[i].refs == 0) {
      pr_free(buf);
      m->cache[i] = m->cache[--m->n_cache];
    }
    break;
  }
  pthread_mutex_unlock(&m->cache_lock);
}

pr_status_t pr_engine_model_load_memory(const void *data, size_t len, const char *base_dir,
                                        pr_model_t **out, char *err, size_t err_len) {
  if (!data || !out) {
    pr_errf(err, err_len, "no model data");
    return PR_ERR_INVALID;
  }
  *out = NULL;
  Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, len, data);
  if (!mp) {
    pr_errf(err, err_len, "not a valid ONNX model (protobuf parse failed)");
    return PR_ERR_INVALID;
  }
  pr_model_t *m = calloc(1, sizeof *m);
  if (!m) {
    onnx__model_proto__free_unpacked(mp, NULL);
    return PR_ERR_NOMEM;
  }
  pthread_mutex_init(&m->cache_lock, NULL);
  loader_t L = {.m = m, .base_dir = base_dir, .err = err, .err_len = err_len};
  pr_names_init(&L.names);
  pr_status_t st = build(&L, mp);
  pr_names_free(&L.names);
  onnx__model_proto__free_unpacked(mp, NULL);
  if (st) {
    pr_engine_model_destroy(m);
    return st;
  }
  pr_sha256_hex(data, len, m->sha256);
  *out = m;
  return PR_OK;
}

pr_status_t pr_engine_model_load_file(const char *path, pr_model_t **out, char *err,
                                      size_t err_len) {
  void *data;
  size_t len;
  if (pr_read_file(path, &data, &len, MAX_MODEL_BYTES) < 0) {
    pr_errf(err, err_len, "cannot read %s: %s", path, strerror(errno));
    return PR_ERR_IO;
  }
  char dir[4096];
  pr_dirname(path, dir, sizeof dir);
  pr_status_t st = pr_engine_model_load_memory(data, len, dir, out, err, err_len);
  free(data);
  return st;
}

int pr_engine_model_num_inputs(const pr_model_t *m) {
  return m ? m->n_inputs : 0;
}
int pr_engine_model_num_outputs(const pr_model_t *m) {
  return m ? m->n_outputs : 0;
}
const char *pr_engine_model_sha256(const pr_model_t *m) {
  return m ? m->sha256 : "";
}

static void fill_info(const pr_mvalue_t *v, pr_tensor_info_t *info) {
  memset(info, 0, sizeof *info);
  info->name = v->name;
  info->dtype = v->dtype;
  info->rank = v->rank;
  for (int k = 0; k < v->rank && k < PR_MAX_RANK; k++) {
    info->dims[k] = v->dims[k];
    info->dim_names[k] = v->dim_names[k];
  }
}

pr_status_t pr_engine_model_input(const pr_model_t *m, int i, pr_tensor_info_t *info) {
  if (!m || i < 0 || i >= m->n_inputs || !info) return PR_ERR_INVALID;
  fill_info(&m->values[m->inputs[i]], info);
  return PR_OK;
}

pr_status_t pr_engine_model_output(const pr_model_t *m, int i, pr_tensor_info_t *info) {
  if (!m || i < 0 || i >= m->n_outputs || !info) return PR_ERR_INVALID;
  fill_info(&m->values[m->outputs[i]], info);
  return PR_OK;
}
