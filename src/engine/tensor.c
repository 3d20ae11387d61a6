/* Element types and tensor files (.pb TensorProto and .npy). */
#include "engine/tensor.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/util.h"
#include "onnx.pb-c.h"

#define MAX_TENSOR_FILE ((size_t)2 << 30)

size_t pr_dtype_size(pr_dtype_t dt) {
  switch (dt) {
    case PR_DTYPE_FLOAT:
    case PR_DTYPE_INT32:
    case PR_DTYPE_UINT32: return 4;
    case PR_DTYPE_UINT8:
    case PR_DTYPE_INT8:
    case PR_DTYPE_BOOL: return 1;
    case PR_DTYPE_UINT16:
    case PR_DTYPE_INT16:
    case PR_DTYPE_FLOAT16: return 2;
    case PR_DTYPE_INT64:
    case PR_DTYPE_DOUBLE:
    case PR_DTYPE_UINT64: return 8;
    default: return 0;
  }
}

const char *pr_dtype_name(pr_dtype_t dt) {
  switch (dt) {
    case PR_DTYPE_FLOAT: return "FLOAT";
    case PR_DTYPE_UINT8: return "UINT8";
    case PR_DTYPE_INT8: return "INT8";
    case PR_DTYPE_UINT16: return "UINT16";
    case PR_DTYPE_INT16: return "INT16";
    case PR_DTYPE_INT32: return "INT32";
    case PR_DTYPE_INT64: return "INT64";
    case PR_DTYPE_STRING: return "STRING";
    case PR_DTYPE_BOOL: return "BOOL";
    case PR_DTYPE_FLOAT16: return "FLOAT16";
    case PR_DTYPE_DOUBLE: return "DOUBLE";
    case PR_DTYPE_UINT32: return "UINT32";
    case PR_DTYPE_UINT64: return "UINT64";
    default: return "UNDEFINED";
  }
}

int64_t pr_tensor_numel(const pr_tensor_t *t) {
  int64_t n = 1;
  for (int k = 0; k < t->rank; k++) n *= t->dims[k];
  return n;
}

void pr_engine_tensor_free(pr_tensor_t *t) {
  if (!t) return;
  pr_free(t->data);
  t->data = NULL;
}

static const struct {
  const char *descr;
  pr_dtype_t dt;
} npy_types[] = {
    {"f4", PR_DTYPE_FLOAT},  {"f8", PR_DTYPE_DOUBLE}, {"f2", PR_DTYPE_FLOAT16},
    {"i8", PR_DTYPE_INT64},  {"i4", PR_DTYPE_INT32},  {"i2", PR_DTYPE_INT16},
    {"i1", PR_DTYPE_INT8},   {"u1", PR_DTYPE_UINT8},  {"u2", PR_DTYPE_UINT16},
    {"u4", PR_DTYPE_UINT32}, {"u8", PR_DTYPE_UINT64}, {"b1", PR_DTYPE_BOOL},
};

static pr_status_t read_npy(const unsigned char *buf, size_t len, pr_tensor_t *out, char *err,
                            size_t err_len) {
  if (len < 10 || buf[6] < 1 || buf[6] > 3) goto bad;
  size_t hlen, hoff;
  if (buf[6] == 1) {
    hlen = buf[8] | (buf[9] << 8);
    hoff = 10;
  } else {
    if (len < 12) goto bad;
    hlen = buf[8] | (buf[9] << 8) | ((size_t)buf[10] << 16) | ((size_t)buf[11] << 24);
    hoff = 12;
  }
  if (hlen > len - hoff || hlen > 65536) goto bad;
  char header[65537];
  memcpy(header, buf + hoff, hlen);
  header[hlen] = 0;
  const char *d = strstr(header, "'descr'");
  const char *f = strstr(header, "'fortran_order'");
  const char *s = strstr(header, "'shape'");
  if (!d || !f || !s) goto bad;
  d = strchr(d + 7, '\'');
  if (!d) goto bad;
  d++;
  char endian = *d;
  if (endian == '>') {
    pr_errf(err, err_len, "npy: big-endian data not supported");
    return PR_ERR_UNSUPPORTED;
  }
  if (endian == '<' || endian == '|' || endian == '=') d++;
  pr_dtype_t dt = PR_DTYPE_UNDEFINED;
  for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++)
    if (!strncmp(d, npy_types[i].descr, 2) && d[2] == '\'') dt = npy_types[i].dt;
  if (dt == PR_DTYPE_UNDEFINED) {
    pr_errf(err, err_len, "npy: element type not supported");
    return PR_ERR_UNSUPPORTED;
  }
  f = strchr(f + 15, ':');
  if (!f) goto bad;
  while (*++f == ' ') {
  }
  if (!strncmp(f, "True", 4)) {
    pr_errf(err, err_len, "npy: Fortran order not supported");
    return PR_ERR_UNSUPPORTED;
  }
  s = strchr(s, '(');
  if (!s) goto bad;
  s++;
  memset(out, 0, sizeof *out);
  out->dtype = dt;
  size_t numel = 1;
  while (1) {
    while (*s == ' ' || *s == ',') s++;
    if (*s == ')') break;
    if (!isdigit((unsigned char)*s)) goto bad;
    if (out->rank >= PR_MAX_RANK) {
      pr_errf(err, err_len, "npy: rank over %d", PR_MAX_RANK);
      return PR_ERR_UNSUPPORTED;
    }
    char *e;
    long long v = strtoll(s, &e, 10);
    if (v < 0 || pr_mul_size(numel, (size_t)v, &numel)) goto bad;
    out->dims[out->rank++] = v;
    s = e;
  }
  size_t nbytes;
  if (pr_mul_size(numel, pr_dtype_size(dt), &nbytes) || nbytes != len - hoff - hlen) {
    pr_errf(err, err_len, "npy: data size does not match the shape");
    return PR_ERR_INVALID;
  }
  out->data = pr_aligned_alloc(nbytes);
  if (!out->data) return PR_ERR_NOMEM;
  memcpy(out->data, buf + hoff + hlen, nbytes);
  return PR_OK;
bad:
  pr_errf(err, err_len, "npy: malformed header");
  return PR_ERR_INVALID;
}

pr_status_t pr_engine_tensor_read_file(const char *path, pr_tensor_t *out, char **name_out,
                                       char *err, size_t err_len) {
  if (name_out) *name_out = NULL;
  void *buf;
  size_t len;
  if (pr_read_file(path, &buf, &len, MAX_TENSOR_FILE) < 0) {
    pr_errf(err, err_len, "cannot read %s: %s", path, strerror(errno));
    return PR_ERR_IO;
  }
  pr_status_t st;
  if (len >= 6 && !memcmp(buf, "\x93NUMPY", 6)) {
    st = read_npy(buf, len, out, err, err_len);
  } else {
    Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, len, buf);
    if (!tp) {
      pr_errf(err, err_len, "%s: neither a TensorProto nor a .npy file", path);
      free(buf);
      return PR_ERR_INVALID;
    }
    char dir[4096];
    pr_dirname(path, dir, sizeof dir);
    pr_tensor_t *t = NULL;
    st = pr_tensor_from_proto(tp, dir, &t, err, err_len);
    if (!st) {
      *out = *t;
      free(t);
      if (name_out && tp->name && *tp->name) *name_out = pr_strdup(tp->name);
    }
    onnx__tensor_proto__free_unpacked(tp, NULL);
  }
  free(buf);
  return st;
}

static int write_all(const char *path, const void *a, size_t alen, const void *b, size_t blen) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  int ok = fwrite(a, 1, alen, f) == alen && (!blen || fwrite(b, 1, blen, f) == blen);
  ok &= fclose(f) == 0;
  return ok ? 0 : -1;
}

pr_status_t pr_engine_tensor_write_pb(const char *path, const pr_tensor_t *t, const char *name) {
  Onnx__TensorProto tp = ONNX__TENSOR_PROTO__INIT;
  int64_t dims[PR_MAX_RANK];
  for (int k = 0; k < t->rank; k++) dims[k] = t->dims[k];
  tp.n_dims = (size_t)t->rank;
  tp.dims = dims;
  tp.has_data_type = 1;
  tp.data_type = t->dtype;
  tp.name = (char *)(name ? name : "");
  tp.has_raw_data = 1;
  tp.raw_data.len = (size_t)pr_tensor_numel(t) * pr_dtype_size(t->dtype);
  tp.raw_data.data = t->data;
  size_t n = onnx__tensor_proto__get_packed_size(&tp);
  uint8_t *buf = malloc(n ? n : 1);
  if (!buf) return PR_ERR_NOMEM;
  onnx__tensor_proto__pack(&tp, buf);
  int rc = write_all(path, buf, n, NULL, 0);
  free(buf);
  return rc ? PR_ERR_IO : PR_OK;
}

pr_status_t pr_engine_tensor_write_npy(const char *path, const pr_tensor_t *t) {
  const char *descr = NULL;
  for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++)
    if (npy_types[i].dt == t->dtype) descr = npy_types[i].descr;
  if (!descr) return PR_ERR_UNSUPPORTED;
  char shape[256] = "";
  size_t off = 0;
  for (int k = 0; k < t->rank; k++)
    off += (size_t)snprintf(shape + off, sizeof shape - off, "%lld,%s", (long long)t->dims[k],
                            k + 1 < t->rank ? " " : "");
  char header[512];
  int hl = snprintf(header + 10, sizeof header - 10,
                    "{'descr': '%c%s', 'fortran_order': False, 'shape': (%s), }",
                    descr[0] == 'b' || descr[1] == '1' ? '|' : '<', descr, shape);
  int total = 10 + hl + 1;
  int pad = (64 - total % 64) % 64;
  memset(header + 10 + hl, ' ', (size_t)pad);
  header[10 + hl + pad] = '\n';
  int hlen = hl + pad + 1;
  memcpy(header, "\x93NUMPY\x01\x00", 8);
  header[8] = (char)(hlen & 0xff);
  header[9] = (char)(hlen >> 8);
  size_t nbytes = (size_t)pr_tensor_numel(t) * pr_dtype_size(t->dtype);
  return write_all(path, header, (size_t)(10 + hlen), t->data, nbytes) ? PR_ERR_IO : PR_OK;
}
