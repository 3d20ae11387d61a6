/* Pre-tokenizer patterns through PCRE2, meaning what they mean to the
 * reference. See regex.h.
 *
 * Notes on the design:
 * - The reference compiles a tokenizer.json pattern as a JavaScript
 *   RegExp with the u flag, after two rewrites of its own (a backslash
 *   before # & ~ dropped; the case-insensitive contraction group of GPT-4
 *   style patterns, which JavaScript cannot parse, spelled out as classes).
 *   Here the same rewrites come first, then the translation of what means
 *   something else in PCRE2: \s and \S (JavaScript's white space list; no
 *   PCRE2_UCP, so \d \w \b stay ASCII as in JavaScript), `.` (JavaScript
 *   excludes four line terminators), \v, \u escapes. An escape or group
 *   syntax not on the list is refused rather than guessed.
 * - Limits: the match limit bounds the work of one match and the depth
 *   (heap) limit its memory, so a pattern that backtracks catastrophically
 *   fails with PR_ERR_TOO_LARGE instead of running away. The JIT is used
 *   when the platform has one; it honours the match limit too.
 * - One match data per regex: a tokenizer is used by one thread at a time
 *   (packrat/text.h). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "text/regex.h"

#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MATCH_LIMIT 50000000u /* steps of one match */
#define HEAP_LIMIT_KIB 65536u /* backtracking memory of one match */
#define DEPTH_LIMIT 1000000u

const char pr_text__gpt2_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/* JavaScript's \s (WhiteSpace and LineTerminator), as class members. */
#define JS_SPACE                                                                              \
  "\\t\\n\\x0B\\f\\r \\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}" \
  "\\x{3000}\\x{FEFF}"

struct pr_text__regex {
  pcre2_code *code;
  pcre2_match_data *md;
  pcre2_match_context *mctx;
  pcre2_jit_stack *jit_stack;
};

typedef struct {
  char *p;
  size_t len, cap;
  int oom;
} sbuf_t;

static void put(sbuf_t *b, const char *s, size_t n) {
  if (b->oom) return;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap * 2 : 256;
    while (cap < b->len + n + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
      b->oom = 1;
      return;
    }
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = 0;
}
static void put_str(sbuf_t *b, const char *s) {
  put(b, s, strlen(s));
}

/* The reference's own rewrites of a pattern before it compiles it. */
static char *reference_rewrites(const char *pat, size_t len, size_t *out_len) {
  static const char *const from[] = {"(?i:'s|'t|'re|'ve|'m|'ll|'d)"};
  static const char *const to[] = {"(?:'([sS]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD]))"};
  sbuf_t b = {0};
  for (size_t i = 0; i < len;) {
    if (pat[i] == '\\' && i + 1 < len && strchr("#&~", pat[i + 1]) && pat[i + 1]) {
      put(&b, pat + i + 1, 1);
      i += 2;
      continue;
    }
    size_t k, n = 0;
    for (k = 0; k < sizeof from / sizeof *from; k++) {
      n = strlen(from[k]);
      if (len - i >= n && !memcmp(pat + i, from[k], n)) break;
    }
    if (k < sizeof from / sizeof *from) {
      put_str(&b, to[k]);
      i += n;
      continue;
    }
    put(&b, pat + i, 1);
    i++;
  }
  put(&b, "", 0);
  if (b.oom) {
    free(b.p);
    return NULL;
  }
  *out_len = b.len;
  return b.p;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* JavaScript (u flag) to PCRE2; 0, or -1 with a message. */
static int translate(const char *p, size_t len, sbuf_t *o, char *err, size_t err_len) {
  bool in_class = false;
  for (size_t i = 0; i < len;) {
    char c = p[i];
    if (c == '\\') {
      if (i + 1 >= len) return snprintf(err, err_len, "a trailing backslash"), -1;
      char e = p[i + 1];
      if (e == 's') {
        put_str(o, in_class ? JS_SPACE : "[" JS_SPACE "]");
        i += 2;
      } else if (e == 'S') {
        if (in_class) return snprintf(err, err_len, "\\S inside a character class"), -1;
        put_str(o, "[^" JS_SPACE "]");
        i += 2;
      } else if (e == 'v') {
        put_str(o, "\\x0B");
        i += 2;
      } else if (e == 'u') {
        /* \uXXXX or \u{X...} */
        size_t j = i + 2, start, end;
        if (j < len && p[j] == '{') {
          start = ++j;
          while (j < len && hexval(p[j]) >= 0) j++;
          if (j >= len || p[j] != '}' || j == start || j - start > 6)
            return snprintf(err, err_len, "a malformed \\u{...} escape"), -1;
          end = j++;
        } else {
          start = j;
          while (j < len && j - start < 4 && hexval(p[j]) >= 0) j++;
          if (j - start != 4) return snprintf(err, err_len, "a malformed \\uXXXX escape"), -1;
          end = j;
        }
        put_str(o, "\\x{");
        put(o, p + start, end - start);
        put_str(o, "}");
        i = j;
      } else if (e == 'p' || e == 'P') {
        size_t j = i + 2;
        if (j >= len || p[j] != '{') return snprintf(err, err_len, "\\%c without {...}", e), -1;
        while (j < len && p[j] != '}') j++;
        if (j >= len) return snprintf(err, err_len, "an unclosed \\%c{", e), -1;
        put(o, p + i, j + 1 - i);
        i = j + 1;
      } else if (e == 'x') {
        if (i + 3 >= len || hexval(p[i + 2]) < 0 || hexval(p[i + 3]) < 0)
          return snprintf(err, err_len, "a malformed \\x escape"), -1;
        put(o, p + i, 4);
        i += 4;
      } else if (strchr("dDwWbBrntf0", e) || strchr("^$\\.*+?()[]{}|/-#&~", e)) {
        if (e == '0' && i + 2 < len && p[i + 2] >= '0' && p[i + 2] <= '9')
          return snprintf(err, err_len, "an octal escape"), -1;
        put(o, p + i, 2);
        i += 2;
      } else {
        if ((unsigned char)e >= 0x20 && (unsigned char)e < 0x7f)
          snprintf(err, err_len, "the escape \\%c", e);
        else
          snprintf(err, err_len, "an escape of a non-ASCII byte");
        return -1;
      }
      continue;
    }
    if (in_class) {
      if (c == ']') in_class = false;
      put(o, p + i, 1);
      i++;
      continue;
    }
    if (c == '[') {
      size_t j = i + 1;
      if (j < len && p[j] == '^') j++;
      if (j < len && p[j] == ']')
        return snprintf(err, err_len, "an empty character class ([] or [^])"), -1;
      in_class = true;
      put(o, p + i, j - i);
      i = j;
      continue;
    }
    if (c == '.') {
      put_str(o, "[^\\n\\r\\x{2028}\\x{2029}]");
      i++;
      continue;
    }
    if (c == '(' && i + 1 < len && p[i + 1] == '?') {
      const char *q = p + i + 2;
      size_t left = len - i - 2;
      bool ok = (left >= 1 && (q[0] == ':' || q[0] == '=' || q[0] == '!')) ||
                (left >= 2 && q[0] == '<' &&
                 (q[1] == '=' || q[1] == '!' || (q[1] >= 'A' && q[1] <= 'Z') ||
                  (q[1] >= 'a' && q[1] <= 'z') || q[1] == '_'));
      if (!ok) return snprintf(err, err_len, "a group of the form (?%.2s", q), -1;
    }
    put(o, p + i, 1);
    i++;
  }
  if (in_class) return snprintf(err, err_len, "an unclosed character class"), -1;
  return 0;
}

void pr_text__regex_free(pr_text__regex_t *re) {
  if (!re) return;
  pcre2_match_data_free(re->md);
  pcre2_match_context_free(re->mctx);
  pcre2_jit_stack_free(re->jit_stack);
  pcre2_code_free(re->code);
  free(re);
}

pr_status_t pr_text__regex_compile(const char *pattern, size_t len, bool literal,
                                   pr_text__regex_t **out, char *err, size_t err_len) {
  *out = NULL;
  sbuf_t o = {0};
  uint32_t opts = PCRE2_UTF | PCRE2_DOLLAR_ENDONLY | PCRE2_NEVER_BACKSLASH_C;
  if (literal) {
    put(&o, pattern, len);
    opts |= PCRE2_LITERAL;
  } else {
    size_t rlen;
    char *rewritten = reference_rewrites(pattern, len, &rlen);
    if (!rewritten) return PR_ERR_NOMEM;
    char why[160] = "";
    int bad = translate(rewritten, rlen, &o, why, sizeof why);
    free(rewritten);
    if (bad) {
      free(o.p);
      snprintf(err, err_len, "the pre-tokenizer's regex uses %s, which is not supported", why);
      return PR_ERR_UNSUPPORTED;
    }
    put(&o, "", 0);
  }
  if (o.oom) {
    free(o.p);
    return PR_ERR_NOMEM;
  }
  pr_text__regex_t *re = calloc(1, sizeof *re);
  if (!re) {
    free(o.p);
    return PR_ERR_NOMEM;
  }
  int code;
  PCRE2_SIZE at;
  re->code = pcre2_compile((PCRE2_SPTR)o.p, o.len, opts, &code, &at, NULL);
  free(o.p);
  if (!re->code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(code, msg, sizeof msg);
    snprintf(err, err_len, "the pre-tokenizer's regex does not compile: %s", (char *)msg);
    pr_text__regex_free(re);
    return PR_ERR_INVALID;
  }
  (void)pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE); /* the interpreter where no JIT */
  re->md = pcre2_match_data_create_from_pattern(re->code, NULL);
  re->mctx = pcre2_match_context_create(NULL);
  if (!re->md || !re->mctx) {
    pr_text__regex_free(re);
    return PR_ERR_NOMEM;
  }
  /* the JIT's backtracking memory: bounded as the interpreter's heap is */
  size_t jit_size = 0;
  if (pcre2_pattern_info(re->code, PCRE2_INFO_JITSIZE, &jit_size) == 0 && jit_size > 0) {
    re->jit_stack = pcre2_jit_stack_create(32u << 10, HEAP_LIMIT_KIB << 10, NULL);
    if (re->jit_stack) pcre2_jit_stack_assign(re->mctx, NULL, re->jit_stack);
  }
  pcre2_set_match_limit(re->mctx, MATCH_LIMIT);
  pcre2_set_heap_limit(re->mctx, HEAP_LIMIT_KIB);
  pcre2_set_depth_limit(re->mctx, DEPTH_LIMIT);
  *out = re;
  return PR_OK;
}

int pr_text__regex_find(pr_text__regex_t *re, const char *s, size_t len, size_t pos, size_t *start,
                        size_t *end) {
  if (pos > len) return 0;
  int rc = pcre2_match(re->code, (PCRE2_SPTR)s, len, pos, PCRE2_NO_UTF_CHECK, re->md, re->mctx);
  if (rc == PCRE2_ERROR_NOMATCH) return 0;
  if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT || rc == PCRE2_ERROR_HEAPLIMIT ||
      rc == PCRE2_ERROR_JIT_STACKLIMIT)
    return PR_ERR_TOO_LARGE;
  if (rc < 0) return PR_ERR_INTERNAL;
  PCRE2_SIZE *ov = pcre2_get_ovector_pointer(re->md);
  *start = ov[0];
  *end = ov[1];
  return 1;
}
