/* The tokenizer's lifetime and small accessors (loading is load.c,
 * encoding encode.c, decoding decode.c). */
#include <stdlib.h>

#include "text/tokenizer.h"

void pr_tokenizer_destroy(pr_tokenizer_t *t) {
  if (!t) return;
  for (int k = 0; k < t->n_pre; k++) pr_text__regex_free(t->pre[k].re);
  pr_text__strmap_free(&t->vocab);
  pr_text__pairmap_free(&t->merges);
  pr_text__bpe_scratch_free(&t->bpe);
  pr_text__cache_free(&t->cache);
  free(t->pool);
  free(t->tok_off);
  free(t->tok_len);
  free(t->id_flags);
  free(t->added);
  free(t->trie);
  free(t->out);
  free(t->syms);
  free(t);
}

size_t pr_tokenizer_vocab_size(const pr_tokenizer_t *t) {
  return t->n_ids;
}
