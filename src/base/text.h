/* Untrusted text: UTF-8 validation and safe cutting. Names, ids and specs
 * that come from clients are bytes, not text; anything echoed back in a JSON
 * body goes through pr__utf8_sanitize first. */
#ifndef PR_BASE_TEXT_H
#define PR_BASE_TEXT_H

#include <stdbool.h>
#include <stddef.h>

/* Whether s[0..len) is well-formed UTF-8 (no overlongs, surrogates or code
 * points above U+10FFFF). */
bool pr__utf8_valid(const char *s, size_t len);

/* Copies the NUL-terminated s into out (out_len >= 1), replacing every byte
 * that does not start a well-formed UTF-8 sequence with '?', and cutting at a
 * character boundary so the result fits out_len with its NUL. Returns out. */
char *pr__utf8_sanitize(const char *s, char *out, size_t out_len);

#endif
