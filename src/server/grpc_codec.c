/* Protobuf infer requests and responses (see grpc_codec.h). */
#include "server/grpc_codec.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/text.h"
#include "base/util.h"

/* ---- strings on the wire ---- */

enum { WIRE_VARINT = 0, WIRE_I64 = 1, WIRE_LEN = 2, WIRE_I32 = 5 };
#define WIRE_DEPTH 16 /* the service's messages nest 3 deep */

/* The varint at *p (before end) into *v; false past end or 10 bytes. */
static bool wire_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
  *v = 0;
  for (int shift = 0; shift < 70 && *p < end; shift += 7) {
    uint8_t b = *(*p)++;
    *v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

/* What glibc's malloc takes for a block of n bytes: n and its 8-byte header
 * rounded up to 16, at least 32; whole pages from a megabyte on, where
 * `packrat serve` has it map blocks (cmd_serve.c). */
static size_t chunk(size_t n) {
  if (n > SIZE_MAX - 8192) return SIZE_MAX;
  if (n >= ((size_t)1 << 20)) return (n + 8 + 4095) & ~(size_t)4095; /* mapped: whole pages */
  return n + 8 < 32 ? 32 : (n + 8 + 15) & ~(size_t)15;
}

static size_t add_sat(size_t a, size_t b) {
  return a > SIZE_MAX - b ? SIZE_MAX : a + b;
}

/* The bytes one element of a repeated field of type t takes in protobuf-c's
 * array (its sizeof_elt_in_repeated_array). */
static size_t element_size(ProtobufCType t) {
  switch (t) {
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE: return 8;
    case PROTOBUF_C_TYPE_BOOL: return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_MESSAGE: return sizeof(void *);
    case PROTOBUF_C_TYPE_BYTES: return sizeof(ProtobufCBinaryData);
    default: return 4;
  }
}

/* How many values protobuf-c counts in a packed payload p[0..n) of scalar
 * type t (its count_packed_elements). */
static size_t packed_count(ProtobufCType t, const uint8_t *p, size_t n) {
  switch (t) {
    case PROTOBUF_C_TYPE_FLOAT:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_SFIXED32: return n / 4;
    case PROTOBUF_C_TYPE_DOUBLE:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_SFIXED64: return n / 8;
    case PROTOBUF_C_TYPE_BOOL: return n; /* a byte a bool */
    default: {                           /* varints: the bytes that end one */
      size_t k = 0;
      for (size_t i = 0; i < n; i++) k += !(p[i] & 0x80);
      return k;
    }
  }
}

static bool scalar(ProtobufCType t) {
  return t != PROTOBUF_C_TYPE_STRING && t != PROTOBUF_C_TYPE_BYTES && t != PROTOBUF_C_TYPE_MESSAGE;
}

#define WIRE_FIELDS 64 /* request types have at most 8 (a unit test checks them all) */

/* Walks p..end as a message of d, adding to *cost what protobuf-c allocates
 * to unpack it: 0 when it may be unpacked, 1 when it is refused (the
 * message in err), -1 when the bytes do not parse. */
static int wire_walk(const ProtobufCMessageDescriptor *d, const uint8_t *p, const uint8_t *end,
                     int depth, size_t *cost, char *err, size_t err_len) {
  size_t counts[WIRE_FIELDS] = {0}, messages[WIRE_FIELDS] = {0}, unknown = 0, occurrences = 0;
  if (d->n_fields > WIRE_FIELDS) return -1; /* a request type this big: a new proto to review */
  *cost = add_sat(*cost, chunk(d->sizeof_message));
  while (p < end) {
    uint64_t key, n = 0;
    occurrences++;
    if (!wire_varint(&p, end, &key)) return -1;
    const uint8_t *value = p;
    const ProtobufCFieldDescriptor *f =
        key >> 3 <= UINT_MAX ? protobuf_c_message_descriptor_get_field(d, (unsigned)(key >> 3))
                             : NULL;
    switch (key & 7) {
      case WIRE_VARINT:
        if (!wire_varint(&p, end, &n)) return -1;
        break;
      case WIRE_I64:
        if (end - p < 8) return -1;
        p += 8;
        break;
      case WIRE_I32:
        if (end - p < 4) return -1;
        p += 4;
        break;
      case WIRE_LEN:
        if (!wire_varint(&p, end, &n) || n > (uint64_t)(end - p)) return -1;
        break;
      default: return -1; /* groups: protobuf-c refuses them too */
    }
    if (!f) {
      /* protobuf-c keeps each unknown field: an entry and a copy of its value */
      if (++unknown > PR_GRPC_MAX_UNKNOWN) {
        pr__errf(err, err_len, "%s holds more than %d fields it does not define", d->short_name,
                 PR_GRPC_MAX_UNKNOWN);
        return 1;
      }
      /* (a length-prefixed one's copy holds its length too) */
      *cost = add_sat(*cost, chunk((size_t)(p - value) + ((key & 7) == WIRE_LEN ? n : 0)));
      if ((key & 7) == WIRE_LEN) p += n;
      continue;
    }
    size_t k = (size_t)(f - d->fields);
    if ((key & 7) != WIRE_LEN) {
      if (f->label == PROTOBUF_C_LABEL_REPEATED) counts[k]++;
      continue;
    }
    if (scalar(f->type)) {
      if (f->label == PROTOBUF_C_LABEL_REPEATED) counts[k] += packed_count(f->type, p, n);
      p += n;
      continue;
    }
    if (f->type == PROTOBUF_C_TYPE_STRING) {
      if (memchr(p, 0, n) || !pr__utf8_valid((const char *)p, n)) {
        pr__errf(err, err_len, "%s.%s must be valid UTF-8 without NUL characters", d->short_name,
                 f->name);
        return 1;
      }
      *cost = add_sat(*cost, chunk(n + 1));
    } else if (f->type == PROTOBUF_C_TYPE_BYTES) {
      if (n) *cost = add_sat(*cost, chunk(n));
    } else {
      /* a repeated message field (a map too) unpacks once per entry; a
       * message field that is not repeated, sent again, is merged into the
       * last copy by protobuf-c, at a cost that grows with the square of the
       * copies: no client sends one twice */
      bool repeated = f->label == PROTOBUF_C_LABEL_REPEATED;
      if (++messages[k] > (repeated ? PR_GRPC_MAX_ENTRIES : 1)) {
        if (repeated)
          pr__errf(err, err_len, "%s.%s holds more than %d entries", d->short_name, f->name,
                   PR_GRPC_MAX_ENTRIES);
        else
          pr__errf(err, err_len, "%s.%s is given more than once; send it once", d->short_name,
                   f->name);
        return 1;
      }
      if (depth >= WIRE_DEPTH) return -1;
      int st = wire_walk(f->descriptor, p, p + n, depth + 1, cost, err, err_len);
      if (st) return st;
    }
    if (f->label == PROTOBUF_C_LABEL_REPEATED) counts[k]++;
    p += n;
  }
  for (unsigned k = 0; k < d->n_fields; k++)
    if (counts[k])
      *cost = add_sat(
          *cost, chunk(counts[k] > SIZE_MAX / 16 ? SIZE_MAX
                                                 : counts[k] * element_size(d->fields[k].type)));
  if (unknown) *cost = add_sat(*cost, chunk(unknown * sizeof(ProtobufCMessageUnknownField)));
  /* protobuf-c first scans the message into a table of its fields, 16 on the
   * stack and then slabs of 32-byte entries that double (32, 64, ...): at
   * most twice the fields, and a slab's header each */
  if (occurrences > 16)
    *cost =
        add_sat(*cost, occurrences > SIZE_MAX / 128 ? SIZE_MAX : 2 * occurrences * 32 + 64 * 32);
  return 0;
}

int pr__grpc_wire_check(const ProtobufCMessageDescriptor *d, const uint8_t *msg, size_t len,
                        size_t *cost, char *err, size_t err_len) {
  *cost = 0;
  int st = wire_walk(d, msg, msg + len, 0, cost, err, err_len);
  if (st == 0 && *cost > PR_GRPC_MAX_EXPANSION * len + ((size_t)64 << 10)) {
    pr__errf(err, err_len, "%s would take %zu bytes to decode, more than %d times its %zu; refused",
             d->short_name, *cost, PR_GRPC_MAX_EXPANSION, len);
    return 1;
  }
  return st;
}

/* ---- requests ---- */

/* How many of c's fields hold values, and which (the last one found). */
static int filled_fields(const Inference__InferTensorContents *c, size_t *count) {
  const size_t n[] = {c->n_bool_contents, c->n_int_contents,    c->n_int64_contents,
                      c->n_uint_contents, c->n_uint64_contents, c->n_fp32_contents,
                      c->n_fp64_contents, c->n_bytes_contents};
  int filled = 0;
  *count = 0;
  for (size_t i = 0; i < sizeof n / sizeof n[0]; i++)
    if (n[i]) filled++, *count = n[i];
  return filled;
}

/* Signed values of int_contents into t (1, 2 or 4 bytes each); -1 when one
 * is out of the datatype's range. */
static int take_ints(const int32_t *v, size_t n, pr_tensor_t *t) {
  for (size_t i = 0; i < n; i++) {
    switch (t->dtype) {
      case PR_DTYPE_INT8:
        if (v[i] < INT8_MIN || v[i] > INT8_MAX) return -1;
        ((int8_t *)t->data)[i] = (int8_t)v[i];
        break;
      case PR_DTYPE_INT16:
        if (v[i] < INT16_MIN || v[i] > INT16_MAX) return -1;
        ((int16_t *)t->data)[i] = (int16_t)v[i];
        break;
      default: ((int32_t *)t->data)[i] = v[i]; break;
    }
  }
  return 0;
}

static int take_uints(const uint32_t *v, size_t n, pr_tensor_t *t) {
  for (size_t i = 0; i < n; i++) {
    switch (t->dtype) {
      case PR_DTYPE_UINT8:
        if (v[i] > UINT8_MAX) return -1;
        ((uint8_t *)t->data)[i] = (uint8_t)v[i];
        break;
      case PR_DTYPE_UINT16:
        if (v[i] > UINT16_MAX) return -1;
        ((uint16_t *)t->data)[i] = (uint16_t)v[i];
        break;
      default: ((uint32_t *)t->data)[i] = v[i]; break;
    }
  }
  return 0;
}

/* Typed contents c into t (numel values); PR_ERR_INVALID with a message. */
static pr_status_t take_typed(const Inference__InferTensorContents *c, const char *name,
                              pr_tensor_t *t, size_t numel, char *err, size_t err_len) {
  size_t count;
  int filled = filled_fields(c, &count);
  if (filled > 1)
    return pr__errf(err, err_len, "input '%s': contents hold more than one type", name),
           PR_ERR_INVALID;
  if (count != numel)
    return pr__errf(err, err_len, "input '%s': contents hold %zu values, the shape needs %zu", name,
                    count, numel),
           PR_ERR_INVALID;
  if (numel == 0) return PR_OK;
  size_t esize = pr_dtype_size(t->dtype);
  int bad = 0;
  switch (t->dtype) {
    case PR_DTYPE_BOOL:
      if (!(bad = c->n_bool_contents != numel))
        for (size_t i = 0; i < numel; i++) ((uint8_t *)t->data)[i] = c->bool_contents[i] != 0;
      break;
    case PR_DTYPE_INT8:
    case PR_DTYPE_INT16:
    case PR_DTYPE_INT32:
      if (!(bad = c->n_int_contents != numel) && take_ints(c->int_contents, numel, t))
        return pr__errf(err, err_len, "input '%s': a value out of the datatype's range", name),
               PR_ERR_INVALID;
      break;
    case PR_DTYPE_UINT8:
    case PR_DTYPE_UINT16:
    case PR_DTYPE_UINT32:
      if (!(bad = c->n_uint_contents != numel) && take_uints(c->uint_contents, numel, t))
        return pr__errf(err, err_len, "input '%s': a value out of the datatype's range", name),
               PR_ERR_INVALID;
      break;
    case PR_DTYPE_INT64:
      if (!(bad = c->n_int64_contents != numel)) memcpy(t->data, c->int64_contents, numel * esize);
      break;
    case PR_DTYPE_UINT64:
      if (!(bad = c->n_uint64_contents != numel))
        memcpy(t->data, c->uint64_contents, numel * esize);
      break;
    case PR_DTYPE_FLOAT:
      if (!(bad = c->n_fp32_contents != numel)) memcpy(t->data, c->fp32_contents, numel * esize);
      break;
    case PR_DTYPE_DOUBLE:
      if (!(bad = c->n_fp64_contents != numel)) memcpy(t->data, c->fp64_contents, numel * esize);
      break;
    default:
      return pr__errf(err, err_len, "input '%s': FP16 data travels in raw_input_contents only",
                      name),
             PR_ERR_INVALID;
  }
  if (bad)
    return pr__errf(err, err_len, "input '%s': contents hold another type than its datatype", name),
           PR_ERR_INVALID;
  return PR_OK;
}

/* Raw bytes into t (nbytes exactly). */
static pr_status_t take_raw(const ProtobufCBinaryData *raw, const char *name, pr_tensor_t *t,
                            size_t nbytes, char *err, size_t err_len) {
  if (raw->len != nbytes)
    return pr__errf(err, err_len,
                    "input '%s': raw_input_contents has %zu bytes, the shape needs %zu", name,
                    raw->len, nbytes),
           PR_ERR_INVALID;
  if (nbytes) memcpy(t->data, raw->data, nbytes);
  if (t->dtype == PR_DTYPE_BOOL) /* one byte each: any non-zero is true */
    for (size_t b = 0; b < nbytes; b++) ((uint8_t *)t->data)[b] = raw->data[b] != 0;
  return PR_OK;
}

/* Input i of req into r; *bytes: tensor bytes taken so far. */
static pr_status_t take_input(const pr_proto_model_t *m, const Inference__ModelInferRequest *req,
                              size_t i, size_t max_bytes, size_t *bytes, pr_request_t *r, char *err,
                              size_t err_len) {
  const Inference__ModelInferRequest__InferInputTensor *in = req->inputs[i];
  const char *name = in->name;
  if (!name[0] || !in->datatype[0] || !in->n_shape)
    return pr__errf(err, err_len, "input %zu needs 'name', 'datatype' and a non-empty 'shape'", i),
           PR_ERR_INVALID;
  if (in->n_shape > PR_MAX_RANK)
    return pr__errf(err, err_len, "a shape has more than %d dimensions", PR_MAX_RANK),
           PR_ERR_INVALID;
  bool raw = req->n_raw_input_contents > 0;
  if (raw && in->contents)
    return pr__errf(err, err_len, "input '%s': contents and raw_input_contents both given", name),
           PR_ERR_INVALID;
  if (!raw && !in->contents)
    return pr__errf(err, err_len, "input '%s' has no data", name), PR_ERR_INVALID;
  int k;
  size_t numel, nbytes;
  pr_status_t st = pr__proto_input_check(m, name, in->datatype, (int)in->n_shape, in->shape, r, &k,
                                         &numel, &nbytes, err, err_len);
  if (!st) st = pr__proto_input_alloc(r, k, nbytes, max_bytes, bytes, err, err_len);
  if (st) return st;
  if (raw) return take_raw(&req->raw_input_contents[i], name, &r->inputs[k], nbytes, err, err_len);
  return take_typed(in->contents, name, &r->inputs[k], numel, err, err_len);
}

/* A non-negative integer parameter (int64_param or uint64_param) into *v;
 * -1 for another type or a negative value. */
static int uint_param(const Inference__InferParameter *p, long long max, long long *v) {
  if (p->parameter_choice_case == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM &&
      p->int64_param >= 0 && p->int64_param <= max)
    return *v = p->int64_param, 0;
  if (p->parameter_choice_case == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_UINT64_PARAM &&
      p->uint64_param <= (uint64_t)max)
    return *v = (long long)p->uint64_param, 0;
  return -1;
}

/* The schedule-policy parameters, as REST's: "priority" (a level, 0: the
 * model's default) and "timeout" (microseconds in the queue); others are
 * ignored. */
static pr_status_t take_params(const Inference__ModelInferRequest *req, pr_proto_infer_t *q,
                               char *err, size_t err_len) {
  for (size_t i = 0; i < req->n_parameters; i++) {
    const char *key = req->parameters[i]->key;
    const Inference__InferParameter *p = req->parameters[i]->value;
    long long v;
    if (!strcmp(key, "priority")) {
      if (!p || uint_param(p, INT_MAX, &v))
        return pr__errf(err, err_len, "%s", PR_PRIORITY_RANGE), PR_ERR_INVALID;
      q->priority = (int)v;
    } else if (!strcmp(key, "timeout")) {
      if (!p || uint_param(p, LLONG_MAX, &v))
        return pr__errf(err, err_len, "'timeout' must be a non-negative integer (microseconds)"),
               PR_ERR_INVALID;
      q->timeout_us = v;
    }
  }
  return PR_OK;
}

pr_status_t pr__grpc_decode_infer(const pr_proto_model_t *m,
                                  const Inference__ModelInferRequest *req, size_t max_bytes,
                                  pr_request_t *r, pr_proto_infer_t *q, bool *raw, char *err,
                                  size_t err_len) {
  memset(q, 0, sizeof *q);
  *raw = req->n_raw_input_contents > 0;
  if (!pr__utf8_valid(req->id, strlen(req->id)))
    return pr__errf(err, err_len, "'id' must be valid UTF-8"), PR_ERR_INVALID;
  if (req->id[0] && !(q->id = strdup(req->id)))
    return pr__errf(err, err_len, "out of memory; retry later"), PR_ERR_BUSY;
  if (req->n_inputs == 0 || req->n_inputs > PR_SCHED_MAX_IO)
    return pr__errf(err, err_len, "'inputs' must hold 1 to %d tensors", PR_SCHED_MAX_IO),
           PR_ERR_INVALID;
  if (*raw && req->n_raw_input_contents != req->n_inputs)
    return pr__errf(err, err_len, "raw_input_contents has %zu entries for %zu inputs",
                    req->n_raw_input_contents, req->n_inputs),
           PR_ERR_INVALID;
  pr_status_t pst = take_params(req, q, err, err_len);
  if (pst) return pst;
  if (req->n_outputs > PR_SCHED_MAX_IO)
    return pr__errf(err, err_len, "'outputs' holds more than %d tensors", PR_SCHED_MAX_IO),
           PR_ERR_INVALID;
  r->rows = -1;
  size_t bytes = 0;
  for (size_t i = 0; i < req->n_inputs; i++) {
    pr_status_t st = take_input(m, req, i, max_bytes, &bytes, r, err, err_len);
    if (st) return st;
  }
  pr_status_t st = pr__proto_inputs_complete(m, r, err, err_len);
  for (size_t j = 0; !st && j < req->n_outputs; j++) {
    int k;
    st = pr__proto_output_take(m, req->outputs[j]->name, q, &k, err, err_len);
  }
  return st;
}

/* ---- responses ---- */

/* Typed contents of t: views of its data where the field's type is the
 * tensor's, else a converted copy (*owned, the caller frees). */
static int typed_contents(const pr_tensor_t *t, Inference__InferTensorContents *c, void **owned) {
  size_t n = (size_t)pr_tensor_numel(t);
  *owned = NULL;
  switch (t->dtype) {
    case PR_DTYPE_FLOAT: c->n_fp32_contents = n, c->fp32_contents = t->data; return 0;
    case PR_DTYPE_DOUBLE: c->n_fp64_contents = n, c->fp64_contents = t->data; return 0;
    case PR_DTYPE_INT64: c->n_int64_contents = n, c->int64_contents = t->data; return 0;
    case PR_DTYPE_UINT64: c->n_uint64_contents = n, c->uint64_contents = t->data; return 0;
    case PR_DTYPE_INT32: c->n_int_contents = n, c->int_contents = t->data; return 0;
    case PR_DTYPE_UINT32: c->n_uint_contents = n, c->uint_contents = t->data; return 0;
    default: break;
  }
  int32_t *v = malloc(n ? n * sizeof *v : 1);
  if (!(*owned = v)) return -1;
  for (size_t i = 0; i < n; i++) switch (t->dtype) {
      case PR_DTYPE_BOOL: v[i] = ((const uint8_t *)t->data)[i] != 0; break;
      case PR_DTYPE_INT8: v[i] = ((const int8_t *)t->data)[i]; break;
      case PR_DTYPE_INT16: v[i] = ((const int16_t *)t->data)[i]; break;
      case PR_DTYPE_UINT8: v[i] = ((const uint8_t *)t->data)[i]; break;
      default: v[i] = ((const uint16_t *)t->data)[i]; break; /* UINT16 */
    }
  if (t->dtype == PR_DTYPE_BOOL)
    c->n_bool_contents = n, c->bool_contents = (protobuf_c_boolean *)v;
  else if (t->dtype == PR_DTYPE_INT8 || t->dtype == PR_DTYPE_INT16)
    c->n_int_contents = n, c->int_contents = v;
  else
    c->n_uint_contents = n, c->uint_contents = (uint32_t *)v;
  return 0;
}

typedef struct {
  Inference__ModelInferResponse resp;
  Inference__ModelInferResponse__InferOutputTensor tensors[PR_SCHED_MAX_IO];
  Inference__ModelInferResponse__InferOutputTensor *list[PR_SCHED_MAX_IO];
  Inference__InferTensorContents contents[PR_SCHED_MAX_IO];
  ProtobufCBinaryData raw[PR_SCHED_MAX_IO];
  void *owned[PR_SCHED_MAX_IO];
} response_t;

pr_status_t pr__grpc_encode_infer(const pr_proto_model_t *m, const char *model_name,
                                  const char *version, const pr_request_t *r,
                                  const pr_proto_infer_t *q, bool raw, uint8_t **out,
                                  size_t *out_len) {
  int list[PR_SCHED_MAX_IO], n = 0;
  for (int o = 0; o < (q->n_outputs ? q->n_outputs : m->n_outputs); o++)
    list[n++] = q->n_outputs ? q->outputs[o] : o;
  for (int i = 0; i < n; i++) raw |= r->outputs[list[i]].dtype == PR_DTYPE_FLOAT16;
  response_t *x = calloc(1, sizeof *x);
  if (!x) return PR_ERR_NOMEM;
  inference__model_infer_response__init(&x->resp);
  x->resp.model_name = (char *)model_name;
  x->resp.model_version = (char *)version;
  x->resp.id = q->id ? q->id : "";
  pr_status_t st = PR_OK;
  for (int i = 0; i < n && !st; i++) {
    const pr_tensor_t *t = &r->outputs[list[i]];
    Inference__ModelInferResponse__InferOutputTensor *o = &x->tensors[i];
    inference__model_infer_response__infer_output_tensor__init(o);
    o->name = (char *)m->outputs[list[i]].name;
    o->datatype = (char *)pr__proto_datatype(t->dtype);
    o->n_shape = (size_t)t->rank;
    o->shape = (int64_t *)t->dims;
    x->list[i] = o;
    if (raw) {
      x->raw[i].len = (size_t)pr_tensor_numel(t) * pr_dtype_size(t->dtype);
      x->raw[i].data = t->data;
      continue;
    }
    inference__infer_tensor_contents__init(&x->contents[i]);
    if (typed_contents(t, &x->contents[i], &x->owned[i])) st = PR_ERR_NOMEM;
    o->contents = &x->contents[i];
  }
  x->resp.n_outputs = (size_t)n;
  x->resp.outputs = x->list;
  if (raw) x->resp.n_raw_output_contents = (size_t)n, x->resp.raw_output_contents = x->raw;
  if (!st) {
    size_t len = inference__model_infer_response__get_packed_size(&x->resp);
    uint8_t *buf = malloc(len ? len : 1);
    if (buf) {
      *out_len = inference__model_infer_response__pack(&x->resp, buf);
      *out = buf;
    } else {
      st = PR_ERR_NOMEM;
    }
  }
  for (int i = 0; i < n; i++) free(x->owned[i]);
  free(x);
  return st;
}
