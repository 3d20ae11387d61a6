/* UTF-8 as the reference reads it: WHATWG's decoder (each maximal
 * ill-formed subsequence becomes one U+FFFD), code points, JavaScript's
 * white space, and NFC through utf8proc. */
#ifndef PR_TEXT_UTF8_H
#define PR_TEXT_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "packrat/engine.h"

#define PR_TEXT__REPLACEMENT 0xFFFDu

/* The length of s[0..len) once every ill-formed sequence is replaced by
 * U+FFFD the way WHATWG's UTF-8 decoder does (TextDecoder, fatal: false;
 * node's Buffer.toString). out, when not NULL, receives that text (it must
 * hold the returned length). */
size_t pr_text__utf8_sanitize(const char *s, size_t len, char *out);

/* Decodes the code point at s[*i] of well-formed UTF-8 and advances *i. */
uint32_t pr_text__utf8_next(const char *s, size_t len, size_t *i);

/* Writes cp as UTF-8 to out (4 bytes of room); returns its length. */
size_t pr_text__utf8_put(uint32_t cp, char *out);

/* JavaScript's white space (the \s of its regular expressions and what
 * String.prototype.trim removes): WhiteSpace and LineTerminator. */
bool pr_text__js_space(uint32_t cp);

/* s[0..len) (well-formed UTF-8) in Unicode normalization form C, in a
 * malloc'd buffer *out of *out_len bytes (the caller frees it). */
pr_status_t pr_text__nfc(const char *s, size_t len, char **out, size_t *out_len);

#endif
