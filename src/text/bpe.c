/* The BPE merge loop. See bpe.h.
 *
 * Notes on the design:
 * - The reference merges, again and again, the adjacent pair whose merge
 *   has the lowest rank, the leftmost such pair first (its priority queue
 *   scores a pair rank + position / length). That order is a key here:
 *   rank << 32 | position of the pair's left symbol, compared as one
 *   integer, so ties are exact at any word length.
 * - Symbols live at the index of their first unit and are linked (next,
 *   prev) as they merge; a merged symbol keeps its left part's index. Each
 *   live symbol has at most one entry in an indexed binary heap (hpos: its
 *   slot): the merge of itself with its right neighbour. A merge updates
 *   three entries (the left's, the right's removed, the one before), each in
 *   O(log n): n log n for the word, and n entries of memory, never the
 *   quadratic rescans of a naive loop (a 10 MB word without a space is one
 *   word).
 * - Invariant: hpos[i] != NONE exactly when i is live, has a right
 *   neighbour, and that pair merges; heap[hpos[i]] & 0xffffffff == i. */
#include "text/bpe.h"

#include <assert.h>
#include <stdlib.h>

#define NONE UINT32_MAX

void pr_text__bpe_scratch_free(pr_text__bpe_scratch_t *s) {
  free(s->next);
  free(s->prev);
  free(s->hpos);
  free(s->merged);
  free(s->heap);
  *s = (pr_text__bpe_scratch_t){0};
}

static pr_status_t reserve(pr_text__bpe_scratch_t *s, size_t n) {
  if (n <= s->cap) return PR_OK;
  size_t cap = s->cap ? s->cap : 64;
  while (cap < n) cap *= 2;
  pr_text__bpe_scratch_free(s);
  s->next = malloc(cap * sizeof *s->next);
  s->prev = malloc(cap * sizeof *s->prev);
  s->hpos = malloc(cap * sizeof *s->hpos);
  s->merged = malloc(cap * sizeof *s->merged);
  s->heap = malloc(cap * sizeof *s->heap);
  if (!s->next || !s->prev || !s->hpos || !s->merged || !s->heap) {
    pr_text__bpe_scratch_free(s);
    return PR_ERR_NOMEM;
  }
  s->cap = cap;
  return PR_OK;
}

static inline void heap_place(pr_text__bpe_scratch_t *s, size_t k, uint64_t key) {
  s->heap[k] = key;
  s->hpos[(uint32_t)key] = (uint32_t)k;
}

static void sift_up(pr_text__bpe_scratch_t *s, size_t k) {
  uint64_t key = s->heap[k];
  while (k > 0) {
    size_t parent = (k - 1) / 2;
    if (s->heap[parent] <= key) break;
    heap_place(s, k, s->heap[parent]);
    k = parent;
  }
  heap_place(s, k, key);
}

static void sift_down(pr_text__bpe_scratch_t *s, size_t k) {
  uint64_t key = s->heap[k];
  for (;;) {
    size_t c = 2 * k + 1;
    if (c >= s->heap_n) break;
    if (c + 1 < s->heap_n && s->heap[c + 1] < s->heap[c]) c++;
    if (s->heap[c] >= key) break;
    heap_place(s, k, s->heap[c]);
    k = c;
  }
  heap_place(s, k, key);
}

static void heap_remove(pr_text__bpe_scratch_t *s, uint32_t pos) {
  uint32_t k = s->hpos[pos];
  if (k == NONE) return;
  s->hpos[pos] = NONE;
  uint64_t last = s->heap[--s->heap_n];
  if (k == s->heap_n) return;
  heap_place(s, k, last);
  sift_up(s, k);
  sift_down(s, s->hpos[(uint32_t)last]);
}

/* The entry of the pair (pos, its right neighbour): set, changed or gone. */
static void heap_update(const pr_text__pairmap_t *merges, pr_text__bpe_scratch_t *s,
                        const int32_t *syms, uint32_t pos, size_t n) {
  uint32_t right = s->next[pos], rank;
  int32_t merged;
  if (right >= n || pr_text__pairmap_get(merges, syms[pos], syms[right], &rank, &merged)) {
    heap_remove(s, pos);
    return;
  }
  s->merged[pos] = merged;
  uint64_t key = (uint64_t)rank << 32 | pos;
  uint32_t k = s->hpos[pos];
  if (k == NONE) {
    k = (uint32_t)s->heap_n++;
    heap_place(s, k, key);
    sift_up(s, k);
  } else {
    heap_place(s, k, key);
    sift_up(s, k);
    sift_down(s, s->hpos[pos]);
  }
}

pr_status_t pr_text__bpe_merge(const pr_text__pairmap_t *merges, pr_text__bpe_scratch_t *s,
                               int32_t *syms, size_t n, size_t *n_out) {
  *n_out = n;
  if (n < 2) return PR_OK;
  if (n >= NONE) return PR_ERR_TOO_LARGE;
  pr_status_t st = reserve(s, n);
  if (st) return st;
  s->heap_n = 0;
  for (size_t i = 0; i < n; i++) {
    s->next[i] = (uint32_t)(i + 1);
    s->prev[i] = i ? (uint32_t)(i - 1) : NONE;
    s->hpos[i] = NONE;
  }
  for (size_t i = 0; i + 1 < n; i++) heap_update(merges, s, syms, (uint32_t)i, n);

  size_t live = n;
  while (s->heap_n) {
    uint32_t left = (uint32_t)s->heap[0];
    uint32_t right = s->next[left];
    assert(right < n);
    syms[left] = s->merged[left];
    heap_remove(s, right);
    s->next[left] = s->next[right];
    if (s->next[right] < n) s->prev[s->next[right]] = left;
    live--;
    heap_update(merges, s, syms, left, n);
    if (s->prev[left] != NONE) heap_update(merges, s, syms, s->prev[left], n);
  }

  size_t k = 0;
  for (uint32_t i = 0; i < n; i = s->next[i]) syms[k++] = syms[i];
  assert(k == live);
  *n_out = k;
  return PR_OK;
}
