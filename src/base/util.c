#include "base/util.h"

#include <errno.h>
#include <fcntl.h>
#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void *pr__aligned_alloc(size_t len) {
  size_t rounded = (len + PR_ALIGN - 1) / PR_ALIGN * PR_ALIGN;
  if (rounded < len) return NULL;
  if (rounded == 0) rounded = PR_ALIGN;
  return aligned_alloc(PR_ALIGN, rounded);
}

void *pr__aligned_calloc(size_t len) {
  void *p = pr__aligned_alloc(len);
  if (p) memset(p, 0, len ? len : 1);
  return p;
}

void pr__free(void *p) {
  free(p);
}

char *pr__strdup(const char *s) {
  return s ? strdup(s) : NULL;
}

double pr__now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

FILE *pr__fopen_regular(const char *path) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return NULL;
  struct stat sb;
  int e = 0, flags;
  if (fstat(fd, &sb) != 0 || (flags = fcntl(fd, F_GETFL)) < 0)
    e = errno;
  else if (!S_ISREG(sb.st_mode))
    e = EINVAL; /* a FIFO, device, socket or folder */
  else if (fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0)
    e = errno; /* reads of a regular file block as usual from here */
  FILE *f = e ? NULL : fdopen(fd, "rb");
  if (!f) {
    if (!e) e = errno;
    close(fd);
    errno = e;
  }
  return f;
}

const char *pr__file_error(int e) {
  return e == EINVAL ? "not a regular file" : strerror(e);
}

int pr__read_file(const char *path, void **data, size_t *len, size_t max_len) {
  FILE *f = pr__fopen_regular(path);
  if (!f) return -1;
  if (fseek(f, 0, SEEK_END) != 0) goto fail;
  long size = ftell(f);
  if (size < 0) goto fail;
  if ((size_t)size > max_len) {
    errno = EFBIG;
    goto fail;
  }
  rewind(f);
  void *buf = malloc((size_t)size + 1);
  if (!buf) goto fail;
  if (size && fread(buf, 1, (size_t)size, f) != (size_t)size) {
    free(buf);
    errno = EIO;
    goto fail;
  }
  fclose(f);
  *data = buf;
  *len = (size_t)size;
  return 0;
fail:
  fclose(f);
  return -1;
}

void pr__sha256_hex(const void *data, size_t len, char out[65]) {
  struct sha256_ctx ctx;
  uint8_t digest[SHA256_DIGEST_SIZE];
  sha256_init(&ctx);
  sha256_update(&ctx, len, data);
  sha256_digest(&ctx, sizeof digest, digest);
  for (int i = 0; i < SHA256_DIGEST_SIZE; i++) snprintf(out + 2 * i, 3, "%02x", digest[i]);
}

void pr__dirname(const char *path, char *out, size_t len) {
  snprintf(out, len, "%s", path);
  char *slash = strrchr(out, '/');
  if (slash == out)
    slash[1] = 0;
  else if (slash)
    *slash = 0;
  else
    snprintf(out, len, ".");
}
