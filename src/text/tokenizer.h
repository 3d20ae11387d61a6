/* A loaded tokenizer: what load.c reads from tokenizer.json and
 * tokenizer_config.json, and what encode.c and decode.c run. Internal to
 * src/text/. */
#ifndef PR_TEXT_TOKENIZER_H
#define PR_TEXT_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "packrat/text.h"
#include "text/bpe.h"
#include "text/maps.h"
#include "text/regex.h"

#define PR_TEXT__MAX_STEPS 16       /* pre-tokenizers, post-processor items */
#define PR_TEXT__CACHE_WORDS 10000  /* the word cache's entries, as the reference's */
#define PR_TEXT__CACHE_MAX_WORD 255 /* bytes of the longest word cached */

typedef enum { PR_TEXT__NORM_NONE, PR_TEXT__NORM_NFC } pr_text__norm_t;

typedef enum {
  PR_TEXT__PRE_SPLIT,     /* Split, Isolated: the matches and the text between them */
  PR_TEXT__PRE_MATCHES,   /* Split, Removed and inverted: the matches alone */
  PR_TEXT__PRE_BYTELEVEL, /* GPT-2's regex (matches alone) where use_regex, then
                           * each byte to its character of the byte alphabet */
} pr_text__pre_kind_t;

/* One pre-tokenizer step. */
typedef struct {
  pr_text__pre_kind_t kind;
  pr_text__regex_t *re; /* NULL: ByteLevel without its regex */
  bool add_prefix_space;
} pr_text__pre_t;

/* One item of the post-processor's template for a single text: a special
 * token's id, or the text's ids (id -1). */
typedef struct {
  int32_t id;
} pr_text__post_item_t;

typedef struct {
  uint32_t off, len; /* in the string pool */
  int32_t id;
  bool lstrip, rstrip;
} pr_text__added_t;

/* A node of the added tokens' trie (bytes): children as a sibling list. */
typedef struct {
  int32_t first_child, next_sibling;
  int32_t added; /* index in added[], or -1 */
  unsigned char byte;
} pr_text__trie_t;

/* The bounded word cache: word (bytes) -> its ids. Cleared when full. */
typedef struct {
  uint64_t *hash; /* 0: empty slot */
  uint32_t *key_off, *key_len, *ids_off, *ids_n;
  char *keys;
  int32_t *ids;
  size_t cap, n, keys_len, keys_cap, ids_len, ids_cap;
} pr_text__cache_t;

struct pr_tokenizer {
  /* strings: token text, added tokens' content */
  char *pool;
  size_t pool_len, pool_cap;

  /* vocabulary: id -> string (tok_len UINT32_MAX: no token), string -> id
   * (the model's, then the added tokens over it) */
  size_t n_ids;
  uint32_t *tok_off, *tok_len;
  uint8_t *id_flags; /* ID_* below */
  pr_text__strmap_t vocab;

  /* the BPE model */
  pr_text__pairmap_t merges;
  bool ignore_merges, fuse_unk;
  int32_t unk_id;
  int32_t cp_id[512]; /* vocab id of each code point below 512 (-1: none) */

  /* added tokens, split out of the text before anything else */
  pr_text__added_t *added;
  size_t n_added;
  pr_text__trie_t *trie;
  size_t n_trie;

  pr_text__norm_t norm;
  pr_text__pre_t pre[PR_TEXT__MAX_STEPS];
  int n_pre;
  pr_text__post_item_t post[PR_TEXT__MAX_STEPS];
  int n_post; /* 0 with has_template false: the ids as they are */
  bool has_template;
  bool decoder_bytelevel; /* else no decoder: tokens joined by spaces */
  bool cleanup;           /* clean_up_tokenization_spaces */

  /* encoding's working memory (kept between calls) and cache */
  pr_text__bpe_scratch_t bpe;
  pr_text__cache_t cache;
  int32_t *out, *syms;
  size_t out_n, out_cap, syms_cap;
};

/* id_flags */
enum {
  PR_TEXT__ID_ADDED = 1,   /* its string is an added token's content */
  PR_TEXT__ID_SPECIAL = 2, /* its string is a special token's */
};

/* The byte alphabet (GPT-2's bytes_to_unicode): the printable bytes of
 * Latin-1 stand for themselves, the other 68 bytes, in order, for U+0100
 * onwards, so that no token holds a space or a control character. */
static inline bool pr_text__byte_printable(unsigned b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}
static inline uint32_t pr_text__byte_cp(unsigned b) {
  if (pr_text__byte_printable(b)) return b;
  if (b <= 0x20) return 0x100 + b;
  if (b <= 0xA0) return 0x100 + 33 + (b - 0x7F);
  return 0x100 + 67; /* 0xAD */
}
/* The byte a code point of the alphabet stands for, or -1. */
static inline int pr_text__byte_of(uint32_t cp) {
  if (cp < 0x100) return pr_text__byte_printable(cp) ? (int)cp : -1;
  if (cp <= 0x100 + 32) return (int)(cp - 0x100);
  if (cp <= 0x100 + 66) return (int)(cp - 0x100 - 33 + 0x7F);
  return cp == 0x100 + 67 ? 0xAD : -1;
}

static inline const char *pr_text__tok_str(const pr_tokenizer_t *t, int32_t id, size_t *len) {
  if (id < 0 || (size_t)id >= t->n_ids || t->tok_len[id] == UINT32_MAX) return NULL;
  *len = t->tok_len[id];
  return t->pool + t->tok_off[id];
}

void pr_text__cache_free(pr_text__cache_t *c);
/* The ids of word w, or NULL when it is not cached. */
const int32_t *pr_text__cache_get(const pr_text__cache_t *c, const char *w, size_t len, size_t *n);
/* Keeps w's ids (words or results over PR_TEXT__CACHE_MAX_WORD are not kept). */
void pr_text__cache_put(pr_text__cache_t *c, const char *w, size_t len, const int32_t *ids,
                        size_t n);

#endif
