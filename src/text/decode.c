/* Ids to text, as the reference decodes (transformers.js decode_single):
 * ids to token strings, special tokens left out on request, the decoder
 * (ByteLevel: runs of ordinary tokens to bytes, then UTF-8 with U+FFFD for
 * what is ill-formed; added tokens as they are), then the clean-up of
 * spaces before punctuation where tokenizer_config asks for it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer.h"
#include "text/utf8.h"

typedef struct {
  char *p;
  size_t len, cap;
} buf_t;

static pr_status_t reserve(buf_t *b, size_t more) {
  if (b->len + more <= b->cap) return PR_OK;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + more) {
    if (cap > SIZE_MAX / 2) return PR_ERR_NOMEM;
    cap *= 2;
  }
  char *p = realloc(b->p, cap);
  if (!p) return PR_ERR_NOMEM;
  b->p = p;
  b->cap = cap;
  return PR_OK;
}

static pr_status_t append(buf_t *b, const char *s, size_t n) {
  pr_status_t st = reserve(b, n);
  if (st) return st;
  if (n) memcpy(b->p + b->len, s, n);
  b->len += n;
  return PR_OK;
}

/* The bytes of a run of byte-level tokens, decoded as UTF-8 onto out. */
static pr_status_t flush_bytes(buf_t *run, buf_t *out) {
  if (!run->len) return PR_OK;
  size_t n = pr_text__utf8_sanitize(run->p, run->len, NULL);
  pr_status_t st = reserve(out, n);
  if (st) return st;
  pr_text__utf8_sanitize(run->p, run->len, out->p + out->len);
  out->len += n;
  run->len = 0;
  return PR_OK;
}

/* Every from (non-overlapping, left to right) replaced by to, which is
 * shorter: in place. */
static void replace_all(buf_t *b, const char *from, const char *to) {
  size_t fl = strlen(from), tl = strlen(to), r = 0, w = 0;
  while (r < b->len) {
    if (b->len - r >= fl && !memcmp(b->p + r, from, fl)) {
      memmove(b->p + w, to, tl);
      w += tl;
      r += fl;
    } else {
      b->p[w++] = b->p[r++];
    }
  }
  b->len = w;
}

/* The reference's clean_up_tokenization, in its order. */
static void clean_up(buf_t *b) {
  static const char *const pairs[][2] = {
      {" .", "."},     {" ?", "?"},   {" !", "!"},   {" ,", ","},     {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"},
  };
  for (size_t k = 0; k < sizeof pairs / sizeof *pairs; k++)
    replace_all(b, pairs[k][0], pairs[k][1]);
}

pr_status_t pr_tokenizer_decode(pr_tokenizer_t *t, const int32_t *ids, size_t n, unsigned flags,
                                char *out, size_t cap, size_t *len, char *err, size_t err_len) {
  *len = 0;
  if (err && err_len) err[0] = 0;
  buf_t text = {0}, run = {0};
  pr_status_t st = PR_OK;
  bool first = true;
  for (size_t i = 0; !st && i < n; i++) {
    int32_t id = ids[i];
    size_t tl;
    const char *s = pr_text__tok_str(t, id, &tl);
    if (!s && t->unk_id >= 0) s = pr_text__tok_str(t, id = t->unk_id, &tl);
    if (!s) continue; /* the reference's undefined token joins as "" */
    if ((flags & PR_TOKENIZER_SKIP_SPECIAL) && (t->id_flags[id] & PR_TEXT__ID_SPECIAL)) continue;
    if (!t->decoder_bytelevel) {
      if (!first) st = append(&text, " ", 1);
      if (!st) st = append(&text, s, tl);
      first = false;
      continue;
    }
    if (t->id_flags[id] & PR_TEXT__ID_ADDED) {
      st = flush_bytes(&run, &text);
      if (!st) st = append(&text, s, tl);
      continue;
    }
    if ((st = reserve(&run, tl))) break;
    for (size_t k = 0; k < tl;) {
      int b = pr_text__byte_of(pr_text__utf8_next(s, tl, &k));
      run.p[run.len++] = (char)(b < 0 ? 0 : b); /* the reference's Uint8Array of undefined */
    }
  }
  if (!st && run.len) st = flush_bytes(&run, &text);
  if (!st && t->cleanup) clean_up(&text);
  free(run.p);
  if (st) {
    free(text.p);
    if (err && err_len) snprintf(err, err_len, "out of memory");
    return st;
  }
  *len = text.len;
  size_t k = text.len < cap ? text.len : cap;
  if (k) memcpy(out, text.p, k);
  if (text.len < cap) out[text.len] = 0;
  free(text.p);
  if (text.len >= cap) {
    if (err && err_len) snprintf(err, err_len, "%zu bytes of text do not fit in %zu", *len, cap);
    return PR_ERR_TOO_LARGE;
  }
  return PR_OK;
}
