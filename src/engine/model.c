/* A loaded model: accessors, destruction, and the cache of weights
 * reordered into a kernel's layout that every session of the model shares.
 *
 * Threads: the model is read-only after load; cache_lock guards only the
 * weight cache, which sessions on any thread fill and release. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "engine/graph.h"

static void free_tensor(pr_tensor_t *t) {
  if (!t) return;
  pr_engine_tensor_free(t);
  free(t);
}

void pr_engine_model_destroy(pr_model_t *m) {
  if (!m) return;
  for (int i = 0; i < m->n_values; i++) {
    free(m->values[i].name);
    for (int k = 0; k < PR_MAX_RANK; k++) free(m->values[i].dim_names[k]);
    free_tensor(m->values[i].init);
  }
  free(m->values);
  for (int i = 0; i < m->n_nodes; i++) {
    pr_mnode_t *n = &m->nodes[i];
    free(n->name);
    free(n->op_type);
    free(n->in);
    free(n->out);
    for (int k = 0; k < n->n_attrs; k++) {
      free(n->attrs[k].name);
      free(n->attrs[k].s);
      free(n->attrs[k].ints);
      free(n->attrs[k].floats);
      free_tensor(n->attrs[k].t);
      pr_engine_model_destroy(n->attrs[k].g);
    }
    free(n->attrs);
  }
  free(m->nodes);
  free(m->inputs);
  free(m->outputs);
  free(m->outer_slot);
  for (int i = 0; i < m->n_cache; i++) pr__free(m->cache[i].buf);
  free(m->cache);
  pthread_mutex_destroy(&m->cache_lock);
  free(m);
}

void *pr__wcache_get(pr_model_t *m, const void *node, int variant, const dnnl_memory_desc_t *md) {
  void *buf = NULL;
  pthread_mutex_lock(&m->cache_lock);
  for (int i = 0; i < m->n_cache && !buf; i++) {
    pr_wcache_entry_t *e = &m->cache[i];
    if (e->node == node && e->variant == variant && dnnl_memory_desc_equal(&e->md, md)) {
      e->refs++;
      buf = e->buf;
    }
  }
  pthread_mutex_unlock(&m->cache_lock);
  return buf;
}

void *pr__wcache_put(pr_model_t *m, const void *node, int variant, const dnnl_memory_desc_t *md,
                     void *buf) {
  void *have = pr__wcache_get(m, node, variant, md);
  if (have) {
    pr__free(buf);
    return have;
  }
  pthread_mutex_lock(&m->cache_lock);
  if (m->n_cache == m->cap_cache) {
    int cap = m->cap_cache ? m->cap_cache * 2 : 64;
    pr_wcache_entry_t *nc = realloc(m->cache, sizeof *nc * (size_t)cap);
    if (!nc) {
      pthread_mutex_unlock(&m->cache_lock);
      pr__free(buf);
      return NULL;
    }
    m->cache = nc;
    m->cap_cache = cap;
  }
  m->cache[m->n_cache++] = (pr_wcache_entry_t){node, variant, *md, buf, 1};
  pthread_mutex_unlock(&m->cache_lock);
  return buf;
}

size_t pr_engine_model_shared_weight_bytes(pr_model_t *m) {
  size_t total = 0;
  pthread_mutex_lock(&m->cache_lock);
  for (int i = 0; i < m->n_cache; i++) total += dnnl_memory_desc_get_size(&m->cache[i].md);
  pthread_mutex_unlock(&m->cache_lock);
  return total;
}

void pr__wcache_release(pr_model_t *m, void *buf) {
  if (!buf) return;
  pthread_mutex_lock(&m->cache_lock);
  for (int i = 0; i < m->n_cache; i++) {
    if (m->cache[i].buf != buf) continue;
    assert(m->cache[i].refs > 0);
    if (--m->cache[i].refs == 0) {
      pr__free(buf);
      m->cache[i] = m->cache[--m->n_cache];
    }
    break;
  }
  pthread_mutex_unlock(&m->cache_lock);
}

int pr_engine_model_num_inputs(const pr_model_t *m) {
  return m ? m->n_inputs : 0;
}
int pr_engine_model_num_outputs(const pr_model_t *m) {
  return m ? m->n_outputs : 0;
}
const char *pr_engine_model_sha256(const pr_model_t *m) {
  return m ? m->sha256 : "";
}

static void fill_info(const pr_mvalue_t *v, pr_tensor_info_t *info) {
  memset(info, 0, sizeof *info);
  info->name = v->name;
  info->dtype = v->dtype;
  info->rank = v->rank;
  for (int k = 0; k < v->rank && k < PR_MAX_RANK; k++) {
    info->dims[k] = v->dims[k];
    info->dim_names[k] = v->dim_names[k];
  }
}

pr_status_t pr_engine_model_input(const pr_model_t *m, int i, pr_tensor_info_t *info) {
  if (!m || i < 0 || i >= m->n_inputs || !info) return PR_ERR_INVALID;
  fill_info(&m->values[m->inputs[i]], info);
  return PR_OK;
}

pr_status_t pr_engine_model_output(const pr_model_t *m, int i, pr_tensor_info_t *info) {
  if (!m || i < 0 || i >= m->n_outputs || !info) return PR_ERR_INVALID;
  fill_info(&m->values[m->outputs[i]], info);
  return PR_OK;
}
