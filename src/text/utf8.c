/* UTF-8 decoding with WHATWG's replacement rule, JavaScript's white space
 * and NFC (utf8proc). See utf8.h.
 *
 * Notes on the design:
 * - The reference reads text as a JavaScript string: bytes reach it through
 *   a UTF-8 decoder that replaces each maximal ill-formed subsequence (the
 *   Unicode "best practice" WHATWG adopted) with one U+FFFD. Replacing the
 *   same way here makes packrat's ids the reference's for any bytes, and
 *   every later stage works on well-formed UTF-8 only.
 * - NUL is a character like any other: nothing here stops at a 0 byte. */
#include "text/utf8.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* The byte range a sequence's second byte must lie in, by lead byte (the
 * WHATWG decoder's lower and upper boundaries); later bytes are 80..BF. */
static bool lead(unsigned char c, int *need, unsigned char *lo, unsigned char *hi) {
  *lo = 0x80;
  *hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    *need = 1;
  } else if (c >= 0xE0 && c <= 0xEF) {
    *need = 2;
    if (c == 0xE0) *lo = 0xA0;
    if (c == 0xED) *hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    *need = 3;
    if (c == 0xF0) *lo = 0x90;
    if (c == 0xF4) *hi = 0x8F;
  } else {
    return false;
  }
  return true;
}

size_t pr_text__utf8_sanitize(const char *s, size_t len, char *out) {
  const unsigned char *u = (const unsigned char *)s;
  size_t i = 0, n = 0;
  while (i < len) {
    unsigned char c = u[i];
    if (c < 0x80) {
      if (out) out[n] = (char)c;
      n++;
      i++;
      continue;
    }
    int need;
    unsigned char lo, hi;
    size_t start = i, k = 1;
    if (lead(c, &need, &lo, &hi)) {
      /* take continuation bytes while they fit; stop at the first that
       * does not (it starts the next character) */
      while ((int)k <= need && start + k < len) {
        unsigned char d = u[start + k];
        if (d < lo || d > hi) break;
        lo = 0x80;
        hi = 0xBF;
        k++;
      }
      if ((int)k == need + 1) {
        if (out) memcpy(out + n, s + start, k);
        n += k;
        i = start + k;
        continue;
      }
    }
    /* an ill-formed subsequence: the bytes taken so far (at least the
     * lead) become one U+FFFD */
    if (out) pr_text__utf8_put(PR_TEXT__REPLACEMENT, out + n);
    n += 3;
    i = start + k;
  }
  return n;
}

uint32_t pr_text__utf8_next(const char *s, size_t len, size_t *i) {
  const unsigned char *u = (const unsigned char *)s + *i;
  size_t left = len - *i;
  uint32_t cp;
  size_t k;
  if (u[0] < 0x80) {
    cp = u[0];
    k = 1;
  } else if (u[0] < 0xE0 && left >= 2) {
    cp = (uint32_t)(u[0] & 0x1F) << 6 | (u[1] & 0x3F);
    k = 2;
  } else if (u[0] < 0xF0 && left >= 3) {
    cp = (uint32_t)(u[0] & 0x0F) << 12 | (uint32_t)(u[1] & 0x3F) << 6 | (u[2] & 0x3F);
    k = 3;
  } else if (left >= 4) {
    cp = (uint32_t)(u[0] & 0x07) << 18 | (uint32_t)(u[1] & 0x3F) << 12 |
         (uint32_t)(u[2] & 0x3F) << 6 | (u[3] & 0x3F);
    k = 4;
  } else { /* not reached on well-formed input */
    cp = PR_TEXT__REPLACEMENT;
    k = left;
  }
  *i += k;
  return cp;
}

size_t pr_text__utf8_put(uint32_t cp, char *out) {
  unsigned char *o = (unsigned char *)out;
  if (cp < 0x80) {
    o[0] = (unsigned char)cp;
    return 1;
  }
  if (cp < 0x800) {
    o[0] = (unsigned char)(0xC0 | cp >> 6);
    o[1] = (unsigned char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    o[0] = (unsigned char)(0xE0 | cp >> 12);
    o[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
    o[2] = (unsigned char)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (unsigned char)(0xF0 | cp >> 18);
  o[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
  o[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
  o[3] = (unsigned char)(0x80 | (cp & 0x3F));
  return 4;
}

bool pr_text__js_space(uint32_t cp) {
  switch (cp) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x20:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
    case 0xFEFF: return true;
    default: return cp >= 0x2000 && cp <= 0x200A;
  }
}

pr_status_t pr_text__nfc(const char *s, size_t len, char **out, size_t *out_len) {
  utf8proc_uint8_t *res = NULL;
  utf8proc_ssize_t n = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)len, &res,
                                    UTF8PROC_STABLE | UTF8PROC_COMPOSE);
  if (n < 0) {
    free(res);
    return n == UTF8PROC_ERROR_NOMEM || n == UTF8PROC_ERROR_OVERFLOW ? PR_ERR_NOMEM
                                                                     : PR_ERR_INVALID;
  }
  *out = (char *)res;
  *out_len = (size_t)n;
  return PR_OK;
}
