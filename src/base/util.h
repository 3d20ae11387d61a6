/* Small shared helpers: aligned allocation, checked size arithmetic, time. */
#ifndef PR_BASE_UTIL_H
#define PR_BASE_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define PR_ALIGN 64

/* 64-byte aligned allocation of at least len bytes (len 0 allowed); free with pr__free. */
void *pr__aligned_alloc(size_t len);
void *pr__aligned_calloc(size_t len);
void pr__free(void *p);
char *pr__strdup(const char *s);

/* Checked multiply/add: return 0 on success, -1 on overflow. */
static inline int pr__mul_size(size_t a, size_t b, size_t *out) {
  return __builtin_mul_overflow(a, b, out) ? -1 : 0;
}
static inline int pr__add_size(size_t a, size_t b, size_t *out) {
  return __builtin_add_overflow(a, b, out) ? -1 : 0;
}

/* Monotonic clock in seconds. */
double pr__now(void);

/* Opens path for reading only when it is a regular file: the open itself
 * cannot block (a FIFO or a device at the path is refused, not waited
 * on). NULL with errno set; EINVAL when path is not a regular file
 * (pr__file_error says so). */
FILE *pr__fopen_regular(const char *path);
/* strerror(e), but "not a regular file" for pr__fopen_regular's EINVAL. */
const char *pr__file_error(int e);

/* Read a whole regular file (pr__fopen_regular) into a malloc'd buffer;
 * returns 0 or -1 (errno set; EFBIG beyond max_len). */
int pr__read_file(const char *path, void **data, size_t *len, size_t max_len);

/* The folder part of path ("." when it has none) into out. */
void pr__dirname(const char *path, char *out, size_t len);

/* SHA-256 of data as 64 lowercase hex chars + NUL. */
void pr__sha256_hex(const void *data, size_t len, char out[65]);

#endif
