#include "base/text.h"

#include <string.h>

/* Length of the well-formed UTF-8 sequence at s (at most n bytes), or 0. */
static size_t seq_len(const unsigned char *s, size_t n) {
  unsigned c = s[0];
  if (c < 0x80) return 1;
  size_t len;
  unsigned lo = 0x80, hi = 0xbf; /* range of the second byte */
  if (c >= 0xc2 && c <= 0xdf) {
    len = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    len = 3;
    if (c == 0xe0) lo = 0xa0; /* overlong */
    if (c == 0xed) hi = 0x9f; /* surrogates */
  } else if (c >= 0xf0 && c <= 0xf4) {
    len = 4;
    if (c == 0xf0) lo = 0x90; /* overlong */
    if (c == 0xf4) hi = 0x8f; /* above U+10FFFF */
  } else {
    return 0;
  }
  if (n < len || s[1] < lo || s[1] > hi) return 0;
  for (size_t i = 2; i < len; i++)
    if ((s[i] & 0xc0) != 0x80) return 0;
  return len;
}

bool pr__utf8_valid(const char *s, size_t len) {
  const unsigned char *p = (const unsigned char *)s;
  for (size_t i = 0; i < len;) {
    size_t k = seq_len(p + i, len - i);
    if (!k) return false;
    i += k;
  }
  return true;
}

char *pr__utf8_sanitize(const char *s, char *out, size_t out_len) {
  const unsigned char *p = (const unsigned char *)s;
  size_t n = strlen(s), o = 0;
  for (size_t i = 0; i < n;) {
    size_t k = seq_len(p + i, n - i);
    const char *src = k ? s + i : "?";
    size_t w = k ? k : 1;
    if (o + w + 1 > out_len) break;
    memcpy(out + o, src, w);
    o += w;
    i += w;
  }
  out[o] = 0;
  return out;
}
