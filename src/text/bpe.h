/* Byte-pair encoding's merge loop: a word's symbols (token ids) merged
 * pair by pair, lowest merge rank first and leftmost first among equal
 * ranks, in O(n log n) for a word of n symbols. */
#ifndef PR_TEXT_BPE_H
#define PR_TEXT_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "packrat/engine.h"
#include "text/maps.h"

/* Working memory, kept between words and grown to the longest one. */
typedef struct {
  uint32_t *next, *prev, *hpos;
  int32_t *merged;
  uint64_t *heap;
  size_t cap, heap_n;
} pr_text__bpe_scratch_t;

void pr_text__bpe_scratch_free(pr_text__bpe_scratch_t *s);

/* Merges syms[0..n) (ids; -1 is a symbol outside the vocabulary, which
 * merges with nothing) by the merges table, writing the result over syms
 * and its count to *n_out. PR_ERR_NOMEM, or PR_ERR_TOO_LARGE past 2^32 - 2
 * symbols. */
pr_status_t pr_text__bpe_merge(const pr_text__pairmap_t *merges, pr_text__bpe_scratch_t *s,
                               int32_t *syms, size_t n, size_t *n_out);

#endif
