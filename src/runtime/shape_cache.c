/* The per-instance session cache (shape_cache.h): one worker's sessions for
 * request shapes other than its prepared one. Owned and used by one worker
 * thread: no lock; only the shared counters are atomics. */
#include "runtime/shape_cache.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

#define KEY_DIMS (PR_WORKER_MAX_IO * (PR_MAX_RANK - 1))

typedef struct {
  bool used;
  int rows;
  int64_t key[KEY_DIMS]; /* each input's dims 1..rank-1, in order */
  int key_len;
  size_t bytes;
  uint64_t last_used;
  pr_worker_session_t z;
} entry_t;

struct pr_shape_cache {
  int max_sessions;
  size_t max_bytes, bytes;
  int count;
  uint64_t tick;
  pr_shape_cache_stats_t *stats;
  entry_t *entries; /* max_sessions slots */
};

pr_shape_cache_t *pr__shape_cache_create(int max_sessions, size_t max_bytes,
                                         pr_shape_cache_stats_t *stats) {
  if (max_sessions < 1 || max_bytes < 1) return NULL;
  pr_shape_cache_t *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  if (!(c->entries = calloc((size_t)max_sessions, sizeof *c->entries))) {
    free(c);
    return NULL;
  }
  c->max_sessions = max_sessions;
  c->max_bytes = max_bytes;
  c->stats = stats;
  return c;
}

/* The key of shapes (n inputs): their dims past axis 0; -1 when they do not
 * fit (rank above PR_MAX_RANK cannot happen: tensors hold at most it). */
static int make_key(const pr_tensor_t *shapes, int n, int64_t *key) {
  int len = 0;
  for (int i = 0; i < n; i++) {
    assert(shapes[i].rank >= 1 && shapes[i].rank <= PR_MAX_RANK);
    for (int d = 1; d < shapes[i].rank; d++) key[len++] = shapes[i].dims[d];
  }
  assert(len <= KEY_DIMS);
  return len;
}

static size_t entry_bytes(const pr_worker_t *w, const pr_worker_session_t *z) {
  size_t bytes = pr_engine_session_arena_bytes(z->session);
  for (int i = 0; z->in && i < w->n_in; i++)
    bytes += pr__worker_row_bytes(&z->in[i]) * (size_t)z->rows;
  return bytes;
}

static void evict(pr_shape_cache_t *c, pr_worker_t *w, entry_t *e) {
  assert(e->used && c->count > 0 && c->bytes >= e->bytes);
  pr__worker_session_free(w, &e->z);
  c->bytes -= e->bytes;
  c->count--;
  memset(e, 0, sizeof *e);
  if (c->stats) atomic_fetch_add(&c->stats->evictions, 1);
}

/* Evicts least recently used entries until one more entry (`need` bytes)
 * fits the bounds, or none is left. */
static void make_room(pr_shape_cache_t *c, pr_worker_t *w, size_t need) {
  while (c->count > 0 && (c->count >= c->max_sessions || c->bytes + need > c->max_bytes)) {
    entry_t *lru = NULL;
    for (int i = 0; i < c->max_sessions; i++) {
      entry_t *e = &c->entries[i];
      if (e->used && (!lru || e->last_used < lru->last_used)) lru = e;
    }
    if (!lru) return;
    evict(c, w, lru);
  }
}

static entry_t *find(pr_shape_cache_t *c, const int64_t *key, int key_len, int rows) {
  for (int i = 0; i < c->max_sessions; i++) {
    entry_t *e = &c->entries[i];
    if (e->used && e->rows == rows && e->key_len == key_len &&
        !memcmp(e->key, key, sizeof *key * (size_t)key_len))
      return e;
  }
  return NULL;
}

/* Compiles the session for key at rows and inserts it, evicting what the
 * bounds need; NULL with *st. */
static entry_t *insert(pr_shape_cache_t *c, pr_worker_t *w, const pr_tensor_t *shapes,
                       const int64_t *key, int key_len, int rows, double *compile_s,
                       pr_status_t *st) {
  pr_tensor_info_t info[PR_WORKER_MAX_IO];
  memset(info, 0, sizeof info);
  for (int i = 0; i < w->n_in; i++) {
    info[i].dtype = shapes[i].dtype;
    info[i].rank = shapes[i].rank;
    memcpy(info[i].dims, shapes[i].dims, sizeof info[i].dims);
  }
  double t0 = pr__now();
  pr_worker_session_t z;
  if ((*st = pr__worker_compile(w, info, rows, true, &z))) return NULL;
  *compile_s = pr__now() - t0;
  if (c->stats) atomic_fetch_add(&c->stats->compile_ns, (uint64_t)(*compile_s * 1e9));
  size_t bytes = entry_bytes(w, &z);
  make_room(c, w, bytes);
  entry_t *e = NULL;
  for (int i = 0; i < c->max_sessions && !e; i++)
    if (!c->entries[i].used) e = &c->entries[i];
  assert(e); /* make_room left a free slot */
  *e = (entry_t){.used = true, .rows = rows, .key_len = key_len, .bytes = bytes, .z = z};
  memcpy(e->key, key, sizeof *key * (size_t)key_len);
  e->last_used = ++c->tick;
  c->count++;
  c->bytes += bytes;
  return e;
}

pr_worker_session_t *pr__shape_cache_get(pr_shape_cache_t *c, pr_worker_t *w,
                                         const pr_tensor_t *shapes, int rows, double *compile_s,
                                         pr_status_t *st) {
  int64_t key[KEY_DIMS];
  int key_len = make_key(shapes, w->n_in, key);
  *compile_s = 0;
  *st = PR_OK;
  entry_t *e = find(c, key, key_len, rows);
  if (e) {
    e->last_used = ++c->tick;
    if (c->stats) atomic_fetch_add(&c->stats->hits, 1);
    return &e->z;
  }
  if (c->stats) atomic_fetch_add(&c->stats->misses, 1);
  e = insert(c, w, shapes, key, key_len, rows, compile_s, st);
  return e ? &e->z : NULL;
}

pr_status_t pr__shape_cache_warm(pr_shape_cache_t *c, pr_worker_t *w, const pr_tensor_t *shapes,
                                 int rows) {
  int64_t key[KEY_DIMS];
  int key_len = make_key(shapes, w->n_in, key);
  pr_status_t st = PR_OK;
  double compile_s;
  if (!find(c, key, key_len, rows)) insert(c, w, shapes, key, key_len, rows, &compile_s, &st);
  return st;
}

int pr__shape_cache_count(const pr_shape_cache_t *c) {
  return c->count;
}

size_t pr__shape_cache_bytes(const pr_shape_cache_t *c) {
  return c->bytes;
}

void pr__shape_cache_destroy(pr_shape_cache_t *c, pr_worker_t *w) {
  if (!c) return;
  for (int i = 0; i < c->max_sessions; i++)
    if (c->entries[i].used) pr__worker_session_free(w, &c->entries[i].z);
  free(c->entries);
  free(c);
}
