/* Reading a tokenizer folder: tokenizer.json's components and the few keys
 * of tokenizer_config.json the reference reads, checked and turned into a
 * pr_tokenizer_t (tokenizer.h).
 *
 * Notes on the design:
 * - What this version implements is a list, and everything else is refused
 *   by name (PR_ERR_UNSUPPORTED): a tokenizer either encodes as the
 *   reference does or does not load. The list (docs/text.md): model BPE
 *   (no dropout, byte fallback or subword affixes); normalizer none or NFC;
 *   pre-tokenizers ByteLevel and Split (Isolated; Removed inverted), alone
 *   or in a Sequence; post-processors ByteLevel and TemplateProcessing (single
 *   texts), alone or in a Sequence; decoder ByteLevel or none.
 * - Hostile files: the file size is bounded (PR_TOKENIZER_MAX_FILE),
 *   jansson bounds the nesting (JSON_PARSER_MAX_DEPTH), ids are bounded
 *   (PR_TOKENIZER_MAX_ID) so the id tables are too, Sequences nest at most
 *   MAX_NEST deep, an added token is at most MAX_ADDED_LEN bytes (the split
 *   costs that per byte of text at worst), and a merge naming a token the vocabulary lacks is an
 *   error, as in Hugging Face's own loader. Strings from the files reach
 *   messages only through quote(), cut and ASCII-only. */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

#define MAX_NEST 4         /* Sequence within Sequence */
#define MAX_ADDED_LEN 1024 /* bytes of an added token */

typedef struct {
  pr_tokenizer_t *t;
  char *err;
  size_t err_len;
} load_t;

static pr_status_t fail(load_t *l, pr_status_t st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (l->err && l->err_len) vsnprintf(l->err, l->err_len, fmt, ap);
  va_end(ap);
  return st;
}

/* s cut to 40 bytes, printable ASCII only, for a message. */
static const char *quote(const char *s, size_t len, char out[48]) {
  size_t n = 0;
  for (size_t i = 0; i < len && n < 40; i++) out[n++] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
  if (len > 40) {
    memcpy(out + n, "...", 3);
    n += 3;
  }
  out[n] = 0;
  return out;
}

static const char *type_of(json_t *component) {
  const char *type = json_string_value(json_object_get(component, "type"));
  return type ? type : "";
}

static bool flag(json_t *o, const char *key, bool dflt) {
  json_t *v = json_object_get(o, key);
  return json_is_boolean(v) ? json_is_true(v) : dflt;
}

/* Appends s to the string pool (sized once by load_vocab: it never moves,
 * the maps point into it); its offset in *off. */
static pr_status_t pool_add(pr_tokenizer_t *t, const char *s, size_t len, uint32_t *off) {
  if (len > UINT32_MAX / 2 || t->pool_len + len > UINT32_MAX / 2) return PR_ERR_TOO_LARGE;
  if (t->pool_len + len > t->pool_cap) return PR_ERR_INTERNAL; /* sized in load_vocab */
  memcpy(t->pool + t->pool_len, s, len);
  *off = (uint32_t)t->pool_len;
  t->pool_len += len;
  return PR_OK;
}

static pr_status_t read_json(load_t *l, const char *dir, const char *name, bool optional,
                             json_t **out) {
  *out = NULL;
  char path[PATH_MAX];
  if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path)
    return fail(l, PR_ERR_INVALID, "the folder's path is too long");
  void *data;
  size_t len;
  if (pr__read_file(path, &data, &len, PR_TOKENIZER_MAX_FILE)) {
    int e = errno;
    if (e == ENOENT && optional) return PR_OK;
    if (e == EFBIG)
      return fail(l, PR_ERR_TOO_LARGE, "%s: larger than %u MiB", name, PR_TOKENIZER_MAX_FILE >> 20);
    return fail(l, e == ENOENT ? PR_ERR_NOT_FOUND : PR_ERR_IO, "%s: %s", name, pr__file_error(e));
  }
  json_error_t je;
  /* tokenizer_config.json's numbers (model_max_length: 1e30 in some) are
   * not read here, and may be larger than jansson's integers */
  *out = json_loadb(data, len, JSON_ALLOW_NUL | (optional ? JSON_DECODE_INT_AS_REAL : 0), &je);
  free(data);
  if (!*out) {
    char q[48];
    return fail(l, PR_ERR_INVALID, "%s: line %d: %s", name, je.line,
                quote(je.text, strlen(je.text), q));
  }
  if (!json_is_object(*out)) {
    json_decref(*out);
    *out = NULL;
    return fail(l, PR_ERR_INVALID, "%s: not a JSON object", name);
  }
  return PR_OK;
}

/* ---- the model ---- */

static pr_status_t load_vocab(load_t *l, json_t *model, json_t *added_tokens) {
  pr_tokenizer_t *t = l->t;
  json_t *vocab = json_object_get(model, "vocab");
  if (!json_is_object(vocab)) return fail(l, PR_ERR_INVALID, "model.vocab is not an object");
  /* the ids' range first: the tables are sized by it */
  json_int_t max_id = -1;
  const char *key;
  json_t *v;
  json_object_foreach(vocab, key, v) {
    json_int_t id = json_integer_value(v);
    if (!json_is_integer(v) || id < 0 || id > PR_TOKENIZER_MAX_ID)
      return fail(l, json_is_integer(v) && id > 0 ? PR_ERR_TOO_LARGE : PR_ERR_INVALID,
                  "model.vocab: an id that is not an integer in 0..%d", PR_TOKENIZER_MAX_ID);
    if (id > max_id) max_id = id;
  }
  size_t i;
  json_array_foreach(added_tokens, i, v) {
    json_int_t id = json_integer_value(json_object_get(v, "id"));
    if (!json_is_integer(json_object_get(v, "id")) || id < 0 || id > PR_TOKENIZER_MAX_ID)
      return fail(l, PR_ERR_INVALID, "added_tokens[%zu]: an id that is not an integer in 0..%d", i,
                  PR_TOKENIZER_MAX_ID);
    if (id > max_id) max_id = id;
  }
  t->n_ids = (size_t)(max_id + 1);
  t->tok_off = calloc(t->n_ids ? t->n_ids : 1, sizeof *t->tok_off);
  t->tok_len = malloc((t->n_ids ? t->n_ids : 1) * sizeof *t->tok_len);
  t->id_flags = calloc(t->n_ids ? t->n_ids : 1, 1);
  if (!t->tok_off || !t->tok_len || !t->id_flags) return PR_ERR_NOMEM;
  memset(t->tok_len, 0xff, t->n_ids * sizeof *t->tok_len);
  /* the pool's size once, so it never moves: the maps point into it */
  size_t bytes = 1;
  json_object_foreach(vocab, key, v) bytes +=
      json_object_iter_key_len(json_object_key_to_iter(key));
  json_array_foreach(added_tokens, i, v) bytes += json_string_length(json_object_get(v, "content"));
  if (bytes > UINT32_MAX / 2) return fail(l, PR_ERR_TOO_LARGE, "the vocabulary is too large");
  t->pool = malloc(bytes);
  if (!t->pool) return PR_ERR_NOMEM;
  t->pool_cap = bytes;
  pr_status_t st = pr_text__strmap_init(&t->vocab, json_object_size(vocab) + i + 64);
  if (st) return st;
  json_object_foreach(vocab, key, v) {
    size_t id = (size_t)json_integer_value(v),
           len = json_object_iter_key_len(json_object_key_to_iter(key));
    if (t->tok_len[id] != UINT32_MAX) {
      char q[48];
      return fail(l, PR_ERR_INVALID, "model.vocab: id %zu is given to two tokens (\"%s\")", id,
                  quote(key, len, q));
    }
    if ((st = pool_add(t, key, len, &t->tok_off[id]))) return st;
    t->tok_len[id] = (uint32_t)len;
    st = pr_text__strmap_put(&t->vocab, t->pool + t->tok_off[id], (uint32_t)len, (int32_t)id);
    if (st) return st;
  }
  return PR_OK;
}

static pr_status_t load_added(load_t *l, json_t *added_tokens) {
  pr_tokenizer_t *t = l->t;
  size_t n = json_array_size(added_tokens), i;
  t->added = calloc(n ? n : 1, sizeof *t->added);
  if (!t->added) return PR_ERR_NOMEM;
  json_t *a;
  json_array_foreach(added_tokens, i, a) {
    json_t *content = json_object_get(a, "content");
    if (!json_is_string(content))
      return fail(l, PR_ERR_INVALID, "added_tokens[%zu]: no content string", i);
    /* the split walks an added token's bytes at every position of the
     * text: their length bounds its work per byte */
    if (json_string_length(content) > MAX_ADDED_LEN)
      return fail(l, PR_ERR_TOO_LARGE, "added_tokens[%zu] is longer than %d bytes", i,
                  MAX_ADDED_LEN);
    pr_text__added_t *at = &t->added[t->n_added++];
    at->id = (int32_t)json_integer_value(json_object_get(a, "id"));
    at->len = (uint32_t)json_string_length(content);
    at->lstrip = flag(a, "lstrip", false);
    at->rstrip = flag(a, "rstrip", false);
    pr_status_t st = pool_add(t, json_string_value(content), at->len, &at->off);
    if (!st) st = pr_text__strmap_put(&t->vocab, t->pool + at->off, at->len, at->id);
    if (st) return st;
    /* the id decodes to the added token's content (the reference's vocab[id]) */
    t->tok_off[at->id] = at->off;
    t->tok_len[at->id] = at->len;
    t->id_flags[at->id] |= PR_TEXT__ID_ADDED;
  }
  return PR_OK;
}

/* One merge: "left right" or ["left", "right"]. */
static pr_status_t merge_parts(load_t *l, json_t *m, size_t i, const char **a, size_t *alen,
                               const char **b, size_t *blen) {
  if (json_is_string(m)) {
    const char *s = json_string_value(m), *sp = memchr(s, ' ', json_string_length(m));
    size_t len = json_string_length(m);
    if (!sp || memchr(sp + 1, ' ', len - (size_t)(sp + 1 - s)))
      return fail(l, PR_ERR_INVALID, "model.merges[%zu] is not two tokens", i);
    *a = s;
    *alen = (size_t)(sp - s);
    *b = sp + 1;
    *blen = len - *alen - 1;
    return PR_OK;
  }
  if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
      json_is_string(json_array_get(m, 1))) {
    *a = json_string_value(json_array_get(m, 0));
    *alen = json_string_length(json_array_get(m, 0));
    *b = json_string_value(json_array_get(m, 1));
    *blen = json_string_length(json_array_get(m, 1));
    return PR_OK;
  }
  return fail(l, PR_ERR_INVALID, "model.merges[%zu] is not two tokens", i);
}

static pr_status_t load_merges(load_t *l, json_t *model) {
  pr_tokenizer_t *t = l->t;
  json_t *merges = json_object_get(model, "merges");
  if (!json_is_array(merges)) return fail(l, PR_ERR_INVALID, "model.merges is not an array");
  size_t n = json_array_size(merges), i;
  if (n > UINT32_MAX / 2) return fail(l, PR_ERR_TOO_LARGE, "model.merges: too many");
  pr_status_t st = pr_text__pairmap_init(&t->merges, n);
  if (st) return st;
  char *joined = NULL;
  size_t joined_cap = 0;
  json_t *m;
  json_array_foreach(merges, i, m) {
    const char *a = NULL, *b = NULL;
    size_t alen = 0, blen = 0;
    if ((st = merge_parts(l, m, i, &a, &alen, &b, &blen))) break;
    if (alen + blen > joined_cap) {
      joined_cap = (alen + blen) * 2;
      char *p = realloc(joined, joined_cap);
      if (!p) {
        st = PR_ERR_NOMEM;
        break;
      }
      joined = p;
    }
    memcpy(joined, a, alen);
    memcpy(joined + alen, b, blen);
    int32_t left = pr_text__strmap_get(&t->vocab, a, alen);
    int32_t right = pr_text__strmap_get(&t->vocab, b, blen);
    int32_t merged = pr_text__strmap_get(&t->vocab, joined, alen + blen);
    if (left < 0 || right < 0 || merged < 0) {
      char q[48];
      const char *which = left < 0 ? a : right < 0 ? b : joined;
      size_t wlen = left < 0 ? alen : right < 0 ? blen : alen + blen;
      st = fail(l, PR_ERR_INVALID, "model.merges[%zu] names \"%s\", which is not in the vocabulary",
                i, quote(which, wlen, q));
      break;
    }
    if ((st = pr_text__pairmap_put(&t->merges, left, right, (uint32_t)i, merged))) break;
  }
  free(joined);
  return st;
}

static pr_status_t load_model(load_t *l, json_t *root) {
  pr_tokenizer_t *t = l->t;
  json_t *model = json_object_get(root, "model");
  if (!json_is_object(model)) return fail(l, PR_ERR_INVALID, "tokenizer.json has no model");
  const char *type = type_of(model);
  if (!*type && json_object_get(model, "merges")) type = "BPE"; /* older files */
  if (strcmp(type, "BPE")) {
    char q[48];
    return fail(l, PR_ERR_UNSUPPORTED,
                "model type \"%s\" is not implemented yet (BPE is; docs/text.md)",
                quote(type, strlen(type), q));
  }
  json_t *dropout = json_object_get(model, "dropout");
  if (dropout && !json_is_null(dropout) && json_number_value(dropout) != 0)
    return fail(l, PR_ERR_UNSUPPORTED, "BPE dropout is not implemented");
  if (flag(model, "byte_fallback", false))
    return fail(l, PR_ERR_UNSUPPORTED,
                "BPE byte_fallback (SentencePiece-style BPE) is not implemented yet");
  const char *affix[] = {"continuing_subword_prefix", "end_of_word_suffix"};
  for (int k = 0; k < 2; k++) {
    json_t *v = json_object_get(model, affix[k]);
    if (v && !json_is_null(v) && !(json_is_string(v) && !json_string_length(v)))
      return fail(l, PR_ERR_UNSUPPORTED, "BPE with a %s is not implemented yet", affix[k]);
  }
  t->ignore_merges = flag(model, "ignore_merges", false);
  t->fuse_unk = flag(model, "fuse_unk", false);

  json_t *added = json_object_get(root, "added_tokens");
  json_t *none = json_array();
  if (!none) return PR_ERR_NOMEM;
  if (!added || json_is_null(added)) added = none;
  pr_status_t st =
      json_is_array(added) ? PR_OK : fail(l, PR_ERR_INVALID, "added_tokens is not an array");
  if (!st) st = load_vocab(l, model, added);
  if (!st) st = load_added(l, added);
  json_decref(none);
  if (!st) st = load_merges(l, model);
  if (st) return st;

  json_t *unk = json_object_get(model, "unk_token");
  t->unk_id = json_is_string(unk)
                  ? pr_text__strmap_get(&t->vocab, json_string_value(unk), json_string_length(unk))
                  : -1;
  for (uint32_t cp = 0; cp < 512; cp++) {
    char u[4];
    t->cp_id[cp] = pr_text__strmap_get(&t->vocab, u, pr_text__utf8_put(cp, u));
  }
  return PR_OK;
}

/* ---- the pipeline's other components ---- */

static pr_status_t load_normalizer(load_t *l, json_t *n) {
  if (!n || json_is_null(n)) return PR_OK;
  const char *type = type_of(n);
  if (!strcmp(type, "NFC")) {
    l->t->norm = PR_TEXT__NORM_NFC;
    return PR_OK;
  }
  char q[48];
  return fail(l, PR_ERR_UNSUPPORTED, "normalizer \"%s\" is not implemented yet (NFC is)",
              quote(type, strlen(type), q));
}

static pr_status_t add_pre(load_t *l, json_t *p, int depth) {
  pr_tokenizer_t *t = l->t;
  const char *type = type_of(p);
  char q[48];
  if (!strcmp(type, "Sequence")) {
    json_t *list = json_object_get(p, "pretokenizers"), *item;
    if (depth >= MAX_NEST) return fail(l, PR_ERR_INVALID, "pre_tokenizer: Sequences nest too deep");
    if (!json_is_array(list))
      return fail(l, PR_ERR_INVALID, "pre_tokenizer: a Sequence without pretokenizers");
    size_t i;
    json_array_foreach(list, i, item) {
      pr_status_t st = add_pre(l, item, depth + 1);
      if (st) return st;
    }
    return PR_OK;
  }
  if (t->n_pre >= PR_TEXT__MAX_STEPS)
    return fail(l, PR_ERR_INVALID, "pre_tokenizer: more than %d steps", PR_TEXT__MAX_STEPS);
  pr_text__pre_t *step = &t->pre[t->n_pre];
  if (!strcmp(type, "ByteLevel")) {
    step->kind = PR_TEXT__PRE_BYTELEVEL;
    step->add_prefix_space = flag(p, "add_prefix_space", false);
    if (flag(p, "use_regex", true)) {
      pr_status_t st = pr_text__regex_compile(pr_text__gpt2_pattern, strlen(pr_text__gpt2_pattern),
                                              false, &step->re, l->err, l->err_len);
      if (st) return st;
    }
    t->n_pre++;
    return PR_OK;
  }
  if (!strcmp(type, "Split")) {
    /* Isolated keeps matches and what lies between them; Removed with
     * invert keeps the matches alone. The reference and Hugging Face's
     * tokenizers disagree on the other combinations (transformers.js
     * treats every inverted Split as Removed, every other behaviour as
     * Isolated): refused until a test settles them. */
    const char *behavior = json_string_value(json_object_get(p, "behavior"));
    bool invert = flag(p, "invert", false);
    if (behavior && !strcmp(behavior, "Isolated") && !invert) {
      step->kind = PR_TEXT__PRE_SPLIT;
    } else if (behavior && !strcmp(behavior, "Removed") && invert) {
      step->kind = PR_TEXT__PRE_MATCHES;
    } else {
      return fail(l, PR_ERR_UNSUPPORTED,
                  "pre_tokenizer Split with behavior \"%s\"%s is not implemented yet (Isolated, "
                  "and Removed inverted, are)",
                  behavior ? quote(behavior, strlen(behavior), q) : "", invert ? " inverted" : "");
    }
    json_t *pat = json_object_get(p, "pattern");
    json_t *re = json_object_get(pat, "Regex"), *str = json_object_get(pat, "String");
    json_t *s = json_is_string(re) ? re : str;
    if (!json_is_string(s))
      return fail(l, PR_ERR_INVALID, "pre_tokenizer Split: no Regex or String pattern");
    pr_status_t st = pr_text__regex_compile(json_string_value(s), json_string_length(s), s == str,
                                            &step->re, l->err, l->err_len);
    if (st) return st;
    t->n_pre++;
    return PR_OK;
  }
  return fail(l, PR_ERR_UNSUPPORTED,
              "pre_tokenizer \"%s\" is not implemented yet (ByteLevel, Split and Sequence are)",
              quote(type, strlen(type), q));
}

static pr_status_t load_template(load_t *l, json_t *p) {
  pr_tokenizer_t *t = l->t;
  if (t->has_template)
    return fail(l, PR_ERR_UNSUPPORTED, "post_processor: two TemplateProcessing steps");
  json_t *single = json_object_get(p, "single"), *item;
  if (!json_is_array(single))
    return fail(l, PR_ERR_INVALID, "post_processor TemplateProcessing: no single template");
  size_t i;
  json_array_foreach(single, i, item) {
    if (t->n_post >= PR_TEXT__MAX_STEPS)
      return fail(l, PR_ERR_INVALID, "post_processor: a template over %d items",
                  PR_TEXT__MAX_STEPS);
    json_t *special = json_object_get(item, "SpecialToken"),
           *seq = json_object_get(item, "Sequence");
    if (special) {
      json_t *id = json_object_get(special, "id");
      if (!json_is_string(id))
        return fail(l, PR_ERR_INVALID, "post_processor: a SpecialToken without an id");
      int32_t v = pr_text__strmap_get(&t->vocab, json_string_value(id), json_string_length(id));
      if (v < 0) {
        char q[48];
        return fail(l, PR_ERR_INVALID, "post_processor: the special token \"%s\" is not a token",
                    quote(json_string_value(id), json_string_length(id), q));
      }
      t->post[t->n_post++].id = v;
    } else if (seq) {
      const char *which = json_string_value(json_object_get(seq, "id"));
      if (!which || strcmp(which, "A"))
        return fail(l, PR_ERR_UNSUPPORTED,
                    "post_processor: a single template naming a sequence other than A");
      t->post[t->n_post++].id = -1;
    } else {
      return fail(l, PR_ERR_INVALID, "post_processor: a template item that is not understood");
    }
  }
  t->has_template = true;
  return PR_OK;
}

static pr_status_t load_post(load_t *l, json_t *p, int depth) {
  if (!p || json_is_null(p)) return PR_OK;
  const char *type = type_of(p);
  if (!strcmp(type, "ByteLevel")) return PR_OK; /* the ids as they are */
  if (!strcmp(type, "TemplateProcessing")) return load_template(l, p);
  if (!strcmp(type, "Sequence")) {
    json_t *list = json_object_get(p, "processors"), *item;
    if (depth >= MAX_NEST)
      return fail(l, PR_ERR_INVALID, "post_processor: Sequences nest too deep");
    if (!json_is_array(list))
      return fail(l, PR_ERR_INVALID, "post_processor: a Sequence without processors");
    size_t i;
    json_array_foreach(list, i, item) {
      pr_status_t st = load_post(l, item, depth + 1);
      if (st) return st;
    }
    return PR_OK;
  }
  char q[48];
  return fail(l, PR_ERR_UNSUPPORTED,
              "post_processor \"%s\" is not implemented yet (ByteLevel, TemplateProcessing and "
              "Sequence are)",
              quote(type, strlen(type), q));
}

static pr_status_t load_decoder(load_t *l, json_t *d) {
  if (!d || json_is_null(d)) return PR_OK;
  const char *type = type_of(d);
  if (!strcmp(type, "ByteLevel")) {
    l->t->decoder_bytelevel = true;
    return PR_OK;
  }
  char q[48];
  return fail(l, PR_ERR_UNSUPPORTED, "decoder \"%s\" is not implemented yet (ByteLevel is)",
              quote(type, strlen(type), q));
}

/* tokenizer_config.json: the keys the reference reads for encoding and
 * decoding, and the tokenizer classes whose behaviour differs from the
 * plain pipeline's (refused until implemented). */
static pr_status_t load_config(load_t *l, json_t *config, pr_text__strmap_t *special) {
  pr_tokenizer_t *t = l->t;
  t->cleanup = true;
  if (!config) return PR_OK;
  json_t *cleanup = json_object_get(config, "clean_up_tokenization_spaces");
  if (json_is_boolean(cleanup)) t->cleanup = json_is_true(cleanup);
  if (flag(config, "remove_space", false))
    return fail(l, PR_ERR_UNSUPPORTED, "tokenizer_config: remove_space is not implemented yet");
  if (flag(config, "do_lowercase_and_remove_accent", false))
    return fail(l, PR_ERR_UNSUPPORTED,
                "tokenizer_config: do_lowercase_and_remove_accent is not implemented yet");
  const char *cls = json_string_value(json_object_get(config, "tokenizer_class"));
  if (cls) {
    size_t n = strlen(cls);
    if (n >= 4 && !strcmp(cls + n - 4, "Fast")) n -= 4;
    static const char *const refused[] = {"WhisperTokenizer", "MarianTokenizer", "VitsTokenizer",
                                          "Wav2Vec2CTCTokenizer"};
    bool bad = n == strlen("LlamaTokenizer") && !strncmp(cls, "LlamaTokenizer", n) &&
               !flag(config, "legacy", true);
    for (size_t k = 0; k < sizeof refused / sizeof *refused; k++)
      bad |= n == strlen(refused[k]) && !strncmp(cls, refused[k], n);
    if (bad) {
      char q[48];
      return fail(l, PR_ERR_UNSUPPORTED,
                  "tokenizer_class \"%s\" changes the pipeline and is not implemented yet",
                  quote(cls, strlen(cls), q));
    }
  }
  json_t *extra = json_object_get(config, "additional_special_tokens"), *v;
  size_t i;
  json_array_foreach(extra, i, v) {
    if (!json_is_string(v)) continue; /* the reference compares strings only */
    pr_status_t st =
        pr_text__strmap_put(special, json_string_value(v), (uint32_t)json_string_length(v), 1);
    if (st) return st;
  }
  return PR_OK;
}

/* ---- added tokens: flags and trie ---- */

static int32_t trie_child(pr_tokenizer_t *t, int32_t node, unsigned char byte, bool make) {
  for (int32_t c = t->trie[node].first_child; c >= 0; c = t->trie[c].next_sibling)
    if (t->trie[c].byte == byte) return c;
  if (!make) return -1;
  int32_t c = (int32_t)t->n_trie++;
  t->trie[c] = (pr_text__trie_t){
      .first_child = -1, .next_sibling = t->trie[node].first_child, .added = -1, .byte = byte};
  t->trie[node].first_child = c;
  return c;
}

static pr_status_t build_added(pr_tokenizer_t *t, const pr_text__strmap_t *special_extra,
                               json_t *added_tokens) {
  size_t nodes = 1;
  for (size_t k = 0; k < t->n_added; k++) nodes += t->added[k].len;
  t->trie = malloc(nodes * sizeof *t->trie);
  if (!t->trie) return PR_ERR_NOMEM;
  t->trie[0] = (pr_text__trie_t){.first_child = -1, .next_sibling = -1, .added = -1};
  t->n_trie = 1;
  pr_text__strmap_t added_map, special_map;
  pr_status_t st = pr_text__strmap_init(&added_map, t->n_added);
  if (!st) st = pr_text__strmap_init(&special_map, t->n_added);
  for (size_t k = 0; !st && k < t->n_added; k++) {
    const pr_text__added_t *a = &t->added[k];
    const char *s = t->pool + a->off;
    if (!a->len) continue; /* the reference's splitter never matches "" */
    int32_t node = 0;
    for (uint32_t i = 0; i < a->len; i++) node = trie_child(t, node, (unsigned char)s[i], true);
    t->trie[node].added = (int32_t)k; /* a later duplicate wins, as in the reference's map */
    st = pr_text__strmap_put(&added_map, s, a->len, 1);
    if (!st && flag(json_array_get(added_tokens, k), "special", false))
      st = pr_text__strmap_put(&special_map, s, a->len, 1);
  }
  /* flags by string, as the reference compares token strings */
  for (size_t id = 0; !st && id < t->n_ids; id++) {
    size_t len;
    const char *s = pr_text__tok_str(t, (int32_t)id, &len);
    if (!s) continue;
    if (pr_text__strmap_get(&added_map, s, len) >= 0) t->id_flags[id] |= PR_TEXT__ID_ADDED;
    if (pr_text__strmap_get(&special_map, s, len) >= 0 ||
        pr_text__strmap_get(special_extra, s, len) >= 0)
      t->id_flags[id] |= PR_TEXT__ID_SPECIAL;
  }
  pr_text__strmap_free(&added_map);
  pr_text__strmap_free(&special_map);
  return st;
}

pr_status_t pr_tokenizer_load(const char *dir, pr_tokenizer_t **out, char *err, size_t err_len) {
  *out = NULL;
  if (err && err_len) err[0] = 0;
  pr_tokenizer_t *t = calloc(1, sizeof *t);
  if (!t) return PR_ERR_NOMEM;
  load_t l = {t, err, err_len};
  json_t *root = NULL, *config = NULL;
  pr_text__strmap_t special_extra = {0};
  pr_status_t st = read_json(&l, dir, "tokenizer.json", false, &root);
  if (!st) st = read_json(&l, dir, "tokenizer_config.json", true, &config);
  if (!st) st = pr_text__strmap_init(&special_extra, 16);
  if (!st) st = load_config(&l, config, &special_extra);
  if (!st) st = load_model(&l, root);
  if (!st) st = load_normalizer(&l, json_object_get(root, "normalizer"));
  json_t *pre = root ? json_object_get(root, "pre_tokenizer") : NULL;
  if (!st && pre && !json_is_null(pre)) st = add_pre(&l, pre, 0);
  if (!st) st = load_post(&l, json_object_get(root, "post_processor"), 0);
  if (!st) st = load_decoder(&l, json_object_get(root, "decoder"));
  if (!st) {
    json_t *added = json_object_get(root, "added_tokens");
    st = build_added(t, &special_extra, added);
  }
  pr_text__strmap_free(&special_extra);
  json_decref(root);
  json_decref(config);
  if (st) {
    if (st == PR_ERR_NOMEM && err && err_len && !err[0])
      snprintf(err, err_len, "out of memory loading the tokenizer");
    else if (st == PR_ERR_TOO_LARGE && err && err_len && !err[0])
      snprintf(err, err_len,
               "the vocabulary's or the merges' keys collide in packrat's hash tables far "
               "beyond chance (a crafted file?)");
    else if (err && err_len && !err[0])
      snprintf(err, err_len, "the tokenizer could not be loaded (status %d)", st);
    pr_tokenizer_destroy(t);
    return st;
  }
  *out = t;
  return PR_OK;
}
