/* The checks of an infer request against its model that every wire format
 * shares (protocol.h: JSON and the binary extension in protocol.c,
 * protobuf in grpc_codec.c), so that a request is taken or refused with
 * the same message whatever its format; and the datatype names they all
 * use. Pure: no I/O, no threads. protocol.c calls these, never the other
 * way. */
#include <assert.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "base/util.h"
#include "server/protocol.h"

/* The protocol's datatype names (every wire format's). */
static const struct {
  const char *name;
  pr_dtype_t dt;
} types[] = {{"BOOL", PR_DTYPE_BOOL},     {"UINT8", PR_DTYPE_UINT8},   {"UINT16", PR_DTYPE_UINT16},
             {"UINT32", PR_DTYPE_UINT32}, {"UINT64", PR_DTYPE_UINT64}, {"INT8", PR_DTYPE_INT8},
             {"INT16", PR_DTYPE_INT16},   {"INT32", PR_DTYPE_INT32},   {"INT64", PR_DTYPE_INT64},
             {"FP16", PR_DTYPE_FLOAT16},  {"FP32", PR_DTYPE_FLOAT},    {"FP64", PR_DTYPE_DOUBLE}};

const char *pr__proto_datatype(pr_dtype_t dt) {
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
    if (types[i].dt == dt) return types[i].name;
  return "BYTES";
}

pr_dtype_t pr__proto_dtype(const char *name) {
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
    if (!strcmp(types[i].name, name)) return types[i].dt;
  return PR_DTYPE_UNDEFINED;
}

void pr__proto_dim_allowed(const pr_proto_dim_t *d, char *buf, size_t len) {
  if (!d->n_list) {
    snprintf(buf, len, "%lld..%lld", d->min, d->max);
    return;
  }
  size_t off = (size_t)snprintf(buf, len, "one of ");
  for (int i = 0; i < d->n_list && off < len; i++)
    off += (size_t)snprintf(buf + off, len - off, "%s%lld", i ? ", " : "", d->list[i]);
}

/* Checks size v of axis d of input k, a dynamic dim: allowed by the config,
 * and the size the inputs taken before give the same dim. */
static pr_status_t check_dyn(const pr_proto_model_t *m, const char *name, int k, int d, int64_t v,
                             const pr_request_t *r, char *err, size_t err_len) {
  int j = m->dyn_of[k][d] - 1;
  assert(j >= 0 && j < m->n_dyn);
  const pr_proto_dim_t *x = &m->dyn[j];
  bool ok = v >= x->min && v <= x->max;
  if (x->n_list) {
    ok = false;
    for (int i = 0; i < x->n_list; i++) ok |= x->list[i] == v;
  }
  char allowed[256];
  pr__proto_dim_allowed(x, allowed, sizeof allowed);
  if (!ok)
    return pr__errf(err, err_len, "input '%s': dimension %d ('%s') is %lld, allowed %s", name, d,
                    x->name, (long long)v, allowed),
           PR_ERR_INVALID;
  for (int o = 0; o < m->n_inputs; o++) /* taken inputs have their rank set */
    for (int a = 1; o != k && a < r->inputs[o].rank; a++)
      if (m->dyn_of[o][a] == j + 1 && r->inputs[o].dims[a] != v)
        return pr__errf(err, err_len,
                        "input '%s': dimension %d ('%s') is %lld, input '%s' gives it %lld", name,
                        d, x->name, (long long)v, m->inputs[o].name,
                        (long long)r->inputs[o].dims[a]),
               PR_ERR_INVALID;
  return PR_OK;
}

pr_status_t pr__proto_input_check(const pr_proto_model_t *m, const char *name, const char *datatype,
                                  int rank, const int64_t *dims, pr_request_t *r, int *k,
                                  size_t *numel, size_t *nbytes, char *err, size_t err_len) {
  *k = -1;
  for (int j = 0; j < m->n_inputs; j++)
    if (!strcmp(m->inputs[j].name, name)) *k = j;
  if (*k < 0) return pr__errf(err, err_len, "model has no input '%s'", name), PR_ERR_INVALID;
  pr_tensor_t *t = &r->inputs[*k];
  if (t->rank) return pr__errf(err, err_len, "input '%s' given twice", name), PR_ERR_INVALID;
  const pr_tensor_info_t *want = &m->inputs[*k];
  if (pr__proto_dtype(datatype) != want->dtype)
    return pr__errf(err, err_len, "input '%s': datatype %s, model expects %s", name, datatype,
                    pr__proto_datatype(want->dtype)),
           PR_ERR_INVALID;
  if (rank != want->rank)
    return pr__errf(err, err_len, "input '%s': shape has %d dimensions, model expects %d", name,
                    rank, want->rank),
           PR_ERR_INVALID;
  size_t n = 1;
  for (int d = 0; d < want->rank; d++) {
    int64_t v = dims[d];
    if (v < 0)
      return pr__errf(err, err_len, "input '%s': 'shape' must hold non-negative integers", name),
             PR_ERR_INVALID;
    if (d == 0 && (v < 1 || v > m->max_batch))
      return pr__errf(err, err_len,
                      "input '%s': batch %lld outside 1..%d (the model's max_batch_size)", name,
                      (long long)v, m->max_batch),
             PR_ERR_INVALID;
    if (d > 0 && m->dyn_of[*k][d] && check_dyn(m, name, *k, d, v, r, err, err_len))
      return PR_ERR_INVALID;
    if (d > 0 && want->dims[d] >= 0 && v != want->dims[d])
      return pr__errf(err, err_len, "input '%s': dimension %d is %lld, model expects %lld", name, d,
                      (long long)v, (long long)want->dims[d]),
             PR_ERR_INVALID;
    if (pr__mul_size(n, (size_t)v, &n))
      return pr__errf(err, err_len, "input '%s' too large", name), PR_ERR_INVALID;
  }
  if (r->rows >= 0 && dims[0] != r->rows)
    return pr__errf(err, err_len, "inputs disagree on the batch size"), PR_ERR_INVALID;
  if (pr__mul_size(n, pr_dtype_size(want->dtype), nbytes))
    return pr__errf(err, err_len, "input '%s' too large", name), PR_ERR_INVALID;
  r->rows = (int)dims[0];
  t->dtype = want->dtype;
  t->rank = want->rank; /* from here on, the input is taken */
  memcpy(t->dims, dims, sizeof(int64_t) * (size_t)rank);
  *numel = n;
  return PR_OK;
}

pr_status_t pr__proto_input_alloc(pr_request_t *r, int k, size_t nbytes, size_t max_bytes,
                                  size_t *bytes, char *err, size_t err_len) {
  *bytes += nbytes;
  if (max_bytes && *bytes > max_bytes)
    return pr__errf(err, err_len, "the server holds too many request bytes; retry later"),
           PR_ERR_BUSY;
  if (!(r->inputs[k].data = pr__aligned_alloc(nbytes)))
    return pr__errf(err, err_len, "out of memory; retry later"), PR_ERR_BUSY;
  return PR_OK;
}

pr_status_t pr__proto_inputs_complete(const pr_proto_model_t *m, const pr_request_t *r, char *err,
                                      size_t err_len) {
  for (int k = 0; k < m->n_inputs; k++)
    if (!r->inputs[k].data)
      return pr__errf(err, err_len, "missing input '%s'", m->inputs[k].name), PR_ERR_INVALID;
  return PR_OK;
}

pr_status_t pr__proto_output_take(const pr_proto_model_t *m, const char *name, pr_proto_infer_t *q,
                                  int *k, char *err, size_t err_len) {
  *k = -1;
  for (int o = 0; name && o < m->n_outputs; o++)
    if (!strcmp(m->outputs[o].name, name)) *k = o;
  if (*k < 0)
    return pr__errf(err, err_len, "model has no output '%s'", name ? name : "(unnamed)"),
           PR_ERR_INVALID;
  for (int i = 0; i < q->n_outputs; i++)
    if (q->outputs[i] == *k)
      return pr__errf(err, err_len, "output '%s' requested twice", name), PR_ERR_INVALID;
  assert(q->n_outputs < PR_SCHED_MAX_IO); /* distinct outputs of the model */
  q->outputs[q->n_outputs++] = *k;
  return PR_OK;
}
