/* Element types, TensorProto decoding (with external data kept inside the
 * model's folder) and tensor files (.pb TensorProto and .npy). */
#include "engine/tensor.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "base/util.h"
#include "engine/onnx_prescan.h"
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
  pr__free(t->data);
  t->data = NULL;
}

/* ---- TensorProto decoding ---- */

/* Where a tensor's external data is found and where errors go. */
typedef struct {
  const char *base_dir;
  char *err;
  size_t err_len;
} decode_t;

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
static pr_status_t open_external(decode_t *L, const Onnx__TensorProto *tp, const char *location,
                                 int *fd_out, off_t *size_out) {
  char shown[160], base[PATH_MAX], joined[2 * PATH_MAX], real[PATH_MAX];
  safe_text(location, shown, sizeof shown);
  if (location[0] == '/' || has_dotdot_component(location)) {
    pr__errf(L->err, L->err_len,
             "tensor '%s': external data location '%s' is refused (absolute or with a '..' "
             "component)",
             tp->name, shown);
    return PR_ERR_INVALID;
  }
  const char *dir = L->base_dir ? L->base_dir : ".";
  if (!realpath(dir, base)) {
    pr__errf(L->err, L->err_len, "tensor '%s': cannot resolve the model's folder: %s", tp->name,
             strerror(errno));
    return PR_ERR_IO;
  }
  if ((size_t)snprintf(joined, sizeof joined, "%s/%s", base, location) >= sizeof joined) {
    pr__errf(L->err, L->err_len, "tensor '%s': external data location '%s' too long", tp->name,
             shown);
    return PR_ERR_INVALID;
  }
  if (!realpath(joined, real)) {
    pr__errf(L->err, L->err_len, "tensor '%s': cannot open external data '%s': %s", tp->name, shown,
             strerror(errno));
    return PR_ERR_IO;
  }
  size_t bl = strlen(base);
  if (strncmp(real, base, bl) || (base[bl - 1] != '/' && real[bl] != '/')) {
    pr__errf(L->err, L->err_len,
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
    pr__errf(L->err, L->err_len, "tensor '%s': cannot open external data '%s': %s", tp->name, shown,
             fd < 0 ? strerror(errno) : "not a regular file");
    if (fd >= 0) close(fd);
    return fd < 0 ? PR_ERR_IO : PR_ERR_INVALID;
  }
  *fd_out = fd;
  *size_out = sb.st_size;
  return PR_OK;
}

/* A decimal number of external_data (offset, length): digits only, no sign,
 * at most INT64_MAX; false otherwise. */
static bool parse_size(const char *text, long long *out) {
  if (!*text) return false;
  long long v = 0;
  for (const char *p = text; *p; p++) {
    if (*p < '0' || *p > '9' || v > (LLONG_MAX - (*p - '0')) / 10) return false;
    v = v * 10 + (*p - '0');
  }
  *out = v;
  return true;
}

/* Where tp's external data is: its file opened (*fd, a regular file inside
 * the model's folder) and the offset of its nbytes, checked to lie inside
 * the file. Nothing is allocated: a few bytes of model must not cost what
 * their shape declares before the file is known to hold it. */
static pr_status_t find_external(decode_t *L, const Onnx__TensorProto *tp, size_t nbytes, int *fd,
                                 off_t *offset_out) {
  const char *location = NULL;
  long long offset = 0, length = -1;
  bool ok = true;
  for (size_t i = 0; i < tp->n_external_data; i++) {
    const char *k = tp->external_data[i]->key, *val = tp->external_data[i]->value;
    if (!k || !val) continue;
    if (!strcmp(k, "location"))
      location = val;
    else if (!strcmp(k, "offset"))
      ok &= parse_size(val, &offset);
    else if (!strcmp(k, "length"))
      ok &= parse_size(val, &length);
  }
  if (!location || !*location) {
    pr__errf(L->err, L->err_len, "tensor '%s': external data without a location", tp->name);
    return PR_ERR_INVALID;
  }
  if (!ok || (length >= 0 && (unsigned long long)length != nbytes)) {
    pr__errf(L->err, L->err_len, "tensor '%s': external data offset/length invalid", tp->name);
    return PR_ERR_INVALID;
  }
  off_t size;
  pr_status_t st = open_external(L, tp, location, fd, &size);
  if (st) return st;
  if ((unsigned long long)offset > (unsigned long long)size ||
      nbytes > (unsigned long long)(size - offset)) {
    char shown[160];
    safe_text(location, shown, sizeof shown);
    pr__errf(
        L->err, L->err_len,
        "tensor '%s': external data '%s' holds %lld bytes, the tensor needs %zu at offset %lld",
        tp->name, shown, (long long)size, nbytes, offset);
    close(*fd);
    *fd = -1;
    return PR_ERR_INVALID;
  }
  *offset_out = (off_t)offset;
  return PR_OK;
}

/* Reads nbytes at offset of fd into dst (a regular file, which the size
 * check said holds them: a short read means it shrank since). */
static pr_status_t read_external(decode_t *L, const Onnx__TensorProto *tp, int fd, off_t offset,
                                 void *dst, size_t nbytes) {
  size_t got = 0;
  while (got < nbytes) {
    ssize_t r = pread(fd, (char *)dst + got, nbytes - got, offset + (off_t)got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      pr__errf(L->err, L->err_len, "tensor '%s': external data: %s", tp->name,
               r < 0 ? strerror(errno) : "file shorter than when it was opened");
      return PR_ERR_IO;
    }
    got += (size_t)r;
  }
  return PR_OK;
}

/* How many elements tp's typed repeated field for element type dt holds
 * (float_data, int64_data, ...; int32_data for int32 and narrower, bool
 * and float16). */
static size_t typed_count(const Onnx__TensorProto *tp, pr_dtype_t dt) {
  switch (dt) {
    case PR_DTYPE_FLOAT: return tp->n_float_data;
    case PR_DTYPE_DOUBLE: return tp->n_double_data;
    case PR_DTYPE_INT64: return tp->n_int64_data;
    case PR_DTYPE_UINT32:
    case PR_DTYPE_UINT64: return tp->n_uint64_data;
    default: return tp->n_int32_data;
  }
}

/* The typed repeated field of tp into t->data, which typed_count said holds
 * numel elements (nbytes). */
static void decode_typed(const Onnx__TensorProto *tp, pr_tensor_t *t, size_t numel, size_t nbytes) {
  switch (t->dtype) {
    case PR_DTYPE_FLOAT:
      if (nbytes) memcpy(t->data, tp->float_data, nbytes);
      break;
    case PR_DTYPE_DOUBLE:
      if (nbytes) memcpy(t->data, tp->double_data, nbytes);
      break;
    case PR_DTYPE_INT64:
      if (nbytes) memcpy(t->data, tp->int64_data, nbytes);
      break;
    case PR_DTYPE_UINT32:
    case PR_DTYPE_UINT64:
      for (size_t i = 0; i < numel; i++) {
        if (t->dtype == PR_DTYPE_UINT64)
          ((uint64_t *)t->data)[i] = tp->uint64_data[i];
        else
          ((uint32_t *)t->data)[i] = (uint32_t)tp->uint64_data[i];
      }
      break;
    default: { /* int32 and narrower, bool, float16: int32_data */
      size_t esize = pr_dtype_size(t->dtype);
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
  }
}

/* tp's element type and shape into t (no data yet); *numel and *nbytes its
 * size, bounded by PR_MAX_MODEL_BYTES. */
static pr_status_t tensor_shape(const Onnx__TensorProto *tp, const char *name, pr_tensor_t *t,
                                size_t *numel, size_t *nbytes, char *err, size_t err_len) {
  pr_dtype_t dt = (pr_dtype_t)tp->data_type;
  size_t esize = pr_dtype_size(dt);
  if (!esize) {
    pr__errf(err, err_len, "tensor '%s': element type %d not supported", name, tp->data_type);
    return PR_ERR_UNSUPPORTED;
  }
  if (tp->n_dims > PR_MAX_RANK) {
    pr__errf(err, err_len, "tensor '%s': rank %zu over %d", name, tp->n_dims, PR_MAX_RANK);
    return PR_ERR_UNSUPPORTED;
  }
  if (tp->segment) {
    pr__errf(err, err_len, "tensor '%s': segmented tensors not supported", name);
    return PR_ERR_UNSUPPORTED;
  }
  t->dtype = dt;
  t->rank = (int)tp->n_dims;
  *numel = 1;
  for (size_t i = 0; i < tp->n_dims; i++) {
    if (tp->dims[i] < 0 || pr__mul_size(*numel, (size_t)tp->dims[i], numel)) {
      pr__errf(err, err_len, "tensor '%s': bad dimension %lld", name, (long long)tp->dims[i]);
      return PR_ERR_INVALID;
    }
    t->dims[i] = tp->dims[i];
  }
  if (pr__mul_size(*numel, esize, nbytes) || *nbytes > PR_MAX_MODEL_BYTES) {
    pr__errf(err, err_len, "tensor '%s': too large", name);
    return PR_ERR_INVALID;
  }
  return PR_OK;
}

/* Notes on the design: every size the file declares (the shape, an
 * external file's offset and length) is checked against the bytes that
 * back it (raw_data, the typed field, the external file's real size)
 * BEFORE the tensor's buffer is allocated: a 131-byte model declaring a
 * 1 GiB initializer costs nothing. raw_data that protobuf-c left 16-byte
 * aligned becomes the tensor's buffer without a copy. */
pr_status_t pr__tensor_from_proto(Onnx__TensorProto *tp, const char *base_dir, pr_tensor_t **out,
                                  char *err, size_t err_len) {
  decode_t L = {.base_dir = base_dir, .err = err, .err_len = err_len};
  const char *name = tp->name ? tp->name : "";
  pr_tensor_t shape = {0};
  size_t numel, nbytes;
  pr_status_t st = tensor_shape(tp, name, &shape, &numel, &nbytes, err, err_len);
  if (st) return st;
  bool external =
      tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
  int fd = -1;
  off_t offset = 0;
  if (external) {
    if ((st = find_external(&L, tp, nbytes, &fd, &offset))) return st;
  } else if (tp->has_raw_data) {
    if (tp->raw_data.len != nbytes) {
      pr__errf(err, err_len, "tensor '%s': raw_data has %zu bytes, shape needs %zu", name,
               tp->raw_data.len, nbytes);
      return PR_ERR_INVALID;
    }
  } else if (typed_count(tp, shape.dtype) != numel) {
    pr__errf(err, err_len, "tensor '%s': has %zu elements, shape needs %zu", name,
             typed_count(tp, shape.dtype), numel);
    return PR_ERR_INVALID;
  }
  pr_tensor_t *t = malloc(sizeof *t);
  if (!t) {
    if (fd >= 0) close(fd);
    return PR_ERR_NOMEM;
  }
  *t = shape;
  if (!external && tp->has_raw_data && nbytes && ((uintptr_t)tp->raw_data.data % 16) == 0) {
    /* take protobuf-c's copy of the bytes instead of copying them again
     * (both come from malloc): halves the peak memory of a load */
    t->data = tp->raw_data.data;
    tp->raw_data.data = NULL;
    tp->raw_data.len = 0;
    tp->has_raw_data = 0;
  } else if (!(t->data = pr__aligned_alloc(nbytes))) {
    st = PR_ERR_NOMEM;
  } else if (external) {
    st = read_external(&L, tp, fd, offset, t->data, nbytes);
  } else if (tp->has_raw_data) {
    if (nbytes) memcpy(t->data, tp->raw_data.data, nbytes);
  } else {
    decode_typed(tp, t, numel, nbytes);
  }
  if (fd >= 0) close(fd);
  if (st) {
    pr_engine_tensor_free(t);
    free(t);
    return st;
  }
  *out = t;
  return PR_OK;
}

/* ---- tensor files (.npy, .pb) ---- */

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
    pr__errf(err, err_len, "npy: big-endian data not supported");
    return PR_ERR_UNSUPPORTED;
  }
  if (endian == '<' || endian == '|' || endian == '=') d++;
  pr_dtype_t dt = PR_DTYPE_UNDEFINED;
  for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++)
    if (!strncmp(d, npy_types[i].descr, 2) && d[2] == '\'') dt = npy_types[i].dt;
  if (dt == PR_DTYPE_UNDEFINED) {
    pr__errf(err, err_len, "npy: element type not supported");
    return PR_ERR_UNSUPPORTED;
  }
  f = strchr(f + 15, ':');
  if (!f) goto bad;
  while (*++f == ' ') {
  }
  if (!strncmp(f, "True", 4)) {
    pr__errf(err, err_len, "npy: Fortran order not supported");
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
      pr__errf(err, err_len, "npy: rank over %d", PR_MAX_RANK);
      return PR_ERR_UNSUPPORTED;
    }
    char *e;
    long long v = strtoll(s, &e, 10);
    if (v < 0 || pr__mul_size(numel, (size_t)v, &numel)) goto bad;
    out->dims[out->rank++] = v;
    s = e;
  }
  size_t nbytes;
  if (pr__mul_size(numel, pr_dtype_size(dt), &nbytes) || nbytes != len - hoff - hlen) {
    pr__errf(err, err_len, "npy: data size does not match the shape");
    return PR_ERR_INVALID;
  }
  out->data = pr__aligned_alloc(nbytes);
  if (!out->data) return PR_ERR_NOMEM;
  memcpy(out->data, buf + hoff + hlen, nbytes);
  return PR_OK;
bad:
  pr__errf(err, err_len, "npy: malformed header");
  return PR_ERR_INVALID;
}

pr_status_t pr_engine_tensor_read_file(const char *path, pr_tensor_t *out, char **name_out,
                                       char *err, size_t err_len) {
  if (name_out) *name_out = NULL;
  void *buf;
  size_t len;
  if (pr__read_file(path, &buf, &len, MAX_TENSOR_FILE) < 0) {
    pr__errf(err, err_len, "cannot read %s: %s", path, strerror(errno));
    return PR_ERR_IO;
  }
  pr_status_t st;
  if (len >= 6 && !memcmp(buf, "\x93NUMPY", 6)) {
    st = read_npy(buf, len, out, err, err_len);
  } else {
    /* bounded before protobuf-c unpacks it, as a model is (onnx_prescan.h) */
    char why[160];
    Onnx__TensorProto *tp =
        pr_engine__proto_prescan(buf, len, &onnx__tensor_proto__descriptor, PR_PRESCAN_MAX_DEPTH,
                                 PR_PRESCAN_MAX_ITEMS, why, sizeof why)
            ? NULL
            : onnx__tensor_proto__unpack(NULL, len, buf);
    if (!tp) {
      pr__errf(err, err_len, "%s: neither a TensorProto nor a .npy file", path);
      free(buf);
      return PR_ERR_INVALID;
    }
    char dir[4096];
    pr__dirname(path, dir, sizeof dir);
    pr_tensor_t *t = NULL;
    st = pr__tensor_from_proto(tp, dir, &t, err, err_len);
    if (!st) {
      *out = *t;
      free(t);
      if (name_out && tp->name && *tp->name) *name_out = pr__strdup(tp->name);
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
