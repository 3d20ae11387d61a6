/* Memory planning of a compiled session: every intermediate buffer gets an
 * offset in one arena, by liveness, so a run allocates nothing.
 *
 * Notes on the design:
 * - Views (Reshape...) and in-place outputs share their input's buffer: the
 *   output's alias_of names the root value that owns the bytes, and the
 *   root's live range grows to cover the alias.
 * - A conv with a sum post-op writes over its addend when nothing else reads
 *   the addend later (and the kernel does not also read it as a source).
 * - A Concat whose inputs are byte ranges of its output (slice_off: batch 1,
 *   channel blocks whole) gets them as views at their offsets when nothing
 *   reads them after it: their producers write in place, the Concat copies
 *   nothing. Its output is then placed when the first of them is made.
 * - TEMP roots are placed in node order, best fit in a free list sorted by
 *   offset, and freed after the node of their last use. Constants, inputs
 *   and graph outputs are not in the arena.
 */
#include "engine/memplan.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "engine/compile.h"

typedef struct {
  size_t off, len;
} block_t;

/* The arena while it is planned: free blocks sorted by offset, and its end. */
typedef struct {
  block_t *free;
  int n_free, cap_free;
  size_t top;
} arena_t;

int pr__memplan_root(const pr_compile_t *c, int v) {
  assert(v >= 0 && v < c->n_values);
  while (c->v[v].alias_of >= 0) v = c->v[v].alias_of;
  return v;
}

/* The value whose buffer node i's first output may share, or -1. */
static int alias_source(pr_compile_t *c, const pr_node_t *n, int i, const int *root_last) {
  int in0 = n->n_in ? n->in[0] : -1;
  int out0 = n->n_out ? n->out[0] : -1;
  if (n->post.sum) {
    int addend = n->in[n->n_in - 1];
    int r = pr__memplan_root(c, addend);
    bool also_read = false; /* the kernel must not write over its own source */
    for (int k = 0; k < n->n_in - 1; k++)
      also_read |= n->in[k] >= 0 && pr__memplan_root(c, n->in[k]) == r;
    if (c->v[r].kind == PR_VAL_TEMP && root_last[r] == i && c->v[out0].kind == PR_VAL_TEMP &&
        c->v[addend].nbytes == c->v[out0].nbytes && !also_read)
      return addend;
  } else if (in0 >= 0 && out0 >= 0 && c->v[out0].kind == PR_VAL_TEMP) {
    int r = pr__memplan_root(c, in0);
    if (n->op->view && !c->v[in0].opaque && !c->v[out0].opaque) return in0;
    if (n->op->inplace && c->v[r].kind == PR_VAL_TEMP && root_last[r] == i &&
        c->v[in0].nbytes == c->v[out0].nbytes && c->v[in0].opaque == c->v[out0].opaque)
      return in0;
  }
  return -1;
}

/* The inputs of Concat node i that can be views of its output (distinct
 * TEMP roots of the slice's size and 64-byte aligned offsets, read last by
 * it) become so. */
static void plan_concat_views(pr_compile_t *c, pr_node_t *n, int i, int *root_last) {
  int out = n->out[0];
  pr_value_t *o = &c->v[out];
  if (o->kind != PR_VAL_TEMP || o->alias_of >= 0 || root_last[out] < i) return;
  int viewed = 0;
  for (int k = 0; k < n->n_in; k++) {
    int in = n->in[k];
    if (in < 0) continue;
    pr_value_t *v = &c->v[in];
    size_t end = k + 1 < n->n_in ? n->slice_off[k + 1] : o->nbytes;
    bool twice = false;
    for (int j = 0; j < n->n_in; j++) twice |= j != k && n->in[j] == in;
    if (v->kind != PR_VAL_TEMP || v->alias_of >= 0 || root_last[in] != i || twice ||
        v->nbytes != end - n->slice_off[k] || n->slice_off[k] % PR_ALIGN)
      continue;
    v->alias_of = out;
    v->alias_off = n->slice_off[k];
    viewed++;
  }
  if (viewed == n->n_in) snprintf(n->impl, sizeof n->impl, "in place");
}

/* Views and in-place outputs share their input's buffer; root_last[r] grows
 * to the last use of every alias of r. */
static void plan_aliases(pr_compile_t *c, int *root_last) {
  for (int i = 0; i < c->n_nodes; i++) {
    pr_node_t *n = &c->nodes[i];
    if (n->slice_off && c->concat_views) plan_concat_views(c, n, i, root_last);
    int out0 = n->n_out ? n->out[0] : -1;
    int alias_src = alias_source(c, n, i, root_last);
    if (alias_src >= 0 && out0 >= 0 && c->v[out0].kind == PR_VAL_TEMP) {
      int r = pr__memplan_root(c, alias_src);
      c->v[out0].alias_of = r;
      if (c->v[out0].last_use > root_last[r]) root_last[r] = c->v[out0].last_use;
    }
  }
}

static size_t padded_len(size_t nbytes) {
  size_t len = (nbytes + PR_ALIGN - 1) / PR_ALIGN * PR_ALIGN;
  return len ? len : PR_ALIGN;
}

/* Offset of a new block of len bytes: the smallest free block that fits,
 * else the free block at the end grown into new space, else new space. */
static size_t arena_take(arena_t *a, size_t len) {
  int best = -1;
  for (int f = 0; f < a->n_free; f++)
    if (a->free[f].len >= len && (best < 0 || a->free[f].len < a->free[best].len)) best = f;
  if (best >= 0) {
    size_t off = a->free[best].off;
    a->free[best].off += len;
    a->free[best].len -= len;
    return off;
  }
  block_t *e = a->n_free ? &a->free[a->n_free - 1] : NULL;
  if (e && e->off + e->len == a->top) {
    size_t off = e->off;
    a->top = e->off + len;
    e->off = a->top;
    e->len = 0;
    return off;
  }
  size_t off = a->top;
  a->top += len;
  return off;
}

/* Returns [off, off + len) to the free list, sorted by offset, coalesced. */
static bool arena_give(arena_t *a, size_t off, size_t len) {
  if (a->n_free == a->cap_free) {
    int cap = a->cap_free ? a->cap_free * 2 : 32;
    block_t *nf = realloc(a->free, sizeof *nf * (size_t)cap);
    if (!nf) return false;
    a->free = nf;
    a->cap_free = cap;
  }
  int pos = a->n_free;
  while (pos > 0 && a->free[pos - 1].off > off) {
    a->free[pos] = a->free[pos - 1];
    pos--;
  }
  a->free[pos] = (block_t){off, len};
  a->n_free++;
  for (int f = 0; f + 1 < a->n_free;) {
    if (a->free[f].off + a->free[f].len == a->free[f + 1].off) {
      a->free[f].len += a->free[f + 1].len;
      memmove(&a->free[f + 1], &a->free[f + 2], sizeof *a->free * (size_t)(a->n_free - f - 2));
      a->n_free--;
    } else {
      f++;
    }
  }
  return true;
}

/* Frees the TEMP roots whose last use is node i. */
static bool free_dead_roots(pr_compile_t *c, arena_t *a, int *root_last, int i) {
  pr_node_t *n = &c->nodes[i];
  for (int k = 0; k < n->n_in + n->n_out; k++) {
    int val = k < n->n_in ? n->in[k] : n->out[k - n->n_in];
    if (val < 0) continue;
    int r = pr__memplan_root(c, val);
    pr_value_t *v = &c->v[r];
    if (v->kind != PR_VAL_TEMP || root_last[r] != i) continue;
    root_last[r] = -2; /* freed */
    if (!arena_give(a, v->offset, padded_len(v->nbytes))) return false;
  }
  return true;
}

/* Places the TEMP roots in node order: a root when its node makes it, or
 * when a node makes the first of its views that comes before it (a Concat's
 * inputs); placed[r] marks them. */
static pr_status_t place_values(pr_compile_t *c, int *root_last, size_t *top) {
  arena_t a = {0};
  bool *placed = calloc((size_t)c->n_values + 1, sizeof *placed);
  if (!placed) return PR_ERR_NOMEM;
  for (int i = 0; i < c->n_nodes; i++) {
    pr_node_t *n = &c->nodes[i];
    for (int k = 0; k < n->n_out; k++) {
      int o = n->out[k];
      if (o < 0) continue;
      int r = pr__memplan_root(c, o);
      pr_value_t *v = &c->v[r];
      if (v->kind != PR_VAL_TEMP || placed[r]) continue;
      placed[r] = true;
      v->offset = arena_take(&a, padded_len(v->nbytes));
      if (root_last[r] < 0) root_last[r] = i; /* unused output: free right away */
    }
    if (!free_dead_roots(c, &a, root_last, i)) {
      free(a.free), free(placed);
      return PR_ERR_NOMEM;
    }
  }
  free(a.free), free(placed);
  *top = a.top;
  return PR_OK;
}

pr_status_t pr__memplan(pr_compile_t *c, size_t *arena_bytes) {
  pr__compile_count_uses(c);
  int *root_last = malloc(sizeof(int) * ((size_t)c->n_values + 1));
  if (!root_last) return PR_ERR_NOMEM;
  for (int i = 0; i < c->n_values; i++) root_last[i] = c->v[i].last_use;
  plan_aliases(c, root_last);
  size_t top = 0;
  pr_status_t st = place_values(c, root_last, &top);
  free(root_last);
  if (st) return st;
  if (top > c->max_bytes)
    return pr__fail(c, NULL, PR_ERR_NOMEM,
                    "intermediate buffers need %zu bytes, over the limit of %zu", top,
                    c->max_bytes);
  *arena_bytes = top;
  return PR_OK;
}

void pr__memplan_bind(pr_compile_t *c, void *arena) {
  for (int i = 0; i < c->n_values; i++) {
    pr_value_t *v = &c->v[i];
    if (v->is_const)
      v->ptr = v->data;
    else if (v->kind == PR_VAL_TEMP && v->alias_of < 0)
      v->ptr = (char *)arena + v->offset;
  }
}

void pr__memplan_bind_aliases(pr_compile_t *c) {
  for (int i = 0; i < c->n_values; i++) {
    if (c->v[i].alias_of < 0) continue;
    size_t off = 0;
    int r = i;
    for (; c->v[r].alias_of >= 0; r = c->v[r].alias_of) off += c->v[r].alias_off;
    /* a root not bound yet (NULL) stays NULL: no arithmetic on it */
    c->v[i].ptr = c->v[r].ptr ? (char *)c->v[r].ptr + off : NULL;
  }
}
