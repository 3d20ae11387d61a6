/* Text to ids: the reference's pipeline, step by step. See packrat/text.h.
 *
 * Notes on the design:
 * - The order is the reference's (transformers.js PreTrainedTokenizer):
 *   bytes to well-formed UTF-8 (utf8.h); added tokens split out, longest
 *   match first, with their lstrip/rstrip trimming JavaScript white space
 *   from their neighbours; each other section normalized, pre-tokenized
 *   into pieces and merged by the model; then the post-processor's
 *   template around the ids.
 * - Pieces are views (pointer, length) into the section or into a buffer
 *   a ByteLevel step wrote; a step sizes its buffer before writing, so the
 *   views stay valid until the section is done.
 * - A word's merge is O(n log n) (bpe.c) and words repeat, so their ids
 *   are cached (cache.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/text.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

typedef struct {
  const char *p;
  size_t len;
} piece_t;

typedef struct {
  piece_t *v;
  size_t n, cap;
} pieces_t;

static pr_status_t push_piece(pieces_t *ps, const char *p, size_t len) {
  if (ps->n == ps->cap) {
    size_t cap = ps->cap ? ps->cap * 2 : 64;
    piece_t *v = realloc(ps->v, cap * sizeof *v);
    if (!v) return PR_ERR_NOMEM;
    ps->v = v;
    ps->cap = cap;
  }
  ps->v[ps->n++] = (piece_t){p, len};
  return PR_OK;
}

static pr_status_t push_id(pr_tokenizer_t *t, int32_t id) {
  if (t->out_n == t->out_cap) {
    size_t cap = t->out_cap ? t->out_cap * 2 : 256;
    int32_t *v = realloc(t->out, cap * sizeof *v);
    if (!v) return PR_ERR_NOMEM;
    t->out = v;
    t->out_cap = cap;
  }
  t->out[t->out_n++] = id;
  return PR_OK;
}

/* ---- pre-tokenizers ---- */

/* Split, Isolated: the matches and the text between them, in order, empty
 * ones left out; after an empty match the search goes on one character
 * later (JavaScript's matchAll). */
static pr_status_t split(pr_text__regex_t *re, piece_t in, pieces_t *out) {
  size_t prev = 0, pos = 0, start, end;
  while (pos <= in.len) {
    int rc = pr_text__regex_find(re, in.p, in.len, pos, &start, &end);
    if (rc < 0) return rc;
    if (rc == 0) break;
    pr_status_t st = PR_OK;
    if (prev < start) st = push_piece(out, in.p + prev, start - prev);
    if (!st && end > start) st = push_piece(out, in.p + start, end - start);
    if (st) return st;
    prev = end;
    if (end > start) {
      pos = end;
    } else {
      if (end >= in.len) break;
      pr_text__utf8_next(in.p, in.len, &end);
      pos = end;
    }
  }
  return prev < in.len ? push_piece(out, in.p + prev, in.len - prev) : PR_OK;
}

/* The matches alone, empty ones left out (the reference's String.match). */
static pr_status_t matches(pr_text__regex_t *re, piece_t in, pieces_t *out) {
  size_t pos = 0, start, end;
  while (pos <= in.len) {
    int rc = pr_text__regex_find(re, in.p, in.len, pos, &start, &end);
    if (rc <= 0) return rc;
    if (end > start) {
      pr_status_t st = push_piece(out, in.p + start, end - start);
      if (st) return st;
      pos = end;
    } else {
      if (end >= in.len) break;
      pr_text__utf8_next(in.p, in.len, &end);
      pos = end;
    }
  }
  return PR_OK;
}

/* ByteLevel: each byte of a piece to its character of the byte alphabet,
 * into buf (room for 2 bytes per byte). */
static piece_t byte_map(const char *s, size_t len, char *buf) {
  size_t n = 0;
  for (size_t i = 0; i < len; i++)
    n += pr_text__utf8_put(pr_text__byte_cp((unsigned char)s[i]), buf + n);
  return (piece_t){buf, n};
}

/* One ByteLevel step over in: optional prefix space, GPT-2's regex (matches
 * only, as the reference's String.match), the byte alphabet. */
static pr_status_t byte_level(const pr_text__pre_t *step, const pieces_t *in, pieces_t *out,
                              char **buf) {
  size_t bytes = 0;
  for (size_t k = 0; k < in->n; k++) bytes += 2 * (in->v[k].len + 1);
  *buf = malloc(bytes ? bytes : 1);
  if (!*buf) return PR_ERR_NOMEM;
  char *w = *buf;
  pieces_t found = {0};
  pr_status_t st = PR_OK;
  for (size_t k = 0; !st && k < in->n; k++) {
    piece_t p = in->v[k];
    char *prefixed = NULL;
    if (step->add_prefix_space && (p.len == 0 || p.p[0] != ' ')) {
      prefixed = malloc(p.len + 1);
      if (!prefixed) {
        st = PR_ERR_NOMEM;
        break;
      }
      prefixed[0] = ' ';
      memcpy(prefixed + 1, p.p, p.len);
      p = (piece_t){prefixed, p.len + 1};
    }
    found.n = 0;
    st = step->re ? matches(step->re, p, &found) : push_piece(&found, p.p, p.len);
    for (size_t j = 0; !st && j < found.n; j++) {
      piece_t m = byte_map(found.v[j].p, found.v[j].len, w);
      w += m.len;
      st = push_piece(out, m.p, m.len);
    }
    free(prefixed);
  }
  free(found.v);
  return st;
}

/* ---- the model ---- */

/* BPE on one piece: its characters' ids merged, the result cached. */
static pr_status_t model_piece(pr_tokenizer_t *t, piece_t p) {
  if (!p.len) return PR_OK;
  if (t->ignore_merges) {
    int32_t id = pr_text__strmap_get(&t->vocab, p.p, p.len);
    if (id >= 0) return push_id(t, id);
  }
  size_t n;
  const int32_t *hit = pr_text__cache_get(&t->cache, p.p, p.len, &n);
  if (hit) {
    for (size_t i = 0; i < n; i++) {
      pr_status_t st = push_id(t, hit[i]);
      if (st) return st;
    }
    return PR_OK;
  }
  if (p.len > t->syms_cap) {
    int32_t *s = realloc(t->syms, p.len * sizeof *s);
    if (!s) return PR_ERR_NOMEM;
    t->syms = s;
    t->syms_cap = p.len;
  }
  n = 0;
  for (size_t i = 0; i < p.len;) {
    size_t at = i;
    uint32_t cp = pr_text__utf8_next(p.p, p.len, &i);
    t->syms[n++] = cp < 512 ? t->cp_id[cp] : pr_text__strmap_get(&t->vocab, p.p + at, i - at);
  }
  pr_status_t st = pr_text__bpe_merge(&t->merges, &t->bpe, t->syms, n, &n);
  if (st) return st;
  /* characters outside the vocabulary: the unknown token, or nothing where
   * the model has none */
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    int32_t id = t->syms[i] >= 0 ? t->syms[i] : t->unk_id;
    if (id >= 0) t->syms[k++] = id;
  }
  pr_text__cache_put(&t->cache, p.p, p.len, t->syms, k);
  for (size_t i = 0; i < k; i++)
    if ((st = push_id(t, t->syms[i]))) return st;
  return PR_OK;
}

/* One section of text (no added token in it): normalizer, pre-tokenizers,
 * model. */
static pr_status_t encode_section(pr_tokenizer_t *t, const char *s, size_t len) {
  char *normalized = NULL, *bufs[PR_TEXT__MAX_STEPS] = {0};
  pieces_t a = {0}, b = {0};
  pr_status_t st = PR_OK;
  if (t->norm == PR_TEXT__NORM_NFC) {
    if ((st = pr_text__nfc(s, len, &normalized, &len))) return st;
    s = normalized;
  }
  if (len == 0) goto done;
  size_t first = t->out_n;
  if ((st = push_piece(&a, s, len))) goto done;
  for (int k = 0; k < t->n_pre; k++) {
    b.n = 0;
    const pr_text__pre_t *step = &t->pre[k];
    if (step->kind == PR_TEXT__PRE_SPLIT) {
      for (size_t i = 0; !st && i < a.n; i++) st = split(step->re, a.v[i], &b);
    } else if (step->kind == PR_TEXT__PRE_MATCHES) {
      for (size_t i = 0; !st && i < a.n; i++) st = matches(step->re, a.v[i], &b);
    } else {
      st = byte_level(step, &a, &b, &bufs[k]);
    }
    if (st) goto done;
    pieces_t swap = a;
    a = b;
    b = swap;
  }
  for (size_t i = 0; !st && i < a.n; i++) st = model_piece(t, a.v[i]);
  if (!st && t->fuse_unk && t->unk_id >= 0) { /* runs of the unknown token fused to one */
    size_t k = first;
    for (size_t i = first; i < t->out_n; i++)
      if (!(t->out[i] == t->unk_id && k > first && t->out[k - 1] == t->unk_id))
        t->out[k++] = t->out[i];
    t->out_n = k;
  }
done:
  for (int k = 0; k < PR_TEXT__MAX_STEPS; k++) free(bufs[k]);
  free(a.v);
  free(b.v);
  free(normalized);
  return st;
}

/* ---- added tokens ---- */

typedef struct {
  const char *p;
  size_t len;
  int32_t added; /* index in t->added, or -1 for text */
} section_t;

/* The longest added token at s[i..len): its index, and its length in *n. */
static int32_t longest_added(const pr_tokenizer_t *t, const char *s, size_t len, size_t i,
                             size_t *n) {
  int32_t node = 0, found = -1;
  for (size_t j = i; j < len; j++) {
    int32_t c = t->trie[node].first_child;
    while (c >= 0 && t->trie[c].byte != (unsigned char)s[j]) c = t->trie[c].next_sibling;
    if (c < 0) break;
    node = c;
    if (t->trie[node].added >= 0) {
      found = t->trie[node].added;
      *n = j + 1 - i;
    }
  }
  return found;
}

static size_t trim_end(const char *s, size_t len) {
  while (len) {
    size_t k = len - 1;
    while (k && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
    size_t i = k;
    if (!pr_text__js_space(pr_text__utf8_next(s, len, &i))) break;
    len = k;
  }
  return len;
}

static size_t trim_start(const char *s, size_t len) {
  size_t i = 0;
  while (i < len) {
    size_t at = i;
    if (!pr_text__js_space(pr_text__utf8_next(s, len, &i))) return at;
  }
  return len;
}

static pr_status_t encode_text(pr_tokenizer_t *t, const char *s, size_t len) {
  section_t *secs = NULL;
  size_t n = 0, cap = 0, start = 0;
  pr_status_t st = PR_OK;
  for (size_t i = 0; i <= len; i++) {
    size_t mlen = 0;
    int32_t k = i < len && t->n_trie > 1 ? longest_added(t, s, len, i, &mlen) : -1;
    if (k < 0 && i < len) continue;
    if (n + 2 > cap) {
      cap = cap ? cap * 2 : 16;
      section_t *v = realloc(secs, cap * sizeof *v);
      if (!v) {
        free(secs);
        return PR_ERR_NOMEM;
      }
      secs = v;
    }
    if (i > start) secs[n++] = (section_t){s + start, i - start, -1};
    if (k >= 0) {
      secs[n++] = (section_t){s + i, mlen, k};
      i += mlen - 1;
      start = i + 1;
    }
  }
  /* lstrip and rstrip trim white space off the neighbouring sections */
  for (size_t i = 0; i < n; i++) {
    if (secs[i].added < 0) continue;
    const pr_text__added_t *a = &t->added[secs[i].added];
    if (a->lstrip && i > 0) secs[i - 1].len = trim_end(secs[i - 1].p, secs[i - 1].len);
    if (a->rstrip && i + 1 < n) {
      size_t cut = trim_start(secs[i + 1].p, secs[i + 1].len);
      secs[i + 1].p += cut;
      secs[i + 1].len -= cut;
    }
  }
  for (size_t i = 0; !st && i < n; i++) {
    if (!secs[i].len) continue;
    /* an added token trimmed by its neighbour's strip is text now */
    if (secs[i].added >= 0 && secs[i].len == t->added[secs[i].added].len)
      st = push_id(t, t->added[secs[i].added].id);
    else
      st = encode_section(t, secs[i].p, secs[i].len);
  }
  free(secs);
  return st;
}

pr_status_t pr_tokenizer_encode(pr_tokenizer_t *t, const char *text, size_t len, unsigned flags,
                                int32_t *ids, size_t cap, size_t *n_ids, char *err,
                                size_t err_len) {
  *n_ids = 0;
  if (err && err_len) err[0] = 0;
  if (len > PR_TOKENIZER_MAX_TEXT) {
    if (err && err_len)
      snprintf(err, err_len, "the text is over %u MiB", PR_TOKENIZER_MAX_TEXT >> 20);
    return PR_ERR_TOO_LARGE;
  }
  char *clean = NULL;
  if (!pr__utf8_valid(text, len)) {
    size_t n = pr_text__utf8_sanitize(text, len, NULL);
    if (!(clean = malloc(n ? n : 1))) return PR_ERR_NOMEM;
    pr_text__utf8_sanitize(text, len, clean);
    text = clean;
    len = n;
  }
  t->out_n = 0;
  pr_status_t st = PR_OK;
  if (t->has_template) {
    bool special = flags & PR_TOKENIZER_ADD_SPECIAL;
    for (int k = 0; !st && k < t->n_post; k++) {
      if (t->post[k].id < 0)
        st = encode_text(t, text, len);
      else if (special)
        st = push_id(t, t->post[k].id);
    }
  } else {
    st = encode_text(t, text, len);
  }
  free(clean);
  if (st) {
    if (err && err_len)
      snprintf(err, err_len, "%s",
               st == PR_ERR_TOO_LARGE ? "the pre-tokenizer's regex ran past its match limit"
               : st == PR_ERR_NOMEM   ? "out of memory"
                                      : "the pre-tokenizer's regex failed");
    return st;
  }
  *n_ids = t->out_n;
  size_t k = t->out_n < cap ? t->out_n : cap;
  if (k) memcpy(ids, t->out, k * sizeof *ids);
  if (t->out_n > cap) {
    if (err && err_len) snprintf(err, err_len, "%zu ids do not fit in %zu", t->out_n, cap);
    return PR_ERR_TOO_LARGE;
  }
  return PR_OK;
}
