/* The pre-tokenizers' regular expressions: a tokenizer.json pattern read as
 * the reference reads it (a JavaScript regular expression with the u flag)
 * and run by PCRE2, with its JIT where there is one and with match and
 * depth limits. */
#ifndef PR_TEXT_REGEX_H
#define PR_TEXT_REGEX_H

#include <stdbool.h>
#include <stddef.h>

#include "packrat/engine.h"

typedef struct pr_text__regex pr_text__regex_t;

/* Compiles pattern[0..len): a regex (literal false) or a string to find as
 * it is (literal true). PR_ERR_UNSUPPORTED for syntax whose meaning differs
 * between JavaScript and PCRE2 and is not translated (named in err),
 * PR_ERR_INVALID for what PCRE2 refuses. */
pr_status_t pr_text__regex_compile(const char *pattern, size_t len, bool literal,
                                   pr_text__regex_t **out, char *err, size_t err_len);
void pr_text__regex_free(pr_text__regex_t *re);

/* The first match in s[0..len) (well-formed UTF-8) at or after pos: 1 with
 * [*start, *end), 0 when there is none, PR_ERR_TOO_LARGE when the match or
 * depth limit stopped it, PR_ERR_INTERNAL for another PCRE2 failure. */
int pr_text__regex_find(pr_text__regex_t *re, const char *s, size_t len, size_t pos, size_t *start,
                        size_t *end);

/* GPT-2's pattern, the ByteLevel pre-tokenizer's when use_regex is on. */
extern const char pr_text__gpt2_pattern[];

#endif
